/// @file
/// Bulk kernels of the warp heap: what the C ABI (lib/warp_heap.cu) launches,
/// built from include/gpudyn/warp_heap.cuh.  Launch configuration and error
/// handling stay with the launchers.
///
/// Every kernel is a template (one with no other parameter takes its view or
/// pointer type as one, deduced at the launch), so any number of translation
/// units may include this header.
/// Compiles under nvcc and NVRTC (no host headers).
#pragma once

#include "gpudyn/detail/warp.cuh"
#include "gpudyn/warp_heap.cuh"

namespace gpudyn {
inline namespace v0 {
namespace warp_heap_detail {

/// Each warp of the grid serves 32 consecutive sizes per grid-stride step with one
/// warp heap and keeps its header in headers[warp] (NULL for warps without work);
/// sets `*failed` when a non-zero size got no memory.  Blocks are whole warps.
template <class View>
__global__ void alloc_batch_kernel(View view, const uint64_t* sizes, uint64_t n, void** pointers, void** headers,
                                   unsigned* failed) {
    using detail::kFullWarpMask;
    using detail::kWarpLanes;
    gpudyn::warp_heap_ref ref{view};
    const uint64_t thread = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const uint64_t warp = thread / kWarpLanes;
    const uint64_t warps = uint64_t(gridDim.x) * blockDim.x / kWarpLanes;
    const unsigned lane = gpudyn::detail::lane_index();
    if (warp * kWarpLanes >= n) return; // the whole warp leaves together
    gpudyn::warp_heap heap = ref.start(kFullWarpMask);
    for (uint64_t base = warp * kWarpLanes; base < n; base += warps * kWarpLanes) {
        const uint64_t i = base + lane;
        const uint64_t bytes = i < n ? sizes[i] : 0;
        void* p = heap.alloc(bytes); // an invalid heap (no memory for its header) gives NULL
        if (i < n) {
            pointers[i] = p;
            if (p == nullptr && bytes != 0) atomicExch(failed, 1u);
        }
    }
    void* kept = heap.valid() ? heap.keep() : nullptr;
    if (lane == 0) headers[warp] = kept;
}

/// Entry i of a host bulk call on kept headers: NULL is skipped; a pointer that
/// cannot be a header of this heap (warp_heap_ref::may_be_header) is skipped too,
/// counted in stats.misuse and, when `refused` is given, in refused[0] with the
/// lowest such index in refused[1] (the host sets them to 0 and ~0 first).
template <class View>
__device__ bool kept_entry_ok(const gpudyn::warp_heap_ref& ref, const View& view, void* h, uint64_t i,
                              unsigned* refused) {
    if (h == nullptr) return false;
    if (ref.may_be_header(h)) return true;
    count(view.stats, kMisuse, 1);
    if (refused != nullptr) {
        atomicAdd(refused, 1u);
        atomicMin(refused + 1, unsigned(i < 0xffffffffu ? i : 0xffffffffu));
    }
    return false;
}

/// Frees kept headers (Tidy: frees all but each header block), one thread per header.
template <bool Tidy, class View>
__global__ void kept_headers_kernel(View view, void* const* headers, uint64_t n, unsigned* refused) {
    gpudyn::warp_heap_ref ref{view};
    const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
    for (uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        if (!kept_entry_ok(ref, view, headers[i], i, refused)) continue;
        if (Tidy) ref.tidy_up_kept(headers[i]);
        else ref.destroy_kept(headers[i]);
    }
}

} // namespace warp_heap_detail
} // namespace v0
} // namespace gpudyn
