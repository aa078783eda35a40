// gpudyn_bench_ggarray --out FILE.json [--quick] [--only SECTION]
// Reproduces the GGArray paper's experiments on the static, VMM and GGArray:
//   fig4       static array insertion per doubling: the library's atomic (one
//              reservation per block part), warp and tensor scans, the paper's
//              per-element atomic (each element its own atomicAdd on the size),
//              and plain write kernels (bandwidth baselines); every algorithm's
//              final array checked on the host (each value exactly once);
//   grow       the last doubling's grow, VMM vs GGArray512, repeated;
//   fig5       Table II / Fig. 5: grow, insert, read/write per doubling (1e6
//              doubled 10 times) for the static array under three allocations,
//              vmm, ggarray32, ggarray512, with the bytes each holds after each
//              doubling (Fig. 3's measured points);
//   baselines  the static array's allocations side by side (cudaMalloc, the
//              library's cudaMallocAsync, cudaMalloc shifted to the async
//              pointer's offset in its 2 MiB page, one cuMemCreate mapping) and
//              the VMM array, read/write alternated: which allocation is the
//              honest static baseline, and whether the offset explains it;
//   lfvectors  number of LFVectors sweep: grow+insert and rw_b / rw_g;
//   flatten    GGArray flatten vs cudaMemcpy device-to-device;
//   fig6       two-phase application up to 1e9 elements, GGArray (insert,
//              flatten, work) vs VMM, and GGArray working in place by spans.
// Read/write = kRwPasses launches of one kernel that adds 1 to every element:
// each pass is its own launch, so no compiler can fold passes together, and the
// kernel body (add_one_span over each span) is the same for every structure.
// Every time comes with the bytes the structure holds for the work.
#include <gpudyn/detail/ggarray/kernels.cuh> // the library's insertion kernel and span loops
#include <gpudyn/ggarray.cuh>
#include <gpudyn/vmm_array.cuh>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(2);                                                                           \
        }                                                                                      \
    } while (0)
#define GK(x)                                                                                       \
    do {                                                                                            \
        gpudyn_status_t s_ = (x);                                                                   \
        if (s_ != GPUDYN_SUCCESS) {                                                                 \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, gpudyn_last_error_message()); \
            exit(2);                                                                                \
        }                                                                                           \
    } while (0)

using namespace gpudyn;
using u32 = unsigned;
using u64 = unsigned long long;

constexpr int kRwPasses = 30;      // paper §VI-C: "adds +1, 30 times"
constexpr unsigned kThreads = 512; // block size of the read/write kernels
constexpr u64 kStart = 1000000;    // paper: 1e6 doubled 10 times
constexpr int kRepeats = 5;        // median of these for repeatable measurements
// The grow target compares two host-side driver sequences of ~0.1 ms whose
// run-to-run spread is ~20%: more samples for its median.
constexpr int kGrowRepeats = 11;
// Table II's read/write at the last doubling: median of this many runs of
// kRwPasses (one run was ~70 ms and carried the whole static-vs-VMM gap).
constexpr int kRwFinalRepeats = 3;
// The driver's mapping granularity on current GPUs (VMM arrays, the GGArray
// pool): the unit of the offsets the baselines section reports.
constexpr u64 kPage = 2ull << 20;

static int g_sms = 132;
static unsigned grid_fill(unsigned per_sm = 4) { return unsigned(g_sms) * per_sm; }

// ---- span providers: same kernel body for every structure ----
struct flat_spans {
    u32* data;
    u64 n;
    template <class F>
    __device__ void for_each_span(u64 lo, u64 hi, F&& f) const {
        if (hi > n) hi = n;
        if (lo < hi) f(data + lo, hi - lo, lo);
    }
};
struct gg_spans {
    ggarray_ref<u32> a;
    template <class F>
    __device__ void for_each_span(u64 lo, u64 hi, F&& f) const {
        a.for_each_span(lo, hi, f);
    }
};

// One pass adds 1 to every element: the range is cut into parts of kRwPart
// elements walked span by span as the library's flatten walks them
// (for_each_part_span), with its vector loop: 16-byte vectors where aligned,
// kRwUnroll loads issued before their stores (a thread keeps 64 bytes of
// reads in flight).
constexpr u64 kRwPart = 16384; // elements (64 KiB of u32)
constexpr int kRwUnroll = 4;
__device__ void add_one_span(u32* p, u64 n) {
    const u64 head = ggarray_detail::elements_before_vector(p, n);
    for (u64 i = threadIdx.x; i < head; i += blockDim.x) p[i] += 1;
    uint4* v = reinterpret_cast<uint4*>(p + head);
    const u64 nv = (n - head) / 4;
    ggarray_detail::block_vector_loop<kRwUnroll>(
        nv, [&](u64 j) { return v[j]; },
        [&](u64 j, uint4 x) {
            x.x += 1;
            x.y += 1;
            x.z += 1;
            x.w += 1;
            v[j] = x;
        });
    for (u64 i = head + nv * 4 + threadIdx.x; i < n; i += blockDim.x) p[i] += 1;
}
template <class Spans>
__global__ void __launch_bounds__(kThreads) add_one(Spans s, u64 n) {
    ggarray_detail::for_each_part_span(s, n, kRwPart, [&](u32* p, u64 m, u64) { add_one_span(p, m); });
}
// rw_g: one thread per global element, located by binary search (paper's rw_g).
__global__ void add_one_global(ggarray_ref<u32> a, u64 n) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x) a.at(i) += 1;
}
// Sum and sum of squares (mod 2^64) of every element: what the Fig. 6 runs
// check against the values they must hold (insertion order differs per structure).
template <class Spans>
__global__ void checksum(Spans s, u64 n, u64* out) {
    u64 s1 = 0, s2 = 0;
    ggarray_detail::for_each_part_span(s, n, kRwPart, [&](u32* p, u64 m, u64) {
        for (u64 i = threadIdx.x; i < m; i += blockDim.x) {
            const u64 v = p[i];
            s1 += v;
            s2 += v * v;
        }
    });
    atomicAdd(&out[0], s1);
    atomicAdd(&out[1], s2);
}

// Insertion of n new values (value = first + index) into any array with the
// library's bulk push kernel (ggarray_detail::push_kernel: the parts of
// plan_bulk_insert, each reserved once, ranked tile by tile with algorithm A
// and stored), from these sources instead of a values array.
struct iota_source {
    u64 first; // value of candidate j
    __device__ bool all_flagged() const { return true; }
    __device__ bool flag(u64) const { return true; }
    __device__ u32 value(u64 j) const { return u32(first + j); }
};
struct iota_sources {
    u64 first; // value of candidate 0
    __device__ iota_source operator()(u64 lo) const { return iota_source{first + lo}; }
};

