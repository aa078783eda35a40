// C ABI of the device allocator (heap): reserves the virtual range and maps
// physical memory into it (vmm_range: the driver's VMM calls through
// driver_entry_point), owns the metadata, and launches the bulk kernels of
// include/gpudyn/detail/heap/kernels.cuh (no second copy of an algorithm
// lives here).
#include "array_common.cuh" // vmm_range

#include <gpudyn/detail/heap/kernels.cuh>
#include <gpudyn/heap.cuh>

#include <algorithm>
#include <cstring>
#include <vector>

using namespace gpudyn;
using namespace gpudyn::detail;
using namespace gpudyn::heap_detail; // the bulk kernels

namespace {

// Defaults (gpudyn_heap_options_init / create): 64 KiB pages (a 16-byte slab
// page holds 4096 slots, 64 bitmap words: one word per draw serves a warp),
// 1 GiB mapped, 8x that reserved.
constexpr uint64_t kDefaultPageSize = uint64_t(1) << 16;
constexpr uint64_t kDefaultInitialBytes = uint64_t(1) << 30;
constexpr uint64_t kDefaultMaxFactor = 8;
// Page ids are 32-bit with 0xFFFFFFFF reserved (kHeapNoPage).
constexpr uint64_t kMaxPages = uint64_t(1) << 31;
// Rounds of a medium-run search (rw_heap's RW_malloc region draws) and random
// steps of a slab's page walk before its sweep.
constexpr uint32_t kMaxRandomSteps = 256;
// Bulk kernels: 8 warps a block (the calls are latency bound).
constexpr unsigned kBlock = 256;
// Metadata arrays start at multiples of this (a cache line pair).
constexpr uint64_t kMetaAlign = 256;

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

} // namespace

struct gpudyn_heap_s {
    handle_state hs; // device, call ordering, lock
    bool vmm = false;
    vmm_range range;       // VMM backing
    void* plain = nullptr; // cudaMalloc backing without VMM
    uint64_t page_size = 0;
    unsigned page_shift = 0;
    uint64_t max_pages = 0;    // pages of the reserved range
    uint64_t mapped_pages = 0; // host copy of the device count
    uint64_t words = 0;        // page bitmap words (max_pages / 64, rounded up)
    uint64_t dir_entries = 0;
    unsigned class_count = 0;
    std::vector<heap_class> classes;
    void* meta = nullptr; // every metadata array, one allocation
    uint64_t meta_bytes = 0;
    unsigned long long* scratch = nullptr;
    gpudyn_heap_view_t view{};
    uint32_t users = 0;         // GGArrays taking their buckets from this heap (under hs.mutex)
    uint32_t arena_holders = 0; // of them, those holding a run of it as their growth arena (under hs.mutex)
    check_marks seen;           // the counters at the last gpudyn_heap_check (zeroed with them)

    void* at(uint64_t address) const { return reinterpret_cast<void*>(address); }
    // rw_heap's live-start bits: one per kRwMallocAlign bytes of the range, in uint32 words.
    uint64_t run_starts_bytes() const { return (max_pages * page_size / kRwMallocAlign + 31) / 32 * sizeof(uint32_t); }

    // Every mapped page free, no slab attached, counters zero.  Stream-ordered.
    void clear(cudaStream_t s) {
        GPUDYN_CUDA(cudaMemsetAsync(at(view.page_bitmap), 0xff, words * sizeof(uint64_t), s));
        GPUDYN_CUDA(cudaMemsetAsync(at(view.run_meta), 0, max_pages * sizeof(uint32_t), s));
        GPUDYN_CUDA(cudaMemsetAsync(at(view.run_starts), 0, run_starts_bytes(), s));
        GPUDYN_CUDA(cudaMemsetAsync(at(view.slab_meta), 0, max_pages * sizeof(uint32_t), s));
        GPUDYN_CUDA(cudaMemsetAsync(at(view.class_state), 0, class_count * kHeapClassStateWords * sizeof(uint32_t), s));
        GPUDYN_CUDA(cudaMemsetAsync(at(view.directory), 0xff, dir_entries * sizeof(uint32_t), s));
        GPUDYN_CUDA(cudaMemsetAsync(at(view.counters), 0, kHeapCounterCount * sizeof(uint64_t), s));
        seen = {};
        map_pages(0, mapped_pages, s);
    }

