// gpudyn_bench_heap: the device allocator (gpudyn::heap_ref) on the matrix of
// Winter et al., "Are dynamic memory managers on GPUs slow?" (PPoPP'21), against
// CUDA's device malloc/free in the same process, plus its memory efficiency.
//
//   gpudyn_bench_heap --out FILE.json [--quick] [--cuda-budget SECONDS]
//
// Matrix: N threads (1K .. 1M) x S bytes (16 .. 8192, and mixed: uniform in
// [16, 4096] per thread from a fixed seed).  Each thread makes one request;
// three kernels are timed separately with CUDA events: alloc (malloc), free,
// and alloc+free (one kernel that mallocs, writes, reads back and frees).  Two
// calling patterns: converged (every lane of a warp calls together) and
// divergent (lane l calls in iteration l of a loop whose trip count is a kernel
// argument, followed by __syncwarp: each lane is alone inside malloc/free, and
// the compiler cannot merge the 32 calls into one).
// gpudyn: the heap is reset before each point, then one untimed warm-up
// (alloc, free: recorded as the cold sample) and kReps timed repeats, median.
// CUDA malloc: one warm-up for the whole run (every timed kernel once; its
// heap is set up at the first kernel that calls malloc), up to kCudaReps
// repeats, fewer when one repeat exceeds kCudaSlowMs (1M x 8192 B takes seconds
// per call); once the baseline has used --cuda-budget seconds of wall time, its
// remaining points are skipped (rows say so).  CUDA's heap limit
// (cudaLimitMallocHeapSize) is raised before any kernel to 12 GiB (quick: 1 GiB,
// kCudaMallocHeap*); its rows' bytes_held is that limit (CUDA reserves it whole).
//
// Every timed alloc is verified (not timed): no null where memory suffices,
// 16-byte alignment, each thread writes a pattern of its id over its whole
// allocation and a second kernel reads it back, and no two live ranges overlap
// (pointers sorted on the device with cub::DeviceRadixSort, neighbours checked by
// a kernel).  Every free: no bad free, and (gpudyn) no allocation left live.
//
// Memory (gpudyn only):
//  - churn: N allocations of S, then kChurnRounds rounds that each free a random
//    half (a hash bit per thread and round: half in expectation) and re-allocate
//    them with new sizes of the same distribution; then bytes held / bytes live
//    (sum of requested sizes), verified as above, and the largest request still
//    satisfiable (binary search with single-thread mallocs, each freed again).
//  - exhaustion: a heap of fixed size (kExhaustBytes): rounds of S until a null
//    appears; usable fraction = live requested bytes / bytes_mapped then.
//  - largest single allocation on the (empty) timing heap: binary search, then
//    the block is written and read back whole.
//
// Argument parsing, timing and JSON are written here compactly (the rw_heap and
// warp_heap benchmarks each have their own; nothing is shared yet).
#include <gpudyn/gpudyn.h>
#include <gpudyn/heap.cuh>

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

