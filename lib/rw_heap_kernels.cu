// Bulk kernels of the random-walk page heap, built from include/gpudyn/rw_heap.cuh,
// kept apart from the ABI plumbing of lib/rw_heap.cu (launchers in rw_heap_kernels.hpp).
#include "rw_heap_kernels.hpp"

#include "internal.hpp"  // grid_for: per-device SM counts

#include <gpudyn/rw_heap.cuh>

namespace gpudyn::rw_heap_impl {

using gpudyn::kRwInvalidPage;
using gpudyn::rw_algorithm;
using gpudyn::rw_heap_ref;
using gpudyn::v0::detail::counter_rng;
using gpudyn::v0::detail::highest_lane;
using gpudyn::v0::detail::kGoldenGamma;
using gpudyn::v0::detail::lane_index;
using gpudyn::v0::detail::masked_inclusive_sum;
using gpudyn::v0::detail::masked_max;
using gpudyn::v0::detail::mix64;

namespace {

constexpr unsigned kWarpsPerBlock = kBlock / 32;

__global__ void set_tail_kernel(gpudyn_rw_heap_view_t v) {
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

// A seeded bijection of [0, 2^bits) (odd multiply, add, xorshift: each step is
// invertible mod 2^bits); cycle-walking maps it onto [0, n).
__device__ unsigned permute(unsigned long long i, unsigned bits, unsigned n, unsigned long long seed) {
    const unsigned long long mask = (bits >= 64) ? ~0ull : ((1ull << bits) - 1);
    const unsigned shift = bits / 2 + 1;
    unsigned long long x = i;
    do {
        for (unsigned r = 0; r < 4; ++r) {
            unsigned long long k = mix64(seed + r * kGoldenGamma);
            x = (x * (k | 1)) & mask;
            x = (x + (k >> 17)) & mask;
            x ^= x >> shift;
        }
    } while (x >= n);
    return unsigned(x);
}

__global__ void occupy_kernel(gpudyn_rw_heap_view_t v, unsigned long long used, unsigned bits,
                              unsigned long long seed) {
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < used; i += gridDim.x * blockDim.x) {
        unsigned page = permute(i, bits, v.page_count, seed);
        if (v.word_bits == 64)
            atomicOr(reinterpret_cast<unsigned long long*>(v.bitmap) + page / 64, 1ull << (page % 64));
        else
            atomicOr(reinterpret_cast<unsigned*>(v.bitmap) + page / 32, 1u << (page % 32));
    }
}

__global__ void count_free_kernel(gpudyn_rw_heap_view_t v, unsigned long long* out) {
    unsigned long long local = 0;
    for (unsigned long long w = blockIdx.x * blockDim.x + threadIdx.x; w < v.word_count;
         w += gridDim.x * blockDim.x) {
        if (v.word_bits == 64)
            local += __popcll(~reinterpret_cast<const unsigned long long*>(v.bitmap)[w]);
        else
            local += __popc(~reinterpret_cast<const unsigned*>(v.bitmap)[w]);
    }
    for (int d = 16; d > 0; d >>= 1) local += __shfl_down_sync(0xffffffffu, local, d);
    if ((threadIdx.x & 31) == 0 && local) atomicAdd(out, local);
}

// One thread per `per_thread` requests.  With Stats the warp's step sum and
// maximum of each request round go to scratch (TAS and WAS, SIII-B).
template <rw_algorithm Algo, bool Stats>
__global__ void get_pages_kernel(gpudyn_rw_heap_view_t v, unsigned* pages, unsigned long long n, unsigned per_thread,
                                 unsigned long long seed, unsigned long long* scratch) {
    const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned long long first = tid * per_thread;
    const unsigned warp_mask = __ballot_sync(0xffffffffu, first < n);
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
        const unsigned mask = __ballot_sync(warp_mask, mine);
        if (!mine) continue;
        unsigned steps = 0;
        unsigned page;
        if constexpr (Algo == rw_algorithm::corw)
            page = heap.get_page_corw(mask, rng, steps);
        else
            page = heap.get_page<Algo>(rng, steps, last);
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

__global__ void free_pages_kernel(gpudyn_rw_heap_view_t v, const unsigned* pages, unsigned long long n) {
    rw_heap_ref heap{v};
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        if (pages[i] != kRwInvalidPage) heap.free_page(pages[i]);
}

__global__ void malloc_kernel(gpudyn_rw_heap_view_t v, const unsigned long long* sizes, unsigned long long* ptrs,
                              unsigned long long n, unsigned long long seed, unsigned long long* scratch) {
    __shared__ gpudyn::rw_malloc_storage storage[kWarpsPerBlock];
    const unsigned long long tid = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned mask = __ballot_sync(0xffffffffu, tid < n);
    if (tid >= n) return;
    rw_heap_ref heap{v};
    counter_rng rng(seed, tid);
    const unsigned long long bytes = sizes[tid];
    if (bytes > heap.max_malloc_size()) atomicAdd(scratch + kOversize, 1ull);
    void* p = heap.malloc(mask, bytes, storage[threadIdx.x / 32], rng);
    ptrs[tid] = reinterpret_cast<unsigned long long>(p);
    if (bytes != 0 && p == nullptr) atomicAdd(scratch + kFailedHere, 1ull);
}

__global__ void free_kernel(gpudyn_rw_heap_view_t v, const unsigned long long* ptrs, unsigned long long n) {
    rw_heap_ref heap{v};
    for (unsigned long long i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        heap.free(reinterpret_cast<void*>(ptrs[i]));
}

unsigned blocks_for(unsigned long long threads) { return unsigned((threads + kBlock - 1) / kBlock); }

// Grid-stride kernels: enough blocks to fill the GPU (8 blocks of 256 per SM:
// 2048 threads, the sm_90 maximum), not more.
unsigned grid_stride_blocks(unsigned long long n) { return gpudyn::detail::grid_for(n, kBlock, 8); }

template <rw_algorithm Algo>
void get_pages_algo(const gpudyn_rw_heap_view_t& v, unsigned* pages, unsigned long long n, unsigned per_thread,
                    unsigned long long seed, bool stats, unsigned long long* scratch, cudaStream_t s) {
    const unsigned long long threads = (n + per_thread - 1) / per_thread;
    if (stats)
        get_pages_kernel<Algo, true><<<blocks_for(threads), kBlock, 0, s>>>(v, pages, n, per_thread, seed, scratch);
    else
        get_pages_kernel<Algo, false><<<blocks_for(threads), kBlock, 0, s>>>(v, pages, n, per_thread, seed, scratch);
}

}  // namespace

cudaError_t launch_set_tail(const gpudyn_rw_heap_view_t& v, cudaStream_t s) {
    set_tail_kernel<<<1, 1, 0, s>>>(v);
    return cudaGetLastError();
}

cudaError_t launch_occupy(const gpudyn_rw_heap_view_t& v, unsigned long long used, unsigned long long seed,
                          cudaStream_t s) {
    if (used == 0) return cudaSuccess;
    unsigned bits = 1;
    while ((1ull << bits) < v.page_count) ++bits;
    occupy_kernel<<<grid_stride_blocks(used), kBlock, 0, s>>>(v, used, bits, seed);
    return cudaGetLastError();
}

cudaError_t launch_count_free(const gpudyn_rw_heap_view_t& v, unsigned long long* out, cudaStream_t s) {
    count_free_kernel<<<grid_stride_blocks(v.word_count), kBlock, 0, s>>>(v, out);
    return cudaGetLastError();
}

cudaError_t launch_get_pages(const gpudyn_rw_heap_view_t& v, gpudyn_rw_heap_algorithm_t algorithm, unsigned* pages,
                             unsigned long long n, unsigned per_thread, unsigned long long seed, bool stats,
                             unsigned long long* scratch, cudaStream_t s) {
    switch (algorithm) {
        case GPUDYN_RW_HEAP_RW: get_pages_algo<rw_algorithm::rw>(v, pages, n, per_thread, seed, stats, scratch, s); break;
        case GPUDYN_RW_HEAP_RW_BM: get_pages_algo<rw_algorithm::rw_bm>(v, pages, n, per_thread, seed, stats, scratch, s); break;
        case GPUDYN_RW_HEAP_CORW: get_pages_algo<rw_algorithm::corw>(v, pages, n, per_thread, seed, stats, scratch, s); break;
        case GPUDYN_RW_HEAP_CRW: get_pages_algo<rw_algorithm::crw>(v, pages, n, per_thread, seed, stats, scratch, s); break;
        default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

cudaError_t launch_free_pages(const gpudyn_rw_heap_view_t& v, const unsigned* pages, unsigned long long n,
                              cudaStream_t s) {
    free_pages_kernel<<<grid_stride_blocks(n), kBlock, 0, s>>>(v, pages, n);
    return cudaGetLastError();
}

cudaError_t launch_malloc(const gpudyn_rw_heap_view_t& v, const unsigned long long* sizes, unsigned long long* ptrs,
                          unsigned long long n, unsigned long long seed, unsigned long long* scratch, cudaStream_t s) {
    malloc_kernel<<<blocks_for(n), kBlock, 0, s>>>(v, sizes, ptrs, n, seed, scratch);
    return cudaGetLastError();
}

cudaError_t launch_free(const gpudyn_rw_heap_view_t& v, const unsigned long long* ptrs, unsigned long long n,
                        cudaStream_t s) {
    free_kernel<<<grid_stride_blocks(n), kBlock, 0, s>>>(v, ptrs, n);
    return cudaGetLastError();
}

}  // namespace gpudyn::rw_heap_impl
