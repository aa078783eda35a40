// Device correctness of the random-walk page heap: no page handed out twice for
// every algorithm, word width and LockMap setting at 50/10/1/0.5% free (also
// when the requests equal the free pages); every page handed out was free;
// exhaustion fails cleanly and leaves the free count exact; freed pages come
// back; measured TAS within 15% of Eq. 3 (RW) and Eq. 5 (RW-BM) and WAS under
// the Eq. 4/6 bounds; CoRW with partial and divergent lane masks; RW_malloc
// ranges disjoint, aligned and inside the pool, frees exact, double frees
// counted, exhaustion and oversize requests refused; double frees (also racing)
// of warp-shared pointers, interior and foreign pointers and frees of the
// other kind counted and harmless to live allocations; RW_malloc's fallback
// sweep finds the last runs; the queue baseline hands out each id once and
// reports exhaustion.
#include "check.h"

#include <gpudyn/experimental.h>
#include <gpudyn/experimental/page_queue.cuh>
#include <gpudyn/rw_heap.h>
#include <gpudyn/rw_heap.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

// Under compute-sanitizer (tests/sanitize.sh exports GPUDYN_SANITIZER) the
// uniqueness sweep runs on 2^14 pages instead of 2^18 and the TAS/WAS theory
// check (statistics over 2^20 pages) is left out; everything else runs as is.
// racecheck and initcheck track every shared/global access and are slower still:
// under them the uniqueness sweep takes 2^12 pages and two free fractions, the
// word-width x LockMap sweeps run the two combinations (32, off) and (64, on), and
// test_malloc takes 2048 requests on 2^15 pages.
static const bool kSanitizer = getenv("GPUDYN_SANITIZER") != nullptr;
static bool slow_tool() {
    const char* t = getenv("GPUDYN_SANITIZER");
    return t != nullptr && (strcmp(t, "racecheck") == 0 || strcmp(t, "initcheck") == 0);
}
static const bool kSlowTool = slow_tool();
static bool skip_combo(uint32_t word_bits, uint32_t lockmap) { return kSlowTool && lockmap != (word_bits == 64); }

#define CUDA_OK(call) CHECK((call) == cudaSuccess)

static const gpudyn_rw_heap_algorithm_t kAlgos[] = {GPUDYN_RW_HEAP_RW, GPUDYN_RW_HEAP_RW_BM, GPUDYN_RW_HEAP_CORW,
                                                    GPUDYN_RW_HEAP_CRW};
static const char* algo_name(int a) {
    static const char* names[] = {"?", "RW", "RW-BM", "CoRW", "CRW"};
    return names[a];
}

static gpudyn_rw_heap_t make_heap(uint64_t pages, uint32_t word_bits, uint32_t lockmap, uint64_t page_size = 256) {
    gpudyn_rw_heap_options_t o;
    gpudyn_rw_heap_options_init(&o);
    o.page_count = pages;
    o.word_bits = word_bits;
    o.use_lockmap = lockmap;
    o.page_size = page_size;
    gpudyn_rw_heap_t h = nullptr;
    CHECK_OK(gpudyn_rw_heap_create(&h, &o, nullptr));
    return h;
}

static uint64_t free_count(gpudyn_rw_heap_t h) {
    uint64_t c = ~0ull;
    CHECK_OK(gpudyn_rw_heap_free_page_count(h, &c, nullptr));
    return c;
}

static gpudyn_rw_heap_info_t info_of(gpudyn_rw_heap_t h) {
    gpudyn_rw_heap_info_t info;
    info.struct_size = sizeof(info);
    CHECK_OK(gpudyn_rw_heap_get_info(h, &info, nullptr));
    return info;
}

// Used bits of every page, read from the view's bitmap.
static std::vector<uint8_t> snapshot(gpudyn_rw_heap_t h) {
    gpudyn_rw_heap_view_t v;
    gpudyn_rw_heap_get_view(h, &v);
    const size_t bytes = size_t(v.word_count) * (v.word_bits / 8);
    std::vector<uint8_t> raw(bytes);
    CUDA_OK(cudaMemcpy(raw.data(), reinterpret_cast<void*>(v.bitmap), bytes, cudaMemcpyDeviceToHost));
    std::vector<uint8_t> used(v.page_count);
    for (uint32_t p = 0; p < v.page_count; ++p) used[p] = (raw[p / 8] >> (p % 8)) & 1; // little-endian words
    return used;
}

// Pages are in range, were free before, and are pairwise distinct.
static int check_pages(const std::vector<uint32_t>& pages, const std::vector<uint8_t>& before, const char* what) {
    int bad = 0;
    std::vector<uint32_t> sorted(pages);
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) {
        if (sorted[i] >= before.size()) {
            ++bad;
            continue;
        }
        if (before[sorted[i]]) ++bad;
        if (i && sorted[i] == sorted[i - 1]) ++bad;
    }
    if (bad) fprintf(stderr, "%s: %d bad pages (out of range, not free before, or duplicated)\n", what, bad);
    return bad;
}

