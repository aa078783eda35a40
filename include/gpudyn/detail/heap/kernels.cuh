/// @file
/// Bulk kernels of the device allocator (heap): what the C ABI (lib/heap.cu)
/// launches, built from include/gpudyn/heap.cuh.  Launch configuration and
/// error handling stay with the launchers.
///
/// Every kernel is a template (one with no other parameter takes its view or
/// pointer type as one, deduced at the launch), so any number of translation
/// units may include this header.
/// Compiles under nvcc and NVRTC (no host headers).
#pragma once

#include "gpudyn/detail/bits.cuh"
#include "gpudyn/heap.cuh"

namespace gpudyn {
inline namespace v0 {
namespace heap_detail {

/// Slots of the per-call scratch: failed requests of a bulk malloc; stats sums.
enum {
    kScratchFailed,
    kScratchAllocs,
    kScratchBytes,
    kScratchLargestSlot,
    kScratchCount
};

/// Pages [from, to) become free (their bits were set: unmapped pages are used),
/// then the device's mapped page count becomes `to`.
template <class Word>
__global__ void map_pages_kernel(Word* bitmap, unsigned from, unsigned to, unsigned* mapped) {
    static_assert(sizeof(Word) == 8, "the heap's page bitmap has 64-bit words");
    const unsigned first_word = from / 64, end_word = (to + 63) / 64;
    for (unsigned long long w = first_word + blockIdx.x * blockDim.x + threadIdx.x; w < end_word;
         w += gridDim.x * blockDim.x) {
        const unsigned lo = w * 64 < from ? from - unsigned(w * 64) : 0;
        const unsigned hi = (w + 1) * 64 > to ? to - unsigned(w * 64) : 64;
        atomicAnd(bitmap + w, ~detail::bit_range<Word>(lo, hi));
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) *mapped = to;
}

template <class View>
__global__ void malloc_kernel(View v, const unsigned long long* sizes, unsigned long long* out, unsigned long long n,
                              unsigned long long* scratch) {
    const heap_ref heap{v};
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned long long bytes = sizes[i];
        void* p = heap.malloc(bytes);
        out[i] = reinterpret_cast<unsigned long long>(p);
        if (p == nullptr && bytes != 0) atomicAdd(scratch + kScratchFailed, 1ull);
    }
}

template <class View>
__global__ void free_kernel(View v, const unsigned long long* ptrs, unsigned long long n) {
    const heap_ref heap{v};
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x) {
        const unsigned long long p = ptrs[i];
        if (p != 0) heap.free(reinterpret_cast<void*>(p));
    }
}

template <class View>
__global__ void stats_kernel(View v, unsigned pages, unsigned long long* scratch) {
    const heap_ref heap{v};
    unsigned long long allocs = 0, bytes = 0, largest = 0;
    for (unsigned long long p = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; p < pages;
         p += (unsigned long long)gridDim.x * blockDim.x) {
        const heap_page_usage u = heap.usage_of_page(unsigned(p));
        allocs += u.allocations;
        bytes += u.bytes_allocated;
        largest = u.largest_slot > largest ? u.largest_slot : largest;
    }
    if (allocs) atomicAdd(scratch + kScratchAllocs, allocs);
    if (bytes) atomicAdd(scratch + kScratchBytes, bytes);
    if (largest) atomicMax(scratch + kScratchLargestSlot, largest);
}

} // namespace heap_detail
} // namespace v0
} // namespace gpudyn
