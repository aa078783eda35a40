// Benchmark of the random-walk page heap (Pham et al.): Fig. 11 (GETPAGE time,
// TAS, WAS vs threads and free fraction, with a queue baseline and CUDA device
// malloc), Fig. 13/14 (RW_malloc sizes vs CUDA malloc), Fig. 15 (utilisation
// until out of memory) and Fig. 17 (hash-join probe writing into pages: DO
// atomic counter, RW, RW-BM, CoRW, CUDA malloc).  Fig. 12 is derived from the
// Fig. 11 rows by gpudyn/bench/rw_heap.py.
//
//   gpudyn_bench_rw_heap --out FILE.json [--quick]
//
// Device work is timed with CUDA events after a warm-up launch; the median of
// the repeats is reported.  Every heap is reset (not timed) before each repeat.
//
// More sections (--only NAME): fig13_free (RW_malloc on a heap pre-filled to
// 100/50/10/1 % free) and fig18 (the hash join of fig17 under page sizes 32 B
// .. 2 KiB).  The hash join of fig17/fig18 fills pages as the paper's Fig. 16
// (a new page only when the thread's page is full) and checks every output.
#include <gpudyn/gpudyn.h>
#include <gpudyn/rw_heap.cuh>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../bench_check.hpp"  // CUDA(), GD()

using gpudyn::kRwInvalidPage;
using gpudyn::rw_algorithm;
using gpudyn::rw_heap_ref;
using gpudyn::detail::counter_rng;


constexpr unsigned kBlock = 256;  // 8 warps per block, as the library's bulk kernels
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
    if constexpr (Algo == rw_algorithm::corw)
        page = heap.get_page_corw(mask, rng);
    else
        page = heap.get_page<Algo>(rng);
    out[tid] = page;
}

// The paper's queue baseline (SV-A): gpudyn::detail::page_queue (free page ids
// in an array, one atomic head); the position of each request gives its steps.
__global__ void queue_kernel(gpudyn::detail::page_queue q, unsigned n, unsigned* out, unsigned* position) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    unsigned long long i;
    out[tid] = q.pop(i);
    position[tid] = unsigned(i);
}

