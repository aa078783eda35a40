// gpudyn_bench_heap: the device allocator (gpudyn::heap_ref) on the matrix of
// Winter et al., "Are dynamic memory managers on GPUs slow?" (PPoPP'21), against
// CUDA's device malloc/free in the same process, plus its memory efficiency.
//
//   gpudyn_bench_heap --out FILE.json [--quick] [--cuda-budget SECONDS]
//   gpudyn_bench_heap --only-cuda N S MODE [--quick]     (one baseline point, see below)
//   gpudyn_bench_heap --out FILE.json --matrix-only N    (the heap's matrix rows and floors
//                                                          at N threads only: for A/B builds)
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
// Each timed launch is queued behind a kernel that holds the stream for
// kHoldNs, so the start event is not recorded on an idle stream while the host
// is still launching (at 1K threads that launch latency, 5-70 us, was most of
// a sample: a 1K x 16 B alloc read 0.010-0.078 ms).
//
// CUDA malloc runs in child processes (this program with --cuda-server), never
// in the process that measures gpudyn: a fault inside CUDA's device malloc is
// sticky (the whole CUDA context is lost), so in-process it took every later
// point and the heap's memory metrics with it.  The parent measures everything
// of gpudyn first, releases its heaps, then sends the CUDA points to a child
// one line at a time ("N S DIVERGENT" on its stdin; one JSON row back on its
// stdout).  A child that dies mid-point gives a row with "crashed":true and the
// tail of its stderr; the next point starts a fresh child.  The points go in
// order of estimated cost (N x mean S, converged first), so the time budget
// (--cuda-budget wall seconds, child start included) buys as many points as it
// can; a point whose cost, extrapolated from the last measured point of its
// mode, exceeds what is left is skipped, and a point still running when the
// budget runs out is killed (both: "skipped":true with a "reason").  In the
// child: one warm-up of every kernel (CUDA's heap is set up there), then up to
// kCudaReps repeats, just 1 when the first alloc + free sample exceeds
// kCudaSlowMs (1M x 1 KiB takes tens of seconds per call).  CUDA's heap limit
// (cudaLimitMallocHeapSize) is 12 GiB (quick: 1 GiB, kCudaMallocHeap*), set
// only in the child; its rows' bytes_held is that limit (CUDA reserves it whole).
//   gpudyn_bench_heap --only-cuda N S MODE [--quick]   (S: bytes or 0 = mixed,
//   MODE: converged|divergent) runs one CUDA point alone and prints its row.
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
//    Then free-all: every block freed, and the largest request one thread gets
//    (binary search) against the fresh heap's; then a phase change: blocks of
//    kPhaseBytes until one fails (usable fraction again).
//  - largest single allocation on the (empty) timing heap: binary search, then
//    the block is written and read back whole.
// Floors (rows "floor", no allocator): each N and calling pattern timed as above
// with no request ("empty": the launch and the loop) and with one uncontended
// atomicAdd per call ("bump"): below what any allocator in global memory takes.
//
// Argument parsing, timing and JSON are written here compactly (the rw_heap and
// warp_heap benchmarks each have their own; nothing is shared yet).
#include <gpudyn/gpudyn.h>
#include <gpudyn/heap.cuh>

#include <cub/device/device_radix_sort.cuh>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../bench_check.hpp" // CUDA(), GD()

extern char** environ; // for posix_spawn of the CUDA malloc child

