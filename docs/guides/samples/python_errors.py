"""Errors are exceptions; a refused call changes nothing and the structure stays usable."""

import gpudyn
import numpy as np

with gpudyn.Heap(initial_bytes=64 << 20, max_bytes=64 << 20) as heap:
    try:
        heap.malloc([-1])  # refused before any device work
    except gpudyn.InvalidArgumentError as e:  # also a ValueError; the message names the argument
        print("refused:", e)
    live = heap.malloc(np.full(1000, 1024, dtype=np.uint64))
    try:
        heap.malloc([1 << 30])  # more than the heap can ever hold
    except gpudyn.OutOfMemoryError as e:  # also a MemoryError
        print("out of memory:", e)
    assert heap.stats()["allocations"] == 1000  # what was live before is still live
    heap.free(live)
    try:
        heap.free(np.zeros(4, dtype=np.int32))  # addresses need a 64-bit integer dtype
    except TypeError as e:
        print("refused:", e)
print("ok")
