// C ABI of the warp heap (FDGMalloc).  The algorithm lives in
// <gpudyn/warp_heap.cuh>, the bulk kernels in
// <gpudyn/detail/warp_heap/kernels.cuh>; this file validates arguments, owns
// the statistics and the arena batches, and launches the kernels.
#include "internal.hpp"

#include <gpudyn/detail/warp_heap/kernels.cuh>
#include <gpudyn/rw_heap.h>
#include <gpudyn/warp_heap.cuh>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

// Defaults from the paper's evaluation (sec. 5.1): 32 KiB superblocks, 16-byte
// minimum block (sec. 3.3), 126 entries per SuperBlock list.
constexpr uint64_t kDefaultSuperblockBytes = 32768;
constexpr uint32_t kDefaultMinBlockBytes = 16;
constexpr uint32_t kDefaultListCapacity = 126;
// Arena defaults: a 512 MiB pool (room for the 1M x 16 B target's 2048 warps
// many times over), a quarter of it for header slots, runs of up to 8
// superblocks (growth 1, 2, 4, 8: at most half of a warp's run sits unused).
constexpr uint64_t kDefaultArenaBytes = 512ull << 20;
constexpr uint64_t kArenaHeaderShare = 4; // header slots fill arena_bytes / 4
constexpr uint32_t kDefaultMaxSuperblockRun = 8;
constexpr uint32_t kMaxSuperblockRun = 32; // one bitmap word
// Chunk slot without superblocks (every warp request is a block of its own).
constexpr uint64_t kNoSuperblockChunkBytes = 4096;
constexpr unsigned kArenaWordBits = 32;
// Slots are counted in 32-bit indices.
constexpr uint64_t kMaxArenaSlots = 1ull << 31;
// Upper bounds that keep a misplaced argument from asking for absurd blocks:
// a minimum block of 1 MiB and a list of 2^20 entries (16 MiB) are far past use.
constexpr uint32_t kMaxMinBlockBytes = 1u << 20;
constexpr uint32_t kMaxListCapacity = 1u << 20;
// Bulk kernels: 8 full warps per block (a multiple of the warp size, so every
// warp of the batch kernel is complete and can start a heap with a full mask).
constexpr unsigned kBulkBlock = 256;
// Sizes each warp of alloc_batch serves at least (16 rounds of 32): a warp's
// header and first superblock then serve many sizes, instead of one header per
// 32 sizes (which would take an arena header slot per 32 sizes).
constexpr uint64_t kBatchSizesPerWarp = 512;

struct batch {
    void** headers; // device array: one kept header per warp of the launch (or NULL)
    uint64_t count;
};

bool is_pow2(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

} // namespace

struct gpudyn_warp_heap_s {
    gpudyn::detail::handle_state hs; // device, call ordering, lock
    gpudyn_warp_heap_view_t view{};
    void* arena = nullptr;          // device: ARENA pool
    unsigned* arena_bits = nullptr; // device: ARENA bitmap
    uint64_t arena_words = 0;
    gpudyn_rw_heap_t page_heap = nullptr;      // PAGE_HEAP: the caller's heap (not owned)
    void* page_heap_view = nullptr;            // device copy of its view
    gpudyn_warp_heap_stats_t* stats = nullptr; // device
    unsigned* failed = nullptr;                // device: alloc_batch's flag; tidy_up_kept's refused
                                               // entries and lowest refused index (2 words)
    std::vector<batch> batches;
    gpudyn::detail::check_marks seen; // failed_allocations and misuse at the last check
};

using namespace gpudyn::detail;

