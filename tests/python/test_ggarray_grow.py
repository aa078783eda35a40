"""GGArray's budget from Python: the memory of the heap its buckets beyond the
pool come from (never CUDA's device malloc).  Argument checks (host), then on
the GPU: the budget property, exhaustion (OutOfMemoryError, array unchanged)
and a raised budget, and arrays sharing a gpudyn.Heap."""

import gpudyn
import numpy as np
import pytest

MiB = 1 << 20


def test_budget_arguments_are_checked_first():
    with pytest.raises(TypeError, match="heap"):
        gpudyn.GGArray(np.int32, heap=object())
    with pytest.raises(ValueError, match="budget"):
        gpudyn.GGArray(np.int32, budget=0)  # None is the default's spelling
    with pytest.raises(TypeError, match="max_budget"):
        gpudyn.GGArray(np.int32, max_budget=True)
    with pytest.raises(TypeError):
        gpudyn.GGArray(np.int32, 512, 1024, 0)  # options after first_bucket are keyword-only


@pytest.mark.gpu
def test_budget_property():
    with gpudyn.GGArray(np.int32, budget=64 * MiB, max_budget=1024 * MiB) as g:
        assert g.budget >= 64 * MiB
        assert g.max_budget >= 1024 * MiB
        g.extend(np.arange(1000, dtype=np.int32))
        g.view_arg()  # a kernel could grow now: the array maps its budget
        assert g.budget >= 64 * MiB
        g.budget = 128 * MiB
        assert g.budget >= 128 * MiB
        with pytest.raises(ValueError, match="raised"):
            g.budget = 64 * MiB
        with pytest.raises(gpudyn.InvalidArgumentError, match="budget_bytes"):
            g.budget = g.max_budget + 64 * MiB
        assert np.array_equal(np.sort(g.to_numpy()), np.arange(1000, dtype=np.int32))


@pytest.mark.gpu
def test_budget_exhaustion_then_raise():
    # No pool: every bucket comes from the heap, whose 4 MiB cannot hold the
    # buckets of 1M int32 (8 LFVectors of 125K elements: 8 x 1 MiB of buckets).
    small = np.arange(10_000, dtype=np.int32)
    big = np.arange(10_000, 10_000 + (1 << 20), dtype=np.int32)
    with gpudyn.GGArray(np.int32, num_lfvectors=8, pool_bytes=None, budget=4 * MiB, max_budget=256 * MiB) as g:
        g.extend(small)
        with pytest.raises(gpudyn.OutOfMemoryError, match="budget"):
            g.extend(big)
        assert len(g) == len(small)
        assert np.array_equal(np.sort(g.to_numpy()), small)  # nothing lost, nothing added
        g.budget = 64 * MiB
        g.extend(big)
        assert np.array_equal(np.sort(g.to_numpy()), np.concatenate([small, big]))
        stats = g.stats()
        assert stats["allocated_bytes"] <= g.budget  # every bucket from the heap's budget


@pytest.mark.gpu
def test_arrays_share_a_heap():
    with gpudyn.Heap(initial_bytes=64 * MiB, max_bytes=256 * MiB) as heap:
        a = gpudyn.GGArray(np.int32, num_lfvectors=16, pool_bytes=None, heap=heap)
        b = gpudyn.GGArray(np.int32, num_lfvectors=16, pool_bytes=None, heap=heap)
        x = np.arange(200_000, dtype=np.int32)
        a.extend(x)
        b.extend(-x)
        assert np.array_equal(np.sort(a.to_numpy()), x)
        assert np.array_equal(np.sort(b.to_numpy()), np.sort(-x))
        st = heap.stats()
        assert a.budget == b.budget == st["bytes_mapped"]
        assert a.max_budget == st["bytes_max"]
        assert st["bytes_allocated"] >= 2 * x.nbytes  # both arrays' arenas are runs of the shared heap
        with pytest.raises(ValueError, match="budget"):
            gpudyn.GGArray(np.int32, heap=heap, budget=64 * MiB)
        a.budget = 128 * MiB  # grows the shared heap
        assert heap.stats()["bytes_mapped"] >= 128 * MiB
        assert b.budget >= 128 * MiB
        with pytest.raises(gpudyn.InvalidArgumentError, match="GGArray"):
            heap.close()  # refused while arrays use it; stays open
        a.close()
        b.close()
        st = heap.stats()
        assert st["allocations"] == 0 and st["bytes_allocated"] == 0 and st["bad_frees"] == 0


