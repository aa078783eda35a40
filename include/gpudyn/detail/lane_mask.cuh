// Warp-collective helpers over an arbitrary lane mask (not only full warps).
//
// Every function here is a warp collective over `mask`: exactly the lanes set in
// `mask` must call it, with the same `mask`, and the calling lane must be in it.
// Nothing assumes lockstep execution (independent thread scheduling, Volta+):
// data moves only through *_sync intrinsics, which also synchronize the lanes.
// Compiles under nvcc and NVRTC (no host headers).
#pragma once

#include "gpudyn/detail/bits.cuh"

namespace gpudyn {
inline namespace v0 {
namespace detail {

// Lanes in a warp (CUDA programming guide, "warp size"; fixed at 32 on every sm_75+ GPU).
constexpr unsigned kWarpLanes = 32;
constexpr unsigned kFullWarpMask = 0xffffffffu;

__device__ __forceinline__ unsigned lane_index() {
    unsigned lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

// Bits of the lanes below the calling one.
__device__ __forceinline__ unsigned lanes_below() {
    unsigned m;
    asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
}

// Highest set lane of a non-empty mask: the "worker" of FDGMalloc (the paper
// takes the most significant bit of the vote, found with bfind).
__device__ __forceinline__ unsigned highest_lane(unsigned mask) { return 31u - unsigned(__clz(mask)); }

// Position of the k-th (0-based) set lane of mask; k < popc(mask).
__device__ __forceinline__ unsigned nth_set_lane(unsigned mask, unsigned k) { return nth_set_bit(mask, k); }

// Inclusive prefix sum of `value` over the lanes of `mask`, in lane order.
// T is unsigned or unsigned long long (types __shfl_*_sync move natively).
template <class T>
__device__ __forceinline__ T masked_inclusive_sum(unsigned mask, T value) {
    const unsigned lane = lane_index();
    if (mask == kFullWarpMask) {
        // Dense warp: Kogge-Stone scan with shuffles from lane - d.
        for (unsigned d = 1; d < kWarpLanes; d <<= 1) {
            T up = __shfl_up_sync(mask, value, d);
            if (lane >= d) value += up;
        }
        return value;
    }
    // Sparse mask: the same scan over ranks; the source of rank r is the lane
    // holding rank r - d (lanes without one read themselves and discard it, since
    // every lane of the mask must take part in each shuffle).
    const unsigned rank = unsigned(__popc(mask & lanes_below()));
    const unsigned count = unsigned(__popc(mask));
    for (unsigned d = 1; d < count; d <<= 1) {
        unsigned src = rank >= d ? nth_set_lane(mask, rank - d) : lane;
        T up = __shfl_sync(mask, value, int(src));
        if (rank >= d) value += up;
    }
    return value;
}

// Broadcast of a pointer from `src_lane` (in mask) to the lanes of mask.
template <class P>
__device__ __forceinline__ P* broadcast_pointer(unsigned mask, P* p, unsigned src_lane) {
    unsigned long long bits = reinterpret_cast<unsigned long long>(p);
    bits = __shfl_sync(mask, bits, int(src_lane));
    return reinterpret_cast<P*>(bits);
}

}  // namespace detail
}  // namespace v0
}  // namespace gpudyn