namespace {

// One call on a warp heap: the heap's own ordering and lock (handle_call), and,
// with the PAGE_HEAP backing, the page heap's too: the kernels take and give
// back its pages, so they are ordered with its calls on any stream.
struct warp_heap_call {
    handle_call own;
    std::optional<handle_call> backing;
    warp_heap_call(gpudyn_warp_heap_s* heap, gpudyn_stream_t stream) : own(heap->hs, stream) {
        if (heap->page_heap) backing.emplace(rw_heap_state(heap->page_heap), stream);
    }
    cudaStream_t stream() const { return own.stream(); }
};

void launch_free_kept(gpudyn_warp_heap_s* heap, void* const* headers, uint64_t n, cudaStream_t stream) {
    if (n == 0) return;
    gpudyn::warp_heap_detail::kept_headers_kernel<false>
        <<<grid_for(n, kBulkBlock), kBulkBlock, 0, stream>>>(heap->view, headers, n, nullptr);
    GPUDYN_CHECK_LAUNCH("kept_headers_kernel (free)");
}

void release_batches(gpudyn_warp_heap_s* heap, cudaStream_t stream) {
    while (!heap->batches.empty()) {
        batch b = heap->batches.back();
        launch_free_kept(heap, b.headers, b.count, stream);
        GPUDYN_CUDA(cudaFreeAsync(b.headers, stream));
        heap->batches.pop_back();
    }
}

} // namespace

