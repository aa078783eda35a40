"""What a structure offers kernels: its C view struct, passed by value.

Each structure class declares a :class:`KernelView` (class attribute
``_kernel_view``): the C view type (``gpudyn_*_view_t``), its short name (the
C/C++ name: ``ggarray``, ``rw_heap``, ...) and whether it holds elements of a
dtype.  ``obj.view_arg()`` gives the view, taken at that moment, as an instance
of :func:`arg_class` -- a subclass of ``numpy.void`` with a structured dtype
that mirrors the C struct field by field (a nested struct, such as the heap
view inside the GGArray's view, flattened into fields ``<field>_<subfield>``).
One object serves both kernel APIs:

* CuPy (``RawKernel``/``RawModule``) passes a structured NumPy scalar by value:
  its bytes are the C struct's.
* Numba (``@cuda.jit``): gpudyn.numba registers the class with numba-cuda's
  ``typeof`` as a named-tuple type of its fields, which numba-cuda passes by
  value field by field (as the C++ API passes the view); iterating a structured
  NumPy scalar yields its fields.  The type names the structure and, for
  arrays, the element dtype (one class per structure and dtype), which
  gpudyn.numba's device functions read when a kernel is compiled.

Nothing here imports Numba: gpudyn.numba reads these declarations.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ._ffi import ffi

# Element types of the C view structs -> NumPy scalar types (pointers are addresses).
_SCALARS = {
    "uint8_t": np.uint8,
    "uint16_t": np.uint16,
    "uint32_t": np.uint32,
    "uint64_t": np.uint64,
    "int32_t": np.int32,
    "int64_t": np.int64,
}


class KernelView:
    """A structure's offer to kernels: `name` (its C/C++ name, e.g. ``"ggarray"``),
    `title` (its Python class name), `view_type` (the C view struct) and
    `elements` (True: it holds elements of a dtype, and its kernel argument's
    type names that dtype)."""

    __slots__ = ("name", "title", "view_type", "elements")

    def __init__(self, name: str, title: str, view_type: str, elements: bool) -> None:
        self.name, self.title, self.view_type, self.elements = name, title, view_type, elements

    def __repr__(self) -> str:
        return f"KernelView({self.name!r}, {self.view_type!r}, elements={self.elements})"


#: Every declared structure, by its C/C++ name (filled as the structure modules are imported).
KINDS: dict[str, KernelView] = {}


def declare(name: str, title: str, view_type: str, elements: bool) -> KernelView:
    """Declares (once) and returns a structure's :class:`KernelView`."""
    kind = KINDS.get(name)
    if kind is None:
        kind = KINDS[name] = KernelView(name, title, view_type, elements)
    return kind


class ViewArg(np.void):  # type: ignore[misc]  # numpy marks void final in its stubs, subclasses it itself (np.record)
    """Base class of every structure's kernel argument (see the module doc):
    a structured NumPy scalar holding the structure's C view.  Its fields are
    readable as attributes (``arg.version``); ``bytes(arg)`` is the C struct."""

    #: The structure it belongs to.
    _gpudyn_kind: ClassVar[KernelView]
    #: The element dtype (None for a structure without elements).
    _gpudyn_dtype: ClassVar[np.dtype | None]
    #: Flat field names, their NumPy scalar types, and the C field names leading to each.
    _fields: ClassVar[tuple[str, ...]]
    _gpudyn_scalars: ClassVar[tuple[type, ...]]
    _gpudyn_paths: ClassVar[tuple[tuple[str, ...], ...]]

    def __getattr__(self, name: str) -> Any:
        names = type(self).__dict__.get("_fields") or ()
        if name in names:
            return self[name]
        raise AttributeError(f"{type(self).__name__} has no field {name!r}")

    def __bytes__(self) -> bytes:
        return self.tobytes()


def _leaves(ctype: Any, prefix: str, path: tuple[str, ...], base: int) -> list:
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
            raise TypeError(f"gpudyn: view field {flat} has type {t.cname}, which a kernel argument cannot carry")
        out.append((flat, path + (name,), scalar, base + field.offset))
    return out


