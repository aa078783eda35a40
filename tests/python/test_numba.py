"""gpudyn.numba without a GPU: the installed device code, the kernel arguments
(view_arg()) and their public Numba types (ref_type), and a Numba kernel calling
every device function compiled to PTX and to LTO-IR
(numba.cuda.compile, for sm_90 or the first built architecture) and linked with
the installed shims, checking that every foreign call resolves with the
prototype the shim has.  The GPU behaviour is in test_numba_gpu.py."""

import ctypes
import os
import re

import numpy as np
import pytest

numba_cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed (pip install 'gpudyn-cu13[numba]')")

import gpudyn  # noqa: E402
import gpudyn.numba as gdn  # noqa: E402
from gpudyn import (
    _ffi,  # noqa: E402
    _view,  # noqa: E402
)
from gpudyn.numba import _link  # noqa: E402
from numba import cuda  # noqa: E402
from numba.cuda import types  # noqa: E402
from numba.cuda.typing.typeof import typeof  # noqa: E402

STRUCTURES = {
    c.__name__: c
    for c in (gpudyn.GGArray, gpudyn.StaticArray, gpudyn.VmmArray, gpudyn.Heap, gpudyn.RWHeap, gpudyn.WarpHeap)
}
KINDS = {name: cls._kernel_view for name, cls in STRUCTURES.items()}
ARRAY_DTYPES = [
    np.int8,
    np.uint8,
    np.int16,
    np.uint16,
    np.int32,
    np.uint32,
    np.int64,
    np.uint64,
    np.float16,
    np.float32,
    np.float64,
    np.complex64,
    np.complex128,
    np.bool_,
]


def ref_type(name, dtype=None):
    """The public Numba type of structure `name`'s view_arg(): what a kernel signature names."""
    return gdn.ref_type(STRUCTURES[name], dtype)


def fake_arg(name, dtype=None, view=None):
    """A view_arg() of the right class holding the C view `view` (zeros by default), made
    without a GPU: what a launch passes."""
    kind = KINDS[name]
    raw = bytes(_ffi.ffi.buffer(_ffi.ffi.new(kind.view_type + "*"))) if view is None else bytes(view)
    return _view.make_arg(kind, dtype, raw)


def test_kernels_compile_on_a_numpy_without_row_stack():
    """NumPy 2.5 removed np.row_stack, which numba-cuda 0.30 registers when its
    target starts: in a process where NumPy lacks it, importing gpudyn.numba
    first lets a kernel compile (without the alias it would not)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import numpy as np
        if hasattr(np, "row_stack"):
            del np.row_stack                       # NumPy 2.5 as far as numba-cuda can tell
        import gpudyn.numba as gdn
        from numba import cuda
        from numba.cuda import types
        def k(a):
            a[0] = 1
        cuda.compile(k, (types.int32[::1],), device=False, output="ptx", cc=(%d, %d), abi="numba")
        print("compiled", np.row_stack is np.vstack)
    """
        % compile_arch()[1]
    )
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "compiled True", r.stdout + r.stderr


def test_installed_device_code():
    info = gdn.build_info()
    assert info["archs"], info
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", info["cuda_version"]), info
    for arch in info["archs"]:
        for mode in _link.MODES:
            path = _link.shim_path(arch, mode)
            assert os.path.getsize(path) > 1000, path
        ptx = open(_link.shim_path(arch, "ptx"), encoding="utf-8").read()
        assert re.search(rf"^\.target\s+sm_{arch}\b", ptx, re.M), f"PTX of sm_{arch} targets something else"
    with pytest.raises(ValueError, match="link mode"):
        _link.shim_path(info["archs"][0], "cubin")


def test_arch_choice():
    archs = gdn.build_info()["archs"]
    top = max(archs, key=lambda a: int(a.rstrip("af")))
    assert _link.pick_arch(None) == top
    assert _link.pick_arch((99, 9)) == top  # a newer device runs the newest build's PTX / LTO-IR
    low = min(int(a.rstrip("af")) for a in archs)
    if low > 10:
        with pytest.raises(RuntimeError, match="older than every architecture"):
            _link.pick_arch(divmod(low - 1, 10))


