// Reliability of the C ABI under bad sizes, streams and threads (issue 13):
//  - sizes that overflow or cannot be satisfied are INVALID_ARGUMENT or
//    OUT_OF_MEMORY naming the argument, never SUCCESS (ggarray reserve near
//    UINT64_MAX, pool_bytes, static capacity, rw_heap pool, VMM max_capacity
//    as a real limit);
//  - rw_heap get_pages work follows n, not per_thread;
//  - flatten of spans whose source sits at another offset than the target
//    (the reads initcheck watches) against a host reference;
//  - a page heap that backs a warp heap cannot be destroyed;
//  - destroy never synchronizes the device (a kernel on another stream is still
//    running after every destroy);
//  - calls on one structure from different streams run in call order;
//  - 8 threads, each with its own stream and warp heap / page heap, exhausting
//    them: every failure has a message; two threads sharing one structure.
#include "check.h"
#include "heap_test_util.h"

#include <gpudyn/experimental.h> // step statistics of get_pages

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#define CUDA_OK(call) CHECK((call) == cudaSuccess)

static gpudyn_stream_t gs(cudaStream_t s) { return reinterpret_cast<gpudyn_stream_t>(s); }

static bool message_names(const char* what) { return strstr(gpudyn_last_error_message(), what) != nullptr; }

