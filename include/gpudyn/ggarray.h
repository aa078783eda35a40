/** @file
 * gpudyn — growable GPU arrays (GGArray paper, Meneses, Navarro & Ferrada) and
 * the two baselines it is measured against: a static array (capacity fixed at
 * creation) and a VMM array (one virtual range, grown from the host by mapping
 * physical memory with the driver's virtual memory management calls).
 *
 * All three share the insertion algorithms of insert.cuh and the same calls:
 * create / destroy / reserve / push_back / size / capacity / allocated_bytes /
 * flatten / copy_to_host / clear / get_view / get_status / clear_status.  Calls
 * that return a number to the host (size, capacity, allocated_bytes, get_status)
 * and calls whose status depends on device work (reserve and push_back report
 * out-of-memory) synchronize their stream before returning; the others are only
 * stream-ordered.  size_async and flatten_async take the size on the device
 * (into device memory, for the next kernel): no host wait, so a loop of
 * produce / consume / clear launches needs none per iteration.
 *
 * Kernels push through the device headers (ggarray.cuh, static_array.cuh,
 * vmm_array.cuh): a push that cannot get memory returns false, stores nothing,
 * keeps every element stored before, and sets the array's status bits, which
 * the host reads with get_status and zeroes with clear_status (or clear).
 *
 * Memory of a GGArray.  Bucket rows that reserve / push_back map from the host
 * live in the array's bucket pool (one VMM range).  Every other bucket -- the
 * ones a kernel needs beyond those rows, or all of them without a pool -- is
 * bumped off the array's growth arena: runs it takes from the device's
 * stream-ordered memory pool (cudaMallocAsync), or from a gpudyn heap (heap.h)
 * given at create and shared with other arrays.
 * That memory is the array's *budget*: what kernels may take for new buckets.  The host raises it between launches
 * (gpudyn_ggarray_set_budget); CUDA's device malloc heap is never used.  When
 * the budget runs out inside a kernel, the push that needed the bucket returns
 * false and stores nothing, the status bits get
 * GPUDYN_ARRAY_STATUS_ALLOCATION_FAILED (gpudyn_ggarray_get_status), and every
 * element stored before stays; after a larger budget the next launch can
 * store the rest.
 *
 * Included by gpudyn.h; cffi reads these declarations verbatim (see gpudyn.h).
 */
#ifndef GPUDYN_GGARRAY_H
#define GPUDYN_GGARRAY_H

#include "gpudyn/gpudyn.h"
#include "gpudyn/heap.h" /* a GGArray may take its arena from a heap; its view is part of the array's */

