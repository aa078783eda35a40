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

// Hash join: build a linear-probing table of R keys, probe with S keys; a
// probe that matches writes its output tuple into a page obtained per match.
constexpr unsigned kEmpty = 0xffffffffu;
__device__ __forceinline__ unsigned slot_of(unsigned key, unsigned mask) {
    return unsigned(gpudyn::detail::mix64(key)) & mask;
}
__global__ void build_kernel(const unsigned* keys, unsigned n, unsigned* table_keys, unsigned* table_vals,
                             unsigned mask) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    unsigned s = slot_of(keys[tid], mask);
    while (atomicCAS(table_keys + s, kEmpty, keys[tid]) != kEmpty) s = (s + 1) & mask;
    table_vals[s] = tid;
}
enum class join_out { direct, rw, rw_bm, corw, cuda_malloc };
template <join_out M>
__global__ void probe_kernel(const unsigned* keys, unsigned n, const unsigned* table_keys, const unsigned* table_vals,
                             unsigned mask, gpudyn_rw_heap_view_t v, unsigned long long* next_page, unsigned seed,
                             unsigned long long* out_ptrs) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned warp_mask = __ballot_sync(0xffffffffu, tid < n);
    if (tid >= n) return;
    const unsigned key = keys[tid];
    unsigned s = slot_of(key, mask), match = kEmpty;
    for (;;) {
        unsigned k = table_keys[s];
        if (k == key) { match = table_vals[s]; break; }
        if (k == kEmpty) break;
        s = (s + 1) & mask;
    }
    const bool found = match != kEmpty;
    rw_heap_ref heap{v};
    counter_rng rng(seed, tid);
    unsigned* page = nullptr;
    if constexpr (M == join_out::corw) {
        const unsigned want = __ballot_sync(warp_mask, found);
        if (found) {
            unsigned p = heap.get_page_corw(want, rng);
            if (p != kRwInvalidPage) page = static_cast<unsigned*>(heap.page_address(p));
        }
    } else if (found) {
        if constexpr (M == join_out::direct) {
            unsigned long long p = atomicAdd(next_page, 1ull);  // DO: pages never freed
            if (p < heap.page_count()) page = static_cast<unsigned*>(heap.page_address(unsigned(p)));
        } else if constexpr (M == join_out::cuda_malloc) {
            page = static_cast<unsigned*>(malloc(heap.page_size()));
        } else {
            unsigned p = heap.get_page<M == join_out::rw ? rw_algorithm::rw : rw_algorithm::rw_bm>(rng);
            if (p != kRwInvalidPage) page = static_cast<unsigned*>(heap.page_address(p));
        }
    }
    if (page) {
        page[0] = key;
        page[1] = match;
        page[2] = tid;
    }
    out_ptrs[tid] = reinterpret_cast<unsigned long long>(page);
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

    size_t total = pool_pages.size() * frees.size() * threads.size() + threads.size() +
                   malloc_threads.size() * 8 * 2 + 4 * 3 + join_sizes.size() * 5;
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

    // ---- Fig. 17: hash-join probe writing into pages ------------------------
    if (part("fig17")) {
        const unsigned long long T = 1ull << 27, S = 64;  // 128M pages as in SVI, 64 B pages (8 GiB)
        gpudyn_rw_heap_t h = make_heap(T, S);
        gpudyn_rw_heap_view_t v;
        GD(gpudyn_rw_heap_get_view(h, &v));
        const unsigned nmax = join_sizes.back();
        unsigned cap = 1;
        while (cap < 2 * nmax) cap <<= 1;
        unsigned *d_build, *d_probe, *d_tk, *d_tv;
        unsigned long long* d_optr;
        CUDA(cudaMalloc(&d_build, nmax * sizeof(unsigned)));
        CUDA(cudaMalloc(&d_probe, nmax * sizeof(unsigned)));
        CUDA(cudaMalloc(&d_tk, cap * sizeof(unsigned)));
        CUDA(cudaMalloc(&d_tv, cap * sizeof(unsigned)));
        CUDA(cudaMalloc(&d_optr, nmax * sizeof(unsigned long long)));
        const char* names[] = {"DO", "RW", "RW-BM", "CoRW", "cuda_malloc"};
        for (unsigned n : join_sizes) {
            unsigned tcap = 1;
            while (tcap < 2 * n) tcap <<= 1;
            std::vector<unsigned> build(n), probe(n);
            for (unsigned i = 0; i < n; ++i) build[i] = i * 2654435761u;  // distinct keys (odd multiplier)
            for (unsigned i = 0; i < n; ++i) probe[i] = build[unsigned(gpudyn::detail::mix64(i) % n)];
            CUDA(cudaMemcpy(d_build, build.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
            CUDA(cudaMemcpy(d_probe, probe.data(), n * sizeof(unsigned), cudaMemcpyHostToDevice));
            CUDA(cudaMemset(d_tk, 0xff, tcap * sizeof(unsigned)));
            build_kernel<<<blocks(n), kBlock>>>(d_build, n, d_tk, d_tv, tcap - 1);
            CUDA(cudaDeviceSynchronize());
            for (int m = 0; m < 5; ++m) {
                progress(fmt("fig17 n=%u %s", n, names[m]));
                if (m == 4 && n > (1u << 20)) continue;  // CUDA malloc: seconds per run beyond 1M
                std::vector<float> t;
                unsigned long long missing = 0;
                for (int r = 0; r <= (m == 4 ? 2 : reps); ++r) {
                    GD(gpudyn_rw_heap_reset(h, nullptr));
                    CUDA(cudaMemset(d_head, 0, 8));
                    float ms = tm.ms([&] {
                        switch (m) {
                            case 0: probe_kernel<join_out::direct><<<blocks(n), kBlock>>>(d_probe, n, d_tk, d_tv, tcap - 1, v, d_head, r, d_optr); break;
                            case 1: probe_kernel<join_out::rw><<<blocks(n), kBlock>>>(d_probe, n, d_tk, d_tv, tcap - 1, v, d_head, r, d_optr); break;
                            case 2: probe_kernel<join_out::rw_bm><<<blocks(n), kBlock>>>(d_probe, n, d_tk, d_tv, tcap - 1, v, d_head, r, d_optr); break;
                            case 3: probe_kernel<join_out::corw><<<blocks(n), kBlock>>>(d_probe, n, d_tk, d_tv, tcap - 1, v, d_head, r, d_optr); break;
                            case 4: probe_kernel<join_out::cuda_malloc><<<blocks(n), kBlock>>>(d_probe, n, d_tk, d_tv, tcap - 1, v, d_head, r, d_optr); break;
                        }
                    });
                    if (r) t.push_back(ms);
                    std::vector<unsigned long long> op(n);
                    CUDA(cudaMemcpy(op.data(), d_optr, n * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
                    missing = std::count(op.begin(), op.end(), 0ull);  // every probe matches: no null output
                    if (m == 4) {
                        cuda_free_kernel<<<blocks(n), kBlock>>>(reinterpret_cast<void**>(d_optr), n);
                        CUDA(cudaDeviceSynchronize());
                    }
                }
                row(fmt("{\"figure\":\"fig17\",\"allocator\":\"%s\",\"tuples\":%u,\"ms\":%.6f,\"missing_outputs\":%llu}",
                        names[m], n, median(t), missing));
            }
        }
        GD(gpudyn_rw_heap_destroy(h));
        cudaFree(d_build); cudaFree(d_probe); cudaFree(d_tk); cudaFree(d_tv); cudaFree(d_optr);
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
