// C ABI of the random-walk page heap: owns the pool, bitmap, LockMap and page
// records, validates arguments and launches the bulk kernels of
// include/gpudyn/detail/rw_heap/kernels.cuh (no second copy of an algorithm
// lives here).
#include "internal.hpp"

#include <gpudyn/detail/rw_heap/kernels.cuh>
#include <gpudyn/experimental.h>
#include <gpudyn/rw_heap.h>

#include <cmath>
#include <cstring>

struct gpudyn_rw_heap_s {
    gpudyn_rw_heap_options_t options{};
    gpudyn_rw_heap_view_t view{};
    void* pool = nullptr;
    void* bitmap = nullptr;
    void* lockmap = nullptr;
    void* meta = nullptr;
    void* live = nullptr; // live-start bitmap: 1 bit per 16-byte granule (view.live_starts)
    unsigned long long* counters = nullptr;
    unsigned long long* scratch = nullptr;
    uint64_t bitmap_bytes = 0;
    uint64_t lockmap_bytes = 0;
    uint64_t live_bytes = 0;
    gpudyn::detail::handle_state hs;  // device, call ordering, lock
    uint32_t backing_users = 0;       // warp heaps backed by this heap (under hs.mutex)
    uint64_t calls = 0;               // stable calls so far (under hs.mutex): each walks from a new seed
    gpudyn::detail::check_marks seen; // the counters at the last gpudyn_rw_heap_check (zeroed with them)
};

using namespace gpudyn::detail;
using namespace gpudyn::rw_heap_detail;
using gpudyn::rw_algorithm;

