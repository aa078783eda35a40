// gpudyn_bench_ggarray --out FILE.json [--quick] [--only SECTION]
// Reproduces the GGArray paper's experiments on the static, VMM and GGArray:
//   fig4_insert   static array insertion per doubling, atomic / warp / tensor scan,
//                 plus plain write kernels over the same int32 (bandwidth baselines);
//   table2/fig5   grow, insert, read/write per doubling (1e6 doubled 10 times) for
//                 static, vmm, ggarray32, ggarray512;
//   fig4_lfv      number of LFVectors sweep: grow+insert and rw_b / rw_g;
//   flatten       GGArray flatten vs cudaMemcpy device-to-device;
//   fig6          two-phase application, GGArray (insert, flatten, work) vs VMM, and
//                 GGArray working in place by spans.
// Read/write = kRwPasses launches of one kernel that adds 1 to every element:
// each pass is its own launch, so no compiler can fold passes together, and the
// kernel body (add_one_span over each span) is the same for every structure.
#include <gpudyn/detail/ggarray/kernels.cuh>  // the library's insertion kernel and span loops
#include <gpudyn/ggarray.cuh>
#include <gpudyn/vmm_array.cuh>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); exit(2); } } while (0)
#define GK(x) do { gpudyn_status_t s_ = (x); if (s_ != GPUDYN_SUCCESS) { fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, gpudyn_last_error_message()); exit(2); } } while (0)

using namespace gpudyn;
using u32 = unsigned;

constexpr int kRwPasses = 30;                // paper §VI-C: "adds +1, 30 times"
constexpr unsigned kThreads = 512;           // block size of the read/write kernels
constexpr unsigned long long kStart = 1000000;  // paper: 1e6 doubled 10 times
constexpr int kRepeats = 5;                  // median of these for repeatable measurements
// The grow target compares two host-side driver sequences of ~0.1 ms whose
// run-to-run spread is ~20%: more samples for its median.
constexpr int kGrowRepeats = 11;

static int g_sms = 132;
static unsigned grid_fill(unsigned per_sm = 4) { return unsigned(g_sms) * per_sm; }

// ---- span providers: same kernel body for every structure ----
struct flat_spans {
    u32* data;
    unsigned long long n;
    template <class F>
    __device__ void for_each_span(unsigned long long lo, unsigned long long hi, F&& f) const {
        if (hi > n) hi = n;
        if (lo < hi) f(data + lo, hi - lo, lo);
    }
};
struct gg_spans {
    ggarray_ref<u32> a;
    template <class F>
    __device__ void for_each_span(unsigned long long lo, unsigned long long hi, F&& f) const {
        a.for_each_span(lo, hi, f);
    }
};

// One pass adds 1 to every element: the range is cut into parts of kRwPart
// elements walked span by span as the library's flatten walks them
// (for_each_part_span), with its vector loop: 16-byte vectors where aligned,
// kRwUnroll loads issued before their stores (a thread keeps 64 bytes of
// reads in flight).
constexpr unsigned long long kRwPart = 16384;  // elements (64 KiB of u32)
constexpr int kRwUnroll = 4;
__device__ void add_one_span(u32* p, unsigned long long n) {
    const unsigned long long head = ggarray_detail::elements_before_vector(p, n);
    for (unsigned long long i = threadIdx.x; i < head; i += blockDim.x) p[i] += 1;
    uint4* v = reinterpret_cast<uint4*>(p + head);
    const unsigned long long nv = (n - head) / 4;
    ggarray_detail::block_vector_loop<kRwUnroll>(
        nv, [&](unsigned long long j) { return v[j]; },
        [&](unsigned long long j, uint4 x) {
            x.x += 1; x.y += 1; x.z += 1; x.w += 1;
            v[j] = x;
        });
    for (unsigned long long i = head + nv * 4 + threadIdx.x; i < n; i += blockDim.x) p[i] += 1;
}
template <class Spans>
__global__ void __launch_bounds__(kThreads) add_one(Spans s, unsigned long long n) {
    ggarray_detail::for_each_part_span(s, n, kRwPart, [&](u32* p, unsigned long long m, unsigned long long) {
        add_one_span(p, m);
    });
}
// rw_g: one thread per global element, located by binary search (paper's rw_g).
__global__ void add_one_global(ggarray_ref<u32> a, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        a.at(i) += 1;
}

