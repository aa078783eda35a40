"""GGArray from the host: reserve, append (with a mask), read back, flatten."""

import gpudyn
import numpy as np

x = np.arange(1 << 20, dtype=np.int32)
with gpudyn.GGArray(np.int32, num_lfvectors=512) as a:
    a.reserve(len(x))  # maps bucket rows for len(x) elements from the host
    a.extend(x, mask=(x < 90))  # "insert a copy of x if x < 90"
    a.extend(x[:1000])
    assert len(a) == 90 + 1000  # len() waits for the array's stream
    assert np.array_equal(np.sort(a.to_numpy()), np.sort(np.concatenate([x[:90], x[:1000]])))
    flat = a.flatten()  # a copy, in a DeviceBuffer: cupy.asarray(flat), torch.from_dlpack(flat)
    assert flat.to_numpy().shape == (1090,)
    stats = a.stats()  # bytes held, capacity, ...
    a.clear()  # size 0, buckets kept for the next round
    assert len(a) == 0
print("ok", sorted(stats))
