/// @file
/// Bulk kernels of the three arrays (GGArray, static, VMM): what the C ABI
/// (lib/ggarray.cu, lib/array_common.cu) launches and benchmarks/ggarray times,
/// built from the device headers.  Launch configuration and error handling stay
/// with the launchers.
///
/// Every kernel is a template (one with no other parameter takes its view or
/// pointer type as one, deduced at the launch), so any number of translation
/// units may include this header.
/// Compiles under nvcc and NVRTC (no host headers).
#pragma once

#include "gpudyn/detail/array_state.cuh"
#include "gpudyn/ggarray.cuh"

namespace gpudyn {
inline namespace v0 {
namespace ggarray_detail {

// ---- bulk insertion (every array) ----
/// Threads per block, elements per thread per ranked tile and resident blocks
/// per SM (<= 64 registers a thread with 8 items, no spills: enough warps to
/// hide each tile's scan latency).  benchmarks/ggarray measures it.
constexpr unsigned kPushThreads = 512;
constexpr int kPushItems = 8;
constexpr int kPushBlocksPerSm = 2;

/// Candidates of one part: values[j], flagged by mask[j] (all without a mask).
template <class T>
struct chunk_source {
    const T* values;
    const unsigned char* mask;
    __device__ bool all_flagged() const { return mask == nullptr; }
    __device__ bool flag(unsigned long long j) const { return mask == nullptr || mask[j] != 0; }
    __device__ T value(unsigned long long j) const { return values[j]; }
};
/// The sources of a bulk insertion of values[0..count) under mask (nullptr: all).
template <class T>
struct chunk_sources {
    const T* values;
    const unsigned char* mask;
    __device__ chunk_source<T> operator()(unsigned long long lo) const {
        return chunk_source<T>{values + lo, mask ? mask + lo : nullptr};
    }
};

/// The parts of plan_bulk_insert, each with one reservation, into any array
/// (Ref has push_back_part); sources(lo) gives the candidates from lo on.
/// Failure: the ref's status word.
template <insert_algo Algo, class Ref, class Sources>
__global__ void __launch_bounds__(kPushThreads, kPushBlocksPerSm)
    push_kernel(Ref ref, Sources sources, unsigned long long count, bulk_plan plan) {
    __shared__ push_storage<kPushThreads, Algo> temp;
    push_back_parts<kPushItems>(temp, ref, count, plan, sources);
}

/// Nonzero flags of mask[0..n) added to `*out` (grid-stride; one atomic per warp).
/// Blocks are whole warps.
template <class Flag>
__global__ void count_kernel(const Flag* mask, unsigned long long n, unsigned long long* out) {
    unsigned long long c = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        c += mask[i] != 0;
    for (unsigned d = 16; d >= 1; d >>= 1) c += __shfl_down_sync(0xffffffffu, c, d);
    if ((threadIdx.x & 31u) == 0) atomicAdd(out, c);
}

// ---- static and VMM arrays ----
/// The library's bookkeeping words of a static or VMM array, one allocation;
/// the view's size, status and failed_at point at their words.  The users'
/// status word keeps only what kernels did: the host's own pushes report
/// through their own word and the call's return status.
enum contiguous_meta_word : int {
    kMetaCounter,    ///< reservation counter
    kMetaStatus,     ///< status word of users' kernels (low 32 bits)
    kMetaSnapshot,   ///< size before a host push, for rollback
    kMetaFailedAt,   ///< lowest failed reservation start (kNoFailure: none)
    kMetaHostStatus, ///< status word of the host's own pushes
    kMetaWords
};

/// One thread: the counter becomes the size and the failure is forgotten; the
/// size is kept as the snapshot (the status words stay).
template <class Word>
__global__ void contiguous_fold_kernel(Word* meta) {
    const Word n = detail::held_elements(meta[kMetaCounter], meta[kMetaFailedAt]);
    meta[kMetaCounter] = n;
    meta[kMetaSnapshot] = n;
    meta[kMetaFailedAt] = detail::kNoFailure;
}

/// One thread: `*out` = the elements held (size_async: the count stays on the device).
template <class Word>
__global__ void contiguous_size_kernel(const Word* meta, Word* out) {
    *out = detail::held_elements(meta[kMetaCounter], meta[kMetaFailedAt]);
}

// ---- GGArray bookkeeping (one thread per bucket / LFVector) ----
template <class T>
__global__ void grow_kernel(gpudyn_ggarray_view_t view, unsigned long long per_lfvector) {
    const ggarray_ref<T> a{view};
    const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i >= (unsigned long long)view.num_lfvectors * GPUDYN_GGARRAY_MAX_BUCKETS) return;
    const unsigned l = unsigned(i / GPUDYN_GGARRAY_MAX_BUCKETS), b = unsigned(i % GPUDYN_GGARRAY_MAX_BUCKETS);
    // One thread per bucket: O(new buckets).
    if (internal::bucket_first(a, b) < per_lfvector) internal::ensure_bucket(a, l, b);
}

template <class T>
__global__ void capacity_kernel(gpudyn_ggarray_view_t view, unsigned long long* out) {
    const ggarray_ref<T> a{view};
    const unsigned l = blockIdx.x * blockDim.x + threadIdx.x;
    if (l < view.num_lfvectors) atomicAdd(out, internal::lfvector_capacity(a, l));
}

/// One block: the ranges (exclusive prefix sum of the LFVector sizes), or with
/// total != nullptr only the number of elements into `*total` (ranges untouched).
/// T: any element type (the counters are read alike; the library uses unsigned char).
template <class T, class View>
__global__ void ranges_kernel(View view, unsigned long long* total) {
    __shared__ unsigned long long scratch[33];
    const ggarray_ref<T> a{view};
    internal::compute_ranges(a, scratch, total ? nullptr : reinterpret_cast<unsigned long long*>(view.ranges));
    if (total != nullptr && threadIdx.x == 0) *total = scratch[32];
}

/// What fold_kernel does to each LFVector's counter before lifting its failure.
enum class fold_mode {
    keep,
    restore,
    clear
};
/// One thread per LFVector: the counter becomes what the LFVector holds
/// (min(counter, failed_at); the snapshot with `restore`; 0 with `clear`), the
/// failure is forgotten and the seal lifted (the ready prefix stays), and the
/// window names the bucket the next push goes to.  Thread 0 also resumes the
/// growth arena from the end of its last bucket (a refusal left `taken` past
/// it) and, with `clear`, zeroes the ranges and the users' status: one launch
/// for all of clear.
template <class T>
__global__ void fold_kernel(gpudyn_ggarray_view_t view, const unsigned long long* snapshot, fold_mode mode) {
    const unsigned l = blockIdx.x * blockDim.x + threadIdx.x;
    if (mode == fold_mode::clear && l <= view.num_lfvectors) reinterpret_cast<unsigned long long*>(view.ranges)[l] = 0;
    if (l == 0) {
        auto* arena = reinterpret_cast<arena_record*>(view.arena);
        arena->taken = arena->end;
        if (mode == fold_mode::clear) *reinterpret_cast<unsigned long long*>(view.status) = 0;
    }
    if (l >= view.num_lfvectors) return;
    auto* sizes = reinterpret_cast<unsigned long long*>(view.sizes);
    auto* failed = reinterpret_cast<unsigned long long*>(view.failed_at);
    auto* growth = reinterpret_cast<unsigned*>(view.growth);
    const unsigned long long held = detail::held_elements(sizes[l], failed[l]);
    const unsigned long long size = mode == fold_mode::clear ? 0ull : mode == fold_mode::restore ? snapshot[l] : held;
    sizes[l] = size;
    failed[l] = detail::kNoFailure;
    growth[l] &= kPrefixMask;
    internal::reset_window(ggarray_ref<T>{view}, l, size);
}

/// The host's trim of an empty array: one thread per LFVector drops the
/// arena's buckets; thread 0 also rewinds the arena and zeroes the bucket bytes.
template <class T>
__global__ void drop_kernel(gpudyn_ggarray_view_t view) {
    const unsigned l = blockIdx.x * blockDim.x + threadIdx.x;
    if (l == 0) {
        auto* arena = reinterpret_cast<arena_record*>(view.arena);
        arena->taken = 0;
        arena->end = 0;
        arena->mapped = 0;
        *reinterpret_cast<unsigned long long*>(view.allocated_bytes) = 0;
    }
    if (l < view.num_lfvectors) internal::drop_arena_buckets(ggarray_ref<T>{view}, l);
}

// ---- spans: block-cooperative loops over contiguous elements ----
/// Bytes per vector access: 16 (the widest global load/store, LDG.128).
constexpr unsigned kVecBytes = 16;

/// Elements of p[0..n) before the first 16-byte boundary (all n when none is reached).
template <class T>
__device__ __forceinline__ unsigned long long elements_before_vector(const T* p, unsigned long long n) {
    const unsigned long long mis = reinterpret_cast<unsigned long long>(p) % kVecBytes;
    const unsigned long long head = mis == 0 ? 0 : (kVecBytes - mis) / sizeof(T);
    return head > n ? n : head;
}

/// Block-cooperative: store(j, load(j)) for the 16-byte vectors j < nvec.  Each
/// thread issues Unroll loads before any of their stores (written out, since
/// the compiler may not move a load above a store that could alias it), so it
/// keeps Unroll x 16 bytes of reads in flight.
template <int Unroll, class Load, class Store>
__device__ __forceinline__ void block_vector_loop(unsigned long long nvec, Load&& load, Store&& store) {
    const unsigned long long step = (unsigned long long)blockDim.x * Unroll;
    for (unsigned long long j0 = threadIdx.x; j0 < nvec; j0 += step) {
        uint4 v[Unroll];
#pragma unroll
        for (int u = 0; u < Unroll; ++u) {
            const unsigned long long j = j0 + (unsigned long long)u * blockDim.x;
            if (j < nvec) v[u] = load(j);
        }
#pragma unroll
        for (int u = 0; u < Unroll; ++u) {
            const unsigned long long j = j0 + (unsigned long long)u * blockDim.x;
            if (j < nvec) store(j, v[u]);
        }
    }
}

/// Grid-cooperative walk of elements [0, n) of `spans` (anything with
/// for_each_span(lo, hi, f)): cut into parts of `part` elements, block b takes
/// parts b, b + gridDim.x, ... span by span, so the blocks work on nearby
/// addresses at any moment (as cudaMemcpy's grid-stride copy does) instead of
/// on one far-apart chunk each.  f(T* p, m, first) runs block-cooperatively.
template <class Spans, class F>
__device__ __forceinline__ void for_each_part_span(const Spans& spans, unsigned long long n, unsigned long long part,
                                                   F&& f) {
    for (unsigned long long lo = blockIdx.x * part; lo < n; lo += (unsigned long long)gridDim.x * part)
        spans.for_each_span(lo, lo + part, f);
}

// ---- flatten ----
/// Threads per block, resident blocks per SM (the copy needs <= 32 registers a
/// thread for element sizes >= 2) and bytes per part (see for_each_part_span).
constexpr unsigned kFlattenThreads = 512;
constexpr unsigned kFlattenBlocksPerSm = 4;
constexpr unsigned long long kFlattenPartBytes = 64 << 10;
/// Vector copies each thread keeps in flight (64 bytes of reads outstanding).
constexpr int kCopyUnroll = 4;

/// out[j] = the 16 bytes starting `Word` words + bits/8 bytes into in[j], in[j+1]
/// (Word < 0: an aligned copy, out[j] = in[j]).
template <int Word>
__device__ __forceinline__ uint4 shifted(const uint4* in, unsigned long long j, unsigned bits) {
    if constexpr (Word < 0) {
        return in[j];
    } else {
        const uint4 a = in[j], b = in[j + 1];
        const unsigned w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
        unsigned o[4];
#pragma unroll
        for (unsigned t = 0; t < 4; ++t) // Word + t + 1 <= 7
            o[t] = bits == 0 ? w[Word + t] : __funnelshift_r(w[Word + t], w[Word + t + 1], bits);
        return make_uint4(o[0], o[1], o[2], o[3]);
    }
}
template <int Word>
__device__ void copy_vectors(uint4* out, const uint4* in, unsigned long long nvec, unsigned bits) {
    block_vector_loop<kCopyUnroll>(
        nvec, [&](unsigned long long j) { return shifted<Word>(in, j, bits); },
        [&](unsigned long long j, const uint4& v) { out[j] = v; });
}

/// Block-cooperative copy of n elements src -> dst.  Elements up to the first
/// 16-byte boundary of dst and after the last one are copied one by one; in
/// between every thread writes whole aligned 16-byte vectors of dst.  src may sit
/// at another offset modulo 16 (its bucket and dst start anywhere): each output
/// vector is then assembled from the two aligned source vectors it straddles
/// (both 16-aligned loads inside the span's written elements: see the last vector).
template <class T>
__device__ void copy_span(T* dst, const T* src, unsigned long long n) {
    static_assert(kVecBytes % sizeof(T) == 0, "element sizes divide 16");
    constexpr unsigned kPerVec = kVecBytes / sizeof(T);
    const unsigned long long head = elements_before_vector(dst, n);
    for (unsigned long long i = threadIdx.x; i < head; i += blockDim.x) dst[i] = src[i];
    const unsigned long long src_addr = reinterpret_cast<unsigned long long>(src + head);
    const unsigned shift = unsigned(src_addr % kVecBytes); // bytes; a multiple of sizeof(T)
    unsigned long long nvec = (n - head) / kPerVec;
    // A shifted vector j also loads in[j + 1]: for the last one that load would
    // reach past the span's last element (memory never written, which initcheck
    // reports), so its elements go one by one with the tail.
    if (shift != 0 && nvec != 0) --nvec;
    const unsigned long long tail = head + nvec * kPerVec;
    for (unsigned long long i = tail + threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i];
    if (nvec == 0) return;
    uint4* out = reinterpret_cast<uint4*>(dst + head);
    const uint4* in = reinterpret_cast<const uint4*>(src_addr - shift);
    const unsigned bits = 8 * (shift % 4);
    if (shift == 0) {
        copy_vectors<-1>(out, in, nvec, bits);
        return;
    }
    switch (shift / 4) { // uniform over the span: no divergence, registers only
        case 0: copy_vectors<0>(out, in, nvec, bits); break;
        case 1: copy_vectors<1>(out, in, nvec, bits); break;
        case 2: copy_vectors<2>(out, in, nvec, bits); break;
        default: copy_vectors<3>(out, in, nvec, bits); break;
    }
}

/// dst[0..n) = the array's elements [0, n) (n <= ranged_size of the view).
template <class T>
__global__ void __launch_bounds__(kFlattenThreads)
    flatten_kernel(gpudyn_ggarray_view_t view, T* dst, unsigned long long n) {
    const ggarray_ref<T> a{view};
    for_each_part_span(
        a, n, kFlattenPartBytes / sizeof(T),
        [&](const T* src, unsigned long long m, unsigned long long first) { copy_span(dst + first, src, m); });
}

// ---- flatten_async: the size taken on the device ----
/// The elements a flatten copies: those at() and the spans cover (a GGArray's
/// ranges, which the launcher recomputes just before), or a static / VMM
/// array's size.
template <class T>
__device__ unsigned long long flatten_count(const ggarray_ref<T>& a) {
    return a.ranged_size();
}
template <class T>
__device__ unsigned long long flatten_count(const detail::contiguous_array_ref<T>& a) {
    return a.size();
}

/// dst[0..n) = the elements of any array (Ref), n = flatten_count(ref), when
/// n <= capacity (elements dst holds); else dst is not written and block 0
/// sets kArrayDestinationTooSmall in `*status`.  Block 0 writes n to `*size` (when
/// not null).  Every block reads n itself (the stream ordered the pushes
/// before this kernel: they all read the same), and copies nothing past it.
template <class T, class Ref>
__global__ void __launch_bounds__(kFlattenThreads)
    flatten_async_kernel(Ref ref, T* dst, unsigned long long capacity, unsigned long long* size, unsigned* status) {
    const unsigned long long n = flatten_count(ref);
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        if (size != nullptr) *size = n;
        if (n > capacity) atomicOr(status, detail::kArrayDestinationTooSmall);
    }
    if (n > capacity) return;
    const unsigned long long part = kFlattenPartBytes / sizeof(T);
    for (unsigned long long lo = blockIdx.x * part; lo < n; lo += (unsigned long long)gridDim.x * part) {
        const unsigned long long hi = n - lo < part ? n : lo + part;
        ref.for_each_span(lo, hi, [&](const T* src, unsigned long long m, unsigned long long first) {
            copy_span(dst + first, src, m);
        });
    }
}

} // namespace ggarray_detail
} // namespace v0
} // namespace gpudyn
