/** @file
 * gpudyn — device allocator (heap): the C ABI.
 *
 * malloc/free of any size from any thread of any kernel, on a random-walk page
 * heap: small sizes in size classes packed into slabs, medium sizes as runs of
 * consecutive pages, huge sizes (>= 1 GiB) as runs of whole bitmap words.  One
 * virtual range is reserved at create (max_bytes) and physical memory is mapped
 * into it (initial_bytes, then grow), so views stay valid across grow.  Device
 * code wraps the view (gpudyn_heap_get_view) in gpudyn::heap_ref
 * (include/gpudyn/heap.cuh); the bulk calls below run the same device code.
 * Several heaps live side by side; nothing is global.
 *
 * Included by gpudyn.h; same rules (C99, fixed-width types, cffi-readable).
 */
/* Before the guard: gpudyn.h includes this header back (through ggarray.h, whose
 * view holds a heap view), so when this header is included first, gpudyn.h must
 * be read completely -- defining the heap's types on the way -- before it. */
#include "gpudyn/gpudyn.h"

#ifndef GPUDYN_HEAP_H
#define GPUDYN_HEAP_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpudyn_heap_s* gpudyn_heap_t;

typedef enum gpudyn_heap_view_version_t {
    GPUDYN_HEAP_VIEW_VERSION = 1
} gpudyn_heap_view_version_t;

typedef struct gpudyn_heap_options_t {
    uint32_t struct_size; /**< sizeof(gpudyn_heap_options_t) */
    uint32_t reserved;    /**< 0 */
    /** mapped at create; 0: 1 GiB, or half the device's free memory when that is less, at most max_bytes */
    uint64_t initial_bytes;
    /** virtual range reserved once, grow maps up to it (bytes_max: max_bytes rounded down to pages); 0: initial_bytes x 8, at most the device's total memory; else >= page_size */
    uint64_t max_bytes;
    uint64_t page_size; /**< power of two, 4 KiB .. 2 MiB (default 64 KiB) */
} gpudyn_heap_options_t;

/** Kernel view, passed by value; wrap it in gpudyn::heap_ref (heap.cuh).  Valid
 * until destroy, also across grow.  The fields are the device header's business. */
typedef struct gpudyn_heap_view_t {
    uint32_t version;     /**< GPUDYN_HEAP_VIEW_VERSION */
    uint32_t page_shift;  /**< log2(page_size) */
    uint64_t base;        /**< device address of page 0 (the reserved range) */
    uint64_t page_bitmap; /**< uint64 words, one bit per page of the range, 1 = used */
    uint64_t run_meta;    /**< uint32 per page: medium run records (rw_heap's page records) */
    /** uint32 words, one bit per 16 bytes of the range: rw_heap's live run starts (medium runs) */
    uint64_t run_starts;
    uint64_t slab_meta; /**< uint32 per page: slab and huge-run records */
    /** uint64 words, page_size / 1024 per page: slot bits of the slab over those pages (indexed from its first) */
    uint64_t slot_bitmap;
    uint64_t class_table; /**< uint32[4] per size class: size, slab pages, slots, directory offset */
    /** per size class, 128-byte lines (heap.cuh): slabs attached, reclaim marks, cursors in use, current slabs + 1 */
    uint64_t class_state;
    /** uint32 slab head pages of every class, 0xFFFFFFFF = not yet published, 0xFFFFFFFE = given back */
    uint64_t directory;
    uint64_t mapped_pages;     /**< device address of the uint32 count of pages mapped now */
    uint64_t counters;         /**< device address of uint64[4]: failed allocations, bad frees, -, a placement hint;
                                   followed by a copy of this view (read by out-of-line device code) */
    uint32_t class_count;      /**< size classes (sizes up to page_size / 2) */
    uint32_t max_pages;        /**< pages of the reserved range */
    uint32_t max_random_steps; /**< random draws of a medium-run search before it fails */
    uint32_t reserved;
} gpudyn_heap_view_t;

typedef struct gpudyn_heap_stats_t {
    uint32_t struct_size; /**< sizeof(gpudyn_heap_stats_t), set by caller */
    uint32_t reserved;
    uint64_t bytes_mapped;       /**< memory the heap can hand out now */
    uint64_t bytes_max;          /**< limit for grow */
    uint64_t bytes_held;         /**< pages in use (slabs and runs) */
    uint64_t bytes_allocated;    /**< sum of usable sizes of live allocations */
    uint64_t allocations;        /**< live allocations */
    uint64_t failed_allocations; /**< since create / clear_status / reset */
    uint64_t bad_frees;          /**< double, foreign or interior frees since create / clear_status / reset */
    uint64_t largest_free_bytes; /**< largest single allocation that would succeed now (without concurrent work) */
} gpudyn_heap_stats_t;