namespace {

// Defaults (gpudyn_rw_heap_options_init): the paper's setup (SV-A: 32-bit words,
// T = 1M pages) with 256-byte pages (SV-B2: an 8192 B largest request / 32 bits).
constexpr uint32_t kDefaultWordBits = 32;
constexpr uint64_t kDefaultPageSize = 256;
constexpr uint64_t kDefaultPageCount = uint64_t(1) << 20;
// Random steps before the bounded sweep: at 0.5% free RW-BM needs ~6 steps on
// average (Eq. 5), so 4096 only ends walks that cannot succeed.
constexpr uint32_t kDefaultMaxRandomSteps = 4096;
// Page ids are 32-bit with 0xFFFFFFFF reserved; 2^31 keeps page arithmetic in
// unsigned range with room for the tail word.
constexpr uint64_t kMaxPageCount = uint64_t(1) << 31;
// RW_malloc's region: 32 words (one per lane), as kRwRegionWords in rw_heap.cuh.
constexpr uint64_t kRegionWords = 32;
// Slots of gpudyn_rw_heap_view_t::counters (failed requests, bad frees, spare).
constexpr unsigned kCounterCount = 4;

// ---- launchers of the bulk kernels (each returns the launch's CUDA error) ----
unsigned blocks_for(unsigned long long threads) { return unsigned((threads + kBlock - 1) / kBlock); }

// Grid-stride kernels: enough blocks to fill the GPU (8 blocks of 256 per SM:
// 2048 threads, the sm_90 maximum), not more.
unsigned grid_stride_blocks(unsigned long long n) { return grid_for(n, kBlock, 8); }

template <rw_algorithm Algo>
void get_pages_algo(const gpudyn_rw_heap_view_t& v, unsigned* pages, unsigned long long n, unsigned per_thread,
                    unsigned long long seed, bool stats, unsigned long long* scratch, cudaStream_t s) {
    const unsigned long long threads = (n + per_thread - 1) / per_thread;
    if (stats)
        get_pages_kernel<Algo, true><<<blocks_for(threads), kBlock, 0, s>>>(v, pages, n, per_thread, seed, scratch);
    else get_pages_kernel<Algo, false><<<blocks_for(threads), kBlock, 0, s>>>(v, pages, n, per_thread, seed, scratch);
}

cudaError_t launch_set_tail(const gpudyn_rw_heap_view_t& v, cudaStream_t s) {
    set_tail_kernel<<<1, 1, 0, s>>>(v);
    return cudaGetLastError();
}

cudaError_t launch_occupy(const gpudyn_rw_heap_view_t& v, unsigned long long used, unsigned long long seed,
                          cudaStream_t s) {
    if (used == 0) return cudaSuccess;
    unsigned bits = 1;
    while ((1ull << bits) < v.page_count) ++bits;
    occupy_kernel<<<grid_stride_blocks(used), kBlock, 0, s>>>(v, used, bits, seed);
    return cudaGetLastError();
}

cudaError_t launch_count_free(const gpudyn_rw_heap_view_t& v, unsigned long long* out, cudaStream_t s) {
    count_free_kernel<<<grid_stride_blocks(v.word_count), kBlock, 0, s>>>(v, out);
    return cudaGetLastError();
}

cudaError_t launch_get_pages(const gpudyn_rw_heap_view_t& v, gpudyn_rw_heap_algorithm_t algorithm, unsigned* pages,
                             unsigned long long n, unsigned per_thread, unsigned long long seed, bool stats,
                             unsigned long long* scratch, cudaStream_t s) {
    switch (algorithm) {
        case GPUDYN_RW_HEAP_RW:
            get_pages_algo<rw_algorithm::rw>(v, pages, n, per_thread, seed, stats, scratch, s);
            break;
        case GPUDYN_RW_HEAP_RW_BM:
            get_pages_algo<rw_algorithm::rw_bm>(v, pages, n, per_thread, seed, stats, scratch, s);
            break;
        case GPUDYN_RW_HEAP_CORW:
            get_pages_algo<rw_algorithm::corw>(v, pages, n, per_thread, seed, stats, scratch, s);
            break;
        case GPUDYN_RW_HEAP_CRW:
            get_pages_algo<rw_algorithm::crw>(v, pages, n, per_thread, seed, stats, scratch, s);
            break;
        default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

cudaError_t launch_free_pages(const gpudyn_rw_heap_view_t& v, const unsigned* pages, unsigned long long n,
                              cudaStream_t s) {
    free_pages_kernel<<<grid_stride_blocks(n), kBlock, 0, s>>>(v, pages, n);
    return cudaGetLastError();
}

cudaError_t launch_malloc(const gpudyn_rw_heap_view_t& v, const unsigned long long* sizes, unsigned long long* ptrs,
                          unsigned long long n, unsigned long long seed, unsigned long long* scratch, cudaStream_t s) {
    malloc_kernel<<<blocks_for(n), kBlock, 0, s>>>(v, sizes, ptrs, n, seed, scratch);
    return cudaGetLastError();
}

cudaError_t launch_free(const gpudyn_rw_heap_view_t& v, const unsigned long long* ptrs, unsigned long long n,
                        cudaStream_t s) {
    free_kernel<<<grid_stride_blocks(n), kBlock, 0, s>>>(v, ptrs, n);
    return cudaGetLastError();
}

void require_heap(gpudyn_rw_heap_t heap) { require_handle(heap, handle_kind::rw_heap, "heap"); }

// Under the heap's lock: the warp heaps backed by it hold pages of it, which a
// reset (or occupy) would hand out again.
void require_no_backing_users(gpudyn_rw_heap_t heap) {
    GPUDYN_REQUIRE(heap->backing_users == 0, "argument 'heap' is the backing of %u warp heap(s); destroy them first",
                   unsigned(heap->backing_users));
}

// All pages free, counters zero, tail bits set.  Stream-ordered.
void clear_heap(gpudyn_rw_heap_t h, cudaStream_t s) {
    GPUDYN_CUDA(cudaMemsetAsync(h->bitmap, 0, h->bitmap_bytes, s));
    if (h->lockmap) GPUDYN_CUDA(cudaMemsetAsync(h->lockmap, 0, h->lockmap_bytes, s));
    GPUDYN_CUDA(cudaMemsetAsync(h->meta, 0, h->options.page_count * sizeof(uint32_t), s));
    GPUDYN_CUDA(cudaMemsetAsync(h->live, 0, h->live_bytes, s));
    GPUDYN_CUDA(cudaMemsetAsync(h->counters, 0, kCounterCount * sizeof(unsigned long long), s));
    h->seen = {};
    check_cuda(launch_set_tail(h->view, s), "launch of set_tail_kernel");
}

// Stream-ordered frees on `s`; each pointer is cleared once its free is queued
// (a failure leaves the rest owned by the handle).
void release_all(gpudyn_rw_heap_t h, cudaStream_t s) {
    void** ptrs[] = {&h->pool,
                     &h->bitmap,
                     &h->lockmap,
                     &h->meta,
                     &h->live,
                     reinterpret_cast<void**>(&h->counters),
                     reinterpret_cast<void**>(&h->scratch)};
    for (void** p : ptrs) {
        if (*p) GPUDYN_CUDA(cudaFreeAsync(*p, s));
        *p = nullptr;
    }
}

// Free pages, counted on `s` (synchronizes it).
uint64_t count_free(gpudyn_rw_heap_t heap, cudaStream_t s) {
    GPUDYN_CUDA(cudaMemsetAsync(heap->scratch, 0, sizeof(unsigned long long), s));
    check_cuda(launch_count_free(heap->view, heap->scratch, s), "launch of count_free_kernel");
    unsigned long long c = 0;
    GPUDYN_CUDA(cudaMemcpyAsync(&c, heap->scratch, sizeof(c), cudaMemcpyDeviceToHost, s));
    GPUDYN_CUDA(cudaStreamSynchronize(s));
    return c;
}

template <class T>
void read_back(T* host, const void* dev, size_t count, cudaStream_t s) {
    GPUDYN_CUDA(cudaMemcpyAsync(host, dev, count * sizeof(T), cudaMemcpyDeviceToHost, s));
    GPUDYN_CUDA(cudaStreamSynchronize(s));
}

} // namespace

extern "C" {

GPUDYN_API gpudyn_status_t gpudyn_rw_heap_options_init(gpudyn_rw_heap_options_t* options) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(options);
        std::memset(options, 0, sizeof(*options));
        options->struct_size = sizeof(*options);
        options->word_bits = kDefaultWordBits;
        options->page_size = kDefaultPageSize;
        options->page_count = kDefaultPageCount;
        options->use_lockmap = 0;
        options->max_random_steps = kDefaultMaxRandomSteps;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_rw_heap_create(gpudyn_rw_heap_t* heap, const gpudyn_rw_heap_options_t* options,
                                                 gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(heap);
        *heap = nullptr;
        require_struct_size(options, "options");
        const auto& o = *options;
        GPUDYN_REQUIRE(o.word_bits == 32 || o.word_bits == 64, "options->word_bits is %u, expected 32 or 64",
                       unsigned(o.word_bits));
        GPUDYN_REQUIRE(o.page_size >= 16 && o.page_size % 16 == 0,
                       "options->page_size is %llu, expected a multiple of 16 that is >= 16",
                       (unsigned long long)o.page_size);
        GPUDYN_REQUIRE(o.page_count >= 1 && o.page_count <= kMaxPageCount,
                       "options->page_count is %llu, expected 1 <= page_count <= %llu",
                       (unsigned long long)o.page_count, (unsigned long long)kMaxPageCount);
        GPUDYN_REQUIRE(o.use_lockmap <= 1, "options->use_lockmap is %u, expected 0 or 1", unsigned(o.use_lockmap));
        GPUDYN_REQUIRE(o.max_random_steps >= 1, "options->max_random_steps is 0, expected >= 1");
        GPUDYN_REQUIRE(o.page_size <= (~uint64_t(0)) / o.page_count,
                       "options->page_size * page_count overflows (%llu * %llu)", (unsigned long long)o.page_size,
                       (unsigned long long)o.page_count);
        cudaStream_t s = to_cuda(stream);
        const int device = create_device(s); // the stream's device, else the current one
        device_guard on_device(device);
        auto* h = new gpudyn_rw_heap_s;
        h->options = o;
        h->options.struct_size = sizeof(gpudyn_rw_heap_options_t);
        const uint64_t words = (o.page_count + o.word_bits - 1) / o.word_bits;
        h->bitmap_bytes = words * (o.word_bits / 8);
        h->lockmap_bytes = o.use_lockmap ? (words + 31) / 32 * sizeof(uint32_t) : 0;
        // One bit per 16-byte granule (kRwMallocAlign) in uint32 words: pool / 128 bytes.
        h->live_bytes = ((o.page_size / 16) * o.page_count + 31) / 32 * sizeof(uint32_t);
        try {
            h->hs.init();
            // Stream-ordered (destroy frees without synchronizing the device); every
            // later call waits for this one through the heap's event.
            char what[128];
            std::snprintf(what, sizeof(what), "options->page_size * page_count is %llu * %llu",
                          (unsigned long long)o.page_size, (unsigned long long)o.page_count);
            device_alloc(&h->pool, o.page_size * o.page_count, s, what);
            device_alloc(&h->bitmap, h->bitmap_bytes, s, "the page bitmap");
            if (o.use_lockmap) device_alloc(&h->lockmap, h->lockmap_bytes, s, "the lock map");
            device_alloc(&h->meta, o.page_count * sizeof(uint32_t), s, "the page records");
            device_alloc(&h->live, h->live_bytes, s, "the live-start bitmap");
            device_alloc(reinterpret_cast<void**>(&h->counters), kCounterCount * sizeof(unsigned long long), s,
                         "the counters");
            device_alloc(reinterpret_cast<void**>(&h->scratch), kScratchCount * sizeof(unsigned long long), s,
                         "the scratch counters");
            auto& v = h->view;
            v.version = GPUDYN_RW_HEAP_VIEW_VERSION;
            v.word_bits = o.word_bits;
            v.pool = reinterpret_cast<uint64_t>(h->pool);
            v.bitmap = reinterpret_cast<uint64_t>(h->bitmap);
            v.lockmap = reinterpret_cast<uint64_t>(h->lockmap);
            v.page_meta = reinterpret_cast<uint64_t>(h->meta);
            v.live_starts = reinterpret_cast<uint64_t>(h->live);
            v.counters = reinterpret_cast<uint64_t>(h->counters);
            v.page_size = o.page_size;
            v.page_count = uint32_t(o.page_count);
            v.word_count = uint32_t(words);
            v.max_random_steps = o.max_random_steps;
            clear_heap(h, s);
            using View = gpudyn_rw_heap_view_t;
            preload_kernels(&occupy_kernel<View>, &count_free_kernel<View>, &free_pages_kernel<View>,
                            &malloc_kernel<View>, &free_kernel<View>, &get_pages_kernel<rw_algorithm::rw, false, View>,
                            &get_pages_kernel<rw_algorithm::rw_bm, false, View>,
                            &get_pages_kernel<rw_algorithm::corw, false, View>,
                            &get_pages_kernel<rw_algorithm::crw, false, View>);
            GPUDYN_CUDA(cudaEventRecord(h->hs.done, s));
            register_handle(h, handle_kind::rw_heap);
        } catch (...) {
            try {
                release_all(h, s);
            } catch (...) {}
            h->hs.release();
            delete h;
            throw;
        }
        *heap = h;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_rw_heap_destroy(gpudyn_rw_heap_t heap) {
    GPUDYN_ABI_RELEASE({
        if (heap == nullptr) return;
        require_heap(heap); // a destroyed, foreign or garbage handle is refused, not dereferenced
        {
            handle_call call(heap->hs);
            require_no_backing_users(heap);
            release_all(heap, heap->hs.release_stream());
        }
        heap->hs.release();
        unregister_handle(heap);
        delete heap;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_rw_heap_get_view(gpudyn_rw_heap_t heap, gpudyn_rw_heap_view_t* view) {
    GPUDYN_ABI({
        require_heap(heap);
        GPUDYN_REQUIRE_NOT_NULL(view);
        handle_call call(heap->hs);
        *view = heap->view;
    });
}

namespace {

// The stable calls' seed: a new one per call (the same seed would start every
// call's walks on the same words), from a counter mixed by splitmix64.
uint64_t next_seed(gpudyn_rw_heap_t heap) {
    uint64_t z = (++heap->calls) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void get_pages(gpudyn_rw_heap_t heap, uint32_t* pages, uint64_t n, gpudyn_rw_heap_algorithm_t algorithm,
               uint32_t per_thread, const uint64_t* seed, gpudyn_exp_rw_heap_stats_t* stats, gpudyn_stream_t stream) {
    require_heap(heap);
    GPUDYN_REQUIRE(algorithm >= GPUDYN_RW_HEAP_RW && algorithm <= GPUDYN_RW_HEAP_CRW,
                   "argument 'algorithm' is %d, expected a gpudyn_rw_heap_algorithm_t (1..4)", int(algorithm));
    GPUDYN_REQUIRE(per_thread >= 1, "argument 'per_thread' is 0, expected >= 1");
    if (stats) require_struct_size(stats, "stats");
    if (n == 0) {
        if (stats) clear_out_struct(stats);
        return;
    }
    GPUDYN_REQUIRE_NOT_NULL(pages);
    GPUDYN_REQUIRE(n <= heap->options.page_count, "argument 'n' is %llu, more than the %llu pages of the heap",
                   (unsigned long long)n, (unsigned long long)heap->options.page_count);
    handle_call call(heap->hs, stream);
    require_device_array(heap->hs.device, pages, n, "pages", "n");
    cudaStream_t s = call.stream();
    const uint64_t walk_seed = seed ? *seed : next_seed(heap); // under the heap's lock
    GPUDYN_CUDA(cudaMemsetAsync(heap->scratch, 0, kScratchCount * sizeof(unsigned long long), s));
    check_cuda(
        launch_get_pages(heap->view, algorithm, pages, n, per_thread, walk_seed, stats != nullptr, heap->scratch, s),
        "launch of get_pages_kernel");
    unsigned long long sc[kScratchCount];
    read_back(sc, heap->scratch, kScratchCount, s);
    if (stats) {
        clear_out_struct(stats);
        stats->requests = n;
        stats->failed = sc[kFailedHere];
        stats->total_steps = sc[kStepsSum];
        stats->warps = sc[kWarpRounds];
        stats->warp_max_steps_sum = sc[kWarpMaxSum];
        stats->max_steps = sc[kMaxSteps];
        stats->tas = double(sc[kStepsSum]) / double(n);
        stats->was = sc[kWarpRounds] ? double(sc[kWarpMaxSum]) / double(sc[kWarpRounds]) : 0.0;
    }
    if (sc[kFailedHere] != 0) {
        // Give back what this call took: the heap keeps exactly what it had.
        check_cuda(launch_free_pages(heap->view, pages, n, s), "launch of free_pages_kernel");
        GPUDYN_CUDA(cudaStreamSynchronize(s));
        raise(GPUDYN_ERROR_OUT_OF_MEMORY, "%llu of %llu page requests found no free page",
              (unsigned long long)sc[kFailedHere], (unsigned long long)n);
    }
}

void rw_malloc(gpudyn_rw_heap_t heap, const uint64_t* sizes, uint64_t* pointers, uint64_t n, const uint64_t* seed,
               gpudyn_stream_t stream) {
    require_heap(heap);
    if (n == 0) return;
    GPUDYN_REQUIRE_NOT_NULL(sizes);
    GPUDYN_REQUIRE_NOT_NULL(pointers);
    // One thread a request (RW_malloc is a warp collective): the grid's x limit bounds n.
    constexpr uint64_t kMaxRequests = uint64_t(INT32_MAX) * kBlock;
    GPUDYN_REQUIRE(n <= kMaxRequests, "argument 'n' is %llu, more than the %llu requests one call can make",
                   (unsigned long long)n, (unsigned long long)kMaxRequests);
    handle_call call(heap->hs, stream);
    require_device_array(heap->hs.device, sizes, n, "sizes", "n");
    require_device_array(heap->hs.device, pointers, n, "pointers", "n");
    cudaStream_t s = call.stream();
    const uint64_t walk_seed = seed ? *seed : next_seed(heap); // under the heap's lock
    GPUDYN_CUDA(cudaMemsetAsync(heap->scratch, 0, kScratchCount * sizeof(unsigned long long), s));
    auto* out = reinterpret_cast<unsigned long long*>(pointers);
    check_cuda(launch_malloc(heap->view, reinterpret_cast<const unsigned long long*>(sizes), out, n, walk_seed,
                             heap->scratch, s),
               "launch of malloc_kernel");
    unsigned long long sc[kScratchCount];
    read_back(sc, heap->scratch, kScratchCount, s);
    if (sc[kFailedHere] != 0) {
        check_cuda(launch_free(heap->view, out, n, s), "launch of free_kernel");
        GPUDYN_CUDA(cudaMemsetAsync(out, 0, n * sizeof(uint64_t), s));
        GPUDYN_CUDA(cudaStreamSynchronize(s));
        const unsigned long long max_bytes = kRegionWords * heap->options.word_bits * heap->options.page_size;
        if (sc[kOversize] != 0)
            raise(GPUDYN_ERROR_INVALID_ARGUMENT,
                  "argument 'sizes' has %llu entries above the largest request of %llu bytes "
                  "(32 words x %u bits x %llu-byte pages)",
                  sc[kOversize], max_bytes, unsigned(heap->options.word_bits),
                  (unsigned long long)heap->options.page_size);
        raise(GPUDYN_ERROR_OUT_OF_MEMORY, "%llu of %llu malloc requests found no free run", sc[kFailedHere],
              (unsigned long long)n);
    }
}

} // namespace

GPUDYN_API gpudyn_status_t gpudyn_rw_heap_get_pages(gpudyn_rw_heap_t heap, uint32_t* pages, uint64_t n,
                                                    gpudyn_rw_heap_algorithm_t algorithm, gpudyn_stream_t stream) {
    GPUDYN_ABI({ get_pages(heap, pages, n, algorithm, 1, nullptr, nullptr, stream); });
}

GPUDYN_API gpudyn_status_t gpudyn_exp_rw_heap_get_pages(gpudyn_rw_heap_t heap, uint32_t* pages, uint64_t n,
                                                        gpudyn_rw_heap_algorithm_t algorithm, uint32_t per_thread,
                                                        uint64_t seed, gpudyn_exp_rw_heap_stats_t* stats,
                                                        gpudyn_stream_t stream) {
    GPUDYN_ABI({ get_pages(heap, pages, n, algorithm, per_thread, &seed, stats, stream); });
}

GPUDYN_API gpudyn_status_t gpudyn_rw_heap_malloc(gpudyn_rw_heap_t heap, const uint64_t* sizes, uint64_t* pointers,
                                                 uint64_t n, gpudyn_stream_t stream) {
    GPUDYN_ABI({ rw_malloc(heap, sizes, pointers, n, nullptr, stream); });
}

GPUDYN_API gpudyn_status_t gpudyn_exp_rw_heap_malloc(gpudyn_rw_heap_t heap, const uint64_t* sizes, uint64_t* pointers,
                                                     uint64_t n, uint64_t seed, gpudyn_stream_t stream) {
    GPUDYN_ABI({ rw_malloc(heap, sizes, pointers, n, &seed, stream); });
}

GPUDYN_API gpudyn_status_t gpudyn_rw_heap_free_pages(gpudyn_rw_heap_t heap, const uint32_t* pages, uint64_t n,
                                                     gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        if (n == 0) return;
        GPUDYN_REQUIRE_NOT_NULL(pages);
        buffer_bytes(n, sizeof(uint32_t), "n", "pages");
        handle_call call(heap->hs, stream);
        require_device_array(heap->hs.device, pages, n, "pages", "n");
        check_cuda(launch_free_pages(heap->view, pages, n, call.stream()), "launch of free_pages_kernel");
    });
}

GPUDYN_API gpudyn_status_t gpudyn_rw_heap_free(gpudyn_rw_heap_t heap, const uint64_t* pointers, uint64_t n,
                                               gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        if (n == 0) return;
        GPUDYN_REQUIRE_NOT_NULL(pointers);
        buffer_bytes(n, sizeof(uint64_t), "n", "pointers");
        handle_call call(heap->hs, stream);
        require_device_array(heap->hs.device, pointers, n, "pointers", "n");
        check_cuda(launch_free(heap->view, reinterpret_cast<const unsigned long long*>(pointers), n, call.stream()),
                   "launch of free_kernel");
    });
}

GPUDYN_API gpudyn_status_t gpudyn_rw_heap_max_malloc_size(gpudyn_rw_heap_t heap, uint64_t* bytes) {
    GPUDYN_ABI({
        require_heap(heap);
        GPUDYN_REQUIRE_NOT_NULL(bytes);
        *bytes = kRegionWords * heap->options.word_bits * heap->options.page_size;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_exp_rw_heap_occupy(gpudyn_rw_heap_t heap, double fraction, uint64_t seed,
                                                     gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        GPUDYN_REQUIRE(fraction >= 0.0 && fraction <= 1.0, "argument 'fraction' is %g, expected 0 <= fraction <= 1",
                       fraction);
        handle_call call(heap->hs, stream);
        require_no_backing_users(heap);
        cudaStream_t s = call.stream();
        clear_heap(heap, s);
        const auto used = (unsigned long long)std::llround(fraction * double(heap->options.page_count));
        check_cuda(launch_occupy(heap->view, used, seed, s), "launch of occupy_kernel");
    });
}

GPUDYN_API gpudyn_status_t gpudyn_rw_heap_reset(gpudyn_rw_heap_t heap, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        handle_call call(heap->hs, stream);
        require_no_backing_users(heap);
        clear_heap(heap, call.stream());
    });
}

GPUDYN_API gpudyn_status_t gpudyn_rw_heap_free_page_count(gpudyn_rw_heap_t heap, uint64_t* count,
                                                          gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        GPUDYN_REQUIRE_NOT_NULL(count);
        handle_call call(heap->hs, stream);
        *count = count_free(heap, call.stream());
    });
}

GPUDYN_API gpudyn_status_t gpudyn_rw_heap_get_info(gpudyn_rw_heap_t heap, gpudyn_rw_heap_info_t* info,
                                                   gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        require_struct_size(info, "info");
        handle_call call(heap->hs, stream);
        const uint64_t free_pages = count_free(heap, call.stream());
        unsigned long long c[kCounterCount];
        read_back(c, heap->counters, kCounterCount, call.stream());
        uint32_t size = info->struct_size;
        std::memset(info, 0, sizeof(*info));
        info->struct_size = size;
        info->word_bits = heap->options.word_bits;
        info->page_size = heap->options.page_size;
        info->page_count = heap->options.page_count;
        info->free_pages = free_pages;
        info->failed_requests = c[0]; // kRwCounterFailed
        info->bad_frees = c[1];       // kRwCounterBadFree
        info->use_lockmap = heap->options.use_lockmap;
        info->max_random_steps = heap->options.max_random_steps;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_rw_heap_check(gpudyn_rw_heap_t heap, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        handle_call call(heap->hs, stream);
        unsigned long long c[kCounterCount];
        read_back(c, heap->counters, kCounterCount, call.stream());
        report_since_check(c[0], c[1], &heap->seen, "request(s) found no free page", // kRwCounterFailed
                           "bad free(s)", "");                                       // kRwCounterBadFree
    });
}

} // extern "C"

namespace gpudyn::detail {

handle_state& rw_heap_state(gpudyn_rw_heap_t heap) { return heap->hs; }

void rw_heap_add_backing_user(gpudyn_rw_heap_t heap, int delta) {
    std::lock_guard<std::mutex> lock(heap->hs.mutex);
    heap->backing_users = uint32_t(int64_t(heap->backing_users) + delta);
}

} // namespace gpudyn::detail
