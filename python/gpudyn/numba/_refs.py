"""Kernel arguments in Numba: the Numba type of each structure's ``view_arg()``.

``obj.view_arg()`` (every structure; gpudyn/_view.py) is the structure's C view
struct as a structured NumPy scalar of a class per structure (and element
dtype).  Here that class is registered with numba-cuda's ``typeof`` as a named
tuple of its fields: numba-cuda passes a tuple to a kernel by value, one kernel
parameter per field (as the C++ API passes the view; it iterates the scalar,
which yields the fields), and types it by its class, which carries what the
device functions need -- which structure, and for arrays the element dtype.
In the kernel the device functions spill the tuple to the stack and hand the
shims its address: a tuple of these scalars has the C struct's layout (checked
once per class in gpudyn/_view.py, and against LLVM's layout in _device.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba.cuda import types
from numba.cuda.np.numpy_support import from_dtype
from numba.cuda.typing.typeof import typeof_impl

from .. import _deprecated
from .._view import KernelView, ViewArg, arg_class, make_arg

_types: dict = {}


def _numba_type(cls: type[ViewArg]) -> types.Type:
    """The Numba type of kernel-argument class `cls` (a named tuple of its fields)."""
    ty = _types.get(cls)
    if ty is None:
        fields = tuple(from_dtype(np.dtype(s)) for s in cls._gpudyn_scalars)
        if all(f == fields[0] for f in fields):
            ty = types.NamedUniTuple(fields[0], len(fields), cls)
        else:
            ty = types.NamedTuple(fields, cls)
        _types[cls] = ty
    return ty


@typeof_impl.register(ViewArg)
def _typeof_view_arg(val: ViewArg, c: Any) -> types.Type:
    return _numba_type(type(val))


def _kind_of(structure: Any) -> KernelView:
    kind = getattr(structure, "_kernel_view", None)
    if not isinstance(kind, KernelView):
        raise TypeError(
            f"gpudyn.numba: {getattr(structure, '__name__', structure)!r} is not a gpudyn structure "
            "class (GGArray, StaticArray, VmmArray, Heap, RWHeap or WarpHeap)"
        )
    return kind


def ref_type(structure: type, dtype: Any = None) -> types.Type:
    """The Numba type of ``structure(...).view_arg()`` -- what a kernel
    parameter taking that structure has -- for compiling a kernel ahead of
    time, without a GPU or an object::

        sig = (gdn.ref_type(gpudyn.GGArray, np.int32), numba.cuda.types.int64)
        ptx, _ = numba.cuda.compile(kernel, sig, device=False, output="ptx", cc=(9, 0), abi="numba")

    `structure`: the class (GGArray, StaticArray, VmmArray, Heap, RWHeap,
    WarpHeap); `dtype`: the element dtype for the three arrays, None for the
    heaps.  ``abi="numba"``: ``numba.cuda.compile`` defaults to ``abi="c"``,
    which numba-cuda supports for device functions only; a kernel
    (``device=False``) needs the Numba ABI.  (``@cuda.jit`` kernels launched
    with ``view_arg()`` need none of this: they are typed from the argument.)"""
    return _numba_type(arg_class(_kind_of(structure), dtype))


def kernel_ref(obj: Any) -> ViewArg:
    """Deprecated ``gpudyn.numba.ref(obj)``: ``obj.view_arg()``."""
    _deprecated.warn("gpudyn.numba.ref(obj)", "obj.view_arg()")
    if not isinstance(getattr(type(obj), "_kernel_view", None), KernelView):
        raise TypeError(
            f"gpudyn.numba: a {type(obj).__name__} has no kernel argument; expected a GGArray, "
            "StaticArray, VmmArray, Heap, RWHeap or WarpHeap"
        )
    return obj.view_arg()


def ref_of_view(cls: type[ViewArg], view_bytes: bytes) -> ViewArg:
    """The kernel argument of class `cls` holding the C view in `view_bytes` (its struct's bytes)."""
    return make_arg(cls._gpudyn_kind, cls._gpudyn_dtype, view_bytes)