def test_link_mode_from_environment(monkeypatch):
    monkeypatch.setenv("GPUDYN_NUMBA_LINK", "ptx")
    assert _link.pick_mode() == "ptx"
    monkeypatch.setenv("GPUDYN_NUMBA_LINK", "LTOIR")
    assert _link.pick_mode() == "ltoir"
    monkeypatch.setenv("GPUDYN_NUMBA_LINK", "cubin")
    with pytest.raises(ValueError, match="GPUDYN_NUMBA_LINK"):
        _link.pick_mode()


def test_link_mode_follows_the_nvjitlink_numba_cuda_uses(monkeypatch):
    monkeypatch.delenv("GPUDYN_NUMBA_LINK", raising=False)
    major, minor = _link._major_minor(gdn.build_info()["cuda_version"])
    for have, want in (
        (None, "ptx"),  # the driver's linker: PTX
        ((major, minor), "ltoir"),  # same CUDA major, as new: LTO-IR
        ((major, minor + 5), "ltoir"),
        ((major + 1, 0), "ptx"),
    ):  # a later major reads our PTX, not our LTO-IR
        monkeypatch.setattr(_link, "nvjitlink_version", lambda have=have: have)
        assert _link.pick_mode() == want, have
    for older in ((major - 1, 9),) + (((major, minor - 1),) if minor > 0 else ()):
        monkeypatch.setattr(_link, "nvjitlink_version", lambda older=older: older)
        with pytest.raises(RuntimeError, match="older than the CUDA"):
            _link.pick_mode()


@pytest.mark.parametrize("name", sorted(KINDS))
def test_view_arg_mirrors_the_c_view(name):
    kind = KINDS[name]
    dtype = np.float32 if kind.elements else None
    cls = _view.arg_class(kind, dtype)

    # Every scalar of the C struct, nested structs (the GGArray's heap view) flattened in order.
    def leaves(ctype, prefix="", base=0):
        for f, field in ctype.fields:
            if field.type.kind == "struct":
                yield from leaves(field.type, prefix + f + "_", base + field.offset)
            else:
                yield prefix + f, base + field.offset

    c_leaves = list(leaves(_ffi.ffi.typeof(kind.view_type)))
    assert list(cls._fields) == [f for f, _ in c_leaves]
    arg = fake_arg(name, dtype)
    assert isinstance(arg, np.void) and type(arg) is cls and arg.dtype.names == cls._fields
    assert arg.dtype.itemsize == _ffi.ffi.sizeof(kind.view_type)
    for f, off in c_leaves:
        assert arg.dtype.fields[f][1] == off, f
    # numba-cuda lays a tuple of the fields out naturally aligned: that is the C layout.
    packed = np.dtype([(f, s) for f, s in zip(cls._fields, cls._gpudyn_scalars)], align=True)
    assert packed.itemsize == arg.dtype.itemsize and all(packed.fields[f][1] == off for f, off in c_leaves)
    # One class per structure and dtype: the Numba type tells them apart.
    assert _view.arg_class(kind, dtype) is cls
    assert typeof(arg) == ref_type(name, dtype)
    if kind.elements:
        assert _view.arg_class(kind, np.int32) is not cls
        assert ref_type(name, np.int32) != ref_type(name, np.float32)
        with pytest.raises(TypeError, match="needs the element dtype"):
            ref_type(name)
    else:
        with pytest.raises(TypeError, match="has no element dtype"):
            ref_type(name, np.int32)