@pytest.mark.gpu
def test_an_array_on_a_heap_leaves_room_for_the_heaps_own_mallocs():
    with gpudyn.Heap(initial_bytes=64 * MiB, max_bytes=64 * MiB) as heap:
        g = gpudyn.GGArray(np.int32, num_lfvectors=8, pool_bytes=None, heap=heap)
        g.extend(np.arange(1000, dtype=np.int32))  # the array takes its run now
        st = heap.stats()
        assert 2 * MiB <= st["bytes_held"] <= st["bytes_mapped"] // 2 + 2 * MiB  # about half
        ptrs = heap.malloc([4096] * 1000 + [MiB] * 8)  # 12 MiB more: the heap's own share
        assert (ptrs.to_numpy() != 0).all()
        heap.free(ptrs)
        assert np.array_equal(np.sort(g.to_numpy()), np.arange(1000, dtype=np.int32))
        g.close()
        assert heap.stats()["allocations"] == 0


REFILL_KERNEL = r"""
#include <gpudyn/ggarray.cuh>
// Thread i pushes i unless done[i]; done[i] = whether it is stored now.
extern "C" __global__ void push_rest(gpudyn_ggarray_view_t v, unsigned n, unsigned char* done) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || done[i]) return;
    done[i] = gpudyn::ggarray_ref<int>{v}.push_back(int(i));
}
"""


@pytest.mark.gpu
def test_shared_heap_array_takes_another_run_after_a_refusal():
    """An array on a shared heap bumps its buckets off a run of the heap; a kernel
    that needs more is refused buckets (status, nothing lost), and after the heap
    grows the next view takes another run, so a relaunch stores the rest."""
    cp = pytest.importorskip("cupy")
    push = cp.RawModule(code=REFILL_KERNEL, options=tuple(gpudyn.nvrtc_options())).get_function("push_rest")
    n = 9 << 20  # 36 MB of int32 in one LFVector: buckets beyond 32 MiB
    with gpudyn.Heap(initial_bytes=64 * MiB, max_bytes=512 * MiB) as heap:
        a = gpudyn.GGArray(np.int32, num_lfvectors=1, pool_bytes=None, heap=heap)
        b = gpudyn.GGArray(np.int32, num_lfvectors=1, pool_bytes=None, heap=heap)
        done = cp.zeros(n, dtype=cp.uint8)
        grid = ((n + 255) // 256,)
        push(grid, (256,), (a.view_arg(), np.uint32(n), done))  # a takes a third: b's share and the heap's stay
        stored = int(done.sum())
        assert 0 < stored < n
        assert a.status == gpudyn.GGArray.STATUS_ALLOCATION_FAILED
        with pytest.raises(gpudyn.OutOfMemoryError, match="budget"):
            len(a)  # the next host call reports it (and clears it)
        assert len(a) == stored  # what the kernel said it stored, nothing else
        held = heap.stats()["bytes_allocated"]
        assert 16 * MiB <= held <= 40 * MiB  # one run: a's share of 64 MiB, b none yet
        a.budget = 512 * MiB  # grows the shared heap
        push(grid, (256,), (a.view_arg(), np.uint32(n), done))  # another run for a
        assert int(done.sum()) == n and a.status == 0
        assert np.array_equal(np.sort(a.to_numpy()), np.arange(n, dtype=np.int32))  # each once
        st = heap.stats()
        assert st["bytes_allocated"] > held and st["bytes_allocated"] < 512 * MiB  # b's share left in the heap
        b.extend(np.arange(1000, dtype=np.int32))  # b takes its own run
        assert np.array_equal(np.sort(b.to_numpy()), np.arange(1000, dtype=np.int32))
        a.close()
        b.close()
        st = heap.stats()
        assert st["allocations"] == 0 and st["bytes_allocated"] == 0 and st["bad_frees"] == 0