#define CUDA(call)                                                                                 \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define GD(call)                                                                                   \
    do {                                                                                           \
        gpudyn_status_t s_ = (call);                                                               \
        if (s_ != GPUDYN_SUCCESS) {                                                                \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, gpudyn_last_error_message()); \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

// ---- defaults (in one place) -------------------------------------------------
constexpr unsigned kBlock = 256;               // 8 warps per block, as the library's bulk kernels
constexpr unsigned kWarp = 32;
constexpr unsigned long long kMixedMin = 16;   // the survey's mixed sizes: uniform in [16, 4096]
constexpr unsigned long long kMixedMax = 4096;
constexpr unsigned long long kSeed = 20210227; // PPoPP'21; any fixed value
constexpr int kReps = 7, kRepsQuick = 2;       // gpudyn timed repeats per kernel (median)
constexpr int kCudaReps = 3, kCudaRepsQuick = 1;
constexpr double kCudaSlowMs = 100.0;          // one CUDA malloc sample above this is the last of its point
constexpr double kCudaBudgetS = 200.0;         // wall seconds of CUDA malloc points before the rest is skipped
// CUDA's device heap: 1M x 8192 B = 8 GiB live at once, plus its own overhead.
constexpr unsigned long long kCudaMallocHeap = 12ull << 30, kCudaMallocHeapQuick = 1ull << 30;
// gpudyn timing heap: the same 8 GiB, twice over for slabs and rounding (mapped
// up front, max_bytes = initial_bytes: no grow during the run).
constexpr unsigned long long kTimingHeap = 16ull << 30, kTimingHeapQuick = 2ull << 30;
// Exhaustion heap (the brief: "a heap of fixed size, e.g. 1 GiB").
constexpr unsigned long long kExhaustBytes = 1ull << 30, kExhaustBytesQuick = 64ull << 20;
constexpr unsigned kExhaustRoundsTarget = 64;  // rounds to fill the heap (round size follows from S)
constexpr unsigned kChurnRounds = 10;
constexpr unsigned long long kSearchResolution = 16;  // binary searches stop at this many bytes

// Counters written by the kernels (one device array).
enum counter { c_nulls, c_readback, c_overlaps, c_misaligned, c_bad_frees, c_live_bytes, c_live, c_count };

__host__ __device__ inline unsigned long long request_size(unsigned long long s, unsigned long long seed,
                                                           unsigned long long i) {
    using gpudyn::detail::mix64;
    return s ? s : kMixedMin + mix64(seed ^ mix64(i + gpudyn::detail::kGoldenGamma)) % (kMixedMax - kMixedMin + 1);
}
// The word pattern a thread writes into its allocation (distinct per owner and word).
__device__ __forceinline__ unsigned pattern(unsigned owner, unsigned long long word) {
    return (owner * 0x9E3779B1u) ^ unsigned(word) ^ unsigned(word >> 32);
}
__device__ __forceinline__ void count(unsigned long long* counters, counter c, unsigned long long v) {
    if (v) atomicAdd(counters + c, v);
}

// ---- the two allocators behind one interface ---------------------------------
struct heap_alloc {
    gpudyn::heap_ref h;
    __device__ explicit heap_alloc(const gpudyn_heap_view_t& v) : h(v) {}
    __device__ void* malloc(unsigned long long b) const { return h.malloc(b); }
    __device__ bool free(void* p) const { return h.free(p); }
};
struct cuda_alloc {
    __device__ explicit cuda_alloc(const gpudyn_heap_view_t&) {}
    __device__ void* malloc(unsigned long long b) const { return ::malloc(b); }
    __device__ bool free(void* p) const {
        ::free(p);
        return true;
    }
};

// Runs f() converged, or once per lane in a loop of `lanes` (= 32, a kernel
// argument) iterations where only lane l runs in iteration l; __syncwarp(mask)
// keeps each call alone.  `mask`: the lanes of the warp that call (all of them
// call this with the same mask).
template <bool Divergent, class F>
__device__ __forceinline__ void call(unsigned mask, unsigned lanes, F&& f) {
    if constexpr (Divergent) {
        const unsigned lane = gpudyn::detail::lane_index();
#pragma unroll 1
        for (unsigned l = 0; l < lanes; ++l) {
            if (lane == l) f();
            __syncwarp(mask);
        }
    } else {
        f();
    }
}

// ---- timed kernels ---------------------------------------------------------------
template <class A, bool Divergent>
__global__ void __launch_bounds__(kBlock) alloc_kernel(gpudyn_heap_view_t v, const unsigned* sizes, unsigned n,
                                                       unsigned lanes, void** out) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned mask = __ballot_sync(0xffffffffu, tid < n);
    if (tid >= n) return;
    const A a(v);
    const unsigned long long bytes = sizes[tid];
    void* p = nullptr;
    call<Divergent>(mask, lanes, [&] { p = a.malloc(bytes); });
    out[tid] = p;
}

template <class A, bool Divergent>
__global__ void __launch_bounds__(kBlock) free_kernel(gpudyn_heap_view_t v, void* const* ptrs, unsigned n,
                                                      unsigned lanes, unsigned long long* counters) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned mask = __ballot_sync(0xffffffffu, tid < n);
    if (tid >= n) return;
    const A a(v);
    void* p = ptrs[tid];
    bool ok = true;
    call<Divergent>(mask, lanes, [&] { ok = a.free(p); });
    if (!ok) count(counters, c_bad_frees, 1);
}

// malloc, write the id at both ends, read it back, free.
template <class A, bool Divergent>
__global__ void __launch_bounds__(kBlock) alloc_free_kernel(gpudyn_heap_view_t v, const unsigned* sizes, unsigned n,
                                                            unsigned lanes, unsigned long long* counters) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned mask = __ballot_sync(0xffffffffu, tid < n);
    if (tid >= n) return;
    const A a(v);
    const unsigned long long bytes = sizes[tid];
    bool null = false, wrong = false, bad_free = false;
    call<Divergent>(mask, lanes, [&] {
        unsigned* p = static_cast<unsigned*>(a.malloc(bytes));
        null = p == nullptr;
        if (p) {
            volatile unsigned* w = p;  // the read must come from memory
            w[0] = tid;
            w[bytes / 4 - 1] = ~tid;
            wrong = w[0] != tid || w[bytes / 4 - 1] != ~tid;
            bad_free = !a.free(p);
        }
    });
    count(counters, c_nulls, null);
    count(counters, c_readback, wrong);
    count(counters, c_bad_frees, bad_free);
}

