/// @file
/// Lane, warp and block helpers shared by every device header: where the
/// calling thread sits in its warp and block, and warp collectives over an
/// arbitrary lane mask (not only full warps).
///
/// A warp collective here takes `mask`: exactly the lanes set in `mask` must
/// call it, with the same `mask`, and the calling lane must be in it.  Nothing
/// assumes lockstep execution (independent thread scheduling, Volta+): data
/// moves only through `*_sync` intrinsics, which also synchronize the lanes.
/// Compiles under nvcc and NVRTC (no host headers).
#pragma once

#include "gpudyn/detail/bits.cuh"

namespace gpudyn {
inline namespace v0 {
namespace detail {

/// Lanes in a warp (CUDA programming guide, "warp size"; fixed at 32 on every sm_75+ GPU).
constexpr unsigned kWarpLanes = 32;
constexpr unsigned kFullWarpMask = 0xffffffffu;

// ---- the calling thread ----
/// Lane of the calling thread.  CUDA forms warps from consecutive linear ranks
/// in the block (programming guide, "thread hierarchy"), so this is also
/// block_thread_rank() mod 32, for any block shape.
__device__ __forceinline__ unsigned lane_index() {
    unsigned lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}

/// Bits of the lanes below the calling one.
__device__ __forceinline__ unsigned lanes_below() {
    unsigned m;
    asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
}

/// Threads in the calling block (any block shape: 1D/2D/3D).
__device__ __forceinline__ unsigned block_thread_count() { return blockDim.x * blockDim.y * blockDim.z; }

/// Linear rank of the calling thread in its block; rank / 32 is its warp.
__device__ __forceinline__ unsigned block_thread_rank() {
    return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

/// Linear index of the calling block in its grid.
__device__ __forceinline__ unsigned long long block_linear_index() {
    return blockIdx.x + (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
}

/// Lanes that exist in the calling thread's warp: all 32 except in the last
/// warp of a block whose size is not a multiple of 32 (then a contiguous run of
/// low lanes).
__device__ __forceinline__ unsigned block_warp_mask() {
    const unsigned n = block_thread_count();
    const unsigned first = block_thread_rank() & ~(kWarpLanes - 1u);
    const unsigned left = n - first;
    return left >= kWarpLanes ? kFullWarpMask : ((1u << left) - 1u);
}

// ---- lane masks ----
/// `mask` (which holds the calling lane) with the calling lane's bit set again:
/// the same value, which ptxas cannot take for warp-uniform.  A mask from a vote
/// or `__activemask()` is uniform among the lanes that computed it together, and
/// ptxas then checks a later collective's convergence against one lane's copy
/// of it only: lanes of another call with another mask, running the same
/// instructions at that moment, passed the check and shuffled from lanes that
/// were not there (issue 39: one heap slot to two threads, wild pointers,
/// illegal-instruction traps).  Every mask a collective here takes is one.
__device__ __forceinline__ unsigned member_mask(unsigned mask) {
    unsigned self;
    asm("mov.u32 %0, %%lanemask_eq;" : "=r"(self));
    return mask | self;
}
/// `__activemask()` as a member mask (see member_mask).
__device__ __forceinline__ unsigned active_lanes() { return member_mask(__activemask()); }

/// Highest set lane of a non-empty mask: the "worker" of FDGMalloc (the paper
/// takes the most significant bit of the vote, found with bfind).
__device__ __forceinline__ unsigned highest_lane(unsigned mask) { return 31u - unsigned(__clz(mask)); }

/// Position of the k-th (0-based) set lane of mask; k < popc(mask).
__device__ __forceinline__ unsigned nth_set_lane(unsigned mask, unsigned k) { return nth_set_bit(mask, k); }

// ---- warp collectives over `mask` ----
/// The lanes of `mask` whose predicate holds.  `__ballot_sync`'s own result has a
/// bit for every *active* lane whose predicate holds (CUDA's definition), and
/// under independent thread scheduling lanes of another group (another call,
/// another class) can run the same instruction in convergence: unmasked, their
/// votes leaked into a group's count and claims, and one heap slot went to two
/// threads (issue 39).  Every vote of the device headers goes through here.
__device__ __forceinline__ unsigned ballot(unsigned mask, bool predicate) {
    return __ballot_sync(mask, predicate) & mask;
}

/// The lanes of `mask` whose `key` equals the calling lane's (every lane of
/// mask calls with the same mask).  Lanes that arrive together at one call may
/// name different structures (bucketing: ref{views[bin]}.push_back(x)), and
/// only lanes of one structure may share a claim.  One `__match_all_sync` when
/// every lane has the same key (the usual case), `__match_any_sync` else; the
/// match-all alone measured faster in a push-heavy kernel than a shuffle of the
/// first lane's key and a vote (benchmarks/results/h200/NOTES.md).
__device__ __forceinline__ unsigned peers_with(unsigned mask, unsigned long long key) {
    mask = member_mask(mask);
    int all = 0;
    const unsigned same = __match_all_sync(mask, key, &all);
    return member_mask((all ? same : __match_any_sync(mask, key)) & mask);
}

/// Inclusive prefix sum over the lanes of `mask`, which must be a contiguous
/// run of low lanes (a full warp, or block_warp_mask()): Kogge-Stone scan with
/// shuffles from lane - d, which is in mask whenever lane >= d.  `lane`: the
/// calling lane, for callers that read it already.
template <class V>
__device__ __forceinline__ V contiguous_lanes_inclusive_sum(unsigned mask, V value, unsigned lane = lane_index()) {
    for (unsigned d = 1; d < kWarpLanes; d <<= 1) {
        const V up = __shfl_up_sync(mask, value, d);
        if (lane >= d) value += up;
    }
    return value;
}

/// Inclusive prefix sum of `value` over the lanes of any `mask`, in lane order.
/// T is unsigned or unsigned long long (types `__shfl_*_sync` move natively).
template <class T>
__device__ __forceinline__ T masked_inclusive_sum(unsigned mask, T value) {
    const unsigned lane = lane_index();
    if (mask == kFullWarpMask) return contiguous_lanes_inclusive_sum(mask, value, lane); // dense warp
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

/// Sum of `value` over the lanes of any `mask` (every lane gets it).
__device__ __forceinline__ unsigned masked_sum(unsigned mask, unsigned value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_add_sync(mask, value);
#else
    return __shfl_sync(mask, masked_inclusive_sum(mask, value), int(highest_lane(mask)));
#endif
}

/// Counts of Items flags packed into FieldBits-bit fields of 64-bit words (item
/// k: field k mod (64/FieldBits) of word k / (64/FieldBits)), so one shuffle scan
/// of a word scans all its items at once; the scans keep every field
/// below 2^FieldBits, so no field carries into the next.
template <unsigned FieldBits, int Items>
__device__ __forceinline__ void pack_item_flags(const bool (&flag)[Items],
                                                unsigned long long (&mine)[(Items * FieldBits + 63) / 64]) {
    constexpr unsigned kFields = 64 / FieldBits;
#pragma unroll
    for (unsigned w = 0; w < (Items * FieldBits + 63) / 64; ++w) mine[w] = 0;
#pragma unroll
    for (int k = 0; k < Items; ++k)
        if (flag[k]) mine[k / kFields] += 1ull << (FieldBits * (k % kFields));
}

/// Ranks the flagged items of the lanes of `mask` (any mask) in item-major order: item k of every
/// lane in lane order, then item k + 1.  off[k]: the offset of a flagged item k
/// of the calling lane; returns the group's count.  One ballot per item: the
/// items rank independently of each other (a shuffle scan of packed counts
/// was a chain of five dependent shuffles before any offset was known).
template <int Items>
__device__ __forceinline__ unsigned rank_flagged_items(unsigned mask, const bool (&flag)[Items],
                                                       unsigned (&off)[Items]) {
    const unsigned below = lanes_below();
    unsigned run = 0;
#pragma unroll
    for (int k = 0; k < Items; ++k) {
        const unsigned votes = ballot(mask, flag[k]);
        off[k] = run + unsigned(__popc(votes & below));
        run += unsigned(__popc(votes));
    }
    return run;
}

/// Maximum of `value` over the lanes of `mask`.  sm_80+ has a reduction
/// instruction; older GPUs shuffle from every lane of the mask in turn.
__device__ __forceinline__ unsigned masked_max(unsigned mask, unsigned value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return __reduce_max_sync(mask, value);
#else
    unsigned best = value;
    for (unsigned rest = mask; rest != 0; rest &= rest - 1) {
        unsigned other = __shfl_sync(mask, value, int(lowest_bit(rest)));
        best = other > best ? other : best;
    }
    return best;
#endif
}

/// OR of a 64-bit value over the lanes of `mask` (every lane gets it).
__device__ __forceinline__ unsigned long long masked_or64(unsigned mask, unsigned long long v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned lo = __reduce_or_sync(mask, unsigned(v));
    unsigned hi = __reduce_or_sync(mask, unsigned(v >> 32));
    return (static_cast<unsigned long long>(hi) << 32) | lo;
#else
    unsigned long long r = 0;
    for (unsigned rest = mask; rest != 0; rest &= rest - 1) r |= __shfl_sync(mask, v, int(lowest_bit(rest)));
    return r;
#endif
}

/// Broadcast of a pointer from `src_lane` (in mask) to the lanes of mask.
template <class P>
__device__ __forceinline__ P* broadcast_pointer(unsigned mask, P* p, unsigned src_lane) {
    unsigned long long bits = reinterpret_cast<unsigned long long>(p);
    bits = __shfl_sync(mask, bits, int(src_lane));
    return reinterpret_cast<P*>(bits);
}

} // namespace detail
} // namespace v0
} // namespace gpudyn