__global__ void cuda_malloc_kernel(const unsigned long long* sizes, unsigned long long fixed, unsigned n,
                                   void** out, bool free_now) {
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
constexpr unsigned kJoinMaxDup = 7;  // so one u32 per probe tuple can mark its matches in verification
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
enum class join_src { direct, rw, rw_bm, corw, cuda_malloc };
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
    unsigned used = cap;  // no page yet counts as a full one
    bool live = true;     // false at the cluster's end or after a failed GETPAGE
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
            atomicAdd(failures, 1u);  // verification then reports this thread's missing matches
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
enum { kTallyPages, kTallyTuples, kTallyInvalid, kTallyDuplicate, kTallyMissing, kTallyCount };
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
            const bool off_pool = pool_hi != 0 && (page < pool_lo || page + page_bytes > pool_hi ||
                                                   (page - pool_lo) % page_bytes != 0);
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
__global__ void occupy_words_kernel(unsigned* words, unsigned word_count, unsigned seed,
                                    unsigned long long threshold) {
    const unsigned w = blockIdx.x * blockDim.x + threadIdx.x;
    if (w < word_count && word_occupied(w, seed, threshold)) words[w] = 0xffffffffu;
}

// ---- timing ------------------------------------------------------------------
struct timer {
    cudaEvent_t a, b;
    timer() { CUDA(cudaEventCreate(&a)); CUDA(cudaEventCreate(&b)); }
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
    unsigned n = 0;                  // |R| = |S| = probe threads
    unsigned cap = 0;                // table slots: a power of two >= 2n (load <= 1/2)
    unsigned long long matches = 0;  // output tuples of the exact join
    unsigned *build = nullptr, *probe = nullptr, *table_keys = nullptr, *table_vals = nullptr;
    unsigned char *rank = nullptr, *expect = nullptr;
    float build_ms = 0;  // median time of the build kernel (clearing the table is not timed)
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
        const unsigned m = std::min<unsigned>(1 + unsigned(gpudyn::detail::mix64(j) % kJoinMaxDup),
                                              n - unsigned(build.size()));
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
    for (int r = 0; r <= reps; ++r) {  // r == 0: warm-up; the last build stays
        CUDA(cudaMemset(in.table_keys, 0xff, in.cap * sizeof(unsigned)));
        float ms = tm.ms([&] { build_kernel<<<blocks(n), kBlock>>>(in.build, n, in.table_keys, in.table_vals, in.cap - 1); });
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
    unsigned long long* heads = nullptr;  // newest page of each thread
    unsigned* counts = nullptr;           // tuples in it
    unsigned* fail = nullptr;             // GETPAGE failures
    unsigned long long* tally = nullptr;  // join_verify_kernel's counters
    unsigned long long* next = nullptr;   // DO's page counter
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
            taken = pages;  // nothing else counts CUDA malloc's pages
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
    return fmt("\"allocator\":\"%s\",\"tuples\":%u,\"page_size\":%llu,\"pages_total\":%llu,\"ms\":%.6f,"
               "\"build_ms\":%.6f,\"total_ms\":%.6f,\"matches\":%llu,\"output_tuples\":%llu,\"pages_used\":%llu,"
               "\"bytes_held\":%llu,\"output_bytes\":%llu,\"pool_bytes\":%llu,\"failed\":%llu,\"invalid\":%llu,"
               "\"duplicate\":%llu,\"missing\":%llu,\"wrong_count_runs\":%llu,\"pages_leaked\":%lld,\"verified\":%s",
               kJoinNames[m], in.n, S, T, ms, double(in.build_ms), ms + in.build_ms, in.matches, tuples, taken,
               taken * S, in.matches * kJoinTupleBytes,
               M == join_src::cuda_malloc ? (unsigned long long)kCudaMallocHeap : T * S, failed, invalid, dup,
               missing, wrong_count, leaked, verified ? "true" : "false");
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

int main(int argc, char** argv) {
    const char* out_path = nullptr;
    bool quick = false;
    // Profiling aids (ncu): --only fig11|fig13|fig17 runs one part, --join-n N one
    // hash-join size, --reps R timed repeats.
    const char* only = nullptr;
    unsigned join_n = 0;
    int reps_arg = 0;
    const char* usage = "usage: %s --out FILE.json [--quick] [--only fig11|fig13|fig17] [--join-n N] [--reps R]\n";
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
    const std::vector<unsigned long long> pool_pages = quick ? std::vector<unsigned long long>{1ull << 20}
                                                             : std::vector<unsigned long long>{1ull << 20, 1ull << 24};
    const std::vector<double> frees = quick ? std::vector<double>{0.5, 0.01} : std::vector<double>{0.5, 0.1, 0.01, 0.005};
    const std::vector<unsigned> threads = quick ? std::vector<unsigned>{4096, 65536}
                                                : std::vector<unsigned>{1024, 4096, 16384, 65536, 262144, 1048576};
    const std::vector<unsigned> malloc_threads = quick ? std::vector<unsigned>{65536} : std::vector<unsigned>{65536, 1048576};
    const std::vector<unsigned> join_sizes = join_n ? std::vector<unsigned>{join_n}
                                             : quick ? std::vector<unsigned>{16384, 1048576}
                                                     : std::vector<unsigned>{16384, 65536, 262144, 1048576, 4194304, 10000000};
    const unsigned max_n = 16u << 20;
    // Fig. 13 free-percentage axis and Fig. 18 (sections fig13_free, fig18).
    const std::vector<double> f13_free_pcts = quick ? std::vector<double>{100, 10} : std::vector<double>{100, 50, 10, 1};
    const std::vector<unsigned> f13_threads = quick ? std::vector<unsigned>{65536}
                                                    : std::vector<unsigned>{16384, 65536, 1048576};
    const std::vector<unsigned long long> fig18_page_sizes =
        quick ? std::vector<unsigned long long>{32, 256, 2048}
              : std::vector<unsigned long long>{32, 64, 128, 256, 512, 1024, 2048};
    const unsigned long long fig18_pool = quick ? 1ull << 30 : 8ull << 30;

    size_t total = pool_pages.size() * frees.size() * threads.size() + threads.size() +
                   malloc_threads.size() * 8 * 2 + 4 * 3 + join_sizes.size() * 5;
    total += 4 * f13_threads.size() * f13_free_pcts.size() + fig18_page_sizes.size() * 4;
    size_t done = 0;
    auto progress = [&](const std::string& label) { fprintf(stderr, "progress %zu %zu %s\n", ++done, total, label.c_str()); };

    unsigned *d_out, *d_pos, *d_queue;
    unsigned long long* d_head;
    void** d_ptrs;
    CUDA(cudaMalloc(&d_out, max_n * sizeof(unsigned)));
    CUDA(cudaMalloc(&d_pos, max_n * sizeof(unsigned)));
    CUDA(cudaMalloc(&d_queue, max_n * sizeof(unsigned)));
    CUDA(cudaMalloc(&d_head, 64));
    CUDA(cudaMalloc(&d_ptrs, max_n * sizeof(void*)));

    // ---- Fig. 11: GETPAGE ---------------------------------------------------
    const char* algo_names[] = {"rw", "rw_bm", "corw"};
    for (unsigned long long T : pool_pages) {
        if (!part("fig11")) break;
        gpudyn_rw_heap_t h = make_heap(T, 256);
        gpudyn_rw_heap_view_t v;
        GD(gpudyn_rw_heap_get_view(h, &v));
        for (double f : frees)
            for (unsigned N : threads) {
                progress(fmt("fig11 T=%llu free=%g N=%u", T, f, N));
                GD(gpudyn_rw_heap_occupy(h, 1.0 - f, 1, nullptr));
                uint64_t A = 0;
                GD(gpudyn_rw_heap_free_page_count(h, &A, nullptr));
                if (N > A / 2) continue;  // the walks need N <= A; A/2 keeps every algorithm bounded
                for (int a = 0; a < 3; ++a) {
                    std::vector<float> t;
                    for (int r = 0; r <= reps; ++r) {  // r == 0: warm-up
                        GD(gpudyn_rw_heap_occupy(h, 1.0 - f, 1, nullptr));
                        float ms = tm.ms([&] {
                            if (a == 0) getpage_kernel<rw_algorithm::rw><<<blocks(N), kBlock>>>(v, N, r, d_out);
                            if (a == 1) getpage_kernel<rw_algorithm::rw_bm><<<blocks(N), kBlock>>>(v, N, r, d_out);
                            if (a == 2) getpage_kernel<rw_algorithm::corw><<<blocks(N), kBlock>>>(v, N, r, d_out);
                        });
                        if (r) t.push_back(ms);
                    }
                    GD(gpudyn_rw_heap_occupy(h, 1.0 - f, 1, nullptr));
                    gpudyn_rw_heap_stats_t st;
                    st.struct_size = sizeof st;
                    GD(gpudyn_rw_heap_get_pages(h, d_out, N, gpudyn_rw_heap_algorithm_t(a + 1), 1, 77, &st, nullptr));
                    row(fmt("{\"figure\":\"fig11\",\"allocator\":\"%s\",\"T\":%llu,\"A\":%llu,\"free\":%g,\"N\":%u,"
                            "\"ms\":%.6f,\"tas\":%.6f,\"was\":%.6f,\"failed\":%llu}",
                            algo_names[a], T, (unsigned long long)A, f, N, median(t), st.tas, st.was,
                            (unsigned long long)st.failed));
                }
                // Queue baseline: the free pages in an array, one atomic head.
                {
                    GD(gpudyn_rw_heap_occupy(h, 1.0 - f, 1, nullptr));
                    GD(gpudyn_rw_heap_get_pages(h, d_queue, N, GPUDYN_RW_HEAP_RW_BM, 1, 3, nullptr, nullptr));
                    std::vector<float> t;
                    for (int r = 0; r <= reps; ++r) {
                        CUDA(cudaMemset(d_head, 0, 8));
                        float ms = tm.ms([&] { queue_kernel<<<blocks(N), kBlock>>>(gpudyn::detail::page_queue{d_queue, d_head, N}, N, d_out, d_pos); });
                        if (r) t.push_back(ms);
                    }
                    std::vector<unsigned> pos(N);
                    CUDA(cudaMemcpy(pos.data(), d_pos, N * sizeof(unsigned), cudaMemcpyDeviceToHost));
                    double tas = 0, was = 0;
                    for (unsigned i = 0; i < N; i += 32) {
                        unsigned top = 0;
                        for (unsigned j = i; j < std::min(N, i + 32); ++j) {
                            tas += pos[j] + 1.0;
                            top = std::max(top, pos[j] + 1);
                        }
                        was += top;
                    }
                    row(fmt("{\"figure\":\"fig11\",\"allocator\":\"queue\",\"T\":%llu,\"A\":%llu,\"free\":%g,\"N\":%u,"
                            "\"ms\":%.6f,\"tas\":%.6f,\"was\":%.6f,\"failed\":0}",
                            T, (unsigned long long)A, f, N, median(t), tas / N, was / ((N + 31) / 32)));
                }
            }
        GD(gpudyn_rw_heap_destroy(h));
    }
    // CUDA device malloc of 16 B by the same thread counts.
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
        row(fmt("{\"figure\":\"fig11\",\"allocator\":\"cuda_malloc_16B\",\"N\":%u,\"ms\":%.6f}", N, median(t)));
    }

    // ---- Fig. 13/14: RW_malloc vs CUDA malloc -------------------------------
    if (part("fig13")) {
        const unsigned long long T = 1ull << 26, S = 256;  // 16 GiB pool of 256 B pages (SV-B2)
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
                if (sc == 5 || sc == 6) {  // mixed sizes, uniform in [lo, hi]
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
                            if (who)
                                cuda_malloc_kernel<<<blocks(N), kBlock>>>(sizes, fixed[sc], N, d_ptrs, free_now);
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
                    row(fmt("{\"figure\":\"fig13\",\"allocator\":\"%s\",\"scenario\":\"%s\",\"N\":%u,\"ms\":%.6f,"
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
                row(fmt("{\"figure\":\"fig15\",\"page_size\":%llu,\"request\":%llu,\"utilisation\":%.6f,"
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
        const unsigned long long T = 1ull << 27, S = 64;  // 128M pages as in SVI, 64 B pages (8 GiB)
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
                if (!fixed[sc])  // as fig13's mixed_16_4096: uniform in [16, 4096]
                    for (unsigned i = 0; i < N; ++i) sz[i] = 16 + gpudyn::detail::mix64(i * 31 + 5) % (4096 - 16 + 1);
                CUDA(cudaMemcpy(d_sizes, sz.data(), N * sizeof(unsigned long long), cudaMemcpyHostToDevice));
                const unsigned long long need = malloc_pages_needed(sz, S);
                unsigned long long requested = 0;
                for (unsigned long long b : sz) requested += b;
                for (double pct : f13_free_pcts) {
                    progress(fmt("fig13_free %s N=%u free=%g%%", size_names[sc], N, pct));
                    const unsigned seed = 17 + unsigned(pct * 100);
                    const unsigned long long threshold =
                        (unsigned long long)((1.0 - pct / 100.0) * 4294967296.0);
                    auto fill = [&] {
                        GD(gpudyn_rw_heap_reset(h, nullptr));
                        if (threshold)
                            occupy_words_kernel<<<blocks(v.word_count), kBlock>>>(
                                reinterpret_cast<unsigned*>(v.bitmap), v.word_count, seed, threshold);
                        CUDA(cudaGetLastError());
                        uint64_t free_pages = 0;
                        GD(gpudyn_rw_heap_free_page_count(h, &free_pages, nullptr));
                        return (unsigned long long)free_pages;
                    };
                    const unsigned long long free_before = fill();
                    const double measured = 100.0 * double(free_before) / double(T);
                    if (need > free_before / 2) {
                        row(fmt("{\"figure\":\"fig13_free\",\"allocator\":\"rw_malloc\",\"size\":\"%s\",\"N\":%u,"
                                "\"free_pct\":%g,\"free_pct_measured\":%.4f,\"pages_needed\":%llu,"
                                "\"pages_free\":%llu,\"skipped\":true}",
                                size_names[sc], N, pct, measured, need, free_before));
                        continue;
                    }
                    std::vector<float> t;
                    unsigned fails = 0, max_fails = 0;
                    unsigned long long free_after = 0;
                    for (int r = 0; r <= reps; ++r) {  // r == 0: warm-up
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
                        const unsigned long long first = (p[i] - v.pool) / S / 32, last = (p[i] + sz[i] - 1 - v.pool) / S / 32;
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
                    const bool verified = max_fails == 0 && nulls == 0 && in_filled == 0 && overlaps == 0 && off_pool == 0;
                    row(fmt("{\"figure\":\"fig13_free\",\"allocator\":\"rw_malloc\",\"size\":\"%s\",\"N\":%u,"
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