// ---- verification kernels ---------------------------------------------------------
// One warp walks the allocations of its 32 threads one after the other, its lanes
// on consecutive words (coalesced).  Check = false writes the pattern, true reads it.
template <bool Check>
__global__ void __launch_bounds__(kBlock) pattern_kernel(void* const* ptrs, const unsigned* sizes, unsigned n,
                                                         unsigned long long* counters) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = threadIdx.x % kWarp, first = tid - lane;
    if (first >= n) return;  // whole warps leave together
    unsigned long long nulls = 0, misaligned = 0, wrong = 0;
    for (unsigned j = 0; j < kWarp && first + j < n; ++j) {
        const unsigned owner = first + j;
        unsigned char* p = static_cast<unsigned char*>(ptrs[owner]);
        const unsigned long long bytes = sizes[owner];
        if (p == nullptr) {
            nulls += lane == 0 && bytes != 0;
            continue;
        }
        const bool aligned = reinterpret_cast<unsigned long long>(p) % 16 == 0;
        misaligned += lane == 0 && !aligned;
        const unsigned long long words = aligned ? bytes / 4 : 0;
        unsigned* w = reinterpret_cast<unsigned*>(p);
        for (unsigned long long k = lane; k < words; k += kWarp) {
            if (Check) wrong += w[k] != pattern(owner, k);
            else w[k] = pattern(owner, k);
        }
        for (unsigned long long k = words * 4 + lane; k < bytes; k += kWarp) {
            const unsigned char b = static_cast<unsigned char>(pattern(owner, k));
            if (Check) wrong += p[k] != b;
            else p[k] = b;
        }
    }
    if (Check) {  // counted once, by the check pass
        count(counters, c_nulls, nulls);
        count(counters, c_misaligned, misaligned);
        count(counters, c_readback, wrong);
    }
}

// One block of `bytes` (16-byte aligned) written / read back by the whole grid.
template <bool Check>
__global__ void big_pattern_kernel(void* p, unsigned long long bytes, unsigned long long* counters) {
    unsigned* w = static_cast<unsigned*>(p);
    const unsigned long long words = bytes / 4;
    unsigned long long wrong = 0;
    for (unsigned long long k = blockIdx.x * 1ull * blockDim.x + threadIdx.x; k < words;
         k += 1ull * gridDim.x * blockDim.x) {
        if (Check) wrong += w[k] != pattern(0, k);
        else w[k] = pattern(0, k);
    }
    count(counters, c_readback, wrong);
}

__global__ void iota_kernel(unsigned* idx, unsigned n) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < n) idx[tid] = tid;
}
// keys: the pointers sorted ascending (nulls first); idx: their owners.
__global__ void overlap_kernel(const unsigned long long* keys, const unsigned* idx, const unsigned* sizes, unsigned n,
                               unsigned long long* counters) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x + 1;
    if (i >= n || keys[i - 1] == 0) return;
    count(counters, c_overlaps, keys[i - 1] + sizes[idx[i - 1]] > keys[i]);
}
// Non-null pointers and their requested bytes.
__global__ void tally_kernel(void* const* ptrs, const unsigned* sizes, unsigned n, unsigned long long* counters) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    const bool live = ptrs[tid] != nullptr;
    count(counters, c_live, live);
    count(counters, c_live_bytes, live ? sizes[tid] : 0);
}
__global__ void sizes_kernel(unsigned* sizes, unsigned n, unsigned long long s, unsigned long long seed) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid < n) sizes[tid] = unsigned(request_size(s, seed, tid));
}

// ---- churn and search kernels (gpudyn) --------------------------------------------
__device__ __forceinline__ bool churn_pick(unsigned long long seed, unsigned round, unsigned i) {
    return gpudyn::detail::mix64(seed ^ gpudyn::detail::mix64((unsigned long long)round << 32 | i)) & 1;
}
__global__ void __launch_bounds__(kBlock) churn_free_kernel(gpudyn_heap_view_t v, void** ptrs, unsigned n,
                                                            unsigned long long seed, unsigned round,
                                                            unsigned long long* counters) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n || !churn_pick(seed, round, tid)) return;
    if (!gpudyn::heap_ref(v).free(ptrs[tid])) count(counters, c_bad_frees, 1);
    ptrs[tid] = nullptr;
}
__global__ void __launch_bounds__(kBlock) churn_alloc_kernel(gpudyn_heap_view_t v, void** ptrs, unsigned* sizes,
                                                             unsigned n, unsigned long long s, unsigned long long seed,
                                                             unsigned round) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n || !churn_pick(seed, round, tid)) return;
    const unsigned long long bytes = request_size(s, seed + round + 1, tid);
    sizes[tid] = unsigned(bytes);
    ptrs[tid] = gpudyn::heap_ref(v).malloc(bytes);
}
// A single thread asks for `bytes`; *ok says whether it got them (freed again).
__global__ void try_malloc_kernel(gpudyn_heap_view_t v, unsigned long long bytes, int* ok, void** keep) {
    const gpudyn::heap_ref h(v);
    void* p = h.malloc(bytes);
    *ok = p != nullptr;
    if (keep) *keep = p;
    else if (p) h.free(p);
}