// The paper's atomic insertion (§III-B1): every inserting thread adds 1 to the
// array's size and stores its element at the old value; one thread per element.
// ptxas turns an atomicAdd whose address it proves equal in every lane into one
// atomic per warp (VOTE.ANY, POPC, one ATOMG, SHFL: seen in the SASS of CUDA
// 13.0 for sm_90), which is no longer the paper's scheme.  Aggregable = false
// gives the address a never-taken per-lane alternative (`never` is an index no
// thread has), so each element makes its own ATOMG; Aggregable = true is the
// paper's source as today's compiler builds it.
constexpr unsigned kPerElementThreads = 256;
template <bool Aggregable>
__global__ void __launch_bounds__(kPerElementThreads)
    push_per_element_atomic(gpudyn_static_array_view_t v, u64 n, u64 first, u64 never) {
    const u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    if (i >= n) return;
    u64* size = reinterpret_cast<u64*>(v.size);
    u64* at = Aggregable ? size : (i == never ? size + 1 : size);
    const u64 slot = atomicAdd(at, 1ull);
    if (slot < v.capacity) reinterpret_cast<u32*>(v.data)[slot] = u32(first + i);
    else atomicOr(reinterpret_cast<u32*>(v.status), unsigned(GPUDYN_ARRAY_STATUS_CAPACITY_EXCEEDED));
}

// Baselines: plain coalesced writes of the same values, grid-stride, one
// 4-byte store per value and 16-byte stores of 4 values (p from cudaMalloc:
// 16-byte aligned); the insertion target compares with the faster of the two.
__global__ void write_n(u32* p, u64 n, u64 first) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        p[i] = u32(first + i);
}
__global__ void write_n_vec4(u32* p, u64 n, u64 first) {
    const u64 stride = (u64)gridDim.x * blockDim.x;
    const u64 t = blockIdx.x * (u64)blockDim.x + threadIdx.x;
    uint4* v = reinterpret_cast<uint4*>(p);
    for (u64 i = t; i < n / 4; i += stride) {
        const u32 b = u32(first + 4 * i);
        v[i] = make_uint4(b, b + 1, b + 2, b + 3);
    }
    for (u64 i = n / 4 * 4 + t; i < n; i += stride) p[i] = u32(first + i);
}
// Elements that are not i + add (the baselines: filled with i, then read/written).
__global__ void count_not_iota(const u32* p, u64 n, u32 add, u64* bad) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        if (p[i] != u32(i) + add) atomicAdd(bad, 1ull);
}