// Busy for `ns` nanoseconds of the global timer: work on a stream the library must not wait for.
__global__ void spin_kernel(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

// A page heap of `page_count` pages (default page size), created on `stream`; nullptr after a failed CHECK.
static gpudyn_rw_heap_t make_rw_heap(uint64_t page_count, cudaStream_t stream = nullptr) {
    gpudyn_rw_heap_options_t o;
    gpudyn_rw_heap_options_init(&o);
    o.page_count = page_count;
    gpudyn_rw_heap_t h = nullptr;
    CHECK_OK(gpudyn_rw_heap_create(&h, &o, gs(stream)));
    return h;
}

// A heap that maps `bytes` and can grow no further; nullptr after a failed CHECK.
static gpudyn_heap_t make_heap(uint64_t bytes) {
    gpudyn_heap_options_t o;
    gpudyn_heap_options_init(&o);
    o.initial_bytes = o.max_bytes = bytes;
    gpudyn_heap_t h = nullptr;
    CHECK_OK(gpudyn_heap_create(&h, &o, nullptr));
    return h;
}

static bool vmm_supported() {
    int32_t dev = 0;
    gpudyn_get_device(&dev);
    gpudyn_device_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    return gpudyn_get_device_info(dev, &info) == GPUDYN_SUCCESS && info.vmm_supported;
}

// ---- item 5: sizes ---------------------------------------------------------
static void test_ggarray_reserve_overflow() {
    gpudyn_ggarray_options_t o;
    gpudyn_ggarray_options_init(&o);
    gpudyn_ggarray_t a = nullptr;
    CHECK_OK(gpudyn_ggarray_create(&a, &o, nullptr));
    if (!a) return;
    // capacity + num_lfvectors - 1 overflowed to a tiny request: SUCCESS with nothing reserved.
    CHECK_INVALID(gpudyn_ggarray_reserve(a, UINT64_MAX, nullptr), "capacity");
    CHECK_INVALID(gpudyn_ggarray_reserve(a, UINT64_MAX - 3, nullptr), "capacity");
    uint64_t cap = 1;
    CHECK_OK(gpudyn_ggarray_capacity(a, &cap, nullptr));
    CHECK(cap == 0);
    CHECK_OK(gpudyn_ggarray_destroy(a));

    // One LFVector with 2^30-element buckets: the bucket limit holds UINT64_MAX
    // elements, the device does not: OUT_OF_MEMORY naming the argument.
    o.num_lfvectors = 1;
    o.first_bucket_elements = 1ull << 30;
    o.element_size = 1;
    o.pool_bytes = UINT64_MAX; // no pool: the buckets come from the heap
    a = nullptr;
    CHECK_OK(gpudyn_ggarray_create(&a, &o, nullptr));
    if (!a) return;
    const gpudyn_status_t st = gpudyn_ggarray_reserve(a, UINT64_MAX - 3, nullptr);
    CHECK(st == GPUDYN_ERROR_OUT_OF_MEMORY || st == GPUDYN_ERROR_INVALID_ARGUMENT);
    CHECK(message_names("capacity"));
    CHECK_OK(gpudyn_ggarray_destroy(a));
}

static void test_pool_bytes_huge() {
    if (!vmm_supported()) return; // without VMM the pool option is ignored
    gpudyn_ggarray_options_t o;
    gpudyn_ggarray_options_init(&o);
    gpudyn_ggarray_t a = nullptr;
    // Rounded up to the granularity this wrapped to a 0-byte reservation.
    o.pool_bytes = UINT64_MAX - 1;
    CHECK_INVALID(gpudyn_ggarray_create(&a, &o, nullptr), "pool_bytes");
    CHECK(a == nullptr);
    // 4 EiB of virtual range: the driver refuses; the message names the option.
    o.pool_bytes = 1ull << 62;
    CHECK_STATUS(gpudyn_ggarray_create(&a, &o, nullptr), GPUDYN_ERROR_OUT_OF_MEMORY);
    CHECK(message_names("pool_bytes"));
    CHECK(a == nullptr);
}

static void test_static_capacity_huge() {
    gpudyn_static_array_options_t o;
    gpudyn_static_array_options_init(&o);
    o.element_size = 16;
    o.capacity = UINT64_MAX / 16;
    gpudyn_static_array_t a = nullptr;
    CHECK_STATUS(gpudyn_static_array_create(&a, &o, nullptr), GPUDYN_ERROR_OUT_OF_MEMORY);
    CHECK(message_names("options->capacity"));
    CHECK(a == nullptr);
}

static void test_rw_heap_pool_huge() {
    gpudyn_rw_heap_options_t o;
    gpudyn_rw_heap_options_init(&o);
    o.page_size = 1ull << 33;
    o.page_count = 1ull << 30; // 2^63 bytes
    gpudyn_rw_heap_t h = nullptr;
    CHECK_STATUS(gpudyn_rw_heap_create(&h, &o, nullptr), GPUDYN_ERROR_OUT_OF_MEMORY);
    CHECK(message_names("page_size"));
    CHECK(h == nullptr);
}

static void test_vmm_max_capacity_is_a_limit() {
    if (!vmm_supported()) return;
    gpudyn_vmm_array_options_t o;
    gpudyn_vmm_array_options_init(&o);
    o.element_size = 4;
    o.max_capacity = 7; // the range rounds up to the granularity (2 MiB): 7 must stay 7
    gpudyn_vmm_array_t a = nullptr;
    CHECK_OK(gpudyn_vmm_array_create(&a, &o, nullptr));
    if (!a) return;
    CHECK_OK(gpudyn_vmm_array_reserve(a, 7, nullptr));
    uint64_t cap = 0;
    CHECK_OK(gpudyn_vmm_array_capacity(a, &cap));
    CHECK(cap == 7);
    CHECK_STATUS(gpudyn_vmm_array_reserve(a, 8, nullptr), GPUDYN_ERROR_OUT_OF_MEMORY);
    CHECK(message_names("max_capacity"));
    uint32_t* values = nullptr;
    CUDA_OK(cudaMalloc(&values, 8 * sizeof(uint32_t)));
    std::vector<uint32_t> host = {10, 11, 12, 13, 14, 15, 16, 17};
    CUDA_OK(cudaMemcpy(values, host.data(), 8 * sizeof(uint32_t), cudaMemcpyHostToDevice));
    CHECK_STATUS(gpudyn_vmm_array_push_back(a, values, 8, nullptr, GPUDYN_INSERT_WARP_SCAN, nullptr),
                 GPUDYN_ERROR_OUT_OF_MEMORY);
    uint64_t size = 1;
    CHECK_OK(gpudyn_vmm_array_size(a, &size, nullptr));
    CHECK(size == 0);
    CHECK_OK(gpudyn_vmm_array_push_back(a, values, 7, nullptr, GPUDYN_INSERT_WARP_SCAN, nullptr));
    CHECK_STATUS(gpudyn_vmm_array_push_back(a, values + 7, 1, nullptr, GPUDYN_INSERT_ATOMIC, nullptr),
                 GPUDYN_ERROR_OUT_OF_MEMORY);
    CHECK_OK(gpudyn_vmm_array_size(a, &size, nullptr));
    CHECK(size == 7);
    std::vector<uint32_t> out(7, 0);
    CHECK_OK(gpudyn_vmm_array_copy_to_host(a, out.data(), out.size() * 4, nullptr));
    std::sort(out.begin(), out.end());
    CHECK(std::equal(out.begin(), out.end(), host.begin()));
    CUDA_OK(cudaFree(values));
    CHECK_OK(gpudyn_vmm_array_destroy(a));

    // initial_capacity above max_capacity stays refused; a huge max_capacity fails naming it or works.
    o.max_capacity = 1ull << 50;
    o.element_size = 16;
    a = nullptr;
    const gpudyn_status_t st = gpudyn_vmm_array_create(&a, &o, nullptr);
    CHECK(st == GPUDYN_SUCCESS || st == GPUDYN_ERROR_OUT_OF_MEMORY || st == GPUDYN_ERROR_INVALID_ARGUMENT);
    if (st != GPUDYN_SUCCESS) CHECK(message_names("max_capacity"));
    CHECK_OK(gpudyn_vmm_array_destroy(a));
}

// ---- item 7: get_pages bounded by n ------------------------------------------
static void test_get_pages_follows_n() {
    const uint64_t page_count = 1 << 16;
    gpudyn_rw_heap_t h = make_rw_heap(page_count);
    if (!h) return;
    uint32_t* pages = nullptr;
    CUDA_OK(cudaMalloc(&pages, sizeof(uint32_t)));
    const gpudyn_rw_heap_algorithm_t algos[] = {GPUDYN_RW_HEAP_RW, GPUDYN_RW_HEAP_CORW};
    for (gpudyn_rw_heap_algorithm_t algo : algos) {
        gpudyn_exp_rw_heap_stats_t stats;
        memset(&stats, 0, sizeof stats);
        stats.struct_size = sizeof stats;
        const auto t0 = std::chrono::steady_clock::now();
        // One request, 2^28 per thread: one round of work (before: 2^28 rounds, ~35 s).
        CHECK_OK(gpudyn_exp_rw_heap_get_pages(h, pages, 1, algo, 1u << 28, 7, &stats, nullptr));
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s > 5.0) {
            fprintf(stderr, "get_pages(n = 1, per_thread = 2^28) took %.1f s\n", s);
            ++gpudyn_test_failures;
        }
        CHECK(stats.warps == 1); // one warp round counted
        uint32_t page = 0xFFFFFFFFu;
        CUDA_OK(cudaMemcpy(&page, pages, sizeof page, cudaMemcpyDeviceToHost));
        CHECK(page < page_count);
        CHECK_OK(gpudyn_rw_heap_free_pages(h, pages, 1, nullptr));
    }
    uint64_t free_pages = 0;
    CHECK_OK(gpudyn_rw_heap_free_page_count(h, &free_pages, nullptr));
    CHECK(free_pages == page_count);
    CUDA_OK(cudaFree(pages));
    CHECK_OK(gpudyn_rw_heap_destroy(h));
}

