"""Reading a GGArray by spans: contiguous pieces, one bucket lookup per piece."""

import gpudyn
import gpudyn.numba as gdn
import numpy as np
from numba import cuda


@cuda.jit
def fill(a, n):
    t = cuda.grid(1)
    if t < n:
        gdn.push_back(a, t)


@cuda.jit
def sum_by_spans(src, result):  # one thread walks [lo, hi) piece by piece
    if cuda.grid(1) == 0:
        lo = 0
        hi = gdn.ranged_size(src)
        total = 0
        while lo < hi:
            piece = gdn.span(src, lo, hi)  # a 1-D array over the first contiguous piece of [lo, hi)
            for k in range(len(piece)):
                total += piece[k]
            lo += len(piece)
        result[0] = total


n = 100_000
result = cuda.to_device(np.zeros(1, np.int64))
with gpudyn.GGArray(np.int64, first_bucket=1024) as a:
    fill[(n + 255) // 256, 256](a.view_arg(), n)
    sum_by_spans[1, 32](a.view_arg(), result)
    assert len(a) == n
assert result.copy_to_host()[0] == n * (n - 1) // 2
print("ok")