unsigned blocks(unsigned long long n) { return unsigned((n + kBlock - 1) / kBlock); }

// ---- host side -------------------------------------------------------------------
std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
    char buf[4096];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}
std::string json_list(const std::vector<float>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += fmt("%s%.6g", i ? "," : "", v[i]);
    return s + "]";
}
double median(std::vector<float> v) {
    if (v.empty()) return -1;  // JSON stays numeric; the driver reads < 0 as "not measured"
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}
double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct checks {
    unsigned long long nulls = 0, readback = 0, overlaps = 0, misaligned = 0, bad_frees = 0, leaked = 0;
    void operator+=(const checks& o) {
        nulls += o.nulls, readback += o.readback, overlaps += o.overlaps, misaligned += o.misaligned,
            bad_frees += o.bad_frees, leaked += o.leaked;
    }
    std::string json() const {
        return fmt("\"nulls\":%llu,\"bad_readback\":%llu,\"overlaps\":%llu,\"misaligned\":%llu,\"bad_frees\":%llu,"
                   "\"leaked\":%llu",
                   nulls, readback, overlaps, misaligned, bad_frees, leaked);
    }
};

gpudyn_heap_t make_heap(unsigned long long bytes) {
    gpudyn_heap_options_t o;
    GD(gpudyn_heap_options_init(&o));
    o.initial_bytes = bytes;
    o.max_bytes = bytes;  // metadata for exactly what is mapped; no grow in this run
    gpudyn_heap_t h = nullptr;
    GD(gpudyn_heap_create(&h, &o, nullptr));
    return h;
}
gpudyn_heap_stats_t stats_of(gpudyn_heap_t h) {
    gpudyn_heap_stats_t s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    GD(gpudyn_heap_get_stats(h, &s, nullptr));
    return s;
}

// Device buffers and the kernels' launch plumbing.
struct bench {
    unsigned capacity = 0;  // entries of every per-allocation buffer
    void** ptrs = nullptr;
    unsigned* sizes = nullptr;
    unsigned long long* sorted = nullptr;
    unsigned *idx = nullptr, *idx_sorted = nullptr;
    void* sort_temp = nullptr;
    size_t sort_temp_bytes = 0;
    unsigned long long* counters = nullptr;
    int* ok = nullptr;
    void** keep = nullptr;
    cudaEvent_t ev0{}, ev1{};

    explicit bench(unsigned cap) : capacity(cap) {
        CUDA(cudaMalloc(&ptrs, cap * sizeof(void*)));
        CUDA(cudaMalloc(&sizes, cap * sizeof(unsigned)));
        CUDA(cudaMalloc(&sorted, cap * sizeof(unsigned long long)));
        CUDA(cudaMalloc(&idx, cap * sizeof(unsigned)));
        CUDA(cudaMalloc(&idx_sorted, cap * sizeof(unsigned)));
        CUDA(cub::DeviceRadixSort::SortPairs(nullptr, sort_temp_bytes, reinterpret_cast<unsigned long long*>(ptrs),
                                             sorted, idx, idx_sorted, int(cap)));
        CUDA(cudaMalloc(&sort_temp, sort_temp_bytes));
        CUDA(cudaMalloc(&counters, c_count * sizeof(unsigned long long)));
        CUDA(cudaMalloc(&ok, sizeof(int)));
        CUDA(cudaMalloc(&keep, sizeof(void*)));
        CUDA(cudaEventCreate(&ev0));
        CUDA(cudaEventCreate(&ev1));
    }
    ~bench() {
        cudaFree(ptrs), cudaFree(sizes), cudaFree(sorted), cudaFree(idx), cudaFree(idx_sorted);
        cudaFree(sort_temp), cudaFree(counters), cudaFree(ok), cudaFree(keep);
        cudaEventDestroy(ev0), cudaEventDestroy(ev1);
    }

