"""Property-based tests of the structures on a GPU (hypothesis stateful testing):
random sequences of calls against a NumPy/Python model, invariants checked after
every step, and errors raised exactly when the model says.  Sizes stay small so
a run takes seconds; see test_core_args.py for the argument checks run without a GPU."""

import gpudyn
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

pytestmark = pytest.mark.gpu

SETTINGS = settings(
    max_examples=12,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
ALGOS = st.sampled_from(["atomic", "warp_scan", "tensor_scan"])
values_st = st.lists(st.integers(-(1 << 31), (1 << 31) - 1), max_size=400)


def _disjoint(starts, sizes):
    order = np.argsort(starts)
    s, n = np.asarray(starts, dtype=np.uint64)[order], np.asarray(sizes, dtype=np.uint64)[order]
    return bool(np.all(s[:-1] + n[:-1] <= s[1:]))


class ArrayMachine(RuleBasedStateMachine):
    """GGArray and StaticArray against a list: same multiset after every step; a static
    array refuses exactly the extends that do not fit, and keeps what it had."""

    CAPACITY = 1500

    def __init__(self):
        super().__init__()
        self.g = gpudyn.GGArray(np.int32, num_lfvectors=4, first_bucket=32)
        self.s = gpudyn.StaticArray(self.CAPACITY, np.int32)
        self.model = []

    def teardown(self):
        self.g.close()
        self.s.close()

    @rule(values=values_st, algorithm=ALGOS, masked=st.booleans(), seed=st.integers(0, 1000))
    def extend(self, values, algorithm, masked, seed):
        x = np.asarray(values, dtype=np.int32)
        mask = np.random.default_rng(seed).random(x.size) < 0.5 if masked else None
        added = list(x[mask]) if masked else list(x)
        self.g.extend(x, mask=mask, algorithm=algorithm)
        if len(self.model) + len(added) > self.CAPACITY:
            with pytest.raises(gpudyn.OutOfMemoryError):
                self.s.extend(x, mask=mask, algorithm=algorithm)
            self.g.clear()  # keep both in step with the one model
            self.g.extend(np.asarray(self.model, dtype=np.int32))
        else:
            self.s.extend(x, mask=mask, algorithm=algorithm)
            self.model += added

    @rule(value=st.integers(-(1 << 31), (1 << 31) - 1))
    def append(self, value):
        if len(self.model) < self.CAPACITY:
            self.g.append(value)
            self.s.append(value)
            self.model.append(value)

    @rule(capacity=st.integers(0, 5000))
    def reserve(self, capacity):
        self.g.reserve(capacity)
        assert self.g.capacity >= capacity
        assert len(self.g) == len(self.model)

    @rule()
    def clear(self):
        self.g.clear()
        self.s.clear()
        self.model = []

    @rule()
    def flatten(self):
        for a in (self.g, self.s):
            flat = a.flatten()
            assert flat.dtype == np.int32 and flat.shape == (len(self.model),)
            assert np.array_equal(flat.to_numpy(), a.to_numpy())  # flatten and to_numpy agree on the order

    @invariant()
    def same_multiset(self):
        want = np.sort(np.asarray(self.model, dtype=np.int32))
        for a in (self.g, self.s):
            assert len(a) == len(self.model)
            assert np.array_equal(np.sort(a.to_numpy()), want)


class RWHeapMachine(RuleBasedStateMachine):
    """RWHeap against a set of live page ids and live RW_malloc ranges: pages unique and
    not live, out-of-memory exactly when fewer pages are free than asked, ranges disjoint
    from each other and from live pages, free counts exact, misuse refused with no effect."""

    PAGES, PAGE = 512, 256

    def __init__(self):
        super().__init__()
        self.heap = gpudyn.RWHeap(page_count=self.PAGES, page_size=self.PAGE)
        self.base = self.heap.pool_address
        self.live = set()
        self.blocks = {}  # address -> size

    def teardown(self):
        self.heap.close()

    @rule(n=st.integers(0, 200), algorithm=st.sampled_from(["rw", "rw_bm", "corw", "crw"]), seed=st.integers(0, 99))
    def get_pages(self, n, algorithm, seed):
        free = self.heap.free_page_count
        if n > free:
            with pytest.raises(gpudyn.OutOfMemoryError):
                self.heap.get_pages(n, algorithm=algorithm, seed=seed)
            assert self.heap.free_page_count == free  # the heap holds what it held
            return
        got = self.heap.get_pages(n, algorithm=algorithm, seed=seed).to_numpy()
        assert len(set(got.tolist())) == n and int(got.max(initial=0)) < self.PAGES
        assert not (set(got.tolist()) & self.live), "a live page was handed out again"
        self.live |= set(got.tolist())

    @precondition(lambda self: self.live)
    @rule(data=st.data())
    def free_pages(self, data):
        some = data.draw(st.lists(st.sampled_from(sorted(self.live)), unique=True, min_size=1))
        self.heap.free_pages(np.asarray(some, dtype=np.uint32))
        self.live -= set(some)

    @rule(sizes=st.lists(st.integers(0, 256), max_size=64), seed=st.integers(0, 99))
    def malloc(self, sizes, seed):
        # Sizes up to one page; a warp's small sizes share a run of pages, which needs free
        # pages side by side: with live pages scattered, a request may fail although enough
        # pages are free.  The model cannot tell, so out-of-memory is allowed, and must
        # leave the heap exactly as it was.
        free = self.heap.free_page_count
        try:
            ptrs = self.heap.malloc(sizes, seed=seed).to_numpy()
        except gpudyn.OutOfMemoryError:
            assert sum(1 for s in sizes if s) > 0
            assert self.heap.free_page_count == free
            return
        for p, s in zip(ptrs.tolist(), sizes):
            if s == 0:
                assert p == 0
            else:
                assert p % 16 == 0 and self.base <= p and p + s <= self.base + self.PAGES * self.PAGE
                self.blocks[p] = s

    @precondition(lambda self: self.blocks)
    @rule(data=st.data())
    def free(self, data):
        some = data.draw(st.lists(st.sampled_from(sorted(self.blocks)), unique=True, min_size=1))
        self.heap.free(np.asarray(some + [0], dtype=np.uint64))  # 0 entries are skipped
        for p in some:
            del self.blocks[p]

    @precondition(lambda self: self.live)
    @rule()
    def misuse(self):
        free = self.heap.free_page_count
        ids = np.asarray(sorted(self.live), dtype=np.uint32)
        with pytest.raises((TypeError, ValueError)):
            self.heap.free(ids)
        with pytest.raises((TypeError, ValueError)):
            self.heap.free_pages(np.asarray([self.base], dtype=np.uint64))
        assert self.heap.free_page_count == free

    @invariant()
    def counts_and_disjoint_ranges(self):
        free = self.heap.free_page_count
        if not self.blocks:
            assert free == self.PAGES - len(self.live)
        else:
            # blocks hold at least the pages their bytes need (a shared run may hold more
            # until its last block is freed)
            assert free <= self.PAGES - len(self.live) - -(-sum(self.blocks.values()) // self.PAGE)
        starts = [self.base + p * self.PAGE for p in self.live] + list(self.blocks)
        sizes = [self.PAGE] * len(self.live) + list(self.blocks.values())
        assert _disjoint(starts, sizes), "a live page or block overlaps another"
        assert self.heap.stats()["bad_frees"] == 0


class WarpHeapMachine(RuleBasedStateMachine):
    """WarpHeap against the list of live blocks: disjoint, aligned, null exactly for size 0,
    statistics equal to the requests, everything back after release."""

    def __init__(self):
        super().__init__()
        self.heap = gpudyn.WarpHeap()
        self.free0 = self.heap.backing_free_bytes()
        self.blocks = []  # (address, size)
        self.batches = 0

    def teardown(self):
        self.heap.close()

    @rule(sizes=st.lists(st.integers(0, 3000), max_size=300))
    def alloc(self, sizes):
        ptrs = self.heap.malloc(sizes).to_numpy()
        assert ptrs.shape == (len(sizes),)
        for p, s in zip(ptrs.tolist(), sizes):
            assert (p == 0) == (s == 0) and p % 16 == 0
            if s:
                self.blocks.append((p, s))
        self.batches += bool(sizes)

    @rule()
    def release(self):
        self.heap.clear()
        self.blocks, self.batches = [], 0
        assert self.heap.backing_free_bytes() == self.free0

    @invariant()
    def blocks_and_stats(self):
        assert _disjoint([p for p, _ in self.blocks], [s for _, s in self.blocks]), "two blocks overlap"
        st_ = self.heap.stats()
        assert st_["bytes_requested"] == sum((s + 15) // 16 * 16 for _, s in self.blocks)
        assert st_["failed_allocations"] == 0 and st_["misuse"] == 0
        assert self.heap.batch_count == self.batches


TestArrays = ArrayMachine.TestCase
TestArrays.settings = SETTINGS
TestRWHeap = RWHeapMachine.TestCase
TestRWHeap.settings = SETTINGS
TestWarpHeap = WarpHeapMachine.TestCase
TestWarpHeap.settings = SETTINGS
