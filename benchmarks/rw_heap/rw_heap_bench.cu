// Benchmark of the random-walk page heap (Pham et al.): Fig. 11 (GETPAGE time,
// TAS, WAS vs threads and free fraction, with a queue baseline and CUDA device
// malloc), Fig. 13/14 (RW_malloc sizes vs CUDA malloc), Fig. 15 (utilisation
// until out of memory) and Fig. 17 (hash-join probe writing into pages: DO
// atomic counter, RW, RW-BM, CoRW, CUDA malloc), with CRW in its regime (crw),
// a queue that frees while allocating (churn), Fig. 13 on a pre-filled heap
// (fig13_free) and the join over page sizes (fig18).  Figs. 10 and 12 are
// derived by gpudyn/bench/rw_heap.py.
//
//   gpudyn_bench_rw_heap --out FILE.json [--quick] [--only SECTION]
//
// Device work is timed with CUDA events after a warm-up launch; the median of
// the repeats is reported.  Every heap is reset (not timed) before each repeat.
//
// More sections (--only NAME): fig13_free (RW_malloc on a heap pre-filled to
// 100/50/10/1 % free) and fig18 (the hash join of fig17 under page sizes 32 B
// .. 2 KiB).  The hash join of fig17/fig18 fills pages as the paper's Fig. 16
// (a new page only when the thread's page is full) and checks every output.
#include <gpudyn/experimental.h>
#include <gpudyn/experimental/page_queue.cuh>
#include <gpudyn/gpudyn.h>
#include <gpudyn/rw_heap.cuh>
#include <gpudyn/detail/rw_heap/kernels.cuh> // the library's get_pages kernel (CRW with per_thread > 1)

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../bench_check.hpp" // CUDA(), GD()

using gpudyn::kRwInvalidPage;
using gpudyn::rw_algorithm;
using gpudyn::rw_heap_ref;
using gpudyn::detail::counter_rng;

constexpr unsigned kBlock = 256; // 8 warps per block, as the library's bulk kernels
// CUDA's device malloc heap for the baselines: room for 1M x 8192 B plus slack.
constexpr size_t kCudaMallocHeap = 12ull << 30;

static unsigned blocks(unsigned long long n) { return unsigned((n + kBlock - 1) / kBlock); }

// ---- kernels -----------------------------------------------------------------
template <rw_algorithm Algo>
__global__ void getpage_kernel(gpudyn_rw_heap_view_t v, unsigned n, unsigned seed, unsigned* out) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned mask = __ballot_sync(0xffffffffu, tid < n);
    if (tid >= n) return;
    rw_heap_ref heap{v};
    counter_rng rng(seed, tid);
    unsigned page;
    if constexpr (Algo == rw_algorithm::corw) page = heap.get_page_corw(mask, rng);
    else page = heap.get_page<Algo>(rng);
    out[tid] = page;
}

// The paper's queue baseline (SV-A): gpudyn::experimental::page_queue (free page ids
// in an array, one atomic head); the position of each request gives its steps.
__global__ void queue_kernel(gpudyn::experimental::page_queue q, unsigned n, unsigned* out, unsigned* position) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    unsigned long long i;
    out[tid] = q.pop(i);
    position[tid] = unsigned(i);
}

// ---- kernels of the fair queue baseline and the churn workload (issue 14) ----
// A queue allocator whose free pages are not listed yet must list them before
// its first pop: every clear bit of the bitmap into `list`, one thread per word,
// warps reserving their share with one atomic on `count`.  Launch with whole
// warps (blocks of kBlock); lanes past word_count offer nothing.
__global__ void list_free_kernel(const unsigned* words, unsigned word_count, unsigned* list,
                                 unsigned long long* count) {
    const unsigned w = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = threadIdx.x % 32u;
    const unsigned free_bits = w < word_count ? ~words[w] : 0u; // bits past the pages are kept used
    const unsigned n = __popc(free_bits);
    unsigned incl = n;
    for (unsigned d = 1; d < 32; d <<= 1) {
        const unsigned t = __shfl_up_sync(0xffffffffu, incl, d);
        if (lane >= d) incl += t;
    }
    unsigned long long base = 0;
    if (lane == 31 && incl != 0) base = atomicAdd(count, (unsigned long long)incl);
    base = __shfl_sync(0xffffffffu, base, 31);
    unsigned long long at = base + incl - n;
    for (unsigned b = free_bits; b != 0; b &= b - 1) list[at++] = w * 32u + unsigned(__ffs(b) - 1);
}

// The queue's pops when the list was just built on the device: the count is
// read there (the host does not know it without a round trip).
__global__ void queue_listed_kernel(const unsigned* list, const unsigned long long* count, unsigned long long* head,
                                    unsigned n, unsigned* out, unsigned* position) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    const unsigned long long i = atomicAdd(head, 1ull);
    out[tid] = i < *count ? list[i] : kRwInvalidPage;
    position[tid] = unsigned(i);
}

// A queue allocator that takes pages back: a bounded multi-producer
// multi-consumer ring of page ids.  Each slot is one 64-bit word, (seq << 32) |
// page, so a page and the state saying it is there are read and written
// together: seq 2L = empty, waiting for the push of lap L; 2L + 1 = holding lap
// L's page.  A push (pop) takes a ticket from tail (head) and waits until its
// slot reaches its lap's state; a pop first reserves one of the `avail` pages
// published, so its ticket's push has been issued and its waits end.  The
// capacity must hold every page that can be in the ring at once (here: every
// page of the pool), so a push never waits for a pop that has not started.
constexpr unsigned kRingPopTries = 1u << 20; // reservations tried before a pop reports "empty"
struct page_ring {
    unsigned long long* slots;
    unsigned long long* head; // pop tickets
    unsigned long long* tail; // push tickets
    int* avail;               // pages pushed and not yet reserved by a pop
    unsigned log2_capacity;

    __device__ static unsigned long long load(const unsigned long long* p) {
        return *static_cast<const volatile unsigned long long*>(p);
    }
    __device__ void push(unsigned page) const {
        const unsigned long long t = atomicAdd(tail, 1ull);
        unsigned long long* s = slots + (t & ((1ull << log2_capacity) - 1));
        const unsigned long long lap = t >> log2_capacity;
        while ((load(s) >> 32) != 2 * lap) {} // the previous lap's pop is still taking it
        __threadfence();                      // the caller's writes to the page before another thread can own it
        *static_cast<volatile unsigned long long*>(s) = ((2 * lap + 1) << 32) | page;
        __threadfence(); // published before it is counted
        atomicAdd(avail, 1);
    }
    // A page id, or kRwInvalidPage when no page was available after
    // kRingPopTries reservations; `steps` counts the reservations and waits.
    __device__ unsigned pop(unsigned& steps) const {
        for (unsigned i = 0;; ++i) {
            ++steps;
            if (atomicSub(avail, 1) > 0) break;
            atomicAdd(avail, 1);
            if (i + 1 == kRingPopTries) return kRwInvalidPage;
        }
        const unsigned long long t = atomicAdd(head, 1ull);
        unsigned long long* s = slots + (t & ((1ull << log2_capacity) - 1));
        const unsigned long long lap = t >> log2_capacity;
        unsigned long long word;
        while (((word = load(s)) >> 32) != 2 * lap + 1) ++steps; // its push is under way
        *static_cast<volatile unsigned long long*>(s) = (2 * lap + 2) << 32;
        return unsigned(word);
    }
};
// Ring state from a free list: slots [0, count) hold lap 0's pages.
__global__ void ring_init_kernel(page_ring r, const unsigned* list, const unsigned long long* count) {
    const unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    const unsigned long long c = *count;
    if (i < (1ull << r.log2_capacity)) r.slots[i] = i < c ? (1ull << 32) | list[i] : 0ull;
    if (i == 0) {
        *r.head = 0;
        *r.tail = c;
        *r.avail = int(c);
    }
}

// Churn: every thread holds one page at a time for `rounds` rounds: it gets a
// page, writes (tid, round) into it, and in the next round checks that both are
// still there (another owner would have overwritten them), gives the page back
// and gets another.  counters: [0] gets that found no page, [1] pages whose
// words changed while owned, [2] frees refused, [3] step sum, [4] sum over
// warp-rounds of the warp's largest steps, [5] warp-rounds.
enum class churn_alloc {
    rw_bm,
    corw,
    queue
};
template <churn_alloc Alloc, bool Stats>
__global__ void churn_kernel(gpudyn_rw_heap_view_t v, page_ring ring, unsigned n, unsigned rounds, unsigned seed,
                             unsigned* out, unsigned long long* counters) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned warp_mask = __ballot_sync(0xffffffffu, tid < n);
    if (tid >= n) return;
    rw_heap_ref heap{v};
    counter_rng rng(seed, tid);
    unsigned page = kRwInvalidPage;
    for (unsigned r = 0; r < rounds; ++r) {
        if (page != kRwInvalidPage) {
            volatile unsigned* p = static_cast<volatile unsigned*>(heap.page_address(page));
            if (p[0] != tid || p[1] != r - 1) atomicAdd(counters + 1, 1ull);
            if constexpr (Alloc == churn_alloc::queue) {
                ring.push(page);
            } else {
                __threadfence(); // this thread's writes to the page land before the page is free
                if (!heap.free_page(page)) atomicAdd(counters + 2, 1ull);
            }
        }
        unsigned steps = 0;
        if constexpr (Alloc == churn_alloc::corw) page = heap.get_page_corw(warp_mask, rng, steps);
        else if constexpr (Alloc == churn_alloc::rw_bm) page = heap.get_page<rw_algorithm::rw_bm>(rng, steps);
        else page = ring.pop(steps);
        if (page == kRwInvalidPage) {
            atomicAdd(counters + 0, 1ull);
        } else {
            volatile unsigned* p = static_cast<volatile unsigned*>(heap.page_address(page));
            p[0] = tid;
            p[1] = r;
        }
        if constexpr (Stats) {
            // The library's collectives: sm_80's redux where there is one, shuffles on sm_75.
            const unsigned sum = gpudyn::detail::masked_sum(warp_mask, steps);
            const unsigned top = gpudyn::detail::masked_max(warp_mask, steps);
            if ((threadIdx.x % 32u) == unsigned(__ffs(warp_mask) - 1)) {
                atomicAdd(counters + 3, (unsigned long long)sum);
                atomicAdd(counters + 4, (unsigned long long)top);
                atomicAdd(counters + 5, 1ull);
            }
        }
    }
    out[tid] = page;
}
// Pages whose words are not (tid, last round) after a churn run, counted into *bad.
__global__ void churn_tag_check_kernel(gpudyn_rw_heap_view_t v, const unsigned* pages, unsigned n, unsigned last,
                                       unsigned long long* bad) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n || pages[tid] == kRwInvalidPage) return;
    rw_heap_ref heap{v};
    const unsigned* p = static_cast<const unsigned*>(heap.page_address(pages[tid]));
    if (p[0] != tid || p[1] != last) atomicAdd(bad, 1ull);
}