def test_view_arg_carries_the_nested_heap_view():
    # The GGArray's view holds its heap's view (a struct in the struct): the argument
    # carries every scalar of it, at the C layout, with the values of the view.
    v = _ffi.ffi.new("gpudyn_ggarray_view_t*")
    v.version, v.num_lfvectors, v.sizes, v.pool_rows = 4, 7, 0x7000_0000_1000, 3
    v.heap.version, v.heap.counters = 9, 0x7000_0000_2000
    arg = fake_arg("GGArray", np.int32, _ffi.ffi.buffer(v))
    assert (arg.version, arg.num_lfvectors, arg.sizes, arg.pool_rows) == (4, 7, 0x7000_0000_1000, 3)
    assert (arg.heap_version, arg.heap_counters) == (9, 0x7000_0000_2000)
    assert bytes(arg) == bytes(_ffi.ffi.buffer(v))  # what CuPy passes: the C struct's bytes
    assert tuple(arg) == tuple(arg[f] for f in type(arg)._fields)  # what numba-cuda iterates: the fields


def test_ref_type_of_something_else():
    with pytest.raises(TypeError, match="not a gpudyn structure class"):
        gdn.ref_type(object)
    with pytest.raises(TypeError, match="not a gpudyn structure class"):
        gdn.ref_type(gpudyn.DeviceBuffer)


def test_launch_passes_every_field_by_value():
    """numba-cuda's argument preparation (what a launch runs before cuLaunchKernel)
    passes a view_arg() field by field, as ctypes scalars of the fields' types."""
    from numba.cuda.dispatcher import _Kernel

    class Kernel:  # the parts of a compiled kernel _prepare_args uses
        extensions = []
        _prepare_args = _Kernel._prepare_args

    v = _ffi.ffi.new("gpudyn_warp_heap_view_t*")
    v.version = 3
    arg = fake_arg("WarpHeap", view=_ffi.ffi.buffer(v))
    out = []
    Kernel()._prepare_args(typeof(arg), arg, None, [], out)
    assert [c.value for c in out] == [int(x) for x in tuple(arg)] and out[0].value == 3
    assert [ctypes.sizeof(c) for c in out] == [np.dtype(s).itemsize for s in type(arg)._gpudyn_scalars]


def test_launch_picks_the_kernel_of_each_argument_class():
    """A launch types its arguments in numba-cuda's C dispatcher, which caches the
    type of a structured NumPy scalar by its dtype; arrays of one layout and two
    dtypes (or two structures) must still reach their own specializations.  The
    kernels here are stand-ins registered as compiled overloads (no GPU)."""
    from numba.cuda import dispatcher
    from numba.cuda.cext import _dispatcher

    def k(a):
        gdn.size(a)

    d = cuda.jit(k)
    cases = [("GGArray", np.int32), ("GGArray", np.float32), ("StaticArray", np.int32), ("VmmArray", np.int32)]
    for name, dtype in cases:
        d.add_overload(f"{name} {np.dtype(dtype).name}", (ref_type(name, dtype),))
    launch = {dispatcher._LAUNCH_CONFIG_KW: None}
    try:
        for _ in range(2):  # the second round hits the C dispatcher's cache
            for name, dtype in cases:
                got = _dispatcher.Dispatcher._cuda_call(d, fake_arg(name, dtype), **launch)
                assert got == f"{name} {np.dtype(dtype).name}"
    finally:
        d.overloads.clear()  # stand-ins, not compile results: nothing for the finalizer to unload


def test_compile_ahead_of_time_with_the_public_ref_type():
    """The documented way to compile a kernel without a GPU: gdn.ref_type in the
    signature, abi="numba" (numba.cuda.compile's default C ABI is for device
    functions only)."""

    def fill(out, n):
        t = cuda.grid(1)
        if t < n:
            gdn.push_back(out, t)

    sig = (gdn.ref_type(gpudyn.GGArray, np.int64), types.int64)
    ptx, _ = cuda.compile(fill, sig, device=False, output="ptx", cc=compile_arch()[1], abi="numba")
    _check_calls(ptx, {"gpudyn_numba_ggarray_push_back_u64"})
    with pytest.raises(NotImplementedError, match="C ABI is not supported for kernels"):
        cuda.compile(fill, sig, device=False, output="ptx", cc=compile_arch()[1])


