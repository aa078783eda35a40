"""GGArray / StaticArray / VmmArray from Python: argument errors (host) and
device correctness (GPU): multisets, masks, flatten zero-copy, OOM, theory bound."""

import gpudyn
import numpy as np
import pytest
from gpudyn.bench import theory

ALGOS = ["atomic", "warp_scan", "tensor_scan"]


def test_bad_arguments_name_the_argument():
    with pytest.raises(TypeError, match="dtype"):
        gpudyn.GGArray(dtype=np.dtype("V3"))
    with pytest.raises(ValueError, match="algorithm"):
        gpudyn.GGArray.__new__(gpudyn.GGArray).extend(np.zeros(1, np.int32), algorithm="bubble")


def test_theory_bound_and_fig3():
    for n in (10**6, 3 * 10**6 + 7, 10**8):
        cap = theory.ggarray_capacity(n)
        assert n <= cap
        assert cap * 4 <= theory.ggarray_bytes_bound(n, 4)
    f = theory.fig3(size=10**5, sigmas=[0.0, 1.0, 2.0], samples=200)
    assert f["static_elements"][2] > f["static_elements"][0]
    # GGArray stays within 2x of what is needed plus the first buckets; static grows far beyond
    for need, gg in zip(f["needed_elements"], f["ggarray_elements"]):
        assert gg <= 2 * need + 512 * 1024


def _make(kind, dtype, n):
    if kind == "ggarray":
        return gpudyn.GGArray(dtype=dtype)
    if kind == "static":
        return gpudyn.StaticArray(2 * n, dtype=dtype)
    return gpudyn.VmmArray(dtype=dtype, initial_capacity=2 * n, max_capacity=1 << 28)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["ggarray", "static", "vmm"])
@pytest.mark.parametrize("algorithm", ALGOS)
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.int32, np.float64, np.complex128])
def test_multiset_and_mask(kind, algorithm, dtype):
    n = 50001
    rng = np.random.default_rng(1)
    x = (rng.integers(0, 100, n)).astype(dtype)
    with _make(kind, dtype, n) as a:
        a.extend(x, algorithm=algorithm)
        assert len(a) == n
        assert np.array_equal(np.sort(a.to_numpy()), np.sort(x))
        # the precursor's test: insert a copy of x if x < 90
        mask = (x.real < 90) if np.iscomplexobj(x) else (x < 90)
        a.extend(x, mask=mask, algorithm=algorithm)
        expect = np.concatenate([x, x[mask]])
        got = a.to_numpy()
        assert np.array_equal(np.sort(got), np.sort(expect))
        flat = a.flatten().to_numpy()
        assert np.array_equal(flat, got)


@pytest.mark.gpu
def test_cupy_and_torch_inputs_and_zero_copy_flatten():
    cp = pytest.importorskip("cupy")
    g = gpudyn.GGArray(dtype=np.int32)
    g.extend(cp.arange(1000, dtype=cp.int32))
    try:
        import torch

        g.extend(torch.arange(1000, 2000, dtype=torch.int32, device="cuda"))
        total = 2000
    except ImportError:
        total = 1000
    flat = cp.asarray(g.flatten())  # zero-copy through __cuda_array_interface__
    assert int(flat.size) == total
    assert np.array_equal(np.sort(cp.asnumpy(flat)), np.arange(total))
    v = gpudyn.VmmArray(dtype=np.int32, initial_capacity=10)
    v.extend(np.arange(10, dtype=np.int32))
    assert np.array_equal(cp.asnumpy(cp.asarray(v)), np.sort(v.to_numpy()))


@pytest.mark.gpu
def test_overflow_keeps_elements():
    s = gpudyn.StaticArray(100, dtype=np.int32)
    s.extend(np.arange(60, dtype=np.int32))
    with pytest.raises(gpudyn.OutOfMemoryError):
        s.extend(np.arange(60, dtype=np.int32))
    assert len(s) == 60
    assert np.array_equal(np.sort(s.to_numpy()), np.arange(60))
    v = gpudyn.VmmArray(dtype=np.int32, initial_capacity=1, max_capacity=1 << 24)
    cap = v.capacity
    with pytest.raises(gpudyn.OutOfMemoryError):
        v.extend(np.zeros(cap + 1, dtype=np.int32))
    assert len(v) == 0
    v.reserve(cap + 1)
    v.extend(np.zeros(cap + 1, dtype=np.int32))
    assert len(v) == cap + 1


