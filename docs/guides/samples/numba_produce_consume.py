"""An iterative program: produce, consume in place, clear, repeat; no host wait in the loop."""

import gpudyn
import gpudyn.numba as gdn
import numpy as np
from numba import cuda


@cuda.jit
def produce(a, n):
    t = cuda.grid(1)
    if t < n and t % 3 != 0:
        gdn.push_back(a, t)


@cuda.jit
def halve_evens(src, dst):  # reads src in place, pushes into dst
    n = gdn.ranged_size(src)  # the elements src's view covers
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        x = gdn.at(src, i)
        if x % 2 == 0:
            gdn.push_back(dst, x // 2)


s = cuda.stream()
with gpudyn.GGArray(np.int64, stream=s) as a, gpudyn.GGArray(np.int64, stream=s) as b:
    for _ in range(3):  # no host wait in the loop
        produce[40, 256, s](a.view_arg(), 10_000)
        halve_evens[64, 256, s](a.view_arg(), b.view_arg())  # a's view taken after produce: sees its elements
        a.clear()
    buf = gpudyn.DeviceBuffer(len(b), np.int64, stream=s)  # len() waits
    b.flatten(out=buf)  # stream-ordered copy into a buffer you keep
    t = np.arange(10_000)
    expected = np.tile(t[(t % 3 != 0) & (t % 2 == 0)] // 2, 3)
    assert np.array_equal(np.sort(buf.to_numpy()), np.sort(expected))
print("ok", len(expected))
