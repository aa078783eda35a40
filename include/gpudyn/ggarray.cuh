// GGArray (Meneses, Navarro & Ferrada): a growable GPU array made of one
// LFVector per thread block.  LFVector l holds its elements in buckets; bucket
// b has first·2^b elements and is allocated inside a kernel, on demand, by the
// one thread that wins a compare-and-swap on its state (the precursor report's
// fix: no thread allocates before knowing it is the one): in place in the
// host-mapped bucket pool, else from the gpudyn heap carried by the view (the
// array's budget; never CUDA's device malloc).  `ranges` is the
// exclusive prefix sum of the LFVector sizes (computed by get_view) so a global
// index finds its LFVector by binary search.
//
// Faster than published: element access goes by *spans* — contiguous pieces of
// one bucket — so read/write loops are plain coalesced loops over memory, with
// the bucket arithmetic done once per span, not once per element.
//
//   __global__ void k(gpudyn_ggarray_view_t view, const int* in, unsigned n) {
//       __shared__ gpudyn::push_storage<gpudyn::insert_algo::warp_scan> temp;
//       gpudyn::ggarray_ref<int> a{view};
//       unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
//       int x = i < n ? in[i] : 0;
//       a.push_back(temp, i < n && x < 90, x);   // every thread of the block calls
//   }
//
// Registers.  A kernel that pushes into a GGArray contains the growth path (an
// out-of-line call into the heap, heap.cuh), which takes it to about 130-165
// registers a thread (sm_90, nvcc 13.0).  Blocks of up to 384 threads launch
// as they are; a kernel launched with larger blocks needs
// __launch_bounds__(threads) (the compiler then keeps to the register budget,
// spilling around the rare growth call), else the launch fails with
// cudaErrorLaunchOutOfResources.
// Compiles under nvcc and NVRTC.
#pragma once

#if defined(__CUDACC_RTC__)
#include <cuda/std/cstdint>
#include <cuda/std/cstddef>
#endif
#include "gpudyn/ggarray.h"
#include "gpudyn/detail/contiguous_array.cuh"
#include "gpudyn/heap.cuh"  // buckets beyond the pool rows

