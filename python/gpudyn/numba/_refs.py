"""Kernel refs: how a gpudyn structure reaches a Numba kernel.

``obj.ref`` (every structure) is the structure's C view struct
(``gpudyn_*_view_t``), taken at that moment, as a named tuple of NumPy scalars,
one per field of the C struct (a nested struct, such as the heap view inside
the GGArray's view, flattened into fields <field>_<subfield>).  numba-cuda passes a named tuple to a kernel by
value (one kernel parameter per field, as the C++ API passes the view) and
types it by its class, so the class carries what the device functions need:
which structure, and for arrays the element dtype (one class per structure and
dtype).  In the kernel the device functions spill the tuple to the stack and
hand the shims its address: a tuple of these scalars has the C struct's layout
(checked once per class below, and against LLVM's layout in _device.py).

Nothing here needs Numba; gpudyn.numba imports it.
"""
from __future__ import annotations

import collections

import numpy as np

from .._ffi import ffi

# Element types of the C view structs -> NumPy scalar types (pointers are addresses).
_SCALARS = {"uint8_t": np.uint8, "uint16_t": np.uint16, "uint32_t": np.uint32, "uint64_t": np.uint64,
            "int32_t": np.int32, "int64_t": np.int64}


class _Kind:
    """One structure: its ref class name, C view type, how the Python object
    gives its view bytes, and whether it holds elements (a dtype)."""

    def __init__(self, name: str, title: str, view_type: str, view_bytes, array: bool):
        self.name, self.title, self.view_type, self.view_bytes, self.array = name, title, view_type, view_bytes, array


def _kinds():
    # Imported late: gpudyn/__init__.py imports the structures after _handle.
    from ..ggarray import GGArray, StaticArray, VmmArray
    from ..heap import Heap
    from ..rw_heap import PageHeap
    from ..warp_heap import WarpHeap
    return (
        (GGArray, _Kind("ggarray", "GGArrayRef", "gpudyn_ggarray_view_t", lambda o: o.view_bytes(), True)),
        (StaticArray, _Kind("static_array", "StaticArrayRef", "gpudyn_static_array_view_t",
                            lambda o: o.view_bytes(), True)),
        (VmmArray, _Kind("vmm_array", "VmmArrayRef", "gpudyn_vmm_array_view_t", lambda o: o.view_bytes(), True)),
        (Heap, _Kind("heap", "HeapRef", "gpudyn_heap_view_t", lambda o: o.view.tobytes(), False)),
        (PageHeap, _Kind("rw_heap", "PageHeapRef", "gpudyn_rw_heap_view_t", lambda o: o.view_bytes().tobytes(),
                         False)),
        (WarpHeap, _Kind("warp_heap", "WarpHeapRef", "gpudyn_warp_heap_view_t",
                         lambda o: o.view_bytes().tobytes(), False)),
    )


def _leaves(ctype, prefix: str, path: tuple, base: int) -> list:
    """(flat name, path of C field names, scalar, offset) per scalar of a C
    struct; a nested struct (the GGArray view's heap view) is flattened into
    fields named <field>_<subfield>, in order."""
    out = []
    for name, field in ctype.fields:
        t = field.type
        flat = prefix + name
        if t.kind == "struct":
            out += _leaves(t, flat + "_", path + (name,), base + field.offset)
            continue
        scalar = np.uint64 if t.kind == "pointer" else _SCALARS.get(t.cname)
        if scalar is None:
            raise TypeError(f"gpudyn.numba: field {flat} has type {t.cname}, which a kernel ref cannot carry")
        out.append((flat, path + (name,), scalar, base + field.offset))
    return out


def _fields(view_type: str) -> list:
    """(flat name, path, NumPy scalar type) per scalar of the C struct, nested
    structs flattened, after checking that the scalars sit where natural
    alignment puts them (the layout a tuple of the same scalars has)."""
    out, offset, align = [], 0, 1
    leaves = _leaves(ffi.typeof(view_type), "", (), 0)
    if len({f for f, _, _, _ in leaves}) != len(leaves):
        raise TypeError(f"gpudyn.numba: {view_type}'s flattened field names collide")
    for name, path, scalar, at in leaves:
        size = np.dtype(scalar).itemsize
        offset = (offset + size - 1) // size * size
        if at != offset:
            raise TypeError(f"gpudyn.numba: field {view_type}.{name} is at offset {at}, not at its "
                            f"natural offset {offset}; a kernel ref cannot mirror it")
        out.append((name, path, scalar))
        offset += size
        align = max(align, size)
    if (offset + align - 1) // align * align != ffi.sizeof(view_type):
        raise TypeError(f"gpudyn.numba: {view_type} has padding a kernel ref cannot mirror")
    return out


_classes: dict = {}


def ref_class(kind: _Kind, dtype):
    """The named-tuple class of `kind`'s refs (one per element dtype for arrays)."""
    key = (kind.name, None if dtype is None else np.dtype(dtype))
    cls = _classes.get(key)
    if cls is None:
        fields = _fields(kind.view_type)
        name = kind.title if dtype is None else f"{kind.title}_{np.dtype(dtype).name}"
        cls = collections.namedtuple(name, [f for f, _, _ in fields])
        cls.__doc__ = (f"Kernel argument of a gpudyn {kind.title[:-3]} (its {kind.view_type}"
                       + (f", elements {np.dtype(dtype).name}" if dtype is not None else "")
                       + "): pass it to a @cuda.jit kernel and call gpudyn.numba's device functions on it.")
        cls._gpudyn_kind = kind.name
        cls._gpudyn_dtype = key[1]
        cls._gpudyn_view_type = kind.view_type
        cls._gpudyn_scalars = tuple(s for _, _, s in fields)
        cls._gpudyn_paths = tuple(p for _, p, _ in fields)  # C field names leading to each scalar
        cls.__module__ = "gpudyn.numba"
        _classes[key] = cls
    return cls


def kernel_ref(obj):
    """``obj.ref``: the structure's view now, as its ref class (see the module doc)."""
    for cls, kind in _kinds():
        if isinstance(obj, cls):
            break
    else:
        raise TypeError(f"gpudyn.numba: a {type(obj).__name__} has no kernel ref; expected a GGArray, StaticArray, "
                        "VmmArray, Heap, PageHeap or WarpHeap")
    return ref_of_view(ref_class(kind, obj.dtype if kind.array else None), kind.view_bytes(obj))


def ref_of_view(rc, view_bytes):
    """The ref of class `rc` holding the C view in `view_bytes` (its struct's bytes)."""
    view = ffi.from_buffer(rc._gpudyn_view_type + "*", bytes(view_bytes))
    values = []
    for path, scalar in zip(rc._gpudyn_paths, rc._gpudyn_scalars):
        v = view
        for f in path:
            v = getattr(v, f)
        values.append(scalar(int(ffi.cast("uintptr_t", v)) if isinstance(v, ffi.CData) else v))
    return rc(*values)
