/** @file
 * gpudyn — the experimental and benchmark surface: NO stability promise.
 *
 * What is declared here instruments the papers' algorithms for the benchmarks
 * and tests: fixed random seeds, CRW's requests per thread, the step statistics
 * (TAS, WAS) and pre-filled pools.  It may change or go in any release without
 * a new ABI version (docs/versioning.md); a program that wants the stable ABI
 * includes gpudyn/gpudyn.h only.  The device-side counterpart is
 * include/gpudyn/experimental/ (the paper's queue baseline).
 *
 * Same rules as gpudyn.h (C99, fixed-width types, cffi-readable).
 */
#ifndef GPUDYN_EXPERIMENTAL_H
#define GPUDYN_EXPERIMENTAL_H

#include "gpudyn/gpudyn.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Step statistics of one gpudyn_exp_rw_heap_get_pages call (the paper's metrics,
 * SIII-B: TAS is the mean number of bitmap probes per request, WAS the mean over
 * a warp's rounds of its slowest lane's probes). */
typedef struct gpudyn_exp_rw_heap_stats_t {
    uint32_t struct_size; /**< sizeof(gpudyn_exp_rw_heap_stats_t), set by caller */
    uint32_t reserved;
    uint64_t requests;           /**< pages requested */
    uint64_t failed;             /**< requests that found no page */
    uint64_t total_steps;        /**< sum over requests of the steps taken */
    uint64_t warps;              /**< warp-rounds of requests (a warp's j-th requests) */
    uint64_t warp_max_steps_sum; /**< sum over warp-rounds of the largest step count */
    uint64_t max_steps;          /**< largest step count of any request */
    double tas;                  /**< per-thread average steps = total_steps / requests */
    double was;                  /**< per-warp average steps = warp_max_steps_sum / warps */
} gpudyn_exp_rw_heap_stats_t;

/** gpudyn_rw_heap_get_pages with the paper's knobs: ceil(n / per_thread) threads
 * run, each making `per_thread` requests in turn (per_thread > 1 shows CRW's
 * clustering); `seed` fixes the walks; `stats` (may be NULL) receives the step
 * statistics.  Same errors and all-or-nothing rule as the stable call. */
GPUDYN_API gpudyn_status_t gpudyn_exp_rw_heap_get_pages(gpudyn_rw_heap_t heap, uint32_t* pages, uint64_t n,
                                                        gpudyn_rw_heap_algorithm_t algorithm, uint32_t per_thread,
                                                        uint64_t seed, gpudyn_exp_rw_heap_stats_t* stats,
                                                        gpudyn_stream_t stream);

/** gpudyn_rw_heap_malloc with the walks fixed by `seed`. */
GPUDYN_API gpudyn_status_t gpudyn_exp_rw_heap_malloc(gpudyn_rw_heap_t heap, const uint64_t* sizes, uint64_t* pointers,
                                                     uint64_t n, uint64_t seed, gpudyn_stream_t stream);

/** Discards all allocations and marks exactly round(fraction * page_count)
 * pages used, chosen pseudo-randomly from `seed` (the paper's pre-filled pools).
 * fraction in [0, 1].  Stream-ordered. */
GPUDYN_API gpudyn_status_t gpudyn_exp_rw_heap_occupy(gpudyn_rw_heap_t heap, double fraction, uint64_t seed,
                                                     gpudyn_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* GPUDYN_EXPERIMENTAL_H */
