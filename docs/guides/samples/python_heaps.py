"""The three heaps from the host: the random-walk page heap, the warp heap and Heap."""
import numpy as np

import gpudyn

# Random-walk page heap: 1M pages of 256 B; malloc takes runs of pages by random walks.
with gpudyn.RWHeap(page_count=1 << 20, page_size=256) as heap:
    sizes = np.full(100_000, 200, dtype=np.uint64)
    ptrs = heap.malloc(sizes).to_numpy()          # one device address per size
    assert len(np.unique(ptrs)) == len(sizes)     # nothing handed out twice
    heap.free(ptrs)
    print("RWHeap", heap.stats())

# Warp heap (FDGMalloc): ragged allocations packed into superblocks, freed in bulk.
with gpudyn.WarpHeap() as wh:
    ptrs = wh.malloc(np.full(4096, 48)).to_numpy()
    assert len(np.unique(ptrs)) == 4096 and (ptrs % 16 == 0).all()
    wh.clear()                                    # everything it handed out, at once
    print("WarpHeap", wh.stats())

# Heap: malloc/free of any size; more memory later with heap.grow(nbytes).
with gpudyn.Heap(initial_bytes=256 << 20) as heap:
    sizes = np.random.default_rng(0).integers(1, 5000, 50_000, dtype=np.uint64)   # ~125 MB live
    ptrs = heap.malloc(sizes).to_numpy()          # uint64 device addresses
    order = np.argsort(ptrs)
    assert (ptrs % 16 == 0).all()
    assert (ptrs[order][:-1] + sizes[order][:-1] <= ptrs[order][1:]).all()   # disjoint
    stats = heap.stats()                          # bytes_held, bytes_allocated, allocations, ...
    assert stats["allocations"] == len(sizes) and stats["bytes_allocated"] >= sizes.sum()
    heap.free(ptrs)                               # or free them in a kernel
    assert heap.stats()["allocations"] == 0
    heap.check()    # raises OutOfMemoryError if a malloc got 0 (in a kernel too) since the last check
print("ok")