namespace {

// ---- defaults (in one place) -------------------------------------------------
constexpr unsigned kBlock = 256; // 8 warps per block, as the library's bulk kernels
constexpr unsigned kWarp = 32;
constexpr unsigned long long kMixedMin = 16; // the survey's mixed sizes: uniform in [16, 4096]
constexpr unsigned long long kMixedMax = 4096;
constexpr unsigned long long kSeed = 20210227; // PPoPP'21; any fixed value
constexpr int kReps = 7, kRepsQuick = 2;       // gpudyn timed repeats per kernel (median)
constexpr int kCudaReps = 3, kCudaRepsQuick = 1;
constexpr double kCudaSlowMs = 1000.0;    // a first alloc + free sample above this: 1 repeat of everything
constexpr double kCudaBudgetS = 200.0;    // wall seconds of CUDA malloc points before the rest is skipped
constexpr double kCudaEstimateMinS = 1.0; // extrapolate costs only from points this long (not overhead-bound)
constexpr size_t kErrorTail = 600;        // characters of a crashed child's stderr kept in its row
// CUDA's device heap: 1M x 8192 B = 8 GiB live at once, plus its own overhead.
constexpr unsigned long long kCudaMallocHeap = 12ull << 30, kCudaMallocHeapQuick = 1ull << 30;
// gpudyn timing heap: the same 8 GiB, twice over for slabs and rounding (mapped
// up front, max_bytes = initial_bytes: no grow during the run).
constexpr unsigned long long kTimingHeap = 16ull << 30, kTimingHeapQuick = 2ull << 30;
// Exhaustion heap (the brief: "a heap of fixed size, e.g. 1 GiB").
constexpr unsigned long long kExhaustBytes = 1ull << 30, kExhaustBytesQuick = 64ull << 20;
constexpr unsigned kExhaustRoundsTarget = 64;          // rounds to fill the heap (round size follows from S)
constexpr unsigned long long kPhaseBytes = 1ull << 20; // the blocks of the phase after free-all
constexpr unsigned kChurnRounds = 10;
constexpr unsigned long long kHoldNs = 50000;        // see time_ms
constexpr unsigned long long kSearchResolution = 16; // binary searches stop at this many bytes

// Counters written by the kernels (one device array).
enum counter {
    c_nulls,
    c_readback,
    c_overlaps,
    c_misaligned,
    c_bad_frees,
    c_live_bytes,
    c_live,
    c_count
};

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

// Holds the stream for ns nanoseconds of the GPU's global timer (time_ms).
__global__ void hold_kernel(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    while (t - t0 < ns);
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
__global__ void __launch_bounds__(kBlock)
    alloc_kernel(gpudyn_heap_view_t v, const unsigned* sizes, unsigned n, unsigned lanes, void** out) {
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
__global__ void __launch_bounds__(kBlock)
    free_kernel(gpudyn_heap_view_t v, void* const* ptrs, unsigned n, unsigned lanes, unsigned long long* counters) {
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
        null = p == nullptr; // CUDA's heap can run out: a null is counted, never touched
        if (p) {
            if (bytes >= 4) {             // both ends inside the request (sizes are >= 16; the guard keeps it so)
                volatile unsigned* w = p; // the read must come from memory
                w[0] = tid;
                w[bytes / 4 - 1] = ~tid;
                wrong = w[0] != tid || w[bytes / 4 - 1] != ~tid;
            }
            bad_free = !a.free(p);
        }
    });
    count(counters, c_nulls, null);
    count(counters, c_readback, wrong);
    count(counters, c_bad_frees, bad_free);
}

// ---- floors -------------------------------------------------------------------------
// What no device allocator can go below with these launches and calling patterns
// (rows "floor"; the driver sets them beside the targets).  "empty" makes no
// request: the launch, and the divergent loop with its __syncwarp, alone.
// "bump" makes the cheapest request an allocator keeping its state in global
// memory can make: one atomicAdd on a word of the caller's warp (no contention
// between warps, no bounds, no reuse), in a kernel of few registers (full
// occupancy).  A divergent call cannot share that round trip with its lanes.
template <bool Divergent, bool Bump>
__global__ void __launch_bounds__(kBlock)
    floor_kernel(unsigned long long* words, unsigned n, unsigned lanes, void** out) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned mask = __ballot_sync(0xffffffffu, tid < n);
    if (tid >= n) return;
    unsigned long long p = tid;
    call<Divergent>(mask, lanes, [&] {
        if constexpr (Bump) p = atomicAdd(words + tid / kWarp, 16ull);
    });
    out[tid] = reinterpret_cast<void*>(p);
}

// ---- verification kernels ---------------------------------------------------------
// One warp walks the allocations of its 32 threads one after the other, its lanes
// on consecutive words (coalesced).  Check = false writes the pattern, true reads it.
template <bool Check>
__global__ void __launch_bounds__(kBlock)
    pattern_kernel(void* const* ptrs, const unsigned* sizes, unsigned n, unsigned long long* counters) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = threadIdx.x % kWarp, first = tid - lane;
    if (first >= n) return; // whole warps leave together
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
    if (Check) { // counted once, by the check pass
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
__global__ void __launch_bounds__(kBlock)
    churn_free_kernel(gpudyn_heap_view_t v, void** ptrs, unsigned n, unsigned long long seed, unsigned round,
                      unsigned long long* counters) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n || !churn_pick(seed, round, tid)) return;
    if (!gpudyn::heap_ref(v).free(ptrs[tid])) count(counters, c_bad_frees, 1);
    ptrs[tid] = nullptr;
}
__global__ void __launch_bounds__(kBlock)
    churn_alloc_kernel(gpudyn_heap_view_t v, void** ptrs, unsigned* sizes, unsigned n, unsigned long long s,
                       unsigned long long seed, unsigned round) {
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
    if (v.empty()) return -1; // JSON stays numeric; the driver reads < 0 as "not measured"
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
        return fmt(
            "\"nulls\":%llu,\"bad_readback\":%llu,\"overlaps\":%llu,\"misaligned\":%llu,\"bad_frees\":%llu,"
            "\"leaked\":%llu",
            nulls, readback, overlaps, misaligned, bad_frees, leaked);
    }
};

