"""The deprecated spellings (one release, CHANGELOG.md "Deprecated"): each warns
with DeprecationWarning naming its replacement, at the caller's line, and still
works.  Host tests call each alias on an object whose replacement is a stand-in
(no GPU); the GPU test calls each on real structures."""

import importlib.util
import warnings

import gpudyn
import numpy as np
import pytest
from gpudyn import _ffi, _view

STRUCTURES = (gpudyn.GGArray, gpudyn.StaticArray, gpudyn.VmmArray, gpudyn.Heap, gpudyn.RWHeap, gpudyn.WarpHeap)


def _zero_arg(cls, dtype=np.int32):
    kind = cls._kernel_view
    raw = bytes(_ffi.ffi.buffer(_ffi.ffi.new(kind.view_type + "*")))
    return _view.make_arg(kind, dtype if kind.elements else None, raw)


def _warns(new):
    """pytest.warns for a DeprecationWarning that names `new` (a method's new name may
    come with its class, as in 'use GGArray.view_arg()'), checked to point at this file."""
    return pytest.warns(DeprecationWarning, match=r"deprecated .*; use (\w+\.)*" + new)


def _at_caller(record):
    assert record[0].filename == __file__, f"the warning points at {record[0].filename}, not at the caller"


# ---- module attributes ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "name,new,value",
    [
        ("ffi", r"gpudyn\._ffi\.ffi", lambda: _ffi.ffi),
        ("lib", r"gpudyn\._ffi\.lib", lambda: _ffi.lib),
        ("check", "the structures' methods", lambda: _ffi.check),
        ("PageHeap", r"gpudyn\.RWHeap", lambda: gpudyn.RWHeap),
    ],
)
def test_module_alias_warns_and_works(name, new, value):
    assert name not in gpudyn.__all__
    with _warns(new) as record:
        got = getattr(gpudyn, name)
    _at_caller(record)
    assert got is value()


def test_rw_heap_module_page_heap_alias():
    from gpudyn import rw_heap

    with _warns(r"gpudyn\.rw_heap\.RWHeap") as record:
        from gpudyn.rw_heap import PageHeap
    assert PageHeap is rw_heap.RWHeap and issubclass(PageHeap, gpudyn.RWHeap)
    assert record[0].category is DeprecationWarning


def test_theory_alias():
    assert "theory" not in gpudyn.__all__
    if importlib.util.find_spec("gpudyn.bench") is None:
        with _warns(r"gpudyn\.bench\.theory"), pytest.raises(ImportError):
            gpudyn.theory  # noqa: B018  (the attribute read is the call under test)
        return
    import gpudyn.bench.theory as theory

    with _warns(r"gpudyn\.bench\.theory") as record:
        got = gpudyn.theory
    _at_caller(record)
    assert got is theory


def test_unknown_module_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        gpudyn.no_such_name  # noqa: B018
    assert not hasattr(gpudyn, "PageHeapp")


# ---- methods and properties, on objects whose replacement is a stand-in -------------------------
def _bare(cls, **replacements):
    """An object of `cls` that never reached the library, with methods replaced."""
    obj = cls.__new__(cls)
    for name, fn in replacements.items():
        setattr(obj, name, fn)
    return obj


STATS = {"size": 1}
CALLS = [
    # (class, old call, its replacement, what the stand-in returns, what the old call returns)
    *[(cls, lambda o: o.memory_stats(), "stats", STATS, STATS) for cls in STRUCTURES[:3]],
    *[(cls, lambda o: o.view_bytes(), "view_arg", "arg", "bytes") for cls in STRUCTURES[:3]],
    *[(cls, lambda o: o.view_bytes(), "view_arg", "arg", "uint8") for cls in (gpudyn.RWHeap, gpudyn.WarpHeap)],
    *[(cls, lambda o: o.ref, "view_arg", "arg", "arg") for cls in STRUCTURES],
    (gpudyn.Heap, lambda o: o.reset(), "clear", None, None),
    (gpudyn.RWHeap, lambda o: o.reset(), "clear", None, None),
    (gpudyn.RWHeap, lambda o: o.info(), "stats", STATS, STATS),
    (gpudyn.WarpHeap, lambda o: o.alloc([16, 32]), "malloc", "ptrs", "ptrs"),
    (gpudyn.WarpHeap, lambda o: o.release(), "clear", None, None),
]
OLD_NAMES = ["memory_stats"] * 3 + ["view_bytes"] * 5 + ["ref"] * 6 + ["reset", "reset", "info", "alloc", "release"]