    template <class F>
    float time_ms(F&& launch) {
        CUDA(cudaEventRecord(ev0));
        launch();
        CUDA(cudaGetLastError());
        CUDA(cudaEventRecord(ev1));
        CUDA(cudaEventSynchronize(ev1));
        float t = 0;
        CUDA(cudaEventElapsedTime(&t, ev0, ev1));
        return t;
    }
    void zero_counters() { CUDA(cudaMemset(counters, 0, c_count * sizeof(unsigned long long))); }
    std::vector<unsigned long long> read_counters() {
        std::vector<unsigned long long> c(c_count);
        CUDA(cudaMemcpy(c.data(), counters, c_count * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
        return c;
    }
    void fill_sizes(unsigned n, unsigned long long s, unsigned long long seed) {
        sizes_kernel<<<blocks(n), kBlock>>>(sizes, n, s, seed);
        CUDA(cudaGetLastError());
    }

    // The three timed kernels for either allocator and calling pattern; `ptrs`
    // + offset lets the exhaustion rounds append.
    template <class A, bool Div>
    void launch_as(int op, const gpudyn_heap_view_t& v, unsigned n, unsigned offset) {
        if (n == 0) return;
        if (op == 0) alloc_kernel<A, Div><<<blocks(n), kBlock>>>(v, sizes + offset, n, kWarp, ptrs + offset);
        if (op == 1) free_kernel<A, Div><<<blocks(n), kBlock>>>(v, ptrs + offset, n, kWarp, counters);
        if (op == 2) alloc_free_kernel<A, Div><<<blocks(n), kBlock>>>(v, sizes + offset, n, kWarp, counters);
    }
    void launch(bool cuda, bool div, int op, const gpudyn_heap_view_t& v, unsigned n, unsigned offset = 0) {
        if (cuda) div ? launch_as<cuda_alloc, true>(op, v, n, offset) : launch_as<cuda_alloc, false>(op, v, n, offset);
        else div ? launch_as<heap_alloc, true>(op, v, n, offset) : launch_as<heap_alloc, false>(op, v, n, offset);
        CUDA(cudaGetLastError());
    }

    // Pattern write + read-back, alignment, nulls and overlaps of ptrs[0, n).
    checks verify(unsigned n) {
        if (n == 0) return checks{};
        zero_counters();
        pattern_kernel<false><<<blocks(n), kBlock>>>(ptrs, sizes, n, counters);
        pattern_kernel<true><<<blocks(n), kBlock>>>(ptrs, sizes, n, counters);
        iota_kernel<<<blocks(n), kBlock>>>(idx, n);
        CUDA(cudaGetLastError());
        size_t temp = sort_temp_bytes;
        CUDA(cub::DeviceRadixSort::SortPairs(sort_temp, temp, reinterpret_cast<const unsigned long long*>(ptrs),
                                             sorted, idx, idx_sorted, int(n)));
        if (n > 1) overlap_kernel<<<blocks(n - 1), kBlock>>>(sorted, idx_sorted, sizes, n, counters);
        CUDA(cudaGetLastError());
        const std::vector<unsigned long long> c = read_counters();
        checks k;
        k.nulls = c[c_nulls], k.readback = c[c_readback], k.overlaps = c[c_overlaps], k.misaligned = c[c_misaligned];
        return k;
    }
    // Non-null pointers among ptrs[offset, offset + n) and their requested bytes.
    void tally(unsigned n, unsigned offset, unsigned long long* live, unsigned long long* live_bytes) {
        zero_counters();
        tally_kernel<<<blocks(n), kBlock>>>(ptrs + offset, sizes + offset, n, counters);
        CUDA(cudaGetLastError());
        const std::vector<unsigned long long> c = read_counters();
        *live = c[c_live], *live_bytes = c[c_live_bytes];
    }
    bool try_malloc(const gpudyn_heap_view_t& v, unsigned long long bytes, void** kept = nullptr) {
        try_malloc_kernel<<<1, 1>>>(v, bytes, ok, kept ? keep : nullptr);
        CUDA(cudaGetLastError());
        int r = 0;
        CUDA(cudaMemcpy(&r, ok, sizeof r, cudaMemcpyDeviceToHost));
        if (kept) CUDA(cudaMemcpy(kept, keep, sizeof(void*), cudaMemcpyDeviceToHost));
        return r != 0;
    }
    // Largest request in [0, hi] a single thread gets now (to kSearchResolution),
    // assuming success is monotone in the size.
    unsigned long long largest_satisfiable(const gpudyn_heap_view_t& v, unsigned long long hi) {
        unsigned long long lo = 0, fail = hi + 1;
        while (fail - lo > kSearchResolution) {
            const unsigned long long mid = lo + (fail - lo) / 2;
            (try_malloc(v, mid) ? lo : fail) = mid;
        }
        return lo;
    }
};

std::string s_label(unsigned long long s) { return s ? fmt("%llu", s) : std::string("mixed"); }

}  // namespace

int main(int argc, char** argv) {
    const char* out_path = nullptr;
    bool quick = false;
    double cuda_budget_s = kCudaBudgetS;
    const char* usage = "usage: %s --out FILE.json [--quick] [--cuda-budget SECONDS]\n";
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--cuda-budget") && i + 1 < argc) cuda_budget_s = atof(argv[++i]);
        else {
            fprintf(stderr, usage, argv[0]);
            return 2;
        }
    }
    if (!out_path) {
        fprintf(stderr, usage, argv[0]);
        return 2;
    }
    const auto wall0 = std::chrono::steady_clock::now();
    // Before any kernel: CUDA's device heap is sized at the first kernel that uses it.
    const unsigned long long cuda_heap = quick ? kCudaMallocHeapQuick : kCudaMallocHeap;
    CUDA(cudaDeviceSetLimit(cudaLimitMallocHeapSize, cuda_heap));