gpudyn_heap_t make_heap(unsigned long long bytes) {
    gpudyn_heap_options_t o;
    GD(gpudyn_heap_options_init(&o));
    o.initial_bytes = bytes;
    o.max_bytes = bytes; // metadata for exactly what is mapped; no grow in this run
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
    unsigned capacity = 0; // entries of every per-allocation buffer
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
        hold_kernel<<<1, 1>>>(kHoldNs); // the launch below is queued before ev0 is reached
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
        CUDA(cub::DeviceRadixSort::SortPairs(sort_temp, temp, reinterpret_cast<const unsigned long long*>(ptrs), sorted,
                                             idx, idx_sorted, int(n)));
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

// A string as a JSON string literal (error text from a crashed child).
std::string json_string(const std::string& s) {
    std::string o = "\"";
    for (const unsigned char c : s) {
        if (c == '"' || c == '\\') o += '\\', o += char(c);
        else if (c == '\n') o += "\\n";
        else if (c < 0x20 || c >= 0x7f) o += fmt("\\u%04x", c); // stays valid JSON whatever the bytes
        else o += char(c);
    }
    return o + "\"";
}

// The axes and settings of a run: the same in the parent and in the CUDA child.
struct config {
    bool quick;
    std::vector<unsigned> ns;
    std::vector<unsigned long long> ss;
    int reps, cuda_reps;
    unsigned long long cuda_heap;
    explicit config(bool q)
        : quick(q),
          ns(q ? std::vector<unsigned>{1u << 10, 1u << 14}
               : std::vector<unsigned>{1u << 10, 1u << 14, 1u << 16, 1u << 18, 1u << 20}),
          ss(q ? std::vector<unsigned long long>{16, 4096, 0}
               : std::vector<unsigned long long>{16, 64, 256, 1024, 4096, 8192, 0}),
          reps(q ? kRepsQuick : kReps),
          cuda_reps(q ? kCudaRepsQuick : kCudaReps),
          cuda_heap(q ? kCudaMallocHeapQuick : kCudaMallocHeap) {}
};

// The first fields of a matrix row (bytes_live: the sum of the requested sizes).
std::string row_head(bool cuda, bool div, unsigned n, unsigned long long s) {
    unsigned long long bytes_live = 0;
    for (unsigned i = 0; i < n; ++i) bytes_live += request_size(s, kSeed, i);
    return fmt("{\"kind\":\"matrix\",\"allocator\":\"%s\",\"mode\":\"%s\",\"n\":%u,\"s\":\"%s\",\"bytes_live\":%llu",
               cuda ? "cuda_malloc" : "heap", div ? "divergent" : "converged", n, s_label(s).c_str(), bytes_live);
}
// The timing and memory fields of a measured matrix row (either allocator).
std::string timing_fields(const std::vector<float>& ta, const std::vector<float>& tf, const std::vector<float>& taf,
                          float cold_alloc, float cold_free, unsigned long long held, unsigned long long allocated,
                          unsigned long long held_after) {
    return fmt(
        ",\"alloc_ms\":%.6g,\"free_ms\":%.6g,\"alloc_free_ms\":%.6g,\"alloc_samples\":%s,\"free_samples\":%s,"
        "\"alloc_free_samples\":%s,\"cold_alloc_ms\":%.6g,\"cold_free_ms\":%.6g,\"bytes_held\":%llu,"
        "\"bytes_allocated\":%llu,\"bytes_held_after_free\":%llu,",
        median(ta), median(tf), median(taf), json_list(ta).c_str(), json_list(tf).c_str(), json_list(taf).c_str(),
        cold_alloc, cold_free, held, allocated, held_after);
}

// ---- CUDA malloc: the child's side ----------------------------------------------------
// One point of the baseline: up to cuda_reps repeats of alloc (verified) + free,
// then of alloc+free; 1 of each when the first alloc + free sample is slow.
std::string cuda_point(bench& b, const config& c, unsigned n, unsigned long long s, bool div) {
    const auto t0 = std::chrono::steady_clock::now();
    const gpudyn_heap_view_t none{}; // cuda_alloc ignores the view
    b.fill_sizes(n, s, kSeed);
    std::vector<float> ta, tf, taf;
    checks k;
    int reps = c.cuda_reps;
    for (int r = 0; r < reps; ++r) {
        ta.push_back(b.time_ms([&] { b.launch(true, div, 0, none, n); }));
        k += b.verify(n); // nulls (CUDA's heap ran out) are counted; the kernels skip them
        b.zero_counters();
        tf.push_back(b.time_ms([&] { b.launch(true, div, 1, none, n); })); // free(nullptr) is a no-op
        k.bad_frees += b.read_counters()[c_bad_frees];
        if (r == 0 && ta[0] + tf[0] > kCudaSlowMs) reps = 1;
    }
    b.zero_counters();
    for (int r = 0; r < reps; ++r) taf.push_back(b.time_ms([&] { b.launch(true, div, 2, none, n); }));
    const std::vector<unsigned long long> cnt = b.read_counters();
    k.nulls += cnt[c_nulls], k.readback += cnt[c_readback], k.bad_frees += cnt[c_bad_frees];
    return row_head(true, div, n, s) + timing_fields(ta, tf, taf, -1, -1, c.cuda_heap, 0, c.cuda_heap) + k.json() +
           fmt(",\"repeats\":%d,\"seconds\":%.3f}", reps, seconds_since(t0));
}

// --cuda-server: points "N S DIVERGENT" from stdin, one JSON row each on stdout
// (nothing else goes there).  --only-cuda: the one point given.
int cuda_child(const config& c, const unsigned* only_n, unsigned long long only_s, bool only_div) {
    CUDA(cudaDeviceSetLimit(cudaLimitMallocHeapSize, c.cuda_heap)); // before any kernel
    bench b(c.ns.back());
    // Warm-up: every kernel once (lazy loading) and CUDA's heap set up here, not in a point.
    const gpudyn_heap_view_t none{};
    b.fill_sizes(kBlock, 16, kSeed);
    for (int div = 0; div < 2; ++div)
        for (int op = 0; op < 3; ++op) b.launch(true, div, op, none, kBlock);
    CUDA(cudaDeviceSynchronize());
    unsigned n = 0;
    unsigned long long s = 0;
    int div = 0;
    for (;;) {
        if (only_n) n = *only_n, s = only_s, div = only_div;
        else if (scanf("%u %llu %d", &n, &s, &div) != 3) return 0; // EOF: the parent is done
        if (n == 0 || n > b.capacity) {
            fprintf(stderr, "cuda child: N=%u is outside [1, %u]\n", n, b.capacity);
            return 2;
        }
        printf("%s\n", cuda_point(b, c, n, s, div != 0).c_str());
        fflush(stdout);
        if (only_n) return 0;
    }
}

// ---- CUDA malloc: the parent's side ---------------------------------------------------
// A child process serving CUDA points; restarted after it dies.
class cuda_child_process {
public:
    explicit cuda_child_process(bool quick) : quick_(quick) {}
    ~cuda_child_process() { stop(); }
    enum result {
        row,
        died,
        killed
    };
    // Runs one point within limit_s seconds (child start included): the row, or
    // why there is none (the child's exit and stderr tail; or the time limit).
    result run(unsigned n, unsigned long long s, bool div, double limit_s, std::string* out) {
        const auto t0 = std::chrono::steady_clock::now();
        if (pid_ < 0 && !start(out)) return died;
        const std::string cmd = fmt("%u %llu %d\n", n, s, int(div));
        if (write(to_, cmd.data(), cmd.size()) != ssize_t(cmd.size())) { // SIGPIPE is ignored: EPIPE
            *out = reap();
            return died;
        }
        for (;;) {
            const size_t nl = buf_.find('\n');
            if (nl != std::string::npos) {
                *out = buf_.substr(0, nl);
                buf_.erase(0, nl + 1);
                if (out->size() > 1 && out->front() == '{' && out->back() == '}') return row;
                *out = "not a JSON row on the child's stdout: " + out->substr(0, kErrorTail);
                stop();
                return died;
            }
            const double left = limit_s - seconds_since(t0);
            if (left <= 0) {
                kill(pid_, SIGKILL); // our own child, by its id
                reap();
                *out = fmt("killed after %.1f s: the CUDA malloc time budget ran out", limit_s);
                return killed;
            }
            pollfd p{from_, POLLIN, 0};
            const int r = poll(&p, 1, int(std::min(left, 1e6) * 1000) + 1);
            if (r < 0 && errno != EINTR) {
                *out = fmt("poll: %s", strerror(errno));
                stop();
                return died;
            }
            if (r <= 0) continue;
            char chunk[4096];
            const ssize_t got = read(from_, chunk, sizeof chunk);
            if (got > 0) buf_.append(chunk, size_t(got));
            else if (got == 0 || errno != EINTR) { // EOF: the child is gone
                *out = reap();
                return died;
            }
        }
    }
    // Closing its stdin ends the child normally.
    void stop() {
        if (pid_ >= 0) reap();
    }

private:
    bool start(std::string* error) {
        char exe[4096];
        const ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        char tmpl[] = "/tmp/gpudyn_bench_heap_cuda.XXXXXX";
        const int err = mkostemp(tmpl, O_CLOEXEC);
        int in[2] = {-1, -1}, out[2] = {-1, -1};
        if (len <= 0 || err < 0 || pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) {
            *error = fmt("cannot start the CUDA malloc child: %s", strerror(errno));
            for (int fd : {err, in[0], in[1], out[0], out[1]})
                if (fd >= 0) close(fd);
            if (err >= 0) unlink(tmpl);
            return false;
        }
        exe[len] = 0;
        err_path_ = tmpl;
        // dup2 onto 0, 1, 2 clears close-on-exec there; every other descriptor closes at exec.
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, in[0], 0);
        posix_spawn_file_actions_adddup2(&fa, out[1], 1);
        posix_spawn_file_actions_adddup2(&fa, err, 2);
        char* const argv[] = {const_cast<char*>("gpudyn_bench_heap"), const_cast<char*>("--cuda-server"),
                              quick_ ? const_cast<char*>("--quick") : nullptr, nullptr};
        const int rc = posix_spawn(&pid_, exe, &fa, nullptr, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(in[0]), close(out[1]), close(err);
        to_ = in[1], from_ = out[0];
        if (rc != 0) {
            pid_ = -1;
            *error = fmt("cannot start %s: %s", exe, strerror(rc));
            close(to_), close(from_), to_ = from_ = -1;
            unlink(err_path_.c_str());
            return false;
        }
        return true;
    }
    // Waits for the child; its exit and the tail of its stderr.
    std::string reap() {
        close(to_), close(from_), to_ = from_ = -1;
        int st = 0;
        while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {}
        pid_ = -1;
        buf_.clear();
        std::string text;
        if (FILE* f = fopen(err_path_.c_str(), "r")) {
            char chunk[4096];
            for (size_t got; (got = fread(chunk, 1, sizeof chunk, f)) > 0;) text.append(chunk, got);
            fclose(f);
        }
        unlink(err_path_.c_str());
        while (!text.empty() && isspace((unsigned char)text.back())) text.pop_back();
        if (text.size() > kErrorTail) text = "..." + text.substr(text.size() - kErrorTail);
        const std::string how = WIFEXITED(st)     ? fmt("exit status %d", WEXITSTATUS(st))
                                : WIFSIGNALED(st) ? fmt("signal %d", WTERMSIG(st))
                                                  : std::string("unknown exit");
        return text.empty() ? how : text + " (" + how + ")";
    }

    bool quick_;
    pid_t pid_ = -1;
    int to_ = -1, from_ = -1;
    std::string err_path_, buf_;
};

// A number field of a one-line JSON row ("key":value), or -1.
double row_number(const std::string& row, const char* key) {
    const size_t at = row.find(fmt("\"%s\":", key));
    return at == std::string::npos ? -1 : atof(row.c_str() + at + strlen(key) + 3);
}

} // namespace

