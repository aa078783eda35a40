"""PageHeap: the random-walk page heap (Pham et al., "Dynamic Buffer Management
in Massively Parallel Systems: A Case on GPUs").

A pool of ``page_count`` pages of ``page_size`` bytes whose used bits live in a
bitmap; threads find free pages by random walks (RW, RW-BM, CoRW, CRW) and runs
of pages with RW_malloc.  From Python the bulk calls run one request per GPU
thread; kernels written against ``<gpudyn/rw_heap.cuh>`` get the same heap
through :meth:`PageHeap.view_bytes`.
"""
from __future__ import annotations

import numpy as np

from ._ffi import check, ffi, lib, stream_handle
from ._handle import OwnedHandle
from .buffer import DeviceBuffer, as_device_array

#: GETPAGE algorithms by name (values of gpudyn_rw_heap_algorithm_t).
ALGORITHMS = {"rw": 1, "rw_bm": 2, "corw": 3, "crw": 4}
#: Page id of "no page".
INVALID_PAGE = 0xFFFFFFFF


def _int_arg(where: str, name: str, value, minimum: int = 0) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"gpudyn: {where} argument '{name}' is {value!r}, expected an integer >= {minimum}")
    return int(value)


def _sizes_array(where: str, sizes):
    if isinstance(sizes, (list, tuple, range)) or np.isscalar(sizes):
        sizes = np.asarray(sizes)
    if isinstance(sizes, np.ndarray):
        arr = sizes.reshape(-1)
        if arr.size and arr.dtype.kind not in "iu":
            raise TypeError(f"gpudyn: {where} argument 'sizes' has dtype {arr.dtype}, expected integers")
        if arr.size and arr.dtype.kind == "i" and arr.min() < 0:
            raise ValueError(f"gpudyn: {where} argument 'sizes' holds {int(arr.min())}, expected >= 0")
        sizes = arr.astype(np.uint64)
    return sizes


