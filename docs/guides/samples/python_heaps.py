"""The three heaps from the host: the random-walk page heap, the warp heap and Heap."""

import gpudyn
import numpy as np

# Random-walk page heap: 1M pages of 256 B, taken by random walks over a bitmap.
with gpudyn.RWHeap(page_count=1 << 20, page_size=256) as heap:
    pages = heap.get_pages(100_000, algorithm="corw").to_numpy()  # page ids, warp-collaborative walks
    assert len(np.unique(pages)) == 100_000  # no page handed out twice
    heap.free_pages(pages)
    sizes = np.full(100_000, 200, dtype=np.uint64)
    ptrs = heap.malloc(sizes).to_numpy()  # RW_malloc: one device address per size
    assert len(np.unique(ptrs)) == len(sizes)
    heap.free(ptrs)
    assert heap.stats()["free_pages"] == 1 << 20  # every page back

# Warp heap (FDGMalloc): ragged allocations packed into superblocks, freed in bulk.
with gpudyn.WarpHeap() as wh:
    ptrs = wh.malloc(np.full(4096, 48)).to_numpy()
    assert len(np.unique(ptrs)) == 4096 and (ptrs % 16 == 0).all()
    wh.clear()  # everything it handed out, at once

# Heap: malloc/free of any size; more memory later with heap.grow(nbytes).
with gpudyn.Heap(initial_bytes=256 << 20) as heap:
    sizes = np.random.default_rng(0).integers(1, 5000, 50_000, dtype=np.uint64)  # ~125 MB live
    ptrs = heap.malloc(sizes).to_numpy()  # uint64 device addresses
    order = np.argsort(ptrs)
    assert (ptrs % 16 == 0).all()
    assert (ptrs[order][:-1] + sizes[order][:-1] <= ptrs[order][1:]).all()  # disjoint
    stats = heap.stats()  # bytes_held, bytes_allocated, allocations, ...
    assert stats["allocations"] == len(sizes) and stats["bytes_allocated"] >= sizes.sum()
    heap.free(ptrs)  # or free them in a kernel
    assert heap.stats()["allocations"] == 0
    heap.check()  # raises OutOfMemoryError if a malloc got 0 (in a kernel too) since the last check
print("ok")
