"""Growable GPU arrays: :class:`GGArray` (one LFVector per thread block, grows
inside kernels), and its two baselines :class:`VmmArray` (grown from the host by
mapping memory, contiguous) and :class:`StaticArray` (fixed capacity).

All three hold bool, integer, float or complex NumPy dtypes of 1, 2, 4, 8 or
16 bytes in native byte order (others are refused at construction), append
from NumPy, CuPy, PyTorch or any ``__cuda_array_interface__``/DLPack array, and
give their elements back with :meth:`to_numpy` or :meth:`flatten` (both copy:
flatten into a new :class:`DeviceBuffer`, which CuPy/PyTorch then read without
copying, or with ``out=`` into a buffer you reuse, stream-ordered with no host
wait).  Kernels read them in place (``gpudyn.numba``'s ``at``/``span``, the
device headers' ``at``/``span``/``for_each_span``); :meth:`size_async` puts
the count in device memory for them.  Only the contiguous StaticArray and
VmmArray export their storage itself (``__cuda_array_interface__``,
``__dlpack__``, ``as_buffer``: no copy).  Insertion algorithm:
``algorithm=`` one of ``"atomic"`` (0), ``"warp_scan"`` (1, default),
``"tensor_scan"`` (2).

Kernels push into the arrays through the device headers (``gpudyn/ggarray.cuh``,
``static_array.cuh``, ``vmm_array.cuh``) and gpudyn.numba, both given
:meth:`~GGArray.view_arg` by value (CuPy: examples/ggarray/cupy_push_back.py).  A push from a kernel that
cannot get memory returns false there, stores nothing and sets the array's
:attr:`status`; the next host call on the array (``len``, ``extend``,
``to_numpy``, ...) raises :class:`OutOfMemoryError` once (the status is then
cleared) and :meth:`check` raises it on demand.  Every element stored before
the failure is kept.

Streams: every call runs on the array's ``stream`` (None: the legacy default
stream).  A device array passed in is read only after the work its producer
queued: the stream named by its ``__cuda_array_interface__`` (v3), or, for a
CuPy array or PyTorch tensor that names none, that library's current stream.
NumPy inputs are copied on the array's stream.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _args, _deprecated, _view
from ._ffi import check, ffi, lib, stream_handle
from ._handle import OwnedHandle
from ._typing import ArrayLike, DeviceArrayLike, DTypeLike, StreamLike
from .buffer import DeviceBuffer, check_count, device_inputs, element_dtype, on_device, stated_count, stream_device
from .errors import GpudynError, InvalidArgumentError, OutOfMemoryError

if TYPE_CHECKING:
    from .heap import Heap

ALGORITHMS = {"atomic": 0, "warp_scan": 1, "tensor_scan": 2}
_ELEMENT_SIZES = (1, 2, 4, 8, 16)
#: Bits of :attr:`GGArray.status` (gpudyn_array_status_bits_t).
STATUS_ALLOCATION_FAILED = 1
STATUS_CAPACITY_EXCEEDED = 2
STATUS_WRONG_ELEMENT_SIZE = 4
STATUS_DESTINATION_TOO_SMALL = 8
_PUSH_BITS = STATUS_ALLOCATION_FAILED | STATUS_CAPACITY_EXCEEDED | STATUS_WRONG_ELEMENT_SIZE
_STATUS_WHY = {
    STATUS_ALLOCATION_FAILED: "a bucket could not be allocated (the GGArray's budget is used up: raise .budget)",
    STATUS_CAPACITY_EXCEEDED: "the capacity was exceeded",
    STATUS_WRONG_ELEMENT_SIZE: "a kernel used the view through a ref whose element type has another size "
    "than the array's dtype (e.g. ggarray_ref<long long> on an int32 array): "
    "its pushes returned false and its reads saw no elements",
    STATUS_DESTINATION_TOO_SMALL: "a flatten(out=...) found 'out' smaller than the elements and wrote nothing "
    "to it (pass a larger out; its size= array, or size_async(), gives the count "
    "on the device)",
}


def status_error(where: str, status: int) -> GpudynError:
    """The error reporting status bits `status` of array `where`: :class:`InvalidArgumentError`
    when a kernel used the wrong element type or a flatten(out=...) had too small an `out`
    (bugs to fix, not memory to add), else :class:`OutOfMemoryError`."""
    why = [text for bit, text in _STATUS_WHY.items() if status & bit & _PUSH_BITS]
    unknown = status & ~sum(_STATUS_WHY)
    if unknown:
        why.append(f"unknown status bits {unknown:#x}")
    causes = []
    if why or not status & STATUS_DESTINATION_TOO_SMALL:
        causes.append(
            f"a push from a kernel failed: {'; '.join(why) or 'no failure'}; the elements it refused "
            "were not stored, every element stored before is kept"
        )
    if status & STATUS_DESTINATION_TOO_SMALL:
        causes.append(_STATUS_WHY[STATUS_DESTINATION_TOO_SMALL])
    cls = (
        InvalidArgumentError
        if status & (STATUS_WRONG_ELEMENT_SIZE | STATUS_DESTINATION_TOO_SMALL)
        else OutOfMemoryError
    )
    return cls(f"gpudyn: {where}: {'; and '.join(causes)} (status {status}); the status is now cleared")


def _dtype(where: str, dtype: DTypeLike) -> np.dtype:
    return element_dtype(where, dtype, _ELEMENT_SIZES)


def _mask_dtype(where: str, dt: np.dtype) -> None:
    if dt.itemsize != 1 or dt.kind not in "bu":
        raise TypeError(f"gpudyn: {where} argument 'mask' has dtype {dt}, expected bool or uint8")


def _exact(where: str, value: Any, dt: np.dtype) -> np.ndarray:
    """``value`` as a 1-D array of ``dt``, refused unless ``dt`` holds it exactly:
    integer and bool dtypes take whole numbers in their range only (1.5, or 300
    into uint8: ValueError), float dtypes real numbers (rounded as NumPy does; a
    finite value that would overflow: ValueError), complex dtypes any number;
    non-numbers: TypeError."""
    if type(value) is int and dt.kind in "biu":  # the common case, without NumPy's conversions (any size)
        lo, hi = (0, 1) if dt.kind == "b" else (int(np.iinfo(dt).min), int(np.iinfo(dt).max))
        if lo <= value <= hi:
            return np.array([value], dtype=dt)
        raise InvalidArgumentError(
            f"gpudyn: {where} argument 'value' is {value}, which {dt} (the array's dtype) "
            f"cannot hold: expected {lo} <= value <= {hi}"
        )
    v = np.asarray(value).reshape(-1)
    if v.dtype == dt:
        return v
    if v.dtype.kind not in "biufc":
        raise TypeError(
            f"gpudyn: {where} argument 'value' is {value!r} ({v.dtype}), expected a number "
            f"{dt} (the array's dtype) holds"
        )
    why = None
    if v.dtype.kind == "c" and dt.kind != "c":
        why = "it has an imaginary part" if np.any(v.imag != 0) else None
        v = v.real
    if why is None and dt.kind in "biu":
        lo, hi = (0, 1) if dt.kind == "b" else (int(np.iinfo(dt).min), int(np.iinfo(dt).max))
        if v.dtype.kind == "f":
            if not (np.all(np.isfinite(v)) and np.all(np.floor(v) == v)):
                why = "it is not a whole number"
            elif v.size and not (v.min() >= lo and v.max() < hi + 1):  # lo and hi + 1: exact as floats
                why = f"expected {lo} <= value <= {hi}"
        elif v.size and not (lo <= int(v.min()) and int(v.max()) <= hi):
            why = f"expected {lo} <= value <= {hi}"
    with np.errstate(all="ignore"):
        out = v.astype(dt)
    if why is None and dt.kind == "f" and np.any(np.isfinite(v) & ~np.isfinite(out)):
        why = f"it overflows {dt}"
    if why is not None:
        raise InvalidArgumentError(
            f"gpudyn: {where} argument 'value' is {value!r}, which {dt} (the array's dtype) cannot hold exactly: {why}"
        )
    return out


class _Array(OwnedHandle):
    """Shared Python side of the three arrays; `_p` is the ABI prefix."""

    _p = ""
    _kernel_view: _view.KernelView
    _stream: Any  # the cffi gpudyn_stream_t of `stream`
    dtype: np.dtype
    _stream_size = True  # size() takes a stream
    STATUS_ALLOCATION_FAILED = STATUS_ALLOCATION_FAILED
    STATUS_CAPACITY_EXCEEDED = STATUS_CAPACITY_EXCEEDED
    STATUS_WRONG_ELEMENT_SIZE = STATUS_WRONG_ELEMENT_SIZE
    STATUS_DESTINATION_TOO_SMALL = STATUS_DESTINATION_TOO_SMALL

    def _init(self, handle_type: str, create: Any, options: Any, dtype: np.dtype, stream: StreamLike) -> None:
        self.dtype = dtype
        self.stream = stream
        out = ffi.new(handle_type + "*")
        check(create(out, options, self._stream))
        self._own(out[0], getattr(lib, self._p + "destroy"))
        #: The CUDA device the array belongs to: the stream's, else the one current at creation.
        self.device = stream_device(self._stream)

    def _fn(self, name: str) -> Any:
        self._h()  # ValueError once closed
        return getattr(lib, self._p + name)

    def _call(self, name: str) -> Any:
        """The ABI function `name`, after :meth:`check` (a kernel's failed push raises here)."""
        self.check()
        return self._fn(name)

    # ---- failures of pushes from kernels ----------------------------------------
    @property
    def status(self) -> int:
        """Status bits set by pushes from kernels that failed since creation,
        :meth:`clear_status` or :meth:`clear` (0: none; ``STATUS_ALLOCATION_FAILED``,
        ``STATUS_CAPACITY_EXCEEDED``, ``STATUS_WRONG_ELEMENT_SIZE``), and by a
        ``flatten(out=...)`` whose `out` was too small (``STATUS_DESTINATION_TOO_SMALL``).
        Synchronizes the array's stream; does not raise."""
        out = ffi.new("uint32_t*")
        check(self._fn("get_status")(self._handle, out, self._stream))
        return int(out[0])

    def clear_status(self) -> None:
        """Zeroes :attr:`status`; the array keeps what it holds and later pushes may succeed."""
        check(self._fn("clear_status")(self._handle, self._stream))

    def check(self) -> None:
        """Raises :class:`OutOfMemoryError` when a push from a kernel failed since the
        last check, :class:`InvalidArgumentError` when a kernel used a ref of the
        wrong element size or a ``flatten(out=...)`` had too small an `out` (the
        status is then cleared); every host call that waits for the device does
        this first (the stream-ordered ones -- :meth:`view_arg`,
        ``flatten(out=...)``, :meth:`size_async`, :meth:`clear` -- do not)."""
        status = self.status
        if status:
            self.clear_status()
            raise status_error(type(self).__name__, status)

    def view_arg(self) -> _view.ViewArg:
        """The array as a kernel argument: its view struct (``gpudyn_<array>_view_t``)
        taken now, as a structured NumPy scalar, passed by value to a CuPy
        ``RawKernel``/``RawModule`` kernel taking the view (see
        examples/ggarray/cupy_push_back.py) or to a Numba ``@cuda.jit`` kernel
        calling gpudyn.numba's device functions (its Numba type names the array
        kind and dtype: ``gpudyn.numba.ref_type``).  ``bytes(arg)`` is the C
        struct, for a kernel that takes the view by pointer.  A GGArray's queues
        the kernel that indexes its elements for ``at``/``span`` on the array's
        stream, after the work queued there before (kernels launched after it on
        that stream read every element stored so far).  No host wait: the status
        is not checked here, earlier kernels' failures are reported by the next
        call that waits (``len``, ``to_numpy``, :meth:`check`, ...)."""
        return _view.make_arg(self._kernel_view, self.dtype, self._view_bytes())

    def _view_bytes(self) -> bytes:
        raise NotImplementedError

    ref = _deprecated.attribute(None, "ref", "view_arg()", lambda self: self.view_arg())
    view_bytes = _deprecated.method(None, "view_bytes", "view_arg", bytes, " (bytes(arg) for the struct's bytes)")
    memory_stats = _deprecated.method(None, "memory_stats", "stats")

    def append(self, value: Any) -> None:
        """Appends one element, which the array's dtype must hold exactly (as
        :meth:`extend` refuses other dtypes): into integer and bool arrays whole
        numbers in their range only (1.5, or 300 into uint8: ValueError), into
        float arrays real numbers (rounded as NumPy does), into complex arrays
        any number; non-numbers: TypeError."""
        where = type(self).__name__ + ".append"
        if np.ndim(value) != 0:  # a sequence would append all of its elements
            raise TypeError(
                f"gpudyn: {where} argument 'value' has shape {np.shape(value)}, expected one number "
                "(extend appends an array)"
            )
        self.extend(_exact(where, value, self.dtype))

    def extend(self, values: ArrayLike, mask: ArrayLike | None = None, algorithm: str | int = "warp_scan") -> None:
        """Appends every element of the 1-D array `values` (NumPy: copied to the
        device first), or those whose `mask` entry is nonzero (bool/uint8 array of
        the same length).  All or nothing: :class:`OutOfMemoryError` leaves the array unchanged.
        Device arrays are read after their producer's stream (see the module doc).

        Refused before any copy or device work: NumPy inputs of more bytes than
        the device's memory (OutOfMemoryError at once, broadcast views included),
        other dtypes, and device arrays that are not C-contiguous device memory
        of the array's device (host, pinned or managed memory, another device's,
        unknown addresses: InvalidArgumentError; see
        ``gpudyn.buffer.as_device_array``)."""
        where = type(self).__name__ + ".extend"
        algo = _args.choice(where, "algorithm", algorithm, ALGORITHMS)
        self._h()
        # Host arrays: refused before they are copied to the device (every check here takes constant time).
        if isinstance(values, np.ndarray) and values.dtype.newbyteorder("=") != self.dtype:
            raise TypeError(
                f"gpudyn: {where} argument 'values' has dtype {values.dtype}, this array holds {self.dtype}"
            )
        if isinstance(mask, np.ndarray):
            _mask_dtype(where, mask.dtype)
        if mask is not None:
            vn, mn = stated_count(values), stated_count(mask)  # NumPy or device arrays, before either is read
            if vn is not None and mn is not None and vn != mn:
                raise InvalidArgumentError(f"gpudyn: {where} argument 'mask' has {mn} entries, values has {vn}")
        if isinstance(values, np.ndarray):
            check_count(where, "values", values, self.dtype.itemsize, self.device)
        if isinstance(mask, np.ndarray):
            check_count(where, "mask", mask, 1, self.device)
        if isinstance(values, np.ndarray) and values.dtype != self.dtype:
            values = values.astype(self.dtype)  # native byte order, same values
        # NumPy temporaries on the array's device (device arrays must be there), freed on our stream after the kernel
        with on_device(self.device), device_inputs(self.stream, self.device) as inputs:
            ptr, n, _ = inputs.array(values, where=where, name="values", accept=lambda dt: self._holds(where, dt))
            mptr = ffi.NULL
            if mask is not None:
                mp, mn, _ = inputs.array(mask, where=where, name="mask", accept=lambda dt: _mask_dtype(where, dt))
                if mn != n:
                    raise InvalidArgumentError(f"gpudyn: {where} argument 'mask' has {mn} entries, values has {n}")
                mptr = ffi.cast("const uint8_t*", mp)
            check(self._call("push_back")(self._handle, ffi.cast("const void*", ptr), n, mptr, algo, self._stream))

    def _holds(self, where: str, dt: np.dtype) -> None:
        if dt != self.dtype:
            raise TypeError(f"gpudyn: {where} argument 'values' has dtype {dt}, this array holds {self.dtype}")

    def __len__(self) -> int:
        out = ffi.new("uint64_t*")
        if self._stream_size:
            check(self._call("size")(self._handle, out, self._stream))
        return int(out[0])

    def to_numpy(self) -> np.ndarray:
        """The elements, copied to host memory."""
        n = len(self)
        out = np.empty(n, dtype=self.dtype)
        if n:
            check(self._fn("copy_to_host")(self._handle, ffi.cast("void*", out.ctypes.data), out.nbytes, self._stream))
        return out

    def flatten(
        self, out: DeviceArrayLike | None = None, stream: StreamLike = None, size: DeviceArrayLike | None = None
    ) -> Any:
        """The elements, copied into contiguous device memory in the order of
        :meth:`to_numpy` (a GGArray's LFVector after LFVector).  Always a copy
        (the copy's result is then shared zero-copy with CuPy, PyTorch or Numba
        through ``__cuda_array_interface__`` / DLPack).

        Without `out`: a new :class:`DeviceBuffer` of exactly the elements, on
        `stream` (None: the array's stream).  Waits for the device (it reads the
        size, as ``len()`` does, before it allocates).

        With `out` (a 1-D C-contiguous device array of the array's dtype on its
        device: a DeviceBuffer, CuPy, Numba or PyTorch array): no host wait and
        no allocation.  The copy is queued on `stream` (None: the array's
        stream) after the array's earlier calls and after the work queued on
        `out`'s own stream (its ``__cuda_array_interface__``); the size is taken
        on the device.  When the elements fit they are ``out``'s first
        elements (the rest of it is left as it was); when they do not, nothing
        is written to `out` and :attr:`status` gets
        ``STATUS_DESTINATION_TOO_SMALL``: the next call that waits
        (``len``, :meth:`check`, ...) raises InvalidArgumentError.  `size`: a
        device array of uint64 whose first entry receives the number of
        elements (either way), stream-ordered (e.g. a following kernel's loop
        bound).  Returns `out`.  Work on another stream that reads `out` must
        wait for `stream` (pass the consumer's stream as `stream`)."""
        where = type(self).__name__ + ".flatten"
        if out is None:
            if size is not None:
                raise InvalidArgumentError(
                    f"gpudyn: {where} argument 'size' needs 'out' (flatten(out=..., "
                    "size=...)); without out the size is len(result)"
                )
            n = len(self)
            with on_device(self.device):  # the output on the array's device
                buf = DeviceBuffer(n, self.dtype, stream=self.stream if stream is None else stream)
                if n:
                    check(self._fn("flatten")(self._handle, ffi.cast("void*", buf.ptr), buf.nbytes, buf._stream))
            return buf
        return self._flatten_async(where, out, stream, size)

    def _flatten_async(self, where: str, out: DeviceArrayLike, stream: StreamLike, size: DeviceArrayLike | None) -> Any:
        for name, arg in (("out", out), ("size", size)):
            if isinstance(arg, np.ndarray):
                raise TypeError(
                    f"gpudyn: {where} argument '{name}' is a NumPy array: flatten(out=...) writes "
                    "device memory (to_numpy() gives a host copy)"
                )

        def same_dtype(dt: np.dtype) -> None:
            if dt != self.dtype:
                raise TypeError(f"gpudyn: {where} argument 'out' has dtype {dt}, this array holds {self.dtype}")

        stream = self.stream if stream is None else stream
        s = stream_handle(stream)
        self._h()  # ValueError once closed, before anything is queued
        with on_device(self.device), device_inputs(stream, self.device) as inputs:
            ptr, n, _ = inputs.array(out, where=where, name="out", accept=same_dtype)
            sptr = self._size_out(inputs, where, size) if size is not None else ffi.NULL
            check(self._fn("flatten_async")(self._handle, ffi.cast("void*", ptr), n * self.dtype.itemsize, sptr, s))
        return out

    @staticmethod
    def _size_out(inputs: device_inputs, where: str, size: DeviceArrayLike) -> Any:
        """The device address of `size`'s first uint64 (a device array of one or more)."""
        if isinstance(size, np.ndarray):
            raise TypeError(
                f"gpudyn: {where} argument 'size' is a NumPy array: the count is written on the "
                "device (pass a device array of uint64)"
            )
        ptr, n, _ = inputs.array(size, dtype=np.uint64, where=where, name="size")
        if n < 1:
            raise InvalidArgumentError(f"gpudyn: {where} argument 'size' has no entries, expected at least one uint64")
        return ffi.cast("uint64_t*", ptr)

    def size_async(self, out: DeviceArrayLike | None = None, stream: StreamLike = None) -> Any:
        """The number of elements, written into device memory without a host
        wait: into the first entry of `out` (a device array of uint64), else into
        a new one-element uint64 :class:`DeviceBuffer`, stream-ordered on
        `stream` (None: the array's stream) after the array's earlier calls.  A
        kernel queued after it reads the count; ``int(buf.to_numpy()[0])`` copies
        it to the host (that waits).  Returns `out` or the new buffer.  No copy
        of the elements."""
        where = type(self).__name__ + ".size_async"
        stream = self.stream if stream is None else stream
        s = stream_handle(stream)
        self._h()
        with on_device(self.device), device_inputs(stream, self.device) as inputs:
            target = inputs.output(1, np.uint64) if out is None else out
            check(self._fn("size_async")(self._handle, self._size_out(inputs, where, target), s))
        return target

    def clear(self) -> None:
        """Drops the elements and keeps the memory: size 0, :attr:`status` zeroed
        (no exception for an earlier failure).  Stream-ordered."""
        check(self._fn("clear")(self._handle, self._stream))


class GGArray(_Array):
    """GGArray: `num_lfvectors` LFVectors whose buckets (first_bucket·2^b elements)
    are allocated inside kernels on demand.  :meth:`reserve` and :meth:`extend`
    map whole bucket rows into the array's bucket pool from the host (kernels
    then claim those buckets in place).  Every other bucket -- pushes from your
    own kernels past what was reserved, or all of them without a pool -- is
    bumped off the array's growth arena.  CUDA's device malloc heap is never used.

    Memory follows the output.  By default the arena is a virtual range that
    holds no memory until a kernel's bucket reaches it: the library's host
    thread maps device memory while the kernel runs, as much as the buckets
    take, so a kernel can store as much as the device can give with no size
    named first, and between launches the array holds its buckets (at most
    twice its elements' bytes, plus one first bucket per LFVector: 2 MiB for
    the defaults with int32) plus about 400 bytes of bookkeeping per LFVector.
    :meth:`clear` keeps the buckets (a produce / consume / clear loop maps
    nothing once its largest output fitted); :meth:`trim` gives them back.

    `budget`: None (default): kernels may map all of the device's memory, each
    mapping made while a kernel waits for it (a millisecond or two: reuse the
    array with :meth:`clear` rather than making one per launch); given: that
    much is mapped whole the first time a kernel could need it (kernels within
    it never wait) and kernels may take no more; `max_budget`: the most the budget may be raised to (None: 8x the
    budget, at most the device's memory; with neither given, the device's
    memory).  On a device without virtual memory management the budget is one
    run taken whole from the stream-ordered pool the first time a kernel could
    need it (None: 1 GiB, or half the free memory when that is less).  With
    `heap` (a :class:`gpudyn.Heap` shared with other arrays; leave both None),
    its mapped memory is the budget: the first time a kernel could need a
    bucket the array takes a run of the heap (its share of the free memory: the
    free bytes over the arrays using the heap that hold no run yet plus one, the
    share left to the heap's own mallocs -- half of it for an array alone; at
    least 2 MiB), and another, at least twice the largest refused bucket, at
    the next get_view / extend / reserve after a kernel was refused one;
    :meth:`close` gives the runs back.  Raise the budget between launches by
    assigning :attr:`budget`.  When a bucket finds no memory inside a kernel
    (the device has none left, or the budget is used up), the push that needed
    it returns false and stores nothing, :attr:`status` records it
    (OutOfMemoryError at the next host call, or :meth:`check`), and every
    stored element stays; once memory is free again the next launch can store
    the rest.  :meth:`extend` raises OutOfMemoryError with the array unchanged.

    `pool_bytes`: the pool's virtual range (0: the device's memory; None: no
    pool, every bucket from the heap)."""

    _p = "gpudyn_ggarray_"
    _kernel_view = _view.declare("ggarray", "GGArray", "gpudyn_ggarray_view_t", elements=True)

    def __init__(
        self,
        dtype: DTypeLike = np.int32,
        num_lfvectors: int = 512,
        first_bucket: int = 1024,
        *,
        pool_bytes: int | None = 0,
        budget: int | None = None,
        max_budget: int | None = None,
        heap: Heap | None = None,
        stream: StreamLike = None,
    ) -> None:
        w = "GGArray"
        dt = _dtype(w, dtype)
        num_lfvectors = _args.integer(w, "num_lfvectors", num_lfvectors, 1, _args.U32_MAX)
        first_bucket = _args.integer(w, "first_bucket", first_bucket, 32, 1 << 30)
        if first_bucket & (first_bucket - 1):
            raise InvalidArgumentError(
                f"gpudyn: {w} argument 'first_bucket' is {first_bucket}, expected a power of two in [32, 2^30]"
            )
        pool_bytes = (
            _args.U64_MAX if pool_bytes is None else _args.integer(w, "pool_bytes", pool_bytes, 0, _args.U64_MAX - 1)
        )
        # None keeps the library's default (0 is its spelling of "default": refused here).
        budget = 0 if budget is None else _args.integer(w, "budget", budget, 1)
        max_budget = 0 if max_budget is None else _args.integer(w, "max_budget", max_budget, 1)
        if heap is not None:
            from .heap import Heap

            if not isinstance(heap, Heap):
                raise TypeError(f"gpudyn: {w} argument 'heap' is a {type(heap).__name__}, expected a gpudyn.Heap")
            if budget or max_budget:
                raise InvalidArgumentError(
                    f"gpudyn: {w} arguments 'budget' and 'max_budget' must be None with 'heap' "
                    "(the heap's mapped memory is the budget)"
                )
        self._stream = stream_handle(stream)
        o = ffi.new("gpudyn_ggarray_options_t*")
        check(lib.gpudyn_ggarray_options_init(o))
        o.element_size = dt.itemsize
        o.num_lfvectors = num_lfvectors
        o.first_bucket_elements = first_bucket
        o.pool_bytes = pool_bytes
        o.budget_bytes = budget
        o.max_budget_bytes = max_budget
        # The heap's handle stays valid until the library counts this array as its user.
        with heap._using() if heap is not None else contextlib.nullcontext(ffi.NULL) as heap_handle:
            o.heap = heap_handle
            self._init("gpudyn_ggarray_t", lib.gpudyn_ggarray_create, o, dt, stream)
        self._heap = heap  # the heap outlives the array (its destroy refuses while we use it)

    def _budget(self) -> tuple[int, int]:
        now, mx = ffi.new("uint64_t*"), ffi.new("uint64_t*")
        check(self._fn("get_budget")(self._handle, now, mx))
        return int(now[0]), int(mx[0])

    @property
    def budget(self) -> int:
        """Bytes of device memory kernels may take for new buckets (what the
        array mapped for its arena, or will map; with a shared heap, the heap's
        mapped memory).  Assign a
        larger value to raise it between launches (kernels launched after that
        on this array's stream can use it; a given heap grows for all its users);
        a smaller value than now is a ValueError, above :attr:`max_budget` too."""
        return self._budget()[0]

    @budget.setter
    def budget(self, value: int) -> None:
        value = _args.integer("GGArray.budget", "budget", value, 1)
        now, mx = self._budget()
        if value < now:
            raise InvalidArgumentError(
                f"gpudyn: GGArray.budget is {now} bytes and can only be raised, not set to {value}"
            )
        check(self._fn("set_budget")(self._handle, value, self._stream))

    @property
    def max_budget(self) -> int:
        """The most :attr:`budget` may be raised to (the array's limit, or the shared heap's virtual range)."""
        return self._budget()[1]

    def trim(self) -> None:
        """Gives back the device memory the array holds beyond its elements: an
        empty array (e.g. after :meth:`clear`) gives back every bucket of its
        growth arena, a non-empty one the arena's memory past its last bucket;
        then the device's reserve of unmapped memory is released
        (:func:`gpudyn.trim`).  Waits for the array's stream; no kernel may be
        using the array meanwhile (as for :meth:`close`)."""
        check(self._fn("trim")(self._handle, self._stream))

    def reserve(self, capacity: int) -> None:
        capacity = _args.integer("GGArray.reserve", "capacity", capacity)
        check(self._call("reserve")(self._handle, capacity, self._stream))

    @property
    def capacity(self) -> int:
        out = ffi.new("uint64_t*")
        check(self._call("capacity")(self._handle, out, self._stream))
        return int(out[0])

    def stats(self) -> dict[str, int]:
        """{'size', 'capacity', 'allocated_bytes', 'element_bytes'}: elements, the
        elements the buckets can hold, the device memory the buckets hold (the
        pool's mapped rows and the growth arena's mapped memory), and size x
        itemsize.  Waits for the array's stream."""
        out = ffi.new("uint64_t*")
        check(self._call("allocated_bytes")(self._handle, out, self._stream))
        n = len(self)
        return {
            "size": n,
            "capacity": self.capacity,
            "allocated_bytes": int(out[0]),
            "element_bytes": n * self.dtype.itemsize,
        }

    def _view_bytes(self) -> bytes:
        """The gpudyn_ggarray_view_t's bytes (what :meth:`view_arg` holds).
        Queues the kernel that recomputes the ranges (the index of at() and the
        spans) on the array's stream; no host wait."""
        v = ffi.new("gpudyn_ggarray_view_t*")
        check(self._fn("get_view")(self._handle, v, self._stream))
        return bytes(ffi.buffer(v))


class _Contiguous(_Array):
    _view_type: str

    def _data(self) -> int:
        out = ffi.new("void**")
        check(self._call("data")(self._handle, out))
        return int(ffi.cast("uintptr_t", out[0]))

    @property
    def capacity(self) -> int:
        out = ffi.new("uint64_t*")
        check(self._call("capacity")(self._handle, out))
        return int(out[0])

    def stats(self) -> dict[str, int]:
        """{'size', 'capacity', 'allocated_bytes', 'element_bytes'}: elements, the
        elements the storage can hold, the device memory it holds, and size x
        itemsize (the same keys as :meth:`GGArray.stats`)."""
        out = ffi.new("uint64_t*")
        check(self._call("allocated_bytes")(self._handle, out))
        n = len(self)
        return {
            "size": n,
            "capacity": self.capacity,
            "allocated_bytes": int(out[0]),
            "element_bytes": n * self.dtype.itemsize,
        }

    @property
    def __cuda_array_interface__(self) -> dict:
        """Zero-copy view of the current elements (valid until the array changes)."""
        # `stream`: our pending writes are on our stream; consumers wait for it (CAI v3:
        # 1 names the legacy default stream, as 0 is not allowed).
        s = int(ffi.cast("uintptr_t", self._stream))
        return {
            "shape": (len(self),),
            "typestr": self.dtype.str,
            "data": (self._data(), False),
            "version": 3,
            "strides": None,
            "stream": s if s != 0 else 1,
        }

    def as_buffer(self) -> DeviceBuffer:
        """Zero-copy :class:`DeviceBuffer` over the current elements (CAI and DLPack;
        keeps this array alive; valid until the array changes)."""
        return DeviceBuffer._wrap(self._data(), (len(self),), self.dtype, self, stream=self.stream)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        """DLPack export of the current elements, zero-copy (see :meth:`as_buffer`)."""
        return self.as_buffer().__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.as_buffer().__dlpack_device__()

    def _view_bytes(self) -> bytes:
        """The view struct's bytes (what :meth:`view_arg` holds); no host wait."""
        v = ffi.new(self._view_type + "*")
        check(self._fn("get_view")(self._handle, v))
        return bytes(ffi.buffer(v))


class StaticArray(_Contiguous):
    """Capacity fixed at creation; appending beyond it raises OutOfMemoryError and stores nothing."""

    _p = "gpudyn_static_array_"
    _view_type = "gpudyn_static_array_view_t"
    _kernel_view = _view.declare("static_array", "StaticArray", _view_type, elements=True)

    def __init__(self, capacity: int, dtype: DTypeLike = np.int32, stream: StreamLike = None) -> None:
        dt = _dtype("StaticArray", dtype)
        capacity = _args.integer("StaticArray", "capacity", capacity, 1)
        self._stream = stream_handle(stream)
        o = ffi.new("gpudyn_static_array_options_t*")
        check(lib.gpudyn_static_array_options_init(o))
        o.element_size = dt.itemsize
        o.capacity = capacity
        self._init("gpudyn_static_array_t", lib.gpudyn_static_array_create, o, dt, stream)


class VmmArray(_Contiguous):
    """One virtual range of `max_capacity` elements; :meth:`reserve` maps more
    physical memory at its end (no copy, the address never changes)."""

    _p = "gpudyn_vmm_array_"
    _view_type = "gpudyn_vmm_array_view_t"
    _kernel_view = _view.declare("vmm_array", "VmmArray", _view_type, elements=True)

    def __init__(
        self, dtype: DTypeLike = np.int32, initial_capacity: int = 0, max_capacity: int = 0, stream: StreamLike = None
    ) -> None:
        dt = _dtype("VmmArray", dtype)
        initial_capacity = _args.integer("VmmArray", "initial_capacity", initial_capacity)
        max_capacity = _args.integer("VmmArray", "max_capacity", max_capacity)
        self._stream = stream_handle(stream)
        o = ffi.new("gpudyn_vmm_array_options_t*")
        check(lib.gpudyn_vmm_array_options_init(o))
        o.element_size = dt.itemsize
        o.initial_capacity = initial_capacity
        o.max_capacity = max_capacity
        self._init("gpudyn_vmm_array_t", lib.gpudyn_vmm_array_create, o, dt, stream)

    def reserve(self, capacity: int) -> None:
        capacity = _args.integer("VmmArray.reserve", "capacity", capacity)
        check(self._call("reserve")(self._handle, capacity, self._stream))