static std::vector<uint32_t> get_pages(gpudyn_rw_heap_t h, uint32_t* d_pages, uint64_t n, gpudyn_rw_heap_algorithm_t a,
                                       uint32_t per_thread, uint64_t seed, gpudyn_status_t expect,
                                       gpudyn_exp_rw_heap_stats_t* stats = nullptr) {
    CHECK_STATUS(gpudyn_exp_rw_heap_get_pages(h, d_pages, n, a, per_thread, seed, stats, nullptr), expect);
    std::vector<uint32_t> pages(n);
    CUDA_OK(cudaMemcpy(pages.data(), d_pages, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
    return pages;
}

static void test_uniqueness() {
    const uint64_t T = kSlowTool ? 1u << 12 : kSanitizer ? 1u << 14 : 1u << 18;
    const double frees[] = {0.5, 0.1, 0.01, 0.005};
    uint32_t* d_pages = nullptr;
    CUDA_OK(cudaMalloc(&d_pages, T * sizeof(uint32_t)));
    for (uint32_t w : {32u, 64u})
        for (uint32_t lock : {0u, 1u}) {
            if (skip_combo(w, lock)) continue;
            gpudyn_rw_heap_t h = make_heap(T, w, lock);
            for (auto a : kAlgos)
                for (double f : frees)
                    for (int full = 0; full < 2; ++full) {
                        if (kSlowTool && (f == 0.1 || f == 0.005)) continue;
                        CHECK_OK(gpudyn_exp_rw_heap_occupy(h, 1.0 - f, 7 + w + lock, nullptr));
                        const uint64_t A = free_count(h);
                        CHECK(A == T - uint64_t(std::llround((1.0 - f) * double(T))));
                        const uint64_t n = full ? A : A / 2;
                        auto before = snapshot(h);
                        auto pages =
                            get_pages(h, d_pages, n, a, a == GPUDYN_RW_HEAP_CRW ? 4 : 1, 99 + full, GPUDYN_SUCCESS);
                        char what[128];
                        snprintf(what, sizeof what, "%s w=%u lock=%u free=%.3f n=%llu", algo_name(a), w, lock, f,
                                 (unsigned long long)n);
                        gpudyn_test_failures += check_pages(pages, before, what) ? 1 : 0;
                        CHECK(free_count(h) == A - n);
                        auto after = snapshot(h);
                        for (uint32_t p : pages)
                            if (p < T && !after[p]) {
                                ++gpudyn_test_failures;
                                fprintf(stderr, "%s: page %u not marked\n", what, p);
                                break;
                            }
                        CHECK_OK(gpudyn_rw_heap_free_pages(h, d_pages, n, nullptr));
                        CHECK(free_count(h) == A);
                    }
            gpudyn_rw_heap_info_t info = info_of(h);
            CHECK(info.bad_frees == 0);
            CHECK(info.failed_requests == 0);
            CHECK_OK(gpudyn_rw_heap_destroy(h));
        }
    cudaFree(d_pages);
}

static void test_exhaustion_and_reuse() {
    const uint64_t T = 1u << 16, A = 1000;
    uint32_t* d_pages = nullptr;
    CUDA_OK(cudaMalloc(&d_pages, T * sizeof(uint32_t)));
    for (uint32_t w : {32u, 64u}) {
        gpudyn_rw_heap_t h = make_heap(T, w, 0);
        for (auto a : kAlgos) {
            CHECK_OK(gpudyn_exp_rw_heap_occupy(h, double(T - A) / double(T), 3, nullptr));
            CHECK(free_count(h) == A);
            get_pages(h, d_pages, A + 5, a, 1, 1, GPUDYN_ERROR_OUT_OF_MEMORY);
            CHECK(strstr(gpudyn_last_error_message(), "found no free page") != NULL);
            CHECK(free_count(h) == A); // rolled back: the heap keeps what it had
            CHECK(info_of(h).failed_requests >= 5);
            auto before = snapshot(h);
            auto pages = get_pages(h, d_pages, A, a, 1, 2, GPUDYN_SUCCESS);
            gpudyn_test_failures += check_pages(pages, before, "exhaustion: all free pages") ? 1 : 0;
            CHECK(free_count(h) == 0);
            get_pages(h, d_pages + A, 1, a, 1, 3, GPUDYN_ERROR_OUT_OF_MEMORY);
            // Freed pages come back: free half, take them again.
            CHECK_OK(gpudyn_rw_heap_free_pages(h, d_pages, A / 2, nullptr));
            CHECK(free_count(h) == A / 2);
            before = snapshot(h);
            auto again = get_pages(h, d_pages, A / 2, a, 1, 4, GPUDYN_SUCCESS);
            gpudyn_test_failures += check_pages(again, before, "reuse") ? 1 : 0;
            std::vector<uint32_t> all(again);
            all.insert(all.end(), pages.begin() + A / 2, pages.end());
            std::vector<uint8_t> none(T, 0);
            gpudyn_test_failures += check_pages(all, none, "reuse + kept") ? 1 : 0;
            CHECK(free_count(h) == 0);
        }
        // Double free and out-of-range ids are counted, the bitmap unchanged.
        CHECK_OK(gpudyn_rw_heap_reset(h, nullptr));
        uint32_t host_bad[3] = {5, 5, uint32_t(T + 3)};
        CUDA_OK(cudaMemcpy(d_pages, host_bad, sizeof host_bad, cudaMemcpyHostToDevice));
        CHECK_OK(gpudyn_rw_heap_free_pages(h, d_pages, 3, nullptr));
        CHECK(info_of(h).bad_frees == 3);
        CHECK(free_count(h) == T);
        CHECK_OK(gpudyn_rw_heap_destroy(h));
    }
    // A page count that is not a multiple of the word: tail bits never handed out.
    gpudyn_rw_heap_t h = make_heap(1000, 64, 1);
    CHECK(free_count(h) == 1000);
    auto pages = get_pages(h, d_pages, 1000, GPUDYN_RW_HEAP_CORW, 1, 5, GPUDYN_SUCCESS);
    std::vector<uint8_t> none(1000, 0);
    gpudyn_test_failures += check_pages(pages, none, "tail word") ? 1 : 0;
    get_pages(h, d_pages, 1, GPUDYN_RW_HEAP_RW, 1, 6, GPUDYN_ERROR_OUT_OF_MEMORY);
    CHECK_OK(gpudyn_rw_heap_destroy(h));
    cudaFree(d_pages);
}

// Eq. 3 before the ln approximation: (T/N) sum_{j<N} 1/(A-j).
static double eq3(double T, double A, double N) {
    double s = 0;
    for (double j = 0; j < N; ++j) s += 1.0 / (A - j);
    return T / N * s;
}
// Eq. 5: (1/N) sum_{j<N} 1 / (1 - ((T-A+j)/T)^w).
static double eq5(double T, double A, double N, double w) {
    double s = 0;
    for (double j = 0; j < N; ++j) s += 1.0 / (1.0 - std::pow((T - A + j) / T, w));
    return s / N;
}
// Eqs. 4 and 6: sum_{k>=0} 1 - (1 - q^(w k))^32 with q = (T-A+N)/T (w = 1 for RW).
static double was_bound(double T, double A, double N, double w) {
    const double q = std::pow((T - A + N) / T, w);
    double s = 0, qk = 1;
    for (int k = 0; k < 1000000; ++k) {
        double term = 1.0 - std::pow(1.0 - qk, 32.0);
        s += term;
        if (term < 1e-12) break;
        qk *= q;
    }
    return s;
}

static void test_tas_theory() {
    if (kSanitizer) {
        printf("TAS/WAS theory check left out under compute-sanitizer (needs 2^20 pages)\n");
        return;
    }
    const uint64_t T = 1u << 20;
    uint32_t* d_pages = nullptr;
    CUDA_OK(cudaMalloc(&d_pages, T * sizeof(uint32_t)));
    gpudyn_rw_heap_t h = make_heap(T, 32, 0);
    for (double f : {0.5, 0.1, 0.01}) {
        for (auto a : {GPUDYN_RW_HEAP_RW, GPUDYN_RW_HEAP_RW_BM}) {
            CHECK_OK(gpudyn_exp_rw_heap_occupy(h, 1.0 - f, 11, nullptr));
            const double A = double(free_count(h));
            const uint64_t N = uint64_t(A / 2);
            gpudyn_exp_rw_heap_stats_t st;
            st.struct_size = sizeof st;
            get_pages(h, d_pages, N, a, 1, 12, GPUDYN_SUCCESS, &st);
            const bool rw = a == GPUDYN_RW_HEAP_RW;
            const double theory = rw ? eq3(double(T), A, double(N)) : eq5(double(T), A, double(N), 32);
            const double bound = was_bound(double(T), A, double(N), rw ? 1 : 32);
            printf("%-5s free=%4.1f%% N=%7llu TAS %.3f (Eq.%d %.3f, ratio %.3f)  WAS %.3f (bound %.3f)\n", algo_name(a),
                   f * 100, (unsigned long long)N, st.tas, rw ? 3 : 5, theory, st.tas / theory, st.was, bound);
            CHECK(st.requests == N && st.failed == 0);
            CHECK(std::fabs(st.tas / theory - 1.0) <= 0.15);
            CHECK(st.was >= st.tas);
            // Eq. 4 bounds RW's WAS.  Eq. 6 (RW-BM) assumes sequential walks; with
            // N/(T/32) threads per word concurrent readers of one word overshoot it
            // (H200: 1.14 vs 1.003 at 50% free), so it is reported, not asserted.
            if (rw) CHECK(st.was <= bound * 1.05);
        }
    }
    CHECK_OK(gpudyn_rw_heap_destroy(h));
    cudaFree(d_pages);
}

// CoRW from divergent branches with partial masks, and a single-lane RW_malloc
// with local storage, in one kernel.
__global__ void divergent_kernel(gpudyn_rw_heap_view_t v, unsigned* pages, unsigned long long* ptrs) {
    gpudyn::rw_heap_ref heap{v};
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = threadIdx.x % 32;
    gpudyn::detail::counter_rng rng(42, tid);
    const unsigned takes = __ballot_sync(0xffffffffu, lane % 3 != 0);
    unsigned page = gpudyn::kRwInvalidPage;
    if (lane % 3 != 0) {
        const unsigned odd = takes & 0xAAAAAAAAu, even = takes & 0x55555555u;
        if (lane & 1) page = heap.get_page_corw(odd, rng);
        else page = heap.get_page_corw(even, rng);
    } else if (lane == 3) {
        gpudyn::rw_malloc_storage local;
        ptrs[tid / 32] = reinterpret_cast<unsigned long long>(heap.malloc(1u << 3, 200, local, rng));
    }
    pages[tid] = page;
}

static void test_divergent_corw() {
    const uint64_t T = 1u << 16;
    const unsigned threads = 4096, warps = threads / 32;
    gpudyn_rw_heap_t h = make_heap(T, 32, 0);
    CHECK_OK(gpudyn_exp_rw_heap_occupy(h, 0.9, 5, nullptr));
    const uint64_t A = free_count(h);
    auto before = snapshot(h);
    gpudyn_rw_heap_view_t v;
    CHECK_OK(gpudyn_rw_heap_get_view(h, &v));
    unsigned* d_pages;
    unsigned long long* d_ptrs;
    CUDA_OK(cudaMalloc(&d_pages, threads * sizeof(unsigned)));
    CUDA_OK(cudaMalloc(&d_ptrs, warps * sizeof(unsigned long long)));
    divergent_kernel<<<threads / 256, 256>>>(v, d_pages, d_ptrs);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<unsigned> pages(threads);
    std::vector<unsigned long long> ptrs(warps);
    CUDA_OK(cudaMemcpy(pages.data(), d_pages, threads * sizeof(unsigned), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(ptrs.data(), d_ptrs, warps * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    std::vector<uint32_t> got;
    for (unsigned t = 0; t < threads; ++t) {
        const bool caller = (t % 32) % 3 != 0;
        CHECK(caller == (pages[t] != gpudyn::kRwInvalidPage));
        if (caller) got.push_back(pages[t]);
    }
    // Each single-lane malloc of 200 B takes one page (10% free: longer runs are rare).
    for (unsigned long long p : ptrs) {
        CHECK(p != 0 && p % 16 == 0 && p >= v.pool && p + 200 <= v.pool + T * 256);
        if (p != 0) got.push_back(uint32_t((p - v.pool) / 256));
    }
    gpudyn_test_failures += check_pages(got, before, "divergent CoRW + single-lane malloc") ? 1 : 0;
    CHECK(free_count(h) == A - got.size());
    cudaFree(d_pages);
    cudaFree(d_ptrs);
    CHECK_OK(gpudyn_rw_heap_destroy(h));
}

// Allocate then free at once in one kernel (Fig. 13's last scenario).
__global__ void malloc_free_kernel(gpudyn_rw_heap_view_t v, const unsigned long long* sizes, unsigned n,
                                   unsigned* failures) {
    __shared__ gpudyn::rw_malloc_storage storage[8];
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned mask = __ballot_sync(0xffffffffu, tid < n);
    if (tid >= n) return;
    gpudyn::rw_heap_ref heap{v};
    gpudyn::detail::counter_rng rng(77, tid);
    void* p = heap.malloc(mask, sizes[tid], storage[threadIdx.x / 32], rng);
    if (sizes[tid] != 0 && p == nullptr) atomicAdd(failures, 1u);
    if (p != nullptr) static_cast<unsigned char*>(p)[sizes[tid] - 1] = 1; // the last byte is ours
    if (!heap.free(p)) atomicAdd(failures, 1u);
}

static void test_malloc() {
    // Under racecheck / initcheck a quarter of the requests on a quarter of the pages
    // (the full size ran past 150 s there); the exhaustion check still cannot fit.
    const uint64_t T = kSlowTool ? 1u << 15 : 1u << 17, S = 256;
    const unsigned n = kSlowTool ? 2048 : 8192;
    const uint64_t pattern[] = {16, 100, 256, 1000, 4096, 8192, 0, 33, 4100, 255, 4, 8196};
    std::vector<uint64_t> sizes(n);
    uint64_t total = 0;
    for (unsigned i = 0; i < n; ++i) total += sizes[i] = pattern[(i * 7 + i / 32) % 12];
    uint64_t *d_sizes, *d_ptrs;
    CUDA_OK(cudaMalloc(&d_sizes, n * sizeof(uint64_t)));
    CUDA_OK(cudaMalloc(&d_ptrs, n * sizeof(uint64_t)));
    CUDA_OK(cudaMemcpy(d_sizes, sizes.data(), n * sizeof(uint64_t), cudaMemcpyHostToDevice));
    for (uint32_t w : {32u, 64u})
        for (uint32_t lock : {0u, 1u}) {
            if (skip_combo(w, lock)) continue;
            gpudyn_rw_heap_t h = make_heap(T, w, lock, S);
            gpudyn_rw_heap_view_t v;
            gpudyn_rw_heap_get_view(h, &v);
            CHECK_OK(gpudyn_exp_rw_heap_malloc(h, d_sizes, d_ptrs, n, 1, nullptr));
            std::vector<uint64_t> ptrs(n);
            CUDA_OK(cudaMemcpy(ptrs.data(), d_ptrs, n * sizeof(uint64_t), cudaMemcpyDeviceToHost));
            std::vector<std::pair<uint64_t, uint64_t>> ranges;
            int bad = 0;
            for (unsigned i = 0; i < n; ++i) {
                if (sizes[i] == 0) {
                    bad += ptrs[i] != 0;
                    continue;
                }
                bad += ptrs[i] == 0 || ptrs[i] % 16 != 0 || ptrs[i] < v.pool || ptrs[i] + sizes[i] > v.pool + T * S;
                ranges.push_back({ptrs[i], sizes[i]});
            }
            std::sort(ranges.begin(), ranges.end());
            for (size_t i = 1; i < ranges.size(); ++i)
                bad += ranges[i - 1].first + ranges[i - 1].second > ranges[i].first;
            if (bad) fprintf(stderr, "malloc w=%u lock=%u: %d bad pointers or overlaps\n", w, lock, bad);
            CHECK(bad == 0);
            const uint64_t used = T - free_count(h);
            CHECK(used * S >= total);
            // Pages of large requests are exact; aggregation wastes less than a page per warp.
            CHECK(used * S <= total + uint64_t(n) * S);
            CHECK_OK(gpudyn_rw_heap_free(h, d_ptrs, n, nullptr));
            CHECK(free_count(h) == T);
            CHECK(info_of(h).bad_frees == 0);
            // Freeing again: every pointer is a bad free, nothing changes.
            CHECK_OK(gpudyn_rw_heap_free(h, d_ptrs, n, nullptr));
            CHECK(info_of(h).bad_frees == ranges.size());
            CHECK(free_count(h) == T);
            // Allocate-then-free in one kernel.
            unsigned* d_fail;
            CUDA_OK(cudaMalloc(&d_fail, sizeof(unsigned)));
            CUDA_OK(cudaMemset(d_fail, 0, sizeof(unsigned)));
            malloc_free_kernel<<<n / 256, 256>>>(v, reinterpret_cast<const unsigned long long*>(d_sizes), n, d_fail);
            CUDA_OK(cudaDeviceSynchronize());
            unsigned fails = 1;
            CUDA_OK(cudaMemcpy(&fails, d_fail, sizeof fails, cudaMemcpyDeviceToHost));
            CHECK(fails == 0);
            CHECK(free_count(h) == T);
            cudaFree(d_fail);
            // Exhaustion: 0.1% free cannot hold 64 runs of 16 pages; nothing changes.
            CHECK_OK(gpudyn_exp_rw_heap_occupy(h, 0.999, 3, nullptr));
            const uint64_t A = free_count(h);
            std::vector<uint64_t> big(64, 4096);
            CUDA_OK(cudaMemcpy(d_sizes + n - 64, big.data(), 64 * sizeof(uint64_t), cudaMemcpyHostToDevice));
            CHECK_STATUS(gpudyn_exp_rw_heap_malloc(h, d_sizes + n - 64, d_ptrs, 64, 2, nullptr),
                         GPUDYN_ERROR_OUT_OF_MEMORY);
            CHECK(free_count(h) == A);
            // Oversize: one request above 32 words of pages.
            uint64_t max_bytes = 0;
            CHECK_OK(gpudyn_rw_heap_max_malloc_size(h, &max_bytes));
            CHECK(max_bytes == 32ull * w * S);
            uint64_t over = max_bytes + 1;
            CUDA_OK(cudaMemcpy(d_sizes + n - 64, &over, sizeof over, cudaMemcpyHostToDevice));
            CHECK_OK(gpudyn_rw_heap_reset(h, nullptr));
            CHECK_INVALID(gpudyn_exp_rw_heap_malloc(h, d_sizes + n - 64, d_ptrs, 1, 2, nullptr), "sizes");
            CHECK(free_count(h) == T);
            CUDA_OK(cudaMemcpy(d_sizes, sizes.data(), n * sizeof(uint64_t), cudaMemcpyHostToDevice));
            CHECK_OK(gpudyn_rw_heap_destroy(h));
        }
    cudaFree(d_sizes);
    cudaFree(d_ptrs);
}

// One thread frees `p` `times` times in a row: ok[i] = result of the i-th free.
__global__ void free_repeat_kernel(gpudyn_rw_heap_view_t v, unsigned long long p, unsigned times, unsigned* ok) {
    gpudyn::rw_heap_ref heap{v};
    for (unsigned i = 0; i < times; ++i) ok[i] = heap.free(reinterpret_cast<void*>(p));
}

// Thread t frees ptrs[t] (copies of one pointer at distant indices race from
// different blocks): ok[t] = result.
__global__ void free_each_kernel(gpudyn_rw_heap_view_t v, const unsigned long long* ptrs, unsigned n, unsigned* ok) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    gpudyn::rw_heap_ref heap{v};
    ok[t] = heap.free(reinterpret_cast<void*>(ptrs[t]));
}

__device__ __host__ inline unsigned char pattern_byte(unsigned i, unsigned long long j) {
    return (unsigned char)((i * 131u + unsigned(j) * 7u + 1u) & 0xffu);
}

// Allocation i (ptrs[i], sizes[i] bytes) gets pattern_byte(i, j) at byte j.
__global__ void fill_kernel(const unsigned long long* ptrs, const unsigned long long* sizes, unsigned n) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || ptrs[i] == 0) return;
    auto* b = reinterpret_cast<unsigned char*>(ptrs[i]);
    for (unsigned long long j = 0; j < sizes[i]; ++j) b[j] = pattern_byte(i, j);
}

// Every byte of the listed pages becomes 0xEE.
__global__ void fill_pages_kernel(gpudyn_rw_heap_view_t v, const unsigned* pages, unsigned n) {
    for (unsigned k = blockIdx.x; k < n; k += gridDim.x) {
        unsigned char* b = reinterpret_cast<unsigned char*>(v.pool) + (unsigned long long)pages[k] * v.page_size;
        for (unsigned long long j = threadIdx.x; j < v.page_size; j += blockDim.x) b[j] = 0xEE;
    }
}

static std::vector<unsigned> run_free_each(gpudyn_rw_heap_view_t v, const std::vector<uint64_t>& list) {
    const unsigned n = unsigned(list.size());
    unsigned long long* d_list;
    unsigned* d_ok;
    CUDA_OK(cudaMalloc(&d_list, n * sizeof(unsigned long long)));
    CUDA_OK(cudaMalloc(&d_ok, n * sizeof(unsigned)));
    CUDA_OK(cudaMemcpy(d_list, list.data(), n * sizeof(unsigned long long), cudaMemcpyHostToDevice));
    free_each_kernel<<<(n + 255) / 256, 256>>>(v, d_list, n, d_ok);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<unsigned> ok(n);
    CUDA_OK(cudaMemcpy(ok.data(), d_ok, n * sizeof(unsigned), cudaMemcpyDeviceToHost));
    cudaFree(d_list);
    cudaFree(d_ok);
    return ok;
}

// Double frees (one thread twice; four threads of different blocks at once) of
// warp-shared small pointers, interior, misaligned and foreign pointers, free()
// of a get_page page and free_page of malloc pages: each is one bad free and
// changes nothing.  Then every other page is taken and overwritten: the live
// allocations keep their bytes and share no page with it, and after the
// legitimate frees the heap is exactly as free as at the start.
static void test_bad_frees() {
    const uint64_t T = 1024, S = 256;
    const unsigned n = 256; // 8 warps: warps 0..6 small (shared runs), warp 7 large runs
    std::vector<uint64_t> sizes(n);
    for (unsigned i = 0; i < n; ++i) sizes[i] = i < 224 ? 16 * (1 + (i * 7) % 10) : 300 + 100 * (i % 5);
    auto keep = [](unsigned i) { return i == 31 || i == 63 || (i >= 65 && i < 96) || (i >= 224 && i < 228); };
    const unsigned twice = 0, raced = 35, kRacers = 4;
    uint64_t *d_sizes, *d_ptrs;
    uint32_t* d_pages;
    unsigned* d_ok;
    CUDA_OK(cudaMalloc(&d_sizes, n * sizeof(uint64_t)));
    CUDA_OK(cudaMalloc(&d_ptrs, n * sizeof(uint64_t)));
    CUDA_OK(cudaMalloc(&d_pages, T * sizeof(uint32_t)));
    CUDA_OK(cudaMalloc(&d_ok, 4 * sizeof(unsigned)));
    CUDA_OK(cudaMemcpy(d_sizes, sizes.data(), n * sizeof(uint64_t), cudaMemcpyHostToDevice));
    for (uint32_t w : {32u, 64u}) {
        gpudyn_rw_heap_t h = make_heap(T, w, 0, S);
        gpudyn_rw_heap_view_t v;
        CHECK_OK(gpudyn_rw_heap_get_view(h, &v));
        const uint64_t start = free_count(h);
        CHECK(start == T);
        CHECK_OK(gpudyn_exp_rw_heap_malloc(h, d_sizes, d_ptrs, n, 5, nullptr));
        std::vector<uint64_t> ptrs(n);
        CUDA_OK(cudaMemcpy(ptrs.data(), d_ptrs, n * sizeof(uint64_t), cudaMemcpyDeviceToHost));
        for (unsigned i = 0; i < n; ++i) CHECK(ptrs[i] != 0);
        // Warp 0's small pointers share pages (the case under test).
        CHECK((ptrs[30] - v.pool) / S == (ptrs[31] - v.pool) / S || (ptrs[0] - v.pool) / S == (ptrs[1] - v.pool) / S);
        fill_kernel<<<1, n>>>(reinterpret_cast<const unsigned long long*>(d_ptrs),
                              reinterpret_cast<const unsigned long long*>(d_sizes), n);
        CUDA_OK(cudaDeviceSynchronize());
        uint64_t bad_expected = 0;

        // One thread frees a shared small pointer twice: the second is refused.
        free_repeat_kernel<<<1, 1>>>(v, ptrs[twice], 2, d_ok);
        CUDA_OK(cudaDeviceSynchronize());
        unsigned ok2[2] = {9, 9};
        CUDA_OK(cudaMemcpy(ok2, d_ok, sizeof ok2, cudaMemcpyDeviceToHost));
        CHECK(ok2[0] == 1 && ok2[1] == 0);
        bad_expected += 1;
        CHECK(info_of(h).bad_frees == bad_expected);

        // Four threads in four blocks free one shared small pointer at once: one wins.
        std::vector<uint64_t> race(kRacers * 256, 0);
        for (unsigned c = 0; c < kRacers; ++c) race[c * 256 + c * 37 % 256] = ptrs[raced];
        auto race_ok = run_free_each(v, race);
        unsigned wins = 0;
        for (unsigned c = 0; c < kRacers; ++c) wins += race_ok[c * 256 + c * 37 % 256];
        CHECK(wins == 1);
        bad_expected += kRacers - 1;
        CHECK(info_of(h).bad_frees == bad_expected);

        // Interior, misaligned and foreign pointers, and a get_page page through free().
        unsigned inner = 65;
        while (sizes[inner] < 32) ++inner; // a live small allocation with a byte 16 of its own
        CHECK(keep(inner));
        get_pages(h, d_pages, 1, GPUDYN_RW_HEAP_RW_BM, 1, 9, GPUDYN_SUCCESS);
        uint32_t taken = gpudyn::kRwInvalidPage;
        CUDA_OK(cudaMemcpy(&taken, d_pages, sizeof taken, cudaMemcpyDeviceToHost));
        const std::vector<uint64_t> bad_ptrs = {
            ptrs[inner] + 16, ptrs[inner] + 1, ptrs[224] + 16, ptrs[224] + S,
            ptrs[224] + 1,    v.pool - 16,     v.pool + T * S, v.pool + uint64_t(taken) * S,
            ptrs[twice], // freed above
        };
        auto bad_ok = run_free_each(v, bad_ptrs);
        for (size_t k = 0; k < bad_ok.size(); ++k)
            if (bad_ok[k]) {
                ++gpudyn_test_failures;
                fprintf(stderr, "w=%u: bad pointer %zu was freed\n", w, k);
            }
        bad_expected += bad_ptrs.size();
        // free_page on malloc pages: a large run's first and second page, a shared run's page.
        const uint32_t bad_pages[3] = {uint32_t((ptrs[224] - v.pool) / S), uint32_t((ptrs[224] - v.pool) / S + 1),
                                       uint32_t((ptrs[inner] - v.pool) / S)};
        CUDA_OK(cudaMemcpy(d_pages + 1, bad_pages, sizeof bad_pages, cudaMemcpyHostToDevice));
        CHECK_OK(gpudyn_rw_heap_free_pages(h, d_pages + 1, 3, nullptr));
        bad_expected += 3;
        CHECK(info_of(h).bad_frees == bad_expected);

        // Legitimate frees of everything but the keepers.
        std::vector<uint64_t> rest(n, 0);
        for (unsigned i = 0; i < n; ++i)
            if (!keep(i) && i != twice && i != raced) rest[i] = ptrs[i];
        auto rest_ok = run_free_each(v, rest);
        for (unsigned i = 0; i < n; ++i)
            if (rest[i] && !rest_ok[i]) {
                ++gpudyn_test_failures;
                fprintf(stderr, "w=%u: free of %u refused\n", w, i);
            }
        CHECK(info_of(h).bad_frees == bad_expected);

        // Take every page left and overwrite it.
        const uint64_t left = free_count(h);
        auto before = snapshot(h);
        auto got = get_pages(h, d_pages, left, GPUDYN_RW_HEAP_RW_BM, 1, 10, GPUDYN_SUCCESS);
        gpudyn_test_failures += check_pages(got, before, "bad frees: every page left") ? 1 : 0;
        CHECK(free_count(h) == 0);
        fill_pages_kernel<<<64, 128>>>(v, d_pages, unsigned(left));
        CUDA_OK(cudaDeviceSynchronize());
        // Only the kept ranges come back (the rest of the pool is partly unwritten:
        // a whole-pool copy would read uninitialized memory under initcheck).
        std::vector<uint8_t> pool(T * S);
        for (unsigned i = 0; i < n; ++i)
            if (keep(i))
                CUDA_OK(cudaMemcpy(pool.data() + (ptrs[i] - v.pool), reinterpret_cast<void*>(ptrs[i]), sizes[i],
                                   cudaMemcpyDeviceToHost));
        std::vector<uint8_t> page_taken(T, 0);
        for (uint32_t p : got)
            if (p < T) page_taken[p] = 1;
        page_taken[taken] = 1;
        unsigned corrupted = 0, shared_pages = 0;
        for (unsigned i = 0; i < n; ++i) {
            if (!keep(i)) continue;
            const uint64_t off = ptrs[i] - v.pool;
            for (uint64_t j = 0; j < sizes[i]; ++j) corrupted += pool[off + j] != pattern_byte(i, j);
            for (uint64_t p = off / S; p <= (off + sizes[i] - 1) / S; ++p) shared_pages += page_taken[p];
        }
        if (corrupted || shared_pages)
            fprintf(stderr, "w=%u: %u live bytes overwritten, %u live pages handed out again\n", w, corrupted,
                    shared_pages);
        CHECK(corrupted == 0 && shared_pages == 0);

        // Give everything back: exactly the starting free pages, no new bad frees.
        CHECK_OK(gpudyn_rw_heap_free_pages(h, d_pages, left, nullptr));
        CUDA_OK(cudaMemcpy(d_pages, &taken, sizeof taken, cudaMemcpyHostToDevice));
        CHECK_OK(gpudyn_rw_heap_free_pages(h, d_pages, 1, nullptr));
        std::vector<uint64_t> kept(n, 0);
        for (unsigned i = 0; i < n; ++i)
            if (keep(i)) kept[i] = ptrs[i];
        auto kept_ok = run_free_each(v, kept);
        for (unsigned i = 0; i < n; ++i)
            if (kept[i] && !kept_ok[i]) {
                ++gpudyn_test_failures;
                fprintf(stderr, "w=%u: free of kept %u refused\n", w, i);
            }
        CHECK(free_count(h) == start);
        CHECK(info_of(h).bad_frees == bad_expected);
        CHECK(info_of(h).failed_requests == 0);
        CHECK_OK(gpudyn_rw_heap_destroy(h));
    }
    cudaFree(d_sizes);
    cudaFree(d_ptrs);
    cudaFree(d_pages);
    cudaFree(d_ok);
}

// RW_malloc's bounded fallback: with one random region per request
// (max_random_steps = 1) and the heap full except kRuns runs of kRunPages pages
// (not word-aligned) plus scattered single pages, kRuns requests of kRunPages
// pages succeed and get exactly those runs; one more fails and changes nothing.
static void test_malloc_fallback() {
    const uint64_t T = 1u << 16, S = 256;
    const unsigned kRuns = 4, kRunPages = 20;
    const uint32_t run_start[kRuns] = {1007, 17000 + 45, 40000 + 3, 65536 - 64 - 9};
    uint32_t* d_pages;
    uint64_t *d_sizes, *d_ptrs;
    CUDA_OK(cudaMalloc(&d_pages, T * sizeof(uint32_t)));
    CUDA_OK(cudaMalloc(&d_sizes, (kRuns + 1) * sizeof(uint64_t)));
    CUDA_OK(cudaMalloc(&d_ptrs, (kRuns + 1) * sizeof(uint64_t)));
    std::vector<uint64_t> sizes(kRuns + 1, kRunPages * S);
    CUDA_OK(cudaMemcpy(d_sizes, sizes.data(), sizes.size() * sizeof(uint64_t), cudaMemcpyHostToDevice));
    std::vector<uint32_t> give; // pages left free
    for (unsigned r = 0; r < kRuns; ++r)
        for (uint32_t p = run_start[r]; p < run_start[r] + kRunPages; ++p) give.push_back(p);
    for (uint32_t p = 3; p < T; p += 97) { // single free pages that hold no run
        bool near = false;
        for (unsigned r = 0; r < kRuns; ++r) near |= p + 1 >= run_start[r] && p <= run_start[r] + kRunPages;
        if (!near) give.push_back(p);
    }
    for (uint32_t w : {32u, 64u})
        for (uint32_t lock : {0u, 1u})
            for (uint64_t seed : {1u, 2u, 3u}) {
                if (skip_combo(w, lock) || (kSlowTool && seed > 1)) continue;
                gpudyn_rw_heap_options_t o;
                gpudyn_rw_heap_options_init(&o);
                o.page_count = T;
                o.page_size = S;
                o.word_bits = w;
                o.use_lockmap = lock;
                o.max_random_steps = 1;
                gpudyn_rw_heap_t h = nullptr;
                CHECK_OK(gpudyn_rw_heap_create(&h, &o, nullptr));
                CHECK_OK(gpudyn_exp_rw_heap_occupy(h, 1.0, seed, nullptr)); // every page used
                CUDA_OK(cudaMemcpy(d_pages, give.data(), give.size() * sizeof(uint32_t), cudaMemcpyHostToDevice));
                CHECK_OK(gpudyn_rw_heap_free_pages(h, d_pages, give.size(), nullptr));
                CHECK(free_count(h) == give.size());
                gpudyn_rw_heap_view_t v;
                CHECK_OK(gpudyn_rw_heap_get_view(h, &v));
                CHECK_OK(gpudyn_exp_rw_heap_malloc(h, d_sizes, d_ptrs, kRuns, seed, nullptr));
                std::vector<uint64_t> ptrs(kRuns);
                CUDA_OK(cudaMemcpy(ptrs.data(), d_ptrs, kRuns * sizeof(uint64_t), cudaMemcpyDeviceToHost));
                std::vector<uint32_t> firsts, expect(run_start, run_start + kRuns);
                for (uint64_t p : ptrs) firsts.push_back(p >= v.pool ? uint32_t((p - v.pool) / S) : ~0u);
                std::sort(firsts.begin(), firsts.end());
                if (firsts != expect)
                    fprintf(stderr, "fallback w=%u lock=%u seed=%llu: runs not found\n", w, lock,
                            (unsigned long long)seed);
                CHECK(firsts == expect);
                CHECK(free_count(h) == give.size() - kRuns * kRunPages);
                // One more run of kRunPages does not exist: refused, nothing changes.
                const uint64_t left = free_count(h);
                CHECK_STATUS(gpudyn_exp_rw_heap_malloc(h, d_sizes + kRuns, d_ptrs + kRuns, 1, seed, nullptr),
                             GPUDYN_ERROR_OUT_OF_MEMORY);
                CHECK(free_count(h) == left);
                CHECK_OK(gpudyn_rw_heap_free(h, d_ptrs, kRuns, nullptr));
                CHECK(free_count(h) == give.size());
                CHECK(info_of(h).bad_frees == 0);
                CHECK_OK(gpudyn_rw_heap_destroy(h));
            }
    cudaFree(d_pages);
    cudaFree(d_sizes);
    cudaFree(d_ptrs);
}

// The queue baseline (gpudyn::experimental::page_queue): N requests on a queue of M
// distinct ids (N > M) hand out exactly the M ids, each once, positions are a
// permutation of 0..N-1, and the N - M late requests get kPageQueueEmpty.
__global__ void queue_pop_kernel(gpudyn::experimental::page_queue q, unsigned n, unsigned* out,
                                 unsigned long long* position) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n) return;
    // Divergent on purpose: odd threads pop through the overload with a position.
    if (tid % 2) {
        out[tid] = q.pop(position[tid]);
    } else {
        unsigned long long p;
        out[tid] = q.pop(p);
        position[tid] = p;
    }
}

