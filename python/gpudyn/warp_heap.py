"""WarpHeap: the FDGMalloc warp-level allocator (Widmer et al. 2013).

From Python, a warp heap is an arena: :meth:`WarpHeap.malloc` takes a size per
item and returns a device array of pointers (one block per non-zero size,
16-byte aligned, NULL for 0), all valid until :meth:`WarpHeap.clear` (the
arena frees its blocks all at once: there is no per-pointer free from the host).
Kernels written against ``<gpudyn/warp_heap.cuh>`` (CuPy ``RawModule`` with
``gpudyn.get_include()``), and Numba kernels calling gpudyn.numba's
``warp_start``/``warp_alloc``/..., get the same heap through
:meth:`WarpHeap.view_arg` (by value).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import _args, _deprecated, _view
from ._ffi import check, ffi, lib, stream_handle
from ._handle import OwnedHandle
from ._typing import ArrayLike, StreamLike
from .buffer import DeviceBuffer, device_inputs, host_input, on_device, stream_device
from .errors import InvalidArgumentError

if TYPE_CHECKING:
    from .rw_heap import RWHeap

# The paper's defaults (sec. 5.1 and 3.3), also what gpudyn_warp_heap_options_init sets.
DEFAULT_SUPERBLOCK_BYTES = 32768
DEFAULT_MIN_BLOCK_BYTES = 16
DEFAULT_LIST_CAPACITY = 126
# Arena backing (the default): pool bytes and the longest superblock run.
DEFAULT_ARENA_BYTES = 512 << 20
DEFAULT_MAX_SUPERBLOCK_RUN = 8

# backing= names and their gpudyn_warp_heap_backing_t values.
BACKINGS = {"cuda_malloc": 0, "arena": 1, "page_heap": 2}

_STAT_FIELDS = (
    "headers",
    "superblocks",
    "large_blocks",
    "bytes_reserved",
    "bytes_requested",
    "backing_allocations",
    "failed_allocations",
    "misuse",
)


class WarpHeap(OwnedHandle):
    """A warp heap.

    Parameters
    ----------
    backing
        where its memory comes from: ``"arena"`` (default: a pool of
        ``arena_bytes`` allocated now, cut into slots taken with one atomic),
        ``"cuda_malloc"`` (CUDA device malloc, the paper's configuration), or a
        :class:`gpudyn.RWHeap` (pages of a random-walk page heap; this heap
        keeps it alive, and ``RWHeap.close()`` is refused while this heap is open).
    arena_bytes
        pool size of the arena backing.
    max_superblock_run
        arena backing: superblocks a warp takes at once at most
        (1, 2, 4, ... doubling up to this; 1 = one at a time).
    superblock_bytes
        bytes per superblock (0: no superblocks, every warp request
        goes to the backing allocator).
    min_block_bytes
        allocation granularity, a power of two >= 16.
    list_capacity
        entries per SuperBlock list before it chains a new one.
    device_heap_bytes
        raise CUDA's device malloc heap (process-wide,
        ``cudaLimitMallocHeapSize``) to at least this many bytes; 0 leaves it
        (CUDA's default is 8 MiB).  Must happen before the process's first
        kernel that uses device malloc.
    stream
        CUDA stream for every call (None: the legacy default stream; an
        int handle, a ``__cuda_stream__`` object, a CuPy/PyTorch/Numba stream).
        Device arrays passed in are read after their producer's stream (CAI v3
        ``stream``; CuPy/PyTorch arrays naming none: that library's current
        stream); NumPy inputs are copied on this stream.
    """

    _kernel_view = _view.declare("warp_heap", "WarpHeap", "gpudyn_warp_heap_view_t", elements=False)

    def __init__(
        self,
        superblock_bytes: int = DEFAULT_SUPERBLOCK_BYTES,
        min_block_bytes: int = DEFAULT_MIN_BLOCK_BYTES,
        list_capacity: int = DEFAULT_LIST_CAPACITY,
        device_heap_bytes: int = 0,
        stream: StreamLike = None,
        backing: str | RWHeap = "arena",
        arena_bytes: int = DEFAULT_ARENA_BYTES,
        max_superblock_run: int = DEFAULT_MAX_SUPERBLOCK_RUN,
    ) -> None:
        w = "WarpHeap"
        u32 = _args.U32_MAX
        sizes = {}
        for name, value, hi in (
            ("superblock_bytes", superblock_bytes, _args.U64_MAX),
            ("min_block_bytes", min_block_bytes, u32),
            ("list_capacity", list_capacity, u32),
            ("device_heap_bytes", device_heap_bytes, _args.U64_MAX),
            ("arena_bytes", arena_bytes, _args.U64_MAX),
            ("max_superblock_run", max_superblock_run, u32),
        ):
            sizes[name] = _args.integer(w, name, value, 0, hi)
        from .rw_heap import RWHeap

        page_heap = None
        if isinstance(backing, RWHeap):
            page_heap = backing
        elif isinstance(backing, str) and backing in BACKINGS and backing != "page_heap":
            backing_value = BACKINGS[backing]
        elif isinstance(backing, str):
            raise InvalidArgumentError(
                f"gpudyn: WarpHeap argument 'backing' is {backing!r}, expected 'arena', "
                "'cuda_malloc' or a gpudyn.RWHeap"
            )
        else:
            raise TypeError(
                f"gpudyn: WarpHeap argument 'backing' is a {type(backing).__name__}, expected "
                "'arena', 'cuda_malloc' or a gpudyn.RWHeap"
            )
        self.stream = stream
        self._stream = stream_handle(stream)
        opts = ffi.new("gpudyn_warp_heap_options_t*")
        check(lib.gpudyn_warp_heap_options_init(opts))
        for name, value in sizes.items():
            setattr(opts, name, value)
        self._page_heap = page_heap  # keeps the page heap alive as long as this heap
        out = ffi.new("gpudyn_warp_heap_t*")
        if page_heap is not None:
            opts.backing = BACKINGS["page_heap"]
            # The page heap's handle stays valid until the library counts this heap as its user.
            with page_heap._using() as ph:
                opts.page_heap = ffi.cast("void*", ph)
                check(lib.gpudyn_warp_heap_create(out, opts, self._stream))
        else:
            opts.backing = backing_value
            check(lib.gpudyn_warp_heap_create(out, opts, self._stream))
        if page_heap is None:
            self._own(out[0], lib.gpudyn_warp_heap_destroy)
        else:
            # The finalizer holds the page heap too, so when this heap dies by reference count
            # its destroy runs before the page heap's.  In a reference cycle the collector may
            # still finalize the page heap first (cffi's gc object, this lambda included, is
            # collected with the cycle): its refused destroy is then retried after this heap's
            # (_handle._finalizer / _retry_deferred).
            self._own(out[0], lambda h, _backing=page_heap: lib.gpudyn_warp_heap_destroy(h))
            page_heap._users.add(self)  # RWHeap.close() refuses while this heap is open
        #: The CUDA device the heap belongs to: the stream's, else the one current at creation.
        self.device = stream_device(self._stream)

    # ---- arena --------------------------------------------------------------
    def malloc(self, sizes: ArrayLike) -> DeviceBuffer:
        """One block per entry of ``sizes`` (bytes; a sequence, NumPy array or 1-D
        uint64 device array).  Returns a DeviceBuffer of uint64 device pointers
        (0 where the size is 0), valid until :meth:`clear` (the C call is
        ``gpudyn_warp_heap_alloc_batch``).  Raises ``OutOfMemoryError`` when the
        backing allocator runs out; the heap then holds exactly what it held
        before."""
        w = "WarpHeap.malloc"
        host = host_input(w, "sizes", sizes, np.uint64, self.device)  # checked before any device call
        h = self._h()
        # output and temporaries on the heap's device
        with on_device(self.device), device_inputs(self.stream, self.device) as inputs:
            ptr, n, _ = inputs.integers(sizes if host is None else host, np.uint64, w, "sizes")
            out = inputs.output(n, np.uint64)
            if n:
                check(
                    lib.gpudyn_warp_heap_alloc_batch(
                        h, ffi.cast("const uint64_t*", ptr), n, ffi.cast("void**", out.ptr), self._stream
                    )
                )
        return out

    def clear(self) -> None:
        """Frees every block handed out by :meth:`malloc`, all at once (an arena
        has no per-pointer free); the heap keeps its memory for later mallocs
        and kernels (the C call is ``gpudyn_warp_heap_release``).  The cumulative
        counters of :meth:`stats` stay; blocks kernels hold through kept headers
        stay too (:meth:`free_kept`).  Stream-ordered."""
        check(lib.gpudyn_warp_heap_release(self._h(), self._stream))

    alloc = _deprecated.method("WarpHeap", "alloc", "malloc")
    release = _deprecated.method("WarpHeap", "release", "clear")

    @property
    def batch_count(self) -> int:
        """Batches (calls of :meth:`malloc`) held until the next :meth:`clear`."""
        out = ffi.new("uint64_t*")
        check(lib.gpudyn_warp_heap_batch_count(self._h(), out))
        return int(out[0])

    def stats(self) -> dict[str, int]:
        """Device counters (synchronizes the stream; the keys are the fields of
        ``gpudyn_warp_heap_stats_t``): live ``headers``,
        ``superblocks``, ``large_blocks``, ``bytes_reserved`` (taken from the
        backing allocator) and ``bytes_requested`` (handed out, rounded to the
        minimum block), plus cumulative ``backing_allocations``,
        ``failed_allocations`` and ``misuse``."""
        s = ffi.new("gpudyn_warp_heap_stats_t*")
        check(lib.gpudyn_warp_heap_get_stats(self._h(), s, self._stream))
        return {f: int(getattr(s, f)) for f in _STAT_FIELDS}

    def check(self) -> None:
        """Raises what the heap's kernels met since the last check:
        :class:`OutOfMemoryError` when lanes got a null pointer for want of memory,
        else :class:`InvalidArgumentError` when contract violations were detected
        (``misuse``).  Each is raised once; :meth:`stats` is unchanged.
        Synchronizes the stream."""
        h = self._h()
        check(lib.gpudyn_warp_heap_check(h, self._stream))

    def backing_free_bytes(self) -> int:
        """Free bytes of the backing (arena slots or page-heap pages; synchronizes
        the stream).  Raises ``NotSupportedError`` for the CUDA malloc backing."""
        out = ffi.new("uint64_t*")
        check(lib.gpudyn_warp_heap_backing_free_bytes(self._h(), out, self._stream))
        return int(out[0])

    # ---- kernels --------------------------------------------------------------
    def _view_bytes(self) -> bytes:
        v = ffi.new("gpudyn_warp_heap_view_t*")
        check(lib.gpudyn_warp_heap_get_view(self._h(), v))
        return bytes(ffi.buffer(v))

    def view_arg(self) -> _view.ViewArg:
        """The heap as a kernel argument: its ``gpudyn_warp_heap_view_t`` as a
        structured NumPy scalar, passed by value to a CuPy ``RawKernel`` taking
        it or to a Numba ``@cuda.jit`` kernel calling gpudyn.numba's warp
        collectives; ``bytes(arg)`` is the C struct."""
        return _view.make_arg(self._kernel_view, None, self._view_bytes())

    view_bytes = _deprecated.method(
        "WarpHeap",
        "view_bytes",
        "view_arg",
        lambda arg: np.frombuffer(bytes(arg), dtype=np.uint8).copy(),
        " (bytes(arg) for the struct's bytes)",
    )
    ref = _deprecated.attribute("WarpHeap", "ref", "view_arg()", lambda self: self.view_arg())

    def free_kept(self, headers: ArrayLike) -> None:
        """Frees warp headers that a kernel kept (``warp_heap::keep``) and will not
        resume; ``headers`` is a device array of uint64 header pointers (or int64;
        a list or NumPy array is copied; 0 skipped)."""
        self._on_kept_headers("WarpHeap.free_kept", lib.gpudyn_warp_heap_free_kept, headers)

    def tidy_up_kept(self, headers: ArrayLike) -> None:
        """Tidies up warp headers that a kernel kept (``warp_heap::keep``) and will
        resume later, as ``warp_heap::tidy_up`` by each warp: every superblock and
        large block they hold goes back to the backing allocator, the header blocks
        stay usable for ``warp_heap_ref::resume``; blocks handed out through them
        are invalid afterwards.  ``headers`` is a device array of uint64 header
        pointers (0 skipped; each header once).  Synchronizes the stream.  Raises
        ``InvalidArgumentError`` when entries are not headers of this heap (arena
        and page heap backings can tell; those entries are skipped, the others
        tidied).  Headers are addresses: 64-bit integer dtypes only (an int32
        array is a TypeError)."""
        self._on_kept_headers("WarpHeap.tidy_up_kept", lib.gpudyn_warp_heap_tidy_up_kept, headers)

    def _on_kept_headers(self, where: str, call: Any, headers: ArrayLike) -> None:
        """`call` (free_kept or tidy_up_kept) on a device array of header pointers."""
        # count, dtype (64-bit addresses) and values checked before any device call
        host = host_input(where, "headers", headers, np.uint64, self.device, addresses=True)
        h = self._h()
        with on_device(self.device), device_inputs(self.stream, self.device) as inputs:  # a temporary there
            ptr, n, _ = inputs.addresses(headers if host is None else host, where, "headers")
            if n:
                check(call(h, ffi.cast("void* const*", ptr), n, self._stream))
