"""WarpHeap: the FDGMalloc warp-level allocator (Widmer et al. 2013).

From Python, a warp heap is an arena: :meth:`WarpHeap.alloc` takes a size per
item and returns a device array of pointers (one block per non-zero size,
16-byte aligned, NULL for 0), all valid until :meth:`WarpHeap.release`.
Kernels written against ``<gpudyn/warp_heap.cuh>`` (CuPy ``RawModule`` with
``gpudyn.get_include()``) get the same heap through :meth:`WarpHeap.view_bytes`.
"""
from __future__ import annotations

import numpy as np

from ._ffi import check, ffi, lib, stream_handle
from ._handle import OwnedHandle
from .buffer import DeviceBuffer, as_device_array

# The paper's defaults (sec. 5.1 and 3.3), also what gpudyn_warp_heap_options_init sets.
DEFAULT_SUPERBLOCK_BYTES = 32768
DEFAULT_MIN_BLOCK_BYTES = 16
DEFAULT_LIST_CAPACITY = 126
# Arena backing (the default): pool bytes and the longest superblock run.
DEFAULT_ARENA_BYTES = 512 << 20
DEFAULT_MAX_SUPERBLOCK_RUN = 8

# backing= names and their gpudyn_warp_heap_backing_t values.
BACKINGS = {"cuda_malloc": 0, "arena": 1, "page_heap": 2}

_STAT_FIELDS = ("headers", "superblocks", "large_blocks", "bytes_reserved", "bytes_requested",
                "backing_allocations", "failed_allocations", "misuse")


