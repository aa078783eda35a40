// C ABI of the warp heap (FDGMalloc).  The algorithm lives in
// <gpudyn/warp_heap.cuh>; this file validates arguments, owns the statistics
// and the arena batches, and launches the bulk kernels built from the header.
#include "internal.hpp"

#include "warp_heap_kernels.hpp"

#include <memory>
#include <vector>

namespace {

// Defaults from the paper's evaluation (sec. 5.1): 32 KiB superblocks, 16-byte
// minimum block (sec. 3.3), 126 entries per SuperBlock list.
constexpr uint64_t kDefaultSuperblockBytes = 32768;
constexpr uint32_t kDefaultMinBlockBytes = 16;
constexpr uint32_t kDefaultListCapacity = 126;
// Upper bounds that keep a misplaced argument from asking for absurd blocks:
// a minimum block of 1 MiB and a list of 2^20 entries (16 MiB) are far past use.
constexpr uint32_t kMaxMinBlockBytes = 1u << 20;
constexpr uint32_t kMaxListCapacity = 1u << 20;
// Bulk kernels: 8 full warps per block (a multiple of the warp size, so every
// warp of the batch kernel is complete and can start a heap with a full mask).
constexpr unsigned kBulkBlock = 256;
constexpr unsigned kWarpLanes = 32;

struct batch {
    void** headers;   // device array: one kept header per warp of the launch (or NULL)
    uint64_t count;
};

bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

struct gpudyn_warp_heap_s {
    gpudyn_warp_heap_view_t view{};
    gpudyn_warp_heap_stats_t* stats = nullptr;  // device
    unsigned* failed = nullptr;                 // device flag of alloc_batch
    cudaStream_t stream = nullptr;              // creation stream (destroy uses it)
    std::vector<batch> batches;
};

using namespace gpudyn::detail;

namespace {

void launch_free_kept(gpudyn_warp_heap_s* heap, void* const* headers, uint64_t n, cudaStream_t stream) {
    if (n == 0) return;
    check_cuda(gpudyn::warp_heap_impl::launch_free_kept(heap->view, headers, n, grid_for(n, kBulkBlock), kBulkBlock,
                                                         stream),
               "launch of free_kept_kernel");
}

void release_batches(gpudyn_warp_heap_s* heap, cudaStream_t stream) {
    while (!heap->batches.empty()) {
        batch b = heap->batches.back();
        launch_free_kept(heap, b.headers, b.count, stream);
        GPUDYN_CUDA(cudaFreeAsync(b.headers, stream));
        heap->batches.pop_back();
    }
}

}  // namespace

extern "C" {

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_options_init(gpudyn_warp_heap_options_t* options) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(options);
        *options = gpudyn_warp_heap_options_t{};
        options->struct_size = sizeof(gpudyn_warp_heap_options_t);
        options->backing = GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC;
        options->superblock_bytes = kDefaultSuperblockBytes;
        options->min_block_bytes = kDefaultMinBlockBytes;
        options->list_capacity = kDefaultListCapacity;
        options->device_heap_bytes = 0;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_create(gpudyn_warp_heap_t* heap, const gpudyn_warp_heap_options_t* options,
                                                   gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(heap);
        *heap = nullptr;
        require_struct_size(options, "options");
        const gpudyn_warp_heap_options_t o = *options;
        GPUDYN_REQUIRE(o.backing == GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC,
                       "options->backing is %u, expected GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC (0)", unsigned(o.backing));
        GPUDYN_REQUIRE(is_pow2(o.min_block_bytes) && o.min_block_bytes >= unsigned(GPUDYN_WARP_HEAP_ALIGNMENT) &&
                           o.min_block_bytes <= kMaxMinBlockBytes,
                       "options->min_block_bytes is %u, expected a power of two in [%u, %u]",
                       unsigned(o.min_block_bytes), unsigned(GPUDYN_WARP_HEAP_ALIGNMENT), kMaxMinBlockBytes);
        GPUDYN_REQUIRE(o.superblock_bytes <= unsigned(GPUDYN_WARP_HEAP_MAX_SUPERBLOCK_BYTES),
                       "options->superblock_bytes is %llu, expected at most %u (0 disables superblocks)",
                       (unsigned long long)o.superblock_bytes, unsigned(GPUDYN_WARP_HEAP_MAX_SUPERBLOCK_BYTES));
        GPUDYN_REQUIRE(o.superblock_bytes == 0 ||
                           (o.superblock_bytes >= o.min_block_bytes && o.superblock_bytes % o.min_block_bytes == 0),
                       "options->superblock_bytes is %llu, expected 0 or a multiple of min_block_bytes (%u)",
                       (unsigned long long)o.superblock_bytes, unsigned(o.min_block_bytes));
        GPUDYN_REQUIRE(o.list_capacity >= 1 && o.list_capacity <= kMaxListCapacity,
                       "options->list_capacity is %u, expected 1..%u", unsigned(o.list_capacity), kMaxListCapacity);
        require_device();
        if (o.device_heap_bytes != 0) {
            size_t current = 0;
            GPUDYN_CUDA(cudaDeviceGetLimit(&current, cudaLimitMallocHeapSize));
            if (current < o.device_heap_bytes) {
                cudaError_t err = cudaDeviceSetLimit(cudaLimitMallocHeapSize, size_t(o.device_heap_bytes));
                if (err != cudaSuccess) {
                    cudaGetLastError();
                    raise(err == cudaErrorMemoryAllocation ? GPUDYN_ERROR_OUT_OF_MEMORY : GPUDYN_ERROR_NOT_SUPPORTED,
                          "options->device_heap_bytes is %llu: the CUDA malloc heap (now %zu bytes) could not be "
                          "raised: %s; raise it before the first kernel that uses device malloc runs",
                          (unsigned long long)o.device_heap_bytes, current, cudaGetErrorName(err));
                }
            }
        }
        auto* h = new gpudyn_warp_heap_s();
        try {
            h->stream = to_cuda(stream);
            GPUDYN_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&h->stats), sizeof(gpudyn_warp_heap_stats_t), h->stream));
            GPUDYN_CUDA(cudaMemsetAsync(h->stats, 0, sizeof(gpudyn_warp_heap_stats_t), h->stream));
            GPUDYN_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&h->failed), sizeof(unsigned), h->stream));
            h->view.version = GPUDYN_WARP_HEAP_VIEW_VERSION;
            h->view.backing = o.backing;
            h->view.superblock_bytes = uint32_t(o.superblock_bytes);
            h->view.min_block_bytes = o.min_block_bytes;
            h->view.list_capacity = o.list_capacity;
            h->view.stats = h->stats;
        } catch (...) {
            if (h->stats) cudaFreeAsync(h->stats, h->stream);
            if (h->failed) cudaFreeAsync(h->failed, h->stream);
            delete h;
            throw;
        }
        *heap = h;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_destroy(gpudyn_warp_heap_t heap) {
    GPUDYN_ABI({
        if (heap == nullptr) return;
        std::unique_ptr<gpudyn_warp_heap_s> owned(heap);
        release_batches(heap, heap->stream);
        GPUDYN_CUDA(cudaFreeAsync(heap->stats, heap->stream));
        GPUDYN_CUDA(cudaFreeAsync(heap->failed, heap->stream));
        GPUDYN_CUDA(cudaStreamSynchronize(heap->stream));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_get_view(gpudyn_warp_heap_t heap, gpudyn_warp_heap_view_t* view) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(heap);
        GPUDYN_REQUIRE_NOT_NULL(view);
        *view = heap->view;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_alloc_batch(gpudyn_warp_heap_t heap, const uint64_t* sizes, uint64_t count,
                                                        void** pointers, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(heap);
        if (count == 0) return;
        GPUDYN_REQUIRE_NOT_NULL(sizes);
        GPUDYN_REQUIRE_NOT_NULL(pointers);
        cudaStream_t s = to_cuda(stream);
        const unsigned grid = grid_for(count, kBulkBlock);
        const uint64_t warps = uint64_t(grid) * kBulkBlock / kWarpLanes;
        batch b{nullptr, warps};
        GPUDYN_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&b.headers), warps * sizeof(void*), s));
        try {
            GPUDYN_CUDA(cudaMemsetAsync(b.headers, 0, warps * sizeof(void*), s));
            GPUDYN_CUDA(cudaMemsetAsync(heap->failed, 0, sizeof(unsigned), s));
            check_cuda(gpudyn::warp_heap_impl::launch_alloc_batch(heap->view, sizes, count, pointers, b.headers,
                                                                  heap->failed, grid, kBulkBlock, s),
                       "launch of alloc_batch_kernel");
            unsigned failed = 0;
            GPUDYN_CUDA(cudaMemcpyAsync(&failed, heap->failed, sizeof(unsigned), cudaMemcpyDeviceToHost, s));
            GPUDYN_CUDA(cudaStreamSynchronize(s));
            if (failed != 0) {
                // Roll this batch back; earlier batches are untouched.
                launch_free_kept(heap, b.headers, b.count, s);
                GPUDYN_CUDA(cudaMemsetAsync(pointers, 0, count * sizeof(void*), s));
                GPUDYN_CUDA(cudaFreeAsync(b.headers, s));
                b.headers = nullptr;
                GPUDYN_CUDA(cudaStreamSynchronize(s));
                raise(GPUDYN_ERROR_OUT_OF_MEMORY,
                      "the backing allocator ran out of memory serving %llu sizes; this batch was rolled back "
                      "(for CUDA malloc, raise options.device_heap_bytes)",
                      (unsigned long long)count);
            }
            heap->batches.push_back(b);
        } catch (...) {
            if (b.headers != nullptr) cudaFreeAsync(b.headers, s);
            throw;
        }
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_release(gpudyn_warp_heap_t heap, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(heap);
        release_batches(heap, to_cuda(stream));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_batch_count(gpudyn_warp_heap_t heap, uint64_t* count) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(heap);
        GPUDYN_REQUIRE_NOT_NULL(count);
        *count = heap->batches.size();
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_get_stats(gpudyn_warp_heap_t heap, gpudyn_warp_heap_stats_t* stats,
                                                      gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(heap);
        GPUDYN_REQUIRE_NOT_NULL(stats);
        cudaStream_t s = to_cuda(stream);
        GPUDYN_CUDA(cudaMemcpyAsync(stats, heap->stats, sizeof(*stats), cudaMemcpyDeviceToHost, s));
        GPUDYN_CUDA(cudaStreamSynchronize(s));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_free_kept(gpudyn_warp_heap_t heap, void* const* headers, uint64_t count,
                                                      gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(heap);
        if (count == 0) return;
        GPUDYN_REQUIRE_NOT_NULL(headers);
        launch_free_kept(heap, headers, count, to_cuda(stream));
    });
}

}  // extern "C"
