"""Failures of pushes from users' kernels are visible: the arrays' status
(gpudyn_<array>_get_status / clear_status), OutOfMemoryError at the next host
call, check(); the status ABI's argument errors (host)."""

import gpudyn
import numpy as np
import pytest
from gpudyn._ffi import check, ffi, lib
from gpudyn.ggarray import STATUS_ALLOCATION_FAILED, STATUS_CAPACITY_EXCEEDED, STATUS_WRONG_ELEMENT_SIZE, status_error

PREFIXES = ["gpudyn_ggarray_", "gpudyn_static_array_", "gpudyn_vmm_array_"]


# ---- host ---------------------------------------------------------------------
@pytest.mark.parametrize("prefix", PREFIXES)
def test_status_abi_refuses_null_array(prefix):
    out = ffi.new("uint32_t*")
    out[0] = 12345
    with pytest.raises(gpudyn.InvalidArgumentError, match="'array'"):
        check(getattr(lib, prefix + "get_status")(ffi.NULL, out, ffi.NULL))
    assert out[0] == 12345  # untouched on failure
    with pytest.raises(gpudyn.InvalidArgumentError, match="'array'"):
        check(getattr(lib, prefix + "clear_status")(ffi.NULL, ffi.NULL))


def test_status_bits_match_the_header():
    assert STATUS_ALLOCATION_FAILED == lib.GPUDYN_ARRAY_STATUS_ALLOCATION_FAILED
    assert STATUS_CAPACITY_EXCEEDED == lib.GPUDYN_ARRAY_STATUS_CAPACITY_EXCEEDED
    assert gpudyn.GGArray.STATUS_CAPACITY_EXCEEDED == STATUS_CAPACITY_EXCEEDED
    assert STATUS_WRONG_ELEMENT_SIZE == lib.GPUDYN_ARRAY_STATUS_WRONG_ELEMENT_SIZE == 4
    assert gpudyn.StaticArray.STATUS_WRONG_ELEMENT_SIZE == STATUS_WRONG_ELEMENT_SIZE


def test_status_error_names_the_array_and_the_cause():
    e = status_error("StaticArray", STATUS_CAPACITY_EXCEEDED)
    assert isinstance(e, gpudyn.OutOfMemoryError) and isinstance(e, MemoryError)
    assert e.status == 2 and "StaticArray" in str(e) and "capacity" in str(e)
    e = status_error("GGArray", STATUS_ALLOCATION_FAILED | STATUS_CAPACITY_EXCEEDED | 64)
    assert "allocated" in str(e) and "capacity" in str(e) and "0x40" in str(e)


def test_a_wrong_element_type_is_an_argument_error_not_out_of_memory():
    e = status_error("GGArray", STATUS_WRONG_ELEMENT_SIZE)
    assert isinstance(e, gpudyn.InvalidArgumentError) and not isinstance(e, MemoryError)
    assert e.status_name == "GPUDYN_ERROR_INVALID_ARGUMENT" and "element type" in str(e)
    e = status_error("VmmArray", STATUS_WRONG_ELEMENT_SIZE | STATUS_CAPACITY_EXCEEDED)
    assert isinstance(e, gpudyn.InvalidArgumentError)  # the bug first; both causes named
    assert "element type" in str(e) and "capacity" in str(e)


def test_check_and_status_of_a_closed_array_raise_value_error():
    a = gpudyn.GGArray.__new__(gpudyn.GGArray)
    a._handle = None
    with pytest.raises(ValueError):
        a.check()
    with pytest.raises(ValueError):
        _ = a.status