// Insertion of n new values (value = first + index) into any array with the
// library's bulk push kernel (ggarray_detail::push_kernel: the parts of
// plan_bulk_insert, each reserved once, ranked tile by tile with algorithm A
// and stored), from these sources instead of a values array.
struct iota_source {
    unsigned long long first;  // value of candidate j
    __device__ bool all_flagged() const { return true; }
    __device__ bool flag(unsigned long long) const { return true; }
    __device__ u32 value(unsigned long long j) const { return u32(first + j); }
};
struct iota_sources {
    unsigned long long first;  // value of candidate 0
    __device__ iota_source operator()(unsigned long long lo) const { return iota_source{first + lo}; }
};
// Baselines: plain coalesced writes of the same values, grid-stride, one
// 4-byte store per value and 16-byte stores of 4 values (p from cudaMalloc:
// 16-byte aligned); the insertion target compares with the faster of the two.
__global__ void write_n(u32* p, unsigned long long n, unsigned long long first) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        p[i] = u32(first + i);
}
__global__ void write_n_vec4(u32* p, unsigned long long n, unsigned long long first) {
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    const unsigned long long t = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    uint4* v = reinterpret_cast<uint4*>(p);
    for (unsigned long long i = t; i < n / 4; i += stride) {
        const u32 b = u32(first + 4 * i);
        v[i] = make_uint4(b, b + 1, b + 2, b + 3);
    }
    for (unsigned long long i = n / 4 * 4 + t; i < n; i += stride) p[i] = u32(first + i);
}