# ---- one kernel calling every device function ------------------------------------------
def every_function(heap, pages, wh, gg, st, vm, out):
    t = cuda.grid(1)
    p = gdn.malloc(heap, 64 + t)
    if p != 0:  # divergent: a failed malloc skips
        a = gdn.array(p, 16, np.int32)
        a[0] = t
        out[t] = a[0]
        gdn.free(heap, p)
    pg = gdn.get_page(pages)
    if pg != gdn.INVALID_PAGE:
        out[t] += gdn.page_address(pages, pg)
        gdn.free_page(pages, pg)
    q = gdn.malloc(pages, 100)
    gdn.free(pages, q)
    if t % 2 == 0:
        m = cuda.activemask()
        h = gdn.warp_start(wh, m)
        out[t] += gdn.warp_alloc(wh, h, m, 32)
        gdn.warp_tidy_up(wh, h, m)
        gdn.warp_end(wh, h)
    if t % 3 == 0:
        gdn.push_back(gg, t)
        gdn.push_back(st, 0.5 * t)
        gdn.push_back(vm, t + 1j)
    vals = cuda.local.array(4, np.int32)
    for j in range(4):
        vals[j] = t + j
    gdn.extend(gg, vals, t % 5)
    out[t] += gdn.size(gg) + gdn.size(st) + gdn.size(vm) + gdn.ranged_size(gg)
    out[t] += gdn.at(gg, t) + np.uint64(gdn.at(st, t)) + np.uint64(gdn.at(vm, t).real)
    s = gdn.span(gg, t, t + 100)
    if s.size > 0:
        out[t] += s[0] + gdn.span(st, 0, t).size + gdn.span(vm, t, 2 * t).size


EXPECTED_SHIMS = {
    "gpudyn_numba_heap_malloc",
    "gpudyn_numba_heap_free",
    "gpudyn_numba_rw_heap_get_page",
    "gpudyn_numba_rw_heap_free_page",
    "gpudyn_numba_rw_heap_page_address",
    "gpudyn_numba_rw_heap_malloc",
    "gpudyn_numba_rw_heap_free",
    "gpudyn_numba_warp_heap_start",
    "gpudyn_numba_warp_heap_alloc",
    "gpudyn_numba_warp_heap_tidy_up",
    "gpudyn_numba_warp_heap_end",
    "gpudyn_numba_ggarray_push_back_u32",
    "gpudyn_numba_static_array_push_back_u64",
    "gpudyn_numba_vmm_array_push_back_u128",
    "gpudyn_numba_ggarray_extend_u32",
    "gpudyn_numba_ggarray_size",
    "gpudyn_numba_static_array_size",
    "gpudyn_numba_vmm_array_size",
    "gpudyn_numba_ggarray_ranged_size",
    "gpudyn_numba_ggarray_at_u32",
    "gpudyn_numba_static_array_at_u64",
    "gpudyn_numba_vmm_array_at_u128",
    "gpudyn_numba_ggarray_span_u32",
    "gpudyn_numba_static_array_span_u64",
    "gpudyn_numba_vmm_array_span_u128",
}


def _signature():
    return (
        ref_type("Heap"),
        ref_type("RWHeap"),
        ref_type("WarpHeap"),
        ref_type("GGArray", np.int32),
        ref_type("StaticArray", np.float64),
        ref_type("VmmArray", np.complex128),
        types.uint64[::1],
    )


_FUNC_RE = re.compile(r"\.(extern|visible)\s+\.func\s*(?:\(\s*\.param\s+(\.\w+)\s+\w+\s*\))?\s*(\w+)\s*\(([^)]*)\)")


def ptx_prototypes(ptx: str, which: str) -> dict:
    """{name: (return type or None, [param types])} of the .extern or .visible functions."""
    out = {}
    for m in _FUNC_RE.finditer(ptx):
        if m.group(1) == which:
            params = [p.split()[1] for p in m.group(4).split(",") if p.strip()]
            out[m.group(3)] = (m.group(2), params)
    return out


def compile_arch():
    archs = gdn.build_info()["archs"]
    arch = "90" if "90" in archs else archs[0]
    return arch, divmod(int(arch.rstrip("af")), 10)


