// Kernel source for cupy_rawmodule.py, compiled at run time by NVRTC with
// gpudyn.nvrtc_options() (CI compiles it the same way, without a GPU).
// Each thread allocates (lane + 1) ints from the warp heap, fills them with its
// index and writes their sum (~0 when the allocation failed).
#include <gpudyn/warp_heap.cuh>

extern "C" __global__ void fill_and_sum(gpudyn_warp_heap_view_t view, unsigned long long* sums, int n) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    const int lane = threadIdx.x % 32;
    gpudyn::warp_heap_ref heap{view};
    gpudyn::warp_heap wh = heap.start(__activemask());
    int* block = static_cast<int*>(wh.alloc(sizeof(int) * (lane + 1)));
    unsigned long long sum = ~0ull;
    if (block != nullptr) {
        sum = 0;
        for (int i = 0; i <= lane; ++i) block[i] = tid;
        for (int i = 0; i <= lane; ++i) sum += block[i];
    }
    sums[tid] = sum;
    wh.end();
}
