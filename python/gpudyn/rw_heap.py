"""RWHeap: the random-walk page heap, ``rw_heap`` in C and C++ (Pham et al., "Dynamic Buffer Management
in Massively Parallel Systems: A Case on GPUs").

A pool of ``page_count`` pages of ``page_size`` bytes whose used bits live in a
bitmap; threads find free pages by random walks (RW, RW-BM, CoRW, CRW) and runs
of pages with RW_malloc.  From Python the bulk calls run one request per GPU
thread; kernels written against ``<gpudyn/rw_heap.cuh>``, and Numba kernels
calling gpudyn.numba's ``get_page``/``malloc``/..., get the same heap through
:meth:`RWHeap.view_arg` (by value).  ``PageHeap`` is the deprecated former
name of :class:`RWHeap`.
"""

from __future__ import annotations

import weakref

import numpy as np

from . import _args, _deprecated, _view
from ._ffi import check, ffi, lib, stream_handle
from ._handle import OwnedHandle
from ._typing import ArrayLike, StreamLike
from .buffer import DeviceBuffer, check_count, device_inputs, host_input, on_device, stream_device
from .errors import InvalidArgumentError

#: GETPAGE algorithms by name (values of gpudyn_rw_heap_algorithm_t).
ALGORITHMS = {"rw": 1, "rw_bm": 2, "corw": 3, "crw": 4}
#: Page id of "no page".
INVALID_PAGE = 0xFFFFFFFF
_PAGE_COUNT_MAX = 1 << 31  # gpudyn_rw_heap_options_t.page_count: 1 .. 2^31


