"""Compiling a kernel ahead of time, without a GPU: gdn.ref_type gives the Numba type
of a structure's view_arg(), numba.cuda.compile the PTX (abi="numba" for a kernel)."""

import gpudyn
import gpudyn.numba as gdn
import numpy as np
from numba import cuda
from numba.cuda import types


def keep_small(out, values):  # a kernel's Python function, not yet compiled
    i = cuda.grid(1)
    if i < values.size and values[i] < 90:
        gdn.push_back(out, values[i])


signature = (gdn.ref_type(gpudyn.GGArray, np.int32), types.int32[::1])
ptx, _ = cuda.compile(keep_small, signature, device=False, output="ptx", cc=(9, 0), abi="numba")
assert "gpudyn_numba_ggarray_" in ptx  # the call into gpudyn's device code, linked at load time
print("ok", len(ptx.splitlines()), "lines of PTX")