    // Axes.
    const std::vector<unsigned> ns = quick ? std::vector<unsigned>{1u << 10, 1u << 14}
                                           : std::vector<unsigned>{1u << 10, 1u << 14, 1u << 16, 1u << 18, 1u << 20};
    const std::vector<unsigned long long> ss = quick ? std::vector<unsigned long long>{16, 4096, 0}
                                                     : std::vector<unsigned long long>{16, 64, 256, 1024, 4096, 8192, 0};
    const int reps = quick ? kRepsQuick : kReps, cuda_reps = quick ? kCudaRepsQuick : kCudaReps;
    const unsigned churn_n = ns.back();
    const unsigned long long timing_bytes = quick ? kTimingHeapQuick : kTimingHeap;
    const unsigned long long exhaust_bytes = quick ? kExhaustBytesQuick : kExhaustBytes;
    gpudyn_heap_t timing = make_heap(timing_bytes), exhaust = make_heap(exhaust_bytes);
    gpudyn_heap_view_t tv, ev;
    GD(gpudyn_heap_get_view(timing, &tv));
    GD(gpudyn_heap_get_view(exhaust, &ev));
    const gpudyn_heap_stats_t t0 = stats_of(timing), e0 = stats_of(exhaust);
    // Buffers: the largest N, or every allocation of a full exhaustion heap of
    // the smallest size plus one round.
    const unsigned long long exhaust_cap = e0.bytes_mapped / kMixedMin;
    const unsigned capacity = unsigned(
        std::max<unsigned long long>(ns.back(), exhaust_cap + exhaust_cap / kExhaustRoundsTarget + kWarp));
    bench b(capacity);

    const size_t total = ns.size() * ss.size() * 2 * 2 + 2 * ss.size() + 1;
    size_t done = 0;
    auto progress = [&](const std::string& label) {
        fprintf(stderr, "progress %zu %zu %s\n", ++done, total, label.c_str());
    };
    std::vector<std::string> rows;

    // Warm-up of the whole run: every timed kernel runs once (lazy module loading
    // would otherwise land in the first sample of a point) and CUDA's device heap
    // is set up here, not inside a timed point.
    b.fill_sizes(kBlock, 16, kSeed);
    for (int cuda = 0; cuda < 2; ++cuda)
        for (int div = 0; div < 2; ++div)
            for (int op = 0; op < 3; ++op) b.launch(cuda, div, op, tv, kBlock);  // alloc, free, alloc+free
    CUDA(cudaDeviceSynchronize());
    GD(gpudyn_heap_reset(timing, nullptr));
    double cuda_spent_s = 0;

    // ---- the matrix ------------------------------------------------------------
    for (unsigned n : ns)
        for (unsigned long long s : ss) {
            b.fill_sizes(n, s, kSeed);
            unsigned long long bytes_live = 0;
            for (unsigned i = 0; i < n; ++i) bytes_live += request_size(s, kSeed, i);
            for (int div = 0; div < 2; ++div)
                for (int cuda = 0; cuda < 2; ++cuda) {
                    const char* mode = div ? "divergent" : "converged";
                    progress(fmt("%s %s N=%u S=%s", cuda ? "cuda_malloc" : "heap", mode, n, s_label(s).c_str()));
                    std::string head = fmt("{\"kind\":\"matrix\",\"allocator\":\"%s\",\"mode\":\"%s\",\"n\":%u,"
                                           "\"s\":\"%s\",\"bytes_live\":%llu",
                                           cuda ? "cuda_malloc" : "heap", mode, n, s_label(s).c_str(), bytes_live);
                    if (cuda && cuda_spent_s > cuda_budget_s) {
                        rows.push_back(head + ",\"skipped\":true}");
                        continue;
                    }
                    const auto point0 = std::chrono::steady_clock::now();
                    std::vector<float> ta, tf, taf;
                    float cold_alloc = -1, cold_free = -1;
                    checks k;
                    gpudyn_heap_stats_t held{}, after{};
                    if (!cuda) {  // a fresh heap, then the untimed warm-up (kept as the cold sample)
                        GD(gpudyn_heap_reset(timing, nullptr));
                        cold_alloc = b.time_ms([&] { b.launch(false, div, 0, tv, n); });
                        k += b.verify(n);
                        b.zero_counters();
                        cold_free = b.time_ms([&] { b.launch(false, div, 1, tv, n); });
                        k.bad_frees += b.read_counters()[c_bad_frees];
                    }
                    for (int r = 0; r < (cuda ? cuda_reps : reps); ++r) {
                        ta.push_back(b.time_ms([&] { b.launch(cuda, div, 0, tv, n); }));
                        k += b.verify(n);
                        if (!cuda) held = stats_of(timing);
                        b.zero_counters();
                        tf.push_back(b.time_ms([&] { b.launch(cuda, div, 1, tv, n); }));
                        k.bad_frees += b.read_counters()[c_bad_frees];
                        if (!cuda) {
                            after = stats_of(timing);
                            k.leaked += after.allocations;
                        }
                        if (cuda && ta.back() + tf.back() > kCudaSlowMs) break;
                    }
                    b.zero_counters();
                    if (!cuda) b.launch(false, div, 2, tv, n);  // warm-up (checked too)
                    for (int r = 0; r < (cuda ? cuda_reps : reps); ++r) {
                        taf.push_back(b.time_ms([&] { b.launch(cuda, div, 2, tv, n); }));
                        if (cuda && taf.back() > kCudaSlowMs) break;
                    }
                    {
                        const std::vector<unsigned long long> c = b.read_counters();
                        k.nulls += c[c_nulls], k.readback += c[c_readback], k.bad_frees += c[c_bad_frees];
                    }
                    if (!cuda) k.leaked += stats_of(timing).allocations;
                    if (cuda) cuda_spent_s += seconds_since(point0);
                    rows.push_back(head + fmt(",\"alloc_ms\":%.6g,\"free_ms\":%.6g,\"alloc_free_ms\":%.6g,"
                                              "\"alloc_samples\":%s,\"free_samples\":%s,\"alloc_free_samples\":%s,"
                                              "\"cold_alloc_ms\":%.6g,\"cold_free_ms\":%.6g,"
                                              "\"bytes_held\":%llu,\"bytes_allocated\":%llu,\"bytes_held_after_free\":%llu,",
                                              median(ta), median(tf), median(taf), json_list(ta).c_str(),
                                              json_list(tf).c_str(), json_list(taf).c_str(), cold_alloc, cold_free,
                                              cuda ? cuda_heap : (unsigned long long)held.bytes_held,
                                              cuda ? 0ull : (unsigned long long)held.bytes_allocated,
                                              cuda ? cuda_heap : (unsigned long long)after.bytes_held) +
                                   k.json() + "}");
                }
        }