def _check_calls(ptx: str, expected: set):
    """The kernel's gpudyn calls are exactly `expected`, each with the shim's PTX prototype."""
    arch, _ = compile_arch()
    calls = {n: p for n, p in ptx_prototypes(ptx, "extern").items() if n.startswith("gpudyn_numba_")}
    assert set(calls) == expected
    shims = ptx_prototypes(open(_link.shim_path(arch, "ptx"), encoding="utf-8").read(), "visible")
    for name, proto in calls.items():
        assert shims.get(name) == proto, f"{name}: the kernel calls {proto}, the shim is {shims.get(name)}"


def test_kernel_calls_resolve_to_the_shims_ptx():
    ptx, _ = cuda.compile(every_function, _signature(), device=False, output="ptx", cc=compile_arch()[1], abi="numba")
    _check_calls(ptx, EXPECTED_SHIMS)


def push_every_way(gg, st, vm, out):
    t = cuda.grid(1)
    if t % 2 == 1:  # odd lanes only
        out[0] = gdn.push_back(gg, t) and gdn.push_back(st, 1.5) and gdn.push_back(vm, True)
    vals = cuda.local.array(3, out.dtype)
    vals[0] = 1
    gdn.extend(st, vals, t % 4)
    out[1] = gdn.size(vm)


