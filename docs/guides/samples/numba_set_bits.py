"""A Numba kernel that pushes a different number of values from each thread."""

import gpudyn
import gpudyn.numba as gdn
import numpy as np
from numba import cuda


@cuda.jit
def set_bits(out, n):  # thread t emits t * 32 + b for every set bit b of t
    t = cuda.grid(1)
    if t >= n:
        return  # early return: fine
    for b in range(14):
        if (t >> b) & 1:  # a different number of pushes per thread
            gdn.push_back(out, t * 32 + b)  # False (nothing stored) when no memory is left


n = 10_000
with gpudyn.GGArray(np.int64) as out:
    set_bits[(n + 255) // 256, 256](out.view_arg(), n)
    got = np.sort(out.to_numpy())  # copied to the host
    flat = cuda.as_cuda_array(out.flatten())  # a copy (a new DeviceBuffer), then viewed without another
    assert flat.shape == got.shape
t, b = np.arange(n)[:, None], np.arange(14)
assert np.array_equal(got, np.sort((t * 32 + b)[(t >> b) & 1 == 1]))
print("ok", len(got))