    void map_pages(uint64_t from, uint64_t to, cudaStream_t s) {
        const uint64_t first = from / 64, end = (to + 63) / 64;
        map_pages_kernel<<<grid_for(end > first ? end - first : 1, kBlock), kBlock, 0, s>>>(
            static_cast<unsigned long long*>(at(view.page_bitmap)), unsigned(from), unsigned(to),
            static_cast<unsigned*>(at(view.mapped_pages)));
        GPUDYN_CHECK_LAUNCH("map_pages_kernel");
    }

    // Frees everything, stream-ordered on s; the mapping (not stream-ordered)
    // after the handle's last call has finished.
    void release(cudaStream_t s) {
        for (void** p : {&meta, reinterpret_cast<void**>(&scratch), &plain}) {
            if (*p) GPUDYN_CUDA(cudaFreeAsync(*p, s));
            *p = nullptr;
        }
        if (vmm) {
            GPUDYN_CUDA(cudaEventSynchronize(hs.done));
            range.release();
        }
    }
};

namespace {

void require_heap(gpudyn_heap_t heap) { require_handle(heap, handle_kind::heap, "heap"); }

// Lays out the metadata of h (sizes in h set) and fills the view's addresses.
void allocate_meta(gpudyn_heap_s* h, cudaStream_t s) {
    uint64_t off = 0;
    auto take = [&](uint64_t bytes) {
        uint64_t at = off;
        off = align_up(off + bytes, kMetaAlign);
        return at;
    };
    const uint64_t o_bitmap = take(h->words * sizeof(uint64_t));
    const uint64_t o_run = take(h->max_pages * sizeof(uint32_t));
    const uint64_t o_starts = take(h->run_starts_bytes());
    const uint64_t o_slab = take(h->max_pages * sizeof(uint32_t));
    const uint64_t o_slots = take((h->max_pages << (h->page_shift - kHeapSlotWordShift)) * sizeof(uint64_t));
    const uint64_t o_table = take(h->class_count * sizeof(heap_class));
    const uint64_t o_state = take(h->class_count * kHeapClassStateWords * sizeof(uint32_t));
    const uint64_t o_dir = take(h->dir_entries * sizeof(uint32_t));
    const uint64_t o_mapped = take(sizeof(uint64_t));
    // The counters, then the heap's own view (heap.cuh's heap_descriptor).
    const uint64_t o_counters = take(kHeapCounterCount * sizeof(uint64_t) + sizeof(gpudyn_heap_view_t));
    h->meta_bytes = off;
    device_alloc(&h->meta, off, s, "the heap's metadata (sized for options->max_bytes)");
    const uint64_t m = reinterpret_cast<uint64_t>(h->meta);
    auto& v = h->view;
    v.page_bitmap = m + o_bitmap;
    v.run_meta = m + o_run;
    v.run_starts = m + o_starts;
    v.slab_meta = m + o_slab;
    v.slot_bitmap = m + o_slots;
    v.class_table = m + o_table;
    v.class_state = m + o_state;
    v.directory = m + o_dir;
    v.mapped_pages = m + o_mapped;
    v.counters = m + o_counters;
}

} // namespace

namespace gpudyn::detail {

void heap_resolve_sizes(uint64_t page_size, uint64_t* initial_bytes, uint64_t* max_bytes) {
    const uint64_t P = page_size == 0 ? kDefaultPageSize : page_size;
    size_t free_b = 0, total_b = 0;
    GPUDYN_CUDA(cudaMemGetInfo(&free_b, &total_b));
    uint64_t initial = *initial_bytes;
    if (initial == 0) {
        initial = std::max<uint64_t>(P, std::min<uint64_t>(kDefaultInitialBytes, free_b / 2) / P * P);
        // The default never exceeds a given max (callers require max >= P).
        if (*max_bytes != 0) initial = std::max<uint64_t>(P, std::min<uint64_t>(initial, *max_bytes / P * P));
    }
    uint64_t max = *max_bytes;
    if (max == 0) max = std::max<uint64_t>(initial, std::min<uint64_t>(initial * kDefaultMaxFactor, total_b));
    *initial_bytes = initial;
    *max_bytes = std::min<uint64_t>(max, kMaxPages * P);
}

handle_state& heap_state(gpudyn_heap_t heap) { return heap->hs; }

void heap_add_user(gpudyn_heap_t heap, int delta) {
    std::lock_guard<std::mutex> lock(heap->hs.mutex);
    heap->users = uint32_t(int64_t(heap->users) + delta);
}

uint32_t heap_arena_share(gpudyn_heap_t heap, int holder_delta) {
    std::lock_guard<std::mutex> lock(heap->hs.mutex);
    const uint32_t without = heap->users > heap->arena_holders ? heap->users - heap->arena_holders : 0u;
    heap->arena_holders = uint32_t(int64_t(heap->arena_holders) + holder_delta);
    return without;
}

void heap_sizes(gpudyn_heap_t heap, uint64_t* mapped_bytes, uint64_t* max_bytes) {
    std::lock_guard<std::mutex> lock(heap->hs.mutex);
    *mapped_bytes = heap->mapped_pages * heap->page_size;
    *max_bytes = heap->max_pages * heap->page_size;
}

} // namespace gpudyn::detail