// ---- item 8: flatten at every source/target offset ------------------------------
template <class T>
static void flatten_offsets(uint32_t lfvectors, uint64_t n) {
    gpudyn_ggarray_options_t o;
    gpudyn_ggarray_options_init(&o);
    o.element_size = sizeof(T);
    o.num_lfvectors = lfvectors;
    o.first_bucket_elements = 32;
    gpudyn_ggarray_t a = nullptr;
    CHECK_OK(gpudyn_ggarray_create(&a, &o, nullptr));
    if (!a) return;
    std::vector<T> host(n);
    for (uint64_t i = 0; i < n; ++i) host[i] = T(i * 2654435761u + 17);
    T* values = nullptr;
    CUDA_OK(cudaMalloc(&values, n * sizeof(T)));
    CUDA_OK(cudaMemcpy(values, host.data(), n * sizeof(T), cudaMemcpyHostToDevice));
    // Two pushes: the second starts mid-bucket, so spans start at odd offsets.
    CHECK_OK(gpudyn_ggarray_push_back(a, values, n / 3, nullptr, GPUDYN_INSERT_WARP_SCAN, nullptr));
    CHECK_OK(gpudyn_ggarray_push_back(a, values + n / 3, n - n / 3, nullptr, GPUDYN_INSERT_WARP_SCAN, nullptr));
    std::vector<T> want = host;
    std::sort(want.begin(), want.end());
    const size_t slack = 16 / sizeof(T);
    T* dst = nullptr;
    CUDA_OK(cudaMalloc(&dst, (n + slack) * sizeof(T)));
    std::vector<T> got(n);
    for (size_t off = 0; off < slack; ++off) {
        CHECK_OK(gpudyn_ggarray_flatten(a, dst + off, n * sizeof(T), nullptr));
        CUDA_OK(cudaMemcpy(got.data(), dst + off, n * sizeof(T), cudaMemcpyDeviceToHost));
        std::sort(got.begin(), got.end());
        if (got != want) {
            fprintf(stderr, "flatten of %zu-byte elements at offset %zu lost or changed elements\n", sizeof(T), off);
            ++gpudyn_test_failures;
        }
    }
    CUDA_OK(cudaFree(dst));
    CUDA_OK(cudaFree(values));
    CHECK_OK(gpudyn_ggarray_destroy(a));
}