#ifdef __cplusplus
extern "C" {
#endif

/** Insertion algorithm (paper §III-B); see include/gpudyn/insert.cuh. */
typedef enum gpudyn_insert_algo_t {
    GPUDYN_INSERT_ATOMIC = 0,
    GPUDYN_INSERT_WARP_SCAN = 1,
    GPUDYN_INSERT_TENSOR_SCAN = 2
} gpudyn_insert_algo_t;

/** Versions of the view structs; a device header refuses any other. */
typedef enum gpudyn_ggarray_view_version_t {
    GPUDYN_GGARRAY_VIEW_VERSION = 7
} gpudyn_ggarray_view_version_t;
typedef enum gpudyn_static_array_view_version_t {
    GPUDYN_STATIC_ARRAY_VIEW_VERSION = 2
} gpudyn_static_array_view_version_t;
typedef enum gpudyn_vmm_array_view_version_t {
    GPUDYN_VMM_ARRAY_VIEW_VERSION = 2
} gpudyn_vmm_array_view_version_t;

/** Fixed sizes of the GGArray layout.  Bucket b of an LFVector holds
 * first_bucket_elements * 2^b elements, so 40 buckets hold first * (2^40 - 1). */
typedef enum gpudyn_ggarray_limits_t {
    GPUDYN_GGARRAY_MAX_BUCKETS = 40
} gpudyn_ggarray_limits_t;

/** Bits of the status word of every array (view .status; `gpudyn_<array>_get_status`).
 * A push from a kernel that cannot get memory, or that goes through a ref whose
 * element type has the wrong size, returns false and sets a bit; the bits stay
 * until `gpudyn_<array>_clear_status` or clear.  Host push_back/reserve report
 * their own failures by their return status and leave the bits alone.  A
 * flatten_async, which learns the size only on the device, reports a
 * destination too small here too. */
typedef enum gpudyn_array_status_bits_t {
    GPUDYN_ARRAY_STATUS_ALLOCATION_FAILED = 1, /**< a GGArray bucket found no room in its growth arena (the budget) */
    GPUDYN_ARRAY_STATUS_CAPACITY_EXCEEDED = 2, /**< static/VMM capacity or GGArray bucket limit reached */
    /** a `ref<T>` with sizeof(T) != element size: refused, nothing stored */
    GPUDYN_ARRAY_STATUS_WRONG_ELEMENT_SIZE = 4,
    GPUDYN_ARRAY_STATUS_DESTINATION_TOO_SMALL = 8 /**< a flatten_async found dst_bytes smaller than the elements:
                                                     nothing copied (set by the library's kernel, not a push) */
} gpudyn_array_status_bits_t;

/* ---- GGArray ---------------------------------------------------------- */
typedef struct gpudyn_ggarray_s* gpudyn_ggarray_t;

typedef struct gpudyn_ggarray_options_t {
    uint32_t struct_size;           /**< sizeof(gpudyn_ggarray_options_t) */
    uint32_t element_size;          /**< bytes: 1, 2, 4, 8 or 16 (default 4) */
    uint32_t num_lfvectors;         /**< LFVectors (one per thread block), 1..65536 (default 512) */
    uint32_t reserved;              /**< 0 */
    uint64_t first_bucket_elements; /**< elements in bucket 0, a power of two >= 32 (default 1024) */
    uint64_t budget_bytes;          /**< memory kernels may take for buckets beyond the pool rows (the
                                        growth arena they are bumped off), at least 2 MiB.  0
                                        (default): all of the device's memory, mapped while kernels
                                        need it (docs/guides/memory.md: the array holds what its buckets
                                        take).  Given: that much is mapped whole the first time a
                                        kernel could need it (get_view, or a reserve / push_back
                                        beyond the pool), so kernels within it never wait for the
                                        host (an array made per launch: see docs/guides/memory.md), and
                                        kernels may take no more.  Without VMM: one run of it (0:
                                        1 GiB, or half the free memory when less) from the
                                        stream-ordered pool.  At most max_budget_bytes; must be 0
                                        with `heap`.  (This field was malloc_heap_bytes: same place,
                                        same role.) */
    uint64_t pool_bytes;            /**< virtual range of the bucket pool (see reserve); 0: the
                                        device's total memory (default); UINT64_MAX: no pool;
                                        a range the driver cannot reserve is OUT_OF_MEMORY naming it */
    /* Fields below are read when struct_size covers them (callers built against
     * an older header pass a smaller struct_size and get the defaults). */
    uint64_t max_budget_bytes; /**< the most set_budget may raise the budget to; 0 (default):
                                        8 x the budget, at most the device's total memory; a value
                                        above the device's total memory is refused; must be 0
                                        with `heap` */
    gpudyn_heap_t heap;        /**< NULL (default): the array's own arena (budget_bytes).  Else the arena
                                        is runs of this heap of the same device, shared with whatever
                                        else uses it; its mapped memory is the budget
                                        (gpudyn_heap_grow or set_budget raise it); it cannot be
                                        destroyed while the array lives.  The first time a kernel
                                        could need a bucket the array takes a run of its share of the
                                        heap's free memory (the free bytes over the arrays using the
                                        heap that hold no run yet plus one, the heap's own mallocs:
                                        half of it for an array alone; at least 2 MiB and what the
                                        call needs); after a kernel was refused a bucket, the next get_view
                                        / reserve / push_back takes another run, at least twice the
                                        refused request (get_view then reads the arena: it
                                        synchronizes the stream); destroy gives the runs back */
} gpudyn_ggarray_options_t;

/** Trivially copyable; pass by value to kernels (`gpudyn::ggarray_ref<T>`).
 * Pointers are device addresses. */
typedef struct gpudyn_ggarray_view_t {
    uint32_t version; /**< GPUDYN_GGARRAY_VIEW_VERSION */
    uint32_t element_size;
    uint32_t num_lfvectors;
    uint32_t log2_first_bucket;
    uint64_t sizes;           /**< uint64[num_lfvectors]: reservation counter of each LFVector */
    uint64_t failed_at;       /**< uint64[num_lfvectors]: lowest start of a reservation that failed
                                        (UINT64_MAX when none); LFVector l holds min(sizes[l], failed_at[l])
                                        elements: every range below it was stored, none at or above it */
    uint64_t growth;          /**< uint32[num_lfvectors]: bits 0-7: buckets 0..n-1 are ready; bits 8-15:
                                        1 + the lowest bucket whose allocation failed (0: none) */
    uint64_t ranges;          /**< uint64[num_lfvectors + 1]: exclusive prefix sum of the sizes,
                                        as of gpudyn_ggarray_get_view (for at() and spans) */
    uint64_t buckets;         /**< uint64[GPUDYN_GGARRAY_MAX_BUCKETS * num_lfvectors]: bucket pointers,
                                        bucket b of LFVector l at [b * num_lfvectors + l] */
    uint64_t bucket_state;    /**< uint32[same, same order]: 0 empty, 1 being allocated, 2-3 ready */
    uint64_t status;          /**< uint32: gpudyn_array_status_bits_t */
    uint64_t allocated_bytes; /**< uint64: bytes of the buckets taken from the growth arena */
    uint64_t pool;            /**< device address of the bucket pool (0: none): bucket b of
                                        LFVector l may live at pool + element_size * first *
                                        (num_lfvectors * (2^b - 1) + l * 2^b) */
    uint32_t pool_rows;       /**< buckets 0..pool_rows-1 of every LFVector are mapped in the
                                        pool (as of get_view); a bucket claimed there takes its
                                        pool address instead of taking arena memory */
    uint32_t reserved;        /**< 0 */
    gpudyn_heap_view_t heap;  /**< the heap the array shares (options.heap; version 0: none):
                                        informational, the device code does not read it */
    uint64_t arena;           /**< device address of the growth arena: uint64[6] = bytes taken,
                                        base address, usable bytes, largest request refused, end of
                                        the last bucket handed out, requests refused; every
                                        bucket beyond the pool rows is bumped off [base, base + usable)
                                        (0: no arena yet, such a bucket fails) */
    uint64_t window;          /**< uint64[num_lfvectors]: the bucket each LFVector's pushes go to
                                        now, a hint for the pushes' fast path (0: none): the address
                                        element 0 would have if the LFVector were contiguous there,
                                        plus b + log2_first_bucket + 1 for bucket b in the low 6 bits */
} gpudyn_ggarray_view_t;

/** Fills `*options` with the defaults listed beside each field (struct_size included). */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_options_init(gpudyn_ggarray_options_t* options);
/** Creates an empty GGArray (no bucket yet) and reserves the pool's virtual range.
 * The growth arena is taken (budget_bytes) only when first needed.
 * options->struct_size is sizeof(gpudyn_ggarray_options_t) (56) or 40, the
 * size before max_budget_bytes (the later fields take their defaults); any
 * other size (one between them would cut `heap` in half) is INVALID_ARGUMENT.
 * options->heap on another device is INVALID_ARGUMENT. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_create(gpudyn_ggarray_t* array, const gpudyn_ggarray_options_t* options,
                                                 gpudyn_stream_t stream);
/** Frees every bucket and the bookkeeping, stream-ordered after the array's
 * last call (see gpudyn.h: no device synchronization; the pool's and the own
 * arena's mappings wait for the array's own event before they are unmapped):
 * runs taken from a given heap are freed back to it, ordered with the heap's
 * calls.  NULL is accepted. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_destroy(gpudyn_ggarray_t array);
/** Grows every LFVector to hold at least ceil(capacity / num_lfvectors) elements.
 * Bucket rows (bucket b of every LFVector) that fit the pool's virtual range are
 * backed by mapping physical memory at the pool's end from the host (the VMM
 * array's calls; no kernel, no copy, O(new buckets)); a bucket there is claimed
 * in place by the first kernel that needs it.  Rows beyond the pool are
 * taken in a kernel from the array's growth arena (one thread per bucket), and
 * then the call synchronizes.  A capacity the bucket layout cannot hold is
 * INVALID_ARGUMENT; OUT_OF_MEMORY when memory is exhausted (the pool's, or the
 * budget: elements kept); both name 'capacity'.  A pool slice whose bucket a
 * kernel had already taken from the arena stays mapped unused (allocated_bytes
 * counts it).  The status bits are left as they are (see
 * gpudyn_ggarray_get_status). */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_reserve(gpudyn_ggarray_t array, uint64_t capacity, gpudyn_stream_t stream);
/** Appends the `count` elements at device address `values` (element_size bytes each,
 * aligned to element_size; device memory as in gpudyn.h, "Bad input", holding them);
 * with `mask` (device uint8[count], may be NULL) only those whose mask byte is nonzero.
 * Pool rows are mapped for the elements kept (a mask is counted first), buckets
 * are claimed in the kernel on demand: from the pool where its row is mapped,
 * else from the array's growth arena (the budget).  Synchronizes; on OUT_OF_MEMORY the
 * array is as before the call (its sizes are restored; buckets it allocated
 * stay for later pushes) and the status bits are unchanged. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_push_back(gpudyn_ggarray_t array, const void* values, uint64_t count,
                                                    const uint8_t* mask, gpudyn_insert_algo_t algorithm,
                                                    gpudyn_stream_t stream);
/** Number of elements; synchronizes `stream` to read it. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_size(gpudyn_ggarray_t array, uint64_t* size, gpudyn_stream_t stream);
/** Elements the allocated buckets can hold; synchronizes `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_capacity(gpudyn_ggarray_t array, uint64_t* capacity, gpudyn_stream_t stream);
/** Bytes of device memory the elements' buckets hold: the pool's mapped rows
 * plus the growth arena's mapped memory (a fixed run: the bytes of its
 * buckets; the run's unused part is not counted).  Bookkeeping (about
 * 520 bytes per LFVector) is not counted.  Synchronizes; an array that adopted an idle
 * arena (docs/guides/memory.md) gives back here what its buckets do not take. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_allocated_bytes(gpudyn_ggarray_t array, uint64_t* bytes,
                                                          gpudyn_stream_t stream);
/** Copies the elements, LFVector after LFVector, to contiguous device memory
 * `dst` of `dst_bytes` (>= size * element_size; a dst given must hold
 * dst_bytes and be aligned to element_size).  Synchronizes to read the size
 * (flatten_async does not). */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_flatten(gpudyn_ggarray_t array, void* dst, uint64_t dst_bytes,
                                                  gpudyn_stream_t stream);
/** As flatten, into host memory (pageable, mapped, or pinned: not device
 * memory); returns after the copy is complete. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_copy_to_host(gpudyn_ggarray_t array, void* dst, uint64_t dst_bytes,
                                                       gpudyn_stream_t stream);
/** Writes the number of elements to the uint64 at `size` (device memory of the
 * array's device, or host memory mapped into it, aligned to 8), stream-ordered
 * with no host wait: work queued on `stream` after this call (a kernel sizing
 * its loop, a copy to the host when asked) reads the count of the elements the
 * work queued before it stored. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_size_async(gpudyn_ggarray_t array, uint64_t* size, gpudyn_stream_t stream);
/** flatten without a host wait: stream-ordered, the size taken on the device by
 * the copying kernel.  When the elements fit in dst_bytes they are copied to
 * dst, LFVector after LFVector (the order of flatten and of ggarray_ref::at);
 * when they do not, nothing is written to dst and the status bits get
 * GPUDYN_ARRAY_STATUS_DESTINATION_TOO_SMALL (seen at the host's next
 * get_status).  With `size` (a uint64 as for size_async; may be NULL) the
 * number of elements is written there either way.  dst: device memory of the
 * array's device holding dst_bytes, aligned to element_size; NULL only with
 * dst_bytes 0 (then only the size is written). */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_flatten_async(gpudyn_ggarray_t array, void* dst, uint64_t dst_bytes,
                                                        uint64_t* size, gpudyn_stream_t stream);
/** Size 0, buckets kept (capacity unchanged), status bits zeroed.  Stream-ordered,
 * no wait: a produce / consume / clear loop reuses the buckets, so it maps no
 * new memory once its largest output fitted. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_clear(gpudyn_ggarray_t array, gpudyn_stream_t stream);
/** Gives back the device memory the array holds beyond what its elements need:
 * an empty array drops every bucket of its growth arena (capacity falls to the
 * pool rows that reserve mapped), a non-empty one the arena's mapping past its
 * last bucket; then the device's reserve of unmapped chunks is released (see
 * gpudyn_trim).  Synchronizes `stream`; no kernel may use the array meanwhile
 * (as for destroy).  A GGArray with a given heap or without VMM only releases
 * the reserve. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_trim(gpudyn_ggarray_t array, gpudyn_stream_t stream);
/** Fills `*view` and recomputes `ranges` on `stream`; at() and spans of kernels
 * launched after it on that stream see the elements present at that point.
 * Makes the growth arena ready first: the own one is allocated the first time
 * (OUT_OF_MEMORY naming budget_bytes when the device has not the memory); with
 * a given heap a run of it is taken when needed (see options.heap). */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_get_view(gpudyn_ggarray_t array, gpudyn_ggarray_view_t* view,
                                                   gpudyn_stream_t stream);
/** Raises the budget to at least `budget_bytes`: the own arena takes a run of
 * the difference from the stream-ordered pool (what the previous run had not
 * handed out stays unused), a given heap grows for all its users; smaller
 * values change nothing.  Call between
 * launches: kernels queued on `stream` after it can use the memory (views stay
 * valid), and LFVectors that a bucket the old budget could not give had sealed
 * may grow again (the status bits stay until clear_status).  Above
 * max_budget_bytes (the array's, or the given heap's range) INVALID_ARGUMENT;
 * without the memory OUT_OF_MEMORY (nothing changes); both name 'budget_bytes'.
 * Before the own arena is taken it only records the larger budget. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_set_budget(gpudyn_ggarray_t array, uint64_t budget_bytes,
                                                     gpudyn_stream_t stream);
/** The budget (bytes for kernels' buckets: the own arena's runs, or what it
 * will take when it is made, or the given heap's mapped memory) and the most set_budget may
 * raise it to.  Host-side values, no synchronization; either pointer may be NULL. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_get_budget(gpudyn_ggarray_t array, uint64_t* budget_bytes,
                                                     uint64_t* max_budget_bytes);
/** `*status` = the array's status bits (gpudyn_array_status_bits_t; 0: no push from
 * a kernel has failed since create / clear_status / clear).  Synchronizes `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_get_status(gpudyn_ggarray_t array, uint32_t* status, gpudyn_stream_t stream);
/** Zeroes the status bits and folds the LFVectors back to what they hold (a
 * failed reservation's range is given back), so that later pushes may succeed.
 * Stream-ordered. */
GPUDYN_API gpudyn_status_t gpudyn_ggarray_clear_status(gpudyn_ggarray_t array, gpudyn_stream_t stream);

/* ---- static array ----------------------------------------------------- */
typedef struct gpudyn_static_array_s* gpudyn_static_array_t;

typedef struct gpudyn_static_array_options_t {
    uint32_t struct_size;
    uint32_t element_size; /**< 1, 2, 4, 8 or 16 (default 4) */
    uint64_t capacity;     /**< elements, > 0, fixed for the array's life */
} gpudyn_static_array_options_t;

typedef struct gpudyn_static_array_view_t {
    uint32_t version; /**< GPUDYN_STATIC_ARRAY_VIEW_VERSION */
    uint32_t element_size;
    uint64_t data;      /**< device address of element 0 */
    uint64_t capacity;  /**< elements */
    uint64_t size;      /**< device uint64: reservation counter (blocks atomicAdd their range) */
    uint64_t status;    /**< device uint32: gpudyn_array_status_bits_t */
    uint64_t failed_at; /**< device uint64: lowest start of a reservation that did not fit
                                        (UINT64_MAX when none); the number of elements is
                                        min(`*size`, `*failed_at`): every range below it was stored, every
                                        range at or above it failed and stored nothing */
} gpudyn_static_array_view_t;

/** Fills `*options` with the defaults (element_size 4; capacity must still be set). */
GPUDYN_API gpudyn_status_t gpudyn_static_array_options_init(gpudyn_static_array_options_t* options);
/** Allocates `capacity` elements once (stream-ordered); size 0. */
GPUDYN_API gpudyn_status_t gpudyn_static_array_create(gpudyn_static_array_t* array,
                                                      const gpudyn_static_array_options_t* options,
                                                      gpudyn_stream_t stream);
/** Frees the storage stream-ordered after the array's last call (see gpudyn.h);
 * NULL is accepted. */
GPUDYN_API gpudyn_status_t gpudyn_static_array_destroy(gpudyn_static_array_t array);
/** As gpudyn_ggarray_push_back's buffers (values, mask).  Synchronizes;
 * OUT_OF_MEMORY when the elements do not fit (nothing stored; the status bits,
 * which report kernels' pushes, are unchanged). */
GPUDYN_API gpudyn_status_t gpudyn_static_array_push_back(gpudyn_static_array_t array, const void* values,
                                                         uint64_t count, const uint8_t* mask,
                                                         gpudyn_insert_algo_t algorithm, gpudyn_stream_t stream);
/** Number of elements; synchronizes `stream` to read it. */
GPUDYN_API gpudyn_status_t gpudyn_static_array_size(gpudyn_static_array_t array, uint64_t* size,
                                                    gpudyn_stream_t stream);
/** The fixed capacity, in elements. */
GPUDYN_API gpudyn_status_t gpudyn_static_array_capacity(gpudyn_static_array_t array, uint64_t* capacity);
/** capacity * element_size. */
GPUDYN_API gpudyn_status_t gpudyn_static_array_allocated_bytes(gpudyn_static_array_t array, uint64_t* bytes);
/** Device address of element 0 (contiguous storage, for zero-copy export). */
GPUDYN_API gpudyn_status_t gpudyn_static_array_data(gpudyn_static_array_t array, void** data);
/** Copies the elements to device memory `dst` of `dst_bytes` (>= size * element_size);
 * synchronizes to read the size. */
GPUDYN_API gpudyn_status_t gpudyn_static_array_flatten(gpudyn_static_array_t array, void* dst, uint64_t dst_bytes,
                                                       gpudyn_stream_t stream);
/** As flatten, into host memory; returns after the copy is complete. */
GPUDYN_API gpudyn_status_t gpudyn_static_array_copy_to_host(gpudyn_static_array_t array, void* dst, uint64_t dst_bytes,
                                                            gpudyn_stream_t stream);
/** As gpudyn_ggarray_size_async: the number of elements into the uint64 at
 * `size`, stream-ordered, no host wait. */
GPUDYN_API gpudyn_status_t gpudyn_static_array_size_async(gpudyn_static_array_t array, uint64_t* size,
                                                          gpudyn_stream_t stream);
/** As gpudyn_ggarray_flatten_async: the elements copied to dst when they fit in
 * dst_bytes (else nothing written and GPUDYN_ARRAY_STATUS_DESTINATION_TOO_SMALL
 * set), the size into `size` (may be NULL); stream-ordered, no host wait. */
GPUDYN_API gpudyn_status_t gpudyn_static_array_flatten_async(gpudyn_static_array_t array, void* dst, uint64_t dst_bytes,
                                                             uint64_t* size, gpudyn_stream_t stream);
/** Size 0 and status bits zeroed (stream-ordered); the storage is kept. */
GPUDYN_API gpudyn_status_t gpudyn_static_array_clear(gpudyn_static_array_t array, gpudyn_stream_t stream);
/** Fills `*view` for kernels (`gpudyn::static_array_ref<T>`). */
GPUDYN_API gpudyn_status_t gpudyn_static_array_get_view(gpudyn_static_array_t array, gpudyn_static_array_view_t* view);
/** `*status` = the status bits (gpudyn_array_status_bits_t) kernels' pushes set since
 * create / clear_status / clear.  Synchronizes `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_static_array_get_status(gpudyn_static_array_t array, uint32_t* status,
                                                          gpudyn_stream_t stream);
/** Zeroes the status bits and folds the counter back to the size (a failed
 * reservation's range is given back).  Stream-ordered. */
GPUDYN_API gpudyn_status_t gpudyn_static_array_clear_status(gpudyn_static_array_t array, gpudyn_stream_t stream);

/* ---- VMM array -------------------------------------------------------- */
typedef struct gpudyn_vmm_array_s* gpudyn_vmm_array_t;

typedef struct gpudyn_vmm_array_options_t {
    uint32_t struct_size;
    uint32_t element_size;     /**< 1, 2, 4, 8 or 16 (default 4) */
    uint64_t initial_capacity; /**< elements mapped at creation (default 0) */
    uint64_t max_capacity;     /**< most elements the array ever holds (reserve and push_back
                                        beyond it are OUT_OF_MEMORY); the virtual reservation;
                                        0: the device's total memory (default 0) */
} gpudyn_vmm_array_options_t;

typedef struct gpudyn_vmm_array_view_t {
    uint32_t version; /**< GPUDYN_VMM_ARRAY_VIEW_VERSION */
    uint32_t element_size;
    uint64_t data;      /**< device address of element 0; never changes */
    uint64_t capacity;  /**< elements mapped when the view was taken */
    uint64_t size;      /**< device uint64: reservation counter, as the static array */
    uint64_t status;    /**< device uint32 */
    uint64_t failed_at; /**< device uint64, as the static array */
} gpudyn_vmm_array_view_t;

/** Fills `*options` with the defaults listed beside each field. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_options_init(gpudyn_vmm_array_options_t* options);
/** Reserves the virtual range and maps initial_capacity elements; NOT_SUPPORTED when the
 * driver has no virtual memory management. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_create(gpudyn_vmm_array_t* array, const gpudyn_vmm_array_options_t* options,
                                                   gpudyn_stream_t stream);
/** Waits for the array's last call (its own event, not the device), unmaps and
 * releases everything; NULL is accepted. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_destroy(gpudyn_vmm_array_t array);
/** Maps physical memory (host calls cuMemCreate/cuMemMap/cuMemSetAccess, no copy,
 * the address stays) until capacity >= `capacity`.  OUT_OF_MEMORY when the
 * device is exhausted or `capacity` exceeds options->max_capacity (elements kept). */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_reserve(gpudyn_vmm_array_t array, uint64_t capacity,
                                                    gpudyn_stream_t stream);
/** Insertion never grows the mapping: beyond capacity it fails like the static array. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_push_back(gpudyn_vmm_array_t array, const void* values, uint64_t count,
                                                      const uint8_t* mask, gpudyn_insert_algo_t algorithm,
                                                      gpudyn_stream_t stream);
/** Number of elements; synchronizes `stream` to read it. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_size(gpudyn_vmm_array_t array, uint64_t* size, gpudyn_stream_t stream);
/** Elements currently mapped. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_capacity(gpudyn_vmm_array_t array, uint64_t* capacity);
/** Bytes of physical memory mapped. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_allocated_bytes(gpudyn_vmm_array_t array, uint64_t* bytes);
/** Device address of element 0; it never changes while the array lives. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_data(gpudyn_vmm_array_t array, void** data);
/** Copies the elements to device memory `dst` of `dst_bytes` (>= size * element_size);
 * synchronizes to read the size. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_flatten(gpudyn_vmm_array_t array, void* dst, uint64_t dst_bytes,
                                                    gpudyn_stream_t stream);
/** As flatten, into host memory; returns after the copy is complete. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_copy_to_host(gpudyn_vmm_array_t array, void* dst, uint64_t dst_bytes,
                                                         gpudyn_stream_t stream);
/** As gpudyn_ggarray_size_async: the number of elements into the uint64 at
 * `size`, stream-ordered, no host wait. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_size_async(gpudyn_vmm_array_t array, uint64_t* size,
                                                       gpudyn_stream_t stream);
/** As gpudyn_ggarray_flatten_async (dst_bytes checked, size on the device); stream-ordered, no host wait. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_flatten_async(gpudyn_vmm_array_t array, void* dst, uint64_t dst_bytes,
                                                          uint64_t* size, gpudyn_stream_t stream);
/** Size 0 and status bits zeroed (stream-ordered); the mapping is kept. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_clear(gpudyn_vmm_array_t array, gpudyn_stream_t stream);
/** Fills `*view` for kernels (`gpudyn::vmm_array_ref<T>`); capacity as of this call. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_get_view(gpudyn_vmm_array_t array, gpudyn_vmm_array_view_t* view);
/** As gpudyn_static_array_get_status: the status bits; synchronizes `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_get_status(gpudyn_vmm_array_t array, uint32_t* status,
                                                       gpudyn_stream_t stream);
/** As gpudyn_static_array_clear_status: zeroes the bits, folds the counter back.  Stream-ordered. */
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_clear_status(gpudyn_vmm_array_t array, gpudyn_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif /* GPUDYN_GGARRAY_H */