// ---- timing ----
struct ev_timer {
    cudaEvent_t a, b;
    ev_timer() {
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
    }
    ~ev_timer() {
        cudaEventDestroy(a);
        cudaEventDestroy(b);
    }
    void start() { CK(cudaEventRecord(a)); }
    double stop() {
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        return ms;
    }
};
static double wall_ms(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// ---- JSON ----
static std::string jarr(const std::vector<double>& v) {
    std::string s = "[";
    char b[64];
    for (size_t i = 0; i < v.size(); ++i) {
        snprintf(b, sizeof b, "%s%.6g", i ? ", " : "", v[i]);
        s += b;
    }
    return s + "]";
}
static std::string jnum(double x) {
    char b[64];
    snprintf(b, sizeof b, "%.6g", x);
    return b;
}
static std::string ju64(u64 x) { return std::to_string(x); }
static std::string jarr_u64(const std::vector<u64>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
}
static std::string jbool(bool b) { return b ? "true" : "false"; }
static std::string jstr(const std::string& s) { return "\"" + s + "\""; } // our own ASCII labels only

static int g_done = 0, g_total = 1;
static void progress(const char* label) { fprintf(stderr, "progress %d %d %s\n", ++g_done, g_total, label); }

// ---- structures under test ----
enum class kind {
    static_async,  // the library's static array: cudaMallocAsync from the default pool
    static_malloc, // a static array whose storage the benchmark takes with cudaMalloc
    vmm,           // the VMM array, grown by reserve at each doubling
    vmm_once,      // the VMM array mapped once to its capacity: a static array in one cuMemCreate mapping
    ggarray,
};
static const char* allocation_of(kind k) {
    switch (k) {
        case kind::static_async: return "cudaMallocAsync (gpudyn_static_array_create, the device's default pool)";
        case kind::static_malloc: return "cudaMalloc";
        case kind::vmm: return "cuMemCreate + cuMemMap per reserve (gpudyn_vmm_array, 2 MiB granularity)";
        case kind::vmm_once: return "one cuMemCreate + cuMemMap of the whole capacity (gpudyn_vmm_array reserved once)";
        default: return "GGArray buckets (pool rows mapped with cuMemCreate at reserve)";
    }
}
struct subject {
    std::string name;
    kind k;
    unsigned lfv = 0;
    u64 shift = 0; // static_malloc: bytes the data starts after the cudaMalloc pointer
    gpudyn_static_array_t s = nullptr;
    gpudyn_vmm_array_t v = nullptr;
    gpudyn_ggarray_t g = nullptr;
    void* raw = nullptr; // static_malloc storage
    u64* meta = nullptr; // static_malloc cells: size, status (u32), failed_at
    gpudyn_static_array_view_t own{};
    u64 raw_bytes = 0;
};
static bool is_static(const subject& x) { return x.k == kind::static_async || x.k == kind::static_malloc; }
static bool is_vmm(const subject& x) { return x.k == kind::vmm || x.k == kind::vmm_once; }

static void create(subject& x, u64 max_n) {
    if (x.k == kind::static_async) {
        gpudyn_static_array_options_t o;
        gpudyn_static_array_options_init(&o);
        o.capacity = max_n;
        GK(gpudyn_static_array_create(&x.s, &o, nullptr));
    } else if (x.k == kind::static_malloc) {
        x.raw_bytes = max_n * 4 + x.shift;
        CK(cudaMalloc(&x.raw, x.raw_bytes));
        CK(cudaMalloc(&x.meta, 3 * sizeof(u64)));
        const u64 cells[3] = {0, 0, ~0ull}; // size 0, status 0, no failed reservation
        CK(cudaMemcpy(x.meta, cells, sizeof cells, cudaMemcpyHostToDevice));
        x.own.version = GPUDYN_STATIC_ARRAY_VIEW_VERSION;
        x.own.element_size = 4;
        x.own.data = reinterpret_cast<uint64_t>(x.raw) + x.shift;
        x.own.capacity = max_n;
        x.own.size = reinterpret_cast<uint64_t>(x.meta);
        x.own.status = reinterpret_cast<uint64_t>(x.meta + 1);
        x.own.failed_at = reinterpret_cast<uint64_t>(x.meta + 2);
    } else if (is_vmm(x)) {
        gpudyn_vmm_array_options_t o;
        gpudyn_vmm_array_options_init(&o);
        o.max_capacity = x.k == kind::vmm ? 2 * max_n : max_n;
        GK(gpudyn_vmm_array_create(&x.v, &o, nullptr));
        if (x.k == kind::vmm_once) GK(gpudyn_vmm_array_reserve(x.v, max_n, nullptr));
    } else {
        gpudyn_ggarray_options_t o;
        gpudyn_ggarray_options_init(&o);
        o.num_lfvectors = x.lfv;
        GK(gpudyn_ggarray_create(&x.g, &o, nullptr));
    }
    CK(cudaDeviceSynchronize());
}
static void destroy(subject& x) {
    GK(gpudyn_static_array_destroy(x.s));
    GK(gpudyn_vmm_array_destroy(x.v));
    GK(gpudyn_ggarray_destroy(x.g));
    if (x.raw) CK(cudaFree(x.raw));
    if (x.meta) CK(cudaFree(x.meta));
    x.s = nullptr;
    x.v = nullptr;
    x.g = nullptr;
    x.raw = nullptr;
    x.meta = nullptr;
    CK(cudaDeviceSynchronize()); // stream-ordered frees done before the next subject's allocation
}
static gpudyn_static_array_view_t static_view(subject& x) {
    if (x.k == kind::static_malloc) return x.own;
    gpudyn_static_array_view_t v;
    GK(gpudyn_static_array_get_view(x.s, &v));
    return v;
}
// Element 0 of a contiguous array.
static u32* flat_data(subject& x) {
    void* d = nullptr;
    if (x.k == kind::static_malloc) return reinterpret_cast<u32*>(x.own.data);
    if (x.k == kind::static_async) GK(gpudyn_static_array_data(x.s, &d));
    else GK(gpudyn_vmm_array_data(x.v, &d));
    return static_cast<u32*>(d);
}
// Device memory the structure holds now: the static allocation, the VMM
// array's mapped bytes, the GGArray's buckets (heap buckets + mapped pool).
static u64 bytes_held(subject& x) {
    uint64_t b = 0;
    if (x.k == kind::static_malloc) return x.raw_bytes;
    if (x.k == kind::static_async) GK(gpudyn_static_array_allocated_bytes(x.s, &b));
    else if (is_vmm(x)) GK(gpudyn_vmm_array_allocated_bytes(x.v, &b));
    else GK(gpudyn_ggarray_allocated_bytes(x.g, &b, nullptr));
    return b;
}
// Grow so `cap` elements fit; returns ms.  Both growable arrays are timed the
// same way: host wall clock around the reserve call and a stream synchronize
// (the VMM array maps from the host; the GGArray maps its bucket pool from the
// host and launches a kernel only for rows beyond the pool), i.e. the time
// until the grown structure is usable by the next kernel.  Static arrays and
// the VMM array mapped once have nothing to grow.
static double grow(subject& x, u64 cap) {
    if (is_static(x) || x.k == kind::vmm_once) return 0;
    CK(cudaDeviceSynchronize());
    auto t0 = std::chrono::steady_clock::now();
    if (x.k == kind::vmm) {
        GK(gpudyn_vmm_array_reserve(x.v, cap, nullptr));
    } else {
        // Headroom: the parts keep the LFVectors within one element of each
        // other (plan_bulk_insert); one more element each covers the rounding.
        const u64 slack = x.lfv;
        GK(gpudyn_ggarray_reserve(x.g, cap + slack, nullptr));
    }
    CK(cudaStreamSynchronize(nullptr));
    return wall_ms(t0);
}
static u64* size_cells(subject& x, size_t* count) {
    if (x.k == kind::ggarray) {
        gpudyn_ggarray_view_t v;
        GK(gpudyn_ggarray_get_view(x.g, &v, nullptr));
        *count = v.num_lfvectors;
        return reinterpret_cast<u64*>(v.sizes);
    }
    *count = 1;
    if (is_static(x)) return reinterpret_cast<u64*>(static_view(x).size);
    gpudyn_vmm_array_view_t v;
    GK(gpudyn_vmm_array_get_view(x.v, &v));
    return reinterpret_cast<u64*>(v.size);
}
template <insert_algo A>
static void launch_insert(subject& x, u64 n, u64 first) {
    // first: the size before (every value so far was inserted here): keeps the LFVectors balanced.
    const unsigned targets = x.k == kind::ggarray ? x.lfv : 1;
    using ggarray_detail::kPushBlocksPerSm;
    using ggarray_detail::kPushItems;
    using ggarray_detail::kPushThreads;
    using ggarray_detail::push_kernel;
    const bulk_plan plan = plan_bulk_insert(n, grid_fill(kPushBlocksPerSm), targets, (u64)kPushThreads * kPushItems,
                                            unsigned(first % targets));
    if (plan.grid == 0) return;
    const iota_sources src{first};
    if (x.k == kind::ggarray) {
        gpudyn_ggarray_view_t v;
        GK(gpudyn_ggarray_get_view(x.g, &v, nullptr));
        push_kernel<A><<<plan.grid, kPushThreads>>>(ggarray_ref<u32>{v}, src, n, plan);
    } else if (is_static(x)) {
        push_kernel<A><<<plan.grid, kPushThreads>>>(static_array_ref<u32>{static_view(x)}, src, n, plan);
    } else {
        gpudyn_vmm_array_view_t v;
        GK(gpudyn_vmm_array_get_view(x.v, &v));
        push_kernel<A><<<plan.grid, kPushThreads>>>(vmm_array_ref<u32>{v}, src, n, plan);
    }
    CK(cudaGetLastError());
}
template <bool Aggregable>
static void launch_per_element_atomic(subject& x, u64 n, u64 first) {
    if (n == 0) return;
    const u64 grid = (n + kPerElementThreads - 1) / kPerElementThreads;
    push_per_element_atomic<Aggregable><<<unsigned(grid), kPerElementThreads>>>(static_view(x), n, first, ~0ull);
    CK(cudaGetLastError());
}
// Median of `repeats` runs of launch() (one insertion), the sizes restored
// between runs (so the buckets already exist after the first: the repeats time
// insertion alone).
template <class Launch>
static double timed_insert_with(subject& x, int repeats, Launch&& launch) {
    size_t cells = 0;
    u64* sz = size_cells(x, &cells);
    u64* snap = nullptr;
    CK(cudaMalloc(&snap, cells * 8));
    CK(cudaMemcpy(snap, sz, cells * 8, cudaMemcpyDeviceToDevice));
    std::vector<double> t;
    ev_timer e;
    for (int r = 0; r < repeats; ++r) {
        if (r) CK(cudaMemcpy(sz, snap, cells * 8, cudaMemcpyDeviceToDevice));
        e.start();
        launch();
        t.push_back(e.stop());
    }
    CK(cudaFree(snap));
    return median(t);
}
template <insert_algo A>
static double timed_insert(subject& x, u64 n, u64 first, int repeats) {
    return timed_insert_with(x, repeats, [&] { launch_insert<A>(x, n, first); });
}
// One run: a warm-up pass, then kRwPasses timed passes (separate launches: no folding possible).
static double timed_rw(subject& x, u64 n, bool global_index = false) {
    const unsigned grid = grid_fill(4);
    auto pass = [&]() {
        if (x.k == kind::ggarray) {
            gpudyn_ggarray_view_t v;
            GK(gpudyn_ggarray_get_view(x.g, &v, nullptr));
            if (global_index) add_one_global<<<grid_fill(8), 256>>>(ggarray_ref<u32>{v}, n);
            else add_one<<<grid, kThreads>>>(gg_spans{ggarray_ref<u32>{v}}, n);
        } else {
            add_one<<<grid, kThreads>>>(flat_spans{flat_data(x), n}, n);
        }
        CK(cudaGetLastError());
    };
    pass(); // warm-up
    CK(cudaDeviceSynchronize());
    ev_timer e;
    e.start();
    for (int p = 0; p < kRwPasses; ++p) pass();
    return e.stop();
}

// Proof that every pass happened, for every structure: after the runs each
// element must equal its value before plus the passes made.
static void flatten_any(subject& x, u32* dst, u64 n) {
    if (x.k == kind::ggarray) GK(gpudyn_ggarray_flatten(x.g, dst, n * 4, nullptr));
    else if (x.k == kind::static_async) GK(gpudyn_static_array_flatten(x.s, dst, n * 4, nullptr));
    else if (x.k == kind::static_malloc) CK(cudaMemcpy(dst, flat_data(x), n * 4, cudaMemcpyDeviceToDevice));
    else GK(gpudyn_vmm_array_flatten(x.v, dst, n * 4, nullptr));
}
__global__ void count_mismatch(const u32* before, const u32* after, u64 n, u32 add, u64* bad) {
    for (u64 i = blockIdx.x * (u64)blockDim.x + threadIdx.x; i < n; i += (u64)gridDim.x * blockDim.x)
        if (after[i] != before[i] + add) atomicAdd(bad, 1ull);
}
static u64 read_u64(const u64* d) {
    u64 h = 0;
    CK(cudaMemcpy(&h, d, 8, cudaMemcpyDeviceToHost));
    return h;
}

// ---- host check: the n values in p are exactly 0..n-1, each once ----
struct once_check {
    u64 out_of_range = 0, duplicates = 0, missing = 0;
    bool ok() const { return out_of_range == 0 && duplicates == 0 && missing == 0; }
};
// Copies through a pinned staging buffer and marks each value in a bitmap
// (threads over each chunk, relaxed atomic ORs: a value seen twice is a duplicate).
static once_check check_each_once(const u32* p, u64 n) {
    once_check c;
    std::vector<u64> seen((n + 63) / 64, 0);
    const u64 chunk = std::min<u64>(n, 64ull << 20); // elements per copy: 256 MiB
    u32* stage = nullptr;
    CK(cudaMallocHost(&stage, std::max<u64>(chunk, 1) * 4));
    const unsigned workers = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    std::vector<u64> oor(workers), dup(workers);
    for (u64 lo = 0; lo < n; lo += chunk) {
        const u64 m = std::min(chunk, n - lo);
        CK(cudaMemcpy(stage, p + lo, m * 4, cudaMemcpyDeviceToHost));
        std::vector<std::thread> pool;
        for (unsigned w = 0; w < workers; ++w)
            pool.emplace_back([&, w] {
                for (u64 i = m * w / workers; i < m * (w + 1) / workers; ++i) {
                    const u64 v = stage[i];
                    if (v >= n) {
                        ++oor[w];
                        continue;
                    }
                    const u64 bit = 1ull << (v % 64);
                    if (__atomic_fetch_or(&seen[v / 64], bit, __ATOMIC_RELAXED) & bit) ++dup[w];
                }
            });
        for (auto& t : pool) t.join();
    }
    CK(cudaFreeHost(stage));
    u64 distinct = 0;
    for (u64 w : seen) distinct += __builtin_popcountll(w);
    for (unsigned w = 0; w < workers; ++w) {
        c.out_of_range += oor[w];
        c.duplicates += dup[w];
    }
    c.missing = n - distinct;
    return c;
}
// Fig. 6's expected sums (mod 2^64) of the values i + w, i < n.
static void expected_sums(u64 n, u64 w, u64* s1, u64* s2) {
    using u128 = unsigned __int128;
    const u128 N = n, W = w;
    const u128 sum_i = N * (N - 1) / 2;
    const u128 sum_i2 = (N - 1) * N * (2 * N - 1) / 6;
    *s1 = u64(sum_i + W * N);
    *s2 = u64(sum_i2 + 2 * W * sum_i + W * W * N);
}

int main(int argc, char** argv) {
    const char* out = nullptr;
    bool quick = false;
    const char* only = nullptr; // one section alone (profiling runs); `gpudyn bench` runs all
    const char* usage =
        "usage: %s --out FILE.json [--quick] [--only fig4|grow|fig5|baselines|lfvectors|flatten|fig6]\n";
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, usage, argv[0]);
            return 2;
        }
    }
    const char* sections[] = {"fig4", "grow", "fig5", "baselines", "lfvectors", "flatten", "fig6"};
    if (only &&
        std::none_of(std::begin(sections), std::end(sections), [&](const char* s) { return !strcmp(s, only); })) {
        fprintf(stderr, "--only %s: no such section\n", only);
        fprintf(stderr, usage, argv[0]);
        return 2;
    }
    auto section = [&](const char* name) { return only == nullptr || !strcmp(only, name); };
    if (!out) {
        fprintf(stderr, "--out FILE.json is required\n");
        return 2;
    }
    int dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev));
    const auto t_program = std::chrono::steady_clock::now();
    const int doublings = quick ? 4 : 10;
    const u64 start = quick ? 100000 : kStart;
    const u64 final_n = start << doublings;
    std::vector<unsigned> lfv_sweep =
        quick ? std::vector<unsigned>{32, 512} : std::vector<unsigned>{32, 64, 128, 256, 512, 1024, 2048};
    const std::vector<int> fig6_work = {1, 10, 100, 1000};
    // Fig. 6 final sizes: the paper's is 1e9 (5 doublings from 1e9 / 32).
    const std::vector<u64> fig6_sizes = quick ? std::vector<u64>{1ull << 20, 1ull << 22}
                                              : std::vector<u64>{125000000, 250000000, 500000000, 1000000000};
    // Fig. 6 work phases moving more than this many bytes (passes x 8 bytes per
    // element) run once: their spread is far below the effects shown, and the
    // largest (1000 passes over 4 GB, ~2.3 s each) would dominate the program.
    constexpr double kFig6SingleRunBytes = 2e12;
    // The per-element atomic makes one same-address atomic per element: its
    // largest doublings (up to 5e8 atomics) run once.
    constexpr u64 kPerElementOneRunAbove = 1ull << 25;
    constexpr int kAlgos = 5;
    const char* algo_names[kAlgos] = {"atomic", "warp_scan", "tensor_scan", "per_element_atomic",
                                      "per_element_atomic_as_compiled"};
    std::vector<subject> fig5_subs = {{"static_cudaMallocAsync", kind::static_async},
                                      {"static_cudaMalloc", kind::static_malloc},
                                      {"static_cuMemCreate", kind::vmm_once},
                                      {"vmm", kind::vmm},
                                      {"ggarray32", kind::ggarray, 32},
                                      {"ggarray512", kind::ggarray, 512}};
    const int baseline_rows = 5;
    g_total = 0;
    if (section("fig4")) g_total += kAlgos * (doublings + 1);
    if (section("grow")) g_total += 1;
    if (section("fig5")) g_total += int(fig5_subs.size()) * (doublings + 1);
    if (section("baselines")) g_total += baseline_rows;
    if (section("lfvectors")) g_total += int(lfv_sweep.size());
    if (section("flatten")) g_total += 1;
    if (section("fig6")) g_total += int(fig6_sizes.size() * fig6_work.size());
    std::vector<double> sizes;
    for (int s = 0; s <= doublings; ++s) sizes.push_back(double(start << s));
    std::string json = "{\n  \"quick\": " + jbool(quick) + ",\n  \"rw_passes\": " + std::to_string(kRwPasses) +
                       ",\n  \"sizes\": " + jarr(sizes) + ",\n";

    // ---- Fig. 4 col. 1: insertion algorithms on the static array + write baseline ----
    // The static array and the plain-write buffer both come from cudaMalloc (like for like).
    if (section("fig4")) {
        const auto t_sec = std::chrono::steady_clock::now();
        std::vector<double> t_algo[kAlgos], reps[kAlgos], t_write, t_write4;
        std::string verified = "{";
        bool all_once = true;
        double verify_s = 0;
        u32* plain = nullptr;
        const u64 plain_elems = final_n / 2 + start;
        CK(cudaMalloc(&plain, plain_elems * 4));
        u64 static_bytes = 0;
        for (int a = 0; a < kAlgos; ++a) {
            subject x{"static_cudaMalloc", kind::static_malloc};
            create(x, final_n);
            static_bytes = bytes_held(x);
            u64 n = 0;
            for (int s = 0; s <= doublings; ++s) {
                const u64 add = s == 0 ? start : n;
                const int r = a == 3 && add > kPerElementOneRunAbove ? 1 : kRepeats;
                double ms = a == 0   ? timed_insert<insert_algo::atomic>(x, add, n, r)
                            : a == 1 ? timed_insert<insert_algo::warp_scan>(x, add, n, r)
                            : a == 2 ? timed_insert<insert_algo::tensor_scan>(x, add, n, r)
                            : a == 3 ? timed_insert_with(x, r, [&] { launch_per_element_atomic<false>(x, add, n); })
                                     : timed_insert_with(x, r, [&] { launch_per_element_atomic<true>(x, add, n); });
                t_algo[a].push_back(ms);
                reps[a].push_back(r);
                if (a == 0) {
                    std::vector<double> w, w4;
                    ev_timer e;
                    for (int k = 0; k < kRepeats; ++k) {
                        e.start();
                        write_n<<<grid_fill(8), 256>>>(plain, add, n);
                        w.push_back(e.stop());
                        e.start();
                        write_n_vec4<<<grid_fill(8), 256>>>(plain, add, n);
                        w4.push_back(e.stop());
                    }
                    t_write.push_back(median(w));
                    t_write4.push_back(median(w4));
                }
                n += add;
                char l[96];
                snprintf(l, sizeof l, "fig4 insert %s size %llu", algo_names[a], n);
                progress(l);
            }
            // Every value 0..n-1 inserted exactly once (host check), and the size says n.
            const auto t_check = std::chrono::steady_clock::now();
            const gpudyn_static_array_view_t v = static_view(x);
            const u64 counter = read_u64(reinterpret_cast<u64*>(v.size));
            const u64 failed = read_u64(reinterpret_cast<u64*>(v.failed_at));
            const once_check c = check_each_once(flat_data(x), n);
            verify_s += wall_ms(t_check) / 1e3;
            const bool ok = c.ok() && counter == n && failed == ~0ull;
            all_once = all_once && ok;
            verified += std::string(a ? ", " : "") + jstr(algo_names[a]) + ": {\"ok\": " + jbool(ok) +
                        ", \"elements\": " + ju64(n) + ", \"size_counter\": " + ju64(counter) +
                        ", \"out_of_range\": " + ju64(c.out_of_range) + ", \"duplicates\": " + ju64(c.duplicates) +
                        ", \"missing\": " + ju64(c.missing) + "}";
            destroy(x);
        }
        CK(cudaFree(plain));
        json += "  \"fig4_insert_ms\": {";
        for (int a = 0; a < kAlgos; ++a) json += jstr(algo_names[a]) + ": " + jarr(t_algo[a]) + ", ";
        json += "\"plain_write\": " + jarr(t_write) + ", \"plain_write_vec4\": " + jarr(t_write4) + "},\n";
        json += "  \"fig4_insert_repeats\": {";
        for (int a = 0; a < kAlgos; ++a)
            json += std::string(a ? ", " : "") + jstr(algo_names[a]) + ": " + jarr(reps[a]);
        json += ", \"plain_write\": " + std::to_string(kRepeats) + "},\n";
        json +=
            "  \"fig4_notes\": {\"allocation\": \"cudaMalloc (static array and plain-write buffer)\", "
            "\"atomic\": \"the library's atomic: one atomicAdd per block part, ranks by atomics in shared memory\", "
            "\"per_element_atomic\": \"the paper's scheme: each element its own atomicAdd on the size, one thread per element (compiler aggregation defeated)\", "
            "\"per_element_atomic_as_compiled\": \"the paper's source as nvcc builds it: ptxas merges a warp's same-address atomicAdds into one\", "
            "\"repeats\": \"median of fig4_insert_repeats runs; per_element_atomic runs once above " +
            ju64(kPerElementOneRunAbove) + " elements\"},\n";
        json += "  \"fig4_bytes_held\": {\"static\": " + ju64(static_bytes) +
                ", \"plain_write\": " + ju64(plain_elems * 4) + "},\n";
        json += "  \"fig4_verified\": {" + verified.substr(1) + ", \"all\": " + jbool(all_once) +
                ", \"check\": \"host: each value 0..n-1 exactly once, size counter n\", \"verify_seconds\": " +
                jnum(verify_s) + "},\n";
        json += "  \"fig4_seconds\": " + jnum(wall_ms(t_sec) / 1e3) + ",\n";
    }

    // ---- grow target: last doubling (final/2 -> final), fresh arrays, median of
    // kGrowRepeats, VMM and GGArray512 alternating so drift hits both alike ----
    if (section("grow")) {
        std::vector<double> tv, tg;
        u64 bv = 0, bg = 0;
        for (int r = 0; r < kGrowRepeats; ++r) {
            subject v{"vmm", kind::vmm}, g{"ggarray512", kind::ggarray, 512};
            create(v, final_n);
            create(g, final_n);
            grow(v, final_n / 2);
            grow(g, final_n / 2);
            if (r % 2) {
                tg.push_back(grow(g, final_n));
                tv.push_back(grow(v, final_n));
            } else {
                tv.push_back(grow(v, final_n));
                tg.push_back(grow(g, final_n));
            }
            bv = bytes_held(v);
            bg = bytes_held(g);
            destroy(v);
            destroy(g);
        }
        json += "  \"grow_last\": {\"vmm_ms\": " + jarr(tv) + ", \"ggarray512_ms\": " + jarr(tg) +
                ", \"vmm_median_ms\": " + jarr({median(tv)}) + ", \"ggarray512_median_ms\": " + jarr({median(tg)}) +
                ", \"vmm_bytes_held\": " + ju64(bv) + ", \"ggarray512_bytes_held\": " + ju64(bg) + "},\n";
        progress("grow last doubling");
    }

    // ---- Table II / Fig. 5 (and Fig. 3's measured bytes) ----
    if (section("fig5")) {
        json += "  \"fig5\": {\n";
        for (size_t k = 0; k < fig5_subs.size(); ++k) {
            subject& x = fig5_subs[k];
            create(x, final_n);
            std::vector<double> tg, ti, trw, rw_samples;
            std::vector<u64> held, elems;
            u64 n = 0;
            bool rw_ok = true;
            for (int s = 0; s <= doublings; ++s) {
                const u64 add = s == 0 ? start : n;
                tg.push_back(grow(x, n + add));
                ti.push_back(timed_insert<insert_algo::warp_scan>(x, add, n, s == doublings ? kRepeats : 1));
                n += add;
                held.push_back(bytes_held(x));
                elems.push_back(n);
                if (s == doublings) {
                    u32 *b0 = nullptr, *b1 = nullptr;
                    u64* bad = nullptr;
                    CK(cudaMalloc(&b0, n * 4));
                    CK(cudaMalloc(&b1, n * 4));
                    CK(cudaMalloc(&bad, 8));
                    CK(cudaMemset(bad, 0, 8));
                    flatten_any(x, b0, n);
                    for (int r = 0; r < kRwFinalRepeats; ++r) rw_samples.push_back(timed_rw(x, n));
                    trw.push_back(median(rw_samples));
                    flatten_any(x, b1, n);
                    count_mismatch<<<grid_fill(8), 256>>>(b0, b1, n, kRwFinalRepeats * (1 + kRwPasses), bad);
                    CK(cudaGetLastError());
                    rw_ok = read_u64(bad) == 0;
                    CK(cudaFree(b0));
                    CK(cudaFree(b1));
                    CK(cudaFree(bad));
                } else {
                    trw.push_back(timed_rw(x, n));
                }
                char l[96];
                snprintf(l, sizeof l, "fig5 %s size %llu", x.name.c_str(), n);
                progress(l);
            }
            const u64 bytes = bytes_held(x);
            destroy(x);
            json += "    " + jstr(x.name) + ": {\"grow_ms\": " + jarr(tg) + ", \"insert_ms\": " + jarr(ti) +
                    ", \"rw_ms\": " + jarr(trw) + ", \"rw_final_samples_ms\": " + jarr(rw_samples) +
                    ", \"allocated_bytes\": " + ju64(bytes) + ", \"bytes_held\": " + jarr_u64(held) +
                    ", \"elements\": " + jarr_u64(elems) + ", \"element_bytes\": " + ju64(n * 4) +
                    ", \"allocation\": " + jstr(allocation_of(x.k)) +
                    (x.k == kind::ggarray
                         ? ", \"num_lfvectors\": " + std::to_string(x.lfv) + ", \"first_bucket_elements\": 1024"
                         : std::string()) +
                    ", \"rw_all_passes_verified\": " + jbool(rw_ok) + "}" + (k + 1 < fig5_subs.size() ? ",\n" : "\n");
        }
        json += "  },\n";
    }

    // ---- the static baseline's allocation: read/write of final_n elements on
    // each allocation, the allocations alternated round by round (drift hits all
    // alike), median of kRepeats runs of kRwPasses passes.  The shifted cudaMalloc
    // buffer starts at the cudaMallocAsync pointer's offset in its 2 MiB page:
    // when it is as slow as the async one, the offset is the cause; when it is
    // as fast as plain cudaMalloc, the pool's memory is. ----
    if (section("baselines")) {
        const u64 n = final_n;
        std::vector<subject> subs;
        subs.push_back({"static_cudaMallocAsync", kind::static_async});
        create(subs.back(), n);
        const u64 async_offset = reinterpret_cast<u64>(flat_data(subs.back())) % kPage;
        subs.push_back({"static_cudaMalloc", kind::static_malloc});
        subs.push_back({"static_cudaMalloc_shifted", kind::static_malloc});
        subs.back().shift = async_offset;
        subs.push_back({"static_cuMemCreate", kind::vmm_once});
        subs.push_back({"vmm", kind::vmm});
        for (size_t i = 1; i < subs.size(); ++i) create(subs[i], n);
        for (int s = 0; s <= doublings; ++s) grow(subs.back(), start << s);      // the VMM array as Fig. 5 grows it
        for (auto& x : subs) write_n<<<grid_fill(8), 256>>>(flat_data(x), n, 0); // 4-byte stores: any offset
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<std::vector<double>> t(subs.size());
        for (int r = 0; r < kRepeats; ++r)
            for (size_t j = 0; j < subs.size(); ++j) {
                const size_t i = (j + r) % subs.size();
                t[i].push_back(timed_rw(subs[i], n));
            }
        json += "  \"baselines\": {\"elements\": " + ju64(n) + ", \"repeats\": " + std::to_string(kRepeats) +
                ", \"async_offset_in_2MiB\": " + ju64(async_offset) + ", \"rows\": [\n";
        u64* bad = nullptr;
        CK(cudaMalloc(&bad, 8));
        for (size_t i = 0; i < subs.size(); ++i) {
            subject& x = subs[i];
            CK(cudaMemset(bad, 0, 8));
            count_not_iota<<<grid_fill(8), 256>>>(flat_data(x), n, u32(kRepeats * (1 + kRwPasses)), bad);
            CK(cudaGetLastError());
            const bool ok = read_u64(bad) == 0;
            std::string how = allocation_of(x.k);
            if (x.name == "static_cudaMalloc_shifted")
                how += ", data shifted to the cudaMallocAsync pointer's offset in its 2 MiB page";
            json += "    {\"name\": " + jstr(x.name) + ", \"allocation\": " + jstr(how) +
                    ", \"shift_bytes\": " + ju64(x.shift) +
                    ", \"address_mod_2MiB\": " + ju64(reinterpret_cast<u64>(flat_data(x)) % kPage) +
                    ", \"bytes_held\": " + ju64(bytes_held(x)) + ", \"rw_ms\": " + jnum(median(t[i])) +
                    ", \"rw_samples_ms\": " + jarr(t[i]) + ", \"verified\": " + jbool(ok) + "}" +
                    (i + 1 < subs.size() ? ",\n" : "\n");
            char l[96];
            snprintf(l, sizeof l, "baselines %s", x.name.c_str());
            progress(l);
        }
        CK(cudaFree(bad));
        for (auto& x : subs) destroy(x);
        json += "  ]},\n";
    }

    // ---- Fig. 4 cols. 2-3: number of LFVectors (last doubling: final/2 -> final) ----
    if (section("lfvectors")) {
        std::vector<double> tgi, trwb, trwg, lf;
        std::vector<u64> held;
        const u64 half = final_n / 2;
        for (unsigned L : lfv_sweep) {
            subject x{"gg", kind::ggarray, L};
            create(x, final_n);
            grow(x, half);
            timed_insert<insert_algo::warp_scan>(x, half, 0, 1);
            ev_timer e;
            e.start();
            grow(x, final_n);
            launch_insert<insert_algo::warp_scan>(x, half, half);
            tgi.push_back(e.stop());
            trwb.push_back(timed_rw(x, final_n));
            trwg.push_back(timed_rw(x, final_n, true));
            held.push_back(bytes_held(x));
            lf.push_back(L);
            destroy(x);
            char l[64];
            snprintf(l, sizeof l, "fig4 lfvectors %u", L);
            progress(l);
        }
        json += "  \"fig4_lfvectors\": {\"lfvectors\": " + jarr(lf) + ", \"grow_insert_ms\": " + jarr(tgi) +
                ", \"rw_b_ms\": " + jarr(trwb) + ", \"rw_g_ms\": " + jarr(trwg) +
                ", \"bytes_held\": " + jarr_u64(held) + "},\n";
    }

    // ---- flatten vs cudaMemcpy D2D ----
    if (section("flatten")) {
        const u64 n = final_n / 2;
        subject x{"gg", kind::ggarray, 512};
        create(x, final_n);
        grow(x, n);
        launch_insert<insert_algo::warp_scan>(x, n, 0);
        u32 *dst = nullptr, *src = nullptr;
        CK(cudaMalloc(&dst, n * 4));
        CK(cudaMalloc(&src, n * 4));
        CK(cudaMemset(src, 1, n * 4));
        std::vector<double> tf, tm;
        ev_timer e;
        GK(gpudyn_ggarray_flatten(x.g, dst, n * 4, nullptr)); // warm-up
        for (int r = 0; r < kRepeats; ++r) {
            e.start();
            GK(gpudyn_ggarray_flatten(x.g, dst, n * 4, nullptr));
            tf.push_back(e.stop());
            e.start();
            CK(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyDeviceToDevice));
            tm.push_back(e.stop());
        }
        const u64 buckets = bytes_held(x);
        CK(cudaFree(dst));
        CK(cudaFree(src));
        destroy(x);
        json += "  \"flatten\": {\"elements\": " + ju64(n) + ", \"flatten_ms\": " + jnum(median(tf)) +
                ", \"memcpy_ms\": " + jnum(median(tm)) + ", \"flatten_bytes_held\": " + ju64(buckets + n * 4) +
                ", \"ggarray_bucket_bytes\": " + ju64(buckets) + ", \"memcpy_bytes_held\": " + ju64(2 * n * 4) + "},\n";
        progress("flatten");
    }

    // ---- Fig. 6: two-phase application ----
    // Insertion phase: 5 doublings reaching the final size; work phase: `w`
    // add-one passes.  Three ways: GGArray flattened into a static buffer for
    // the work (the paper's way), the VMM array in place, and the GGArray in
    // place by spans (no flatten: its spans read and write like a static array).
    // Wall clock of the whole application (after creation), median of the runs;
    // every run's result checked by checksums outside the timing.
    if (section("fig6")) {
        const auto t_sec = std::chrono::steady_clock::now();
        constexpr int kFig6Repeats = 3;
        const char* ways[3] = {"ggarray", "vmm", "ggarray_inplace"};
        bool all_ok = true;
        u64* sums = nullptr;
        CK(cudaMalloc(&sums, 16));
        std::string rows;
        for (u64 fig6_n : fig6_sizes) {
            for (int w : fig6_work) {
                const int repeats = double(w) * double(fig6_n) * 8.0 > kFig6SingleRunBytes ? 1 : kFig6Repeats;
                std::vector<double> samples[3];
                u64 held[3] = {0, 0, 0}, buckets = 0;
                bool ok = true;
                u64 e1 = 0, e2 = 0;
                expected_sums(fig6_n, u64(w), &e1, &e2);
                for (int which = 0; which < 3; ++which) {
                    for (int r = 0; r < repeats; ++r) {
                        subject x = which == 1 ? subject{"vmm", kind::vmm} : subject{"gg", kind::ggarray, 512};
                        create(x, fig6_n);
                        u32* flat = nullptr;
                        if (which == 0) CK(cudaMalloc(&flat, fig6_n * 4));
                        CK(cudaDeviceSynchronize());
                        auto t0 = std::chrono::steady_clock::now();
                        u64 n = 0;
                        for (int s = 0; s <= 5; ++s) {
                            const u64 add = s == 0 ? fig6_n >> 5 : n;
                            grow(x, n + add);
                            launch_insert<insert_algo::warp_scan>(x, add, n);
                            n += add;
                        }
                        const unsigned grid = grid_fill(4);
                        if (which == 0) {
                            GK(gpudyn_ggarray_flatten(x.g, flat, n * 4, nullptr));
                            for (int p = 0; p < w; ++p) add_one<<<grid, kThreads>>>(flat_spans{flat, n}, n);
                        } else if (which == 1) {
                            for (int p = 0; p < w; ++p) add_one<<<grid, kThreads>>>(flat_spans{flat_data(x), n}, n);
                        } else {
                            gpudyn_ggarray_view_t v;
                            GK(gpudyn_ggarray_get_view(x.g, &v, nullptr));
                            for (int p = 0; p < w; ++p) add_one<<<grid, kThreads>>>(gg_spans{ggarray_ref<u32>{v}}, n);
                        }
                        CK(cudaGetLastError());
                        CK(cudaDeviceSynchronize());
                        samples[which].push_back(wall_ms(t0));
                        // Outside the timing: the bytes held and the values (each i + w once).
                        CK(cudaMemset(sums, 0, 16));
                        if (which == 0) checksum<<<grid, kThreads>>>(flat_spans{flat, n}, n, sums);
                        else if (which == 1) checksum<<<grid, kThreads>>>(flat_spans{flat_data(x), n}, n, sums);
                        else {
                            gpudyn_ggarray_view_t v;
                            GK(gpudyn_ggarray_get_view(x.g, &v, nullptr));
                            checksum<<<grid, kThreads>>>(gg_spans{ggarray_ref<u32>{v}}, n, sums);
                        }
                        CK(cudaGetLastError());
                        u64 got[2] = {0, 0};
                        CK(cudaMemcpy(got, sums, 16, cudaMemcpyDeviceToHost));
                        ok = ok && n == fig6_n && got[0] == e1 && got[1] == e2;
                        held[which] = bytes_held(x) + (flat ? fig6_n * 4 : 0);
                        if (which == 0) buckets = bytes_held(x);
                        if (flat) CK(cudaFree(flat));
                        destroy(x);
                    }
                }
                all_ok = all_ok && ok;
                const double tg = median(samples[0]), tv = median(samples[1]), ti = median(samples[2]);
                if (!rows.empty()) rows += ",\n";
                rows += "    {\"final_size\": " + ju64(fig6_n) + ", \"work_passes\": " + std::to_string(w) +
                        ", \"repeats\": " + std::to_string(repeats);
                for (int which = 0; which < 3; ++which)
                    rows += std::string(", ") + jstr(std::string(ways[which]) + "_ms") + ": " +
                            jnum(median(samples[which])) + ", " + jstr(std::string(ways[which]) + "_samples_ms") +
                            ": " + jarr(samples[which]) + ", " + jstr(std::string(ways[which]) + "_bytes_held") + ": " +
                            ju64(held[which]);
                rows += ", \"ggarray_bucket_bytes\": " + ju64(buckets) + ", \"flat_bytes\": " + ju64(fig6_n * 4) +
                        ", \"speedup_ggarray_over_vmm\": " + jnum(tv / tg) +
                        ", \"speedup_ggarray_inplace_over_vmm\": " + jnum(tv / ti) + ", \"verified\": " + jbool(ok) +
                        "}";
                char l[96];
                snprintf(l, sizeof l, "fig6 size %llu work %d", fig6_n, w);
                progress(l);
            }
        }
        CK(cudaFree(sums));
        std::vector<u64> fs(fig6_sizes.begin(), fig6_sizes.end());
        std::vector<double> wk(fig6_work.begin(), fig6_work.end());
        json +=
            "  \"fig6\": {\"final_sizes\": " + jarr_u64(fs) + ", \"work_passes\": " + jarr(wk) +
            ", \"insert_doublings\": 5, \"repeats\": " + std::to_string(kFig6Repeats) +
            ", \"single_run_above_work_bytes\": " + jnum(kFig6SingleRunBytes) +
            ", \"repeats_note\": \"median of 'repeats' runs per point; a point whose work phase moves more than single_run_above_work_bytes (passes x 8 bytes x elements) runs once\"" +
            ", \"bytes_note\": \"ggarray: buckets + the flat buffer (both held while the work runs); vmm: mapped bytes; ggarray_inplace: buckets\"" +
            ", \"check\": \"sum and sum of squares of the values equal those of i + work_passes, i < final_size\"" +
            ", \"verified\": " + jbool(all_ok) + ", \"seconds\": " + jnum(wall_ms(t_sec) / 1e3) +
            ",\n   \"rows\": [\n" + rows + "\n  ]},\n";
    }
    json += "  \"seconds\": " + jnum(wall_ms(t_program) / 1e3) + "\n}\n";
    FILE* f = fopen(out, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", out);
        return 2;
    }
    fputs(json.c_str(), f);
    fclose(f);
    return 0;
}
