// Bulk kernels of the warp heap, built from <gpudyn/warp_heap.cuh> (see
// warp_heap_kernels.hpp for why they sit apart from the ABI in warp_heap.cu).
#include "warp_heap_kernels.hpp"

#include <gpudyn/warp_heap.cuh>

namespace gpudyn::warp_heap_impl {
namespace {

using gpudyn::detail::kFullWarpMask;
using gpudyn::detail::kWarpLanes;

__global__ void alloc_batch_kernel(gpudyn_warp_heap_view_t view, const uint64_t* sizes, uint64_t n,
                                   void** pointers, void** headers, unsigned* failed) {
    gpudyn::warp_heap_ref ref{view};
    const uint64_t thread = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const uint64_t warp = thread / kWarpLanes;
    const uint64_t warps = uint64_t(gridDim.x) * blockDim.x / kWarpLanes;
    const unsigned lane = gpudyn::detail::lane_index();
    if (warp * kWarpLanes >= n) return;  // the whole warp leaves together
    gpudyn::warp_heap heap = ref.start(kFullWarpMask);
    for (uint64_t base = warp * kWarpLanes; base < n; base += warps * kWarpLanes) {
        const uint64_t i = base + lane;
        const uint64_t bytes = i < n ? sizes[i] : 0;
        void* p = heap.alloc(bytes);  // an invalid heap (no memory for its header) gives NULL
        if (i < n) {
            pointers[i] = p;
            if (p == nullptr && bytes != 0) atomicExch(failed, 1u);
        }
    }
    void* kept = heap.valid() ? heap.keep() : nullptr;
    if (lane == 0) headers[warp] = kept;
}

__global__ void free_kept_kernel(gpudyn_warp_heap_view_t view, void* const* headers, uint64_t n) {
    gpudyn::warp_heap_ref ref{view};
    const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
    for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        ref.destroy_kept(headers[i]);
}

}  // namespace

cudaError_t launch_alloc_batch(const gpudyn_warp_heap_view_t& view, const uint64_t* sizes, uint64_t n,
                               void** pointers, void** headers, unsigned* failed, unsigned grid, unsigned block,
                               cudaStream_t stream) {
    alloc_batch_kernel<<<grid, block, 0, stream>>>(view, sizes, n, pointers, headers, failed);
    return cudaGetLastError();
}

cudaError_t launch_free_kept(const gpudyn_warp_heap_view_t& view, void* const* headers, uint64_t n, unsigned grid,
                             unsigned block, cudaStream_t stream) {
    free_kept_kernel<<<grid, block, 0, stream>>>(view, headers, n);
    return cudaGetLastError();
}

}  // namespace gpudyn::warp_heap_impl