class WarpHeap(OwnedHandle):
    """A warp heap.

    Parameters
    ----------
    backing: where its memory comes from: ``"arena"`` (default: a pool of
        ``arena_bytes`` allocated now, cut into slots taken with one atomic),
        ``"cuda_malloc"`` (CUDA device malloc, the paper's configuration), or a
        :class:`gpudyn.PageHeap` (pages of a random-walk page heap, which must
        outlive this heap).
    arena_bytes: pool size of the arena backing.
    max_superblock_run: arena backing: superblocks a warp takes at once at most
        (1, 2, 4, ... doubling up to this; 1 = one at a time).
    superblock_bytes: bytes per superblock (0: no superblocks, every warp request
        goes to the backing allocator).
    min_block_bytes: allocation granularity, a power of two >= 16.
    list_capacity: entries per SuperBlock list before it chains a new one.
    device_heap_bytes: raise CUDA's device malloc heap (process-wide,
        ``cudaLimitMallocHeapSize``) to at least this many bytes; 0 leaves it
        (CUDA's default is 8 MiB).  Must happen before the process's first
        kernel that uses device malloc.
    stream: CUDA stream for every call (None: the default stream).
    """

    def __init__(self, superblock_bytes: int = DEFAULT_SUPERBLOCK_BYTES,
                 min_block_bytes: int = DEFAULT_MIN_BLOCK_BYTES,
                 list_capacity: int = DEFAULT_LIST_CAPACITY,
                 device_heap_bytes: int = 0, stream=None, backing="arena",
                 arena_bytes: int = DEFAULT_ARENA_BYTES, max_superblock_run: int = DEFAULT_MAX_SUPERBLOCK_RUN):
        for name, value in (("superblock_bytes", superblock_bytes), ("min_block_bytes", min_block_bytes),
                            ("list_capacity", list_capacity), ("device_heap_bytes", device_heap_bytes),
                            ("arena_bytes", arena_bytes), ("max_superblock_run", max_superblock_run)):
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"gpudyn: WarpHeap argument '{name}' is {value!r}, expected an integer >= 0")
        self.stream = stream
        self._stream = stream_handle(stream)
        opts = ffi.new("gpudyn_warp_heap_options_t*")
        check(lib.gpudyn_warp_heap_options_init(opts))
        opts.superblock_bytes = int(superblock_bytes)
        opts.min_block_bytes = int(min_block_bytes)
        opts.list_capacity = int(list_capacity)
        opts.device_heap_bytes = int(device_heap_bytes)
        opts.arena_bytes = int(arena_bytes)
        opts.max_superblock_run = int(max_superblock_run)
        self._page_heap = None
        if isinstance(backing, str):
            if backing not in BACKINGS or backing == "page_heap":
                raise ValueError(f"gpudyn: WarpHeap argument 'backing' is {backing!r}, expected 'arena', "
                                 "'cuda_malloc' or a gpudyn.PageHeap")
            opts.backing = BACKINGS[backing]
        else:
            from .rw_heap import PageHeap
            if not isinstance(backing, PageHeap):
                raise TypeError(f"gpudyn: WarpHeap argument 'backing' is a {type(backing).__name__}, expected "
                                "'arena', 'cuda_malloc' or a gpudyn.PageHeap")
            opts.backing = BACKINGS["page_heap"]
            opts.page_heap = ffi.cast("void*", backing._h())
            self._page_heap = backing  # keeps the page heap alive as long as this heap
        out = ffi.new("gpudyn_warp_heap_t*")
        check(lib.gpudyn_warp_heap_create(out, opts, self._stream))
        self._own(out[0], lib.gpudyn_warp_heap_destroy)

    # ---- life time ----------------------------------------------------------
    # ---- arena --------------------------------------------------------------
    def alloc(self, sizes) -> DeviceBuffer:
        """One block per entry of ``sizes`` (bytes; a sequence, NumPy array or 1-D
        uint64 device array).  Returns a DeviceBuffer of uint64 device pointers
        (0 where the size is 0), valid until :meth:`release`.  Raises
        ``OutOfMemoryError`` when the backing allocator runs out; the heap then
        holds exactly what it held before."""
        h = self._h()
        if isinstance(sizes, (list, tuple, range)) or np.isscalar(sizes):
            sizes = np.asarray(sizes)
        if isinstance(sizes, np.ndarray):
            arr = np.asarray(sizes).reshape(-1)
            if arr.size and arr.dtype.kind not in "iu":
                raise TypeError(f"gpudyn: WarpHeap.alloc argument 'sizes' has dtype {arr.dtype}, expected integers")
            if arr.size and arr.dtype.kind == "i" and arr.min() < 0:
                raise ValueError(f"gpudyn: WarpHeap.alloc argument 'sizes' holds {int(arr.min())}, expected >= 0")
            sizes = arr.astype(np.uint64)
        ptr, n, _, keep = as_device_array(sizes, dtype=np.uint64)
        out = DeviceBuffer(n, np.uint64, stream=self.stream)
        if n:
            check(lib.gpudyn_warp_heap_alloc_batch(h, ffi.cast("const uint64_t*", ptr), n,
                                                   ffi.cast("void**", out.ptr), self._stream))
        del keep
        return out

    def release(self) -> None:
        """Frees every block handed out by :meth:`alloc` (stream-ordered)."""
        check(lib.gpudyn_warp_heap_release(self._h(), self._stream))

    @property
    def batch_count(self) -> int:
        """Batches (calls of :meth:`alloc`) held until the next release."""
        out = ffi.new("uint64_t*")
        check(lib.gpudyn_warp_heap_batch_count(self._h(), out))
        return int(out[0])

    def stats(self) -> dict:
        """Device counters (synchronizes the stream): live ``headers``,
        ``superblocks``, ``large_blocks``, ``bytes_reserved`` (taken from the
        backing allocator) and ``bytes_requested`` (handed out, rounded to the
        minimum block), plus cumulative ``backing_allocations``,
        ``failed_allocations`` and ``misuse``."""
        s = ffi.new("gpudyn_warp_heap_stats_t*")
        check(lib.gpudyn_warp_heap_get_stats(self._h(), s, self._stream))
        return {f: int(getattr(s, f)) for f in _STAT_FIELDS}

    def backing_free_bytes(self) -> int:
        """Free bytes of the backing (arena slots or page-heap pages; synchronizes
        the stream).  Raises ``NotSupportedError`` for the CUDA malloc backing."""
        out = ffi.new("uint64_t*")
        check(lib.gpudyn_warp_heap_backing_free_bytes(self._h(), out, self._stream))
        return int(out[0])

    # ---- kernels --------------------------------------------------------------
    def view_bytes(self) -> np.ndarray:
        """The ``gpudyn_warp_heap_view_t`` as raw bytes (uint8), to pass by value
        to a kernel (e.g. as a NumPy structured scalar in a CuPy RawKernel)."""
        v = ffi.new("gpudyn_warp_heap_view_t*")
        check(lib.gpudyn_warp_heap_get_view(self._h(), v))
        return np.frombuffer(bytes(ffi.buffer(v)), dtype=np.uint8).copy()

    def free_kept(self, headers) -> None:
        """Frees warp headers that a kernel kept (``warp_heap::keep``) and will not
        resume; ``headers`` is a device array of uint64 header pointers (0 skipped)."""
        ptr, n, _, keep = as_device_array(headers, dtype=np.uint64)
        if n:
            check(lib.gpudyn_warp_heap_free_kept(self._h(), ffi.cast("void* const*", ptr), n, self._stream))
        del keep