__global__ void cuda_malloc_kernel(const unsigned long long* sizes, unsigned long long fixed, unsigned n, void** out,
                                   bool free_now) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    void* p = malloc(sizes ? sizes[tid] : fixed);
    if (free_now) {
        free(p);
        p = nullptr;
    }
    out[tid] = p;
}
__global__ void cuda_free_kernel(void** ptrs, unsigned n) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < n && ptrs[tid]) free(ptrs[tid]);
}

__global__ void rw_malloc_kernel(gpudyn_rw_heap_view_t v, const unsigned long long* sizes, unsigned long long fixed,
                                 unsigned n, unsigned seed, void** out, bool free_now, unsigned* failures,
                                 unsigned long long* granted) {
    __shared__ gpudyn::rw_malloc_storage storage[kBlock / 32];
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned mask = __ballot_sync(0xffffffffu, tid < n);
    if (tid >= n) return;
    rw_heap_ref heap{v};
    counter_rng rng(seed, tid);
    const unsigned long long bytes = sizes ? sizes[tid] : fixed;
    void* p = heap.malloc(mask, bytes, storage[threadIdx.x / 32], rng);
    if (p == nullptr && bytes) atomicAdd(failures, 1u);
    if (p && granted) atomicAdd(granted, bytes);
    if (free_now) {
        heap.free(p);
        p = nullptr;
    }
    out[tid] = p;
}

// Hash join (Figs. 16-18): build a linear-probing table of the build relation
// R (a key occurs in 1..kJoinMaxDup consecutive rids), probe it with one tuple
// of S per thread.  As in the paper's probe (Fig. 16), a thread writes each
// match into its current page and asks for a new page only when that page is
// full, so its output is a list of pages.  Page layout: the address of the
// thread's previous page (u64, 0 for its first), then output tuples (probe
// rid, build rid) of two u32; the thread reports its newest page and how many
// tuples that page holds (the older pages are full).
constexpr unsigned kEmpty = 0xffffffffu;
constexpr unsigned kJoinHeaderBytes = 8;
constexpr unsigned kJoinTupleBytes = 8;
constexpr unsigned kJoinMaxDup = 7; // so one u32 per probe tuple can mark its matches in verification
__device__ __forceinline__ unsigned slot_of(unsigned key, unsigned mask) {
    return unsigned(gpudyn::detail::mix64(key)) & mask;
}
__global__ void build_kernel(const unsigned* keys, unsigned n, unsigned* table_keys, unsigned* table_vals,
                             unsigned mask) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    unsigned s = slot_of(keys[tid], mask);
    // Duplicate keys take the next empty slot: a probe walks the cluster to its end.
    while (atomicCAS(table_keys + s, kEmpty, keys[tid]) != kEmpty) s = (s + 1) & mask;
    table_vals[s] = tid;
}
// Next slot at or after s holding `key` (its build rid in b), or false at the
// cluster's end; s moves past the slot returned.
__device__ __forceinline__ bool next_match(unsigned key, unsigned& s, unsigned mask, const unsigned* table_keys,
                                           const unsigned* table_vals, unsigned& b) {
    for (;;) {
        const unsigned k = table_keys[s];
        if (k == kEmpty) return false;
        const unsigned at = s;
        s = (s + 1) & mask;
        if (k == key) {
            b = table_vals[at];
            return true;
        }
    }
}
// Where a probe's pages come from: DO (one global atomic page counter over the
// pool, never freed), the GETPAGE walks, CUDA device malloc.
enum class join_src {
    direct,
    rw,
    rw_bm,
    corw,
    cuda_malloc
};
constexpr int kJoinSources = 5;
const char* const kJoinNames[kJoinSources] = {"DO", "RW", "RW-BM", "CoRW", "cuda_malloc"};

template <join_src M>
__global__ void join_fill_kernel(const unsigned* probe_keys, unsigned n, const unsigned* table_keys,
                                 const unsigned* table_vals, unsigned mask, gpudyn_rw_heap_view_t v,
                                 unsigned long long page_bytes, unsigned long long* next_page, unsigned seed,
                                 unsigned long long* heads, unsigned* head_counts, unsigned* failures) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned warp_mask = __ballot_sync(0xffffffffu, tid < n);
    if (tid >= n) return;
    rw_heap_ref heap{v};
    counter_rng rng(seed, tid);
    const unsigned cap = unsigned((page_bytes - kJoinHeaderBytes) / kJoinTupleBytes);
    const unsigned key = probe_keys[tid];
    unsigned s = slot_of(key, mask);
    char* page = nullptr;
    unsigned used = cap; // no page yet counts as a full one
    bool live = true;    // false at the cluster's end or after a failed GETPAGE
    // Rounds over the warp's lanes together (a lane's j-th match in round j), so
    // the lanes whose page is full ask in the same round: CoRW serves them as one
    // request, the other sources lane by lane.
    for (;;) {
        unsigned b = 0;
        const bool has = live && next_match(key, s, mask, table_keys, table_vals, b);
        live = has;
        if (__ballot_sync(warp_mask, has) == 0) break;
        const bool need = has && used == cap;
        char* fresh = nullptr;
        if constexpr (M == join_src::corw) {
            const unsigned needy = __ballot_sync(warp_mask, need);
            if (need) {
                const unsigned p = heap.get_page_corw(needy, rng);
                if (p != kRwInvalidPage) fresh = static_cast<char*>(heap.page_address(p));
            }
        } else if (need) {
            if constexpr (M == join_src::direct) {
                const unsigned long long p = atomicAdd(next_page, 1ull);
                if (p < heap.page_count()) fresh = static_cast<char*>(heap.page_address(unsigned(p)));
            } else if constexpr (M == join_src::cuda_malloc) {
                fresh = static_cast<char*>(malloc(page_bytes));
            } else {
                const unsigned p = heap.get_page<M == join_src::rw ? rw_algorithm::rw : rw_algorithm::rw_bm>(rng);
                if (p != kRwInvalidPage) fresh = static_cast<char*>(heap.page_address(p));
            }
        }
        if (need && fresh == nullptr) {
            atomicAdd(failures, 1u); // verification then reports this thread's missing matches
            live = false;
        } else if (need) {
            *reinterpret_cast<unsigned long long*>(fresh) = reinterpret_cast<unsigned long long>(page);
            page = fresh;
            used = 0;
        }
        if (live) reinterpret_cast<uint2*>(page + kJoinHeaderBytes)[used++] = make_uint2(tid, b);
    }
    heads[tid] = reinterpret_cast<unsigned long long>(page);
    head_counts[tid] = page ? used : 0;
}

// Checks the join's output against the host's reference without copying the
// pool: thread t walks its pages; every tuple must be (t, b) with R[b] == S[t].
// The rids of one build key are consecutive, so rank[b] (b's place among them)
// marks each match in one word: a mark seen twice is a duplicate, marks absent
// at the end (expect[t] = how many build tuples share S[t]) are missing
// outputs.  A page outside [pool_lo, pool_hi) or off the page grid (heap
// pages; pool_hi == 0 for CUDA malloc) or a list longer than the matches
// allow is invalid.  tally: pages, tuples, invalid, duplicate, missing.
enum {
    kTallyPages,
    kTallyTuples,
    kTallyInvalid,
    kTallyDuplicate,
    kTallyMissing,
    kTallyCount
};
__global__ void join_verify_kernel(const unsigned* probe_keys, const unsigned* build_keys, const unsigned char* rank,
                                   const unsigned char* expect, unsigned n, unsigned nbuild,
                                   const unsigned long long* heads, const unsigned* head_counts,
                                   unsigned long long page_bytes, unsigned long long pool_lo,
                                   unsigned long long pool_hi, unsigned long long* tally) {
    __shared__ unsigned long long acc[kTallyCount];
    if (threadIdx.x < kTallyCount) acc[threadIdx.x] = 0;
    __syncthreads();
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < n) {
        const unsigned cap = unsigned((page_bytes - kJoinHeaderBytes) / kJoinTupleBytes);
        unsigned long long page = heads[tid];
        unsigned count = head_counts[tid], seen = 0, pages = 0, tuples = 0, invalid = 0, dup = 0;
        while (page != 0) {
            const bool off_pool =
                pool_hi != 0 && (page < pool_lo || page + page_bytes > pool_hi || (page - pool_lo) % page_bytes != 0);
            if (off_pool || count > cap || ++pages > kJoinMaxDup) {
                ++invalid;
                break;
            }
            const uint2* t = reinterpret_cast<const uint2*>(page + kJoinHeaderBytes);
            for (unsigned i = 0; i < count; ++i) {
                const uint2 x = t[i];
                ++tuples;
                if (x.x != tid || x.y >= nbuild || build_keys[x.y] != probe_keys[tid]) {
                    ++invalid;
                    continue;
                }
                const unsigned bit = 1u << rank[x.y];
                if (seen & bit) ++dup;
                seen |= bit;
            }
            page = *reinterpret_cast<const unsigned long long*>(page);
            count = cap;
        }
        const unsigned found = __popc(seen);
        const unsigned missing = expect[tid] > found ? expect[tid] - found : 0;
        if (pages) atomicAdd(&acc[kTallyPages], (unsigned long long)pages);
        if (tuples) atomicAdd(&acc[kTallyTuples], (unsigned long long)tuples);
        if (invalid) atomicAdd(&acc[kTallyInvalid], (unsigned long long)invalid);
        if (dup) atomicAdd(&acc[kTallyDuplicate], (unsigned long long)dup);
        if (missing) atomicAdd(&acc[kTallyMissing], (unsigned long long)missing);
    }
    __syncthreads();
    if (threadIdx.x < kTallyCount && acc[threadIdx.x]) atomicAdd(tally + threadIdx.x, acc[threadIdx.x]);
}
// Gives CUDA malloc's pages back (each thread its list).
__global__ void join_free_kernel(const unsigned long long* heads, unsigned n) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    for (unsigned long long page = heads[tid]; page != 0;) {
        const unsigned long long prev = *reinterpret_cast<const unsigned long long*>(page);
        free(reinterpret_cast<void*>(page));
        page = prev;
    }
}

// Fig. 13 with a free-percentage axis: marks whole bitmap words used, each with
// probability threshold / 2^32 from a hash of (seed, word), so the host can
// tell which words were pre-filled.
__host__ __device__ __forceinline__ bool word_occupied(unsigned long long w, unsigned seed,
                                                       unsigned long long threshold) {
    return (gpudyn::detail::mix64(w ^ (static_cast<unsigned long long>(seed) << 40)) & 0xffffffffull) < threshold;
}
__global__ void occupy_words_kernel(unsigned* words, unsigned word_count, unsigned seed, unsigned long long threshold) {
    const unsigned w = blockIdx.x * blockDim.x + threadIdx.x;
    if (w < word_count && word_occupied(w, seed, threshold)) words[w] = 0xffffffffu;
}