    // ---- churn -----------------------------------------------------------------
    for (unsigned long long s : ss) {
        progress(fmt("churn N=%u S=%s", churn_n, s_label(s).c_str()));
        const unsigned n = churn_n;
        GD(gpudyn_heap_reset(timing, nullptr));
        b.fill_sizes(n, s, kSeed);
        b.launch(false, false, 0, tv, n);
        b.zero_counters();
        std::vector<float> tf, ta;
        for (unsigned r = 0; r < kChurnRounds; ++r) {
            tf.push_back(b.time_ms([&] { churn_free_kernel<<<blocks(n), kBlock>>>(tv, b.ptrs, n, kSeed, r, b.counters); }));
            ta.push_back(b.time_ms([&] {
                churn_alloc_kernel<<<blocks(n), kBlock>>>(tv, b.ptrs, b.sizes, n, s, kSeed, r);
            }));
        }
        checks k;
        k.bad_frees = b.read_counters()[c_bad_frees];
        k += b.verify(n);
        unsigned long long live = 0, live_bytes = 0;
        b.tally(n, 0, &live, &live_bytes);
        const gpudyn_heap_stats_t st = stats_of(timing);
        const unsigned long long largest = b.largest_satisfiable(tv, st.bytes_mapped);
        GD(gpudyn_heap_clear_status(timing, nullptr));
        b.zero_counters();
        b.launch(false, false, 1, tv, n);
        k.bad_frees += b.read_counters()[c_bad_frees];
        k.leaked = stats_of(timing).allocations;
        rows.push_back(fmt("{\"kind\":\"churn\",\"n\":%u,\"s\":\"%s\",\"rounds\":%u,\"live\":%llu,\"bytes_live\":%llu,"
                           "\"bytes_held\":%llu,\"bytes_allocated\":%llu,\"allocations\":%llu,\"bytes_mapped\":%llu,"
                           "\"held_over_live\":%.6g,\"largest_satisfiable\":%llu,\"largest_free_bytes\":%llu,"
                           "\"free_ms\":%s,\"realloc_ms\":%s,",
                           n, s_label(s).c_str(), kChurnRounds, live, live_bytes,
                           (unsigned long long)st.bytes_held, (unsigned long long)st.bytes_allocated,
                           (unsigned long long)st.allocations, (unsigned long long)st.bytes_mapped,
                           live_bytes ? double(st.bytes_held) / double(live_bytes) : -1.0, largest,
                           (unsigned long long)st.largest_free_bytes, json_list(tf).c_str(), json_list(ta).c_str()) +
                       k.json() + "}");
    }