// ---- item 9: a backing page heap cannot be destroyed -----------------------------
static void test_backing_heap_not_destroyable() {
    gpudyn_rw_heap_options_t ro;
    gpudyn_rw_heap_options_init(&ro);
    ro.page_size = 36 << 10;
    ro.page_count = 1024;
    gpudyn_rw_heap_t pages = nullptr;
    CHECK_OK(gpudyn_rw_heap_create(&pages, &ro, nullptr));
    if (!pages) return;
    gpudyn_warp_heap_options_t wo;
    gpudyn_warp_heap_options_init(&wo);
    wo.backing = GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP;
    wo.page_heap = pages;
    gpudyn_warp_heap_t w = nullptr, w2 = nullptr;
    CHECK_OK(gpudyn_warp_heap_create(&w, &wo, nullptr));
    CHECK_OK(gpudyn_warp_heap_create(&w2, &wo, nullptr));
    CHECK_INVALID(gpudyn_rw_heap_destroy(pages), "backing of 2 warp heap");
    CHECK(message_names("destroy them first"));
    // Intact: both heaps still work.
    std::vector<uint64_t> sizes(256, 48);
    uint64_t* dsizes = nullptr;
    void** ptrs = nullptr;
    CUDA_OK(cudaMalloc(&dsizes, sizes.size() * 8));
    CUDA_OK(cudaMalloc(&ptrs, sizes.size() * 8));
    CUDA_OK(cudaMemcpy(dsizes, sizes.data(), sizes.size() * 8, cudaMemcpyHostToDevice));
    CHECK_OK(gpudyn_warp_heap_alloc_batch(w, dsizes, sizes.size(), ptrs, nullptr));
    // A reset or occupy would hand the warp heap's pages out again: refused, nothing changes.
    uint64_t in_use = 0, after = 0;
    CHECK_OK(gpudyn_rw_heap_free_page_count(pages, &in_use, nullptr));
    CHECK(in_use < ro.page_count);
    CHECK_INVALID(gpudyn_rw_heap_reset(pages, nullptr), "backing of 2 warp heap");
    CHECK_INVALID(gpudyn_exp_rw_heap_occupy(pages, 0.5, 1, nullptr), "backing of 2 warp heap");
    CHECK_OK(gpudyn_rw_heap_free_page_count(pages, &after, nullptr));
    CHECK(after == in_use);
    CHECK_OK(gpudyn_warp_heap_release(w, nullptr));
    uint64_t free_pages = 0;
    CHECK_OK(gpudyn_rw_heap_free_page_count(pages, &free_pages, nullptr));
    CHECK(free_pages == ro.page_count);
    CHECK_OK(gpudyn_warp_heap_destroy(w));
    CHECK_INVALID(gpudyn_rw_heap_destroy(pages), "backing of 1 warp heap");
    CHECK_OK(gpudyn_warp_heap_destroy(w2));
    CHECK_OK(gpudyn_rw_heap_destroy(pages));
    CUDA_OK(cudaFree(dsizes));
    CUDA_OK(cudaFree(ptrs));
}

// A heap's reset is refused while GGArrays take their buckets from it (it
// would hand their memory out again); once they are gone it works.
static void test_heap_reset_refused_with_ggarrays() {
    gpudyn_heap_t h = make_heap(uint64_t(64) << 20);
    if (!h) return;
    gpudyn_ggarray_options_t go;
    gpudyn_ggarray_options_init(&go);
    go.heap = h;
    gpudyn_ggarray_t a = nullptr;
    CHECK_OK(gpudyn_ggarray_create(&a, &go, nullptr));
    gpudyn_ggarray_view_t v;
    memset(&v, 0, sizeof v);
    CHECK_OK(gpudyn_ggarray_get_view(a, &v, nullptr)); // the array takes its run of the heap
    CHECK_INVALID(gpudyn_heap_reset(h, nullptr), "GGArray");
    CHECK_OK(gpudyn_ggarray_destroy(a));
    CHECK_OK(gpudyn_heap_reset(h, nullptr));
    CHECK_OK(gpudyn_heap_destroy(h));
}

// ---- item 11: destroy does not synchronize the device ----------------------------
static void expect_still_running(cudaStream_t busy, const char* what) {
    const cudaError_t q = cudaStreamQuery(busy);
    if (q != cudaErrorNotReady) {
        fprintf(stderr, "%s waited for a kernel on another stream (cudaStreamQuery: %s)\n", what, cudaGetErrorName(q));
        ++gpudyn_test_failures;
    }
    cudaGetLastError();
    CUDA_OK(cudaStreamSynchronize(busy));
}

