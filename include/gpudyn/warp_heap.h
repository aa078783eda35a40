/** @file
 * gpudyn warp heap (FDGMalloc, Widmer et al. 2013): C ABI.
 *
 * A warp heap serves allocations of the lanes of one warp together: a voted
 * worker lane does the backing-allocator work for all, requests are packed by a
 * prefix sum into header-less superblocks with a bump pointer, and memory is
 * freed in bulk (tidy-up, end, or keep for a later kernel).  Kernels use it
 * through <gpudyn/warp_heap.cuh> with the view below; callers that write no
 * kernel use gpudyn_warp_heap_alloc_batch / _release (arena semantics).
 * Included by gpudyn.h; declarations only (the Python binding reads them).
 */
#ifndef GPUDYN_WARP_HEAP_H
#define GPUDYN_WARP_HEAP_H

#include "gpudyn/gpudyn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Layout version of gpudyn_warp_heap_view_t; the device header refuses others. */
typedef enum gpudyn_warp_heap_view_version_t {
    GPUDYN_WARP_HEAP_VIEW_VERSION = 2
} gpudyn_warp_heap_view_version_t;

/** Fixed limits.  ALIGNMENT: every block is 16-byte aligned (CUDA device malloc
 * returns 16-byte aligned memory and superblock offsets are multiples of the
 * minimum block).  MAX_SUPERBLOCK_BYTES (64 MiB): 32 lanes x 64 MiB stays below
 * 2^32, so the warp's packing scan runs on 32-bit sums. */
typedef enum gpudyn_warp_heap_limits_t {
    GPUDYN_WARP_HEAP_ALIGNMENT = 16,
    GPUDYN_WARP_HEAP_MAX_SUPERBLOCK_BYTES = 67108864
} gpudyn_warp_heap_limits_t;

/** Where superblocks, lists, warp headers and large blocks come from. */
typedef enum gpudyn_warp_heap_backing_t {
    /** CUDA device malloc/free (as in the paper); its heap is the process-wide
     * cudaLimitMallocHeapSize, see options.device_heap_bytes. */
    GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC = 0,
    /** The default: a pool owned by the heap (one device allocation made at
     * create, options.arena_bytes) cut into header slots (warp header, first
     * SuperBlock list and first superblock) and chunk slots (one superblock
     * each); a slot is taken and given back with one atomic on a bitmap word.
     * Runs of up to 32 chunk slots serve lists and large blocks; larger
     * requests fall back to CUDA device malloc. */
    GPUDYN_WARP_HEAP_BACKING_ARENA = 1,
    /** A gpudyn random-walk page heap (options.page_heap): blocks of at most one
     * page are single pages (RW-BM walk), larger ones runs of pages (RW_malloc
     * from the worker lane alone); larger than rw_heap_max_malloc_size: NULL. */
    GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP = 2
} gpudyn_warp_heap_backing_t;

typedef struct gpudyn_warp_heap_options_t {
    uint32_t struct_size;        /**< sizeof(gpudyn_warp_heap_options_t) */
    uint32_t backing;            /**< gpudyn_warp_heap_backing_t, default ARENA */
    uint64_t superblock_bytes;   /**< default 32768 (paper, sec. 5.1); 0 = no superblocks:
                                    every warp request goes to the backing allocator */
    uint32_t min_block_bytes;    /**< power of two >= 16; default 16 (paper, sec. 3.3) */
    uint32_t list_capacity;      /**< superblock-list entries per list; default 126 (paper) */
    uint64_t device_heap_bytes;  /**< CUDA_MALLOC backing (and the ARENA fallback): raise
                                    cudaLimitMallocHeapSize to at least this many bytes at
                                    create (0 = leave it; NOT_SUPPORTED once a kernel has
                                    used malloc) */
    uint64_t arena_bytes;        /**< ARENA: bytes of the pool allocated at create (default 512 MiB) */
    uint64_t arena_chunk_bytes;  /**< ARENA: bytes per chunk slot, a multiple of 16; 0 (default) =
                                    superblock_bytes, or 4096 without superblocks */
    uint64_t arena_header_slots; /**< ARENA: warp headers the pool holds at once; 0 (default) = as
                                    many as fill a quarter of arena_bytes */
    uint32_t max_superblock_run; /**< ARENA: when a warp needs a new superblock it takes a run of
                                    1, 2, 4, ... chunks (doubling per run since the last tidy-up,
                                    so at most half of what it holds sits unused) up to this
                                    many; 1..32, default 8; 1 = one superblock at a time */
    uint32_t reserved0;
    void* page_heap; /**< PAGE_HEAP: a gpudyn_rw_heap_t of the same device; it cannot
                                    be destroyed while this heap lives */
} gpudyn_warp_heap_options_t;