namespace gpudyn {
inline namespace v0 {

namespace ggarray_detail {
// Bucket states (view .bucket_state): ready buckets are kReady (from the heap,
// given back by destroy) or kReadyPool (a slice of the pool, never freed alone).
constexpr unsigned kEmpty = 0, kBusy = 1, kReady = 2, kReadyPool = 3;
// Back-off while another thread allocates a bucket (ns; short next to a malloc).
constexpr unsigned kWaitNs = 128;

// Buckets beyond the pool rows, from the heap of the view (`heap`: the view's
// gpudyn_heap_view_t, heap.cuh's heap_view layout).  nullptr when there is no
// heap (version 0) or it has no memory left (the budget).  Out of line (the
// heap's code stays off the registers of the push loops that call it rarely),
// and the heap view passed by value: a reference would make the caller copy
// its whole array view to local memory to take its address.
__device__ __noinline__ inline void* heap_bucket(heap_view heap, unsigned long long bytes) {
    if (heap.version != kHeapViewVersion || heap.counters == 0) return nullptr;
    return heap_ref{heap}.malloc(bytes);
}
}  // namespace ggarray_detail

// The view's heap field is read as heap.cuh's mirror of the C heap view.
static_assert(sizeof(heap_view) == sizeof(gpudyn_heap_view_t), "heap_view must mirror gpudyn_heap_view_t");
static_assert(GPUDYN_HEAP_VIEW_VERSION == kHeapViewVersion, "heap.cuh reads this heap view version");

template <class T>
struct ggarray_ref {
    gpudyn_ggarray_view_t view;

    __host__ __device__ explicit ggarray_ref(const gpudyn_ggarray_view_t& v) : view(v) {}
    // A view of another layout version or element size is refused: push_back fails.
    __host__ __device__ bool valid() const {
        return view.version == GPUDYN_GGARRAY_VIEW_VERSION && view.element_size == sizeof(T);
    }

    // ---- layout arithmetic ----
    __host__ __device__ unsigned num_lfvectors() const { return view.num_lfvectors; }
    // Bucket holding local index i: b with first·(2^b − 1) <= i < first·(2^(b+1) − 1).
    __device__ unsigned bucket_of(unsigned long long i) const {
        return 63u - unsigned(__clzll((long long)((i >> view.log2_first_bucket) + 1ull)));
    }
    __host__ __device__ unsigned long long bucket_first(unsigned b) const {
        return ((1ull << b) - 1ull) << view.log2_first_bucket;
    }
    __host__ __device__ unsigned long long bucket_elements(unsigned b) const {
        return 1ull << (view.log2_first_bucket + b);
    }
    __device__ unsigned long long* sizes() const { return reinterpret_cast<unsigned long long*>(view.sizes); }
    __device__ const unsigned long long* ranges() const {
        return reinterpret_cast<const unsigned long long*>(view.ranges);
    }
    __device__ unsigned* state(unsigned l, unsigned b) const {
        return reinterpret_cast<unsigned*>(view.bucket_state) + (unsigned long long)l * GPUDYN_GGARRAY_MAX_BUCKETS + b;
    }
    __device__ unsigned long long* bucket_slot(unsigned l, unsigned b) const {
        return reinterpret_cast<unsigned long long*>(view.buckets) + (unsigned long long)l * GPUDYN_GGARRAY_MAX_BUCKETS + b;
    }
    // Read through L2 (volatile): another SM may have just published it.
    __device__ T* bucket(unsigned l, unsigned b) const {
        return reinterpret_cast<T*>(*static_cast<volatile unsigned long long*>(bucket_slot(l, b)));
    }

    // ---- sizes ----
    __device__ unsigned long long size() const {
        return *static_cast<volatile unsigned long long*>(sizes() + view.num_lfvectors);
    }
    __device__ unsigned long long lfvector_size(unsigned l) const {
        return *static_cast<volatile unsigned long long*>(sizes() + l);
    }

    __device__ static unsigned load_acquire(const unsigned* p) {
        unsigned v;
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
        return v;
    }

    // ---- bucket pool ----
    // True when bucket b's row (bucket b of every LFVector) is mapped in the pool.
    __device__ bool pool_has(unsigned b) const { return view.pool != 0 && b < view.pool_rows; }
    // Pool address of bucket b of LFVector l (rows are laid out bucket after bucket).
    __device__ T* pool_bucket(unsigned l, unsigned b) const {
        const unsigned long long elems =
            (((unsigned long long)view.num_lfvectors * ((1ull << b) - 1ull)) + ((unsigned long long)l << b))
            << view.log2_first_bucket;
        return reinterpret_cast<T*>(view.pool) + elems;
    }

    // ---- bucket allocation (paper Alg. 2), one thread ----
    // True once bucket b of LFVector l exists.  Exactly one thread allocates it
    // (pool slice or heap); others wait for it (the allocating thread depends on
    // nobody, so waiting cannot deadlock).  When the heap has no memory left (the
    // budget) the bucket returns to empty and the status word says so; nothing
    // stored is touched.
    __device__ bool ensure_bucket(unsigned l, unsigned b) const {
        using namespace ggarray_detail;
        if (b >= GPUDYN_GGARRAY_MAX_BUCKETS) {
            atomicOr(reinterpret_cast<unsigned*>(view.status), dev::kArrayCapacityExceeded);
            return false;
        }
        bool tried = false;
        for (;;) {
            // Acquire: the pointer, published before the ready state, is visible
            // after this load (a fence here would also wait for this thread's own
            // earlier element stores, once per tile).
            const unsigned s = load_acquire(state(l, b));
            if (s >= kReady) return true;
            if (s == kEmpty) {
                if (tried) return false;  // our own attempt failed: report, do not loop
                if (atomicCAS(state(l, b), kEmpty, kBusy) == kEmpty) {
                    tried = true;
                    const bool pooled = pool_has(b);
                    void* p = nullptr;
                    const unsigned long long bytes = bucket_elements(b) * sizeof(T);
                    if (pooled) {
                        p = pool_bucket(l, b);  // mapped by the host: nothing to allocate
                    } else {
                        p = ggarray_detail::heap_bucket(*reinterpret_cast<const heap_view*>(&view.heap), bytes);
                        if (p == nullptr) {
                            atomicOr(reinterpret_cast<unsigned*>(view.status), dev::kArrayAllocationFailed);
                            atomicExch(state(l, b), kEmpty);
                            return false;
                        }
                        atomicAdd(reinterpret_cast<unsigned long long*>(view.allocated_bytes), bytes);
                    }
                    *static_cast<volatile unsigned long long*>(bucket_slot(l, b)) = reinterpret_cast<unsigned long long>(p);
                    __threadfence();
                    atomicExch(state(l, b), pooled ? kReadyPool : kReady);
                    return true;
                }
                continue;
            }
            __nanosleep(kWaitNs);
        }
    }
    // Buckets covering local indices [lo, hi) of LFVector l.
    __device__ bool ensure_range(unsigned l, unsigned long long lo, unsigned long long hi) const {
        if (hi <= lo) return true;
        const unsigned last = bucket_of(hi - 1);
        for (unsigned b = bucket_of(lo); b <= last; ++b)
            if (!ensure_bucket(l, b)) return false;
        return true;
    }
    // Elements LFVector l can hold without allocating: its prefix of buckets
    // that are ready or whose pool row is mapped.
    __device__ unsigned long long lfvector_capacity(unsigned l) const {
        unsigned b = 0;
        while (b < GPUDYN_GGARRAY_MAX_BUCKETS &&
               (pool_has(b) || *static_cast<volatile unsigned*>(state(l, b)) >= ggarray_detail::kReady))
            ++b;
        return bucket_first(b);
    }

    // ---- insertion (paper Alg. 1), block-cooperative ----
    struct sink {
        const ggarray_ref* a;
        unsigned l;
        // One thread.  All-or-nothing: the buckets are made to exist first, then
        // the size moves with compare-and-swap (blocks may share an LFVector).
        __device__ bool reserve(unsigned long long n, unsigned long long* base) const {
            unsigned long long* sz = a->sizes() + l;
            unsigned long long old = a->lfvector_size(l);
            for (;;) {
                if (!a->ensure_range(l, old, old + n)) return false;
                const unsigned long long seen = atomicCAS(sz, old, old + n);
                if (seen == old) break;
                old = seen;
            }
            atomicAdd(a->sizes() + a->view.num_lfvectors, n);
            *base = old;
            return true;
        }
        // Same thread, after reserve: the pointers of the buckets holding
        // [base, base + n), once, into shared memory (word b = bucket b).  The
        // reservation's acquire loads of the bucket states made them visible.
        __device__ void open(sink_window& w, unsigned long long base, unsigned long long n) const {
            const unsigned last = a->bucket_of(base + n - 1);
            for (unsigned b = a->bucket_of(base); b <= last; ++b)
                w.word[b] = reinterpret_cast<unsigned long long>(a->bucket(l, b));
        }
        // Any thread: no global lookup, one shared-memory load per element.
        __device__ void store(const sink_window& w, unsigned long long i, const T& v) const {
            const unsigned b = a->bucket_of(i);
            reinterpret_cast<T*>(w.word[b])[i - a->bucket_first(b)] = v;
        }
        // The bucket holding i: local indices [*first, *end), its pointer from the window.
        __device__ T* extent(const sink_window& w, unsigned long long i, unsigned long long* first,
                             unsigned long long* end) const {
            const unsigned b = a->bucket_of(i);
            *first = a->bucket_first(b);
            *end = *first + a->bucket_elements(b);
            return reinterpret_cast<T*>(w.word[b]);
        }
    };
    static_assert(GPUDYN_GGARRAY_MAX_BUCKETS <= kSinkWindowWords, "the sink window holds one word per bucket");

    // Every thread of the block calls; the block appends to LFVector `l`.
    template <insert_algo Algo = insert_algo::warp_scan, unsigned MaxThreads = kMaxBlockThreads, int Items>
    __device__ bool push_back_to(unsigned l, push_storage<Algo, MaxThreads>& s, const bool (&flag)[Items],
                                 const T (&value)[Items]) const {
        if (!valid()) return false;
        sink k{this, l};
        return block_inserter<Algo, MaxThreads>::push(s, k, flag, value);
    }
    // The block's own LFVector: linear block index modulo num_lfvectors.
    template <insert_algo Algo = insert_algo::warp_scan, unsigned MaxThreads = kMaxBlockThreads, int Items>
    __device__ bool push_back(push_storage<Algo, MaxThreads>& s, const bool (&flag)[Items], const T (&value)[Items]) const {
        const unsigned l = unsigned(dev::block_linear_index() % view.num_lfvectors);
        return push_back_to<Algo, MaxThreads>(l, s, flag, value);
    }
    template <insert_algo Algo = insert_algo::warp_scan, unsigned MaxThreads = kMaxBlockThreads>
    __device__ bool push_back(push_storage<Algo, MaxThreads>& s, bool flag, const T& value) const {
        const bool f[1] = {flag};
        const T v[1] = {value};
        return push_back<Algo, MaxThreads>(s, f, v);
    }

    // A block's chunk of n candidates (src.flag(j), src.value(j), j < n; see
    // block_inserter::push_chunk) appended to LFVector l with ONE reservation
    // (buckets ensured, size CAS, global size added once) instead of one per
    // tile.  Every thread of the block calls with the same l, n and src.
    template <insert_algo Algo = insert_algo::warp_scan, unsigned MaxThreads = kMaxBlockThreads, int Items = 8,
              class Src>
    __device__ bool push_back_chunk_to(unsigned l, push_storage<Algo, MaxThreads>& s, unsigned long long n,
                                       const Src& src) const {
        if (!valid()) return false;
        sink k{this, l};
        return block_inserter<Algo, MaxThreads>::template push_chunk<Items, T>(s, k, n, src);
    }
    // Into the block's own LFVector (linear block index modulo num_lfvectors).
    template <insert_algo Algo = insert_algo::warp_scan, unsigned MaxThreads = kMaxBlockThreads, int Items = 8,
              class Src>
    __device__ bool push_back_chunk(push_storage<Algo, MaxThreads>& s, unsigned long long n, const Src& src) const {
        const unsigned l = unsigned(dev::block_linear_index() % view.num_lfvectors);
        return push_back_chunk_to<Algo, MaxThreads, Items>(l, s, n, src);
    }

    // Part p of a bulk insertion (push_back_parts): LFVector p mod num_lfvectors.
    template <insert_algo Algo = insert_algo::warp_scan, unsigned MaxThreads = kMaxBlockThreads, int Items = 8,
              class Src>
    __device__ bool push_back_part(unsigned long long p, push_storage<Algo, MaxThreads>& s, unsigned long long n,
                                   const Src& src) const {
        return push_back_chunk_to<Algo, MaxThreads, Items>(unsigned(p % view.num_lfvectors), s, n, src);
    }

    // ---- access by global index (valid as of get_view) ----
    // LFVector holding global index i: last l with ranges[l] <= i.  Host pushes
    // keep the LFVectors within one element of each other, so the proportional
    // guess i*L/total is usually right and costs two dependent loads; when it is
    // not (LFVectors unbalanced by user kernels), a binary search (log2 L loads).
    __device__ unsigned lfvector_of(unsigned long long i) const {
        const unsigned long long* r = ranges();
        const unsigned L = view.num_lfvectors;
        const unsigned long long total = r[L];
        if (i < total && total <= (~0ull >> 17)) {  // i * L fits 64 bits (L <= 65536)
            const unsigned g = unsigned(i * L / total);
            if (r[g] <= i && i < r[g + 1]) return g;
        }
        unsigned lo = 0, hi = L;  // answer in [lo, hi)
        while (hi - lo > 1) {
            const unsigned mid = (lo + hi) / 2;
            if (r[mid] <= i) lo = mid; else hi = mid;
        }
        return lo;
    }
    __device__ T& at(unsigned long long i) const {
        const unsigned l = lfvector_of(i);
        const unsigned long long local = i - ranges()[l];
        const unsigned b = bucket_of(local);
        return bucket(l, b)[local - bucket_first(b)];
    }
    __device__ unsigned long long ranged_size() const { return ranges()[view.num_lfvectors]; }

    // Calls f(T* p, n, first) for each contiguous piece p[0..n) holding global
    // elements [first, first + n) of [lo, hi), in order.  Per span: one bucket
    // lookup; callers loop over p with coalesced (vectorizable) accesses.
    template <class F>
    __device__ void for_each_span(unsigned long long lo, unsigned long long hi, F&& f) const {
        const unsigned long long* r = ranges();
        const unsigned long long end = r[view.num_lfvectors];
        if (hi > end) hi = end;
        if (lo >= hi) return;
        unsigned l = lfvector_of(lo);
        while (lo < hi) {
            const unsigned long long lfv_end = r[l + 1];
            if (lo >= lfv_end) { ++l; continue; }
            const unsigned long long local = lo - r[l];
            const unsigned b = bucket_of(local);
            const unsigned long long in_bucket = bucket_first(b) + bucket_elements(b) - local;
            unsigned long long n = hi - lo;
            if (n > lfv_end - lo) n = lfv_end - lo;
            if (n > in_bucket) n = in_bucket;
            f(bucket(l, b) + (local - bucket_first(b)), n, lo);
            lo += n;
        }
    }

    // Block-cooperative (one block): ranges = exclusive prefix sum of the sizes,
    // ranges[num_lfvectors] = total.  Each thread sums a contiguous chunk, then
    // the block scans the chunk sums.  `scratch` holds 33 values in shared memory.
    __device__ void compute_ranges(unsigned long long* scratch) const {
        const unsigned L = view.num_lfvectors;
        const unsigned n = dev::block_thread_count(), r = dev::block_thread_rank();
        const unsigned chunk = (L + n - 1) / n;
        const unsigned begin = r * chunk < L ? r * chunk : L;
        const unsigned stop = begin + chunk < L ? begin + chunk : L;
        unsigned long long mine = 0;
        for (unsigned i = begin; i < stop; ++i) mine += lfvector_size(i);
        const unsigned mask = dev::block_warp_mask();
        const unsigned long long incl = dev::contiguous_lanes_inclusive_sum(mask, mine);
        const unsigned warp = r / dev::kWarpLanes, nwarps = (n + dev::kWarpLanes - 1) / dev::kWarpLanes;
        if (dev::lane_index() == dev::highest_lane(mask)) scratch[warp] = incl;
        __syncthreads();
        if (r == 0) {
            unsigned long long run = 0;
            for (unsigned w = 0; w < nwarps; ++w) { const unsigned long long t = scratch[w]; scratch[w] = run; run += t; }
            scratch[32] = run;
        }
        __syncthreads();
        unsigned long long* out = reinterpret_cast<unsigned long long*>(view.ranges);
        unsigned long long run = scratch[warp] + incl - mine;
        for (unsigned i = begin; i < stop; ++i) { out[i] = run; run += lfvector_size(i); }
        if (r == 0) out[L] = scratch[32];
        __syncthreads();
    }
};

}  // namespace v0
}  // namespace gpudyn
