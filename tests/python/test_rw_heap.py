"""RWHeap (random-walk page heap) and the rw section of gpudyn.bench.theory.

Host tests: the theory against hand-computed values, argument errors.  GPU
tests: pages unique and previously free, exhaustion keeps the heap intact,
RW_malloc ranges disjoint/aligned/inside the pool, TAS near Eq. 3 / Eq. 5."""

import math

import gpudyn
import numpy as np
import pytest
from gpudyn.bench import theory
from gpudyn.rw_heap import RWHeap


# ---- theory (hand-computed) -------------------------------------------------
def test_queue_metrics():
    assert theory.queue_tas(9) == 5.0  # (9 + 1) / 2
    assert theory.queue_was(1) == 1.0  # k=0 gives 1, k=1 gives 0
    assert theory.queue_was(2) == pytest.approx(2 - 0.5**32, abs=1e-12)
    assert theory.queue_was(1000) == pytest.approx(32 / 33 * 1000, rel=2e-3)  # Eq. 2's approximation


def test_rw_tas_eq3():
    # T=10, A=4, N=2: (10/2)(1/4 + 1/3) = 35/12
    assert theory.rw_tas(10, 4, 2) == pytest.approx(35 / 12)
    assert theory.rw_tas(10, 4, 2, exact=False) == pytest.approx(5 * math.log(2))
    assert theory.rw_tas(100, 100, 1) == pytest.approx(1.0)  # all free: one step
    assert theory.harmonic(4) == pytest.approx(25 / 12)


def test_rw_bm_eq5_and_bounds():
    # T=4, A=2, N=1, w=2: 1 / (1 - (2/4)^2) = 4/3
    assert theory.rw_bm_tas(4, 2, 1, w=2) == pytest.approx(4 / 3)
    # One lane (warp=1), w=1: sum_k q^k = 1 / (1 - q); q = (10 - 6 + 1)/10 = 1/2 -> 2
    assert theory.rw_was_bound(10, 6, 1, w=1, warp=1) == pytest.approx(2.0)
    # RW-BM is RW with w bits per step: the bound shrinks toward Theorem 1's limit.
    T, A, N = 1 << 20, 5243, 5000
    V = theory.rw_was_bound(T, A, N)
    assert theory.rw_bm_was_bound(T, A, N) == pytest.approx(theory.rw_bm_limit(V), rel=0.05)
    assert theory.rw_bm_limit(64, 32) == pytest.approx(2 + 31 / 64)
    # Theorem 2: the TAS ratio tends to w = 32 as free pages vanish.
    assert theory.rw_tas(T, 5243, 2621) / theory.rw_bm_tas(T, 5243, 2621) > 25


def test_crw_eq8_eq9():
    assert theory.crw_repeat_probability(10, 4) == pytest.approx(3 / 13)
    assert theory.crw_tas(100, 50, 10, 1) == 1.0  # one big cluster: never walks
    T, A, N = 1000, 500, 100
    assert theory.crw_tas(T, A, N, A) == pytest.approx(1 + (A - 1) / (2 * A - 1) * T / N * math.log(A / (A - N)))


def test_theory_errors():
    with pytest.raises(ValueError, match="N <= A <= T"):
        theory.rw_tas(10, 20, 5)
    with pytest.raises(ValueError, match="'w'"):
        theory.rw_bm_tas(10, 5, 2, w=0)


# ---- argument errors (no GPU needed: checks come before any device call) -----
def test_bad_arguments():
    with pytest.raises(gpudyn.InvalidArgumentError, match="word_bits is 16"):
        RWHeap(page_count=64, word_bits=16)
    with pytest.raises(gpudyn.InvalidArgumentError, match="page_size is 24"):
        RWHeap(page_count=64, page_size=24)
    with pytest.raises(ValueError, match="'page_count'"):
        RWHeap(page_count=-1)


# ---- GPU ---------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("algorithm", ["rw", "rw_bm", "corw", "crw"])
@pytest.mark.parametrize("free", [0.5, 0.01])
def test_pages_unique_and_free(algorithm, free):
    with RWHeap(page_count=1 << 16, word_bits=64) as heap:
        heap.occupy(1 - free, seed=3)
        A = heap.free_page_count
        assert A == (1 << 16) - round((1 - free) * (1 << 16))
        pages = heap.get_pages(A, algorithm=algorithm, seed=1).to_numpy()
        assert len(np.unique(pages)) == A and pages.max() < heap.page_count
        assert heap.free_page_count == 0
        with pytest.raises(gpudyn.OutOfMemoryError, match="no free page"):
            heap.get_pages(1, algorithm=algorithm)
        assert heap.free_page_count == 0
        heap.free_pages(pages[: A // 2])
        assert heap.free_page_count == A // 2
        again = heap.get_pages(A // 2, algorithm=algorithm, seed=2).to_numpy()
        assert len(np.unique(np.concatenate([again, pages[A // 2 :]]))) == A
        assert heap.stats()["bad_frees"] == 0


@pytest.mark.gpu
def test_oom_keeps_heap():
    with RWHeap(page_count=4096) as heap:
        heap.occupy(1 - 100 / 4096)
        assert heap.free_page_count == 100
        with pytest.raises(gpudyn.OutOfMemoryError):
            heap.get_pages(101, algorithm="corw")
        assert heap.free_page_count == 100
        assert heap.stats()["failed_requests"] >= 1


@pytest.mark.gpu
def test_malloc_ranges():
    sizes = np.array([16, 100, 256, 1000, 4096, 8192, 0, 4100, 33] * 300, dtype=np.uint64)
    with RWHeap(page_count=1 << 16, page_size=256) as heap:
        ptrs = heap.malloc(sizes, seed=5).to_numpy()
        assert np.all(ptrs[sizes == 0] == 0)
        live = sizes != 0
        p, s = ptrs[live], sizes[live]
        assert np.all(p % 16 == 0)
        base = heap.pool_address
        assert np.all(p >= base) and np.all(p + s <= base + heap.page_count * heap.page_size)
        order = np.argsort(p)
        assert np.all(p[order][:-1] + s[order][:-1] <= p[order][1:])  # no overlap
        heap.free(ptrs)
        assert heap.free_page_count == heap.page_count
        with pytest.raises(gpudyn.InvalidArgumentError, match="sizes"):
            heap.malloc([heap.max_malloc_size + 1])
        assert heap.free_page_count == heap.page_count


@pytest.mark.gpu
@pytest.mark.parametrize("algorithm,eq", [("rw", theory.rw_tas), ("rw_bm", theory.rw_bm_tas)])
def test_tas_matches_theory(algorithm, eq):
    T = 1 << 20
    with RWHeap(page_count=T) as heap:
        for free in (0.5, 0.1, 0.01):
            heap.occupy(1 - free, seed=9)
            A = heap.free_page_count
            N = A // 2
            heap.get_pages(N, algorithm=algorithm, stats=True)
            st = heap.last_stats
            assert st["failed"] == 0 and st["requests"] == N
            assert st["tas"] == pytest.approx(eq(T, A, N), rel=0.15)
            assert st["was"] >= st["tas"]


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1 << 40, 1 << 62])
def test_get_pages_checks_n_before_allocating_the_output(n):
    # The output (n uint32) was allocated first: OutOfMemoryError, or cffi's OverflowError.
    with RWHeap(page_count=1024) as heap:
        with pytest.raises(gpudyn.InvalidArgumentError, match=f"'n' is {n}, more than the 1024 pages"):
            heap.get_pages(n)
        assert heap.free_page_count == 1024
