"""DeviceBuffer: device memory that other libraries read without a copy."""

import gpudyn
import numpy as np

print(gpudyn.__version__, gpudyn.cuda_versions())
buf = gpudyn.DeviceBuffer.from_numpy(np.arange(8, dtype=np.int32))  # a copy to the device
# without a copy: cupy.asarray(buf), torch.from_dlpack(buf), numba.cuda.as_cuda_array(buf)
assert (buf.to_numpy() == np.arange(8)).all()  # a copy to the host
buf.close()
print("ok")