static void test_destroy_does_not_synchronize() {
    cudaStream_t busy = nullptr, s = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&busy, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const unsigned long long kSpinNs = 1500ull * 1000 * 1000;
    uint32_t* values = nullptr;
    CUDA_OK(cudaMalloc(&values, 4096 * sizeof(uint32_t)));
    CUDA_OK(cudaMemset(values, 1, 4096 * sizeof(uint32_t)));

    for (int pooled = 0; pooled < 2; ++pooled) {
        if (pooled && !vmm_supported()) continue;
        gpudyn_ggarray_options_t o;
        gpudyn_ggarray_options_init(&o);
        if (!pooled) o.pool_bytes = UINT64_MAX;
        else o.pool_bytes = 64ull << 20;
        gpudyn_ggarray_t a = nullptr;
        CHECK_OK(gpudyn_ggarray_create(&a, &o, gs(s)));
        CHECK_OK(gpudyn_ggarray_push_back(a, values, 4096, nullptr, GPUDYN_INSERT_WARP_SCAN, gs(s)));
        spin_kernel<<<1, 1, 0, busy>>>(kSpinNs);
        CHECK_OK(gpudyn_ggarray_destroy(a));
        expect_still_running(busy, pooled ? "gpudyn_ggarray_destroy (pool)" : "gpudyn_ggarray_destroy");
    }
    {
        gpudyn_static_array_options_t o;
        gpudyn_static_array_options_init(&o);
        o.capacity = 4096;
        gpudyn_static_array_t a = nullptr;
        CHECK_OK(gpudyn_static_array_create(&a, &o, gs(s)));
        CHECK_OK(gpudyn_static_array_push_back(a, values, 4096, nullptr, GPUDYN_INSERT_WARP_SCAN, gs(s)));
        spin_kernel<<<1, 1, 0, busy>>>(kSpinNs);
        CHECK_OK(gpudyn_static_array_destroy(a));
        expect_still_running(busy, "gpudyn_static_array_destroy");
    }
    if (vmm_supported()) {
        gpudyn_vmm_array_options_t o;
        gpudyn_vmm_array_options_init(&o);
        o.initial_capacity = 4096;
        o.max_capacity = 1 << 20;
        gpudyn_vmm_array_t a = nullptr;
        CHECK_OK(gpudyn_vmm_array_create(&a, &o, gs(s)));
        CHECK_OK(gpudyn_vmm_array_push_back(a, values, 4096, nullptr, GPUDYN_INSERT_WARP_SCAN, gs(s)));
        spin_kernel<<<1, 1, 0, busy>>>(kSpinNs);
        CHECK_OK(gpudyn_vmm_array_destroy(a));
        expect_still_running(busy, "gpudyn_vmm_array_destroy");
    }
    {
        gpudyn_rw_heap_t h = make_rw_heap(4096, s);
        gpudyn_warp_heap_options_t wo;
        gpudyn_warp_heap_options_init(&wo);
        wo.arena_bytes = 8 << 20;
        gpudyn_warp_heap_t w = nullptr;
        CHECK_OK(gpudyn_warp_heap_create(&w, &wo, gs(s)));
        uint64_t* sizes = nullptr;
        void** ptrs = nullptr;
        CUDA_OK(cudaMalloc(&sizes, 64 * 8));
        CUDA_OK(cudaMalloc(&ptrs, 64 * 8));
        const std::vector<uint64_t> host_sizes(64, 64);
        CUDA_OK(cudaMemcpy(sizes, host_sizes.data(), 64 * 8, cudaMemcpyHostToDevice));
        CHECK_OK(gpudyn_warp_heap_alloc_batch(w, sizes, 64, ptrs, gs(s))); // kept headers: destroy runs a kernel
        spin_kernel<<<1, 1, 0, busy>>>(kSpinNs);
        CHECK_OK(gpudyn_warp_heap_destroy(w));
        expect_still_running(busy, "gpudyn_warp_heap_destroy");
        spin_kernel<<<1, 1, 0, busy>>>(kSpinNs);
        CHECK_OK(gpudyn_rw_heap_destroy(h));
        expect_still_running(busy, "gpudyn_rw_heap_destroy");
        CUDA_OK(cudaFree(sizes));
        CUDA_OK(cudaFree(ptrs));
    }
    CUDA_OK(cudaFree(values));
    CUDA_OK(cudaStreamDestroy(busy));
    CUDA_OK(cudaStreamDestroy(s));
}

// ---- item 11: calls on one structure are ordered across streams -------------------
static void test_calls_ordered_across_streams() {
    cudaStream_t a = nullptr, b = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CUDA_OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    const uint64_t page_count = 1 << 14;
    gpudyn_rw_heap_t h = make_rw_heap(page_count, a);
    const uint64_t n = 1000;
    uint32_t* pages = nullptr;
    CUDA_OK(cudaMalloc(&pages, n * sizeof(uint32_t)));
    CHECK_OK(gpudyn_rw_heap_get_pages(h, pages, n, GPUDYN_RW_HEAP_RW_BM, gs(a)));
    // The free is queued behind 300 ms of other work on stream a; the count on
    // stream b must still see it (before: it ran at once and saw n pages taken).
    spin_kernel<<<1, 1, 0, a>>>(300ull * 1000 * 1000);
    CHECK_OK(gpudyn_rw_heap_free_pages(h, pages, n, gs(a)));
    uint64_t free_pages = 0;
    CHECK_OK(gpudyn_rw_heap_free_page_count(h, &free_pages, gs(b)));
    CHECK(free_pages == page_count);
    CHECK_OK(gpudyn_rw_heap_destroy(h));
    CUDA_OK(cudaFree(pages));
    CUDA_OK(cudaStreamSynchronize(a));
    CUDA_OK(cudaStreamDestroy(a));
    CUDA_OK(cudaStreamDestroy(b));
}

