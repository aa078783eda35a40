/** @file
 * gpudyn — random-walk page heap (rw_heap): the C ABI.
 *
 * A pool of `page_count` pages of `page_size` bytes in device memory whose used
 * bits live in a bitmap of 32- or 64-bit words.  Threads find free pages by a
 * random walk over the bitmap instead of a shared queue (Pham et al., "Dynamic
 * Buffer Management in Massively Parallel Systems: A Case on GPUs"): RW, RW-BM,
 * CoRW and CRW hand out single pages, RW_malloc runs of consecutive pages.
 * Device code uses the view (gpudyn_rw_heap_get_view) through
 * include/gpudyn/rw_heap.cuh; the bulk calls below run the same device code.
 *
 * Included by gpudyn.h; same rules (C99, fixed-width types, cffi-readable).
 */
#ifndef GPUDYN_RW_HEAP_H
#define GPUDYN_RW_HEAP_H

#include "gpudyn/gpudyn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpudyn_rw_heap_s* gpudyn_rw_heap_t;

typedef enum gpudyn_rw_heap_view_version_t {
    GPUDYN_RW_HEAP_VIEW_VERSION = 2
} gpudyn_rw_heap_view_version_t;

/** GETPAGE algorithms of the paper (the values are part of the ABI). */
typedef enum gpudyn_rw_heap_algorithm_t {
    GPUDYN_RW_HEAP_RW = 1,    /**< Alg. 1: random page, one bit per step */
    GPUDYN_RW_HEAP_RW_BM = 2, /**< Alg. 2: random bitmap word, first free bit */
    GPUDYN_RW_HEAP_CORW = 3,  /**< Alg. 3: warp-collaborative RW-BM, pages handed across lanes */
    GPUDYN_RW_HEAP_CRW = 4    /**< Alg. 5: page after the thread's last one, else RW-BM */
} gpudyn_rw_heap_algorithm_t;

/** Page id meaning "no page" (exhaustion). */
typedef enum gpudyn_rw_heap_constants_t {
    GPUDYN_RW_HEAP_INVALID_PAGE = -1 /* as uint32_t: 0xFFFFFFFF */
} gpudyn_rw_heap_constants_t;

typedef struct gpudyn_rw_heap_options_t {
    uint32_t struct_size;      /**< sizeof(gpudyn_rw_heap_options_t) */
    uint32_t word_bits;        /**< bitmap word: 32 or 64 (default 32, as in the paper) */
    uint64_t page_size;        /**< bytes per page, a multiple of 16, >= 16 (default 256) */
    uint64_t page_count;       /**< pages, 1 .. 2^31 (default 2^20, the paper's T = 1M) */
    uint32_t use_lockmap;      /**< 1: RW-BM/CoRW/RW_malloc lock a word before claiming (LockMap, SIV-A) */
    uint32_t max_random_steps; /**< random steps before the bounded fallback sweep (default 4096) */
} gpudyn_rw_heap_options_t;

/** Kernel view, passed by value; wrap it in gpudyn::rw_heap_ref (rw_heap.cuh). */
typedef struct gpudyn_rw_heap_view_t {
    uint32_t version;   /**< GPUDYN_RW_HEAP_VIEW_VERSION */
    uint32_t word_bits; /**< 32 or 64 */
    uint64_t pool;      /**< device address of page 0 */
    uint64_t bitmap;    /**< device address of the used-bit words (1 = used) */
    uint64_t lockmap;   /**< device address of the LockMap (1 bit per word), 0 when off */
    uint64_t page_meta; /**< device address of uint32 per page (RW_malloc run records) */
    uint64_t counters;  /**< device address of uint64[4]: failed requests, bad frees, -, - */
    uint64_t page_size; /**< bytes */
    uint32_t page_count;
    uint32_t word_count;
    uint32_t max_random_steps;
    uint32_t reserved;
    uint64_t live_starts; /**< device address of uint32 words, 1 bit per 16-byte granule of the pool:
                                   set while an RW_malloc pointer starting there is live (free checks it) */
} gpudyn_rw_heap_view_t;

typedef struct gpudyn_rw_heap_info_t {
    uint32_t struct_size; /**< sizeof(gpudyn_rw_heap_info_t), set by caller */
    uint32_t word_bits;
    uint64_t page_size;
    uint64_t page_count;
    uint64_t free_pages;      /**< pages whose used bit is clear */
    uint64_t failed_requests; /**< requests since create/reset that found no page */
    uint64_t bad_frees;       /**< frees of unknown pointers/pages or already free pages */
    uint32_t use_lockmap;
    uint32_t max_random_steps;
} gpudyn_rw_heap_info_t;

/** Defaults: 32-bit words, 256-byte pages, 2^20 pages, no LockMap, 4096 steps. */
GPUDYN_API gpudyn_status_t gpudyn_rw_heap_options_init(gpudyn_rw_heap_options_t* options);

