"""Heap: gpudyn's device allocator — malloc/free of any size from any thread of
any kernel, on a random-walk page heap that the host can grow between launches.

From Python the bulk calls run one device malloc (or free) per entry; kernels
written against ``<gpudyn/heap.cuh>`` (CuPy ``RawModule`` with
``gpudyn.nvrtc_options()``) and Numba kernels calling gpudyn.numba's
``malloc``/``free`` take the same heap through :meth:`Heap.view_arg` (by value)::

    with gpudyn.Heap(initial_bytes=64 << 20) as heap:
        ptrs = heap.malloc([16, 100, 4096])    # DeviceBuffer of uint64 device pointers
        heap.free(ptrs)
"""

from __future__ import annotations

import numpy as np

from . import _args, _deprecated, _view
from ._ffi import check, ffi, lib, stream_handle
from ._handle import OwnedHandle
from ._typing import ArrayLike, StreamLike
from .buffer import DeviceBuffer, device_inputs, host_input, on_device, stream_device

_STAT_FIELDS = (
    "bytes_mapped",
    "bytes_max",
    "bytes_held",
    "bytes_allocated",
    "allocations",
    "failed_allocations",
    "bad_frees",
    "largest_free_bytes",
)


class Heap(OwnedHandle):
    """A device heap: one virtual range reserved at creation, physical memory
    mapped into it up front and by :meth:`grow`.

    The heap belongs to the device of ``stream``, or to the device that is
    current when it is created for the default streams (:attr:`device`); it
    works whatever device is current later.

    Parameters
    ----------
    initial_bytes
        memory mapped now (None: the library's default, 1 GiB or
        half the device's free memory when that is less, at most ``max_bytes``).
    max_bytes
        the most :meth:`grow` may reach; the range and the metadata are
        sized for it (None: ``initial_bytes`` x 8, at most the device's memory).
    page_size
        bytes per page, a power of two from 4 KiB to 2 MiB (None: 64 KiB).
    stream
        CUDA stream for every call (None: the default stream).
    """

    _kernel_view = _view.declare("heap", "Heap", "gpudyn_heap_view_t", elements=False)

    def __init__(
        self,
        initial_bytes: int | None = None,
        max_bytes: int | None = None,
        page_size: int | None = None,
        stream: StreamLike = None,
    ) -> None:
        opts = ffi.new("gpudyn_heap_options_t*")
        check(lib.gpudyn_heap_options_init(opts))
        # None keeps the library's default (0 is its spelling of "default": refused here).
        if page_size is not None:
            opts.page_size = _args.integer("Heap", "page_size", page_size, 1)
        # At least a page and at most 2^31 pages (the library's rules, named as Python names them).
        lo = max(1, int(opts.page_size))
        hi = min(_args.U64_MAX, ((1 << 31) + 1) * lo - 1)
        if initial_bytes is not None:
            opts.initial_bytes = _args.integer("Heap", "initial_bytes", initial_bytes, lo, hi)
        if max_bytes is not None:
            opts.max_bytes = _args.integer("Heap", "max_bytes", max_bytes, lo, hi)
        self.stream = stream
        self._stream = stream_handle(stream)
        out = ffi.new("gpudyn_heap_t*")
        check(lib.gpudyn_heap_create(out, opts, self._stream))
        self._own(out[0], lib.gpudyn_heap_destroy)
        #: The CUDA device this heap belongs to (the library's choice: the stream's, else the current one).
        self.device = stream_device(self._stream)
        self.page_size = int(opts.page_size)

    # ---- allocations ------------------------------------------------------------
    def malloc(self, sizes: ArrayLike) -> DeviceBuffer:
        """One device malloc per entry of ``sizes`` (bytes: an int, a sequence, a
        NumPy array or a 1-D uint64 device array).  Returns a DeviceBuffer of uint64
        device pointers, 16-byte aligned, 0 where the size is 0.  Raises
        ``OutOfMemoryError`` when the heap cannot hold them all; what this call
        took is freed again, so the live allocations are exactly those from before
        (slabs attached on the way stay with their size classes for later mallocs
        until pages run out: ``bytes_held`` may be higher).

        Refused before any copy or device work: more entries than the device's
        memory holds as uint64 (OutOfMemoryError at once, a broadcast view of
        2**40 entries too), negative or non-integer sizes, and device arrays that
        are not uint64 device memory of the heap's device (see
        ``gpudyn.buffer.as_device_array``)."""
        w = "Heap.malloc"
        host = host_input(w, "sizes", sizes, np.uint64, self.device)  # checked before any device call
        h = self._h()
        # output and temporaries on the heap's device
        with on_device(self.device), device_inputs(self.stream, self.device) as inputs:
            ptr, n, _ = inputs.integers(sizes if host is None else host, np.uint64, w, "sizes")
            out = inputs.output(n, np.uint64)
            if n:
                check(
                    lib.gpudyn_heap_malloc(
                        h, ffi.cast("const uint64_t*", ptr), ffi.cast("uint64_t*", out.ptr), n, self._stream
                    )
                )
        return out

    def free(self, pointers: ArrayLike) -> None:
        """Frees pointers from :meth:`malloc` or from kernels (a sequence of Python
        ints, or a NumPy or device array of a 64-bit integer dtype, uint64 or int64:
        an int32 array is refused, TypeError, as its addresses would be truncated;
        0 entries are skipped).  Pointers the heap did not hand out, or handed out
        and already freed, change nothing and are counted in
        ``stats()['bad_frees']``.  Stream-ordered."""
        w = "Heap.free"
        # count, dtype and values checked before any device call
        host = host_input(w, "pointers", pointers, np.uint64, self.device, addresses=True)
        h = self._h()
        with on_device(self.device), device_inputs(self.stream, self.device) as inputs:  # a temporary there
            ptr, n, _ = inputs.addresses(pointers if host is None else host, w, "pointers")
            if n:
                check(lib.gpudyn_heap_free(h, ffi.cast("const uint64_t*", ptr), n, self._stream))

    # ---- memory -------------------------------------------------------------------
    def grow(self, nbytes: int) -> None:
        """Maps memory until at least ``nbytes`` are usable (up to ``max_bytes``;
        smaller values change nothing).  Kernels launched on the heap's stream
        afterwards, and views taken before, see the new memory.  Raises
        ``NotSupportedError`` on devices without virtual memory management."""
        check(lib.gpudyn_heap_grow(self._h(), _args.integer("Heap.grow", "nbytes", nbytes), self._stream))

    def stats(self) -> dict[str, int]:
        """Sizes and counters (synchronizes the stream; the keys are the fields
        of ``gpudyn_heap_stats_t``): ``bytes_mapped``,
        ``bytes_max``, ``bytes_held`` (pages in use), ``bytes_allocated`` (usable
        bytes of live allocations), ``allocations`` (live), ``failed_allocations``
        and ``bad_frees`` (since creation, :meth:`clear_status` or :meth:`clear`),
        ``largest_free_bytes`` (largest single malloc that would succeed now)."""
        s = ffi.new("gpudyn_heap_stats_t*")
        s.struct_size = ffi.sizeof("gpudyn_heap_stats_t")
        check(lib.gpudyn_heap_get_stats(self._h(), s, self._stream))
        return {f: int(getattr(s, f)) for f in _STAT_FIELDS}

    def clear_status(self) -> None:
        """Zeroes ``failed_allocations`` and ``bad_frees``."""
        check(lib.gpudyn_heap_clear_status(self._h(), self._stream))

    def check(self) -> None:
        """Raises what requests from kernels (and bulk calls) met since the last
        check: :class:`OutOfMemoryError` when mallocs got a null pointer for want of
        memory, else :class:`InvalidArgumentError` when frees were of pointers the
        heap did not hand out or had freed already.  Each is raised once;
        :meth:`stats` is unchanged (:meth:`clear_status` zeroes its counters).
        Synchronizes the stream."""
        h = self._h()
        check(lib.gpudyn_heap_check(h, self._stream))

    def clear(self) -> None:
        """Drops every allocation (pointers handed out become invalid) and zeroes
        the counters; the mapped memory is kept (the C call is
        ``gpudyn_heap_reset``).  Stream-ordered.  InvalidArgumentError while
        GGArrays take their buckets from this heap."""
        check(lib.gpudyn_heap_reset(self._h(), self._stream))

    reset = _deprecated.method("Heap", "reset", "clear")

    # ---- kernels ------------------------------------------------------------------
    def _view_bytes(self) -> bytes:
        v = ffi.new("gpudyn_heap_view_t*")
        check(lib.gpudyn_heap_get_view(self._h(), v))
        return bytes(ffi.buffer(v))

    def view_arg(self) -> _view.ViewArg:
        """The heap as a kernel argument: its ``gpudyn_heap_view_t`` as a
        structured NumPy scalar, passed by value to a CuPy ``RawKernel`` taking
        ``gpudyn_heap_view_t`` (wrapped in ``gpudyn::heap_ref``, see
        examples/heap/cupy_malloc.py) or to a Numba ``@cuda.jit`` kernel calling
        gpudyn.numba's ``malloc``/``free``; ``bytes(arg)`` is the C struct.
        Stays valid across :meth:`grow`, until the heap is closed."""
        return _view.make_arg(self._kernel_view, None, self._view_bytes())

    view = _deprecated.attribute(
        "Heap", "view", "view_arg()", lambda self: np.frombuffer(self._view_bytes(), dtype=np.uint8).copy()
    )
    ref = _deprecated.attribute("Heap", "ref", "view_arg()", lambda self: self.view_arg())

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else f"page_size={self.page_size}, device={self.device}"
        return f"Heap({state})"


__all__ = ["Heap"]