/** Defaults: initial_bytes 0 and max_bytes 0 (see the fields), 64 KiB pages. */
GPUDYN_API gpudyn_status_t gpudyn_heap_options_init(gpudyn_heap_options_t* options);

/** Reserves the range, maps initial_bytes and allocates the metadata (sized for
 * max_bytes); every page free.  Stream-ordered; the heap belongs to the current
 * device.  Without VMM support: one plain allocation of initial_bytes, and grow
 * returns GPUDYN_ERROR_NOT_SUPPORTED. */
GPUDYN_API gpudyn_status_t gpudyn_heap_create(gpudyn_heap_t* heap, const gpudyn_heap_options_t* options,
                                              gpudyn_stream_t stream);
/** Frees everything, stream-ordered after the heap's last call (see gpudyn.h: never
 * synchronizes the device); NULL is accepted. */
GPUDYN_API gpudyn_status_t gpudyn_heap_destroy(gpudyn_heap_t heap);

/** Fills `*view` for kernels; valid until destroy (also across grow). */
GPUDYN_API gpudyn_status_t gpudyn_heap_get_view(gpudyn_heap_t heap, gpudyn_heap_view_t* view);

/** Maps physical memory until at least new_mapped_bytes (rounded up to the
 * mapping granularity) are usable; smaller values change nothing.  Call between
 * launches: kernels queued on `stream` after this call see the new pages.
 * new_mapped_bytes above bytes_max is an INVALID_ARGUMENT; OUT_OF_MEMORY when
 * the device has not the memory (nothing changes then); NOT_SUPPORTED for any
 * size above bytes_mapped on a device without VMM (bytes_max = bytes_mapped there). */
GPUDYN_API gpudyn_status_t gpudyn_heap_grow(gpudyn_heap_t heap, uint64_t new_mapped_bytes, gpudyn_stream_t stream);

/** Sizes, live bytes and counters, computed from the metadata by a kernel;
 * synchronizes `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_heap_get_stats(gpudyn_heap_t heap, gpudyn_heap_stats_t* stats,
                                                 gpudyn_stream_t stream);

/** Zeroes the failed-allocation and bad-free counters.  Stream-ordered. */
GPUDYN_API gpudyn_status_t gpudyn_heap_clear_status(gpudyn_heap_t heap, gpudyn_stream_t stream);

/** What requests of kernels (and of bulk calls) met since the last check, as a
 * status: OUT_OF_MEMORY when mallocs got NULL for want of memory, else
 * INVALID_ARGUMENT when frees were of pointers the heap did not hand out (or
 * had freed already), else SUCCESS; the message gives the counts.  Each
 * failure is reported once; the stats' counters are not changed (clear_status
 * and reset zero both).  Synchronizes `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_heap_check(gpudyn_heap_t heap, gpudyn_stream_t stream);

/** One device malloc per size (sizes: device, n uint64 bytes; 0 gives 0) into
 * pointers (device, n uint64).  Both must be device memory of the heap's
 * device holding n 8-byte-aligned words (gpudyn.h, "Bad input"): a larger n,
 * or n x 8 beyond 2^57 bytes, is INVALID_ARGUMENT before any kernel.  On any failure frees what this call took, sets
 * every pointer to 0 and returns OUT_OF_MEMORY (slabs it attached stay with
 * their classes until pages run out: bytes_held may grow).  Synchronizes `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_heap_malloc(gpudyn_heap_t heap, const uint64_t* sizes, uint64_t* pointers, uint64_t n,
                                              gpudyn_stream_t stream);
/** One device free per pointer (device, n uint64, checked as malloc's; 0
 * entries skipped); pointers the heap did not hand out are counted as bad
 * frees.  Stream-ordered. */
GPUDYN_API gpudyn_status_t gpudyn_heap_free(gpudyn_heap_t heap, const uint64_t* pointers, uint64_t n,
                                            gpudyn_stream_t stream);

/** Drops every allocation and zeroes the counters (every mapped page free, no
 * slab attached).  Stream-ordered.  INVALID_ARGUMENT while GGArrays take their
 * buckets from the heap (their memory would be handed out again). */
GPUDYN_API gpudyn_status_t gpudyn_heap_reset(gpudyn_heap_t heap, gpudyn_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* GPUDYN_HEAP_H */