static void test_page_queue() {
    const unsigned M = 50000, N = 65536;
    std::vector<unsigned> ids(M);
    for (unsigned i = 0; i < M; ++i) ids[i] = i * 7u + 3u; // distinct
    unsigned *d_ids, *d_out;
    unsigned long long *d_head, *d_pos;
    CUDA_OK(cudaMalloc(&d_ids, M * sizeof(unsigned)));
    CUDA_OK(cudaMalloc(&d_out, N * sizeof(unsigned)));
    CUDA_OK(cudaMalloc(&d_head, sizeof(unsigned long long)));
    CUDA_OK(cudaMalloc(&d_pos, N * sizeof(unsigned long long)));
    CUDA_OK(cudaMemcpy(d_ids, ids.data(), M * sizeof(unsigned), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemset(d_head, 0, sizeof(unsigned long long)));
    queue_pop_kernel<<<(N + 255) / 256, 256>>>(gpudyn::experimental::page_queue{d_ids, d_head, M}, N, d_out, d_pos);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<unsigned> out(N);
    std::vector<unsigned long long> pos(N);
    unsigned long long head = 0;
    CUDA_OK(cudaMemcpy(out.data(), d_out, N * sizeof(unsigned), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(pos.data(), d_pos, N * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&head, d_head, sizeof head, cudaMemcpyDeviceToHost));
    CHECK(head == N);
    std::vector<unsigned> got;
    std::vector<char> seen_pos(N, 0);
    unsigned empty = 0;
    for (unsigned i = 0; i < N; ++i) {
        CHECK(pos[i] < N && !seen_pos[pos[i]]);
        if (pos[i] < N) seen_pos[pos[i]] = 1;
        if (out[i] == gpudyn::experimental::kPageQueueEmpty) {
            ++empty;
            CHECK(pos[i] >= M);
        } else {
            CHECK(pos[i] < M && out[i] == ids[pos[i]]);
            got.push_back(out[i]);
        }
    }
    CHECK(empty == N - M);
    std::sort(got.begin(), got.end());
    CHECK(got.size() == M && std::adjacent_find(got.begin(), got.end()) == got.end());
    CHECK(got == ids); // ids are ascending: every id handed out exactly once
    printf("page_queue: %u requests on %u ids, %u empty: OK\n", N, M, empty);
    cudaFree(d_ids);
    cudaFree(d_out);
    cudaFree(d_head);
    cudaFree(d_pos);
}

// The stable calls (no seed, no per_thread, no statistics): every call walks
// from new random starts, so repeated calls and calls racing from host threads
// still get distinct pages; a call that cannot be served takes nothing.
static void test_stable_calls() {
    const uint64_t T = 1u << 14, n = 1000;
    gpudyn_rw_heap_t h = make_heap(T, 32, 0);
    uint32_t* d_pages = nullptr;
    CUDA_OK(cudaMalloc(&d_pages, T * sizeof(uint32_t)));
    std::vector<uint32_t> all;
    for (auto a : kAlgos)
        for (int r = 0; r < 3; ++r) { // 12 calls, 12000 of 16384 pages
            auto before = snapshot(h);
            CHECK_OK(gpudyn_rw_heap_get_pages(h, d_pages, n, a, nullptr));
            std::vector<uint32_t> pages(n);
            CUDA_OK(cudaMemcpy(pages.data(), d_pages, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
            gpudyn_test_failures += check_pages(pages, before, algo_name(a)) ? 1 : 0;
            all.insert(all.end(), pages.begin(), pages.end());
        }
    CHECK(free_count(h) == T - all.size());
    std::sort(all.begin(), all.end());
    CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());
    // 4384 pages left: asking for 4385 fails and leaves the heap as it was.
    const uint64_t left = T - all.size();
    CHECK_STATUS(gpudyn_rw_heap_get_pages(h, d_pages, left + 1, GPUDYN_RW_HEAP_RW_BM, nullptr),
                 GPUDYN_ERROR_OUT_OF_MEMORY);
    CHECK(free_count(h) == left);
    CHECK_OK(gpudyn_rw_heap_get_pages(h, d_pages, left, GPUDYN_RW_HEAP_RW_BM, nullptr));
    CHECK(free_count(h) == 0);
    CHECK_OK(gpudyn_rw_heap_reset(h, nullptr));

    // RW_malloc: runs 16-byte aligned, inside the pool, pairwise disjoint.
    const uint64_t m = 2048; // mean 350 B: about a third of the pool
    std::vector<uint64_t> sizes(m);
    for (uint64_t i = 0; i < m; ++i) sizes[i] = 1 + (i * 37) % 700;
    uint64_t *d_sizes = nullptr, *d_ptrs = nullptr;
    CUDA_OK(cudaMalloc(&d_sizes, m * 8));
    CUDA_OK(cudaMalloc(&d_ptrs, m * 8));
    CUDA_OK(cudaMemcpy(d_sizes, sizes.data(), m * 8, cudaMemcpyHostToDevice));
    CHECK_OK(gpudyn_rw_heap_malloc(h, d_sizes, d_ptrs, m, nullptr));
    std::vector<uint64_t> ptrs(m);
    CUDA_OK(cudaMemcpy(ptrs.data(), d_ptrs, m * 8, cudaMemcpyDeviceToHost));
    gpudyn_rw_heap_view_t v;
    CHECK_OK(gpudyn_rw_heap_get_view(h, &v));
    std::vector<std::pair<uint64_t, uint64_t>> runs;
    for (uint64_t i = 0; i < m; ++i) {
        CHECK(ptrs[i] % 16 == 0 && ptrs[i] >= v.pool && ptrs[i] + sizes[i] <= v.pool + T * 256);
        runs.push_back({ptrs[i], ptrs[i] + sizes[i]});
    }
    std::sort(runs.begin(), runs.end());
    for (size_t i = 1; i < runs.size(); ++i) CHECK(runs[i].first >= runs[i - 1].second);
    CHECK_OK(gpudyn_rw_heap_free(h, d_ptrs, m, nullptr));
    CHECK(free_count(h) == T && info_of(h).bad_frees == 0);
    printf("stable get_pages / malloc: %zu pages in 12 calls, %llu runs: OK\n", all.size(), (unsigned long long)m);
    cudaFree(d_sizes);
    cudaFree(d_ptrs);
    cudaFree(d_pages);
    gpudyn_rw_heap_destroy(h);
}

int main() {
    REQUIRE_DEVICE();
    STEP(test_page_queue());
    STEP(test_stable_calls());
    STEP(test_uniqueness());
    STEP(test_exhaustion_and_reuse());
    STEP(test_tas_theory());
    STEP(test_divergent_corw());
    STEP(test_malloc());
    STEP(test_bad_frees());
    STEP(test_malloc_fallback());
    return TEST_RESULT();
}
