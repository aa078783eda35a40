"""GGArray's budget from Python: the memory of the heap its buckets beyond the
pool come from (never CUDA's device malloc).  Argument checks (host), then on
the GPU: the budget property, exhaustion (OutOfMemoryError, array unchanged)
and a raised budget, and arrays sharing a gpudyn.Heap."""
import numpy as np
import pytest

import gpudyn

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
        g.view_bytes()                        # a kernel could grow now: the array maps its budget
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
        stats = g.memory_stats()
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
        a.budget = 128 * MiB                  # grows the shared heap
        assert heap.stats()["bytes_mapped"] >= 128 * MiB
        assert b.budget >= 128 * MiB
        with pytest.raises(gpudyn.InvalidArgumentError, match="GGArray"):
            heap.close()                      # refused while arrays use it; stays open
        a.close()
        b.close()
        st = heap.stats()
        assert st["allocations"] == 0 and st["bytes_allocated"] == 0 and st["bad_frees"] == 0