int main(int argc, char** argv) {
    const char* out_path = nullptr;
    bool quick = false, server = false, only = false;
    unsigned only_n = 0;
    unsigned long long only_s = 0;
    bool only_div = false;
    unsigned matrix_only = 0; // N: the heap's matrix and floors at N threads, nothing else
    double cuda_budget_s = kCudaBudgetS;
    const char* usage =
        "usage: %s --out FILE.json [--quick] [--cuda-budget SECONDS]\n"
        "       %s --only-cuda N S converged|divergent [--quick]   (S in bytes, 0: mixed)\n"
        "       %s --out FILE.json --matrix-only N [--quick]\n";
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--cuda-budget") && i + 1 < argc) cuda_budget_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--cuda-server")) server = true;
        else if (!strcmp(argv[i], "--matrix-only") && i + 1 < argc)
            matrix_only = unsigned(strtoul(argv[++i], nullptr, 10));
        else if (!strcmp(argv[i], "--only-cuda") && i + 3 < argc &&
                 (!strcmp(argv[i + 3], "converged") || !strcmp(argv[i + 3], "divergent"))) {
            only = true;
            only_n = unsigned(strtoul(argv[i + 1], nullptr, 10));
            only_s = strtoull(argv[i + 2], nullptr, 10);
            only_div = !strcmp(argv[i + 3], "divergent");
            i += 3;
        } else {
            fprintf(stderr, usage, argv[0], argv[0], argv[0]);
            return 2;
        }
    }
    config cfg(quick);
    if (matrix_only) cfg.ns = {matrix_only};
    if (server || only) return cuda_child(cfg, only ? &only_n : nullptr, only_s, only_div);
    if (!out_path) {
        fprintf(stderr, usage, argv[0], argv[0], argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN); // a dead child's stdin must give EPIPE, not end this process
    const auto wall0 = std::chrono::steady_clock::now();
    const std::vector<unsigned>& ns = cfg.ns;
    const std::vector<unsigned long long>& ss = cfg.ss;
    const int reps = cfg.reps;
    const unsigned churn_n = ns.back();
    const unsigned long long timing_bytes = quick ? kTimingHeapQuick : kTimingHeap;
    const unsigned long long exhaust_bytes = quick ? kExhaustBytesQuick : kExhaustBytes;

    const size_t cuda_points = ns.size() * ss.size() * 2;
    const size_t total = ns.size() * ss.size() * 2 + 3 * ss.size() + 3 + cuda_points;
    size_t done = 0;
    auto progress = [&](const std::string& label) { // the point about to start
        fprintf(stderr, "progress %zu %zu %s\n", ++done, total, label.c_str());
    };
    std::vector<std::string> rows;
    gpudyn_heap_stats_t t0{}, e0{};

    // ---- gpudyn, in this process (no CUDA device malloc here) ----------------------
    {
        gpudyn_heap_t timing = make_heap(timing_bytes), exhaust = make_heap(exhaust_bytes);
        gpudyn_heap_view_t tv, ev;
        GD(gpudyn_heap_get_view(timing, &tv));
        GD(gpudyn_heap_get_view(exhaust, &ev));
        t0 = stats_of(timing), e0 = stats_of(exhaust);
        // Buffers: the largest N, or every allocation of a full exhaustion heap of
        // the smallest size plus one round.
        const unsigned long long exhaust_cap = e0.bytes_mapped / kMixedMin;
        const unsigned capacity =
            unsigned(std::max<unsigned long long>(ns.back(), exhaust_cap + exhaust_cap / kExhaustRoundsTarget + kWarp));
        bench b(capacity);

        // Warm-up of the whole run: every timed kernel runs once (lazy module loading
        // would otherwise land in the first sample of a point).
        b.fill_sizes(kBlock, 16, kSeed);
        for (int div = 0; div < 2; ++div)
            for (int op = 0; op < 3; ++op) b.launch(false, div, op, tv, kBlock); // alloc, free, alloc+free
        CUDA(cudaDeviceSynchronize());

        // ---- the matrix ------------------------------------------------------------
        for (unsigned n : ns)
            for (unsigned long long s : ss) {
                b.fill_sizes(n, s, kSeed);
                for (int div = 0; div < 2; ++div) {
                    progress(fmt("heap %s N=%u S=%s", div ? "divergent" : "converged", n, s_label(s).c_str()));
                    std::vector<float> ta, tf, taf;
                    checks k;
                    gpudyn_heap_stats_t held{}, after{};
                    // A fresh heap, then the untimed warm-up (kept as the cold sample).
                    GD(gpudyn_heap_reset(timing, nullptr));
                    const float cold_alloc = b.time_ms([&] { b.launch(false, div, 0, tv, n); });
                    k += b.verify(n);
                    b.zero_counters();
                    const float cold_free = b.time_ms([&] { b.launch(false, div, 1, tv, n); });
                    k.bad_frees += b.read_counters()[c_bad_frees];
                    for (int r = 0; r < reps; ++r) {
                        ta.push_back(b.time_ms([&] { b.launch(false, div, 0, tv, n); }));
                        k += b.verify(n);
                        held = stats_of(timing);
                        b.zero_counters();
                        tf.push_back(b.time_ms([&] { b.launch(false, div, 1, tv, n); }));
                        k.bad_frees += b.read_counters()[c_bad_frees];
                        after = stats_of(timing);
                        k.leaked += after.allocations;
                    }
                    b.zero_counters();
                    b.launch(false, div, 2, tv, n); // warm-up (checked too)
                    for (int r = 0; r < reps; ++r) taf.push_back(b.time_ms([&] { b.launch(false, div, 2, tv, n); }));
                    const std::vector<unsigned long long> c = b.read_counters();
                    k.nulls += c[c_nulls], k.readback += c[c_readback], k.bad_frees += c[c_bad_frees];
                    k.leaked += stats_of(timing).allocations;
                    rows.push_back(row_head(false, div, n, s) +
                                   timing_fields(ta, tf, taf, cold_alloc, cold_free, held.bytes_held,
                                                 held.bytes_allocated, after.bytes_held) +
                                   k.json() + "}");
                }
            }

        // ---- churn -----------------------------------------------------------------
        for (unsigned long long s : ss) {
            if (matrix_only) break;
            progress(fmt("churn N=%u S=%s", churn_n, s_label(s).c_str()));
            const unsigned n = churn_n;
            GD(gpudyn_heap_reset(timing, nullptr));
            b.fill_sizes(n, s, kSeed);
            b.launch(false, false, 0, tv, n);
            b.zero_counters();
            std::vector<float> tf, ta;
            for (unsigned r = 0; r < kChurnRounds; ++r) {
                tf.push_back(
                    b.time_ms([&] { churn_free_kernel<<<blocks(n), kBlock>>>(tv, b.ptrs, n, kSeed, r, b.counters); }));
                ta.push_back(
                    b.time_ms([&] { churn_alloc_kernel<<<blocks(n), kBlock>>>(tv, b.ptrs, b.sizes, n, s, kSeed, r); }));
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
            rows.push_back(
                fmt("{\"kind\":\"churn\",\"n\":%u,\"s\":\"%s\",\"rounds\":%u,\"live\":%llu,\"bytes_live\":%llu,"
                    "\"bytes_held\":%llu,\"bytes_allocated\":%llu,\"allocations\":%llu,\"bytes_mapped\":%llu,"
                    "\"held_over_live\":%.6g,\"largest_satisfiable\":%llu,\"largest_free_bytes\":%llu,"
                    "\"free_ms\":%s,\"realloc_ms\":%s,",
                    n, s_label(s).c_str(), kChurnRounds, live, live_bytes, (unsigned long long)st.bytes_held,
                    (unsigned long long)st.bytes_allocated, (unsigned long long)st.allocations,
                    (unsigned long long)st.bytes_mapped, live_bytes ? double(st.bytes_held) / double(live_bytes) : -1.0,
                    largest, (unsigned long long)st.largest_free_bytes, json_list(tf).c_str(), json_list(ta).c_str()) +
                k.json() + "}");
        }

        // ---- exhaustion, then free-all and a phase change --------------------------
        // Rounds of the sizes in b.sizes (from index 0) on the exhaustion heap until a
        // request fails or the buffers are full.
        struct filling {
            unsigned filled = 0, rounds = 0, failed_round_nulls = 0, per_round = 0;
            unsigned long long live = 0, live_bytes = 0;
            bool capacity_reached = false;
        };
        auto fill_up = [&](unsigned long long mean) {
            filling f;
            f.per_round = unsigned(
                std::max<unsigned long long>(kWarp, e0.bytes_mapped / mean / kExhaustRoundsTarget / kWarp * kWarp));
            for (;;) {
                if (f.filled + f.per_round > capacity) {
                    f.capacity_reached = true;
                    break;
                }
                b.launch(false, false, 0, ev, f.per_round, f.filled);
                ++f.rounds;
                unsigned long long got = 0, got_bytes = 0;
                b.tally(f.per_round, f.filled, &got, &got_bytes);
                f.filled += f.per_round;
                f.live += got, f.live_bytes += got_bytes;
                if (got < f.per_round) {
                    f.failed_round_nulls = unsigned(f.per_round - got);
                    break;
                }
            }
            return f;
        };
        progress("largest allocation of the fresh exhaustion heap");
        GD(gpudyn_heap_reset(exhaust, nullptr));
        const unsigned long long fresh_largest = matrix_only ? 0 : b.largest_satisfiable(ev, e0.bytes_mapped);
        for (unsigned long long s : ss) {
            if (matrix_only) break;
            progress(fmt("exhaustion %llu B heap, S=%s", exhaust_bytes, s_label(s).c_str()));
            GD(gpudyn_heap_reset(exhaust, nullptr));
            const unsigned long long mean = s ? s : (kMixedMin + kMixedMax) / 2;
            // Sizes of every slot up front (index = allocation number).
            b.fill_sizes(capacity, s, kSeed);
            const filling f = fill_up(mean);
            const gpudyn_heap_stats_t st = stats_of(exhaust);
            checks k = b.verify(f.filled);
            k.nulls -= f.failed_round_nulls; // the nulls of the last round are the point of the experiment
            rows.push_back(fmt("{\"kind\":\"exhaustion\",\"s\":\"%s\",\"heap_bytes_mapped\":%llu,\"round\":%u,"
                               "\"rounds\":%u,\"live\":%llu,\"bytes_live\":%llu,\"usable_fraction\":%.6g,"
                               "\"nulls_in_last_round\":%u,\"capacity_reached\":%s,\"bytes_held\":%llu,"
                               "\"bytes_allocated\":%llu,\"failed_allocations\":%llu,",
                               s_label(s).c_str(), (unsigned long long)st.bytes_mapped, f.per_round, f.rounds, f.live,
                               f.live_bytes, double(f.live_bytes) / double(st.bytes_mapped), f.failed_round_nulls,
                               f.capacity_reached ? "true" : "false", (unsigned long long)st.bytes_held,
                               (unsigned long long)st.bytes_allocated, (unsigned long long)st.failed_allocations) +
                           k.json() + "}");

            // Free-all: every block of the full heap freed, then the largest single
            // block one thread gets (the empty slabs must go back to the page pool).
            progress(fmt("free-all and phase change after S=%s", s_label(s).c_str()));
            b.zero_counters();
            b.launch(false, false, 1, ev, f.filled);
            CUDA(cudaDeviceSynchronize());
            const gpudyn_heap_stats_t freed = stats_of(exhaust);
            checks kf;
            kf.bad_frees = b.read_counters()[c_bad_frees];
            kf.leaked = freed.allocations;
            // The first large request pays the reclaim pass: its wall time (one
            // thread's malloc of the fresh heap's largest block, launch and copy included).
            const auto r0 = std::chrono::steady_clock::now();
            const bool first_ok = b.try_malloc(ev, fresh_largest);
            const double first_ms =
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r0).count();
            const unsigned long long largest = b.largest_satisfiable(ev, e0.bytes_mapped);
            rows.push_back(fmt("{\"kind\":\"free_all\",\"s\":\"%s\",\"n\":%u,\"heap_bytes_mapped\":%llu,"
                               "\"first_large_malloc_ok\":%s,\"first_large_malloc_ms\":%.4f,"
                               "\"bytes_held_after_free\":%llu,\"largest_bytes\":%llu,\"fresh_largest_bytes\":%llu,",
                               s_label(s).c_str(), f.filled, (unsigned long long)freed.bytes_mapped,
                               first_ok ? "true" : "false", first_ms, (unsigned long long)freed.bytes_held, largest,
                               fresh_largest) +
                           kf.json() + "}");
            // Phase change: the same heap, now blocks of kPhaseBytes until one fails.
            b.fill_sizes(capacity, kPhaseBytes, kSeed);
            const filling g = fill_up(kPhaseBytes);
            const gpudyn_heap_stats_t ps = stats_of(exhaust);
            checks kp = b.verify(g.filled);
            kp.nulls -= g.failed_round_nulls;
            rows.push_back(fmt("{\"kind\":\"phase_change\",\"s\":\"%s\",\"then_bytes\":%llu,"
                               "\"heap_bytes_mapped\":%llu,\"live\":%llu,\"bytes_live\":%llu,"
                               "\"usable_fraction\":%.6g,\"capacity_reached\":%s,",
                               s_label(s).c_str(), kPhaseBytes, (unsigned long long)ps.bytes_mapped, g.live,
                               g.live_bytes, double(g.live_bytes) / double(ps.bytes_mapped),
                               g.capacity_reached ? "true" : "false") +
                           kp.json() + "}");
            b.launch(false, false, 1, ev, g.filled);
            CUDA(cudaDeviceSynchronize());
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

        // ---- floors (no heap: see floor_kernel) ----------------------------------------
        {
            progress("floors");
            unsigned long long* words = nullptr;
            CUDA(cudaMalloc(&words, (ns.back() / kWarp + 1) * sizeof(unsigned long long)));
            for (unsigned n : ns)
                for (int div = 0; div < 2; ++div)
                    for (int bump = 0; bump < 2; ++bump) {
                        auto launch = [&] {
                            const unsigned g = blocks(n);
                            if (div && bump) floor_kernel<true, true><<<g, kBlock>>>(words, n, kWarp, b.ptrs);
                            if (div && !bump) floor_kernel<true, false><<<g, kBlock>>>(words, n, kWarp, b.ptrs);
                            if (!div && bump) floor_kernel<false, true><<<g, kBlock>>>(words, n, kWarp, b.ptrs);
                            if (!div && !bump) floor_kernel<false, false><<<g, kBlock>>>(words, n, kWarp, b.ptrs);
                        };
                        b.time_ms(launch); // warm-up
                        std::vector<float> t;
                        for (int r = 0; r < reps; ++r) t.push_back(b.time_ms(launch));
                        rows.push_back(
                            fmt("{\"kind\":\"floor\",\"allocator\":\"floor\",\"op\":\"%s\","
                                "\"mode\":\"%s\",\"n\":%u,\"alloc_ms\":%.6f,\"alloc_samples\":%s}",
                                bump ? "bump" : "empty", div ? "divergent" : "converged", n, median(t),
                                json_list(t).c_str()));
                    }
            CUDA(cudaFree(words));
        }

        GD(gpudyn_heap_destroy(timing));
        GD(gpudyn_heap_destroy(exhaust));
    } // the heaps and buffers go back before CUDA's own heap is set up in the child

    // ---- CUDA malloc, in child processes -------------------------------------------
    // Cheapest first (N x mean S; converged before divergent), so that the budget
    // covers every N of the small sizes before the largest points.
    struct cuda_task {
        unsigned n;
        unsigned long long s;
        bool div;
        double cost; // thread-bytes
    };
    std::vector<cuda_task> tasks;
    for (unsigned n : matrix_only ? std::vector<unsigned>{} : ns)
        for (unsigned long long s : ss)
            for (int div = 0; div < 2; ++div)
                tasks.push_back({n, s, div != 0, double(n) * double(s ? s : (kMixedMin + kMixedMax) / 2)});
    std::stable_sort(tasks.begin(), tasks.end(), [](const cuda_task& a, const cuda_task& b) {
        return a.cost != b.cost ? a.cost < b.cost : a.div < b.div;
    });
    double cuda_spent_s = 0;
    double rate[2] = {-1, -1}; // seconds per thread-byte of the last long measured point, per mode
    unsigned measured = 0, skipped = 0, crashed = 0;
    {
        cuda_child_process child(quick);
        for (const cuda_task& t : tasks) {
            const std::string label =
                fmt("cuda_malloc %s N=%u S=%s", t.div ? "divergent" : "converged", t.n, s_label(t.s).c_str());
            progress(label);
            const std::string head = row_head(true, t.div, t.n, t.s);
            const double left = cuda_budget_s - cuda_spent_s;
            const double estimate = rate[t.div] > 0 ? rate[t.div] * t.cost : 0;
            if (left <= 0 || estimate > left) {
                const std::string why = left <= 0 ? fmt("time budget of %g s spent", cuda_budget_s)
                                                  : fmt("estimated %.0f s > %.0f s of budget left", estimate, left);
                rows.push_back(head + ",\"skipped\":true,\"reason\":" + json_string(why) + "}");
                fprintf(stderr, "%s: skipped (%s)\n", label.c_str(), why.c_str());
                ++skipped;
                continue;
            }
            const auto p0 = std::chrono::steady_clock::now();
            std::string out;
            const cuda_child_process::result r = child.run(t.n, t.s, t.div, left, &out);
            const double took = seconds_since(p0);
            cuda_spent_s += took;
            if (r == cuda_child_process::row) {
                rows.push_back(out);
                ++measured;
                const double own = row_number(out, "seconds"); // without the child's start
                if (own >= kCudaEstimateMinS) rate[t.div] = own / t.cost;
                fprintf(stderr, "%s: %.1f s, %g repeat(s)\n", label.c_str(), took, row_number(out, "repeats"));
            } else if (r == cuda_child_process::died) {
                rows.push_back(head + fmt(",\"crashed\":true,\"seconds\":%.3f,\"error\":", took) + json_string(out) +
                               "}");
                fprintf(stderr, "%s: CRASHED after %.1f s: %s\n", label.c_str(), took, out.c_str());
                ++crashed;
            } else {
                rows.push_back(head + fmt(",\"skipped\":true,\"timed_out\":true,\"seconds\":%.3f,\"reason\":", took) +
                               json_string(out) + "}");
                fprintf(stderr, "%s: %s\n", label.c_str(), out.c_str());
                ++skipped;
            }
        }
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
            "\"cuda_points_measured\":%u,\"cuda_points_skipped\":%u,\"cuda_points_crashed\":%u,"
            "\"timing_heap_bytes_mapped\":%llu,\"exhaust_heap_bytes_mapped\":%llu,\"block\":%u,\"seed\":%llu,"
            "\"mixed_min\":%llu,\"mixed_max\":%llu,\"churn_rounds\":%u,\"wall_seconds\":%.2f,\"rows\":[\n",
            quick ? "true" : "false", prop.name, reps, cfg.cuda_reps, kCudaSlowMs, cuda_budget_s, cuda_spent_s,
            cfg.cuda_heap, measured, skipped, crashed, (unsigned long long)t0.bytes_mapped,
            (unsigned long long)e0.bytes_mapped, kBlock, kSeed, kMixedMin, kMixedMax, kChurnRounds, wall_s);
    for (size_t i = 0; i < rows.size(); ++i) fprintf(f, "%s%s\n", rows[i].c_str(), i + 1 < rows.size() ? "," : "");
    fprintf(f, "]}\n");
    fclose(f);
    return 0;
}