class PageHeap(OwnedHandle):
    """A random-walk page heap in device memory.

    Parameters
    ----------
    page_count: pages in the pool (1 .. 2^31; default 2^20, the paper's T = 1M).
    page_size: bytes per page, a multiple of 16 (default 256).
    word_bits: bitmap word width, 32 or 64.
    use_lockmap: lock a bitmap word before claiming bits (the LockMap of SIV-A).
    max_random_steps: random steps before the bounded fallback sweep.
    stream: CUDA stream for every call (None: the default stream).
    """

    def __init__(self, page_count: int = 1 << 20, page_size: int = 256, word_bits: int = 32,
                 use_lockmap: bool = False, max_random_steps: int = 4096, stream=None):
        opts = ffi.new("gpudyn_rw_heap_options_t*")
        check(lib.gpudyn_rw_heap_options_init(opts))
        opts.page_count = _int_arg("PageHeap", "page_count", page_count)
        opts.page_size = _int_arg("PageHeap", "page_size", page_size)
        opts.word_bits = _int_arg("PageHeap", "word_bits", word_bits)
        opts.use_lockmap = 1 if use_lockmap else 0
        opts.max_random_steps = _int_arg("PageHeap", "max_random_steps", max_random_steps)
        self.stream = stream
        self._stream = stream_handle(stream)
        out = ffi.new("gpudyn_rw_heap_t*")
        check(lib.gpudyn_rw_heap_create(out, opts, self._stream))
        self._own(out[0], lib.gpudyn_rw_heap_destroy)
        self.page_count = int(opts.page_count)
        self.page_size = int(opts.page_size)
        self.word_bits = int(opts.word_bits)
        #: Step statistics of the last :meth:`get_pages` with ``stats=True``.
        self.last_stats: dict | None = None

    # ---- life time ----------------------------------------------------------
    # ---- pages --------------------------------------------------------------
    def get_pages(self, n: int, algorithm: str = "corw", per_thread: int = 1, seed: int = 0,
                  stats: bool = False) -> DeviceBuffer:
        """``n`` pages (a DeviceBuffer of uint32 page ids), one GETPAGE per request
        with ``algorithm`` in ``"rw"``, ``"rw_bm"``, ``"corw"``, ``"crw"``.
        ``stats=True`` fills :attr:`last_stats` (TAS, WAS, ...).  Raises
        ``OutOfMemoryError`` when the pages run out; the heap then holds exactly
        what it held before."""
        if algorithm not in ALGORITHMS:
            raise ValueError(f"gpudyn: PageHeap.get_pages argument 'algorithm' is {algorithm!r}, "
                             f"expected one of {sorted(ALGORITHMS)}")
        n = _int_arg("PageHeap.get_pages", "n", n)
        per_thread = _int_arg("PageHeap.get_pages", "per_thread", per_thread, 1)
        seed = _int_arg("PageHeap.get_pages", "seed", seed)
        out = DeviceBuffer(n, np.uint32, stream=self.stream)
        st = ffi.new("gpudyn_rw_heap_stats_t*") if stats else ffi.NULL
        if stats:
            st.struct_size = ffi.sizeof("gpudyn_rw_heap_stats_t")
        check(lib.gpudyn_rw_heap_get_pages(self._h(), ffi.cast("uint32_t*", out.ptr), n, ALGORITHMS[algorithm],
                                           per_thread, seed & 0xFFFFFFFFFFFFFFFF, st, self._stream))
        if stats:
            self.last_stats = {f: getattr(st, f) for f in ("requests", "failed", "total_steps", "warps",
                                                           "warp_max_steps_sum", "max_steps", "tas", "was")}
            self.last_stats["algorithm"] = algorithm
        return out

    def free_pages(self, pages) -> None:
        """FREEPAGE for each uint32 page id (device array or NumPy); INVALID_PAGE
        entries are skipped, unknown or already free ids counted in ``info()['bad_frees']``."""
        ptr, n, dt, keep = as_device_array(pages, dtype=np.uint32)
        if np.dtype(dt) != np.uint32:
            raise TypeError(f"gpudyn: PageHeap.free_pages argument 'pages' has dtype {np.dtype(dt)}, expected uint32")
        if n:
            check(lib.gpudyn_rw_heap_free_pages(self._h(), ffi.cast("const uint32_t*", ptr), n, self._stream))
        del keep

    # ---- RW_malloc ----------------------------------------------------------
    @property
    def max_malloc_size(self) -> int:
        out = ffi.new("uint64_t*")
        check(lib.gpudyn_rw_heap_max_malloc_size(self._h(), out))
        return int(out[0])

    def malloc(self, sizes, seed: int = 0) -> DeviceBuffer:
        """RW_malloc of each size (bytes): a DeviceBuffer of uint64 device
        addresses, 16-byte aligned, 0 where the size is 0.  Raises
        ``OutOfMemoryError`` (the heap keeps what it had) or
        ``InvalidArgumentError`` for sizes above :attr:`max_malloc_size`."""
        sizes = _sizes_array("PageHeap.malloc", sizes)
        ptr, n, _, keep = as_device_array(sizes, dtype=np.uint64)
        out = DeviceBuffer(n, np.uint64, stream=self.stream)
        if n:
            check(lib.gpudyn_rw_heap_malloc(self._h(), ffi.cast("const uint64_t*", ptr), ffi.cast("uint64_t*", out.ptr),
                                            n, _int_arg("PageHeap.malloc", "seed", seed), self._stream))
        del keep
        return out

    def free(self, pointers) -> None:
        """Frees addresses returned by :meth:`malloc` (uint64; 0 entries skipped).
        A uint32 array is taken as page ids (:meth:`free_pages`)."""
        ptr, n, dt, keep = as_device_array(pointers)
        if np.dtype(dt) == np.uint32:
            return self.free_pages(pointers)
        if np.dtype(dt) not in (np.dtype(np.uint64), np.dtype(np.int64)):
            raise TypeError(f"gpudyn: PageHeap.free argument 'pointers' has dtype {np.dtype(dt)}, "
                            "expected uint64 addresses or uint32 page ids")
        if n:
            check(lib.gpudyn_rw_heap_free(self._h(), ffi.cast("const uint64_t*", ptr), n, self._stream))
        del keep

    # ---- state --------------------------------------------------------------
    def occupy(self, fraction: float, seed: int = 0) -> None:
        """Discards all allocations and marks exactly round(fraction * page_count)
        pages used at pseudo-random places (the paper's pre-filled pools)."""
        if not isinstance(fraction, (int, float, np.floating)) or not 0.0 <= float(fraction) <= 1.0:
            raise ValueError(f"gpudyn: PageHeap.occupy argument 'fraction' is {fraction!r}, expected 0 <= fraction <= 1")
        check(lib.gpudyn_rw_heap_occupy(self._h(), float(fraction), _int_arg("PageHeap.occupy", "seed", seed),
                                        self._stream))

    def reset(self) -> None:
        """Discards all allocations and counters."""
        check(lib.gpudyn_rw_heap_reset(self._h(), self._stream))

    @property
    def free_page_count(self) -> int:
        out = ffi.new("uint64_t*")
        check(lib.gpudyn_rw_heap_free_page_count(self._h(), out, self._stream))
        return int(out[0])

    @property
    def free_fraction(self) -> float:
        return self.free_page_count / self.page_count

    def info(self) -> dict:
        """Sizes, free pages, failed requests and bad frees (synchronizes the stream)."""
        info = ffi.new("gpudyn_rw_heap_info_t*")
        info.struct_size = ffi.sizeof("gpudyn_rw_heap_info_t")
        check(lib.gpudyn_rw_heap_get_info(self._h(), info, self._stream))
        return {f: int(getattr(info, f)) for f in ("word_bits", "page_size", "page_count", "free_pages",
                                                   "failed_requests", "bad_frees", "use_lockmap",
                                                   "max_random_steps")}

    def view_bytes(self) -> np.ndarray:
        """The ``gpudyn_rw_heap_view_t`` as raw bytes (uint8) to pass by value to a kernel."""
        v = ffi.new("gpudyn_rw_heap_view_t*")
        check(lib.gpudyn_rw_heap_get_view(self._h(), v))
        return np.frombuffer(bytes(ffi.buffer(v)), dtype=np.uint8).copy()

    @property
    def pool_address(self) -> int:
        v = ffi.new("gpudyn_rw_heap_view_t*")
        check(lib.gpudyn_rw_heap_get_view(self._h(), v))
        return int(v.pool)

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else f"{self.page_count} pages x {self.page_size} B"
        return f"PageHeap({state}, word_bits={self.word_bits})"


__all__ = ["PageHeap", "ALGORITHMS", "INVALID_PAGE"]
