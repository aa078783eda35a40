"""Numba kernels that allocate from a Heap, write, and free."""

import gpudyn
import gpudyn.numba as gdn
import numpy as np
from numba import cuda


@cuda.jit
def rows(heap, lengths, sums):
    t = cuda.grid(1)
    if t >= lengths.size:
        return
    address = gdn.malloc(heap, lengths[t] * 4)  # 0 when the heap is exhausted (counted)
    if address == 0:
        sums[t] = -1
        return
    row = gdn.array(address, lengths[t], np.int32)  # a view of the allocation (does not own it)
    for k in range(lengths[t]):
        row[k] = t
    s = 0
    for k in range(lengths[t]):
        s += row[k]
    sums[t] = s
    gdn.free(heap, address)


n = 4096
lengths = np.random.default_rng(1).integers(1, 200, n).astype(np.int64)
sums = cuda.device_array(n, np.int64)
with gpudyn.Heap(initial_bytes=64 << 20) as heap:
    rows[(n + 127) // 128, 128](heap.view_arg(), cuda.to_device(lengths), sums)
    heap.check()  # OutOfMemoryError if a malloc got 0
    assert heap.stats()["allocations"] == 0
assert np.array_equal(sums.copy_to_host(), np.arange(n) * lengths)
print("ok")