extern "C" {

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_options_init(gpudyn_warp_heap_options_t* options) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(options);
        *options = gpudyn_warp_heap_options_t{};
        options->struct_size = sizeof(gpudyn_warp_heap_options_t);
        options->backing = GPUDYN_WARP_HEAP_BACKING_ARENA;
        options->superblock_bytes = kDefaultSuperblockBytes;
        options->min_block_bytes = kDefaultMinBlockBytes;
        options->list_capacity = kDefaultListCapacity;
        options->device_heap_bytes = 0;
        options->arena_bytes = kDefaultArenaBytes;
        options->arena_chunk_bytes = 0;
        options->arena_header_slots = 0;
        options->max_superblock_run = kDefaultMaxSuperblockRun;
        options->page_heap = nullptr;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_create(gpudyn_warp_heap_t* heap, const gpudyn_warp_heap_options_t* options,
                                                   gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(heap);
        *heap = nullptr;
        require_struct_size(options, "options");
        const gpudyn_warp_heap_options_t o = *options;
        GPUDYN_REQUIRE(
            o.backing == GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC || o.backing == GPUDYN_WARP_HEAP_BACKING_ARENA ||
                o.backing == GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP,
            "options->backing is %u, expected CUDA_MALLOC (0), ARENA (1) or PAGE_HEAP (2)", unsigned(o.backing));
        GPUDYN_REQUIRE(o.backing != GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP || o.page_heap != nullptr,
                       "options->page_heap is NULL, expected a gpudyn_rw_heap_t for the PAGE_HEAP backing");
        if (o.backing == GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP)
            require_handle(o.page_heap, handle_kind::rw_heap, "options->page_heap");
        GPUDYN_REQUIRE(o.max_superblock_run >= 1 && o.max_superblock_run <= kMaxSuperblockRun,
                       "options->max_superblock_run is %u, expected 1..%u", unsigned(o.max_superblock_run),
                       kMaxSuperblockRun);
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
        // Arena geometry (checked before anything is allocated).
        const uint64_t header_bytes = gpudyn::warp_heap_detail::round_up(
            gpudyn::warp_heap_detail::first_sb_offset(o.list_capacity) + o.superblock_bytes,
            GPUDYN_WARP_HEAP_ALIGNMENT);
        uint64_t chunk_bytes = 0, header_slots = 0, chunk_slots = 0;
        if (o.backing == GPUDYN_WARP_HEAP_BACKING_ARENA) {
            chunk_bytes = o.arena_chunk_bytes != 0  ? o.arena_chunk_bytes
                          : o.superblock_bytes != 0 ? o.superblock_bytes
                                                    : kNoSuperblockChunkBytes;
            GPUDYN_REQUIRE(chunk_bytes % GPUDYN_WARP_HEAP_ALIGNMENT == 0 && chunk_bytes >= o.superblock_bytes,
                           "options->arena_chunk_bytes is %llu, expected 0 or a multiple of 16 of at least "
                           "superblock_bytes (%llu)",
                           (unsigned long long)o.arena_chunk_bytes, (unsigned long long)o.superblock_bytes);
            header_slots =
                o.arena_header_slots != 0 ? o.arena_header_slots : o.arena_bytes / kArenaHeaderShare / header_bytes;
            GPUDYN_REQUIRE(
                header_slots >= 1 && header_slots <= kMaxArenaSlots && header_slots * header_bytes < o.arena_bytes,
                "options->arena_bytes is %llu with arena_header_slots %llu: expected room for at least "
                "one header slot (%llu bytes) and one chunk slot (%llu bytes)",
                (unsigned long long)o.arena_bytes, (unsigned long long)o.arena_header_slots,
                (unsigned long long)header_bytes, (unsigned long long)chunk_bytes);
            chunk_slots = (o.arena_bytes - header_slots * header_bytes) / chunk_bytes;
            if (chunk_slots > kMaxArenaSlots) chunk_slots = kMaxArenaSlots;
            GPUDYN_REQUIRE(chunk_slots >= 1,
                           "options->arena_bytes is %llu: no room for a chunk slot (%llu bytes) after %llu header "
                           "slots of %llu bytes",
                           (unsigned long long)o.arena_bytes, (unsigned long long)chunk_bytes,
                           (unsigned long long)header_slots, (unsigned long long)header_bytes);
        }
        cudaStream_t s = to_cuda(stream);
        const int device = create_device(s); // the stream's device, else the current one
        device_guard on_device(device);
        if (o.backing == GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP) {
            const int page_device = rw_heap_state(static_cast<gpudyn_rw_heap_t>(o.page_heap)).device;
            GPUDYN_REQUIRE(page_device == device,
                           "options->page_heap lives on device %d, but the warp heap is created on device %d",
                           page_device, device);
        }
        raise_device_malloc_heap(o.device_heap_bytes, "options->device_heap_bytes");
        auto* h = new gpudyn_warp_heap_s();
        if (o.backing == GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP) {
            // First: from here the page heap refuses destroy (undone below on failure).
            h->page_heap = static_cast<gpudyn_rw_heap_t>(o.page_heap);
            rw_heap_add_backing_user(h->page_heap, +1);
        }
        try {
            h->hs.init();
            device_alloc(reinterpret_cast<void**>(&h->stats), sizeof(gpudyn_warp_heap_stats_t), s, "the statistics");
            GPUDYN_CUDA(cudaMemsetAsync(h->stats, 0, sizeof(gpudyn_warp_heap_stats_t), s));
            device_alloc(reinterpret_cast<void**>(&h->failed), 2 * sizeof(unsigned), s, "the failure flags");
            h->view.version = GPUDYN_WARP_HEAP_VIEW_VERSION;
            h->view.backing = o.backing;
            h->view.superblock_bytes = uint32_t(o.superblock_bytes);
            h->view.min_block_bytes = o.min_block_bytes;
            h->view.list_capacity = o.list_capacity;
            h->view.stats = h->stats;
            h->view.max_superblock_run = o.backing == GPUDYN_WARP_HEAP_BACKING_ARENA ? o.max_superblock_run : 1u;
            if (o.backing == GPUDYN_WARP_HEAP_BACKING_ARENA) {
                const uint64_t header_words = (header_slots + kArenaWordBits - 1) / kArenaWordBits;
                const uint64_t chunk_words = (chunk_slots + kArenaWordBits - 1) / kArenaWordBits;
                h->arena_words = header_words + chunk_words;
                const uint64_t pool = header_slots * header_bytes + chunk_slots * chunk_bytes;
                char what[96];
                std::snprintf(what, sizeof(what), "options->arena_bytes is %llu", (unsigned long long)o.arena_bytes);
                device_alloc(&h->arena, pool, s, what);
                // All slots free; the bits past the last slot of each part are set for good.
                std::vector<unsigned> bits(h->arena_words, 0u);
                if (header_slots % kArenaWordBits) bits[header_words - 1] = ~0u << (header_slots % kArenaWordBits);
                if (chunk_slots % kArenaWordBits) bits[h->arena_words - 1] = ~0u << (chunk_slots % kArenaWordBits);
                device_alloc(reinterpret_cast<void**>(&h->arena_bits), h->arena_words * 4, s, "the arena bitmap");
                GPUDYN_CUDA(cudaMemcpyAsync(h->arena_bits, bits.data(), h->arena_words * 4, cudaMemcpyHostToDevice, s));
                GPUDYN_CUDA(cudaStreamSynchronize(s)); // `bits` is a host temporary
                h->view.arena_base = h->arena;
                h->view.arena_bitmap = h->arena_bits;
                h->view.arena_header_bytes = header_bytes;
                h->view.arena_chunk_bytes = chunk_bytes;
                h->view.arena_header_slots = uint32_t(header_slots);
                h->view.arena_chunk_slots = uint32_t(chunk_slots);
            }
            if (o.backing == GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP) {
                gpudyn_rw_heap_view_t pv;
                if (gpudyn_rw_heap_get_view(h->page_heap, &pv) != GPUDYN_SUCCESS) {
                    const std::string why = gpudyn_last_error_message();
                    raise(GPUDYN_ERROR_INVALID_ARGUMENT, "options->page_heap: %s", why.c_str());
                }
                device_alloc(&h->page_heap_view, sizeof(pv), s, "the page heap's view");
                GPUDYN_CUDA(cudaMemcpyAsync(h->page_heap_view, &pv, sizeof(pv), cudaMemcpyHostToDevice, s));
                GPUDYN_CUDA(cudaStreamSynchronize(s)); // `pv` is a host temporary
                h->view.page_heap = h->page_heap_view;
            }
            // Launched once with no work (see preload_kernels): these kernels can call CUDA's
            // device malloc (a backing), and the first launch of such a kernel also sets up
            // that heap, which waits for every stream's work as a kernel load does.
            gpudyn::warp_heap_detail::alloc_batch_kernel<<<1, kBulkBlock, 0, s>>>(h->view, nullptr, 0, nullptr, nullptr,
                                                                                  nullptr);
            gpudyn::warp_heap_detail::kept_headers_kernel<false><<<1, kBulkBlock, 0, s>>>(h->view, nullptr, 0, nullptr);
            gpudyn::warp_heap_detail::kept_headers_kernel<true><<<1, kBulkBlock, 0, s>>>(h->view, nullptr, 0, nullptr);
            GPUDYN_CHECK_LAUNCH("the warp heap's kernels (no work)");
            GPUDYN_CUDA(cudaEventRecord(h->hs.done, s));
            register_handle(h, handle_kind::warp_heap);
        } catch (...) {
            if (h->stats) cudaFreeAsync(h->stats, s);
            if (h->failed) cudaFreeAsync(h->failed, s);
            if (h->arena) cudaFreeAsync(h->arena, s);
            if (h->arena_bits) cudaFreeAsync(h->arena_bits, s);
            if (h->page_heap_view) cudaFreeAsync(h->page_heap_view, s);
            if (h->page_heap) rw_heap_add_backing_user(h->page_heap, -1);
            h->hs.release();
            delete h;
            throw;
        }
        *heap = h;
    });
}