# ---- GPU ----------------------------------------------------------------------
KERNELS = r"""
#include <gpudyn/ggarray.cuh>
#include <gpudyn/vmm_array.cuh>
// Thread i pushes i when i % 3 != 0 (the others leave first); ok[i] = whether it was stored.
template <class Ref, class View>
__device__ void push_ids(View view, unsigned n, unsigned char* ok) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || i % 3 == 0) return;
    ok[i] = Ref{view}.push_back(int(i));
}
extern "C" __global__ void push_static(gpudyn_static_array_view_t v, unsigned n, unsigned char* ok) {
    push_ids<gpudyn::static_array_ref<int>>(v, n, ok);
}
extern "C" __global__ void push_vmm(gpudyn_vmm_array_view_t v, unsigned n, unsigned char* ok) {
    push_ids<gpudyn::vmm_array_ref<int>>(v, n, ok);
}
extern "C" __global__ void push_ggarray(gpudyn_ggarray_view_t v, unsigned n, unsigned char* ok) {
    push_ids<gpudyn::ggarray_ref<int>>(v, n, ok);
}
// The same through refs of 8-byte elements (the arrays below hold int32), and a
// read: size() through such a ref into seen[0].
template <class Ref, class View>
__device__ void wrong_type(View view, unsigned n, unsigned char* ok, unsigned long long* seen) {
    push_ids<Ref>(view, n, ok);
    if (blockIdx.x == 0 && threadIdx.x == 0) seen[0] = Ref{view}.size();
}
extern "C" __global__ void wrong_static(gpudyn_static_array_view_t v, unsigned n, unsigned char* ok,
                                        unsigned long long* seen) {
    wrong_type<gpudyn::static_array_ref<long long>>(v, n, ok, seen);
}
extern "C" __global__ void wrong_vmm(gpudyn_vmm_array_view_t v, unsigned n, unsigned char* ok,
                                     unsigned long long* seen) {
    wrong_type<gpudyn::vmm_array_ref<double>>(v, n, ok, seen);
}
extern "C" __global__ void wrong_ggarray(gpudyn_ggarray_view_t v, unsigned n, unsigned char* ok,
                                         unsigned long long* seen) {
    wrong_type<gpudyn::ggarray_ref<long long>>(v, n, ok, seen);
}
"""


def _module(cp):
    return cp.RawModule(code=KERNELS, options=tuple(gpudyn.nvrtc_options()))


