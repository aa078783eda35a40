/// @file
/// Per-thread push_back with warp aggregation, shared by the three arrays.
///
/// Any thread may call, at any time, under any divergence.  The lanes that
/// arrive together at one call and push into the same structure (`peers`:
/// the lanes of `__activemask()` with the same target, detail::peers_with) share ONE counter
/// update: the leader claims the group's total with one atomic and hands the
/// base out with a shuffle; each lane stores at base + its rank (lanes in lane
/// order, so the stores of a full warp are one coalesced 128-byte line per
/// 4-byte element type).  No shared memory, no block barrier.  All data moves
/// through `*_sync` intrinsics over `peers`; every lane of `peers` must call with
/// the same `peers`.
///
/// Why the leader's part is short (claim) and every lane settles itself: a
/// shuffle that waits for a leader running a long path (bucket growth: loops,
/// back-off, an out-of-line heap call) was observed on sm_90 (nvcc 13.0) to
/// hand the other lanes the leader's value from BEFORE that path, with lanes
/// desynchronized by earlier code: whole groups were counted and never written
/// (tests/c/test_ggarray_push_device.cu, part D).  Nothing after the claim's
/// shuffle depends on the lanes being converged: settle is the same
/// all-or-nothing decision in every lane (the structure's state decides it,
/// not a message from the leader), and each lane finds its own slot.
///
/// Sink (the structure's side; see ggarray.cuh / contiguous_array.cuh):
///   unsigned long long hint()   any thread, before the claim: an opaque word
///        (a GGArray's window; read in flight with the claim's atomic);
///   unsigned long long claim(unsigned long long n)   one thread, short (no
///        loop, no wait): takes [base, base + n) of the counter, returns base;
///   T* fast(unsigned long long h, unsigned long long base, unsigned long long n)
///        any thread: p with element i of [base, base + n) at p[i - base] when
///        the hint shows the range's storage ready (the usual case), else nullptr;
///   bool settle(unsigned long long base, unsigned long long n)   any number of
///        threads with the same arguments, each gets the same answer: the
///        range's storage is ready, or false (the failure recorded, nothing to store);
///   void advance(unsigned long long base, unsigned long long n)
///        one thread, after settle returned true: lets later hints cover the range;
///   void store_run(unsigned long long i, const T* v, unsigned n)    any thread,
///        after settle returned true: elements [i, i + n) = v[0..n);
///   void store_one(unsigned long long i, const T& v)   the same for one element;
///   T* span(unsigned long long base, unsigned long long n)   any thread, after
///        settle, n > 0: p with element i of [base, base + n) at p[i - base],
///        or nullptr when the range is not one contiguous piece.
/// Compiles under nvcc and NVRTC.
#pragma once

#include "gpudyn/detail/warp.cuh"