extern "C" {

GPUDYN_API gpudyn_status_t gpudyn_heap_options_init(gpudyn_heap_options_t* options) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(options);
        std::memset(options, 0, sizeof(*options));
        options->struct_size = sizeof(*options);
        options->initial_bytes = 0;
        options->max_bytes = 0;
        options->page_size = kDefaultPageSize;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_heap_create(gpudyn_heap_t* heap, const gpudyn_heap_options_t* options,
                                              gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(heap);
        *heap = nullptr;
        require_struct_size(options, "options");
        const auto& o = *options;
        GPUDYN_REQUIRE(o.reserved == 0, "options->reserved is %u, expected 0", unsigned(o.reserved));
        const uint64_t P = o.page_size;
        GPUDYN_REQUIRE(
            P >= (uint64_t(1) << kHeapMinPageShift) && P <= (uint64_t(1) << kHeapMaxPageShift) && (P & (P - 1)) == 0,
            "options->page_size is %llu, expected a power of two from 4096 to 2097152", (unsigned long long)P);
        GPUDYN_REQUIRE(o.initial_bytes == 0 || o.initial_bytes >= P,
                       "options->initial_bytes is %llu, expected 0 (default) or >= page_size (%llu)",
                       (unsigned long long)o.initial_bytes, (unsigned long long)P);
        GPUDYN_REQUIRE(o.max_bytes == 0 || o.max_bytes >= P,
                       "options->max_bytes is %llu, expected 0 (default) or >= page_size (%llu)",
                       (unsigned long long)o.max_bytes, (unsigned long long)P);
        GPUDYN_REQUIRE(o.max_bytes == 0 || o.initial_bytes <= o.max_bytes,
                       "options->max_bytes is %llu, expected 0 (default) or >= initial_bytes (%llu)",
                       (unsigned long long)o.max_bytes, (unsigned long long)o.initial_bytes);
        GPUDYN_REQUIRE(
            o.initial_bytes / P <= kMaxPages,
            "options->initial_bytes / page_size is more than 2^31 pages (initial_bytes %llu, page_size %llu)",
            (unsigned long long)o.initial_bytes, (unsigned long long)P);
        GPUDYN_REQUIRE(o.max_bytes / P <= kMaxPages,
                       "options->max_bytes / page_size is more than 2^31 pages (max_bytes %llu, page_size %llu)",
                       (unsigned long long)o.max_bytes, (unsigned long long)P);
        cudaStream_t s = to_cuda(stream);
        const int device = create_device(s); // the stream's device, else the current one
        device_guard on_device(device);
        uint64_t initial = o.initial_bytes, max_bytes = o.max_bytes;
        heap_resolve_sizes(P, &initial, &max_bytes);

        auto* h = new gpudyn_heap_s;
        h->page_size = P;
        h->page_shift = unsigned(__builtin_ctzll(P));
        try {
            h->hs.init();
            uint64_t base = 0, mapped = 0, reserved = 0;
            if (vmm_supported(device)) {
                h->vmm = true;
                h->range.reserve(device, max_bytes, "options->max_bytes");
                if (h->range.base % P != 0)
                    raise(GPUDYN_ERROR_INTERNAL, "reserved range at %llx is not aligned to the page size %llu",
                          (unsigned long long)h->range.base, (unsigned long long)P);
                h->range.map_to(initial);
                base = h->range.base;
                reserved = h->range.reserved;
                mapped = h->range.mapped;
            } else {
                // One plain allocation, aligned up to a page (2^k requests are 2^k-aligned from the base).
                device_alloc(&h->plain, initial + P, s, "options->initial_bytes");
                base = align_up(reinterpret_cast<uint64_t>(h->plain), P);
                reserved = mapped = initial / P * P;
            }
            // The range is reserved (and mapped) in whole granules; pages past max_bytes stay unused,
            // so bytes_max is never more than asked.
            h->max_pages = std::min<uint64_t>(std::min<uint64_t>(reserved, max_bytes) / P, kMaxPages);
            h->mapped_pages = std::min<uint64_t>(mapped / P, h->max_pages);
            h->words = (h->max_pages + 63) / 64;
            h->class_count = heap_class_count(h->page_shift);
            uint64_t dir = 0;
            for (unsigned c = 0; c < h->class_count; ++c) {
                heap_class k = heap_class_geometry(c, h->page_shift, h->max_pages);
                k.dir_offset = unsigned(dir);
                dir += h->max_pages / k.slab_pages;
                if (dir > 0xffffffffull)
                    raise(GPUDYN_ERROR_INVALID_ARGUMENT,
                          "options->max_bytes (%llu) is too large for page_size %llu (class directories exceed 2^32 "
                          "entries); use larger pages",
                          (unsigned long long)max_bytes, (unsigned long long)P);
                h->classes.push_back(k);
            }
            h->dir_entries = dir;
            auto& v = h->view;
            v.version = GPUDYN_HEAP_VIEW_VERSION;
            v.page_shift = h->page_shift;
            v.base = base;
            v.class_count = h->class_count;
            v.max_pages = uint32_t(h->max_pages);
            v.max_random_steps = kMaxRandomSteps;
            allocate_meta(h, s);
            device_alloc(reinterpret_cast<void**>(&h->scratch), kScratchCount * sizeof(uint64_t), s,
                         "the scratch counters");
            GPUDYN_CUDA(cudaMemcpyAsync(h->at(v.class_table), h->classes.data(), h->classes.size() * sizeof(heap_class),
                                        cudaMemcpyHostToDevice, s));
            // The descriptor: the view, complete now and never changed after.
            GPUDYN_CUDA(cudaMemcpyAsync(h->at(v.counters + kHeapCounterCount * sizeof(uint64_t)), &v, sizeof v,
                                        cudaMemcpyHostToDevice, s));
            h->clear(s);
            using View = decltype(h->view);
            preload_kernels(&malloc_kernel<View>, &free_kernel<View>, &stats_kernel<View>);
            // Every later call waits for this one through the heap's event.
            GPUDYN_CUDA(cudaEventRecord(h->hs.done, s));
            register_handle(h, handle_kind::heap);
        } catch (...) {
            try {
                h->release(s);
            } catch (...) {}
            h->hs.release();
            delete h;
            throw;
        }
        *heap = h;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_heap_destroy(gpudyn_heap_t heap) {
    GPUDYN_ABI_RELEASE({
        if (heap == nullptr) return;
        require_heap(heap); // a destroyed, foreign or garbage handle is refused, not dereferenced
        {
            handle_call call(heap->hs);
            GPUDYN_REQUIRE(heap->users == 0, "argument 'heap' holds the buckets of %u GGArray(s); destroy them first",
                           unsigned(heap->users));
            heap->release(heap->hs.release_stream());
        }
        heap->hs.release();
        unregister_handle(heap);
        delete heap;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_heap_get_view(gpudyn_heap_t heap, gpudyn_heap_view_t* view) {
    GPUDYN_ABI({
        require_heap(heap);
        GPUDYN_REQUIRE_NOT_NULL(view);
        handle_call call(heap->hs);
        *view = heap->view;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_heap_grow(gpudyn_heap_t heap, uint64_t new_mapped_bytes, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        const uint64_t max_bytes = heap->max_pages * heap->page_size;
        if (!heap->vmm && new_mapped_bytes > heap->mapped_pages * heap->page_size)
            raise(GPUDYN_ERROR_NOT_SUPPORTED, "the heap's device has no virtual memory management: it cannot grow");
        GPUDYN_REQUIRE(new_mapped_bytes <= max_bytes,
                       "argument 'new_mapped_bytes' is %llu, more than the heap's bytes_max (%llu)",
                       (unsigned long long)new_mapped_bytes, (unsigned long long)max_bytes);
        handle_call call(heap->hs, stream);
        if (new_mapped_bytes <= heap->mapped_pages * heap->page_size) return;
        heap->range.map_to(new_mapped_bytes); // OUT_OF_MEMORY leaves everything as it was
        const uint64_t pages = std::min<uint64_t>(heap->range.mapped / heap->page_size, heap->max_pages);
        heap->map_pages(heap->mapped_pages, pages, call.stream());
        heap->mapped_pages = pages;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_heap_get_stats(gpudyn_heap_t heap, gpudyn_heap_stats_t* stats,
                                                 gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        require_struct_size(stats, "stats");
        handle_call call(heap->hs, stream);
        cudaStream_t s = call.stream();
        const uint64_t pages = heap->mapped_pages;
        GPUDYN_CUDA(cudaMemsetAsync(heap->scratch, 0, kScratchCount * sizeof(uint64_t), s));
        stats_kernel<<<grid_for(pages, kBlock), kBlock, 0, s>>>(heap->view, unsigned(pages), heap->scratch);
        GPUDYN_CHECK_LAUNCH("stats_kernel");
        unsigned long long sc[kScratchCount];
        unsigned long long counters[kHeapCounterCount];
        std::vector<uint64_t> bits((pages + 63) / 64);
        GPUDYN_CUDA(cudaMemcpyAsync(bits.data(), heap->at(heap->view.page_bitmap), bits.size() * sizeof(uint64_t),
                                    cudaMemcpyDeviceToHost, s));
        GPUDYN_CUDA(
            cudaMemcpyAsync(counters, heap->at(heap->view.counters), sizeof(counters), cudaMemcpyDeviceToHost, s));
        GPUDYN_CUDA(cudaMemcpyAsync(sc, heap->scratch, sizeof(sc), cudaMemcpyDeviceToHost, s));
        GPUDYN_CUDA(cudaStreamSynchronize(s));
        // Held pages, the longest free run of pages and of all-free words.
        uint64_t held = 0, run = 0, longest = 0, zrun = 0, zlongest = 0;
        for (uint64_t w = 0; w < bits.size(); ++w) {
            uint64_t word = bits[w];
            const uint64_t valid = pages - w * 64 >= 64 ? 64 : pages - w * 64;
            if (valid < 64) word &= (uint64_t(1) << valid) - 1; // unmapped pages are not held
            held += uint64_t(__builtin_popcountll(word));
            for (uint64_t b = 0; b < valid; ++b) {
                if ((word >> b) & 1) {
                    run = 0;
                } else {
                    longest = std::max(longest, ++run);
                }
            }
            zrun = (valid == 64 && word == 0) ? zrun + 1 : 0;
            zlongest = std::max(zlongest, zrun);
        }
        // What each path can serve (see heap.cuh): a medium run lies in one region of
        // kRwRegionWords words (any run up to a region less one word fits), a huge one
        // needs all-free words.
        const uint64_t medium_max = uint64_t(kRwRegionWords) * 64;
        const uint64_t medium_pages = std::min(longest, medium_max - 63);
        const uint64_t huge_pages = zlongest * 64 > medium_max ? zlongest * 64 : 0;
        const uint64_t P = heap->page_size;
        clear_out_struct(stats);
        stats->bytes_mapped = pages * P;
        stats->bytes_max = heap->max_pages * P;
        stats->bytes_held = held * P;
        stats->bytes_allocated = sc[kScratchBytes];
        stats->allocations = sc[kScratchAllocs];
        stats->failed_allocations = counters[kHeapCounterFailed];
        stats->bad_frees = counters[kHeapCounterBadFree];
        stats->largest_free_bytes = std::max({medium_pages * P, huge_pages * P, uint64_t(sc[kScratchLargestSlot])});
    });
}

GPUDYN_API gpudyn_status_t gpudyn_heap_clear_status(gpudyn_heap_t heap, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        handle_call call(heap->hs, stream);
        GPUDYN_CUDA(
            cudaMemsetAsync(heap->at(heap->view.counters), 0, kHeapCounterCount * sizeof(uint64_t), call.stream()));
        heap->seen = {};
    });
}

GPUDYN_API gpudyn_status_t gpudyn_heap_check(gpudyn_heap_t heap, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        handle_call call(heap->hs, stream);
        cudaStream_t s = call.stream();
        static_assert(kHeapCounterFailed < 2 && kHeapCounterBadFree < 2, "the first two counters");
        unsigned long long c[2];
        GPUDYN_CUDA(cudaMemcpyAsync(c, heap->at(heap->view.counters), sizeof(c), cudaMemcpyDeviceToHost, s));
        GPUDYN_CUDA(cudaStreamSynchronize(s));
        char hint[160];
        snprintf(hint, sizeof(hint), "; the heap maps %llu of at most %llu bytes (gpudyn_heap_grow maps more)",
                 (unsigned long long)(heap->mapped_pages * heap->page_size),
                 (unsigned long long)(heap->max_pages * heap->page_size));
        report_since_check(c[kHeapCounterFailed], c[kHeapCounterBadFree], &heap->seen,
                           "malloc request(s) found no memory", "bad free(s)", hint);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_heap_malloc(gpudyn_heap_t heap, const uint64_t* sizes, uint64_t* pointers, uint64_t n,
                                              gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        if (n == 0) return;
        GPUDYN_REQUIRE_NOT_NULL(sizes);
        GPUDYN_REQUIRE_NOT_NULL(pointers);
        buffer_bytes(n, sizeof(uint64_t), "n", "sizes"); // n x 8 bytes cannot wrap (the rollback's memset below)
        handle_call call(heap->hs, stream);
        require_device_array(heap->hs.device, sizes, n, "sizes", "n");
        require_device_array(heap->hs.device, pointers, n, "pointers", "n");
        cudaStream_t s = call.stream();
        auto* out = reinterpret_cast<unsigned long long*>(pointers);
        GPUDYN_CUDA(cudaMemsetAsync(heap->scratch, 0, sizeof(uint64_t), s));
        malloc_kernel<<<grid_for(n, kBlock), kBlock, 0, s>>>(
            heap->view, reinterpret_cast<const unsigned long long*>(sizes), out, n, heap->scratch);
        GPUDYN_CHECK_LAUNCH("malloc_kernel");
        const unsigned long long failed = read_u64(reinterpret_cast<const uint64_t*>(heap->scratch), s);
        if (failed != 0) {
            // Give back what this call took: the heap keeps exactly what it had.
            free_kernel<<<grid_for(n, kBlock), kBlock, 0, s>>>(heap->view, out, n);
            GPUDYN_CHECK_LAUNCH("free_kernel");
            GPUDYN_CUDA(cudaMemsetAsync(out, 0, n * sizeof(uint64_t), s));
            GPUDYN_CUDA(cudaStreamSynchronize(s));
            raise(GPUDYN_ERROR_OUT_OF_MEMORY, "%llu of %llu malloc requests found no memory", failed,
                  (unsigned long long)n);
        }
    });
}

GPUDYN_API gpudyn_status_t gpudyn_heap_free(gpudyn_heap_t heap, const uint64_t* pointers, uint64_t n,
                                            gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        if (n == 0) return;
        GPUDYN_REQUIRE_NOT_NULL(pointers);
        buffer_bytes(n, sizeof(uint64_t), "n", "pointers");
        handle_call call(heap->hs, stream);
        require_device_array(heap->hs.device, pointers, n, "pointers", "n");
        free_kernel<<<grid_for(n, kBlock), kBlock, 0, call.stream()>>>(
            heap->view, reinterpret_cast<const unsigned long long*>(pointers), n);
        GPUDYN_CHECK_LAUNCH("free_kernel");
    });
}

GPUDYN_API gpudyn_status_t gpudyn_heap_reset(gpudyn_heap_t heap, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_heap(heap);
        handle_call call(heap->hs, stream);
        // The GGArrays' buckets live in it: a reset would hand their memory out again.
        GPUDYN_REQUIRE(heap->users == 0, "argument 'heap' holds the buckets of %u GGArray(s); destroy them first",
                       unsigned(heap->users));
        heap->clear(call.stream());
    });
}

} // extern "C"