// Frees the kept headers (a kernel) and the heap's memory stream-ordered after
// its last call, on the library's stream of its device (no synchronization).
// A failure leaves the handle owning what it still holds: call destroy again.
GPUDYN_API gpudyn_status_t gpudyn_warp_heap_destroy(gpudyn_warp_heap_t heap) {
    GPUDYN_ABI_RELEASE({
        if (heap == nullptr) return;
        require_handle(heap, handle_kind::warp_heap, "heap"); // destroyed, foreign, garbage: refused
        {
            handle_call call(heap->hs);
            cudaStream_t s = heap->hs.release_stream();
            {
                // The kept headers go back to the page heap: ordered with its calls.
                std::optional<handle_call> backing;
                if (heap->page_heap)
                    backing.emplace(rw_heap_state(heap->page_heap), reinterpret_cast<gpudyn_stream_t>(s));
                release_batches(heap, s);
            }
            void** ptrs[] = {reinterpret_cast<void**>(&heap->stats), reinterpret_cast<void**>(&heap->failed),
                             &heap->arena, reinterpret_cast<void**>(&heap->arena_bits), &heap->page_heap_view};
            for (void** p : ptrs) {
                if (*p) GPUDYN_CUDA(cudaFreeAsync(*p, s));
                *p = nullptr;
            }
        }
        if (heap->page_heap) rw_heap_add_backing_user(heap->page_heap, -1);
        heap->hs.release();
        unregister_handle(heap);
        delete heap;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_get_view(gpudyn_warp_heap_t heap, gpudyn_warp_heap_view_t* view) {
    GPUDYN_ABI({
        require_handle(heap, handle_kind::warp_heap, "heap");
        GPUDYN_REQUIRE_NOT_NULL(view);
        handle_call call(heap->hs);
        *view = heap->view;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_alloc_batch(gpudyn_warp_heap_t heap, const uint64_t* sizes, uint64_t count,
                                                        void** pointers, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(heap, handle_kind::warp_heap, "heap");
        if (count == 0) return;
        GPUDYN_REQUIRE_NOT_NULL(sizes);
        GPUDYN_REQUIRE_NOT_NULL(pointers);
        buffer_bytes(count, sizeof(uint64_t), "count", "sizes");
        warp_heap_call call(heap, stream);
        require_device_array(heap->hs.device, sizes, count, "sizes", "count");
        require_device_array(heap->hs.device, pointers, count, "pointers", "count");
        cudaStream_t s = call.stream();
        const uint64_t want_warps = (count + kBatchSizesPerWarp - 1) / kBatchSizesPerWarp;
        const unsigned grid =
            std::min(grid_for(count, kBulkBlock), unsigned((want_warps * kWarpLanes + kBulkBlock - 1) / kBulkBlock));
        const uint64_t warps = uint64_t(grid) * kBulkBlock / kWarpLanes;
        batch b{nullptr, warps};
        GPUDYN_CUDA(cudaMallocAsync(reinterpret_cast<void**>(&b.headers), warps * sizeof(void*), s));
        try {
            GPUDYN_CUDA(cudaMemsetAsync(b.headers, 0, warps * sizeof(void*), s));
            GPUDYN_CUDA(cudaMemsetAsync(heap->failed, 0, sizeof(unsigned), s));
            gpudyn::warp_heap_detail::alloc_batch_kernel<<<grid, kBulkBlock, 0, s>>>(heap->view, sizes, count, pointers,
                                                                                     b.headers, heap->failed);
            GPUDYN_CHECK_LAUNCH("alloc_batch_kernel");
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
        require_handle(heap, handle_kind::warp_heap, "heap");
        warp_heap_call call(heap, stream);
        release_batches(heap, call.stream());
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_batch_count(gpudyn_warp_heap_t heap, uint64_t* count) {
    GPUDYN_ABI({
        require_handle(heap, handle_kind::warp_heap, "heap");
        GPUDYN_REQUIRE_NOT_NULL(count);
        handle_call call(heap->hs);
        *count = heap->batches.size();
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_get_stats(gpudyn_warp_heap_t heap, gpudyn_warp_heap_stats_t* stats,
                                                      gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(heap, handle_kind::warp_heap, "heap");
        GPUDYN_REQUIRE_NOT_NULL(stats);
        handle_call call(heap->hs, stream);
        cudaStream_t s = call.stream();
        GPUDYN_CUDA(cudaMemcpyAsync(stats, heap->stats, sizeof(*stats), cudaMemcpyDeviceToHost, s));
        GPUDYN_CUDA(cudaStreamSynchronize(s));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_check(gpudyn_warp_heap_t heap, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(heap, handle_kind::warp_heap, "heap");
        handle_call call(heap->hs, stream);
        cudaStream_t s = call.stream();
        gpudyn_warp_heap_stats_t st{};
        GPUDYN_CUDA(cudaMemcpyAsync(&st, heap->stats, sizeof(st), cudaMemcpyDeviceToHost, s));
        GPUDYN_CUDA(cudaStreamSynchronize(s));
        report_since_check(st.failed_allocations, st.misuse, &heap->seen, "lane(s) got NULL for want of memory",
                           "contract violation(s) (see warp_heap.cuh)", "; its backing allocator had no more memory");
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_backing_free_bytes(gpudyn_warp_heap_t heap, uint64_t* bytes,
                                                               gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(heap, handle_kind::warp_heap, "heap");
        GPUDYN_REQUIRE_NOT_NULL(bytes);
        *bytes = 0;
        handle_call call(heap->hs, stream); // the page heap's own call orders itself
        cudaStream_t s = call.stream();
        const gpudyn_warp_heap_view_t& v = heap->view;
        if (v.backing == GPUDYN_WARP_HEAP_BACKING_ARENA) {
            std::vector<unsigned> bits(heap->arena_words);
            GPUDYN_CUDA(
                cudaMemcpyAsync(bits.data(), heap->arena_bits, heap->arena_words * 4, cudaMemcpyDeviceToHost, s));
            GPUDYN_CUDA(cudaStreamSynchronize(s));
            const uint64_t header_words = (uint64_t(v.arena_header_slots) + kArenaWordBits - 1) / kArenaWordBits;
            uint64_t free_headers = 0, free_chunks = 0;
            for (uint64_t w = 0; w < heap->arena_words; ++w)
                (w < header_words ? free_headers : free_chunks) += uint64_t(__builtin_popcount(~bits[w]));
            *bytes = free_headers * v.arena_header_bytes + free_chunks * v.arena_chunk_bytes;
        } else if (v.backing == GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP) {
            gpudyn_rw_heap_info_t info{};
            info.struct_size = sizeof(info);
            const gpudyn_status_t st = gpudyn_rw_heap_get_info(heap->page_heap, &info, stream);
            if (st != GPUDYN_SUCCESS) {
                const std::string why = gpudyn_last_error_message();
                raise(st, "page heap: %s", why.c_str());
            }
            *bytes = info.free_pages * info.page_size;
        } else {
            raise(GPUDYN_ERROR_NOT_SUPPORTED,
                  "the CUDA_MALLOC backing cannot report its free memory (CUDA has no query for the device heap)");
        }
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_free_kept(gpudyn_warp_heap_t heap, void* const* headers, uint64_t count,
                                                      gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(heap, handle_kind::warp_heap, "heap");
        if (count == 0) return;
        GPUDYN_REQUIRE_NOT_NULL(headers);
        buffer_bytes(count, sizeof(void*), "count", "headers");
        warp_heap_call call(heap, stream);
        require_device_array(heap->hs.device, headers, count, "headers", "count");
        launch_free_kept(heap, headers, count, call.stream());
    });
}

GPUDYN_API gpudyn_status_t gpudyn_warp_heap_tidy_up_kept(gpudyn_warp_heap_t heap, void* const* headers, uint64_t count,
                                                         gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(heap, handle_kind::warp_heap, "heap");
        if (count == 0) return;
        GPUDYN_REQUIRE_NOT_NULL(headers);
        buffer_bytes(count, sizeof(void*), "count", "headers");
        warp_heap_call call(heap, stream);
        require_device_array(heap->hs.device, headers, count, "headers", "count");
        cudaStream_t s = call.stream();
        // refused[0]: entries that cannot be a header of this heap; refused[1]: the lowest such index.
        const unsigned init[2] = {0u, 0xffffffffu};
        GPUDYN_CUDA(cudaMemcpyAsync(heap->failed, init, sizeof(init), cudaMemcpyHostToDevice, s));
        gpudyn::warp_heap_detail::kept_headers_kernel<true>
            <<<grid_for(count, kBulkBlock), kBulkBlock, 0, s>>>(heap->view, headers, count, heap->failed);
        GPUDYN_CHECK_LAUNCH("kept_headers_kernel (tidy up)");
        unsigned refused[2] = {0u, 0u};
        GPUDYN_CUDA(cudaMemcpyAsync(refused, heap->failed, sizeof(refused), cudaMemcpyDeviceToHost, s));
        GPUDYN_CUDA(cudaStreamSynchronize(s)); // `init` and `refused` are host temporaries
        if (refused[0] != 0)
            raise(GPUDYN_ERROR_INVALID_ARGUMENT,
                  "argument 'headers': %u of %llu entries are not warp headers of this heap (the first at index "
                  "%u); they were skipped, the others tidied up",
                  refused[0], (unsigned long long)count, refused[1]);
    });
}

} // extern "C"