@pytest.mark.parametrize(
    "cls,call,new,standin,want", CALLS, ids=[f"{c[0].__name__}.{old}" for c, old in zip(CALLS, OLD_NAMES)]
)
def test_method_alias_warns_and_calls_the_new_name(cls, call, new, standin, want):
    arg = _zero_arg(cls)
    seen = []

    def replacement(*args):
        seen.append(args)
        return arg if standin == "arg" else standin

    obj = _bare(cls, **{new: replacement})
    with _warns(rf"{cls.__name__}\.{new}") as record:
        got = call(obj)
    _at_caller(record)
    assert len(seen) == 1
    if want == "arg":
        assert got is arg
    elif want == "bytes":
        assert isinstance(got, bytes) and got == bytes(arg)
    elif want == "uint8":
        assert got.dtype == np.uint8 and got.tobytes() == bytes(arg)
    else:
        assert got is want
    if new == "malloc":
        assert seen == [([16, 32],)]


def test_heap_view_property_alias():
    raw = bytes(_zero_arg(gpudyn.Heap))
    obj = _bare(gpudyn.Heap, _view_bytes=lambda: raw)
    with _warns(r"Heap\.view_arg\(\)") as record:
        view = obj.view
    _at_caller(record)
    assert view.dtype == np.uint8 and view.tobytes() == raw


def test_numba_ref_function_alias():
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    import gpudyn.numba as gdn

    arg = _zero_arg(gpudyn.Heap)
    obj = _bare(gpudyn.Heap, view_arg=lambda: arg)
    assert "ref" not in gdn.__all__
    with _warns(r"obj\.view_arg\(\)") as record:
        got = gdn.ref(obj)
    _at_caller(record)
    assert got is arg
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(TypeError, match="has no kernel argument"):
            gdn.ref(object())


def test_new_names_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for name in gpudyn.__all__:
            getattr(gpudyn, name)
        for cls in STRUCTURES:
            for name in ("view_arg", "stats", "close", "clear"):
                assert callable(getattr(cls, name)), f"{cls.__name__}.{name}"
        assert callable(gpudyn.WarpHeap.malloc) and callable(gpudyn.Heap.malloc) and callable(gpudyn.RWHeap.malloc)


# ---- on real structures --------------------------------------------------------------------------
@pytest.mark.gpu
def test_every_alias_works_on_real_structures():
    made = [
        gpudyn.GGArray(np.int32),
        gpudyn.StaticArray(64, np.int32),
        gpudyn.VmmArray(np.int32, initial_capacity=64),  # insertion never maps more: room for extend
        gpudyn.Heap(initial_bytes=8 << 20),
        gpudyn.RWHeap(page_count=1024),
        gpudyn.WarpHeap(arena_bytes=8 << 20),
    ]
    try:
        for s in made:
            with _warns("view_arg"):
                ref = s.ref
            assert type(ref) is type(s.view_arg()) and bytes(ref)[:4] == bytes(s.view_arg())[:4]
        for a in made[:3]:
            a.extend(np.arange(5, dtype=np.int32))
            with _warns("stats"):
                assert a.memory_stats() == a.stats()
            with _warns("view_arg"):
                raw = a.view_bytes()
            assert isinstance(raw, bytes) and len(raw) == len(bytes(a.view_arg()))
        heap, pages, warp = made[3:]
        with _warns("view_arg"):
            assert heap.view.tobytes() == bytes(heap.view_arg())
        heap.malloc([64])
        with _warns("clear"):
            heap.reset()
        assert heap.stats()["allocations"] == 0
        with _warns("stats"):
            assert pages.info() == pages.stats()
        pages.get_pages(10)
        with _warns("clear"):
            pages.reset()
        assert pages.free_page_count == pages.page_count
        for h in (pages, warp):
            with _warns("view_arg"):
                assert h.view_bytes().tobytes() == bytes(h.view_arg())
        with _warns("malloc"):
            ptrs = warp.alloc([16, 0, 48]).to_numpy()
        assert ptrs[0] != 0 and ptrs[1] == 0 and warp.batch_count == 1
        with _warns("clear"):
            warp.release()
        assert warp.batch_count == 0
    finally:
        for s in reversed(made):
            s.close()
