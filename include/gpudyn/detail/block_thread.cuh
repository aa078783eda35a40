// Block-level thread geometry for block-cooperative code that accepts any
// block shape (1D/2D/3D, any thread count up to the caller's maximum).
// Compiles under nvcc and NVRTC (no host headers).
#pragma once


namespace gpudyn {
inline namespace v0 {
// Not `detail`: lib/internal.hpp owns gpudyn::detail, and an inline-namespace
// `v0::detail` would make every `gpudyn::detail::` in the library ambiguous.
namespace dev {

// Lanes in a warp (CUDA programming guide, "warp size"; 32 on every sm_75+ GPU).
constexpr unsigned kWarpLanes = 32;
constexpr unsigned kFullWarpMask = 0xffffffffu;



// Threads in the calling block.
__device__ __forceinline__ unsigned block_thread_count() { return blockDim.x * blockDim.y * blockDim.z; }

// Linear rank of the calling thread; CUDA forms warps from consecutive ranks
// (programming guide, "thread hierarchy"), so rank / 32 is the warp.
__device__ __forceinline__ unsigned block_thread_rank() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

// Linear index of the calling block in its grid.
__device__ __forceinline__ unsigned long long block_linear_index() {
    return blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
}

// Lane of the calling thread (warps are consecutive ranks, so rank mod 32).
__device__ __forceinline__ unsigned lane_index() { return block_thread_rank() & (kWarpLanes - 1u); }

// Lanes that exist in the calling thread's warp: all 32 except in the last
// warp of a block whose size is not a multiple of 32.
__device__ __forceinline__ unsigned block_warp_mask() {
    const unsigned n = block_thread_count();
    const unsigned first = block_thread_rank() & ~(kWarpLanes - 1u);
    const unsigned left = n - first;
    return left >= kWarpLanes ? kFullWarpMask : ((1u << left) - 1u);
}

// Inclusive prefix sum over the lanes of `mask`, which must be a contiguous
// run of low lanes (block_warp_mask()); every lane of mask calls.
template <class V>
__device__ __forceinline__ V contiguous_lanes_inclusive_sum(unsigned mask, V value) {
    const unsigned lane = lane_index();
    for (unsigned d = 1; d < kWarpLanes; d <<= 1) {
        const V up = __shfl_up_sync(mask, value, d);  // lane - d is in mask whenever lane >= d
        if (lane >= d) value += up;
    }
    return value;
}

// Highest lane of a non-empty mask.
__device__ __forceinline__ unsigned highest_lane(unsigned mask) { return 31u - unsigned(__clz(mask)); }

}  // namespace dev
}  // namespace v0
}  // namespace gpudyn