/** Kernel-side view: trivially copyable, pass by value to kernels and wrap in
 * gpudyn::warp_heap_ref.  `stats` points to a gpudyn_warp_heap_stats_t in
 * device memory that the device code updates. */
typedef struct gpudyn_warp_heap_view_t {
    uint32_t version;          /**< GPUDYN_WARP_HEAP_VIEW_VERSION */
    uint32_t backing;          /**< gpudyn_warp_heap_backing_t */
    uint32_t superblock_bytes; /**< 0 = no superblocks */
    uint32_t min_block_bytes;
    uint32_t list_capacity;
    uint32_t max_superblock_run; /**< ARENA: chunks a superblock run takes at most (else 1) */
    void* stats;
    void* arena_base;            /**< ARENA: header slots, then chunk slots */
    void* arena_bitmap;          /**< ARENA: uint32 used bits (1 = taken): header words, then
                                     chunk words; bits past the last slot are set */
    uint64_t arena_header_bytes; /**< ARENA: bytes per header slot */
    uint64_t arena_chunk_bytes;  /**< ARENA: bytes per chunk slot */
    uint32_t arena_header_slots;
    uint32_t arena_chunk_slots;
    void* page_heap; /**< PAGE_HEAP: device copy of the page heap's gpudyn_rw_heap_view_t */
} gpudyn_warp_heap_view_t;

/** Counters kept in device memory by every warp heap using one view.  "Live"
 * counts go up and down; the others only grow.  bytes_requested is folded in
 * when a warp calls tidy_up, end or keep. */
typedef struct gpudyn_warp_heap_stats_t {
    uint64_t headers;             /**< live warp headers */
    uint64_t superblocks;         /**< live superblocks (the first of each warp included) */
    uint64_t large_blocks;        /**< live blocks serving requests larger than a superblock */
    uint64_t bytes_reserved;      /**< live bytes taken from the backing allocator */
    uint64_t bytes_requested;     /**< live bytes handed to callers (rounded to min blocks) */
    uint64_t backing_allocations; /**< calls into the backing allocator */
    uint64_t failed_allocations;  /**< lanes that got NULL for want of memory */
    uint64_t misuse;              /**< contract violations detected (see warp_heap.cuh) */
} gpudyn_warp_heap_stats_t;

typedef struct gpudyn_warp_heap_s* gpudyn_warp_heap_t;

/** Fills `*options` with the defaults (struct_size included). */
GPUDYN_API gpudyn_status_t gpudyn_warp_heap_options_init(gpudyn_warp_heap_options_t* options);

/** Creates a warp heap: allocates its statistics (zeroed, stream-ordered) and,
 * for the CUDA malloc backing, raises the device heap limit when asked. */
GPUDYN_API gpudyn_status_t gpudyn_warp_heap_create(gpudyn_warp_heap_t* heap, const gpudyn_warp_heap_options_t* options,
                                                   gpudyn_stream_t stream);

/** Releases every outstanding batch and frees the heap, stream-ordered after
 * its last call (see gpudyn.h).  NULL is accepted.  Warp headers that user kernels kept
 * and never ended are not known to the heap and stay allocated. */
GPUDYN_API gpudyn_status_t gpudyn_warp_heap_destroy(gpudyn_warp_heap_t heap);

/** Fills `*view` for kernels (gpudyn::warp_heap_ref wraps it); valid until destroy. */
GPUDYN_API gpudyn_status_t gpudyn_warp_heap_get_view(gpudyn_warp_heap_t heap, gpudyn_warp_heap_view_t* view);