def _push(cp, mod, name, arr, n):
    ok = cp.zeros(n, dtype=cp.uint8)
    mod.get_function(name)(((n + 255) // 256,), (256,), (arr.view_arg(), np.uint32(n), ok))
    return ok


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["static", "vmm"])
def test_full_contiguous_array_reports_at_the_next_host_call(kind):
    cp = pytest.importorskip("cupy")
    mod = _module(cp)
    before = np.arange(-100, 0, dtype=np.int32)
    a = (
        gpudyn.StaticArray(5000, dtype=np.int32)
        if kind == "static"
        else gpudyn.VmmArray(dtype=np.int32, initial_capacity=5000, max_capacity=1 << 20)
    )
    a.extend(before)
    cap = a.capacity
    n = 3 * cap  # 2/3 of the threads push: more than fits
    ok = _push(cp, mod, "push_" + kind, a, n)
    assert a.status == STATUS_CAPACITY_EXCEEDED  # reading it neither raises nor clears
    assert a.status == STATUS_CAPACITY_EXCEEDED
    with pytest.raises(gpudyn.OutOfMemoryError, match="capacity"):
        a.extend(np.arange(5, dtype=np.int32))  # raised before the push: nothing appended
    assert a.status == 0  # reported once
    stored = np.nonzero(cp.asnumpy(ok))[0].astype(np.int32)
    assert 0 < stored.size < 2 * n // 3
    assert len(a) == before.size + stored.size <= cap
    assert np.array_equal(np.sort(a.to_numpy()), np.concatenate([before, stored]))  # each once, none lost
    a.check()  # nothing new
    a.clear()
    assert len(a) == 0 and a.status == 0
    ok = _push(cp, mod, "push_" + kind, a, 30)  # takes pushes again
    assert len(a) == 20 and int(ok.sum()) == 20


@pytest.mark.gpu
def test_clear_status_without_raising_and_clear_zeroes_it():
    cp = pytest.importorskip("cupy")
    mod = _module(cp)
    a = gpudyn.StaticArray(64, dtype=np.int32)
    _push(cp, mod, "push_static", a, 300)
    assert a.status == STATUS_CAPACITY_EXCEEDED
    a.clear_status()
    assert a.status == 0
    n = len(a)  # no exception: cleared
    assert 0 < n <= 64
    _push(cp, mod, "push_static", a, 300)
    assert a.status != 0
    a.clear()
    assert a.status == 0 and len(a) == 0


@pytest.mark.gpu
def test_ggarray_out_of_budget_in_a_kernel():
    # No pool: every bucket of the kernel's pushes comes from the array's heap,
    # an 8 MiB budget: 2^22 threads push 2/3 x 16 MiB.
    cp = pytest.importorskip("cupy")
    mod = _module(cp)
    g = gpudyn.GGArray(dtype=np.int32, num_lfvectors=8, pool_bytes=None, budget=8 << 20, max_budget=8 << 20)
    g.extend(np.arange(-1000, 0, dtype=np.int32))
    n = 1 << 22
    ok = _push(cp, mod, "push_ggarray", g, n)
    assert g.status & STATUS_ALLOCATION_FAILED
    with pytest.raises(gpudyn.OutOfMemoryError, match="budget"):
        len(g)
    kept = int(ok.sum())
    assert 0 < kept < 2 * n // 3
    assert len(g) == 1000 + kept
    got = cp.sort(cp.asarray(g.flatten()))
    want = cp.concatenate([cp.arange(-1000, 0, dtype=cp.int32), cp.nonzero(ok)[0].astype(cp.int32)])
    assert bool((got == want).all())  # the stored values are exactly the pushes that returned true
    g.close()


@pytest.mark.gpu
def test_view_arg_by_value_in_a_kernel_per_thread_push():
    cp = pytest.importorskip("cupy")
    mod = _module(cp)
    g = gpudyn.GGArray(dtype=np.int32, num_lfvectors=5, first_bucket=32)
    n = 100_003
    ok = _push(cp, mod, "push_ggarray", g, n)
    g.check()
    i = np.arange(n)
    assert np.array_equal(cp.asnumpy(ok).astype(bool), i % 3 != 0)
    assert np.array_equal(np.sort(g.to_numpy()), i[i % 3 != 0].astype(np.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["static", "vmm", "ggarray"])
def test_a_kernel_with_the_wrong_element_type_is_refused_and_reported(kind):
    cp = pytest.importorskip("cupy")
    mod = _module(cp)
    make = {
        "static": lambda: gpudyn.StaticArray(4096, dtype=np.int32),
        "vmm": lambda: gpudyn.VmmArray(dtype=np.int32, initial_capacity=4096, max_capacity=1 << 20),
        "ggarray": lambda: gpudyn.GGArray(dtype=np.int32, num_lfvectors=3, first_bucket=32),
    }[kind]
    with make() as a:
        before = np.arange(-50, 0, dtype=np.int32)
        a.extend(before)
        n = 3000
        ok = cp.full(n, 7, dtype=cp.uint8)
        seen = cp.full(1, 12345, dtype=cp.uint64)
        mod.get_function("wrong_" + kind)(((n + 255) // 256,), (256,), (a.view_arg(), np.uint32(n), ok, seen))
        got = cp.asnumpy(ok)
        i = np.arange(n)
        assert (got[i % 3 != 0] == 0).all() and (got[i % 3 == 0] == 7).all()  # every push refused
        assert int(seen[0]) == 0  # a refused read sees nothing
        assert a.status == STATUS_WRONG_ELEMENT_SIZE  # the host sees why, once for the whole grid's misuse
        with pytest.raises(gpudyn.InvalidArgumentError, match="element type"):
            len(a)
        assert a.status == 0
        assert np.array_equal(a.to_numpy(), before)  # nothing stored, nothing lost
        ok = _push(cp, mod, "push_" + kind, a, 30)  # the right type still pushes
        a.check()
        assert int(ok.sum()) == 20 and len(a) == before.size + 20