// ---- item 4: threads ---------------------------------------------------------------
struct thread_result {
    int calls = 0;
    int failures = 0;
    int empty_messages = 0;
    int unnamed = 0;      // messages that do not name the function
    int wrong_status = 0; // failures other than OUT_OF_MEMORY
    bool exhausted = false;
    std::string first_problem;
};

static void note(thread_result& r, gpudyn_status_t st, const char* fn) {
    ++r.calls;
    if (st == GPUDYN_SUCCESS) return;
    ++r.failures;
    const std::string m = gpudyn_last_error_message();
    if (st == GPUDYN_ERROR_OUT_OF_MEMORY) r.exhausted = true;
    else ++r.wrong_status;
    if (m.empty()) ++r.empty_messages;
    else if (m.find(fn) == std::string::npos) ++r.unnamed;
    if ((m.empty() || st != GPUDYN_ERROR_OUT_OF_MEMORY) && r.first_problem.empty())
        r.first_problem = std::string(fn) + " -> " + gpudyn_status_string(st) + ": '" + m + "'";
}

static void exhaust_heaps(thread_result* r, int index) {
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        r->first_problem = "stream";
        return;
    }
    gpudyn_warp_heap_options_t wo;
    gpudyn_warp_heap_options_init(&wo);
    wo.arena_bytes = 4 << 20;
    gpudyn_warp_heap_t w = nullptr;
    note(*r, gpudyn_warp_heap_create(&w, &wo, gs(s)), "gpudyn_warp_heap_create");
    gpudyn_rw_heap_options_t ro;
    gpudyn_rw_heap_options_init(&ro);
    ro.page_count = 2048;
    gpudyn_rw_heap_t h = nullptr;
    note(*r, gpudyn_rw_heap_create(&h, &ro, gs(s)), "gpudyn_rw_heap_create");
    const uint64_t n = 1024;
    uint64_t* sizes = nullptr;
    void** ptrs = nullptr;
    uint32_t* pages = nullptr;
    cudaMalloc(&sizes, n * 8);
    cudaMalloc(&ptrs, n * 8);
    cudaMalloc(&pages, n * 4);
    std::vector<uint64_t> host(n, 1024 + 16 * uint64_t(index));
    cudaMemcpy(sizes, host.data(), n * 8, cudaMemcpyHostToDevice);
    if (w && h) {
        for (int round = 0; round < 16; ++round) { // 1 MiB a batch into a 4 MiB arena: fails by round 4
            note(*r, gpudyn_warp_heap_alloc_batch(w, sizes, n, ptrs, gs(s)), "gpudyn_warp_heap_alloc_batch");
            note(*r, gpudyn_rw_heap_get_pages(h, pages, n, GPUDYN_RW_HEAP_RW_BM, gs(s)),
                 "gpudyn_rw_heap_get_pages"); // 2048 pages: the third round fails
        }
    }
    note(*r, gpudyn_warp_heap_destroy(w), "gpudyn_warp_heap_destroy");
    note(*r, gpudyn_rw_heap_destroy(h), "gpudyn_rw_heap_destroy");
    cudaFree(sizes);
    cudaFree(ptrs);
    cudaFree(pages);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
}

static void test_threads_every_failure_has_a_message() {
    const int kThreads = 8;
    std::vector<thread_result> results(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) threads.emplace_back(exhaust_heaps, &results[t], t);
    for (auto& t : threads) t.join();
    for (int t = 0; t < kThreads; ++t) {
        const thread_result& r = results[t];
        CHECK(r.calls > 0);
        CHECK(r.exhausted); // each thread reached OUT_OF_MEMORY
        CHECK(r.empty_messages == 0);
        CHECK(r.unnamed == 0);
        CHECK(r.wrong_status == 0);
        if (!r.first_problem.empty()) fprintf(stderr, "thread %d: %s\n", t, r.first_problem.c_str());
    }
}