// ---- timing ----
struct ev_timer {
    cudaEvent_t a, b;
    ev_timer() { CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b)); }
    void start() { CK(cudaEventRecord(a)); }
    double stop() { CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b)); float ms = 0; CK(cudaEventElapsedTime(&ms, a, b)); return ms; }
};
static double wall_ms(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

// ---- JSON ----
static std::string jarr(const std::vector<double>& v) {
    std::string s = "[";
    char b[64];
    for (size_t i = 0; i < v.size(); ++i) { snprintf(b, sizeof b, "%s%.6g", i ? ", " : "", v[i]); s += b; }
    return s + "]";
}

static int g_done = 0, g_total = 1;
static void progress(const char* label) { fprintf(stderr, "progress %d %d %s\n", ++g_done, g_total, label); }

// ---- structures under test ----
struct subject {
    std::string name;
    int kind;  // 0 static, 1 vmm, 2 ggarray
    unsigned lfv = 0;
    gpudyn_static_array_t s = nullptr;
    gpudyn_vmm_array_t v = nullptr;
    gpudyn_ggarray_t g = nullptr;
};

static void create(subject& x, unsigned long long max_n) {
    if (x.kind == 0) {
        gpudyn_static_array_options_t o; gpudyn_static_array_options_init(&o); o.capacity = max_n;
        GK(gpudyn_static_array_create(&x.s, &o, nullptr));
    } else if (x.kind == 1) {
        gpudyn_vmm_array_options_t o; gpudyn_vmm_array_options_init(&o); o.max_capacity = 2 * max_n;
        GK(gpudyn_vmm_array_create(&x.v, &o, nullptr));
    } else {
        gpudyn_ggarray_options_t o; gpudyn_ggarray_options_init(&o); o.num_lfvectors = x.lfv;
        GK(gpudyn_ggarray_create(&x.g, &o, nullptr));
    }
    CK(cudaDeviceSynchronize());
}
static void destroy(subject& x) {
    GK(gpudyn_static_array_destroy(x.s)); GK(gpudyn_vmm_array_destroy(x.v)); GK(gpudyn_ggarray_destroy(x.g));
    x.s = nullptr; x.v = nullptr; x.g = nullptr;
}
// Grow so `cap` elements fit; returns ms.  Both growable arrays are timed the
// same way: host wall clock around the reserve call and a stream synchronize
// (the VMM array maps from the host; the GGArray maps its bucket pool from the
// host and launches a kernel only for rows beyond the pool), i.e. the time
// until the grown structure is usable by the next kernel.
static double grow(subject& x, unsigned long long cap) {
    if (x.kind == 0) return 0;
    CK(cudaDeviceSynchronize());
    auto t0 = std::chrono::steady_clock::now();
    if (x.kind == 1) {
        GK(gpudyn_vmm_array_reserve(x.v, cap, nullptr));
    } else {
        // Headroom: the parts keep the LFVectors within one element of each
        // other (plan_bulk_insert); one more element each covers the rounding.
        const unsigned long long slack = x.lfv;
        GK(gpudyn_ggarray_reserve(x.g, cap + slack, nullptr));
    }
    CK(cudaStreamSynchronize(nullptr));
    return wall_ms(t0);
}
static unsigned long long* size_cells(subject& x, size_t* count) {
    if (x.kind == 2) { gpudyn_ggarray_view_t v; GK(gpudyn_ggarray_get_view(x.g, &v, nullptr)); *count = v.num_lfvectors; return reinterpret_cast<unsigned long long*>(v.sizes); }
    *count = 1;
    if (x.kind == 0) { gpudyn_static_array_view_t v; GK(gpudyn_static_array_get_view(x.s, &v)); return reinterpret_cast<unsigned long long*>(v.size); }
    gpudyn_vmm_array_view_t v; GK(gpudyn_vmm_array_get_view(x.v, &v)); return reinterpret_cast<unsigned long long*>(v.size);
}
template <insert_algo A>
static void launch_insert(subject& x, unsigned long long n, unsigned long long first) {
    // first: the size before (every value so far was inserted here): keeps the LFVectors balanced.
    const unsigned targets = x.kind == 2 ? x.lfv : 1;
    using ggarray_detail::kPushBlocksPerSm;
    using ggarray_detail::kPushItems;
    using ggarray_detail::kPushThreads;
    using ggarray_detail::push_kernel;
    const bulk_plan plan = plan_bulk_insert(n, grid_fill(kPushBlocksPerSm), targets,
                                            (unsigned long long)kPushThreads * kPushItems, unsigned(first % targets));
    if (plan.grid == 0) return;
    const iota_sources src{first};
    if (x.kind == 2) {
        gpudyn_ggarray_view_t v; GK(gpudyn_ggarray_get_view(x.g, &v, nullptr));
        push_kernel<A><<<plan.grid, kPushThreads>>>(ggarray_ref<u32>{v}, src, n, plan);
    } else if (x.kind == 0) {
        gpudyn_static_array_view_t v; GK(gpudyn_static_array_get_view(x.s, &v));
        push_kernel<A><<<plan.grid, kPushThreads>>>(static_array_ref<u32>{v}, src, n, plan);
    } else {
        gpudyn_vmm_array_view_t v; GK(gpudyn_vmm_array_get_view(x.v, &v));
        push_kernel<A><<<plan.grid, kPushThreads>>>(vmm_array_ref<u32>{v}, src, n, plan);
    }
    CK(cudaGetLastError());
}
// Insert n values; median of kRepeats (sizes restored between repeats, so the
// buckets already exist after the first: the repeats time insertion alone).
template <insert_algo A>
static double timed_insert(subject& x, unsigned long long n, unsigned long long first, int repeats) {
    size_t cells = 0;
    unsigned long long* sz = size_cells(x, &cells);
    unsigned long long* snap = nullptr;
    CK(cudaMalloc(&snap, cells * 8));
    CK(cudaMemcpy(snap, sz, cells * 8, cudaMemcpyDeviceToDevice));
    std::vector<double> t;
    ev_timer e;
    for (int r = 0; r < repeats; ++r) {
        if (r) CK(cudaMemcpy(sz, snap, cells * 8, cudaMemcpyDeviceToDevice));
        e.start();
        launch_insert<A>(x, n, first);
        t.push_back(e.stop());
    }
    CK(cudaFree(snap));
    return median(t);
}
static double timed_rw(subject& x, unsigned long long n, bool global_index = false) {
    const unsigned grid = grid_fill(4);
    auto pass = [&]() {
        if (x.kind == 2) {
            gpudyn_ggarray_view_t v; GK(gpudyn_ggarray_get_view(x.g, &v, nullptr));
            if (global_index) add_one_global<<<grid_fill(8), 256>>>(ggarray_ref<u32>{v}, n);
            else add_one<<<grid, kThreads>>>(gg_spans{ggarray_ref<u32>{v}}, n);
        } else {
            void* d = nullptr;
            if (x.kind == 0) GK(gpudyn_static_array_data(x.s, &d)); else GK(gpudyn_vmm_array_data(x.v, &d));
            add_one<<<grid, kThreads>>>(flat_spans{static_cast<u32*>(d), n}, n);
        }
        CK(cudaGetLastError());
    };
    pass();  // warm-up
    CK(cudaDeviceSynchronize());
    ev_timer e; e.start();
    for (int p = 0; p < kRwPasses; ++p) pass();  // kRwPasses separate launches: no folding possible
    return e.stop();
}

// Proof that every pass happened, for every structure: after timed_rw each
// element must equal its value before plus 1 + kRwPasses (warm-up + passes).
static void flatten_any(subject& x, u32* dst, unsigned long long n) {
    if (x.kind == 2) GK(gpudyn_ggarray_flatten(x.g, dst, n * 4, nullptr));
    else if (x.kind == 0) GK(gpudyn_static_array_flatten(x.s, dst, n * 4, nullptr));
    else GK(gpudyn_vmm_array_flatten(x.v, dst, n * 4, nullptr));
}
__global__ void count_mismatch(const u32* before, const u32* after, unsigned long long n, u32 add,
                               unsigned long long* bad) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * blockDim.x)
        if (after[i] != before[i] + add) atomicAdd(bad, 1ull);
}

