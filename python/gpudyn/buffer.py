"""DeviceBuffer: device memory owned by Python, shared zero-copy with CuPy,
PyTorch and Numba through ``__cuda_array_interface__`` (v3) and DLPack."""

from __future__ import annotations

import ctypes
import functools
import itertools
import math
import numbers
import sys
import threading
from typing import Any

import numpy as np

from . import _args
from ._ffi import check, ffi, lib, stream_handle, stream_value, wait_for
from ._typing import ArrayLike, DTypeLike, ShapeLike, StreamLike
from .errors import InvalidArgumentError, OutOfMemoryError

# DLPack (unversioned ABI, understood by every current consumer).
_KDL_CUDA = 2
_DL_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}  # kDLInt, kDLUInt, kDLFloat, kDLComplex, kDLBool
_CAI_LEGACY_DEFAULT_STREAM = 1  # the CAI v3 spelling of the legacy default stream (0 is not allowed)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]

# Exported tensors alive in a consumer: id -> (owner, managed struct, shape array).
_exports: dict[int, tuple] = {}
_exports_lock = threading.Lock()
_export_ids = itertools.count(1)


@_DELETER
def _dl_deleter(managed_ptr: Any) -> None:
    ctx = managed_ptr.contents.manager_ctx
    with _exports_lock:
        _exports.pop(ctx, None)


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_CAPSULE_NAME = b"dltensor"


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule: Any) -> None:
    # A capsule never consumed still owns the tensor: release it.  A consumed
    # one was renamed "used_dltensor" and the consumer calls the deleter.
    cap = ctypes.cast(capsule, ctypes.py_object)
    if _capsule_is_valid(cap, _CAPSULE_NAME):
        ptr = _capsule_get_pointer(cap, _CAPSULE_NAME)
        managed = ctypes.cast(ptr, ctypes.POINTER(_DLManagedTensor))
        managed.contents.deleter(managed)


