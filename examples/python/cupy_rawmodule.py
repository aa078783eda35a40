"""gpudyn from CuPy: a RawModule kernel that allocates inside itself through the
warp heap's device header, compiled by NVRTC with gpudyn.nvrtc_options().

Needs a GPU and CuPy (pip install cupy-cuda13x); without either it says so on
stderr and exits 77 ("skipped"). Run: python cupy_rawmodule.py
"""

import os
import sys

import gpudyn
import numpy as np

try:
    import cupy as cp

    gpudyn.device_count()
except (ImportError, gpudyn.NoDeviceError) as e:
    print(f"cupy_rawmodule.py: needs CuPy and a CUDA device ({e}); skipped", file=sys.stderr)
    raise SystemExit(77) from None

THREADS, BLOCKS = 256, 4
source = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "warp_heap_rtc.cu")).read()
module = cp.RawModule(code=source, options=tuple(gpudyn.nvrtc_options()))
kernel = module.get_function("fill_and_sum")

with gpudyn.WarpHeap() as heap:
    view_arg = heap.view_arg()  # the gpudyn_warp_heap_view_t, passed by value
    n = THREADS * BLOCKS
    sums = cp.empty(n, dtype=cp.uint64)
    kernel((BLOCKS,), (THREADS,), (view_arg, sums, np.int32(n)))
    t = np.arange(n, dtype=np.uint64)
    expected = t * (t % 32 + 1)
    wrong = int((sums.get() != expected).sum())
print(f"{n} threads allocated in-kernel, {wrong} wrong sums")
raise SystemExit(0 if wrong == 0 else 1)