    // ---- exhaustion --------------------------------------------------------------
    for (unsigned long long s : ss) {
        progress(fmt("exhaustion %llu B heap, S=%s", exhaust_bytes, s_label(s).c_str()));
        GD(gpudyn_heap_reset(exhaust, nullptr));
        const unsigned long long mean = s ? s : (kMixedMin + kMixedMax) / 2;
        const unsigned per_round = unsigned(std::max<unsigned long long>(
            kWarp, e0.bytes_mapped / mean / kExhaustRoundsTarget / kWarp * kWarp));
        unsigned filled = 0, rounds = 0, failed_round_nulls = 0;
        unsigned long long live = 0, live_bytes = 0;
        bool capacity_reached = false;
        // Sizes of every slot up front (index = allocation number).
        b.fill_sizes(capacity, s, kSeed);
        for (;;) {
            if (filled + per_round > capacity) {
                capacity_reached = true;
                break;
            }
            b.launch(false, false, 0, ev, per_round, filled);
            ++rounds;
            unsigned long long got = 0, got_bytes = 0;
            b.tally(per_round, filled, &got, &got_bytes);
            filled += per_round;
            live += got, live_bytes += got_bytes;
            if (got < per_round) {
                failed_round_nulls = unsigned(per_round - got);
                break;
            }
        }
        const gpudyn_heap_stats_t st = stats_of(exhaust);
        checks k = b.verify(filled);
        k.nulls -= failed_round_nulls;  // the nulls of the last round are the point of the experiment
        rows.push_back(fmt("{\"kind\":\"exhaustion\",\"s\":\"%s\",\"heap_bytes_mapped\":%llu,\"round\":%u,"
                           "\"rounds\":%u,\"live\":%llu,\"bytes_live\":%llu,\"usable_fraction\":%.6g,"
                           "\"nulls_in_last_round\":%u,\"capacity_reached\":%s,\"bytes_held\":%llu,"
                           "\"bytes_allocated\":%llu,\"failed_allocations\":%llu,",
                           s_label(s).c_str(), (unsigned long long)st.bytes_mapped, per_round, rounds, live, live_bytes,
                           double(live_bytes) / double(st.bytes_mapped), failed_round_nulls,
                           capacity_reached ? "true" : "false", (unsigned long long)st.bytes_held,
                           (unsigned long long)st.bytes_allocated, (unsigned long long)st.failed_allocations) +
                       k.json() + "}");
    }

    // ---- largest single allocation (empty timing heap) -----------------------------
    {
        progress("largest single allocation");
        GD(gpudyn_heap_reset(timing, nullptr));
        const unsigned long long largest = b.largest_satisfiable(tv, t0.bytes_mapped);
        void* p = nullptr;
        checks k;
        if (largest && b.try_malloc(tv, largest, &p) && p) {
            b.zero_counters();
            big_pattern_kernel<false><<<1024, kBlock>>>(p, largest, b.counters);
            big_pattern_kernel<true><<<1024, kBlock>>>(p, largest, b.counters);
            CUDA(cudaGetLastError());
            k.readback = b.read_counters()[c_readback];
            k.misaligned = reinterpret_cast<unsigned long long>(p) % 16 != 0;
            GD(gpudyn_heap_free(timing, reinterpret_cast<const uint64_t*>(b.keep), 1, nullptr));
        } else {
            k.nulls = 1;
        }
        const gpudyn_heap_stats_t st = stats_of(timing);
        k.bad_frees = st.bad_frees;
        k.leaked = st.allocations;
        rows.push_back(fmt("{\"kind\":\"largest\",\"bytes\":%llu,\"heap_bytes_mapped\":%llu,", largest,
                           (unsigned long long)t0.bytes_mapped) +
                       k.json() + "}");
    }

    const double wall_s = seconds_since(wall0);
    FILE* f = fopen(out_path, "w");
    if (!f) {
        perror(out_path);
        return 1;
    }
    cudaDeviceProp prop;
    int dev = 0;
    CUDA(cudaGetDevice(&dev));
    CUDA(cudaGetDeviceProperties(&prop, dev));
    fprintf(f,
            "{\"program\":\"gpudyn_bench_heap\",\"quick\":%s,\"gpu\":\"%s\",\"reps\":%d,\"cuda_reps\":%d,"
            "\"cuda_slow_ms\":%g,\"cuda_budget_s\":%g,\"cuda_spent_s\":%.2f,\"cuda_malloc_heap_bytes\":%llu,"
            "\"timing_heap_bytes_mapped\":%llu,\"exhaust_heap_bytes_mapped\":%llu,\"block\":%u,\"seed\":%llu,"
            "\"mixed_min\":%llu,\"mixed_max\":%llu,\"churn_rounds\":%u,\"wall_seconds\":%.2f,\"rows\":[\n",
            quick ? "true" : "false", prop.name, reps, cuda_reps, kCudaSlowMs, cuda_budget_s, cuda_spent_s, cuda_heap,
            (unsigned long long)t0.bytes_mapped, (unsigned long long)e0.bytes_mapped, kBlock, kSeed, kMixedMin,
            kMixedMax, kChurnRounds, wall_s);
    for (size_t i = 0; i < rows.size(); ++i) fprintf(f, "%s%s\n", rows[i].c_str(), i + 1 < rows.size() ? "," : "");
    fprintf(f, "]}\n");
    fclose(f);
    GD(gpudyn_heap_destroy(timing));
    GD(gpudyn_heap_destroy(exhaust));
    return 0;
}