// Two threads push into one GGArray on their own streams at once; then two threads
// take pages from one heap at once: nothing lost, nothing handed out twice.
static void test_threads_share_one_structure() {
    gpudyn_ggarray_options_t o;
    gpudyn_ggarray_options_init(&o);
    o.num_lfvectors = 32;
    gpudyn_ggarray_t a = nullptr;
    CHECK_OK(gpudyn_ggarray_create(&a, &o, nullptr));
    const uint64_t page_count = 1 << 16;
    gpudyn_rw_heap_t h = make_rw_heap(page_count);
    if (!a || !h) return;
    const int kThreads = 4, kRounds = 20;
    const uint64_t per = 5000, pages_per = 400;
    std::vector<uint32_t> host(uint64_t(kThreads) * kRounds * per);
    for (size_t i = 0; i < host.size(); ++i) host[i] = uint32_t(i);
    uint32_t* values = nullptr;
    CUDA_OK(cudaMalloc(&values, host.size() * 4));
    CUDA_OK(cudaMemcpy(values, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
    uint32_t* pages = nullptr;
    CUDA_OK(cudaMalloc(&pages, uint64_t(kThreads) * kRounds * pages_per * 4));
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            cudaStream_t s = nullptr;
            cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
            for (int r = 0; r < kRounds; ++r) {
                const uint64_t k = uint64_t(t) * kRounds + r;
                if (gpudyn_ggarray_push_back(a, values + k * per, per, nullptr, GPUDYN_INSERT_WARP_SCAN, gs(s)) !=
                    GPUDYN_SUCCESS)
                    ++failures;
                if (gpudyn_rw_heap_get_pages(h, pages + k * pages_per, pages_per, GPUDYN_RW_HEAP_CRW, gs(s)) !=
                    GPUDYN_SUCCESS)
                    ++failures;
            }
            cudaStreamSynchronize(s);
            cudaStreamDestroy(s);
        });
    for (auto& t : threads) t.join();
    CHECK(failures.load() == 0);
    uint64_t size = 0;
    CHECK_OK(gpudyn_ggarray_size(a, &size, nullptr));
    CHECK(size == host.size());
    std::vector<uint32_t> got(size);
    CHECK_OK(gpudyn_ggarray_copy_to_host(a, got.data(), got.size() * 4, nullptr));
    std::sort(got.begin(), got.end());
    CHECK(got == host); // host is 0..N-1, sorted
    std::vector<uint32_t> taken(uint64_t(kThreads) * kRounds * pages_per);
    CUDA_OK(cudaMemcpy(taken.data(), pages, taken.size() * 4, cudaMemcpyDeviceToHost));
    std::set<uint32_t> distinct(taken.begin(), taken.end());
    CHECK(distinct.size() == taken.size());
    CHECK(*distinct.rbegin() < page_count);
    uint64_t free_pages = 0;
    CHECK_OK(gpudyn_rw_heap_free_page_count(h, &free_pages, nullptr));
    CHECK(free_pages == page_count - taken.size());
    CUDA_OK(cudaFree(values));
    CUDA_OK(cudaFree(pages));
    CHECK_OK(gpudyn_ggarray_destroy(a));
    CHECK_OK(gpudyn_rw_heap_destroy(h));
}

// A default initial size never exceeds a max the caller gave: the heap maps at
// most max_bytes, a GGArray's budget stays within max_budget_bytes (the default
// used to be 1 GiB whatever the max: the heap's create failed, the array's
// arena took more than allowed).
static void test_default_sizes_within_max() {
    const uint64_t max = uint64_t(64) << 20;
    gpudyn_heap_options_t o;
    gpudyn_heap_options_init(&o);
    o.max_bytes = max; // initial_bytes 0: the default
    gpudyn_heap_t h = nullptr;
    CHECK_OK(gpudyn_heap_create(&h, &o, nullptr));
    if (h) {
        const gpudyn_heap_stats_t st = heap_stats(h);
        CHECK(st.bytes_mapped > 0 && st.bytes_mapped <= max);
        CHECK(st.bytes_max <= max);
        CHECK_OK(gpudyn_heap_destroy(h));
    }
    o.max_bytes = 4096; // below the page size
    CHECK_INVALID(gpudyn_heap_create(&h, &o, nullptr), "max_bytes");
    CHECK(h == nullptr);

    gpudyn_ggarray_options_t g;
    gpudyn_ggarray_options_init(&g);
    g.max_budget_bytes = uint64_t(4) << 20; // budget_bytes 0: the default
    gpudyn_ggarray_t a = nullptr;
    CHECK_OK(gpudyn_ggarray_create(&a, &g, nullptr));
    if (a) {
        uint64_t budget = 0, max_budget = 0;
        CHECK_OK(gpudyn_ggarray_get_budget(a, &budget, &max_budget));
        CHECK(budget > 0 && budget <= max_budget && max_budget <= g.max_budget_bytes);
        CHECK_OK(gpudyn_ggarray_destroy(a));
    }
}

