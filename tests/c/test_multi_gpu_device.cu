// Structures belong to their device (issue 13, item 3): every structure is
// created on GPU 1 (through a stream of GPU 1) while GPU 0 is current, then
// used with GPU 0 current and with GPU 1 current, on a GPU-1 stream and on the
// default stream (0: the structure's device's), and from two threads whose
// current devices differ; results are checked against a host reference, the
// caller's current device is unchanged after every call, and a stream of GPU 0
// handed to a GPU-1 structure is INVALID_ARGUMENT naming the stream.  The
// device heap (issue 11) likewise, with a user's kernels on GPU 1 and a GGArray
// taking its buckets from it.
// Needs two GPUs (device kind nvidia-h200-x2); exits 77 with fewer.
#include "check.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include <gpudyn/heap.cuh>

#define CUDA_OK(call) CHECK((call) == cudaSuccess)

// A user's kernels on the heap's device: thread i mallocs 16 + (i % 5) * 200
// bytes and fills them; a later kernel checks the contents and frees.
__device__ __forceinline__ unsigned heap_words_of(unsigned i) { return (16 + (i % 5) * 200) / 4; }
__global__ void heap_fill(gpudyn_heap_view_t view, unsigned n, unsigned long long* out) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const gpudyn::heap_ref heap(view);
    const unsigned words = heap_words_of(i);
    unsigned* p = static_cast<unsigned*>(heap.malloc(words * 4ull));
    if (p)
        for (unsigned k = 0; k < words; ++k) p[k] = i ^ (k << 20);
    out[i] = reinterpret_cast<unsigned long long>(p);
}
__global__ void heap_check_and_free(gpudyn_heap_view_t view, unsigned n, const unsigned long long* in, unsigned* bad) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned* p = reinterpret_cast<unsigned*>(in[i]);
    bool ok = p != nullptr;
    const unsigned words = heap_words_of(i);
    for (unsigned k = 0; ok && k < words; ++k) ok = p[k] == (i ^ (k << 20));
    if (!gpudyn::heap_ref(view).free(p)) ok = false;
    if (!ok) atomicAdd(bad, 1u);
}

static gpudyn_stream_t gs(cudaStream_t s) { return reinterpret_cast<gpudyn_stream_t>(s); }

static int current_device() {
    int d = -1;
    cudaGetDevice(&d);
    return d;
}

// The call must succeed and leave `expect` current.
#define CHECK_ON(call, expect)                                                                            \
    do {                                                                                                  \
        CHECK_OK(call);                                                                                   \
        if (current_device() != (expect)) {                                                               \
            fprintf(stderr, "%s:%d: %s left device %d current, expected %d\n", __FILE__, __LINE__, #call, \
                    current_device(), (expect));                                                          \
            ++gpudyn_test_failures;                                                                       \
        }                                                                                                 \
    } while (0)

template <class T>
static T* alloc_on(int device, size_t count) {
    const int before = current_device();
    cudaSetDevice(device);
    T* p = nullptr;
    CUDA_OK(cudaMalloc(&p, count * sizeof(T)));
    cudaSetDevice(before);
    return p;
}

static cudaStream_t stream_on(int device) {
    const int before = current_device();
    cudaSetDevice(device);
    cudaStream_t s = nullptr;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaSetDevice(before);
    return s;
}