int main(int argc, char** argv) {
    const char* out = nullptr;
    bool quick = false;
    const char* only = nullptr;  // one section alone (profiling runs); `gpudyn bench` runs all
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else { fprintf(stderr, "usage: %s --out FILE.json [--quick] [--only fig4|grow|fig5|lfvectors|flatten|fig6]\n", argv[0]); return 2; }
    }
    auto section = [&](const char* name) { return only == nullptr || !strcmp(only, name); };
    if (!out) { fprintf(stderr, "--out FILE.json is required\n"); return 2; }
    int dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev));
    const int doublings = quick ? 4 : 10;
    const unsigned long long start = quick ? 100000 : kStart;
    const unsigned long long final_n = start << doublings;
    std::vector<unsigned> lfv_sweep = quick ? std::vector<unsigned>{32, 512} : std::vector<unsigned>{32, 64, 128, 256, 512, 1024, 2048};
    std::vector<int> fig6_work = {1, 10, 100, 1000};
    g_total = 3 * (doublings + 1) + 1 + 4 * (doublings + 1) + int(lfv_sweep.size()) + 1 + int(fig6_work.size());
    std::vector<double> sizes;
    for (int s = 0; s <= doublings; ++s) sizes.push_back(double(start << s));
    std::string json = "{\n  \"quick\": " + std::string(quick ? "true" : "false") + ",\n  \"rw_passes\": " + std::to_string(kRwPasses) + ",\n  \"sizes\": " + jarr(sizes) + ",\n";

    // ---- Fig. 4 col. 1: insertion algorithms on the static array + write baseline ----
    if (section("fig4")) {
        std::vector<double> t_algo[3], t_write, t_write4;
        u32* plain = nullptr;
        CK(cudaMalloc(&plain, (final_n / 2 + start) * 4));
        for (int a = 0; a < 3; ++a) {
            subject x{"static", 0};
            create(x, final_n);
            unsigned long long n = 0;
            for (int s = 0; s <= doublings; ++s) {
                const unsigned long long add = s == 0 ? start : n;
                double ms = a == 0 ? timed_insert<insert_algo::atomic>(x, add, n, kRepeats)
                          : a == 1 ? timed_insert<insert_algo::warp_scan>(x, add, n, kRepeats)
                                   : timed_insert<insert_algo::tensor_scan>(x, add, n, kRepeats);
                t_algo[a].push_back(ms);
                if (a == 0) {
                    std::vector<double> w, w4; ev_timer e;
                    for (int r = 0; r < kRepeats; ++r) {
                        e.start(); write_n<<<grid_fill(8), 256>>>(plain, add, n); w.push_back(e.stop());
                        e.start(); write_n_vec4<<<grid_fill(8), 256>>>(plain, add, n); w4.push_back(e.stop());
                    }
                    t_write.push_back(median(w));
                    t_write4.push_back(median(w4));
                }
                n += add;
                char l[64]; snprintf(l, sizeof l, "fig4 insert algo %d size %llu", a, n); progress(l);
            }
            destroy(x);
        }
        CK(cudaFree(plain));
        json += "  \"fig4_insert_ms\": {\"atomic\": " + jarr(t_algo[0]) + ", \"warp_scan\": " + jarr(t_algo[1]) +
                ", \"tensor_scan\": " + jarr(t_algo[2]) + ", \"plain_write\": " + jarr(t_write) + ", \"plain_write_vec4\": " + jarr(t_write4) + "},\n";
    }

    // ---- grow target: last doubling (final/2 -> final), fresh arrays, median of
    // kGrowRepeats, VMM and GGArray512 alternating so drift hits both alike ----
    if (section("grow")) {
        std::vector<double> tv, tg;
        for (int r = 0; r < kGrowRepeats; ++r) {
            subject v{"vmm", 1}, g{"ggarray512", 2, 512};
            create(v, final_n);
            create(g, final_n);
            grow(v, final_n / 2);
            grow(g, final_n / 2);
            if (r % 2) { tg.push_back(grow(g, final_n)); tv.push_back(grow(v, final_n)); }
            else { tv.push_back(grow(v, final_n)); tg.push_back(grow(g, final_n)); }
            destroy(v);
            destroy(g);
        }
        json += "  \"grow_last\": {\"vmm_ms\": " + jarr(tv) + ", \"ggarray512_ms\": " + jarr(tg) +
                ", \"vmm_median_ms\": " + jarr({median(tv)}) + ", \"ggarray512_median_ms\": " + jarr({median(tg)}) + "},\n";
        progress("grow last doubling");
    }

    // ---- Table II / Fig. 5 ----
    if (section("fig5")) {
        std::vector<subject> subs = {{"static", 0}, {"vmm", 1}, {"ggarray32", 2, 32}, {"ggarray512", 2, 512}};
        json += "  \"fig5\": {\n";
        for (size_t k = 0; k < subs.size(); ++k) {
            subject& x = subs[k];
            create(x, final_n);
            std::vector<double> tg, ti, trw;
            unsigned long long n = 0;
            bool rw_ok = true;
            for (int s = 0; s <= doublings; ++s) {
                const unsigned long long add = s == 0 ? start : n;
                tg.push_back(grow(x, n + add));
                ti.push_back(timed_insert<insert_algo::warp_scan>(x, add, n, s == doublings ? kRepeats : 1));
                n += add;
                if (s == doublings) {
                    u32 *b0 = nullptr, *b1 = nullptr;
                    unsigned long long* bad = nullptr;
                    CK(cudaMalloc(&b0, n * 4)); CK(cudaMalloc(&b1, n * 4)); CK(cudaMalloc(&bad, 8)); CK(cudaMemset(bad, 0, 8));
                    flatten_any(x, b0, n);
                    trw.push_back(timed_rw(x, n));
                    flatten_any(x, b1, n);
                    count_mismatch<<<grid_fill(8), 256>>>(b0, b1, n, 1 + kRwPasses, bad);
                    unsigned long long nbad = 1;
                    CK(cudaMemcpy(&nbad, bad, 8, cudaMemcpyDeviceToHost));
                    rw_ok = nbad == 0;
                    CK(cudaFree(b0)); CK(cudaFree(b1)); CK(cudaFree(bad));
                } else {
                    trw.push_back(timed_rw(x, n));
                }
                char l[64]; snprintf(l, sizeof l, "fig5 %s size %llu", x.name.c_str(), n); progress(l);
            }
            uint64_t bytes = 0;
            if (x.kind == 2) GK(gpudyn_ggarray_allocated_bytes(x.g, &bytes, nullptr));
            else if (x.kind == 1) GK(gpudyn_vmm_array_allocated_bytes(x.v, &bytes));
            else GK(gpudyn_static_array_allocated_bytes(x.s, &bytes));
            destroy(x);
            json += "    \"" + x.name + "\": {\"grow_ms\": " + jarr(tg) + ", \"insert_ms\": " + jarr(ti) + ", \"rw_ms\": " +
                    jarr(trw) + ", \"allocated_bytes\": " + std::to_string(bytes) +
                    ", \"element_bytes\": " + std::to_string(n * 4) + ", \"rw_all_passes_verified\": " + (rw_ok ? "true" : "false") + "}" + (k + 1 < subs.size() ? ",\n" : "\n");
        }
        json += "  },\n";
    }

    // ---- Fig. 4 cols. 2-3: number of LFVectors (last doubling: final/2 -> final) ----
    if (section("lfvectors")) {
        std::vector<double> tgi, trwb, trwg, lf;
        const unsigned long long half = final_n / 2;
        for (unsigned L : lfv_sweep) {
            subject x{"gg", 2, L};
            create(x, final_n);
            grow(x, half);
            timed_insert<insert_algo::warp_scan>(x, half, 0, 1);
            ev_timer e; e.start();
            grow(x, final_n);
            launch_insert<insert_algo::warp_scan>(x, half, half);
            tgi.push_back(e.stop());
            trwb.push_back(timed_rw(x, final_n));
            trwg.push_back(timed_rw(x, final_n, true));
            lf.push_back(L);
            destroy(x);
            char l[64]; snprintf(l, sizeof l, "fig4 lfvectors %u", L); progress(l);
        }
        json += "  \"fig4_lfvectors\": {\"lfvectors\": " + jarr(lf) + ", \"grow_insert_ms\": " + jarr(tgi) +
                ", \"rw_b_ms\": " + jarr(trwb) + ", \"rw_g_ms\": " + jarr(trwg) + "},\n";
    }

    // ---- flatten vs cudaMemcpy D2D ----
    if (section("flatten")) {
        const unsigned long long n = final_n / 2;
        subject x{"gg", 2, 512};
        create(x, final_n);
        grow(x, n);
        launch_insert<insert_algo::warp_scan>(x, n, 0);
        u32 *dst = nullptr, *src = nullptr;
        CK(cudaMalloc(&dst, n * 4)); CK(cudaMalloc(&src, n * 4)); CK(cudaMemset(src, 1, n * 4));
        std::vector<double> tf, tm; ev_timer e;
        GK(gpudyn_ggarray_flatten(x.g, dst, n * 4, nullptr));  // warm-up
        for (int r = 0; r < kRepeats; ++r) {
            e.start(); GK(gpudyn_ggarray_flatten(x.g, dst, n * 4, nullptr)); tf.push_back(e.stop());
            e.start(); CK(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyDeviceToDevice)); tm.push_back(e.stop());
        }
        CK(cudaFree(dst)); CK(cudaFree(src)); destroy(x);
        char b[256];
        snprintf(b, sizeof b, "  \"flatten\": {\"elements\": %llu, \"flatten_ms\": %.6g, \"memcpy_ms\": %.6g},\n", n, median(tf), median(tm));
        json += b;
        progress("flatten");
    }

    // ---- Fig. 6: two-phase application ----
    // Insertion phase: 5 doublings reaching fig6_n; work phase: `w` add-one
    // passes.  Three ways: GGArray flattened into a static buffer for the work
    // (the paper's way), the VMM array in place, and the GGArray in place by
    // spans (no flatten: its spans read and write like a static array).
    // Wall clock of the whole application, median of kFig6Repeats.
    if (section("fig6")) {
        const unsigned long long fig6_n = quick ? (1ull << 22) : (1ull << 27);
        constexpr int kFig6Repeats = 3;
        std::vector<double> speedup, speedup_inplace, t_gg, t_vmm, t_inplace, works;
        for (int w : fig6_work) {
            double tt[3];
            for (int which = 0; which < 3; ++which) {
                std::vector<double> samples;
                for (int r = 0; r < kFig6Repeats; ++r) {
                    subject x = which == 1 ? subject{"vmm", 1} : subject{"gg", 2, 512};
                    create(x, fig6_n);
                    u32* flat = nullptr;
                    if (which == 0) CK(cudaMalloc(&flat, fig6_n * 4));
                    CK(cudaDeviceSynchronize());
                    auto t0 = std::chrono::steady_clock::now();
                    unsigned long long n = 0;
                    for (int s = 0; s <= 5; ++s) {
                        const unsigned long long add = s == 0 ? fig6_n >> 5 : n;
                        grow(x, n + add);
                        launch_insert<insert_algo::warp_scan>(x, add, n);
                        n += add;
                    }
                    const unsigned grid = grid_fill(4);
                    if (which == 0) {
                        GK(gpudyn_ggarray_flatten(x.g, flat, n * 4, nullptr));
                        for (int p = 0; p < w; ++p) add_one<<<grid, kThreads>>>(flat_spans{flat, n}, n);
                    } else if (which == 1) {
                        void* d; GK(gpudyn_vmm_array_data(x.v, &d));
                        for (int p = 0; p < w; ++p) add_one<<<grid, kThreads>>>(flat_spans{static_cast<u32*>(d), n}, n);
                    } else {
                        gpudyn_ggarray_view_t v; GK(gpudyn_ggarray_get_view(x.g, &v, nullptr));
                        for (int p = 0; p < w; ++p) add_one<<<grid, kThreads>>>(gg_spans{ggarray_ref<u32>{v}}, n);
                    }
                    CK(cudaDeviceSynchronize());
                    samples.push_back(wall_ms(t0));
                    if (flat) CK(cudaFree(flat));
                    destroy(x);
                }
                tt[which] = median(samples);
            }
            t_gg.push_back(tt[0]); t_vmm.push_back(tt[1]); t_inplace.push_back(tt[2]);
            speedup.push_back(tt[1] / tt[0]); speedup_inplace.push_back(tt[1] / tt[2]); works.push_back(w);
            char l[64]; snprintf(l, sizeof l, "fig6 work %d", w); progress(l);
        }
        char b[64]; snprintf(b, sizeof b, "%llu", fig6_n);
        json += "  \"fig6\": {\"final_size\": " + std::string(b) + ", \"work_passes\": " + jarr(works) + ", \"ggarray_ms\": " + jarr(t_gg) +
                ", \"vmm_ms\": " + jarr(t_vmm) + ", \"ggarray_inplace_ms\": " + jarr(t_inplace) +
                ", \"speedup_ggarray_over_vmm\": " + jarr(speedup) +
                ", \"speedup_ggarray_inplace_over_vmm\": " + jarr(speedup_inplace) + "}\n";
    }
    if (json.size() >= 2 && json.compare(json.size() - 2, 2, ",\n") == 0) json.erase(json.size() - 2, 1);  // --only
    json += "}\n";
    FILE* f = fopen(out, "w");
    if (!f) { fprintf(stderr, "cannot write %s\n", out); return 2; }
    fputs(json.c_str(), f);
    fclose(f);
    return 0;
}
