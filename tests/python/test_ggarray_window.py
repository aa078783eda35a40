"""The GGArray's window (view field `window`): a hint naming the bucket each
LFVector's pushes go to, so a push whose range lies in it stores without
bucket arithmetic.  Whatever it names, pushes must land where settle would put
them: after clear (pushes start again at bucket 0 of kept buckets), with a view
taken before the clear, across launches that grow many buckets, and for
element sizes where no window can be formed (1-byte elements with 32-element
first buckets: a bucket's start minus its first index is not 64-byte aligned)."""

import gpudyn
import numpy as np
import pytest

KERNELS = r"""
#include <gpudyn/ggarray.cuh>
// Thread i < n pushes first + i unless i % 5 == 2 (those return first): the
// groups are partial warps.
extern "C" __global__ void push_ids(gpudyn_ggarray_view_t v, unsigned n, int first, unsigned char* ok) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || i % 5 == 2) return;
    ok[i] = gpudyn::ggarray_ref<int>{v}.push_back(first + int(i));
}
// Thread i < n pushes (i * 7) & 255 as one byte.
extern "C" __global__ void push_bytes(gpudyn_ggarray_view_t v, unsigned n, unsigned char* ok) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    ok[i] = gpudyn::ggarray_ref<unsigned char>{v}.push_back((unsigned char)((i * 7u) & 255u));
}
"""


def _module(cp):
    return cp.RawModule(code=KERNELS, options=tuple(gpudyn.nvrtc_options()))


def _push_ids(cp, mod, view, n, first):
    ok = cp.zeros(n, dtype=cp.uint8)
    mod.get_function("push_ids")(((n + 255) // 256,), (256,), (view, np.uint32(n), np.int32(first), ok))
    return cp.asnumpy(ok)


def _expected_ids(n, first):
    i = np.arange(n, dtype=np.int64)
    return (first + i[i % 5 != 2]).astype(np.int32)


@pytest.mark.gpu
def test_pushes_after_clear_fill_the_kept_buckets_from_the_start():
    cp = pytest.importorskip("cupy")
    mod = _module(cp)
    a = gpudyn.GGArray(np.int32, num_lfvectors=3, first_bucket=32)
    n = 50_000  # about 13 buckets an LFVector: the window moves many times
    ok = _push_ids(cp, mod, a.view_arg(), n, 0)
    assert ok.sum() == _expected_ids(n, 0).size and a.status == 0
    held = a.stats()["allocated_bytes"]
    old_view = a.view_arg()
    a.clear()
    assert len(a) == 0
    # A view taken before the clear still works: the buckets and the window's memory are the array's.
    ok = _push_ids(cp, mod, old_view, n // 2, 10**6)
    ok2 = _push_ids(cp, mod, a.view_arg(), n // 2, 2 * 10**6)
    assert ok.sum() == _expected_ids(n // 2, 0).size
    assert ok2.sum() == _expected_ids(n // 2, 0).size and a.status == 0
    want = np.concatenate([_expected_ids(n // 2, 10**6), _expected_ids(n // 2, 2 * 10**6)])
    got = a.to_numpy()
    assert np.array_equal(np.sort(got), np.sort(want))  # each once, none of the first run's left
    assert a.stats()["allocated_bytes"] == held  # the kept buckets served: nothing new allocated


@pytest.mark.gpu
def test_growth_over_many_launches_keeps_every_element_once():
    cp = pytest.importorskip("cupy")
    mod = _module(cp)
    a = gpudyn.GGArray(np.int32, num_lfvectors=5, first_bucket=32)
    want = []
    for k in range(6):  # each launch larger: new buckets inside each kernel
        n = 1000 * 3**k
        ok = _push_ids(cp, mod, a.view_arg(), n, k * 10**7)
        assert ok.sum() == _expected_ids(n, 0).size
        want.append(_expected_ids(n, k * 10**7))
    assert a.status == 0
    assert np.array_equal(np.sort(a.to_numpy()), np.sort(np.concatenate(want)))


@pytest.mark.gpu
def test_one_byte_elements_with_small_first_buckets():
    cp = pytest.importorskip("cupy")
    mod = _module(cp)
    a = gpudyn.GGArray(np.uint8, num_lfvectors=3, first_bucket=32)
    n = 200_000
    for _rep in range(2):
        ok = cp.zeros(n, dtype=cp.uint8)
        mod.get_function("push_bytes")(((n + 255) // 256,), (256,), (a.view_arg(), np.uint32(n), ok))
        assert int(ok.sum()) == n and a.status == 0
    want = np.bincount(np.tile((np.arange(n, dtype=np.int64) * 7) & 255, 2), minlength=256)
    got = a.to_numpy()
    assert got.size == 2 * n
    assert np.array_equal(np.bincount(got, minlength=256), want)