/** Arena allocation for callers without kernels: element i of `pointers`
 * (device array of `count` pointers) receives a block of sizes[i] bytes
 * (device array of uint64_t; 0 gives NULL; both checked as gpudyn.h's
 * "Bad input" says: the heap's device, count words), 16-byte aligned, valid until
 * gpudyn_warp_heap_release.  Synchronizes `stream`.  On OUT_OF_MEMORY this
 * batch is rolled back (its pointers are all NULL) and earlier batches stay. */
GPUDYN_API gpudyn_status_t gpudyn_warp_heap_alloc_batch(gpudyn_warp_heap_t heap, const uint64_t* sizes, uint64_t count,
                                                        void** pointers, gpudyn_stream_t stream);

/** Frees every block handed out by alloc_batch (stream-ordered). */
GPUDYN_API gpudyn_status_t gpudyn_warp_heap_release(gpudyn_warp_heap_t heap, gpudyn_stream_t stream);

/** Number of batches held (not yet released); host-side, no synchronization. */
GPUDYN_API gpudyn_status_t gpudyn_warp_heap_batch_count(gpudyn_warp_heap_t heap, uint64_t* count);

/** Copies the device counters to `*stats` after synchronizing `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_warp_heap_get_stats(gpudyn_warp_heap_t heap, gpudyn_warp_heap_stats_t* stats,
                                                      gpudyn_stream_t stream);

/** What the heap's kernels met since the last check, as a status:
 * OUT_OF_MEMORY when lanes got NULL for want of memory (failed_allocations),
 * else INVALID_ARGUMENT when contract violations were detected (misuse), else
 * SUCCESS; the message gives the counts.  Each is reported once; the stats are
 * not changed.  Synchronizes `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_warp_heap_check(gpudyn_warp_heap_t heap, gpudyn_stream_t stream);

/** Free bytes of the backing allocator, for checks that everything went back:
 * ARENA: free header slots x header slot bytes + free chunk slots x chunk
 * bytes; PAGE_HEAP: free pages x page size.  Synchronizes `stream`.  CUDA_MALLOC
 * cannot be asked: GPUDYN_ERROR_NOT_SUPPORTED. */
GPUDYN_API gpudyn_status_t gpudyn_warp_heap_backing_free_bytes(gpudyn_warp_heap_t heap, uint64_t* bytes,
                                                               gpudyn_stream_t stream);

/** Frees warp headers that a user kernel kept (warp_heap::keep) and will not
 * resume: `headers` is a device array of `count` header pointers (the array
 * is checked as a device buffer; NULL entries are skipped), freed
 * stream-ordered by a kernel as if each warp had ended.
 * Entries that cannot be headers of this heap (see tidy_up_kept) are skipped
 * and counted in stats.misuse. */
GPUDYN_API gpudyn_status_t gpudyn_warp_heap_free_kept(gpudyn_warp_heap_t heap, void* const* headers, uint64_t count,
                                                      gpudyn_stream_t stream);

/** Tidies up warp headers that a user kernel kept (warp_heap::keep) and will
 * resume later: as warp_heap::tidy_up by each warp, every superblock, list and
 * large block a header holds goes back to the backing allocator, its requested
 * bytes leave the statistics, and the header block (header, first list, first
 * superblock) stays, for warp_heap_ref::resume in a later kernel.  Blocks handed
 * out through these headers are invalid afterwards.  `headers` is a device
 * array of `count` header pointers (NULL entries skipped; no header twice, and
 * no kernel may be using one meanwhile).  Synchronizes `stream`.  Entries that
 * cannot be headers of this heap (ARENA: not the start of a taken header slot;
 * PAGE_HEAP: not the start of a page of its pool; CUDA_MALLOC cannot tell) are
 * skipped and counted in stats.misuse, the others tidied, and the call returns
 * INVALID_ARGUMENT naming how many and the first index. */
GPUDYN_API gpudyn_status_t gpudyn_warp_heap_tidy_up_kept(gpudyn_warp_heap_t heap, void* const* headers, uint64_t count,
                                                         gpudyn_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* GPUDYN_WARP_HEAP_H */