int main() {
    REQUIRE_DEVICE();
    int32_t count = 0;
    gpudyn_get_device_count(&count);
    if (count < 2) {
        printf("SKIP: needs 2 CUDA devices, found %d\n", int(count));
        return GPUDYN_TEST_SKIP;
    }
    CUDA_OK(cudaSetDevice(0));
    cudaStream_t s0 = stream_on(0), s1 = stream_on(1);

    // ---- create everything on GPU 1 with GPU 0 current ----------------------
    gpudyn_ggarray_options_t go;
    gpudyn_ggarray_options_init(&go);
    go.num_lfvectors = 16;
    gpudyn_ggarray_t g = nullptr;
    CHECK_ON(gpudyn_ggarray_create(&g, &go, gs(s1)), 0);
    gpudyn_static_array_options_t so;
    gpudyn_static_array_options_init(&so);
    so.capacity = 1 << 20;
    gpudyn_static_array_t st = nullptr;
    CHECK_ON(gpudyn_static_array_create(&st, &so, gs(s1)), 0);
    gpudyn_vmm_array_options_t vo;
    gpudyn_vmm_array_options_init(&vo);
    vo.max_capacity = 1 << 22;
    gpudyn_vmm_array_t v = nullptr;
    const gpudyn_status_t vst = gpudyn_vmm_array_create(&v, &vo, gs(s1));
    CHECK(vst == GPUDYN_SUCCESS || vst == GPUDYN_ERROR_NOT_SUPPORTED);
    CHECK(current_device() == 0);
    gpudyn_rw_heap_options_t ro;
    gpudyn_rw_heap_options_init(&ro);
    ro.page_size = 36 << 10;
    ro.page_count = 8192;
    gpudyn_rw_heap_t h = nullptr;
    CHECK_ON(gpudyn_rw_heap_create(&h, &ro, gs(s1)), 0);
    gpudyn_warp_heap_options_t wo;
    gpudyn_warp_heap_options_init(&wo);
    wo.arena_bytes = 64 << 20;
    gpudyn_warp_heap_t w = nullptr;
    CHECK_ON(gpudyn_warp_heap_create(&w, &wo, gs(s1)), 0);
    wo.backing = GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP;
    wo.page_heap = h;
    gpudyn_warp_heap_t wp = nullptr;
    CHECK_ON(gpudyn_warp_heap_create(&wp, &wo, gs(s1)), 0);
    if (!g || !st || !h || !w || !wp) return TEST_RESULT();

    // Their memory is on GPU 1.
    gpudyn_static_array_view_t sv;
    CHECK_OK(gpudyn_static_array_get_view(st, &sv));
    cudaPointerAttributes attr;
    CUDA_OK(cudaPointerGetAttributes(&attr, reinterpret_cast<void*>(sv.data)));
    CHECK(attr.device == 1);

    // ---- a stream of GPU 0 is refused, naming it ----------------------------
    uint64_t u = 0;
    CHECK_INVALID(gpudyn_ggarray_size(g, &u, gs(s0)), "stream");
    CHECK_INVALID(gpudyn_static_array_size(st, &u, gs(s0)), "stream");
    if (v) CHECK_INVALID(gpudyn_vmm_array_size(v, &u, gs(s0)), "stream");
    CHECK_INVALID(gpudyn_rw_heap_free_page_count(h, &u, gs(s0)), "stream");
    gpudyn_warp_heap_stats_t ws;
    CHECK_INVALID(gpudyn_warp_heap_get_stats(w, &ws, gs(s0)), "stream");
    CHECK(current_device() == 0);

    // ---- arrays: push/extend/reserve/flatten from either current device -----
    const uint64_t n = 100000;
    std::vector<uint32_t> host(4 * n);
    for (size_t i = 0; i < host.size(); ++i) host[i] = uint32_t(i * 7 + 1);
    uint32_t* values = alloc_on<uint32_t>(1, host.size());
    CUDA_OK(cudaMemcpy(values, host.data(), host.size() * 4, cudaMemcpyHostToDevice));
    // GPU 0 current: GPU-1 stream, then the default stream (GPU 1's).
    CHECK_ON(gpudyn_ggarray_reserve(g, 2 * n, gs(s1)), 0);
    CHECK_ON(gpudyn_ggarray_push_back(g, values, n, nullptr, GPUDYN_INSERT_WARP_SCAN, gs(s1)), 0);
    CHECK_ON(gpudyn_static_array_push_back(st, values, n, nullptr, GPUDYN_INSERT_ATOMIC, gs(s1)), 0);
    if (v) CHECK_ON(gpudyn_vmm_array_reserve(v, 2 * n, nullptr), 0);
    if (v) CHECK_ON(gpudyn_vmm_array_push_back(v, values, n, nullptr, GPUDYN_INSERT_WARP_SCAN, nullptr), 0);
    // GPU 1 current.
    CUDA_OK(cudaSetDevice(1));
    CHECK_ON(gpudyn_ggarray_push_back(g, values + n, n, nullptr, GPUDYN_INSERT_WARP_SCAN, nullptr), 1);
    CHECK_ON(gpudyn_static_array_push_back(st, values + n, n, nullptr, GPUDYN_INSERT_WARP_SCAN, gs(s1)), 1);
    if (v) CHECK_ON(gpudyn_vmm_array_push_back(v, values + n, n, nullptr, GPUDYN_INSERT_ATOMIC, gs(s1)), 1);
    CUDA_OK(cudaSetDevice(0));
    // Two threads with different current devices push the last two quarters.
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t)
        threads.emplace_back([&, t] {
            cudaSetDevice(t);
            const uint32_t* part = values + (2 + t) * n;
            gpudyn_stream_t s = t == 1 ? gs(s1) : nullptr;
            if (gpudyn_ggarray_push_back(g, part, n, nullptr, GPUDYN_INSERT_WARP_SCAN, s) != GPUDYN_SUCCESS) ++failures;
            if (gpudyn_static_array_push_back(st, part, n, nullptr, GPUDYN_INSERT_WARP_SCAN, s) != GPUDYN_SUCCESS)
                ++failures;
            if (v && gpudyn_vmm_array_reserve(v, 4 * n, s) != GPUDYN_SUCCESS) ++failures;
            if (v && gpudyn_vmm_array_push_back(v, part, n, nullptr, GPUDYN_INSERT_WARP_SCAN, s) != GPUDYN_SUCCESS)
                ++failures;
            if (current_device() != t) ++failures;
        });
    for (auto& t : threads) t.join();
    CHECK(failures.load() == 0);

    std::vector<uint32_t> want = host;
    std::sort(want.begin(), want.end());
    uint32_t* flat = alloc_on<uint32_t>(1, host.size());
    std::vector<uint32_t> got(host.size());
    // flatten (device, GPU-1 buffer) with GPU 0 current, copy_to_host with GPU 1 current.
    CHECK_ON(gpudyn_ggarray_size(g, &u, gs(s1)), 0);
    CHECK(u == host.size());
    CHECK_ON(gpudyn_ggarray_flatten(g, flat, host.size() * 4, gs(s1)), 0);
    CUDA_OK(cudaStreamSynchronize(s1));
    CUDA_OK(cudaMemcpy(got.data(), flat, host.size() * 4, cudaMemcpyDeviceToHost));
    std::sort(got.begin(), got.end());
    CHECK(got == want);
    CHECK_ON(gpudyn_static_array_flatten(st, flat, host.size() * 4, nullptr), 0);
    CUDA_OK(cudaSetDevice(1));
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(got.data(), flat, host.size() * 4, cudaMemcpyDeviceToHost));
    std::sort(got.begin(), got.end());
    CHECK(got == want);
    if (v) {
        CHECK_ON(gpudyn_vmm_array_copy_to_host(v, got.data(), got.size() * 4, nullptr), 1);
        std::sort(got.begin(), got.end());
        CHECK(got == want);
    }
    CHECK_ON(gpudyn_ggarray_copy_to_host(g, got.data(), got.size() * 4, nullptr), 1);
    std::sort(got.begin(), got.end());
    CHECK(got == want);
    CUDA_OK(cudaSetDevice(0));

    // ---- a GGArray without a pool: every bucket from its growth arena, which
    // is mapped on GPU 1 while GPU 0 is current ----
    {
        gpudyn_ggarray_options_t ao;
        gpudyn_ggarray_options_init(&ao);
        ao.num_lfvectors = 8;
        ao.pool_bytes = ~0ull;
        ao.budget_bytes = 64ull << 20;
        gpudyn_ggarray_t ga = nullptr;
        CHECK_ON(gpudyn_ggarray_create(&ga, &ao, gs(s1)), 0);
        CHECK_ON(gpudyn_ggarray_push_back(ga, values, host.size(), nullptr, GPUDYN_INSERT_WARP_SCAN, gs(s1)), 0);
        gpudyn_ggarray_view_t av;
        CHECK_ON(gpudyn_ggarray_get_view(ga, &av, nullptr), 0); // the default stream: GPU 1's
        CHECK(av.arena != 0);
        uint64_t held = 0;
        CHECK_ON(gpudyn_ggarray_allocated_bytes(ga, &held, gs(s1)), 0);
        CHECK(held >= host.size() * 4 && held <= 2 * host.size() * 4 + 8 * 1024 * 4);
        CHECK_ON(gpudyn_ggarray_copy_to_host(ga, got.data(), got.size() * 4, gs(s1)), 0);
        std::sort(got.begin(), got.end());
        CHECK(got == want);
        CHECK_ON(gpudyn_ggarray_destroy(ga), 0);
    }

    // ---- page heap: get_pages / free_pages / malloc / free, GPU 0 current ----
    const uint64_t np = 4000;
    uint32_t* pages = alloc_on<uint32_t>(1, np);
    CHECK_ON(gpudyn_rw_heap_get_pages(h, pages, np, GPUDYN_RW_HEAP_CORW, gs(s1)), 0);
    std::vector<uint32_t> taken(np);
    CUDA_OK(cudaMemcpy(taken.data(), pages, np * 4, cudaMemcpyDeviceToHost));
    std::set<uint32_t> distinct(taken.begin(), taken.end());
    CHECK(distinct.size() == np && *distinct.rbegin() < ro.page_count);
    CHECK_ON(gpudyn_rw_heap_free_page_count(h, &u, nullptr), 0);
    CHECK(u == ro.page_count - np);
    CHECK_ON(gpudyn_rw_heap_free_pages(h, pages, np, nullptr), 0);
    CHECK_ON(gpudyn_rw_heap_free_page_count(h, &u, gs(s1)), 0);
    CHECK(u == ro.page_count);
    const uint64_t nm = 2048;
    std::vector<uint64_t> sizes(nm);
    for (uint64_t i = 0; i < nm; ++i) sizes[i] = 16 + (i % 7) * 100;
    uint64_t* dsizes = alloc_on<uint64_t>(1, nm);
    uint64_t* ptrs = alloc_on<uint64_t>(1, nm);
    CUDA_OK(cudaMemcpy(dsizes, sizes.data(), nm * 8, cudaMemcpyHostToDevice));
    CUDA_OK(cudaSetDevice(1));
    CHECK_ON(gpudyn_rw_heap_malloc(h, dsizes, ptrs, nm, gs(s1)), 1);
    CUDA_OK(cudaSetDevice(0));
    std::vector<uint64_t> got_ptrs(nm);
    CUDA_OK(cudaMemcpy(got_ptrs.data(), ptrs, nm * 8, cudaMemcpyDeviceToHost));
    // Ranges [p, p + size) are disjoint and inside the pool.
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    gpudyn_rw_heap_view_t rv;
    CHECK_OK(gpudyn_rw_heap_get_view(h, &rv));
    for (uint64_t i = 0; i < nm; ++i) {
        CHECK(got_ptrs[i] >= rv.pool && got_ptrs[i] + sizes[i] <= rv.pool + rv.page_size * rv.page_count);
        ranges.push_back({got_ptrs[i], got_ptrs[i] + sizes[i]});
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i) CHECK(ranges[i].first >= ranges[i - 1].second);
    CHECK_ON(gpudyn_rw_heap_free(h, ptrs, nm, nullptr), 0);
    CHECK_ON(gpudyn_rw_heap_free_page_count(h, &u, nullptr), 0);
    CHECK(u == ro.page_count);

    // ---- warp heaps (arena and page-heap backed), from both current devices --
    void** wptrs = alloc_on<void*>(1, nm);
    for (int dev = 0; dev < 2; ++dev) {
        CUDA_OK(cudaSetDevice(dev));
        for (gpudyn_warp_heap_t heap : {w, wp}) {
            CHECK_ON(gpudyn_warp_heap_alloc_batch(heap, dsizes, nm, wptrs, dev ? gs(s1) : nullptr), dev);
            std::vector<uint64_t> wp_host(nm);
            CUDA_OK(cudaMemcpy(wp_host.data(), wptrs, nm * 8, cudaMemcpyDeviceToHost));
            std::vector<std::pair<uint64_t, uint64_t>> blocks;
            for (uint64_t i = 0; i < nm; ++i) {
                CHECK(wp_host[i] != 0 && wp_host[i] % 16 == 0);
                blocks.push_back({wp_host[i], wp_host[i] + sizes[i]});
            }
            std::sort(blocks.begin(), blocks.end());
            for (size_t i = 1; i < blocks.size(); ++i) CHECK(blocks[i].first >= blocks[i - 1].second);
            CHECK_ON(gpudyn_warp_heap_release(heap, nullptr), dev);
        }
    }
    CUDA_OK(cudaSetDevice(0));
    CHECK_ON(gpudyn_rw_heap_free_page_count(h, &u, nullptr), 0);
    CHECK(u == ro.page_count); // every page the page-backed warp heap took came back

    // ---- device heap: created on GPU 1 with GPU 0 current; bulk and kernel
    // malloc / free, stats and grow from either current device; a GGArray of
    // GPU 1 takes its buckets from it, one of GPU 0 is refused it ----
    {
        gpudyn_heap_options_t ho;
        gpudyn_heap_options_init(&ho);
        ho.initial_bytes = 64ull << 20;
        ho.max_bytes = 256ull << 20;
        gpudyn_heap_t hp = nullptr;
        CHECK_ON(gpudyn_heap_create(&hp, &ho, gs(s1)), 0);
        if (!hp) return TEST_RESULT();
        gpudyn_heap_stats_t hs{};
        hs.struct_size = sizeof(hs);
        CHECK_INVALID(gpudyn_heap_get_stats(hp, &hs, gs(s0)), "stream");
        CHECK_INVALID(gpudyn_heap_malloc(hp, dsizes, ptrs, nm, gs(s0)), "stream");
        gpudyn_heap_view_t hv;
        CHECK_OK(gpudyn_heap_get_view(hp, &hv));
        // Bulk, GPU 0 current: disjoint blocks inside the mapped range, all freed.
        CHECK_ON(gpudyn_heap_malloc(hp, dsizes, ptrs, nm, gs(s1)), 0);
        CUDA_OK(cudaMemcpy(got_ptrs.data(), ptrs, nm * 8, cudaMemcpyDeviceToHost));
        std::vector<std::pair<uint64_t, uint64_t>> hr;
        for (uint64_t i = 0; i < nm; ++i) {
            CHECK(got_ptrs[i] >= hv.base && got_ptrs[i] + sizes[i] <= hv.base + ho.initial_bytes);
            hr.push_back({got_ptrs[i], got_ptrs[i] + sizes[i]});
        }
        std::sort(hr.begin(), hr.end());
        for (size_t i = 1; i < hr.size(); ++i) CHECK(hr[i].first >= hr[i - 1].second);
        CHECK_ON(gpudyn_heap_get_stats(hp, &hs, nullptr), 0);
        CHECK(hs.allocations == nm && hs.failed_allocations == 0);
        CHECK_ON(gpudyn_heap_free(hp, ptrs, nm, nullptr), 0); // the default stream: GPU 1's
        // A user's kernel on GPU 1, then a grow with GPU 0 current, then a later
        // kernel reads every block back and frees it.
        const unsigned nk = 50000;
        unsigned long long* kptrs = alloc_on<unsigned long long>(1, nk);
        unsigned* kbad = alloc_on<unsigned>(1, 1);
        CUDA_OK(cudaSetDevice(1));
        CUDA_OK(cudaMemsetAsync(kbad, 0, 4, s1));
        heap_fill<<<(nk + 255) / 256, 256, 0, s1>>>(hv, nk, kptrs);
        CUDA_OK(cudaGetLastError());
        CUDA_OK(cudaSetDevice(0));
        CHECK_ON(gpudyn_heap_get_stats(hp, &hs, gs(s1)), 0);
        CHECK(hs.allocations == nk && hs.failed_allocations == 0 && hs.bad_frees == 0);
        const uint64_t mapped_before = hs.bytes_mapped;
        CHECK_ON(gpudyn_heap_grow(hp, 128ull << 20, gs(s1)), 0);
        CHECK_ON(gpudyn_heap_get_stats(hp, &hs, nullptr), 0);
        CHECK(hs.bytes_mapped >= (128ull << 20) && hs.bytes_mapped > mapped_before && hs.allocations == nk);
        CUDA_OK(cudaSetDevice(1));
        heap_check_and_free<<<(nk + 255) / 256, 256, 0, s1>>>(hv, nk, kptrs, kbad);
        CUDA_OK(cudaGetLastError());
        unsigned bad_blocks = ~0u;
        CUDA_OK(cudaMemcpyAsync(&bad_blocks, kbad, 4, cudaMemcpyDeviceToHost, s1));
        CUDA_OK(cudaStreamSynchronize(s1));
        CHECK(bad_blocks == 0);
        CHECK_ON(gpudyn_heap_get_stats(hp, &hs, gs(s1)), 1);
        CHECK(hs.allocations == 0 && hs.bad_frees == 0);
        CUDA_OK(cudaSetDevice(0));
        // GGArrays: one of GPU 0 cannot take GPU 1's heap; one of GPU 1 (created
        // with GPU 0 current) keeps its buckets there.
        gpudyn_ggarray_options_t ho_arr;
        gpudyn_ggarray_options_init(&ho_arr);
        ho_arr.num_lfvectors = 8;
        ho_arr.pool_bytes = ~0ull;
        ho_arr.heap = hp;
        gpudyn_ggarray_t gh = nullptr;
        CHECK_INVALID(gpudyn_ggarray_create(&gh, &ho_arr, gs(s0)), "heap");
        CHECK(gh == nullptr);
        CHECK_ON(gpudyn_ggarray_create(&gh, &ho_arr, gs(s1)), 0);
        if (gh) {
            CHECK_ON(gpudyn_ggarray_push_back(gh, values, host.size(), nullptr, GPUDYN_INSERT_WARP_SCAN, gs(s1)), 0);
            CHECK_ON(gpudyn_ggarray_copy_to_host(gh, got.data(), got.size() * 4, gs(s1)), 0);
            std::sort(got.begin(), got.end());
            CHECK(got == want);
            CHECK_ON(gpudyn_heap_get_stats(hp, &hs, nullptr), 0);
            CHECK(hs.bytes_held >= host.size() * 4); // the buckets are the heap's
            CHECK_ON(gpudyn_ggarray_destroy(gh), 0);
        }
        CHECK_ON(gpudyn_heap_destroy(hp), 0);
        cudaSetDevice(1);
        CUDA_OK(cudaFree(kptrs));
        CUDA_OK(cudaFree(kbad));
        cudaSetDevice(0);
    }

    // ---- destroy with GPU 0 current ----------------------------------------
    CHECK_ON(gpudyn_warp_heap_destroy(wp), 0);
    CHECK_ON(gpudyn_warp_heap_destroy(w), 0);
    CHECK_ON(gpudyn_rw_heap_destroy(h), 0);
    CHECK_ON(gpudyn_ggarray_destroy(g), 0);
    CHECK_ON(gpudyn_static_array_destroy(st), 0);
    CHECK_ON(gpudyn_vmm_array_destroy(v), 0);
    cudaSetDevice(1);
    CUDA_OK(cudaFree(values));
    CUDA_OK(cudaFree(flat));
    CUDA_OK(cudaFree(pages));
    CUDA_OK(cudaFree(dsizes));
    CUDA_OK(cudaFree(ptrs));
    CUDA_OK(cudaFree(wptrs));
    CUDA_OK(cudaStreamDestroy(s1));
    cudaSetDevice(0);
    CUDA_OK(cudaStreamDestroy(s0));
    return TEST_RESULT();
}