// A request count the launch cannot cover is refused, not truncated to the
// requests one grid reaches (2^40 + 256 used to serve 256 and succeed).
static void test_rw_malloc_count_limit() {
    gpudyn_rw_heap_t h = make_rw_heap(1 << 16);
    if (!h) return;
    uint64_t *sizes = nullptr, *ptrs = nullptr;
    CUDA_OK(cudaMalloc(&sizes, 256 * sizeof(uint64_t)));
    CUDA_OK(cudaMalloc(&ptrs, 256 * sizeof(uint64_t)));
    CUDA_OK(cudaMemset(ptrs, 0, 256 * sizeof(uint64_t)));
    CHECK_INVALID(gpudyn_rw_heap_malloc(h, sizes, ptrs, (uint64_t(1) << 40) + 256, nullptr), "'n'");
    std::vector<uint64_t> back(256, 1);
    CUDA_OK(cudaMemcpy(back.data(), ptrs, 256 * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    CHECK(std::count(back.begin(), back.end(), uint64_t(0)) == 256); // nothing served
    cudaFree(sizes);
    cudaFree(ptrs);
    CHECK_OK(gpudyn_rw_heap_destroy(h));
}

// A failed call leaves no CUDA error pending behind it: the next call that
// launches a kernel reports its own launch, not the old error (a heap_malloc
// after a failed stream_synchronize used to return ERROR_CUDA with its blocks
// allocated).  Unsatisfiable device_alloc sizes are OUT_OF_MEMORY.
static void test_no_error_left_pending() {
    const uint64_t huge[] = {uint64_t(1) << 62, ~uint64_t(0), (uint64_t(1) << 63) + 1};
    for (uint64_t b : huge) {
        void* p = reinterpret_cast<void*>(0x10);
        CHECK_STATUS(gpudyn_device_alloc(&p, b, nullptr), GPUDYN_ERROR_OUT_OF_MEMORY);
        CHECK(p == nullptr);
    }
    gpudyn_heap_t h = make_heap(uint64_t(64) << 20);
    if (!h) return;
    const unsigned n = 8;
    uint64_t *sizes = nullptr, *ptrs = nullptr;
    CUDA_OK(cudaMalloc(&sizes, n * sizeof(uint64_t)));
    CUDA_OK(cudaMalloc(&ptrs, n * sizeof(uint64_t)));
    const std::vector<uint64_t> want(n, 64);
    CUDA_OK(cudaMemcpy(sizes, want.data(), n * sizeof(uint64_t), cudaMemcpyHostToDevice));
    for (int round = 0; round < 2; ++round) {
        // Synchronizing a capturing stream is refused: a non-sticky CUDA error.
        cudaStream_t cs;
        CUDA_OK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
        CUDA_OK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeRelaxed));
        if (round == 0) {
            CHECK(gpudyn_stream_synchronize(gs(cs)) != GPUDYN_SUCCESS);
        } else {
            void* p = nullptr; // an allocation that cannot be satisfied, then a refused one
            CHECK(gpudyn_device_alloc(&p, ~uint64_t(0), nullptr) != GPUDYN_SUCCESS);
            CHECK(gpudyn_stream_synchronize(gs(cs)) != GPUDYN_SUCCESS);
        }
        cudaGraph_t graph = nullptr;
        cudaStreamEndCapture(cs, &graph); // invalidated by the refused call
        if (graph) cudaGraphDestroy(graph);
        cudaStreamDestroy(cs);
        cudaGetLastError(); // this program's own runtime state (the library has its own)
        CHECK_OK(gpudyn_heap_malloc(h, sizes, ptrs, n, nullptr));
        CHECK(heap_stats(h).allocations == n);
        CHECK_OK(gpudyn_heap_free(h, ptrs, n, nullptr));
    }
    cudaFree(sizes);
    cudaFree(ptrs);
    CHECK_OK(gpudyn_heap_destroy(h));
}

int main() {
    REQUIRE_DEVICE();
    STEP(test_ggarray_reserve_overflow());
    STEP(test_pool_bytes_huge());
    STEP(test_static_capacity_huge());
    STEP(test_rw_heap_pool_huge());
    STEP(test_vmm_max_capacity_is_a_limit());
    STEP(test_get_pages_follows_n());
    STEP(flatten_offsets<uint8_t>(3, 5000));
    STEP(flatten_offsets<uint16_t>(5, 3000));
    STEP(flatten_offsets<uint32_t>(7, 3000));
    STEP(flatten_offsets<uint64_t>(2, 1000));
    STEP(test_backing_heap_not_destroyable());
    STEP(test_heap_reset_refused_with_ggarrays());
    STEP(test_destroy_does_not_synchronize());
    STEP(test_calls_ordered_across_streams());
    STEP(test_threads_every_failure_has_a_message());
    STEP(test_threads_share_one_structure());
    STEP(test_default_sizes_within_max());
    STEP(test_rw_malloc_count_limit());
    STEP(test_no_error_left_pending());
    return TEST_RESULT();
}