def fields(view_type: str) -> list:
    """(flat name, path, NumPy scalar type, offset) per scalar of the C struct,
    nested structs flattened, after checking that the scalars sit where natural
    alignment puts them (the layout a tuple of the same scalars has, which is
    how Numba lays out the kernel argument)."""
    out, offset, align = [], 0, 1
    leaves = _leaves(ffi.typeof(view_type), "", (), 0)
    if len({f for f, _, _, _ in leaves}) != len(leaves):
        raise TypeError(f"gpudyn: {view_type}'s flattened field names collide")
    for name, path, scalar, at in leaves:
        size = np.dtype(scalar).itemsize
        offset = (offset + size - 1) // size * size
        if at != offset:
            raise TypeError(
                f"gpudyn: field {view_type}.{name} is at offset {at}, not at its natural offset "
                f"{offset}; a kernel argument cannot mirror it"
            )
        out.append((name, path, scalar, at))
        offset += size
        align = max(align, size)
    if (offset + align - 1) // align * align != ffi.sizeof(view_type):
        raise TypeError(f"gpudyn: {view_type} has padding a kernel argument cannot mirror")
    return out


_classes: dict = {}


def arg_class(kind: KernelView, dtype: Any = None) -> type[ViewArg]:
    """The kernel-argument class of `kind` (one per element dtype for a
    structure with elements; `dtype` must be None for the others)."""
    if kind.elements == (dtype is None):
        raise TypeError(
            f"gpudyn: a {kind.title}'s kernel argument "
            + ("needs the element dtype" if kind.elements else "has no element dtype")
        )
    dt = None if dtype is None else np.dtype(dtype)
    key = (kind.name, dt)
    cls = _classes.get(key)
    if cls is None:
        layout = fields(kind.view_type)
        name = f"{kind.title}Ref" + ("" if dt is None else f"_{dt.name}")
        # The first field's title names the class: numba-cuda caches the type of a
        # structured scalar by its dtype, and dtypes compare by layout alone, so two
        # classes of one layout (a GGArray of int32 and one of float32) must differ in it.
        struct = np.dtype(
            {
                "names": [f for f, _, _, _ in layout],
                "formats": [s for _, _, s, _ in layout],
                "offsets": [o for _, _, _, o in layout],
                "itemsize": ffi.sizeof(kind.view_type),
                "titles": [f"gpudyn.{name}"] + [None] * (len(layout) - 1),
            }
        )
        cls = type(
            name,
            (ViewArg,),
            {
                "__doc__": (
                    f"Kernel argument of a gpudyn {kind.title} (its {kind.view_type}"
                    + (f", elements {dt.name}" if dt is not None else "")
                    + "): pass it by value to a CuPy RawKernel or a Numba @cuda.jit kernel."
                ),
                "__module__": "gpudyn",
                "_gpudyn_kind": kind,
                "_gpudyn_dtype": dt,
                "_fields": tuple(f for f, _, _, _ in layout),
                "_gpudyn_scalars": tuple(s for _, _, s, _ in layout),
                "_gpudyn_paths": tuple(p for _, p, _, _ in layout),
            },
        )
        cls._gpudyn_np_dtype = np.dtype((cls, struct))  # type: ignore[attr-defined]
        _classes[key] = cls
    return cls


def make_arg(kind: KernelView, dtype: Any, view_bytes: bytes) -> ViewArg:
    """The kernel argument of class ``arg_class(kind, dtype)`` holding the C view in `view_bytes`."""
    cls = arg_class(kind, dtype)
    raw = bytes(view_bytes)
    if len(raw) != cls._gpudyn_np_dtype.itemsize:  # type: ignore[attr-defined]
        raise ValueError(f"gpudyn: {kind.view_type} has {cls._gpudyn_np_dtype.itemsize} bytes, got {len(raw)}")  # type: ignore[attr-defined]
    arg = np.frombuffer(raw, dtype=cls._gpudyn_np_dtype)[0]  # type: ignore[attr-defined]
    assert type(arg) is cls
    return arg