@pytest.mark.gpu
def test_growth_memory_bound():
    g = gpudyn.GGArray(dtype=np.int32)
    n = 0
    for step in range(6):
        add = 20000 if step == 0 else n  # stays inside CUDA's default 8 MB device heap
        g.extend(np.arange(n, n + add, dtype=np.int32))
        n += add
    st = g.stats()
    assert st["size"] == n
    assert np.array_equal(np.sort(g.to_numpy()), np.arange(n))
    assert st["allocated_bytes"] <= theory.ggarray_bytes_bound(n, 4)


@pytest.mark.gpu
def test_extend_maps_pool_rows_beyond_the_device_heap():
    # 512 MB of int32 in one extend, no reserve: more than the process's device
    # heap (conftest: 256 MiB), so the buckets must come from pool rows mapped by extend.
    cp = pytest.importorskip("cupy")
    n = 1 << 27
    with gpudyn.GGArray(dtype=np.int32) as g:
        g.extend(cp.arange(n, dtype=cp.int32))
        assert len(g) == n
        flat = cp.asarray(g.flatten())
        assert bool((cp.sort(flat) == cp.arange(n, dtype=cp.int32)).all())
        st = g.stats()
        assert n * 4 <= st["allocated_bytes"] <= theory.ggarray_bytes_bound(n, 4)


@pytest.mark.gpu
def test_example_cupy_rawmodule_push_back():
    pytest.importorskip("cupy")
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "ggarray" / "cupy_push_back.py"
    spec = importlib.util.spec_from_file_location("cupy_push_back", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main() == 0


@pytest.mark.gpu
def test_vmm_dlpack_and_reserved_pool_without_heap():
    v = gpudyn.VmmArray(dtype=np.int32, initial_capacity=1000)
    v.extend(np.arange(1000, dtype=np.int32))
    dev_type, _ = v.__dlpack_device__()
    assert dev_type == 2  # kDLCUDA
    try:
        import cupy as cp
    except ImportError:
        cp = None
    if cp is not None:
        x = cp.from_dlpack(v)
        assert int(x.sum()) == sum(range(1000))
        assert x.data.ptr == v.__cuda_array_interface__["data"][0]
    v.close()
    # reserve maps pool rows: 64 MB of int32 appended with CUDA's default 8 MB heap
    n = 1 << 24
    g = gpudyn.GGArray(dtype=np.int32, num_lfvectors=64)
    g.reserve(2 * n)
    g.extend(np.arange(n, dtype=np.int32))
    assert len(g) == n
    assert np.array_equal(np.sort(g.to_numpy()), np.arange(n))
    st = g.stats()
    assert st["capacity"] >= 2 * n
    g.close()


@pytest.mark.gpu
def test_append_stores_only_values_the_dtype_holds():
    with gpudyn.StaticArray(16, np.int32) as s:
        for v in (1.5, 2.9, np.float32(7.25), 1 << 31, np.int64(-(1 << 40))):  # 1.5 was stored as 1
            with pytest.raises(ValueError, match="cannot hold"):
                s.append(v)
        assert len(s) == 0
        for v in (3.0, np.int64(-5), True, 7):
            s.append(v)
        assert sorted(s.to_numpy().tolist()) == [-5, 1, 3, 7]


@pytest.mark.gpu
def test_masked_cuda_array_is_refused_not_read_whole():
    vals = gpudyn.DeviceBuffer.from_numpy(np.arange(8, dtype=np.int32))
    keep = gpudyn.DeviceBuffer.from_numpy(np.array([1, 0] * 4, dtype=np.uint8))

    class Masked:  # a CAI v3 array with a 'mask': its masked-out elements were pushed
        __cuda_array_interface__ = dict(vals.__cuda_array_interface__, mask=keep)

    with gpudyn.StaticArray(64, np.int32) as s:
        with pytest.raises(NotImplementedError, match="masked CUDA array"):
            s.extend(Masked())
        assert len(s) == 0