def element_dtype(where: str, dtype: DTypeLike, sizes: Any = None) -> np.dtype:
    """``dtype`` as a NumPy dtype a device array can hold: booleans, integers,
    floats or complex numbers in native byte order (DLPack and the CUDA array
    interface describe nothing else), of ``sizes`` bytes when given.  TypeError
    naming the dtype otherwise."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise TypeError(f"gpudyn: {where} argument 'dtype' is {dtype!r}: {exc}") from None
    accepted = "a native-byte-order bool, integer, float or complex dtype"
    if sizes is not None:
        accepted += " of " + ", ".join(map(str, sizes[:-1])) + f" or {sizes[-1]} bytes"
    if dt.kind not in _DL_CODES or dt.hasobject or dt.subdtype is not None or dt.fields is not None:
        raise TypeError(f"gpudyn: {where} argument 'dtype' is {dt} ({dt.str}), expected {accepted}")
    if dt.kind in "fc" and dt.itemsize > 8 * (1 + (dt.kind == "c")):
        # x87 long double (padded to 16 bytes) is no IEEE format a GPU, DLPack or CUDA knows
        raise TypeError(
            f"gpudyn: {where} argument 'dtype' is {dt} ({dt.str}), expected {accepted}; "
            "extended-precision floats have no device type"
        )
    if not dt.isnative:
        raise TypeError(
            f"gpudyn: {where} argument 'dtype' is {dt.str} (non-native byte order), expected {accepted}; "
            "convert with .astype(dtype.newbyteorder('='))"
        )
    if sizes is not None and dt.itemsize not in sizes:
        raise TypeError(f"gpudyn: {where} argument 'dtype' is {dt} ({dt.itemsize} bytes), expected {accepted}")
    return dt


def current_device() -> int:
    dev = ffi.new("int32_t*")
    check(lib.gpudyn_get_device(dev))
    return int(dev[0])


def stream_device(stream: Any) -> int:
    """The device that memory or a structure made on ``stream`` (a
    gpudyn_stream_t) belongs to: the stream's device, or the current device
    for the default streams (the library's rule, gpudyn_stream_get_device)."""
    dev = ffi.new("int32_t*")
    check(lib.gpudyn_stream_get_device(stream, dev))
    return int(dev[0])


def pointer_device(ptr: int) -> int:
    """The device whose memory ``ptr`` points into (cudaPointerGetAttributes);
    -1 for memory that is no device's own (host, pinned, managed, unknown)."""
    dev = ffi.new("int32_t*")
    check(lib.gpudyn_pointer_get_device(ffi.cast("const void*", ptr), dev))
    return int(dev[0])


_total_memory: dict[int, int] = {}  # device -> its total memory in bytes (it never changes)


def device_memory(device: int) -> int:
    """Total memory of ``device`` in bytes (gpudyn_get_device_info, asked once per device)."""
    total = _total_memory.get(device)
    if total is None:
        info = ffi.new("gpudyn_device_info_t*")
        info.struct_size = ffi.sizeof("gpudyn_device_info_t")
        check(lib.gpudyn_get_device_info(device, info))
        total = _total_memory[device] = int(info.total_memory)
    return total


def check_count(
    where: str, name: str, values: ArrayLike, itemsize: int, device: int | None, count: int | None = None
) -> int | None:
    """Refuses, in constant time and before anything is read, copied or queued,
    an input of more entries than ``device`` can hold: ``count`` (or the count
    of host input ``values``, see :func:`gpudyn._args.element_count`: a
    broadcast NumPy view counts every entry it shows) times ``itemsize`` (the
    bytes of one entry on the device) beyond 2**64 - 1 or beyond the device's
    total memory raises :class:`OutOfMemoryError` naming the argument, the count
    and the device's memory (the call would need more device memory than the
    device has).  ``device`` None (a structure that never opened) bounds by
    2**64 - 1 only.  Returns the count (None for device arrays, which
    :func:`as_device_array` bounds by their stated size)."""
    n = _args.element_count(values) if count is None else count
    if n is None:
        return None
    nbytes = n * itemsize  # a Python int: no wrap-around
    limit = _args.U64_MAX if device is None else device_memory(device)
    if nbytes > limit:
        than = "2**64 - 1" if device is None else f"the {limit} bytes of memory of device {device}"
        raise OutOfMemoryError(
            f"gpudyn: {where} argument '{name}' has {n} entries of {itemsize} bytes on the "
            f"device: {nbytes} bytes, more than {than} (refused before any copy)"
        )
    return n


def host_input(
    where: str,
    name: str,
    values: ArrayLike,
    dtype: DTypeLike,
    device: int | None,
    *,
    addresses: bool = False,
    hint: str = "",
) -> np.ndarray | None:
    """The checks every bulk call makes first, before any device call: the count
    (:func:`check_count`, constant time), then the values of host input
    (:func:`gpudyn._args.host_integers`; with ``addresses``,
    :func:`gpudyn._args.host_addresses`: 64-bit integer dtypes only).  Returns
    them as a 1-D ``dtype`` (uint64 for addresses) NumPy array, or None for a
    device array (checked by :func:`as_device_array`)."""
    check_count(where, name, values, np.dtype(np.uint64 if addresses else dtype).itemsize, device)
    if addresses:
        return _args.host_addresses(where, name, values, hint)
    return _args.host_integers(where, name, values, dtype)


class on_device:
    """``with on_device(d):`` makes device ``d`` current on the calling thread
    for the block and gives the thread its own current device back after it
    (nothing is switched when ``d`` is current already).  Memory allocated for a
    structure (outputs, temporary copies of NumPy inputs) is allocated, and
    freed, in such a block: gpudyn_device_alloc allocates on the current
    device's default stream when the stream is a default one."""

    __slots__ = ("device", "_before")

    def __init__(self, device: int | None) -> None:
        self.device = device

    def __enter__(self) -> on_device:
        self._before = current_device()
        if self._before != self.device:
            check(lib.gpudyn_set_device(self.device))
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._before != self.device:
            status = lib.gpudyn_set_device(self._before)
            if exc_type is None:  # never hide the block's own exception
                check(status)


def _uses_memory(fn: Any) -> Any:
    """A DeviceBuffer method that reads, writes or exports its memory: ValueError
    once the buffer, or the structure it is a view of, is closed; while it runs,
    that structure's close() on another thread waits (see _handle.OwnedHandle)."""

    @functools.wraps(fn)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        owner = self._owner
        entered = owner is not None and hasattr(owner, "_enter") and owner._enter()
        try:
            if self._closed:
                raise InvalidArgumentError(f"gpudyn: DeviceBuffer.{fn.__name__}: this DeviceBuffer is closed")
            # A view (DeviceBuffer._wrap): its owner is a structure, or a buffer, that may be closed.
            if owner is not None and (getattr(owner, "_handle", True) is None or getattr(owner, "_closed", False)):
                raise InvalidArgumentError(
                    f"gpudyn: DeviceBuffer.{fn.__name__}: this DeviceBuffer is a view of a "
                    f"{type(owner).__name__} that is closed"
                )
            return fn(self, *args, **kwargs)
        finally:
            if entered:
                owner._leave()

    return call


def _raw_handle(stream: StreamLike) -> bool:
    """True for a stream given as an integer handle other than the default
    streams' spellings (0, 1, 2): nothing keeps that stream alive."""
    return isinstance(stream, (int, np.integer)) and not isinstance(stream, (bool, np.bool_)) and int(stream) > 2


class DeviceBuffer:
    """An owned, C-contiguous device array.

    Memory is allocated and freed stream-ordered on ``stream`` (None: the legacy
    default stream; or an int handle, a ``__cuda_stream__`` object, a CuPy,
    PyTorch or Numba stream).  The buffer can be viewed without copying by CuPy
    (``cupy.asarray(buf)``), PyTorch (``torch.from_dlpack(buf)`` or
    ``torch.as_tensor(buf, device='cuda')``) and Numba
    (``numba.cuda.as_cuda_array(buf)``): its ``__cuda_array_interface__`` names
    ``stream`` so consumers wait for work queued there, and ``__dlpack__(stream=s)``
    makes ``s`` wait for it.  NumPy data moves by explicit copy only
    (:meth:`from_numpy`, :meth:`to_numpy`); ``np.asarray(buf)`` raises TypeError.

    A buffer keeps its stream object alive.  A raw integer handle it cannot
    keep: the user may destroy that stream first, so a buffer on a raw handle
    that is garbage-collected (not closed) frees its memory after waiting for
    the whole device, never touching the handle; so does any free once the
    stream object no longer gives its handle (a closed cuda.core Stream).
    :meth:`close` (or ``with``) frees stream-ordered while the stream exists.
    """

    def __init__(self, shape: ShapeLike, dtype: DTypeLike = np.uint8, stream: StreamLike = None) -> None:
        dims: Any = shape
        if isinstance(shape, (int, np.integer, float, np.floating, bool, np.bool_)):
            dims = (shape,)
        elif isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
            raise TypeError(
                f"gpudyn: DeviceBuffer argument 'shape' is {shape!r}, expected an integer or a sequence of integers"
            )
        self.shape = tuple(_args.integer("DeviceBuffer", "shape", s, 0, 1 << 62) for s in dims)
        self.dtype = element_dtype("DeviceBuffer", dtype)
        self.stream = stream
        self._stream = stream_handle(stream)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        if self.nbytes > _args.U64_MAX:
            raise OutOfMemoryError(
                f"gpudyn: DeviceBuffer of shape {self.shape} and dtype {self.dtype} would need "
                f"{self.nbytes} bytes, more than 2**64 - 1"
            )
        # The stream's device (the current one for the default streams): the memory's.
        self.device = stream_device(self._stream)
        if self.nbytes > device_memory(self.device):
            raise OutOfMemoryError(
                f"gpudyn: DeviceBuffer of shape {self.shape} and dtype {self.dtype} would need "
                f"{self.nbytes} bytes, more than the {device_memory(self.device)} bytes of "
                f"memory of device {self.device}"
            )
        self._ptr = ffi.NULL
        if self.nbytes:
            out = ffi.new("void**")
            with on_device(self.device):
                check(lib.gpudyn_device_alloc(out, self.nbytes, self._stream))
            self._ptr = out[0]
        self._owner = None

    @classmethod
    def _wrap(cls, ptr: int, shape: tuple, dtype: DTypeLike, owner: Any, stream: StreamLike = None) -> DeviceBuffer:
        """A non-owning view of memory kept alive by ``owner`` (used by structures)."""
        self = cls.__new__(cls)
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.stream = stream
        self._stream = stream_handle(stream)
        # The owner's device (a structure's, or a buffer's), not whichever is current.
        owner_device = getattr(owner, "device", None)
        self.device = current_device() if owner_device is None else int(owner_device)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        self._ptr = ffi.cast("void*", ptr)
        self._owner = owner
        return self

    # ---- life time --------------------------------------------------------
    _closed = False  # set by close()

    def _stream_closed(self) -> bool:
        """True when the stream object no longer names the handle the buffer
        was made with (a cuda.core Stream that was closed): nothing to free on."""
        if self.stream is None or isinstance(self.stream, (int, np.integer)):
            return False
        try:
            return stream_value(self.stream) != int(ffi.cast("uintptr_t", self._stream))
        except Exception:  # noqa: BLE001 -- a closed stream may raise anything when asked
            return True

    def _free_off_stream(self, ptr: int) -> None:
        """Frees `ptr` once all of the device's work is done, on none of the user's streams."""
        with on_device(self.device):
            check(lib.gpudyn_device_synchronize())
            check(lib.gpudyn_device_free(ptr, ffi.NULL))

    def close(self) -> None:
        """Frees the memory now (stream-ordered; a view only lets go of it); later
        use raises ValueError.  Two threads closing at once free it once."""
        self._release(finalizing=False)

    def _release(self, finalizing: bool) -> None:
        # dict.setdefault is atomic: every closing thread gets the same lock.
        with self.__dict__.setdefault("_close_lock", threading.Lock()):
            if self._owner is None and self._ptr != ffi.NULL:
                # Off the stream when it may be gone: a closed stream object, or (collected,
                # so nobody vouches for it) a raw handle, e.g. CuPy's Stream.ptr outliving
                # its Stream.  A failure there raises before the pointer is dropped.
                if self._stream_closed() or (finalizing and _raw_handle(self.stream)):
                    self._free_off_stream(self._ptr)
                else:
                    with on_device(self.device):  # a default stream is the buffer's device's
                        check(lib.gpudyn_device_free(self._ptr, self._stream))
            self._ptr = ffi.NULL
            self._owner = None
            self.nbytes = 0
            self._closed = True

    def __del__(self) -> None:
        try:
            self._release(finalizing=True)
        except Exception:
            pass

    def __enter__(self) -> DeviceBuffer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- properties -------------------------------------------------------
    @property
    def ptr(self) -> int:
        return int(ffi.cast("uintptr_t", self._ptr))

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def __repr__(self) -> str:
        return f"DeviceBuffer(shape={self.shape}, dtype={self.dtype}, ptr=0x{self.ptr:x}, device={self.device})"

    def _stream_int(self) -> int:
        return int(ffi.cast("uintptr_t", self._stream))

    # ---- NumPy by copy ----------------------------------------------------
    @classmethod
    def from_numpy(cls, array: ArrayLike, stream: StreamLike = None) -> DeviceBuffer:
        """A copy of ``array`` (queued on ``stream``; non-native byte order is
        converted to native, values unchanged).  An array of more bytes than the
        stream's device has memory (a broadcast view of 2**40 entries, say) is
        refused at once (OutOfMemoryError), before anything is copied."""
        host = np.asarray(array)
        check_count("DeviceBuffer.from_numpy", "array", host, host.dtype.itemsize, stream_device(stream_handle(stream)))
        if not host.dtype.isnative:
            host = host.astype(host.dtype.newbyteorder("="))
        host = np.ascontiguousarray(host)
        buf = cls(host.shape, host.dtype, stream=stream)
        buf.copy_from_host(host)
        return buf

    @_uses_memory
    def copy_from_host(self, array: ArrayLike) -> None:
        """Copies ``array`` (a NumPy array or anything ``np.asarray`` takes, as
        many elements as the buffer) into the buffer; returns once it is copied.
        No value changes silently: the array's dtype is the buffer's, or one
        NumPy casts to it within its kind (``np.can_cast(src, dst, 'same_kind')``:
        no float into an integer buffer, no complex into a float one: TypeError);
        integers into an integer buffer must also fit its range (300 into uint8
        is a ValueError, not 44).  Only a narrower float dtype rounds, as NumPy
        does.  Another element count is refused first, in constant time (a
        broadcast view of 2**40 entries is never read)."""
        host = np.asarray(array)
        if host.size != self.size:
            raise InvalidArgumentError(
                f"gpudyn: DeviceBuffer.copy_from_host: the host array has {host.size} elements, the buffer {self.size}"
            )
        src, dst = host.dtype, self.dtype
        if src != dst:
            if src.kind in "biu" and dst.kind in "iu":
                info = np.iinfo(dst)
                once = _args._each_element_once(host)
                if host.size and not (info.min <= int(once.min()) and int(once.max()) <= info.max):
                    bad = int(once.min()) if int(once.min()) < info.min else int(once.max())
                    raise InvalidArgumentError(
                        f"gpudyn: DeviceBuffer.copy_from_host: the host array holds {bad}, "
                        f"which {dst} (the buffer's dtype) cannot hold: expected "
                        f"{info.min} <= value <= {info.max}"
                    )
            elif not np.can_cast(src, dst, "same_kind"):
                raise TypeError(
                    f"gpudyn: DeviceBuffer.copy_from_host: the host array has dtype {src}, which does "
                    f"not convert to {dst} (the buffer's dtype) without changing values; "
                    f"convert it explicitly (array.astype({dst.name!r}))"
                )
        host = np.ascontiguousarray(host, dtype=dst)
        if host.nbytes != self.nbytes:
            raise InvalidArgumentError(f"gpudyn: host array has {host.nbytes} bytes, buffer has {self.nbytes}")
        if self.nbytes:
            with on_device(self.device):  # the default stream is the buffer's device's
                check(
                    lib.gpudyn_memcpy(
                        self._ptr, ffi.from_buffer(host), self.nbytes, lib.GPUDYN_MEMCPY_HOST_TO_DEVICE, self._stream
                    )
                )
                # pageable source: keep the host array alive until the copy is done
                check(lib.gpudyn_stream_synchronize(self._stream))

    @_uses_memory
    def to_numpy(self) -> np.ndarray:
        host = np.empty(self.shape, dtype=self.dtype)
        if self.nbytes:
            with on_device(self.device):  # after the work on the buffer's device's default stream
                check(
                    lib.gpudyn_memcpy(
                        ffi.from_buffer(host), self._ptr, self.nbytes, lib.GPUDYN_MEMCPY_DEVICE_TO_HOST, self._stream
                    )
                )
                check(lib.gpudyn_stream_synchronize(self._stream))
        return host

    @_uses_memory
    def fill_bytes(self, value: int) -> None:
        value = _args.integer("DeviceBuffer.fill_bytes", "value", value, 0, 255)
        with on_device(self.device):
            check(lib.gpudyn_memset(self._ptr, value, self.nbytes, self._stream))

    def __array__(self, dtype: DTypeLike | None = None, copy: bool | None = None) -> np.ndarray:
        # As CuPy does: device memory never becomes a NumPy array implicitly (a silent
        # device-to-host copy, or a 0-d object array, would both surprise).
        raise TypeError(
            "gpudyn: a DeviceBuffer lives in device memory and is not converted to a NumPy "
            "array implicitly; use buf.to_numpy() to copy it to the host"
        )

    # ---- zero-copy exports ------------------------------------------------
    @property
    @_uses_memory
    def __cuda_array_interface__(self) -> dict:
        s = self._stream_int()
        return {
            "shape": self.shape,
            "typestr": self.dtype.str,
            "data": (self.ptr, False),
            "version": 3,
            "strides": None,
            # Work on our stream may still be writing: consumers wait on it.
            "stream": s if s != 0 else _CAI_LEGACY_DEFAULT_STREAM,
        }

    @_uses_memory
    def __dlpack_device__(self) -> tuple[int, int]:
        return (_KDL_CUDA, self.device)

    @_uses_memory
    def __dlpack__(
        self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: bool | None = None
    ) -> Any:
        if copy:
            raise BufferError("gpudyn: DeviceBuffer exports without copying only (copy=True requested)")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"gpudyn: DeviceBuffer lives on {self.__dlpack_device__()}, not {dl_device}")
        if stream != -1:
            # DLPack: None is the legacy default stream (1); -1 asks for no synchronization.
            # Make the consumer's stream wait for the work queued on ours, host not blocked.
            consumer = _CAI_LEGACY_DEFAULT_STREAM if stream is None else stream_value(stream)
            with on_device(self.device):  # default streams are the buffer's device's
                wait_for(ffi.cast("gpudyn_stream_t", consumer), self._stream_int())
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * max(ndim, 1))(*self.shape)
        managed = _DLManagedTensor()
        t = managed.dl_tensor
        t.data = self.ptr or None
        t.device = _DLDevice(_KDL_CUDA, self.device)
        t.ndim = ndim
        t.dtype = _DLDataType(_DL_CODES[self.dtype.kind], self.dtype.itemsize * 8, 1)
        t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = None  # compact row-major
        t.byte_offset = 0
        ctx = next(_export_ids)
        managed.manager_ctx = ctx
        managed.deleter = _dl_deleter
        with _exports_lock:
            _exports[ctx] = (self, managed, shape)
        return _capsule_new(ctypes.addressof(managed), _CAPSULE_NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


def _producer_stream(obj: Any, cai: dict) -> int | None:
    """The stream the producer of ``obj`` queued its writes on, or None when no
    synchronization is needed.  CAI v3 ``stream``: 1 legacy default, 2 per-thread
    default, else a handle; an explicit None means none.  Without the field
    (PyTorch exports CAI v2), a CuPy array or PyTorch tensor is taken as written
    on its library's current stream, the convention of both libraries; the
    library is asked only when already imported."""
    if "stream" in cai:
        s = cai["stream"]
        return None if s is None else int(s)
    lib_name = type(obj).__module__.partition(".")[0]
    mod = sys.modules.get(lib_name)
    if mod is None:
        return None
    if lib_name == "cupy":
        return int(mod.cuda.get_current_stream().ptr)
    if lib_name == "torch":
        return int(mod.cuda.current_stream(obj.device).cuda_stream)
    return None


# DLPack device types (dlpack.h): where an exported tensor's memory is.
_DL_DEVICE_NAMES = {
    1: "host memory (kDLCPU)",
    2: "CUDA device memory (kDLCUDA)",
    3: "pinned host memory (kDLCUDAHost)",
    13: "CUDA managed memory (kDLCUDAManaged)",
}
_NOT_DEVICE_MEMORY = "host, pinned or managed memory, or an address CUDA does not know"


def _layout(where: str, name: str, cai: dict) -> tuple[int, int, np.dtype, int]:
    """(ptr, n, dtype, nbytes) of a ``__cuda_array_interface__``, checked to
    describe a C-contiguous array that fits the address space: ``shape`` of
    non-negative integers, ``strides`` None or those of a C-contiguous array
    (broadcast views, zero strides, refused), ``data`` a pointer in [0, 2**64)
    whose ``shape x itemsize`` bytes end inside the address space.  The
    ``readonly`` flag is accepted (gpudyn only reads its inputs); a ``mask`` is
    refused (NotImplementedError, as Numba: masked-out entries would be read as
    valid)."""
    if not isinstance(cai, dict):
        raise TypeError(
            f"gpudyn: {where} argument '{name}' has a __cuda_array_interface__ that is a "
            f"{type(cai).__name__}, expected a dict"
        )
    if cai.get("mask") is not None:
        raise NotImplementedError(
            f"gpudyn: {where} argument '{name}' is a masked CUDA array (its "
            "__cuda_array_interface__ has a 'mask'), which gpudyn does not read"
        )
    try:
        dt = np.dtype(cai["typestr"])
    except (KeyError, TypeError, ValueError) as exc:
        raise TypeError(
            f"gpudyn: {where} argument '{name}' has a __cuda_array_interface__ typestr "
            f"{cai.get('typestr')!r} that is no dtype ({exc})"
        ) from None
    if not dt.isnative:
        raise TypeError(
            f"gpudyn: {where} argument '{name}' has dtype {dt.str} (non-native byte order); "
            "convert it to native byte order first"
        )
    bad = f"gpudyn: {where} argument '{name}' has a __cuda_array_interface__ whose"

    def ints(field: str, value: Any) -> Any:
        if not isinstance(value, (tuple, list)) or not all(
            isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in value
        ):
            raise InvalidArgumentError(f"{bad} {field} is {value!r}, expected a tuple of integers")
        return tuple(int(v) for v in value)

    shape = ints("shape", cai.get("shape"))
    if any(e < 0 for e in shape):
        raise InvalidArgumentError(f"{bad} shape {shape} has a negative extent")
    n = math.prod(shape)
    nbytes = n * dt.itemsize
    if nbytes > _args.U64_MAX:
        raise InvalidArgumentError(
            f"{bad} shape {shape} of {dt.itemsize}-byte elements is {nbytes} bytes, more than 2**64 - 1"
        )
    data = cai.get("data")
    if not (isinstance(data, (tuple, list)) and len(data) == 2):
        raise InvalidArgumentError(f"{bad} data is {data!r}, expected (pointer, readonly)")
    ptr = 0 if data[0] is None else data[0]  # None: Numba's NULL (an empty array's)
    if (
        not isinstance(ptr, (numbers.Integral, np.integer))
        or isinstance(ptr, (bool, np.bool_))
        or not 0 <= int(ptr) <= _args.U64_MAX
    ):
        raise InvalidArgumentError(f"{bad} data pointer is {ptr!r}, expected an integer in [0, 2**64 - 1]")
    ptr = int(ptr)
    if ptr + nbytes > 1 << 64:
        raise InvalidArgumentError(f"{bad} {nbytes} bytes from 0x{ptr:x} run past the end of the address space")
    strides = cai.get("strides")
    if strides is not None and n > 1:
        strides = ints("strides", strides)
        if len(strides) != len(shape):
            raise InvalidArgumentError(f"{bad} strides {strides} do not match its shape {shape}")
        acc = dt.itemsize
        for extent, stride in zip(reversed(shape), reversed(strides)):
            if extent > 1 and stride != acc:  # the stride of an axis of one element is never used
                raise InvalidArgumentError(
                    f"gpudyn: {where} argument '{name}' must be C-contiguous (shape {shape}, strides {strides}; a "
                    "broadcast view has zero strides): copy it first (cupy.ascontiguousarray, tensor.contiguous())"
                )
            acc *= extent
    return ptr, n, dt, nbytes


def stated_count(obj: Any) -> int | None:
    """The entries of a NumPy array or of a device array's
    ``__cuda_array_interface__`` (its shape; nothing read), or None when that
    does not tell (DLPack only, a malformed interface: refused later, by
    :func:`as_device_array`)."""
    if isinstance(obj, np.ndarray):
        return int(obj.size)
    try:
        cai = getattr(obj, "__cuda_array_interface__", None)
        return None if cai is None else _layout("", "", cai)[1]
    except Exception:  # noqa: BLE001 -- as_device_array names what is wrong
        return None


def _dlpack_device(where: str, name: str, obj: Any, device: int | None) -> None:
    """Refuses a DLPack producer whose ``__dlpack_device__`` is not CUDA device
    memory of ``device``, before it is imported."""
    ask = getattr(obj, "__dlpack_device__", None)
    if ask is None:
        return
    dev_type, dev_id = (int(v) for v in ask())
    if dev_type != 2:
        what = _DL_DEVICE_NAMES.get(dev_type, f"DLPack device type {dev_type}")
        raise InvalidArgumentError(
            f"gpudyn: {where} argument '{name}' is {what}, not CUDA device memory: pass a "
            "NumPy array (copied for you) or a device array"
        )
    if device is not None and dev_id != device:
        raise InvalidArgumentError(
            f"gpudyn: {where} argument '{name}' is memory of device {dev_id}, but this "
            f"structure lives on device {device}: copy it to device {device} first"
        )


def _device_memory_of(where: str, name: str, ptr: int, nbytes: int, device: int) -> None:
    """Refuses ``nbytes`` bytes at ``ptr`` unless CUDA reports their first and
    their last byte as memory of ``device`` (gpudyn_pointer_get_device):
    another device's memory, host memory (pageable or pinned), managed memory
    and addresses CUDA does not know (0x1000, freed memory, past the end of an
    allocation) never reach a kernel."""
    ends = (
        [("first byte", ptr)]
        if nbytes <= 1
        else [("first byte", ptr), (f"last byte ({nbytes} bytes on)", ptr + nbytes - 1)]
    )
    for which, address in ends:
        owner = pointer_device(address)
        if owner == device:
            continue
        if owner >= 0:
            raise InvalidArgumentError(
                f"gpudyn: {where} argument '{name}' is memory of device {owner}, but this "
                f"structure lives on device {device}: copy it to device {device} first"
            )
        raise InvalidArgumentError(
            f"gpudyn: {where} argument '{name}' is not device memory of device {device}: "
            f"CUDA reports its {which} at 0x{address:x} as no device's memory "
            f"({_NOT_DEVICE_MEMORY}); pass a NumPy array (copied for you) or an array "
            f"in device {device}'s memory"
        )


def as_device_array(
    obj: Any,
    stream: StreamLike = None,
    dtype: DTypeLike | None = None,
    where: str = "",
    name: str = "values",
    device: int | None = None,
    accept: Any = None,
) -> tuple:
    """(ptr, n, dtype, keepalive) for a 1-D C-contiguous array given as a
    DeviceBuffer, anything with ``__cuda_array_interface__`` (CuPy, Numba,
    PyTorch CUDA tensors) or DLPack-only objects, ready to be read by work
    queued on ``stream`` next.  Every check below comes before any copy or
    device work:

    - device arrays: the interface must describe a C-contiguous array that fits
      the address space (:func:`_layout`: no broadcast views, no mask; readonly
      arrays are fine, gpudyn only reads inputs) and no more bytes than the
      device's memory (InvalidArgumentError); its memory must be device memory
      of ``device`` (the structure's; None: the current device), first and last
      byte, as cudaPointerGetAttributes reports it through
      gpudyn_pointer_get_device: another device's memory, host memory (pageable
      or pinned, even where the device could read it) and unknown addresses are
      refused (InvalidArgumentError naming the argument), as is a NULL pointer
      with entries; a DLPack producer must say kDLCUDA of that device.  Managed
      memory (cudaMallocManaged, a CuPy managed pool) is refused too: the
      library names no device for it (gpudyn_pointer_get_device gives -1, as
      for host memory), so Python cannot tell it from host memory and vouch
      that the device may read it; copy it into device memory first.  Then ``stream`` waits for the producer's stream
      (CAI v3 ``stream``; see :func:`_producer_stream`);
    - NumPy arrays: their count is bounded by the device's memory
      (:func:`check_count`), then they are copied to a temporary DeviceBuffer on
      ``stream``; the keepalive is that buffer, to be closed after the work that
      reads it is queued (:class:`device_inputs` does it; left to the garbage
      collector, a buffer on a raw handle waits for the whole device before it
      is freed).
    Call it, and close the keepalive, with the structure's device current
    (:class:`on_device`): the temporary is allocated and freed there.
    Non-native byte order: NumPy data is converted, device data refused.
    ``dtype``: the dtype the array must have; ``accept``: a check of its dtype
    that raises (TypeError) for the ones the caller refuses, run just as early."""
    where = where or "gpudyn"
    if isinstance(obj, np.ndarray):
        if dtype is not None and np.dtype(dtype) != obj.dtype.newbyteorder("="):
            # no silent conversion: int64 page ids cast to uint32 would wrap around
            raise TypeError(f"gpudyn: {where} argument '{name}' has dtype {obj.dtype}, expected {np.dtype(dtype)}")
        if accept is not None:
            accept(obj.dtype.newbyteorder("="))
        check_count(where, name, obj, obj.dtype.itemsize, device)  # before reshape(-1) may copy
        buf = DeviceBuffer.from_numpy(obj.reshape(-1), stream=stream)
        return buf.ptr, buf.size, buf.dtype, buf
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is None and hasattr(obj, "__dlpack__"):
        _dlpack_device(where, name, obj, device)
        try:
            import torch  # PyTorch tensors expose CAI; DLPack-only producers go through torch

            obj = torch.from_dlpack(obj)
            cai = obj.__cuda_array_interface__
        except Exception as exc:  # pragma: no cover - depends on optional packages
            raise TypeError(f"gpudyn: cannot read {type(obj).__name__} as a device array: {exc}") from exc
    if cai is None:
        raise TypeError(
            f"gpudyn: {where} argument '{name}' is a {type(obj).__name__}, neither a NumPy array nor "
            "a CUDA array (no __cuda_array_interface__ / __dlpack__)"
        )
    ptr, n, dt, nbytes = _layout(where, name, cai)
    if dtype is not None and np.dtype(dtype) != dt:
        raise TypeError(f"gpudyn: {where} argument '{name}' has dtype {dt}, expected {np.dtype(dtype)}")
    if accept is not None:
        accept(dt)
    if n:
        if device is None:
            device = current_device()
        if nbytes > device_memory(device):
            raise InvalidArgumentError(
                f"gpudyn: {where} argument '{name}' describes {n} entries of {dt.itemsize} "
                f"bytes, {nbytes} bytes, more than the {device_memory(device)} bytes of "
                f"memory of device {device}: no array of this device"
            )
        if not ptr:
            raise InvalidArgumentError(f"gpudyn: {where} argument '{name}' has {n} entries at address 0 (NULL)")
        _device_memory_of(where, name, ptr, nbytes, device)
    producer = _producer_stream(obj, cai)
    if producer is not None and n:
        wait_for(stream_handle(stream), producer)
    return ptr, n, dt, obj


def as_integer_array(
    obj: Any, stream: StreamLike, dtype: DTypeLike, where: str, name: str, device: int | None = None
) -> tuple:
    """:func:`as_device_array` for unsigned integer inputs (sizes, addresses): host
    data (list, NumPy) is checked first, negative or too large entries refused
    rather than wrapped; device arrays must have ``dtype`` (and be on ``device``)."""
    host = host_input(where, name, obj, dtype, device)
    return as_device_array(obj if host is None else host, stream, dtype=dtype, where=where, name=name, device=device)


def as_address_array(
    obj: Any, stream: StreamLike, where: str, name: str, device: int | None = None, hint: str = ""
) -> tuple:
    """:func:`as_device_array` for device addresses (pointers, warp headers): one
    rule for every call that takes them, 64-bit integer dtypes only (uint64 or
    int64, host and device arrays alike: an int32 array would hold truncated
    addresses; see :func:`gpudyn._args.host_addresses`); host values negative
    or beyond 2**64 - 1 refused."""
    host = host_input(where, name, obj, np.uint64, device, addresses=True, hint=hint)
    return as_device_array(
        obj if host is None else host,
        stream,
        where=where,
        name=name,
        device=device,
        accept=lambda dt: _args.address_dtype(where, name, dt, hint),
    )


class device_inputs:
    """The inputs of one call, as device arrays read by the work it queues on
    ``stream``: ``with device_inputs(stream, device) as inputs:``, then
    :meth:`array` / :meth:`integers` / :meth:`addresses` give ``(ptr, n, dtype)``,
    each input checked (count, dtype, memory: :func:`as_device_array`) before
    anything is copied or queued.  NumPy (and list)
    inputs are copied to temporary DeviceBuffers, closed when the block ends:
    freed on ``stream`` after the work queued there, while the call is still
    running and so the stream (a raw handle too) certainly exists; left to the
    garbage collector, a temporary on a raw handle would have to wait for the
    whole device (see DeviceBuffer).  :meth:`output` makes the call's result
    buffer, closed the same way when the block raises.  Enter it with the
    structure's device current (:class:`on_device`)."""

    def __init__(self, stream: StreamLike, device: int | None) -> None:
        self.stream, self.device = stream, device
        self._keep: list[Any] = []  # device inputs (and DLPack views): alive until the block ends
        self._temps: list[Any] = []
        self._outputs: list[Any] = []

    def __enter__(self) -> device_inputs:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        temps, self._temps, self._keep = self._temps, [], []
        if exc_type is not None:  # the result of a failed call is nobody's
            temps += self._outputs
        self._outputs = []
        failure = None
        for t in temps:
            try:
                t.close()
            except Exception as e:  # noqa: BLE001 -- close the others first
                failure = failure or e
        if failure is not None and exc_type is None:  # never hide the block's own exception
            raise failure

    def _track(self, obj: Any, result: Any) -> Any:
        ptr, n, dt, keep = result
        if keep is not obj and isinstance(keep, DeviceBuffer):
            self._temps.append(keep)
        else:
            self._keep.append(keep)
        return ptr, n, dt

    def array(
        self, obj: Any, dtype: DTypeLike | None = None, where: str = "", name: str = "values", accept: Any = None
    ) -> tuple:
        """:func:`as_device_array` of ``obj``: (ptr, n, dtype)."""
        return self._track(
            obj,
            as_device_array(obj, self.stream, dtype=dtype, where=where, name=name, device=self.device, accept=accept),
        )

    def integers(self, obj: Any, dtype: DTypeLike, where: str, name: str) -> tuple:
        """:func:`as_integer_array` of ``obj``: (ptr, n, dtype)."""
        return self._track(obj, as_integer_array(obj, self.stream, dtype, where, name, device=self.device))

    def addresses(self, obj: Any, where: str, name: str, hint: str = "") -> tuple:
        """:func:`as_address_array` of ``obj``: (ptr, n, dtype)."""
        return self._track(obj, as_address_array(obj, self.stream, where, name, device=self.device, hint=hint))

    def output(self, shape: ShapeLike, dtype: DTypeLike) -> DeviceBuffer:
        """A DeviceBuffer on the stream for the call's result, closed if the block raises."""
        buf = DeviceBuffer(shape, dtype, stream=self.stream)
        self._outputs.append(buf)
        return buf
