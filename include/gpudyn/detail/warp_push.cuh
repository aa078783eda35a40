// Per-thread push_back with warp aggregation, shared by the three arrays.
//
// Any thread may call, at any time, under any divergence.  The lanes that
// arrive together at one call (`peers`: __activemask(), or the lanes of it
// that target the same LFVector, from __match_any_sync) share ONE reservation:
// the leader reserves the group's total with one atomic and hands the base out
// with a shuffle; each lane stores at base + its rank (lanes in lane order, so
// the stores of a full warp are one coalesced 128-byte line per 4-byte element
// type).  No shared memory, no block barrier.  All data moves through *_sync
// intrinsics over `peers` (independent thread scheduling: nothing assumes
// lockstep); every lane of `peers` must call with the same `peers`.
//
// Sink (the structure's side; see ggarray.cuh / contiguous_array.cuh):
//   bool reserve(unsigned long long n, unsigned long long* base)   one thread,
//        all-or-nothing: [base, base + n) is the caller's, or false (nothing stored);
//   void locate(unsigned long long base, unsigned n, T** p0, T** p1, unsigned* split)
//        same thread, n <= 32: elements [base, base + split) at p0[0..split),
//        the rest at p1[0..n - split) (p1 unused when split == n); p0 != nullptr;
//   void store_run(unsigned long long i, const T* v, unsigned n)    any thread,
//        after the leader's reserve and a __syncwarp: elements [i, i + n) = v[0..n).
// Compiles under nvcc and NVRTC.
#pragma once

#include "gpudyn/detail/lane_mask.cuh"

namespace gpudyn {
inline namespace v0 {
namespace dev {

// Sink::kOnePiece: the reserved range is always one contiguous piece (the
// contiguous arrays): p1/split are not broadcast.
template <class Sink>
struct sink_traits {
    static constexpr bool one_piece = Sink::kOnePiece;
};

// One value per calling lane.  Returns the same bool in every lane of `peers`.
template <class T, class Sink>
__device__ __forceinline__ bool warp_push_one(unsigned peers, const Sink& sink, const T& x) {
    const unsigned lane = detail::lane_index();
    const unsigned leader = unsigned(__ffs(int(peers))) - 1u;
    const unsigned rank = unsigned(__popc(peers & detail::lanes_below()));
    const unsigned count = unsigned(__popc(peers));
    T* p0 = nullptr;
    T* p1 = nullptr;
    unsigned split = count;
    if (lane == leader) {
        unsigned long long base = 0;
        if (sink.reserve(count, &base)) sink.locate(base, count, &p0, &p1, &split);
    }
    p0 = detail::broadcast_pointer(peers, p0, leader);
    if (p0 == nullptr) return false;  // the group's reservation was refused
    if constexpr (sink_traits<Sink>::one_piece) {
        p0[rank] = x;
    } else {
        // A group is <= 32 elements and a bucket >= 32: at most two pieces.
        p1 = detail::broadcast_pointer(peers, p1, leader);
        split = __shfl_sync(peers, split, int(leader));
        if (rank < split) p0[rank] = x;
        else p1[rank - split] = x;
    }
    return true;
}

// n values per calling lane (n may differ per lane, 0 included): one
// reservation of the group's total (inclusive scan of n over `peers`), each
// lane's values stored contiguously at its offset.  Returns the same bool in
// every lane of `peers` (true when the group's total is 0).
template <class T, class Sink>
__device__ __forceinline__ bool warp_push_many(unsigned peers, const Sink& sink, const T* values, unsigned n) {
    const unsigned lane = detail::lane_index();
    const unsigned last = detail::highest_lane(peers);
    const unsigned long long incl = detail::masked_inclusive_sum(peers, (unsigned long long)n);
    const unsigned long long total = __shfl_sync(peers, incl, int(last));
    if (total == 0) return true;
    constexpr unsigned long long kRefused = ~0ull;  // no reservation starts there (counters stay below 2^64 - 1)
    unsigned long long base = kRefused;
    if (lane == last && !sink.reserve(total, &base)) base = kRefused;
    base = __shfl_sync(peers, base, int(last));
    if (base == kRefused) return false;
    // Every lane reads the storage's pointers itself (store_run); __syncwarp
    // orders those reads after the leader's reservation.
    __syncwarp(peers);
    if (n != 0) sink.store_run(base + (incl - n), values, n);
    return true;
}

}  // namespace dev
}  // namespace v0
}  // namespace gpudyn