class RWHeap(OwnedHandle):
    """A random-walk page heap in device memory.

    Page ids and addresses are kept apart: :meth:`get_pages` / :meth:`free_pages`
    take uint32 page ids (0 .. page_count-1), :meth:`malloc` / :meth:`free` uint64
    device addresses inside the pool; passing one kind to the other call raises.

    Parameters
    ----------
    page_count
        pages in the pool (1 .. 2^31; default 2^20, the paper's T = 1M).
    page_size
        bytes per page, a multiple of 16 (default 256).
    word_bits
        bitmap word width, 32 or 64.
    use_lockmap
        lock a bitmap word before claiming bits (the LockMap of SIV-A).
    max_random_steps
        random steps before the bounded fallback sweep.
    stream
        CUDA stream for every call (None: the legacy default stream; an
        int handle, a ``__cuda_stream__`` object, a CuPy/PyTorch/Numba stream).
        Device arrays passed in are read after their producer's stream (CAI v3
        ``stream``; CuPy/PyTorch arrays naming none: that library's current
        stream); NumPy inputs are copied on this stream.
    """

    _kernel_view = _view.declare("rw_heap", "RWHeap", "gpudyn_rw_heap_view_t", elements=False)

    def __init__(
        self,
        page_count: int = 1 << 20,
        page_size: int = 256,
        word_bits: int = 32,
        use_lockmap: bool = False,
        max_random_steps: int = 4096,
        stream: StreamLike = None,
    ) -> None:
        w = "RWHeap"
        page_count = _args.integer(w, "page_count", page_count, 1, _PAGE_COUNT_MAX)
        page_size = _args.integer(w, "page_size", page_size, 1)
        word_bits = _args.integer(w, "word_bits", word_bits, 0, _args.U32_MAX)  # 32/64: the library says
        use_lockmap = _args.flag(w, "use_lockmap", use_lockmap)
        max_random_steps = _args.integer(w, "max_random_steps", max_random_steps, 1, _args.U32_MAX)
        self.stream = stream
        self._stream = stream_handle(stream)
        opts = ffi.new("gpudyn_rw_heap_options_t*")
        check(lib.gpudyn_rw_heap_options_init(opts))
        opts.page_count = page_count
        opts.page_size = page_size
        opts.word_bits = word_bits
        opts.use_lockmap = int(use_lockmap)
        opts.max_random_steps = max_random_steps
        out = ffi.new("gpudyn_rw_heap_t*")
        check(lib.gpudyn_rw_heap_create(out, opts, self._stream))
        self._own(out[0], lib.gpudyn_rw_heap_destroy)
        #: The CUDA device the heap belongs to: the stream's, else the one current at creation.
        self.device = stream_device(self._stream)
        self.page_count = int(opts.page_count)
        self.page_size = int(opts.page_size)
        self.word_bits = int(opts.word_bits)
        #: Step statistics of the last :meth:`get_pages` with ``stats=True``.
        self.last_stats: dict | None = None
        # Warp heaps whose backing this heap is (they hold a strong reference to it).
        self._users: weakref.WeakSet = weakref.WeakSet()

    # ---- life time ----------------------------------------------------------
    def close(self) -> None:
        """Frees the heap's device memory now.  Refused (InvalidArgumentError, the
        heap stays usable) while an open :class:`WarpHeap` uses it as backing:
        close that first."""
        users = [u for u in self._users if u._handle is not None]
        if self._handle is not None and users:
            raise InvalidArgumentError(
                f"gpudyn: RWHeap.close: {len(users)} open WarpHeap(s) use this page heap "
                "as backing; close them first (the page heap stays open)"
            )
        super().close()

    # ---- pages --------------------------------------------------------------
    def get_pages(
        self, n: int, algorithm: str = "corw", per_thread: int = 1, seed: int | None = None, stats: bool = False
    ) -> DeviceBuffer:
        """``n`` pages (a DeviceBuffer of uint32 page ids), one GETPAGE per request
        with ``algorithm`` in ``"rw"``, ``"rw_bm"``, ``"corw"``, ``"crw"``.
        Pages are this heap's own unit, apart from :meth:`malloc` / :meth:`free`
        (bytes at addresses): a page id names one page of ``page_size`` bytes
        (:meth:`page_address` gives where), the paper's GETPAGE / FREEPAGE, and
        the device's ``get_page`` / ``free_page``; so they keep their own names.  Raises
        ``OutOfMemoryError`` when the pages run out; the heap then holds exactly
        what it held before.

        Experimental (benchmark instrumentation, may change without notice; the C
        side is ``gpudyn/experimental.h``): ``per_thread`` requests per thread (CRW's
        clustering), a fixed ``seed`` for the walks (without one: new random starts
        each call, or seed 0 once ``per_thread`` or ``stats`` is given),
        ``stats=True`` fills :attr:`last_stats` (TAS, WAS, ...)."""
        w = "RWHeap.get_pages"
        algo = _args.choice(w, "algorithm", algorithm, ALGORITHMS)
        algorithm = next(k for k, v in ALGORITHMS.items() if v == algo)
        n = _args.integer(w, "n", n)
        per_thread = _args.integer(w, "per_thread", per_thread, 1, _args.U32_MAX)
        if seed is not None:
            seed = _args.integer(w, "seed", seed)
        stats = _args.flag(w, "stats", stats)
        h = self._h()
        if n > self.page_count:  # before allocating the output (the library's check, made first)
            raise InvalidArgumentError(
                f"gpudyn: {w} argument 'n' is {n}, more than the {self.page_count} pages of the heap"
            )
        with on_device(self.device):  # the output on the heap's device
            out = DeviceBuffer(n, np.uint32, stream=self.stream)
        pages = ffi.cast("uint32_t*", out.ptr)
        if per_thread == 1 and seed is None and not stats:
            check(lib.gpudyn_rw_heap_get_pages(h, pages, n, algo, self._stream))
            return out
        st = ffi.new("gpudyn_exp_rw_heap_stats_t*") if stats else ffi.NULL
        if stats:
            st.struct_size = ffi.sizeof("gpudyn_exp_rw_heap_stats_t")
        check(
            lib.gpudyn_exp_rw_heap_get_pages(
                h, pages, n, algo, per_thread, 0 if seed is None else seed, st, self._stream
            )
        )
        if stats:
            self.last_stats = {
                f: getattr(st, f)
                for f in ("requests", "failed", "total_steps", "warps", "warp_max_steps_sum", "max_steps", "tas", "was")
            }
            self.last_stats["algorithm"] = algorithm
        return out

    def free_pages(self, pages: ArrayLike) -> None:
        """FREEPAGE for each page id: a uint32 device array (as :meth:`get_pages`
        returns) or host integers (list, NumPy), each < ``page_count`` or
        INVALID_PAGE (skipped).  Unknown or already free ids in a device array are
        counted in ``stats()['bad_frees']``.  Addresses are refused (TypeError for
        a uint64/int64 device array, ValueError for host values that cannot be
        page ids): free those with :meth:`free`."""
        w = "RWHeap.free_pages"
        h = self._h()
        check_count(w, "pages", pages, 4, self.device)  # constant time, before the values are read
        host = _args.host_integers(w, "pages", pages, np.uint64)
        if host is not None:
            bad = host[(host >= self.page_count) & (host != INVALID_PAGE)]
            if bad.size:
                raise InvalidArgumentError(
                    f"gpudyn: {w} argument 'pages' holds {int(bad[0])}, not a page id "
                    f"(0 <= id < {self.page_count} or INVALID_PAGE); "
                    "addresses from malloc() are freed with free()"
                )
            pages = host.astype(np.uint32)
        with on_device(self.device), device_inputs(self.stream, self.device) as inputs:  # a temporary there
            ptr, n, _ = inputs.array(pages, where=w, name="pages", accept=lambda dt: self._page_ids(w, dt))
            if n:
                check(lib.gpudyn_rw_heap_free_pages(h, ffi.cast("const uint32_t*", ptr), n, self._stream))

    @staticmethod
    def _page_ids(where: str, dt: np.dtype) -> None:
        if dt != np.uint32:
            raise TypeError(
                f"gpudyn: {where} argument 'pages' has dtype {dt}, expected uint32 page ids; "
                "uint64 addresses from malloc() are freed with free()"
            )

    # ---- RW_malloc ----------------------------------------------------------
    @property
    def max_malloc_size(self) -> int:
        out = ffi.new("uint64_t*")
        check(lib.gpudyn_rw_heap_max_malloc_size(self._h(), out))
        return int(out[0])

    def malloc(self, sizes: ArrayLike, seed: int | None = None) -> DeviceBuffer:
        """RW_malloc of each size (bytes): a DeviceBuffer of uint64 device
        addresses, 16-byte aligned, 0 where the size is 0.  Raises
        ``OutOfMemoryError`` (the heap keeps what it had) or
        ``InvalidArgumentError`` for sizes above :attr:`max_malloc_size`.
        ``seed`` (experimental: benchmark instrumentation) fixes the walks; by
        default each call walks from new random starts."""
        w = "RWHeap.malloc"
        if seed is not None:
            seed = _args.integer(w, "seed", seed)
        host = host_input(w, "sizes", sizes, np.uint64, self.device)  # checked before any device call
        h = self._h()
        # output and temporaries on the heap's device
        with on_device(self.device), device_inputs(self.stream, self.device) as inputs:
            ptr, n, _ = inputs.integers(sizes if host is None else host, np.uint64, w, "sizes")
            out = inputs.output(n, np.uint64)
            if n:
                sz, ptrs = ffi.cast("const uint64_t*", ptr), ffi.cast("uint64_t*", out.ptr)
                if seed is None:
                    check(lib.gpudyn_rw_heap_malloc(h, sz, ptrs, n, self._stream))
                else:
                    check(lib.gpudyn_exp_rw_heap_malloc(h, sz, ptrs, n, seed, self._stream))
        return out

    _ids_hint = "; uint32 page ids are freed with free_pages()"

    def free(self, pointers: ArrayLike) -> None:
        """Frees addresses returned by :meth:`malloc`: a uint64 (or int64) device or
        NumPy array, or a list of Python ints (0 entries skipped), each inside the
        pool (the rule of every call taking addresses: 64-bit integer dtypes only).
        Page ids are refused (TypeError for arrays of 32 bits or fewer,
        ValueError for values outside the pool): free those with :meth:`free_pages`."""
        w = "RWHeap.free"
        h = self._h()
        host = host_input(w, "pointers", pointers, np.uint64, self.device, addresses=True, hint=self._ids_hint)
        if host is not None:
            base, end = self.pool_address, self.pool_address + self.page_count * self.page_size
            bad = host[(host != 0) & ((host < base) | (host >= end))]
            if bad.size:
                hint = "; page ids are freed with free_pages()" if int(bad[0]) < self.page_count else ""
                raise InvalidArgumentError(
                    f"gpudyn: {w} argument 'pointers' holds {int(bad[0])}, not an address in "
                    f"this heap's pool [0x{base:x}, 0x{end:x}){hint}"
                )
            pointers = host
        with on_device(self.device), device_inputs(self.stream, self.device) as inputs:  # a temporary there
            ptr, n, _ = inputs.addresses(pointers, w, "pointers", hint=self._ids_hint)
            if n:
                check(lib.gpudyn_rw_heap_free(h, ffi.cast("const uint64_t*", ptr), n, self._stream))

    # ---- state --------------------------------------------------------------
    def occupy(self, fraction: float, seed: int = 0) -> None:
        """Discards all allocations and marks exactly round(fraction * page_count)
        pages used at pseudo-random places (the paper's pre-filled pools).
        Experimental (benchmark instrumentation, may change without notice)."""
        fraction = _args.real("RWHeap.occupy", "fraction", fraction, 0.0, 1.0)
        seed = _args.integer("RWHeap.occupy", "seed", seed)
        check(lib.gpudyn_exp_rw_heap_occupy(self._h(), fraction, seed, self._stream))

    def clear(self) -> None:
        """Discards all allocations and zeroes the counters; the pool is kept
        (every page free; the C call is ``gpudyn_rw_heap_reset``).
        Stream-ordered.  InvalidArgumentError while warp heaps are backed by
        this heap (likewise :meth:`occupy`)."""
        check(lib.gpudyn_rw_heap_reset(self._h(), self._stream))

    reset = _deprecated.method("RWHeap", "reset", "clear")

    @property
    def free_page_count(self) -> int:
        out = ffi.new("uint64_t*")
        check(lib.gpudyn_rw_heap_free_page_count(self._h(), out, self._stream))
        return int(out[0])

    @property
    def free_fraction(self) -> float:
        return self.free_page_count / self.page_count

    def stats(self) -> dict[str, int]:
        """Sizes, free pages, failed requests and bad frees (synchronizes the
        stream): ``word_bits``, ``page_size``, ``page_count``, ``free_pages``,
        ``failed_requests`` (GETPAGE and RW_malloc requests that found no memory,
        since creation or :meth:`clear`), ``bad_frees``, ``use_lockmap``,
        ``max_random_steps`` -- the fields of ``gpudyn_rw_heap_info_t``."""
        info = ffi.new("gpudyn_rw_heap_info_t*")
        info.struct_size = ffi.sizeof("gpudyn_rw_heap_info_t")
        check(lib.gpudyn_rw_heap_get_info(self._h(), info, self._stream))
        return {
            f: int(getattr(info, f))
            for f in (
                "word_bits",
                "page_size",
                "page_count",
                "free_pages",
                "failed_requests",
                "bad_frees",
                "use_lockmap",
                "max_random_steps",
            )
        }

    def check(self) -> None:
        """Raises what requests from kernels (and bulk calls) met since the last
        check: :class:`OutOfMemoryError` when they found no free page, else
        :class:`InvalidArgumentError` when frees were of pages or pointers the heap
        did not hand out or had freed already.  Each is raised once; :meth:`stats`'s
        counters are unchanged.  Synchronizes the stream."""
        h = self._h()
        check(lib.gpudyn_rw_heap_check(h, self._stream))

    info = _deprecated.method("RWHeap", "info", "stats")

    def _view_bytes(self) -> bytes:
        v = ffi.new("gpudyn_rw_heap_view_t*")
        check(lib.gpudyn_rw_heap_get_view(self._h(), v))
        return bytes(ffi.buffer(v))

    def view_arg(self) -> _view.ViewArg:
        """The heap as a kernel argument: its ``gpudyn_rw_heap_view_t`` as a
        structured NumPy scalar, passed by value to a CuPy ``RawKernel`` taking
        it or to a Numba ``@cuda.jit`` kernel calling gpudyn.numba's
        ``get_page``/``free_page``/``page_address``/``malloc``/``free``;
        ``bytes(arg)`` is the C struct."""
        return _view.make_arg(self._kernel_view, None, self._view_bytes())

    view_bytes = _deprecated.method(
        "RWHeap",
        "view_bytes",
        "view_arg",
        lambda arg: np.frombuffer(bytes(arg), dtype=np.uint8).copy(),
        " (bytes(arg) for the struct's bytes)",
    )
    ref = _deprecated.attribute("RWHeap", "ref", "view_arg()", lambda self: self.view_arg())

    @property
    def pool_address(self) -> int:
        v = ffi.new("gpudyn_rw_heap_view_t*")
        check(lib.gpudyn_rw_heap_get_view(self._h(), v))
        return int(v.pool)

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else f"{self.page_count} pages x {self.page_size} B"
        return f"RWHeap({state}, word_bits={self.word_bits})"


__all__ = ["RWHeap", "ALGORITHMS", "INVALID_PAGE"]

__getattr__ = _deprecated.module_getattr(__name__, {"PageHeap": ("gpudyn.rw_heap.RWHeap", lambda: RWHeap)})