// ---- timing ------------------------------------------------------------------
struct timer {
    cudaEvent_t a, b;
    timer() {
        CUDA(cudaEventCreate(&a));
        CUDA(cudaEventCreate(&b));
    }
    template <class F>
    float ms(F&& launch) {
        CUDA(cudaEventRecord(a));
        launch();
        CUDA(cudaGetLastError());
        CUDA(cudaEventRecord(b));
        CUDA(cudaEventSynchronize(b));
        float t = 0;
        CUDA(cudaEventElapsedTime(&t, a, b));
        return t;
    }
};
static double median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : (v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
}

static std::vector<std::string> rows;
static void row(const std::string& s) { rows.push_back(s); }
static std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
static std::string fmt(const char* f, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

static gpudyn_rw_heap_t make_heap(unsigned long long pages, unsigned long long page_size) {
    gpudyn_rw_heap_options_t o;
    GD(gpudyn_rw_heap_options_init(&o));
    o.page_count = pages;
    o.page_size = page_size;
    gpudyn_rw_heap_t h;
    GD(gpudyn_rw_heap_create(&h, &o, nullptr));
    return h;
}

// ---- hash join driver (Figs. 17, 18) -----------------------------------------
// One join input on the device.  R: n rids; key 2j occurs 1 + mix64(j) %
// kJoinMaxDup times (mean 4), at consecutive rids.  S: n keys; by one hash bit
// a key of R or an odd key that no build tuple has, so half the threads output
// nothing and the others 1..7 tuples: output whose size only the probe finds
// out, the case a dynamic output buffer is for.
struct join_input {
    unsigned n = 0;                 // |R| = |S| = probe threads
    unsigned cap = 0;               // table slots: a power of two >= 2n (load <= 1/2)
    unsigned long long matches = 0; // output tuples of the exact join
    unsigned *build = nullptr, *probe = nullptr, *table_keys = nullptr, *table_vals = nullptr;
    unsigned char *rank = nullptr, *expect = nullptr;
    float build_ms = 0; // median time of the build kernel (clearing the table is not timed)
};
static join_input make_join_input(unsigned n, timer& tm, int reps) {
    join_input in;
    in.n = n;
    in.cap = 1;
    while (in.cap < 2 * n) in.cap <<= 1;
    std::vector<unsigned> build, probe(n), group_size;
    std::vector<unsigned char> rank, expect(n);
    build.reserve(n);
    rank.reserve(n);
    for (unsigned j = 0; build.size() < n; ++j) {
        const unsigned m =
            std::min<unsigned>(1 + unsigned(gpudyn::detail::mix64(j) % kJoinMaxDup), n - unsigned(build.size()));
        for (unsigned k = 0; k < m; ++k) {
            build.push_back(2 * j);
            rank.push_back((unsigned char)k);
        }
        group_size.push_back(m);
    }
    const unsigned keys = unsigned(group_size.size());
    for (unsigned p = 0; p < n; ++p) {
        const unsigned long long h = gpudyn::detail::mix64(p + 0x5eedull);
        const unsigned j = unsigned((h >> 1) % keys);
        const bool hit = h & 1;
        probe[p] = 2 * j + (hit ? 0 : 1);
        expect[p] = (unsigned char)(hit ? group_size[j] : 0);
        in.matches += expect[p];
    }
    CUDA(cudaMalloc(&in.build, n * sizeof(unsigned)));
    CUDA(cudaMalloc(&in.probe, n * sizeof(unsigned)));
    CUDA(cudaMalloc(&in.rank, n));
    CUDA(cudaMalloc(&in.expect, n));
    CUDA(cudaMalloc(&in.table_keys, in.cap * sizeof(unsigned)));
    CUDA(cudaMalloc(&in.table_vals, in.cap * sizeof(unsigned)));
    CUDA(cudaMemcpy(in.build, build.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(in.probe, probe.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(in.rank, rank.data(), n, cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(in.expect, expect.data(), n, cudaMemcpyHostToDevice));
    std::vector<float> t;
    for (int r = 0; r <= reps; ++r) { // r == 0: warm-up; the last build stays
        CUDA(cudaMemset(in.table_keys, 0xff, in.cap * sizeof(unsigned)));
        float ms =
            tm.ms([&] { build_kernel<<<blocks(n), kBlock>>>(in.build, n, in.table_keys, in.table_vals, in.cap - 1); });
        if (r) t.push_back(ms);
    }
    in.build_ms = float(median(t));
    return in;
}
static void free_join_input(join_input& in) {
    CUDA(cudaFree(in.build));
    CUDA(cudaFree(in.probe));
    CUDA(cudaFree(in.rank));
    CUDA(cudaFree(in.expect));
    CUDA(cudaFree(in.table_keys));
    CUDA(cudaFree(in.table_vals));
    in = join_input{};
}
// Per-thread results of a probe, and the counters of a run.
struct join_scratch {
    unsigned long long* heads = nullptr; // newest page of each thread
    unsigned* counts = nullptr;          // tuples in it
    unsigned* fail = nullptr;            // GETPAGE failures
    unsigned long long* tally = nullptr; // join_verify_kernel's counters
    unsigned long long* next = nullptr;  // DO's page counter
};
static join_scratch make_join_scratch(unsigned nmax) {
    join_scratch o;
    CUDA(cudaMalloc(&o.heads, nmax * sizeof(unsigned long long)));
    CUDA(cudaMalloc(&o.counts, nmax * sizeof(unsigned)));
    CUDA(cudaMalloc(&o.fail, sizeof(unsigned)));
    CUDA(cudaMalloc(&o.tally, kTallyCount * sizeof(unsigned long long)));
    CUDA(cudaMalloc(&o.next, sizeof(unsigned long long)));
    return o;
}
static void free_join_scratch(join_scratch& o) {
    CUDA(cudaFree(o.heads));
    CUDA(cudaFree(o.counts));
    CUDA(cudaFree(o.fail));
    CUDA(cudaFree(o.tally));
    CUDA(cudaFree(o.next));
    o = join_scratch{};
}
template <join_src M>
static void launch_join_as(const join_input& in, gpudyn_rw_heap_view_t v, const join_scratch& o, unsigned seed) {
    join_fill_kernel<M><<<blocks(in.n), kBlock>>>(in.probe, in.n, in.table_keys, in.table_vals, in.cap - 1, v,
                                                  v.page_size, o.next, seed, o.heads, o.counts, o.fail);
}
static void launch_join(int m, const join_input& in, gpudyn_rw_heap_view_t v, const join_scratch& o, unsigned seed) {
    switch (join_src(m)) {
        case join_src::direct: launch_join_as<join_src::direct>(in, v, o, seed); break;
        case join_src::rw: launch_join_as<join_src::rw>(in, v, o, seed); break;
        case join_src::rw_bm: launch_join_as<join_src::rw_bm>(in, v, o, seed); break;
        case join_src::corw: launch_join_as<join_src::corw>(in, v, o, seed); break;
        case join_src::cuda_malloc: launch_join_as<join_src::cuda_malloc>(in, v, o, seed); break;
    }
}
// Times the probe with page source m on heap h (CUDA malloc takes pages of the
// heap's page size from its own heap): the median of `reps` repeats after a
// warm-up, the heap reset (not timed) before each.  Every repeat's output is
// checked (join_verify_kernel) and the pages the source gave out are compared
// with the pages in the lists (pages_leaked).  Returns the row's fields.
static std::string measure_join(int m, gpudyn_rw_heap_t h, const join_input& in, const join_scratch& o, timer& tm,
                                int reps) {
    const join_src M = join_src(m);
    gpudyn_rw_heap_view_t v;
    GD(gpudyn_rw_heap_get_view(h, &v));
    const unsigned long long T = v.page_count, S = v.page_size;
    std::vector<float> t;
    unsigned long long failed = 0, invalid = 0, dup = 0, missing = 0, wrong_count = 0;
    unsigned long long pages = 0, tuples = 0, taken = 0;
    long long leaked = 0;
    for (int r = 0; r <= reps; ++r) {
        GD(gpudyn_rw_heap_reset(h, nullptr));
        CUDA(cudaMemset(o.next, 0, sizeof(unsigned long long)));
        CUDA(cudaMemset(o.fail, 0, sizeof(unsigned)));
        float ms = tm.ms([&] { launch_join(m, in, v, o, 1000u * unsigned(m) + unsigned(r)); });
        if (r) t.push_back(ms);
        CUDA(cudaMemset(o.tally, 0, kTallyCount * sizeof(unsigned long long)));
        const unsigned long long pool_hi = M == join_src::cuda_malloc ? 0 : v.pool + T * S;
        join_verify_kernel<<<blocks(in.n), kBlock>>>(in.probe, in.build, in.rank, in.expect, in.n, in.n, o.heads,
                                                     o.counts, S, v.pool, pool_hi, o.tally);
        CUDA(cudaGetLastError());
        unsigned long long tally[kTallyCount], next = 0;
        unsigned fails = 0;
        CUDA(cudaMemcpy(tally, o.tally, sizeof tally, cudaMemcpyDeviceToHost));
        CUDA(cudaMemcpy(&fails, o.fail, sizeof fails, cudaMemcpyDeviceToHost));
        CUDA(cudaMemcpy(&next, o.next, sizeof next, cudaMemcpyDeviceToHost));
        failed += fails;
        invalid += tally[kTallyInvalid];
        dup += tally[kTallyDuplicate];
        missing += tally[kTallyMissing];
        if (tally[kTallyTuples] != in.matches) ++wrong_count;
        pages = tally[kTallyPages];
        tuples = tally[kTallyTuples];
        if (M == join_src::direct) {
            taken = std::min(next, T);
        } else if (M == join_src::cuda_malloc) {
            taken = pages; // nothing else counts CUDA malloc's pages
            join_free_kernel<<<blocks(in.n), kBlock>>>(o.heads, in.n);
            CUDA(cudaGetLastError());
            CUDA(cudaDeviceSynchronize());
        } else {
            uint64_t free_pages = 0;
            GD(gpudyn_rw_heap_free_page_count(h, &free_pages, nullptr));
            taken = T - free_pages;
        }
        leaked = std::max(leaked, (long long)taken - (long long)pages);
    }
    const bool verified = failed == 0 && invalid == 0 && dup == 0 && missing == 0 && wrong_count == 0 && leaked == 0;
    const double ms = median(t);
    return fmt(
        "\"allocator\":\"%s\",\"tuples\":%u,\"page_size\":%llu,\"pages_total\":%llu,\"ms\":%.6f,"
        "\"build_ms\":%.6f,\"total_ms\":%.6f,\"matches\":%llu,\"output_tuples\":%llu,\"pages_used\":%llu,"
        "\"bytes_held\":%llu,\"output_bytes\":%llu,\"pool_bytes\":%llu,\"failed\":%llu,\"invalid\":%llu,"
        "\"duplicate\":%llu,\"missing\":%llu,\"wrong_count_runs\":%llu,\"pages_leaked\":%lld,\"verified\":%s",
        kJoinNames[m], in.n, S, T, ms, double(in.build_ms), ms + in.build_ms, in.matches, tuples, taken, taken * S,
        in.matches * kJoinTupleBytes, M == join_src::cuda_malloc ? (unsigned long long)kCudaMallocHeap : T * S, failed,
        invalid, dup, missing, wrong_count, leaked, verified ? "true" : "false");
}

// ---- RW_malloc on a pre-filled heap (Fig. 13, free-percentage axis) ---------
// Pages RW_malloc takes for these sizes: runs of ceil(size / page) pages for
// sizes >= a page, and per warp of 32 one run for the 16-byte-rounded sum of
// the smaller ones (rw_heap.cuh, SIV-C).
static unsigned long long malloc_pages_needed(const std::vector<unsigned long long>& sizes, unsigned long long S) {
    unsigned long long pages = 0;
    for (size_t w = 0; w < sizes.size(); w += 32) {
        unsigned long long small = 0;
        for (size_t i = w; i < std::min(sizes.size(), w + 32); ++i) {
            const unsigned long long b = sizes[i];
            if (b >= S) pages += (b + S - 1) / S;
            else small += (b + gpudyn::kRwMallocAlign - 1) / gpudyn::kRwMallocAlign * gpudyn::kRwMallocAlign;
        }
        pages += (small + S - 1) / S;
    }
    return pages;
}

// ---- shared by the GETPAGE sections: bytes held, output checks ---------------
// Device bytes a heap holds, from its view: the sizes lib/rw_heap.cu allocates
// (no ABI call reports them).  meta = everything but the pool: the bitmap that
// GETPAGE reads, plus the LockMap, RW_malloc's page records and live-start
// bits, the counters and the scratch counters.
struct heap_bytes {
    unsigned long long pool = 0, bitmap = 0, meta = 0;
    std::string json() const {
        return fmt(",\"bytes_held\":%llu,\"pool_bytes\":%llu,\"bitmap_bytes\":%llu,\"meta_bytes\":%llu", pool + meta,
                   pool, bitmap, meta);
    }
};
static heap_bytes bytes_of(const gpudyn_rw_heap_view_t& v) {
    heap_bytes b;
    b.pool = (unsigned long long)v.page_count * v.page_size;
    b.bitmap = (unsigned long long)v.word_count * (v.word_bits / 8);
    const unsigned long long lockmap = v.lockmap ? (v.word_count + 31ull) / 32 * 4 : 0;
    const unsigned long long records = (unsigned long long)v.page_count * 4;
    const unsigned long long live = ((v.page_size / 16) * v.page_count + 31) / 32 * 4;
    const unsigned long long counters = 4 * 8 + gpudyn::rw_heap_detail::kScratchCount * 8;
    b.meta = b.bitmap + lockmap + records + live + counters;
    return b;
}
// A queue allocator over the same pool: the pool, plus its list (slot_bytes per
// page; a queue that takes pages back must have room for every page id) and
// its counters.  It needs no bitmap (bitmap = 0).
static heap_bytes queue_bytes(const gpudyn_rw_heap_view_t& v, unsigned long long slot_bytes,
                              unsigned long long counter_bytes) {
    heap_bytes b;
    b.pool = (unsigned long long)v.page_count * v.page_size;
    b.meta = (unsigned long long)v.page_count * slot_bytes + counter_bytes;
    return b;
}

static std::vector<unsigned> read_bitmap(const gpudyn_rw_heap_view_t& v) {
    if (v.word_bits != 32) {
        fprintf(stderr, "rw_heap_bench: the output checks read 32-bit bitmap words, the heap has %u\n", v.word_bits);
        exit(1);
    }
    std::vector<unsigned> w(v.word_count);
    CUDA(cudaMemcpy(w.data(), reinterpret_cast<const void*>(v.bitmap), w.size() * sizeof(unsigned),
                    cudaMemcpyDeviceToHost));
    return w;
}
static std::vector<unsigned> read_pages(const unsigned* d, size_t n) {
    std::vector<unsigned> p(n);
    CUDA(cudaMemcpy(p.data(), d, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    return p;
}
static bool page_used(const std::vector<unsigned>& bm, unsigned p) { return (bm[p / 32] >> (p % 32)) & 1u; }
static unsigned long long count_free(const std::vector<unsigned>& bm) {
    unsigned long long n = 0;
    for (unsigned w : bm) n += unsigned(__builtin_popcount(~w));
    return n;
}
// Runs of consecutive free pages (the paper's clusters, SIV-D1).
static unsigned long long count_clusters(const std::vector<unsigned>& bm, unsigned long long T) {
    unsigned long long m = 0;
    bool prev_free = false;
    for (unsigned long long p = 0; p < T; ++p) {
        const bool f = !page_used(bm, unsigned(p));
        m += f && !prev_free;
        prev_free = f;
    }
    return m;
}

// What is wrong with the pages handed out ("" when nothing): ids out of range,
// a page handed out twice, a page that was used before the run, or (with
// `after`) one whose bit is not set after it.  kRwInvalidPage entries (requests
// that found no page) are counted into *none, not judged here.
static std::string check_pages(const std::vector<unsigned>& pages, unsigned long long T,
                               const std::vector<unsigned>& before, const std::vector<unsigned>* after,
                               unsigned long long* none) {
    std::vector<unsigned long long> seen((T + 63) / 64, 0ull);
    unsigned long long bad_id = 0, twice = 0, was_used = 0, unmarked = 0, missing = 0;
    for (unsigned p : pages) {
        if (p == kRwInvalidPage) {
            ++missing;
            continue;
        }
        if (p >= T) {
            ++bad_id;
            continue;
        }
        const unsigned long long bit = 1ull << (p % 64);
        twice += (seen[p / 64] & bit) != 0;
        seen[p / 64] |= bit;
        was_used += page_used(before, p);
        if (after) unmarked += !page_used(*after, p);
    }
    if (none) *none = missing;
    std::string msg;
    if (bad_id) msg += fmt("%llu ids out of range; ", bad_id);
    if (twice) msg += fmt("%llu pages handed out twice; ", twice);
    if (was_used) msg += fmt("%llu pages were used before; ", was_used);
    if (unmarked) msg += fmt("%llu pages not marked used; ", unmarked);
    return msg;
}
// The row's verdict: "verified" true, or false with what was wrong (also on stderr).
static std::string verdict(const std::string& problem, const std::string& what) {
    if (problem.empty()) return ",\"verified\":true";
    fprintf(stderr, "check failed: %s: %s\n", what.c_str(), problem.c_str());
    return fmt(",\"verified\":false,\"check\":\"%s\"", problem.c_str());
}

// The queue's steps (SV-A): a request's position in the head's order, plus one.
static void queue_steps(const unsigned* d_pos, unsigned N, double& tas, double& was) {
    std::vector<unsigned> pos = read_pages(d_pos, N);
    tas = was = 0;
    for (unsigned i = 0; i < N; i += 32) {
        unsigned top = 0;
        for (unsigned j = i; j < std::min(N, i + 32); ++j) {
            tas += pos[j] + 1.0;
            top = std::max(top, pos[j] + 1);
        }
        was += top;
    }
    tas /= N;
    was /= (N + 31) / 32;
}

// Step statistics of a get_pages call that may run out of pages (near N = A):
// the statistics come back with the failures counted instead of ending the run.
static gpudyn_exp_rw_heap_stats_t page_stats(gpudyn_rw_heap_t h, unsigned* pages, unsigned long long n,
                                             gpudyn_rw_heap_algorithm_t algo, unsigned per_thread,
                                             unsigned long long seed) {
    gpudyn_exp_rw_heap_stats_t st{};
    st.struct_size = sizeof st;
    const gpudyn_status_t s = gpudyn_exp_rw_heap_get_pages(h, pages, n, algo, per_thread, seed, &st, nullptr);
    if (s != GPUDYN_SUCCESS && s != GPUDYN_ERROR_OUT_OF_MEMORY) {
        fprintf(stderr, "gpudyn_exp_rw_heap_get_pages: %s\n", gpudyn_last_error_message());
        exit(1);
    }
    return st;
}

// What the sections after Fig. 11 get from main.
struct section_env {
    bool quick;
    int reps;
    timer* tm;
    std::function<void(const std::string&)> progress;
    size_t* total; // progress steps; a section adds its own
};

// ---- CRW in its regime (Alg. 5, Eq. 9, Fig. 10) -----------------------------
// Each of N threads asks for R pages in turn (the library's get_pages kernel
// with per_thread = R, the same pages for every algorithm): CRW first tries the
// page after its last one, RW-BM and CoRW walk for every page.  The pool's free
// pages lie in clusters of c consecutive pages (M = A / c clusters; c = 100, 2
// and 1 are Fig. 10's M = 0.01A, 0.5A and A), or where gpudyn_exp_rw_heap_occupy
// puts them ("random").  Rows "crw": time, TAS, WAS, and the fraction of a
// thread's pages that follow its previous one.
//   --only crw
constexpr unsigned long long kCrwPool = 1ull << 20;        // the paper's T = 1M pages (SV-A)
constexpr unsigned long long kCrwMaxRequests = 1ull << 18; // pages per run: A/2, at most this
static std::vector<unsigned> cluster_bitmap(unsigned long long T, double f, unsigned c, unsigned long long seed) {
    std::vector<unsigned> bm((T + 31) / 32, 0xffffffffu);
    const unsigned long long M = std::max(1ull, (unsigned long long)std::llround(f * double(T) / c));
    // One cluster at a random place in each segment of seg pages, never in its
    // last page, so that no two clusters touch: exactly M clusters of c pages.
    const unsigned long long seg = T / M;
    const unsigned long long places = seg > c ? seg - c : 1;
    for (unsigned long long i = 0; i < M; ++i) {
        const unsigned long long start = i * seg + gpudyn::detail::mix64(seed * 0x9E3779B97F4A7C15ull + i) % places;
        for (unsigned long long p = start; p < start + c; ++p) bm[p / 32] &= ~(1u << (p % 32));
    }
    return bm;
}
static void crw_section(const section_env& env) {
    const unsigned long long T = kCrwPool;
    const std::vector<double> frees =
        env.quick ? std::vector<double>{0.5, 0.01} : std::vector<double>{0.5, 0.1, 0.01, 0.005};
    const std::vector<unsigned> layouts = {100, 2, 1, 0}; // cluster pages; 0: occupy's random pages
    const std::vector<unsigned> per_threads = env.quick ? std::vector<unsigned>{8} : std::vector<unsigned>{8, 32};
    *env.total += frees.size() * layouts.size() * per_threads.size();
    gpudyn_rw_heap_t h = make_heap(T, 256);
    gpudyn_rw_heap_view_t v;
    GD(gpudyn_rw_heap_get_view(h, &v));
    const heap_bytes hb = bytes_of(v);
    unsigned* d_pages;
    unsigned long long* d_scratch;
    CUDA(cudaMalloc(&d_pages, T * sizeof(unsigned)));
    CUDA(cudaMalloc(&d_scratch, gpudyn::rw_heap_detail::kScratchCount * sizeof(unsigned long long)));
    CUDA(cudaMemset(d_scratch, 0, gpudyn::rw_heap_detail::kScratchCount * sizeof(unsigned long long)));
    const char* names[] = {"crw", "rw_bm", "corw"};
    const gpudyn_rw_heap_algorithm_t ids[] = {GPUDYN_RW_HEAP_CRW, GPUDYN_RW_HEAP_RW_BM, GPUDYN_RW_HEAP_CORW};
    for (double f : frees)
        for (unsigned c : layouts) {
            std::vector<unsigned> before;
            if (c == 0) {
                GD(gpudyn_exp_rw_heap_occupy(h, 1.0 - f, 1, nullptr));
                before = read_bitmap(v);
            } else {
                before = cluster_bitmap(T, f, c, 1);
            }
            auto restore = [&] { // the same layout before every run (not timed)
                if (c == 0) {
                    GD(gpudyn_exp_rw_heap_occupy(h, 1.0 - f, 1, nullptr));
                } else {
                    GD(gpudyn_rw_heap_reset(h, nullptr));
                    CUDA(cudaMemcpy(reinterpret_cast<void*>(v.bitmap), before.data(), before.size() * sizeof(unsigned),
                                    cudaMemcpyHostToDevice));
                }
            };
            const unsigned long long A = count_free(before), M = count_clusters(before, T);
            for (unsigned R : per_threads) {
                env.progress(fmt("crw free=%g clusters=%u R=%u", f, c, R));
                const unsigned long long Q = std::min(A / 2, kCrwMaxRequests) / R * R;
                const unsigned N = unsigned(Q / R);
                if (N == 0) continue;
                for (int a = 0; a < 3; ++a) {
                    std::vector<float> t;
                    for (int r = 0; r <= env.reps; ++r) { // r == 0: warm-up
                        restore();
                        float ms = env.tm->ms([&] {
                            using gpudyn::rw_heap_detail::get_pages_kernel;
                            if (a == 0)
                                get_pages_kernel<rw_algorithm::crw, false>
                                    <<<blocks(N), kBlock>>>(v, d_pages, Q, R, r, d_scratch);
                            if (a == 1)
                                get_pages_kernel<rw_algorithm::rw_bm, false>
                                    <<<blocks(N), kBlock>>>(v, d_pages, Q, R, r, d_scratch);
                            if (a == 2)
                                get_pages_kernel<rw_algorithm::corw, false>
                                    <<<blocks(N), kBlock>>>(v, d_pages, Q, R, r, d_scratch);
                        });
                        if (r) t.push_back(ms);
                    }
                    // The last run's pages: distinct, free before, used now; and how
                    // many follow the same thread's previous page.
                    const std::vector<unsigned> pages = read_pages(d_pages, Q), after = read_bitmap(v);
                    unsigned long long none = 0, adjacent = 0;
                    std::string problem = check_pages(pages, T, before, &after, &none);
                    if (none) problem += fmt("%llu requests found no page; ", none);
                    for (unsigned long long i = 0; i < Q; ++i)
                        adjacent += i % R != 0 && pages[i] != kRwInvalidPage && pages[i] == pages[i - 1] + 1;
                    restore();
                    const gpudyn_exp_rw_heap_stats_t st = page_stats(h, d_pages, Q, ids[a], R, 77);
                    row(fmt("{\"figure\":\"crw\",\"allocator\":\"%s\",\"layout\":\"%s\",\"cluster_pages\":%u,\"T\":%llu,"
                            "\"A\":%llu,\"clusters\":%llu,\"free\":%g,\"per_thread\":%u,\"N\":%u,\"requests\":%llu,"
                            "\"ms\":%.6f,\"tas\":%.6f,\"was\":%.6f,\"failed\":%llu,\"adjacent_fraction\":%.6f",
                            names[a], c ? "clusters" : "random", c, T, A, M, f, R, N, Q, median(t), st.tas, st.was,
                            (unsigned long long)st.failed, Q > N ? double(adjacent) / double(Q - N) : 0.0) +
                        hb.json() + verdict(problem, fmt("crw %s free=%g clusters=%u R=%u", names[a], f, c, R)) + "}");
                }
            }
        }
    GD(gpudyn_rw_heap_destroy(h));
    cudaFree(d_pages);
    cudaFree(d_scratch);
}

// ---- churn: allocation while freeing (queue vs RW-BM vs CoRW) ---------------
// N threads each hold one page at a time for kChurnRounds rounds in one kernel
// (see churn_kernel), on a pool pre-filled as in Fig. 11.  The queue is the
// ring above (pushes and pops, correct under contention), its free list built
// from the heap's bitmap before the timing; RW-BM and CoRW use the heap's
// free_page and GETPAGE.  Rows "churn": time, time per round, TAS/WAS of the
// random walks (the queue's steps are not the paper's), bytes held.
//   --only churn
constexpr unsigned kChurnRounds = 8;
static void churn_section(const section_env& env) {
    const std::vector<unsigned long long> pools = env.quick ? std::vector<unsigned long long>{1ull << 20}
                                                            : std::vector<unsigned long long>{1ull << 20, 1ull << 24};
    const std::vector<double> frees = env.quick ? std::vector<double>{0.5, 0.01} : std::vector<double>{0.5, 0.1, 0.01};
    const std::vector<unsigned> threads =
        env.quick ? std::vector<unsigned>{4096, 65536} : std::vector<unsigned>{4096, 65536, 1048576};
    *env.total += pools.size() * frees.size() * threads.size();
    const char* names[] = {"queue", "rw_bm", "corw"};
    for (unsigned long long T : pools) {
        unsigned log2_t = 0;
        while ((1ull << log2_t) < T) ++log2_t; // the ring's capacity: T, a power of two here
        gpudyn_rw_heap_t h = make_heap(T, 256);
        gpudyn_rw_heap_view_t v;
        GD(gpudyn_rw_heap_get_view(h, &v));
        page_ring ring{};
        ring.log2_capacity = log2_t;
        unsigned *d_list, *d_out;
        unsigned long long *d_count, *d_counters, *d_bad;
        CUDA(cudaMalloc(&ring.slots, (1ull << log2_t) * sizeof(unsigned long long)));
        CUDA(cudaMalloc(&ring.head, sizeof(unsigned long long)));
        CUDA(cudaMalloc(&ring.tail, sizeof(unsigned long long)));
        CUDA(cudaMalloc(&ring.avail, sizeof(int)));
        CUDA(cudaMalloc(&d_list, T * sizeof(unsigned)));
        CUDA(cudaMalloc(&d_out, threads.back() * sizeof(unsigned)));
        CUDA(cudaMalloc(&d_count, sizeof(unsigned long long)));
        CUDA(cudaMalloc(&d_counters, 6 * sizeof(unsigned long long)));
        CUDA(cudaMalloc(&d_bad, sizeof(unsigned long long)));
        const heap_bytes hb = bytes_of(v), qb = queue_bytes(v, sizeof(unsigned long long), 3 * 8);
        for (double f : frees) {
            GD(gpudyn_exp_rw_heap_occupy(h, 1.0 - f, 1, nullptr));
            const std::vector<unsigned> before = read_bitmap(v);
            const unsigned long long A = count_free(before);
            for (unsigned N : threads) {
                env.progress(fmt("churn T=%llu free=%g N=%u", T, f, N));
                if (N > A / 2) continue; // as Fig. 11: every walk stays bounded
                for (int a = 0; a < 3; ++a) {
                    auto prepare = [&] { // the pool as before the first run, counters cleared (not timed)
                        GD(gpudyn_exp_rw_heap_occupy(h, 1.0 - f, 1, nullptr));
                        if (a == 0) {
                            CUDA(cudaMemset(d_count, 0, sizeof(unsigned long long)));
                            list_free_kernel<<<blocks(v.word_count), kBlock>>>(
                                reinterpret_cast<const unsigned*>(v.bitmap), v.word_count, d_list, d_count);
                            ring_init_kernel<<<unsigned((T + kBlock - 1) / kBlock), kBlock>>>(ring, d_list, d_count);
                            CUDA(cudaGetLastError());
                        }
                        CUDA(cudaMemset(d_counters, 0, 6 * sizeof(unsigned long long)));
                    };
                    auto launch = [&](bool stats) {
                        const unsigned b = blocks(N);
                        if (a == 0 && !stats)
                            churn_kernel<churn_alloc::queue, false>
                                <<<b, kBlock>>>(v, ring, N, kChurnRounds, 5, d_out, d_counters);
                        if (a == 0 && stats)
                            churn_kernel<churn_alloc::queue, true>
                                <<<b, kBlock>>>(v, ring, N, kChurnRounds, 5, d_out, d_counters);
                        if (a == 1 && !stats)
                            churn_kernel<churn_alloc::rw_bm, false>
                                <<<b, kBlock>>>(v, ring, N, kChurnRounds, 5, d_out, d_counters);
                        if (a == 1 && stats)
                            churn_kernel<churn_alloc::rw_bm, true>
                                <<<b, kBlock>>>(v, ring, N, kChurnRounds, 5, d_out, d_counters);
                        if (a == 2 && !stats)
                            churn_kernel<churn_alloc::corw, false>
                                <<<b, kBlock>>>(v, ring, N, kChurnRounds, 5, d_out, d_counters);
                        if (a == 2 && stats)
                            churn_kernel<churn_alloc::corw, true>
                                <<<b, kBlock>>>(v, ring, N, kChurnRounds, 5, d_out, d_counters);
                    };
                    std::vector<float> t;
                    for (int r = 0; r <= env.reps; ++r) {
                        prepare();
                        float ms = env.tm->ms([&] { launch(false); });
                        if (r) t.push_back(ms);
                    }
                    // The last run: no request without a page, no page changed while
                    // owned, no refused free; the pages held at the end distinct,
                    // free before, still holding their owner's words; the allocator
                    // left with exactly A - N free pages.
                    unsigned long long c[6], bad = 0, none = 0;
                    CUDA(cudaMemcpy(c, d_counters, sizeof c, cudaMemcpyDeviceToHost));
                    CUDA(cudaMemset(d_bad, 0, sizeof(unsigned long long)));
                    churn_tag_check_kernel<<<blocks(N), kBlock>>>(v, d_out, N, kChurnRounds - 1, d_bad);
                    CUDA(cudaGetLastError());
                    CUDA(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost));
                    const std::vector<unsigned> pages = read_pages(d_out, N);
                    std::vector<unsigned> after;
                    if (a != 0) after = read_bitmap(v);
                    std::string problem = check_pages(pages, T, before, a != 0 ? &after : nullptr, &none);
                    unsigned long long left = 0;
                    if (a == 0) {
                        int avail = 0;
                        CUDA(cudaMemcpy(&avail, ring.avail, sizeof avail, cudaMemcpyDeviceToHost));
                        left = (unsigned long long)std::max(avail, 0);
                    } else {
                        left = count_free(after);
                    }
                    if (c[0] || none) problem += fmt("%llu gets found no page (%llu at the end); ", c[0], none);
                    if (c[1]) problem += fmt("%llu pages changed while owned; ", c[1]);
                    if (c[2]) problem += fmt("%llu frees refused; ", c[2]);
                    if (bad) problem += fmt("%llu held pages lost their owner's words; ", bad);
                    if (left != A - N) problem += fmt("%llu pages free at the end, expected %llu; ", left, A - N);
                    std::string steps;
                    if (a != 0) { // TAS/WAS of the walks, from a run of its own
                        prepare();
                        launch(true);
                        CUDA(cudaGetLastError());
                        CUDA(cudaMemcpy(c, d_counters, sizeof c, cudaMemcpyDeviceToHost));
                        steps = fmt(",\"tas\":%.6f,\"was\":%.6f", double(c[3]) / (double(N) * kChurnRounds),
                                    c[5] ? double(c[4]) / double(c[5]) : 0.0);
                    }
                    const double ms = median(t);
                    row(fmt("{\"figure\":\"churn\",\"allocator\":\"%s\",\"T\":%llu,\"A\":%llu,\"free\":%g,\"N\":%u,"
                            "\"rounds\":%u,\"ms\":%.6f,\"ms_per_round\":%.6f",
                            names[a], T, A, f, N, kChurnRounds, ms, ms / kChurnRounds) +
                        steps + (a == 0 ? qb : hb).json() +
                        verdict(problem, fmt("churn %s T=%llu free=%g N=%u", names[a], T, f, N)) + "}");
                }
            }
        }
        GD(gpudyn_rw_heap_destroy(h));
        cudaFree(ring.slots);
        cudaFree(ring.head);
        cudaFree(ring.tail);
        cudaFree(ring.avail);
        cudaFree(d_list);
        cudaFree(d_out);
        cudaFree(d_count);
        cudaFree(d_counters);
        cudaFree(d_bad);
    }
}

int main(int argc, char** argv) {
    const char* out_path = nullptr;
    bool quick = false;
    // --only fig11|crw|churn|fig13|fig13_free|fig17|fig18 runs one part, --join-n N one
    // hash-join size, --reps R timed repeats.
    const char* only = nullptr;
    unsigned join_n = 0;
    int reps_arg = 0;
    const char* usage =
        "usage: %s --out FILE.json [--quick] [--only fig11|crw|churn|fig13|fig13_free|fig17|fig18] [--join-n N] [--reps R]\n";
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--join-n") && i + 1 < argc) join_n = unsigned(strtoul(argv[++i], nullptr, 10));
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps_arg = atoi(argv[++i]);
        else {
            fprintf(stderr, usage, argv[0]);
            return 2;
        }
    }
    if (!out_path) {
        fprintf(stderr, usage, argv[0]);
        return 2;
    }
    auto part = [&](const char* name) { return only == nullptr || !strcmp(only, name); };
    CUDA(cudaDeviceSetLimit(cudaLimitMallocHeapSize, kCudaMallocHeap));
    const int reps = reps_arg > 0 ? reps_arg : quick ? 3 : 5;
    timer tm;

    // Axes (defaults in one place).
    const std::vector<unsigned long long> pool_pages =
        quick ? std::vector<unsigned long long>{1ull << 20} : std::vector<unsigned long long>{1ull << 20, 1ull << 24};
    const std::vector<double> frees =
        quick ? std::vector<double>{0.5, 0.01} : std::vector<double>{0.5, 0.1, 0.01, 0.005};
    const std::vector<unsigned> threads =
        quick ? std::vector<unsigned>{4096, 65536} : std::vector<unsigned>{1024, 4096, 16384, 65536, 262144, 1048576};
    const std::vector<unsigned> malloc_threads =
        quick ? std::vector<unsigned>{65536} : std::vector<unsigned>{65536, 1048576};
    const std::vector<unsigned> join_sizes =
        join_n  ? std::vector<unsigned>{join_n}
        : quick ? std::vector<unsigned>{16384, 1048576}
                : std::vector<unsigned>{16384, 65536, 262144, 1048576, 4194304, 10000000};
    const unsigned max_n = 16u << 20;
    // Fig. 13 free-percentage axis and Fig. 18 (sections fig13_free, fig18).
    const std::vector<double> f13_free_pcts =
        quick ? std::vector<double>{100, 10} : std::vector<double>{100, 50, 10, 1};
    const std::vector<unsigned> f13_threads =
        quick ? std::vector<unsigned>{65536} : std::vector<unsigned>{16384, 65536, 1048576};
    const std::vector<unsigned long long> fig18_page_sizes =
        quick ? std::vector<unsigned long long>{32, 256, 2048}
              : std::vector<unsigned long long>{32, 64, 128, 256, 512, 1024, 2048};
    const unsigned long long fig18_pool = quick ? 1ull << 30 : 8ull << 30;

    size_t total = pool_pages.size() * frees.size() * threads.size() + threads.size() + malloc_threads.size() * 8 * 2 +
                   4 * 3 + join_sizes.size() * 5;
    total += 4 * f13_threads.size() * f13_free_pcts.size() + fig18_page_sizes.size() * 4;
    size_t done = 0;
    auto progress = [&](const std::string& label) {
        fprintf(stderr, "progress %zu %zu %s\n", ++done, total, label.c_str());
    };

    unsigned *d_out, *d_pos, *d_queue;
    unsigned long long* d_head;
    void** d_ptrs;
    CUDA(cudaMalloc(&d_out, max_n * sizeof(unsigned)));
    CUDA(cudaMalloc(&d_pos, max_n * sizeof(unsigned)));
    CUDA(cudaMalloc(&d_queue, max_n * sizeof(unsigned)));
    CUDA(cudaMalloc(&d_head, 64));
    CUDA(cudaMalloc(&d_ptrs, max_n * sizeof(void*)));

    // ---- Fig. 11: GETPAGE ---------------------------------------------------
    // Beside the grid (N <= A/2), points with N = 0.9, 0.99 and 1.0 x the free
    // pages A ("near_a"): the walks' worst case, where a queue does best.  Fewer
    // repeats there: a run that ends in the bounded sweep takes milliseconds.
    // Every run's pages are checked (distinct, free before, used after), and the
    // queue is also timed building its free list from the bitmap ("queue_build").
    const char* algo_names[] = {"rw", "rw_bm", "corw"};
    const std::vector<double> near_a = {0.9, 0.99, 1.0};
    const int near_a_reps = std::min(reps, 3);
    unsigned long long* d_count;
    CUDA(cudaMalloc(&d_count, sizeof(unsigned long long)));
    if (part("fig11")) total += pool_pages.size() * frees.size() * near_a.size();
    for (unsigned long long T : pool_pages) {
        if (!part("fig11")) break;
        gpudyn_rw_heap_t h = make_heap(T, 256);
        gpudyn_rw_heap_view_t v;
        GD(gpudyn_rw_heap_get_view(h, &v));
        const heap_bytes hb = bytes_of(v), qb = queue_bytes(v, sizeof(unsigned), 8);
        heap_bytes qbb = qb; // the queue that lists its pages from the bitmap also holds the bitmap
        qbb.bitmap = hb.bitmap;
        qbb.meta += hb.bitmap;
        for (double f : frees) {
            GD(gpudyn_exp_rw_heap_occupy(h, 1.0 - f, 1, nullptr));
            uint64_t A = 0;
            GD(gpudyn_rw_heap_free_page_count(h, &A, nullptr));
            const std::vector<unsigned> before = read_bitmap(v); // every repeat's start (occupy's seed 1)
            std::vector<std::pair<unsigned, double>> points;     // (N, N/A for the near_a points, else 0)
            for (unsigned N : threads) points.push_back({N, 0.0});
            for (double x : near_a) points.push_back({unsigned(std::max(1.0, std::floor(x * double(A) + 0.5))), x});
            for (const auto& point : points) {
                const unsigned N = point.first;
                const double near = point.second;
                progress(near ? fmt("fig11 T=%llu free=%g N=%u (%g A)", T, f, N, near)
                              : fmt("fig11 T=%llu free=%g N=%u", T, f, N));
                if (!near && N > A / 2) continue; // the walks need N <= A; A/2 keeps every algorithm bounded
                const int nreps = near ? near_a_reps : reps;
                const std::string where =
                    fmt(",\"T\":%llu,\"A\":%llu,\"free\":%g,\"N\":%u", T, (unsigned long long)A, f, N) +
                    (near ? fmt(",\"near_a\":%g", near) : std::string());
                for (int a = 0; a < 3; ++a) {
                    std::vector<float> t;
                    for (int r = 0; r <= nreps; ++r) { // r == 0: warm-up
                        GD(gpudyn_exp_rw_heap_occupy(h, 1.0 - f, 1, nullptr));
                        float ms = tm.ms([&] {
                            if (a == 0) getpage_kernel<rw_algorithm::rw><<<blocks(N), kBlock>>>(v, N, r, d_out);
                            if (a == 1) getpage_kernel<rw_algorithm::rw_bm><<<blocks(N), kBlock>>>(v, N, r, d_out);
                            if (a == 2) getpage_kernel<rw_algorithm::corw><<<blocks(N), kBlock>>>(v, N, r, d_out);
                        });
                        if (r) t.push_back(ms);
                    }
                    unsigned long long none = 0;
                    const std::vector<unsigned> after = read_bitmap(v);
                    std::string problem = check_pages(read_pages(d_out, N), T, before, &after, &none);
                    if (none) problem += fmt("%llu requests found no page; ", none); // N <= A: each must find one
                    GD(gpudyn_exp_rw_heap_occupy(h, 1.0 - f, 1, nullptr));
                    const gpudyn_exp_rw_heap_stats_t st =
                        page_stats(h, d_out, N, gpudyn_rw_heap_algorithm_t(a + 1), 1, 77);
                    row(fmt("{\"figure\":\"fig11\",\"allocator\":\"%s\"", algo_names[a]) + where +
                        fmt(",\"ms\":%.6f,\"tas\":%.6f,\"was\":%.6f,\"failed\":%llu", median(t), st.tas, st.was,
                            (unsigned long long)st.failed) +
                        hb.json() + verdict(problem, fmt("fig11 %s T=%llu free=%g N=%u", algo_names[a], T, f, N)) +
                        "}");
                }
                // Queue baseline: the free pages in an array, one atomic head.  The
                // list is built before the timing, as in the paper's queue.
                GD(gpudyn_exp_rw_heap_occupy(h, 1.0 - f, 1, nullptr));
                CUDA(cudaMemset(d_count, 0, sizeof(unsigned long long)));
                list_free_kernel<<<blocks(v.word_count), kBlock>>>(reinterpret_cast<const unsigned*>(v.bitmap),
                                                                   v.word_count, d_queue, d_count);
                CUDA(cudaGetLastError());
                {
                    std::vector<float> t;
                    for (int r = 0; r <= nreps; ++r) {
                        CUDA(cudaMemset(d_head, 0, 8));
                        float ms = tm.ms([&] {
                            queue_kernel<<<blocks(N), kBlock>>>(gpudyn::experimental::page_queue{d_queue, d_head, A}, N,
                                                                d_out, d_pos);
                        });
                        if (r) t.push_back(ms);
                    }
                    unsigned long long none = 0;
                    std::string problem = check_pages(read_pages(d_out, N), T, before, nullptr, &none);
                    if (none) problem += fmt("%llu requests found no page; ", none);
                    double tas = 0, was = 0;
                    queue_steps(d_pos, N, tas, was);
                    row(std::string("{\"figure\":\"fig11\",\"allocator\":\"queue\"") + where +
                        fmt(",\"ms\":%.6f,\"tas\":%.6f,\"was\":%.6f,\"failed\":%llu", median(t), tas, was, none) +
                        qb.json() + verdict(problem, fmt("fig11 queue T=%llu free=%g N=%u", T, f, N)) + "}");
                }
                // The queue when its free pages are not listed yet: the timing holds
                // the list's build from the bitmap (one pass over T/32 words) and
                // the pops; build_ms is the build alone.
                {
                    std::vector<float> t, tb;
                    for (int r = 0; r <= nreps; ++r) {
                        // The count and head start at 0 (set before the timing: a
                        // queue keeps them in its state), the list is built anew.
                        auto build = [&] {
                            list_free_kernel<<<blocks(v.word_count), kBlock>>>(
                                reinterpret_cast<const unsigned*>(v.bitmap), v.word_count, d_queue, d_count);
                        };
                        CUDA(cudaMemset(d_count, 0, sizeof(unsigned long long)));
                        float ms_build = tm.ms(build);
                        CUDA(cudaMemset(d_count, 0, sizeof(unsigned long long)));
                        CUDA(cudaMemset(d_head, 0, 8));
                        float ms = tm.ms([&] {
                            build();
                            queue_listed_kernel<<<blocks(N), kBlock>>>(d_queue, d_count, d_head, N, d_out, d_pos);
                        });
                        if (r) {
                            t.push_back(ms);
                            tb.push_back(ms_build);
                        }
                    }
                    unsigned long long none = 0, listed = 0;
                    std::string problem = check_pages(read_pages(d_out, N), T, before, nullptr, &none);
                    if (none) problem += fmt("%llu requests found no page; ", none);
                    CUDA(cudaMemcpy(&listed, d_count, sizeof listed, cudaMemcpyDeviceToHost));
                    if (listed != A) problem += fmt("%llu pages listed, %llu free; ", listed, (unsigned long long)A);
                    double tas = 0, was = 0;
                    queue_steps(d_pos, N, tas, was);
                    row(std::string("{\"figure\":\"fig11\",\"allocator\":\"queue_build\"") + where +
                        fmt(",\"ms\":%.6f,\"build_ms\":%.6f,\"tas\":%.6f,\"was\":%.6f,\"failed\":%llu", median(t),
                            median(tb), tas, was, none) +
                        qbb.json() + verdict(problem, fmt("fig11 queue_build T=%llu free=%g N=%u", T, f, N)) + "}");
                }
            }
        }
        GD(gpudyn_rw_heap_destroy(h));
    }
    cudaFree(d_count);
    // CUDA device malloc of 16 B by the same thread counts; it holds the
    // device-malloc heap this program sets (kCudaMallocHeap).
    for (unsigned N : threads) {
        if (!part("fig11")) break;
        progress(fmt("fig11 cuda_malloc N=%u", N));
        std::vector<float> t;
        for (int r = 0; r <= (quick ? 2 : 3); ++r) {
            float ms = tm.ms([&] { cuda_malloc_kernel<<<blocks(N), kBlock>>>(nullptr, 16, N, d_ptrs, false); });
            cuda_free_kernel<<<blocks(N), kBlock>>>(d_ptrs, N);
            CUDA(cudaDeviceSynchronize());
            if (r) t.push_back(ms);
        }
        row(fmt("{\"figure\":\"fig11\",\"allocator\":\"cuda_malloc_16B\",\"N\":%u,\"ms\":%.6f,\"bytes_held\":%llu}", N,
                median(t), (unsigned long long)kCudaMallocHeap));
    }

    // ---- issue 14, item 1: CRW in its regime, allocation while freeing -------
    {
        const section_env env{quick, reps, &tm, progress, &total};
        if (part("crw")) crw_section(env);
        if (part("churn")) churn_section(env);
    }

    // ---- Fig. 13/14: RW_malloc vs CUDA malloc -------------------------------
    if (part("fig13")) {
        const unsigned long long T = 1ull << 26, S = 256; // 16 GiB pool of 256 B pages (SV-B2)
        gpudyn_rw_heap_t h = make_heap(T, S);
        gpudyn_rw_heap_view_t v;
        GD(gpudyn_rw_heap_get_view(h, &v));
        unsigned long long* d_sizes;
        unsigned* d_fail;
        CUDA(cudaMalloc(&d_sizes, (1u << 20) * sizeof(unsigned long long)));
        CUDA(cudaMalloc(&d_fail, sizeof(unsigned)));
        const char* scen[] = {"16", "256", "1024", "4096", "8192", "mixed_16_4096", "mixed_4_8196", "4096_then_free"};
        const unsigned long long fixed[] = {16, 256, 1024, 4096, 8192, 0, 0, 4096};
        for (unsigned N : malloc_threads)
            for (int sc = 0; sc < 8; ++sc) {
                if (sc == 5 || sc == 6) { // mixed sizes, uniform in [lo, hi]
                    std::vector<unsigned long long> sz(N);
                    const unsigned long long lo = sc == 5 ? 16 : 4, hi = sc == 5 ? 4096 : 8196;
                    for (unsigned i = 0; i < N; ++i) sz[i] = lo + gpudyn::detail::mix64(i * 31 + sc) % (hi - lo + 1);
                    CUDA(cudaMemcpy(d_sizes, sz.data(), N * sizeof(unsigned long long), cudaMemcpyHostToDevice));
                }
                const unsigned long long* sizes = (sc == 5 || sc == 6) ? d_sizes : nullptr;
                const bool free_now = sc == 7;
                for (int who = 0; who < 2; ++who) {
                    progress(fmt("fig13 %s N=%u %s", scen[sc], N, who ? "cuda" : "rw"));
                    // CUDA malloc at 1M threads takes up to seconds per run: only the target sizes.
                    if (who && N > 65536 && sc != 0 && sc != 3 && sc != 5) continue;
                    std::vector<float> t;
                    unsigned fails = 0;
                    const int nrep = who ? 1 : reps;
                    for (int r = 0; r <= nrep; ++r) {
                        CUDA(cudaMemset(d_fail, 0, sizeof(unsigned)));
                        if (!who) GD(gpudyn_rw_heap_reset(h, nullptr));
                        float ms = tm.ms([&] {
                            if (who) cuda_malloc_kernel<<<blocks(N), kBlock>>>(sizes, fixed[sc], N, d_ptrs, free_now);
                            else
                                rw_malloc_kernel<<<blocks(N), kBlock>>>(v, sizes, fixed[sc], N, r, d_ptrs, free_now,
                                                                        d_fail, nullptr);
                        });
                        if (who) {
                            cuda_free_kernel<<<blocks(N), kBlock>>>(d_ptrs, N);
                            CUDA(cudaDeviceSynchronize());
                        } else {
                            CUDA(cudaMemcpy(&fails, d_fail, sizeof fails, cudaMemcpyDeviceToHost));
                        }
                        if (r) t.push_back(ms);
                    }
                    row(
                        fmt("{\"figure\":\"fig13\",\"allocator\":\"%s\",\"scenario\":\"%s\",\"N\":%u,\"ms\":%.6f,"
                            "\"failed\":%u}",
                            who ? "cuda_malloc" : "rw_malloc", scen[sc], N, median(t), fails));
                }
            }
        GD(gpudyn_rw_heap_destroy(h));

        // ---- Fig. 15: utilisation until out of memory --------------------
        const unsigned long long pool_bytes = 256ull << 20;
        const unsigned long long req_sizes[] = {1050, 3000, 700};
        for (unsigned long long page : {128ull, 256ull, 512ull, 1024ull}) {
            gpudyn_rw_heap_t u = make_heap(pool_bytes / page, page);
            GD(gpudyn_rw_heap_get_view(u, &v));
            for (unsigned long long X : req_sizes) {
                progress(fmt("fig15 page=%llu X=%llu", page, X));
                GD(gpudyn_rw_heap_reset(u, nullptr));
                unsigned long long* d_granted;
                CUDA(cudaMalloc(&d_granted, sizeof(unsigned long long)));
                CUDA(cudaMemset(d_granted, 0, sizeof(unsigned long long)));
                const unsigned batch = 4096;
                for (int b = 0; b < 100000; ++b) {
                    CUDA(cudaMemset(d_fail, 0, sizeof(unsigned)));
                    rw_malloc_kernel<<<blocks(batch), kBlock>>>(v, nullptr, X, batch, b, d_ptrs, false, d_fail,
                                                                d_granted);
                    unsigned fails = 0;
                    CUDA(cudaMemcpy(&fails, d_fail, sizeof fails, cudaMemcpyDeviceToHost));
                    if (fails) break;
                }
                unsigned long long granted = 0;
                CUDA(cudaMemcpy(&granted, d_granted, sizeof granted, cudaMemcpyDeviceToHost));
                // A size-class allocator rounding to the next power of two (the paper's Ouroboros setup).
                unsigned long long pow2 = 1;
                while (pow2 < X) pow2 <<= 1;
                row(
                    fmt("{\"figure\":\"fig15\",\"page_size\":%llu,\"request\":%llu,\"utilisation\":%.6f,"
                        "\"pow2_class_utilisation\":%.6f}",
                        page, X, double(granted) / double(pool_bytes), double(X) / double(pow2)));
                cudaFree(d_granted);
            }
            GD(gpudyn_rw_heap_destroy(u));
        }
        cudaFree(d_sizes);
        cudaFree(d_fail);
    }

    // ---- Fig. 17: hash join, each thread filling its pages ------------------
    // Tuples 16K .. 10M on 128M pages of 64 B (SVI); CUDA malloc (pages of 64 B
    // from its own heap) only up to 1M tuples: seconds a run beyond.
    if (part("fig17")) {
        const unsigned long long T = 1ull << 27, S = 64; // 128M pages as in SVI, 64 B pages (8 GiB)
        gpudyn_rw_heap_t h = make_heap(T, S);
        join_scratch o = make_join_scratch(join_sizes.back());
        for (unsigned n : join_sizes) {
            join_input in = make_join_input(n, tm, reps);
            for (int m = 0; m < kJoinSources; ++m) {
                progress(fmt("fig17 n=%u %s", n, kJoinNames[m]));
                const bool cuda = join_src(m) == join_src::cuda_malloc;
                if (cuda && n > (1u << 20)) continue;
                row("{\"figure\":\"fig17\"," + measure_join(m, h, in, o, tm, cuda ? 2 : reps) + "}");
            }
            free_join_input(in);
        }
        free_join_scratch(o);
        GD(gpudyn_rw_heap_destroy(h));
    }

    // ---- Fig. 13 with a free-percentage axis ---------------------------------
    // RW_malloc of 16, 256, 4096 B and mixed 16..4096 B on the Fig. 13 heap (64M
    // pages of 256 B) pre-filled to each free percentage.  The fill marks whole
    // bitmap words used (a heap filled by earlier runs): the ABI's occupy marks
    // single random pages, which at 50 % free leaves almost no run of the 16
    // free pages a 4096 B request needs, so requests would fail after the
    // bounded sweep and time that sweep.  The free share is measured before the
    // kernel (as the paper's "measured at the start of each kernel").  A point
    // whose pages exceed half the free pages is listed as skipped (the fig11
    // rule: the walks are bounded below it).  CUDA malloc has no pre-filled
    // counterpart here: its fresh-heap times are the fig13 rows.  The last
    // repeat's pointers are checked on the host: none in a pre-filled word, no
    // two overlapping.
    if (part("fig13_free")) {
        const unsigned long long T = 1ull << 26, S = 256;
        gpudyn_rw_heap_t h = make_heap(T, S);
        gpudyn_rw_heap_view_t v;
        GD(gpudyn_rw_heap_get_view(h, &v));
        if (v.word_bits != 32) {
            fprintf(stderr, "fig13_free: the pre-fill writes 32-bit bitmap words, the heap has %u\n", v.word_bits);
            return 1;
        }
        const unsigned nmax = f13_threads.back();
        unsigned long long* d_sizes;
        unsigned* d_fail;
        CUDA(cudaMalloc(&d_sizes, nmax * sizeof(unsigned long long)));
        CUDA(cudaMalloc(&d_fail, sizeof(unsigned)));
        const char* size_names[] = {"16", "256", "4096", "mixed_16_4096"};
        const unsigned long long fixed[] = {16, 256, 4096, 0};
        for (int sc = 0; sc < 4; ++sc)
            for (unsigned N : f13_threads) {
                std::vector<unsigned long long> sz(N, fixed[sc]);
                if (!fixed[sc]) // as fig13's mixed_16_4096: uniform in [16, 4096]
                    for (unsigned i = 0; i < N; ++i) sz[i] = 16 + gpudyn::detail::mix64(i * 31 + 5) % (4096 - 16 + 1);
                CUDA(cudaMemcpy(d_sizes, sz.data(), N * sizeof(unsigned long long), cudaMemcpyHostToDevice));
                const unsigned long long need = malloc_pages_needed(sz, S);
                unsigned long long requested = 0;
                for (unsigned long long b : sz) requested += b;
                for (double pct : f13_free_pcts) {
                    progress(fmt("fig13_free %s N=%u free=%g%%", size_names[sc], N, pct));
                    const unsigned seed = 17 + unsigned(pct * 100);
                    const unsigned long long threshold = (unsigned long long)((1.0 - pct / 100.0) * 4294967296.0);
                    auto fill = [&] {
                        GD(gpudyn_rw_heap_reset(h, nullptr));
                        if (threshold)
                            occupy_words_kernel<<<blocks(v.word_count), kBlock>>>(reinterpret_cast<unsigned*>(v.bitmap),
                                                                                  v.word_count, seed, threshold);
                        CUDA(cudaGetLastError());
                        uint64_t free_pages = 0;
                        GD(gpudyn_rw_heap_free_page_count(h, &free_pages, nullptr));
                        return (unsigned long long)free_pages;
                    };
                    const unsigned long long free_before = fill();
                    const double measured = 100.0 * double(free_before) / double(T);
                    if (need > free_before / 2) {
                        row(
                            fmt("{\"figure\":\"fig13_free\",\"allocator\":\"rw_malloc\",\"size\":\"%s\",\"N\":%u,"
                                "\"free_pct\":%g,\"free_pct_measured\":%.4f,\"pages_needed\":%llu,"
                                "\"pages_free\":%llu,\"skipped\":true}",
                                size_names[sc], N, pct, measured, need, free_before));
                        continue;
                    }
                    std::vector<float> t;
                    unsigned fails = 0, max_fails = 0;
                    unsigned long long free_after = 0;
                    for (int r = 0; r <= reps; ++r) { // r == 0: warm-up
                        if (r) fill();
                        CUDA(cudaMemset(d_fail, 0, sizeof(unsigned)));
                        float ms = tm.ms([&] {
                            rw_malloc_kernel<<<blocks(N), kBlock>>>(v, d_sizes, 0, N, r, d_ptrs, false, d_fail,
                                                                    nullptr);
                        });
                        if (r) t.push_back(ms);
                        CUDA(cudaMemcpy(&fails, d_fail, sizeof fails, cudaMemcpyDeviceToHost));
                        max_fails = std::max(max_fails, fails);
                    }
                    uint64_t fa = 0;
                    GD(gpudyn_rw_heap_free_page_count(h, &fa, nullptr));
                    free_after = fa;
                    // Host check of the last repeat's pointers.
                    std::vector<unsigned long long> p(N);
                    CUDA(cudaMemcpy(p.data(), d_ptrs, N * sizeof(void*), cudaMemcpyDeviceToHost));
                    unsigned long long in_filled = 0, overlaps = 0, nulls = 0, off_pool = 0;
                    std::vector<unsigned> order;
                    order.reserve(N);
                    for (unsigned i = 0; i < N; ++i) {
                        if (!p[i]) {
                            ++nulls;
                            continue;
                        }
                        if (p[i] < v.pool || p[i] + sz[i] > v.pool + T * S) {
                            ++off_pool;
                            continue;
                        }
                        const unsigned long long first = (p[i] - v.pool) / S / 32,
                                                 last = (p[i] + sz[i] - 1 - v.pool) / S / 32;
                        for (unsigned long long w = first; w <= last; ++w)
                            if (word_occupied(w, seed, threshold)) {
                                ++in_filled;
                                break;
                            }
                        order.push_back(i);
                    }
                    std::sort(order.begin(), order.end(), [&](unsigned a, unsigned b) { return p[a] < p[b]; });
                    for (size_t k = 1; k < order.size(); ++k)
                        if (p[order[k - 1]] + sz[order[k - 1]] > p[order[k]]) ++overlaps;
                    const bool verified =
                        max_fails == 0 && nulls == 0 && in_filled == 0 && overlaps == 0 && off_pool == 0;
                    row(
                        fmt("{\"figure\":\"fig13_free\",\"allocator\":\"rw_malloc\",\"size\":\"%s\",\"N\":%u,"
                            "\"free_pct\":%g,\"free_pct_measured\":%.4f,\"pages_needed\":%llu,\"pages_free\":%llu,"
                            "\"ms\":%.6f,\"failed\":%u,\"bytes_requested\":%llu,\"bytes_held\":%llu,"
                            "\"pool_bytes\":%llu,\"in_prefilled\":%llu,\"overlaps\":%llu,\"off_pool\":%llu,"
                            "\"verified\":%s}",
                            size_names[sc], N, pct, measured, need, free_before, median(t), max_fails, requested,
                            (free_before - free_after) * S, T * S, in_filled, overlaps, off_pool,
                            verified ? "true" : "false"));
                }
            }
        CUDA(cudaFree(d_sizes));
        CUDA(cudaFree(d_fail));
        GD(gpudyn_rw_heap_destroy(h));
    }

    // ---- Fig. 18: the hash join under page sizes 32 B .. 2 KiB ----------------
    // As SVI: 4M tuples, an 8 GiB pool with every page free, page sizes 32 B to
    // 2 KiB (the page count follows).  The paper's baseline, Ouroboros, is not
    // available: DO is (speedups over it in the driver).  CUDA malloc at 4M
    // tuples takes seconds a run (Fig. 17) and is left out.
    if (part("fig18")) {
        const unsigned n = join_n ? join_n : quick ? 262144u : 4194304u;
        join_input in = make_join_input(n, tm, reps);
        join_scratch o = make_join_scratch(n);
        for (unsigned long long S : fig18_page_sizes) {
            gpudyn_rw_heap_t h = make_heap(fig18_pool / S, S);
            for (int m = 0; m < kJoinSources; ++m) {
                if (join_src(m) == join_src::cuda_malloc) continue;
                progress(fmt("fig18 page=%llu %s", S, kJoinNames[m]));
                row("{\"figure\":\"fig18\"," + measure_join(m, h, in, o, tm, reps) + "}");
            }
            GD(gpudyn_rw_heap_destroy(h));
        }
        free_join_scratch(o);
        free_join_input(in);
    }

    FILE* f = fopen(out_path, "w");
    if (!f) {
        perror(out_path);
        return 1;
    }
    cudaDeviceProp prop;
    CUDA(cudaGetDeviceProperties(&prop, 0));
    fprintf(f, "{\"program\":\"gpudyn_bench_rw_heap\",\"quick\":%s,\"gpu\":\"%s\",\"reps\":%d,\"rows\":[\n",
            quick ? "true" : "false", prop.name, reps);
    for (size_t i = 0; i < rows.size(); ++i) fprintf(f, "%s%s\n", rows[i].c_str(), i + 1 < rows.size() ? "," : "");
    fprintf(f, "]}\n");
    fclose(f);
    return 0;
}
