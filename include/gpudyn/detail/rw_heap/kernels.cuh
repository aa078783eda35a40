/// @file
/// Bulk kernels of the random-walk page heap: what the C ABI (lib/rw_heap.cu)
/// launches, built from include/gpudyn/rw_heap.cuh.  Launch configuration and
/// error handling stay with the launchers.
///
/// Every kernel is a template (one with no other parameter takes its view or
/// pointer type as one, deduced at the launch), so any number of translation
/// units may include this header.
/// Compiles under nvcc and NVRTC (no host headers).
#pragma once

#include "gpudyn/detail/random.cuh"
#include "gpudyn/detail/warp.cuh"
#include "gpudyn/rw_heap.cuh"

namespace gpudyn {
inline namespace v0 {
namespace rw_heap_detail {

using detail::counter_rng;
using detail::highest_lane;
using detail::lane_index;
using detail::masked_inclusive_sum;
using detail::masked_max;

/// Threads per block of the bulk kernels: 8 warps, several resident blocks per SM
/// hide the latency of the random reads (the walks are latency bound).
constexpr unsigned kBlock = 256;
constexpr unsigned kWarpsPerBlock = kBlock / 32;
/// Slots of the per-call scratch counters.
enum Scratch {
    kStepsSum,
    kWarpMaxSum,
    kWarpRounds,
    kMaxSteps,
    kFailedHere,
    kOversize,
    kScratchCount
};

/// One thread.
template <class View>
__global__ void set_tail_kernel(View v) {
    // Bits past page_count in the last word are permanently used.
    const unsigned B = v.word_bits;
    const unsigned used_in_last = v.page_count % B;
    if (used_in_last == 0) return;
    if (B == 64) {
        auto* w = reinterpret_cast<unsigned long long*>(v.bitmap) + (v.word_count - 1);
        atomicOr(w, ~((1ull << used_in_last) - 1));
    } else {
        auto* w = reinterpret_cast<unsigned*>(v.bitmap) + (v.word_count - 1);
        atomicOr(w, ~((1u << used_in_last) - 1));
    }
}

/// Marks `used` distinct pages used, chosen by the seeded permutation of the
/// pages (bits: the smallest with 2^bits >= page_count).
template <class View>
__global__ void occupy_kernel(View v, unsigned long long used, unsigned bits, unsigned long long seed) {
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < used; i += gridDim.x * blockDim.x) {
        unsigned page = detail::permute(i, bits, v.page_count, seed);
        if (v.word_bits == 64)
            atomicOr(reinterpret_cast<unsigned long long*>(v.bitmap) + page / 64, 1ull << (page % 64));
        else atomicOr(reinterpret_cast<unsigned*>(v.bitmap) + page / 32, 1u << (page % 32));
    }
}

template <class View>
__global__ void count_free_kernel(View v, unsigned long long* out) {
    unsigned long long local = 0;
    for (unsigned long long w = blockIdx.x * blockDim.x + threadIdx.x; w < v.word_count; w += gridDim.x * blockDim.x) {
        if (v.word_bits == 64) local += __popcll(~reinterpret_cast<const unsigned long long*>(v.bitmap)[w]);
        else local += __popc(~reinterpret_cast<const unsigned*>(v.bitmap)[w]);
    }
    for (int d = 16; d > 0; d >>= 1) local += __shfl_down_sync(0xffffffffu, local, d);
    if ((threadIdx.x & 31) == 0 && local) atomicAdd(out, local);
}

/// One thread per `per_thread` requests.  With Stats the warp's step sum and
/// maximum of each request round go to scratch (TAS and WAS, SIII-B).
template <rw_algorithm Algo, bool Stats, class View>
__global__ void get_pages_kernel(View v, unsigned* pages, unsigned long long n, unsigned per_thread,
                                 unsigned long long seed, unsigned long long* scratch) {
    const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned long long first = tid * per_thread;
    const unsigned warp_mask = detail::ballot(0xffffffffu, first < n);
    if (first >= n) return;
    rw_heap_ref heap{v};
    counter_rng rng(seed, tid);
    unsigned last = kRwInvalidPage;
    // Rounds of the warp: the requests of its first lane (the one with the most),
    // never per_thread when fewer requests exist (n = 1, per_thread = 2^26 is one round).
    const unsigned long long warp_first = (tid - lane_index()) * per_thread;
    const unsigned long long left = n - warp_first;
    const unsigned rounds = left < per_thread ? unsigned(left) : per_thread;
    for (unsigned j = 0; j < rounds; ++j) {
        const bool mine = first + j < n;
        const unsigned mask = detail::ballot(warp_mask, mine);
        if (!mine) continue;
        unsigned steps = 0;
        unsigned page;
        if constexpr (Algo == rw_algorithm::corw) page = heap.get_page_corw(mask, rng, steps);
        else page = heap.get_page<Algo>(rng, steps, last);
        pages[first + j] = page;
        if (page == kRwInvalidPage) atomicAdd(scratch + kFailedHere, 1ull);
        if constexpr (Stats) {
            const unsigned long long sum = masked_inclusive_sum(mask, (unsigned long long)steps);
            const unsigned top = masked_max(mask, steps);
            if (lane_index() == highest_lane(mask)) {
                atomicAdd(scratch + kStepsSum, sum);
                atomicAdd(scratch + kWarpMaxSum, (unsigned long long)top);
                atomicAdd(scratch + kWarpRounds, 1ull);
                atomicMax(scratch + kMaxSteps, (unsigned long long)top);
            }
        }
    }
}

template <class View>
__global__ void free_pages_kernel(View v, const unsigned* pages, unsigned long long n) {
    rw_heap_ref heap{v};
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (pages[i] != kRwInvalidPage) heap.free_page(pages[i]);
}

template <class View>
__global__ void malloc_kernel(View v, const unsigned long long* sizes, unsigned long long* ptrs, unsigned long long n,
                              unsigned long long seed, unsigned long long* scratch) {
    __shared__ gpudyn::rw_malloc_storage storage[kWarpsPerBlock];
    const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned mask = detail::ballot(0xffffffffu, tid < n);
    if (tid >= n) return;
    rw_heap_ref heap{v};
    counter_rng rng(seed, tid);
    const unsigned long long bytes = sizes[tid];
    if (bytes > heap.max_malloc_size()) atomicAdd(scratch + kOversize, 1ull);
    void* p = heap.malloc(mask, bytes, storage[threadIdx.x / 32], rng);
    ptrs[tid] = reinterpret_cast<unsigned long long>(p);
    if (bytes != 0 && p == nullptr) atomicAdd(scratch + kFailedHere, 1ull);
}

template <class View>
__global__ void free_kernel(View v, const unsigned long long* ptrs, unsigned long long n) {
    rw_heap_ref heap{v};
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        heap.free(reinterpret_cast<void*>(ptrs[i]));
}

} // namespace rw_heap_detail
} // namespace v0
} // namespace gpudyn
