// Launchers of the warp heap's bulk kernels.  The kernels live in their own
// translation unit (warp_heap_kernels.cu) because the device headers' namespace
// gpudyn::v0::detail and internal.hpp's gpudyn::detail cannot be visible in one
// file: every `gpudyn::detail` would be ambiguous.
#pragma once

#include <gpudyn/warp_heap.h>

#include <cuda_runtime.h>

namespace gpudyn::warp_heap_impl {

// Each warp of the grid serves 32 consecutive sizes per grid-stride step with one
// warp heap and keeps its header in headers[warp] (NULL for warps without work);
// sets *failed when a non-zero size got no memory.  block must be a multiple of 32.
cudaError_t launch_alloc_batch(const gpudyn_warp_heap_view_t& view, const uint64_t* sizes, uint64_t n,
                               void** pointers, void** headers, unsigned* failed, unsigned grid, unsigned block,
                               cudaStream_t stream);

// Frees kept headers (NULL entries skipped), one thread per header.
cudaError_t launch_free_kept(const gpudyn_warp_heap_view_t& view, void* const* headers, uint64_t n, unsigned grid,
                             unsigned block, cudaStream_t stream);

}  // namespace gpudyn::warp_heap_impl