namespace gpudyn {
inline namespace v0 {
namespace detail {

/// The group's claim: lane `claimer` takes [base, base + total) of the counter,
/// every lane of `peers` gets base and finds the range's storage itself: `*p`
/// with element i at p[i - base] when the range is one piece (the hint's fast
/// path, else settle then span), nullptr when it is not (store element by
/// element).  Returns false when the range failed (the same in every lane).
template <class T, class Sink>
__device__ __forceinline__ bool claim_group(unsigned peers, const Sink& sink, unsigned claimer,
                                            unsigned long long total, unsigned long long* base, T** p) {
    const unsigned long long h = sink.hint(); // one load for the warp, in flight with the atomic
    unsigned long long b = 0;
    if (detail::lane_index() == claimer) b = sink.claim(total);
    b = __shfl_sync(peers, b, int(claimer));
    *base = b;
    if (T* const q = sink.fast(h, b, total)) {
        *p = q;
        return true;
    }
    if (!sink.settle(b, total)) return false;
    if (detail::lane_index() == claimer) sink.advance(b, total);
    *p = sink.span(b, total);
    return true;
}

/// The same claim by one thread alone (the block-level inserters of insert.cuh):
/// [`*base`, `*base` + n) is the caller's when it returns true.
template <class Sink>
__device__ __forceinline__ bool reserve_range(const Sink& sink, unsigned long long n, unsigned long long* base) {
    const unsigned long long h = sink.hint();
    *base = sink.claim(n);
    if (sink.fast(h, *base, n) != nullptr) return true;
    if (!sink.settle(*base, n)) return false;
    sink.advance(*base, n);
    return true;
}

/// One value per calling lane.  Returns the same bool in every lane of `peers`.
template <class T, class Sink>
__device__ __forceinline__ bool warp_push_one(unsigned peers, const Sink& sink, const T& x) {
    const unsigned leader = unsigned(__ffs(int(peers))) - 1u;
    const unsigned rank = unsigned(__popc(peers & detail::lanes_below()));
    const unsigned count = unsigned(__popc(peers));
    unsigned long long base = 0;
    T* p = nullptr;
    if (!claim_group(peers, sink, leader, count, &base, &p)) return false;
    if (p != nullptr) p[rank] = x;
    else sink.store_one(base + rank, x);
    return true;
}

/// q[0..n) = v[0..n) for one lane's run: 16-byte stores from where q is
/// aligned for them (T of 4 or 8 bytes, aligned to its size), a quarter (a
/// half) of the store instructions, each lane's run being contiguous.
template <class T>
__device__ __forceinline__ void copy_run(T* q, const T* v, unsigned n) {
    unsigned j = 0;
    if ((sizeof(T) == 4 || sizeof(T) == 8) && alignof(T) == sizeof(T)) {
        constexpr unsigned kPer = 16u / unsigned(sizeof(T));
        const unsigned head =
            unsigned((16u - (reinterpret_cast<unsigned long long>(q) & 15u)) & 15u) / unsigned(sizeof(T));
        if (n >= head + kPer) {
            for (; j < head; ++j) q[j] = v[j];
            for (; j + kPer <= n; j += kPer) {
                const unsigned* s = reinterpret_cast<const unsigned*>(v + j);
                *reinterpret_cast<uint4*>(q + j) = make_uint4(s[0], s[1], s[2], s[3]);
            }
        }
    }
    for (; j < n; ++j) q[j] = v[j];
}

/// n values per calling lane (n may differ per lane, 0 included): one claim of
/// the group's total (inclusive scan of n over `peers`, in 32 bits when no n
/// reaches 2^27: half the shuffles, and no spills in the callers), each lane's
/// values stored contiguously at its offset.  Returns the same bool in every lane of
/// `peers` (true when the group's total is 0).
template <class T, class Sink>
__device__ __forceinline__ bool warp_push_many(unsigned peers, const Sink& sink, const T* values, unsigned n) {
    const unsigned last = detail::highest_lane(peers);
    unsigned long long incl, total;
    if (detail::masked_max(peers, n) < (1u << 27)) { // 32 lanes' n sum below 2^32: a 32-bit scan
        const unsigned i32 = detail::masked_inclusive_sum(peers, n);
        incl = i32;
        total = __shfl_sync(peers, i32, int(last));
    } else {
        incl = detail::masked_inclusive_sum(peers, (unsigned long long)n);
        total = __shfl_sync(peers, incl, int(last));
    }
    if (total == 0) return true;
    unsigned long long base = 0;
    T* p = nullptr;
    if (!claim_group(peers, sink, last, total, &base, &p)) return false;
    if (n == 0) return true;
    if (p != nullptr) { // one piece (group-uniform)
        copy_run(p + (incl - n), values, n);
    } else {
        sink.store_run(base + (incl - n), values, n);
    }
    return true;
}

/// Items (flag, value) pairs per calling lane: the group's flagged values with
/// one claim, in item-major order (item k of every lane in lane order, then
/// item k + 1: lanes that loaded candidate k * 32 + lane keep input order).
/// Returns the same bool in every lane of `peers` (true when none is flagged).
template <int Items, class T, class Sink>
__device__ __forceinline__ bool warp_push_flagged(unsigned peers, const Sink& sink, const bool (&flag)[Items],
                                                  const T (&value)[Items]) {
    unsigned off[Items];
    const unsigned total = rank_flagged_items<Items>(peers, flag, off);
    if (total == 0) return true;
    unsigned long long base = 0;
    T* p = nullptr;
    if (!claim_group(peers, sink, detail::highest_lane(peers), total, &base, &p)) return false;
    if (p != nullptr) { // one piece (group-uniform): no per-element lookup
#pragma unroll
        for (int k = 0; k < Items; ++k)
            if (flag[k]) p[off[k]] = value[k];
    } else {
#pragma unroll
        for (int k = 0; k < Items; ++k)
            if (flag[k]) sink.store_one(base + off[k], value[k]);
    }
    return true;
}

} // namespace detail
} // namespace v0
} // namespace gpudyn
