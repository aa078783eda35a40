// Kernels of examples/ggarray/cupy_push_back.py (compiled there by CuPy/NVRTC; CI
// compiles this file with NVRTC): a user's kernels appending to gpudyn arrays
// with the per-thread push_back of the device headers.
#include <gpudyn/ggarray.cuh>
#include <gpudyn/static_array.cuh>

extern "C" __global__ void keep_small(gpudyn_ggarray_view_t view, const int* x, unsigned n) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;                                            // any thread may leave early
    if (x[i] < 90) gpudyn::ggarray_ref<int>{view}.push_back(x[i]); // push from inside a branch
}

extern "C" __global__ void emit(gpudyn_ggarray_view_t view, unsigned n) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int v[4];
    const unsigned k = i % 5; // 0..4 values, different per thread
    for (unsigned j = 0; j < k; ++j) v[j] = int(i);
    gpudyn::ggarray_ref<int>{view}.push_back(v, k);
}

// ok[i] = whether x[i] was stored (false once the array is full).
extern "C" __global__ void fill(gpudyn_static_array_view_t view, const int* x, unsigned n, unsigned char* ok) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    ok[i] = gpudyn::static_array_ref<int>{view}.push_back(x[i]);
}