/** Allocates the pool and bitmap (all pages free), stream-ordered on `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_rw_heap_create(gpudyn_rw_heap_t* heap, const gpudyn_rw_heap_options_t* options,
                                                 gpudyn_stream_t stream);
/** Frees everything stream-ordered after the heap's last call (see gpudyn.h);
 * NULL is accepted.  While the heap is the backing of warp heaps it is not
 * destroyed: INVALID_ARGUMENT ("... is the backing of N warp heap(s); destroy
 * them first"), the heap intact. */
GPUDYN_API gpudyn_status_t gpudyn_rw_heap_destroy(gpudyn_rw_heap_t heap);

/** Fills `*view` for kernels; valid until destroy. */
GPUDYN_API gpudyn_status_t gpudyn_rw_heap_get_view(gpudyn_rw_heap_t heap, gpudyn_rw_heap_view_t* view);

/** One GETPAGE per request, one request per thread: `pages` (device, n uint32,
 * n <= page_count; checked as gpudyn.h's "Bad input" says) receives page ids.  Each call walks from fresh random starts.  Synchronizes
 * `stream`.  When a request finds no page the call frees every page it took and
 * returns GPUDYN_ERROR_OUT_OF_MEMORY (the heap keeps exactly what it had).
 * Fixed seeds, CRW's requests per thread and the step statistics (TAS, WAS) are
 * benchmark instrumentation: gpudyn_exp_rw_heap_get_pages in experimental.h. */
GPUDYN_API gpudyn_status_t gpudyn_rw_heap_get_pages(gpudyn_rw_heap_t heap, uint32_t* pages, uint64_t n,
                                                    gpudyn_rw_heap_algorithm_t algorithm, gpudyn_stream_t stream);
/** FREEPAGE for each id in `pages` (device, n uint32); GPUDYN_RW_HEAP_INVALID_PAGE
 * entries are skipped; unknown or already free ids are counted as bad frees.
 * Stream-ordered, does not synchronize. */
GPUDYN_API gpudyn_status_t gpudyn_rw_heap_free_pages(gpudyn_rw_heap_t heap, const uint32_t* pages, uint64_t n,
                                                     gpudyn_stream_t stream);

/** RW_malloc for each size in `sizes` (device, n uint64, bytes; 0 gives 0):
 * device addresses into `pointers` (device, n uint64), 16-byte aligned.  Both
 * buffers are checked (device memory of the heap's device holding n words).  Sizes
 * below page_size are aggregated per warp (SIV-C).  A size needing more pages
 * than one bitmap region (32 words) is an INVALID_ARGUMENT.  Synchronizes
 * `stream`; on exhaustion frees what the call took and returns OUT_OF_MEMORY.
 * Each call walks from fresh random starts (fixed seeds: gpudyn_exp_rw_heap_malloc). */
GPUDYN_API gpudyn_status_t gpudyn_rw_heap_malloc(gpudyn_rw_heap_t heap, const uint64_t* sizes, uint64_t* pointers,
                                                 uint64_t n, gpudyn_stream_t stream);
/** Frees pointers from malloc (device, n uint64; 0 entries skipped).  Stream-ordered. */
GPUDYN_API gpudyn_status_t gpudyn_rw_heap_free(gpudyn_rw_heap_t heap, const uint64_t* pointers, uint64_t n,
                                               gpudyn_stream_t stream);

/** Largest request RW_malloc serves for this heap, in bytes. */
GPUDYN_API gpudyn_status_t gpudyn_rw_heap_max_malloc_size(gpudyn_rw_heap_t heap, uint64_t* bytes);

/** Discards all allocations and counters (all pages free).  Stream-ordered.
 * INVALID_ARGUMENT while warp heaps are backed by it (their pages would be
 * handed out again); likewise gpudyn_exp_rw_heap_occupy. */
GPUDYN_API gpudyn_status_t gpudyn_rw_heap_reset(gpudyn_rw_heap_t heap, gpudyn_stream_t stream);

/** Number of free pages; synchronizes `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_rw_heap_free_page_count(gpudyn_rw_heap_t heap, uint64_t* count,
                                                          gpudyn_stream_t stream);
/** Sizes, free pages and counters; synchronizes `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_rw_heap_get_info(gpudyn_rw_heap_t heap, gpudyn_rw_heap_info_t* info,
                                                   gpudyn_stream_t stream);
/** What requests of kernels (and of bulk calls) met since the last check, as a
 * status: OUT_OF_MEMORY when page or malloc requests found no free page, else
 * INVALID_ARGUMENT when frees were of pages or pointers the heap did not hand
 * out (or had freed already), else SUCCESS; the message gives the counts.
 * Each failure is reported once; the info's counters are not changed (reset
 * zeroes both).  Synchronizes `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_rw_heap_check(gpudyn_rw_heap_t heap, gpudyn_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* GPUDYN_RW_HEAP_H */