@pytest.mark.parametrize("dtype", ARRAY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_push_back_compiles_for_every_dtype(dtype):
    bits = np.dtype(dtype).itemsize * 8
    sig = tuple(ref_type(name, dtype) for name in ("GGArray", "StaticArray", "VmmArray"))
    sig += (types.Array(typeof(np.zeros(1, dtype)).dtype, 1, "C"),)
    ptx, _ = cuda.compile(push_every_way, sig, device=False, output="ptx", cc=compile_arch()[1], abi="numba")
    _check_calls(
        ptx,
        {f"gpudyn_numba_{k}_push_back_u{bits}" for k in ("ggarray", "static_array", "vmm_array")}
        | {f"gpudyn_numba_static_array_extend_u{bits}", "gpudyn_numba_vmm_array_size"},
    )


def read_every_way(gg, st, vm, out, n):
    t = cuda.grid(1)
    out[t] = gdn.at(gg, t)
    out[t + n] = gdn.at(st, t)
    s = gdn.span(vm, t, n)
    if s.size > 0:
        out[t + 2 * n] = s[0]
        s[0] = out[t]  # a span's elements are the array's own


@pytest.mark.parametrize("dtype", ARRAY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_reads_compile_for_every_dtype(dtype):
    bits = np.dtype(dtype).itemsize * 8
    sig = tuple(ref_type(name, dtype) for name in ("GGArray", "StaticArray", "VmmArray"))
    sig += (types.Array(typeof(np.zeros(1, dtype)).dtype, 1, "C"), types.int64)
    ptx, _ = cuda.compile(read_every_way, sig, device=False, output="ptx", cc=compile_arch()[1], abi="numba")
    _check_calls(
        ptx,
        {
            f"gpudyn_numba_ggarray_at_u{bits}",
            f"gpudyn_numba_static_array_at_u{bits}",
            f"gpudyn_numba_vmm_array_span_u{bits}",
        },
    )


def _linker(mode: str):
    """cuda.core's Linker, or a skip naming why it cannot run here."""
    from cuda.core import Linker, LinkerOptions, ObjectCode

    have = _link.nvjitlink_version()
    built = _link._major_minor(gdn.build_info()["cuda_version"])
    if have is None:
        try:
            no_driver = not cuda.is_available()
        except Exception:
            no_driver = True
        if mode == "ltoir" or no_driver:
            pytest.skip(
                f"linking {mode} here needs nvJitLink (pip install 'nvidia-nvjitlink=={built[0]}.*')"
                + ("" if mode == "ltoir" else " or a CUDA driver")
            )
    elif have[0] < built[0] or (mode == "ltoir" and have < built):
        pytest.skip(f"nvJitLink {have} is older than the CUDA {built} that built the shims")
    return Linker, LinkerOptions, ObjectCode


@pytest.mark.parametrize("mode", _link.MODES)
def test_kernel_links_with_the_installed_shims(mode):
    Linker, LinkerOptions, ObjectCode = _linker(mode)
    arch, cc = compile_arch()
    code, _ = cuda.compile(every_function, _signature(), device=False, output=mode, cc=cc, abi="numba")
    shim = open(_link.shim_path(arch, mode), "rb").read()
    if mode == "ptx":
        kernel_obj, shim_obj = ObjectCode.from_ptx(code.encode()), ObjectCode.from_ptx(shim)
        options = LinkerOptions(arch=f"sm_{arch}")
    else:
        kernel_obj, shim_obj = ObjectCode.from_ltoir(code), ObjectCode.from_ltoir(shim)
        options = LinkerOptions(arch=f"sm_{arch}", link_time_optimization=True)
    linker = Linker(kernel_obj, shim_obj, options=options)
    cubin = linker.link("cubin")
    log = linker.get_error_log()
    assert len(cubin.code) > 0 and "error" not in log.lower(), log
    # And without the shims the same kernel does not link: the calls are really foreign.
    with pytest.raises(Exception):  # noqa: B017  (numba-cuda raises its own link error types)
        Linker(kernel_obj, options=options).link("cubin")


# ---- typing errors name the argument ------------------------------------------------------
def _typing_error(fn, sig, match):
    # numba reports the intrinsic's TypingError inside its own (numba.core's) TypingError.
    with pytest.raises(Exception, match=match):
        cuda.compile(fn, sig, device=False, output="ptx", cc=compile_arch()[1], abi="numba")


def test_wrong_structure_is_a_typing_error_naming_ref():
    def k(heap):
        gdn.get_page(heap)

    _typing_error(k, (ref_type("Heap"),), r"get_page: argument 'ref' must be a RWHeap\.view_arg\(\)")


def test_plain_tuple_is_not_a_ref():
    def k(t):
        gdn.malloc(t, 16)

    _typing_error(
        k,
        (types.UniTuple(types.uint64, 3),),
        r"malloc: argument 'ref' must be a Heap\.view_arg\(\) "
        r"or RWHeap\.view_arg\(\)",
    )


def test_float_size_is_a_typing_error_naming_nbytes():
    def k(heap):
        gdn.malloc(heap, 1.5)

    _typing_error(k, (ref_type("Heap"),), r"malloc: argument 'nbytes' must be an integer")


def test_extend_values_must_have_the_arrays_dtype():
    def k(gg, vals):
        gdn.extend(gg, vals, 2)

    _typing_error(
        k,
        (ref_type("GGArray", np.int32), types.int64[::1]),
        r"extend: argument 'values' must be a 1-D C-contiguous array of int32",
    )


@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_complex_value_into_a_real_array_is_a_typing_error_naming_value(dtype):
    def k(gg):
        gdn.push_back(gg, 1 + 2j)

    _typing_error(k, (ref_type("GGArray", dtype),), r"push_back: argument 'value' is complex128")


def test_push_back_into_a_heap_is_a_typing_error():
    def k(heap):
        gdn.push_back(heap, 1)

    _typing_error(
        k,
        (ref_type("Heap"),),
        r"push_back: argument 'ref' must be a GGArray\.view_arg\(\) or "
        r"StaticArray\.view_arg\(\) or VmmArray\.view_arg\(\)",
    )


def test_ranged_size_is_the_ggarrays_only():
    def k(st):
        gdn.ranged_size(st)

    _typing_error(
        k,
        (ref_type("StaticArray", np.int32),),
        r"ranged_size: argument 'ref' must be a "
        r"GGArray\.view_arg\(\)",
    )


def test_float_index_is_a_typing_error_naming_i():
    def k(gg):
        gdn.at(gg, 1.5)

    _typing_error(k, (ref_type("GGArray", np.int32),), r"at: argument 'i' must be an integer")


def test_span_of_a_heap_is_a_typing_error():
    def k(heap):
        gdn.span(heap, 0, 4)

    _typing_error(k, (ref_type("Heap"),), r"span: argument 'ref' must be a GGArray\.view_arg\(\)")


def test_array_dtype_must_be_a_numpy_type():
    def k(heap):
        gdn.array(gdn.malloc(heap, 16), 4, 3)

    _typing_error(k, (ref_type("Heap"),), r"array: argument 'dtype'")


# ---- gpudyn bench numba: its host parts ---------------------------------------------------
def _brute_force(n, mode):
    from gpudyn.bench import numba as bench

    values = []
    for t in range(n):
        h = t
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & 0xFFFFFFFF
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & 0xFFFFFFFF
        h ^= h >> 16
        k = (1 if h < bench.BERNOULLI_THRESHOLD else 0) if mode == 0 else h % (3 if mode == 1 else 17)
        values += [t * 16 + j for j in range(k)]
    return {"count": len(values), "sum": sum(values) % (1 << 64), "sum_squares": sum(v * v for v in values) % (1 << 64)}


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_bench_numba_expected_output_matches_enumeration(mode):
    from gpudyn.bench import numba as bench

    assert bench.expected(5000, mode) == _brute_force(5000, mode)


@pytest.mark.parametrize("kernel", ["push_back", "extend"])
def test_bench_numba_kernels_compile_and_call_the_shims(kernel, monkeypatch):
    """Both ways the bench writes its GGArray kernel compile to PTX without a GPU and
    call exactly the shim of that way."""
    import types as pytypes

    from gpudyn.bench import numba as bench
    from numba.cuda import dispatcher

    # The kernels call a @cuda.jit device function, which numba-cuda compiles for the
    # current device's architecture: without a GPU, name the one compiled for.
    fake = pytypes.SimpleNamespace(compute_capability=compile_arch()[1])
    monkeypatch.setattr(dispatcher, "get_current_device", lambda: fake)
    emit = bench._kernels()[0][kernel]
    sig = (ref_type("GGArray", np.int32), types.int64, types.int64, types.Array(types.uint64, 1, "C"))
    ptx, _ = cuda.compile(emit.py_func, sig, device=False, output="ptx", cc=compile_arch()[1], abi="numba")
    _check_calls(ptx, {f"gpudyn_numba_ggarray_{kernel}_u32"})


def test_bench_numba_row_takes_the_faster_kernel_and_the_worse_ratio():
    from gpudyn.bench import numba as bench

    series = {
        "numba_push_back": [2.0, 2.2, 2.1],
        "cpp_push_back": [2.0, 2.0, 2.0],
        "numba_e2e_push_back": [3.0] * 3,
        "numba_extend": [1.5] * 3,
        "cpp_extend": [1.0] * 3,
        "numba_e2e_extend": [2.5, 2.4, 2.6],
    }
    row = bench._row(8.0, 100, series, [5.0, 5.0, 5.0], 4096, 800, True)
    assert row["numba_ms"] == pytest.approx(2.1) and row["numba_ms_extend"] == pytest.approx(1.5)
    assert row["numba_over_cpp"] == pytest.approx(1.05) and row["numba_over_cpp_extend"] == pytest.approx(1.5)
    assert row["e2e_kernel"] == "extend" and row["best_e2e_ms"] == pytest.approx(2.5)
    assert row["speedup_vs_two_pass"] == pytest.approx(2.0)
    assert row["series_ms"]["two_pass"] == [5.0, 5.0, 5.0] and row["verified"]


def test_bench_numba_cpp_kernel_compiles_with_nvrtc():
    import importlib.util
    import pathlib

    from gpudyn.bench import numba as bench

    check_py = pathlib.Path(__file__).resolve().parents[2] / ".ci" / "nvrtc_check.py"
    spec = importlib.util.spec_from_file_location("nvrtc_check", check_py)
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    try:
        nvrtc = check.Nvrtc(check.find_nvrtc())
    except (SystemExit, OSError) as e:
        pytest.skip(f"NVRTC is not available here ({e}); pip install nvidia-cuda-nvrtc")
    ok, log, _ = nvrtc.compile(bench.CPP_SOURCE, "bench_numba.cu", gpudyn.nvrtc_options(arch="90"))
    assert ok, log
