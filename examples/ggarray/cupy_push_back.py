"""A user's own CuPy RawModule kernel push_backs into a GGArray through the
device header (gpudyn.get_include()): keep a copy of every x < 90.  Needs a GPU
and CuPy (without either it says so on stderr and exits 77, "skipped")."""
import sys

import numpy as np

import gpudyn

KERNEL = r"""
#include <gpudyn/ggarray.cuh>
extern "C" __global__ void keep_small(const unsigned char* view_bytes, const int* x, unsigned n) {
    __shared__ gpudyn::push_storage<gpudyn::insert_algo::warp_scan> temp;
    const gpudyn::ggarray_ref<int> a{*reinterpret_cast<const gpudyn_ggarray_view_t*>(view_bytes)};
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    const int v = i < n ? x[i] : 0;
    a.push_back(temp, i < n && v < 90, v);   // every thread of the block calls
}
"""


def main():
    try:
        import cupy as cp
    except ImportError:
        print("cupy_push_back.py: CuPy is not installed; skipped", file=sys.stderr)
        return 77
    try:
        gpudyn.device_count()
    except gpudyn.NoDeviceError as e:
        print(f"cupy_push_back.py: no CUDA device ({e}); skipped", file=sys.stderr)
        return 77
    g = gpudyn.GGArray(dtype=np.int32, num_lfvectors=64)
    opts = tuple(gpudyn.nvrtc_options()) if hasattr(gpudyn, "nvrtc_options") else ("-I" + gpudyn.get_include(), "--std=c++17")
    mod = cp.RawModule(code=KERNEL, options=opts)
    x = cp.asarray(np.random.default_rng(0).integers(0, 100, 1 << 20).astype(np.int32))
    view = cp.asarray(np.frombuffer(g.view_bytes(), dtype=np.uint8))
    mod.get_function("keep_small")(((x.size + 255) // 256,), (256,), (view, x, np.uint32(x.size)))
    cp.cuda.Device().synchronize()
    expect = int((x < 90).sum())
    print(f"kept {len(g)} of {x.size} (expected {expect})")
    assert len(g) == expect
    assert np.array_equal(np.sort(g.to_numpy()), np.sort(cp.asnumpy(x[x < 90])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
