/* The ABI fuzz test (issue 39): every export of the C ABI called with hostile
 * arguments -- counts near 2^64, struct sizes between and around the published
 * layouts, NULL / 0x1000 / unmapped / host-stack / unaligned / past-the-end /
 * other-device pointers -- and after each refused call:
 *   - the status is an error with a message, and nothing crashed;
 *   - with a GPU: the device reports no error (gpudyn_device_synchronize), and
 *     valid calls on the same structure (each launching a kernel, so that a
 *     CUDA error left pending in the library would fail them) succeed and read
 *     the same state as before the refused call.
 * Without a GPU the host-side checks run (NULL and garbage handles, struct
 * sizes, count bounds, option bounds) and the device part is skipped, saying so.
 *
 * Every call goes through C(fn), which records fn as covered; at the end the
 * exports declared in the headers (argv[1]: the include/gpudyn directory, every
 * line starting with GPUDYN_API) must be exactly the covered ones, so a new
 * export that this test does not call fails it. */
/* mmap/MAP_ANONYMOUS, opendir: POSIX beyond C99 (the build compiles with -std=c99). */
#define _DEFAULT_SOURCE
#include "check.h"

#include <gpudyn/experimental.h>
#include <gpudyn/gpudyn.h>

#include <dirent.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

/* ---- coverage ---------------------------------------------------------- */
#define MAX_EXPORTS 512
static const char* covered[MAX_EXPORTS];
static int n_covered = 0;

static int mark(const char* name) {
    for (int i = 0; i < n_covered; ++i)
        if (strcmp(covered[i], name) == 0) return 0;
    if (n_covered < MAX_EXPORTS) covered[n_covered++] = name;
    return 0;
}
/* C(gpudyn_x)(args): calls gpudyn_x and records it as covered. */
#define C(fn) (mark(#fn), fn)

/* ---- refusals -------------------------------------------------------- */
static int g_gpu = 0;      /* a device is usable */
static int g_pageable = 0; /* the device reaches pageable host memory (HMM/ATS): host pointers are accepted */

/* What the state of the structure under test reads; valid calls that launch a
 * kernel.  Returns nonzero when one of them failed. */
typedef int (*probe_fn)(void* handle, unsigned char* snapshot, size_t* bytes);
typedef struct subject {
    const char* name;
    void* handle;
    probe_fn probe;
    unsigned char before[1024];
    size_t bytes;
} subject;

static subject g_none = {"(no structure)", NULL, NULL, {0}, 0};
static subject* g_subject = &g_none;

static void take_baseline(subject* s) {
    s->bytes = 0;
    if (s->probe && s->probe(s->handle, s->before, &s->bytes) != 0) {
        fprintf(stderr, "%s: the baseline probe failed: %s\n", s->name, gpudyn_last_error_message());
        ++gpudyn_test_failures;
    }
    g_subject = s;
}

static void after_refusal(const char* call, const char* file, int line) {
    if (!g_gpu) return;
    char message[1024];
    snprintf(message, sizeof message, "%s", gpudyn_last_error_message());
    if (C(gpudyn_device_synchronize)() != GPUDYN_SUCCESS) {
        fprintf(stderr, "%s:%d: after the refused %s (%s) the device reports an error: %s\n", file, line, call, message,
                gpudyn_last_error_message());
        ++gpudyn_test_failures;
        return;
    }
    subject* s = g_subject;
    if (s->probe == NULL) return;
    unsigned char now[sizeof s->before];
    size_t bytes = 0;
    if (s->probe(s->handle, now, &bytes) != 0) {
        fprintf(stderr, "%s:%d: after the refused %s (%s) a valid call on the %s failed: %s\n", file, line, call,
                message, s->name, gpudyn_last_error_message());
        ++gpudyn_test_failures;
    } else if (bytes != s->bytes || memcmp(now, s->before, bytes) != 0) {
        fprintf(stderr, "%s:%d: the refused %s (%s) changed the %s\n", file, line, call, message, s->name);
        ++gpudyn_test_failures;
    }
}

/* The call must fail (any error status) with a message, the context healthy after it. */
#define REFUSE(call)                                                                                 \
    do {                                                                                             \
        gpudyn_status_t s_ = (call);                                                                 \
        if (s_ == GPUDYN_SUCCESS) {                                                                  \
            fprintf(stderr, "%s:%d: %s succeeded, expected a refusal\n", __FILE__, __LINE__, #call); \
            ++gpudyn_test_failures;                                                                  \
        } else if (gpudyn_last_error_message()[0] == '\0') {                                         \
            fprintf(stderr, "%s:%d: %s failed (%s) without a message\n", __FILE__, __LINE__, #call,  \
                    gpudyn_status_string(s_));                                                       \
            ++gpudyn_test_failures;                                                                  \
        }                                                                                            \
        after_refusal(#call, __FILE__, __LINE__);                                                    \
    } while (0)

/* INVALID_ARGUMENT naming `argname`, the context healthy after it. */
#define REFUSE_ARG(call, argname)                 \
    do {                                          \
        CHECK_INVALID(call, argname);             \
        after_refusal(#call, __FILE__, __LINE__); \
    } while (0)

/* Without a device the call fails with NO_DEVICE; with one it succeeds. */
#define DEVICE_OK(call) CHECK_STATUS(call, g_gpu ? GPUDYN_SUCCESS : GPUDYN_ERROR_NO_DEVICE)

/* ---- hostile values -------------------------------------------------- */
static const uint64_t kHugeCounts[] = {1ull << 63, UINT64_MAX, UINT64_MAX / 8 + 1, (1ull << 57) + 1, UINT64_MAX - 1};
#define N_HUGE (sizeof kHugeCounts / sizeof kHugeCounts[0])
#define GARBAGE ((void*)0x1000)
#define GARBAGE2 ((void*)(uintptr_t)0xffff)

/* Struct sizes that are no published layout of a struct whose only one is `known`. */
static int bad_sizes(uint32_t known, uint32_t* out) {
    int n = 0;
    out[n++] = 0;
    out[n++] = 1;
    out[n++] = 4;
    out[n++] = known - 1;
    out[n++] = known + 1;
    out[n++] = known + 8;
    out[n++] = known * 2;
    out[n++] = UINT32_MAX;
    return n;
}

/* ---- the device part's buffers ---------------------------------------- */
#define DEVB (2u << 20)          /* bytes of each device buffer: a whole 2 MiB granule, so its extent is exact */
static unsigned char* D = NULL;  /* device, zeroed */
static unsigned char* D2 = NULL; /* device, zeroed */
static unsigned char* F = NULL;  /* device memory of another device (NULL: one device only) */
static void* g_unmapped = NULL;  /* a host address mapped once and unmapped since */
static uint64_t g_zero_host[64]; /* pageable host memory, zero */

/* Pointer/count pairs a device array argument of elements of `e` bytes must refuse. */
typedef struct bad_array {
    const void* ptr;
    uint64_t count;
    const char* what;
} bad_array;

static int bad_arrays(uint32_t e, const void* stack, bad_array* out) {
    int n = 0;
    out[n++] = (bad_array){NULL, 1, "NULL"};
    out[n++] = (bad_array){GARBAGE, 1, "0x1000"};
    out[n++] = (bad_array){GARBAGE2, 1, "0xffff"};
    if (g_unmapped) out[n++] = (bad_array){g_unmapped, 1, "an unmapped host address"};
    if (e > 1) out[n++] = (bad_array){D + 1, 1, "unaligned"};
    if (e > 2) out[n++] = (bad_array){D + e / 2, 1, "unaligned by half"};
    out[n++] = (bad_array){D + DEVB - e, 2, "the last element, count 2: past the end"};
    out[n++] = (bad_array){D + DEVB / 2, DEVB / 2 / e + 1, "interior, one past the end"};
    out[n++] = (bad_array){D, DEVB / e + 1, "one element more than the allocation"};
    for (size_t i = 0; i < N_HUGE; ++i) out[n++] = (bad_array){D, kHugeCounts[i], "a count near 2^64"};
    if (!g_pageable) out[n++] = (bad_array){stack, 1, "the host stack"};
    if (!g_pageable) out[n++] = (bad_array){g_zero_host, 1, "pageable host memory"};
    if (F) out[n++] = (bad_array){F, 1, "another device's memory"};
    return n;
}
#define MAX_BAD 32

/* ---- host part: handles, struct sizes, option bounds ------------------- */

/* Kinds of handles, for handle_cases' `skip`. */
enum {
    K_NONE,
    K_HEAP,
    K_RW_HEAP,
    K_WARP_HEAP,
    K_GGARRAY,
    K_STATIC,
    K_VMM
};

/* Every call taking a handle, with handle `h` (NULL, garbage, a host address
 * that is no handle, or a live handle of kind `skip`, whose own calls are
 * skipped): INVALID naming it, nothing dereferenced. */
static void handle_cases(void* h, int skip) {
    uint64_t u64 = 0, u64b = 0;
    uint32_t u32 = 0;
    void* p = NULL;
    if (skip != K_HEAP) {
        gpudyn_heap_view_t hv;
        gpudyn_heap_stats_t hs;
        hs.struct_size = sizeof hs;
        REFUSE_ARG(C(gpudyn_heap_get_view)((gpudyn_heap_t)h, &hv), "heap");
        REFUSE_ARG(C(gpudyn_heap_grow)((gpudyn_heap_t)h, 1u << 20, NULL), "heap");
        REFUSE_ARG(C(gpudyn_heap_get_stats)((gpudyn_heap_t)h, &hs, NULL), "heap");
        REFUSE_ARG(C(gpudyn_heap_clear_status)((gpudyn_heap_t)h, NULL), "heap");
        REFUSE_ARG(C(gpudyn_heap_check)((gpudyn_heap_t)h, NULL), "heap");
        REFUSE_ARG(C(gpudyn_heap_malloc)((gpudyn_heap_t)h, &u64, &u64b, 1, NULL), "heap");
        REFUSE_ARG(C(gpudyn_heap_free)((gpudyn_heap_t)h, &u64, 1, NULL), "heap");
        REFUSE_ARG(C(gpudyn_heap_reset)((gpudyn_heap_t)h, NULL), "heap");
    }

    if (skip != K_RW_HEAP) {
        gpudyn_rw_heap_view_t rv;
        gpudyn_rw_heap_info_t ri;
        ri.struct_size = sizeof ri;
        gpudyn_exp_rw_heap_stats_t rs;
        rs.struct_size = sizeof rs;
        gpudyn_rw_heap_t r = (gpudyn_rw_heap_t)h;
        REFUSE_ARG(C(gpudyn_rw_heap_get_view)(r, &rv), "heap");
        REFUSE_ARG(C(gpudyn_rw_heap_get_pages)(r, &u32, 1, GPUDYN_RW_HEAP_RW_BM, NULL), "heap");
        REFUSE_ARG(C(gpudyn_rw_heap_free_pages)(r, &u32, 1, NULL), "heap");
        REFUSE_ARG(C(gpudyn_rw_heap_malloc)(r, &u64, &u64b, 1, NULL), "heap");
        REFUSE_ARG(C(gpudyn_rw_heap_free)(r, &u64, 1, NULL), "heap");
        REFUSE_ARG(C(gpudyn_rw_heap_max_malloc_size)(r, &u64), "heap");
        REFUSE_ARG(C(gpudyn_rw_heap_reset)(r, NULL), "heap");
        REFUSE_ARG(C(gpudyn_rw_heap_free_page_count)(r, &u64, NULL), "heap");
        REFUSE_ARG(C(gpudyn_rw_heap_get_info)(r, &ri, NULL), "heap");
        REFUSE_ARG(C(gpudyn_rw_heap_check)(r, NULL), "heap");
        REFUSE_ARG(C(gpudyn_exp_rw_heap_get_pages)(r, &u32, 1, GPUDYN_RW_HEAP_RW_BM, 1, 7, &rs, NULL), "heap");
        REFUSE_ARG(C(gpudyn_exp_rw_heap_malloc)(r, &u64, &u64b, 1, 7, NULL), "heap");
        REFUSE_ARG(C(gpudyn_exp_rw_heap_occupy)(r, 0.5, 7, NULL), "heap");
    }

    if (skip != K_WARP_HEAP) {
        gpudyn_warp_heap_view_t wv;
        gpudyn_warp_heap_stats_t ws;
        gpudyn_warp_heap_t w = (gpudyn_warp_heap_t)h;
        REFUSE_ARG(C(gpudyn_warp_heap_get_view)(w, &wv), "heap");
        REFUSE_ARG(C(gpudyn_warp_heap_alloc_batch)(w, &u64, 1, &p, NULL), "heap");
        REFUSE_ARG(C(gpudyn_warp_heap_release)(w, NULL), "heap");
        REFUSE_ARG(C(gpudyn_warp_heap_batch_count)(w, &u64), "heap");
        REFUSE_ARG(C(gpudyn_warp_heap_get_stats)(w, &ws, NULL), "heap");
        REFUSE_ARG(C(gpudyn_warp_heap_check)(w, NULL), "heap");
        REFUSE_ARG(C(gpudyn_warp_heap_backing_free_bytes)(w, &u64, NULL), "heap");
        REFUSE_ARG(C(gpudyn_warp_heap_free_kept)(w, &p, 1, NULL), "heap");
        REFUSE_ARG(C(gpudyn_warp_heap_tidy_up_kept)(w, &p, 1, NULL), "heap");
    }

    if (skip != K_GGARRAY) {
        gpudyn_ggarray_t g = (gpudyn_ggarray_t)h;
        gpudyn_ggarray_view_t gv;
        REFUSE_ARG(C(gpudyn_ggarray_reserve)(g, 10, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_push_back)(g, &u64, 1, NULL, GPUDYN_INSERT_ATOMIC, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_size)(g, &u64, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_capacity)(g, &u64, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_allocated_bytes)(g, &u64, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_flatten)(g, &u64, 8, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_copy_to_host)(g, &u64, 8, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_size_async)(g, &u64, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_flatten_async)(g, &u64, 8, &u64b, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_clear)(g, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_trim)(g, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_get_view)(g, &gv, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_set_budget)(g, 1u << 22, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_get_budget)(g, &u64, &u64b), "array");
        REFUSE_ARG(C(gpudyn_ggarray_get_status)(g, &u32, NULL), "array");
        REFUSE_ARG(C(gpudyn_ggarray_clear_status)(g, NULL), "array");
    }

    if (skip != K_STATIC) {
        gpudyn_static_array_t sa = (gpudyn_static_array_t)h;
        gpudyn_static_array_view_t sv;
        REFUSE_ARG(C(gpudyn_static_array_push_back)(sa, &u64, 1, NULL, GPUDYN_INSERT_ATOMIC, NULL), "array");
        REFUSE_ARG(C(gpudyn_static_array_size)(sa, &u64, NULL), "array");
        REFUSE_ARG(C(gpudyn_static_array_capacity)(sa, &u64), "array");
        REFUSE_ARG(C(gpudyn_static_array_allocated_bytes)(sa, &u64), "array");
        REFUSE_ARG(C(gpudyn_static_array_data)(sa, &p), "array");
        REFUSE_ARG(C(gpudyn_static_array_flatten)(sa, &u64, 8, NULL), "array");
        REFUSE_ARG(C(gpudyn_static_array_copy_to_host)(sa, &u64, 8, NULL), "array");
        REFUSE_ARG(C(gpudyn_static_array_size_async)(sa, &u64, NULL), "array");
        REFUSE_ARG(C(gpudyn_static_array_flatten_async)(sa, &u64, 8, &u64b, NULL), "array");
        REFUSE_ARG(C(gpudyn_static_array_clear)(sa, NULL), "array");
        REFUSE_ARG(C(gpudyn_static_array_get_view)(sa, &sv), "array");
        REFUSE_ARG(C(gpudyn_static_array_get_status)(sa, &u32, NULL), "array");
        REFUSE_ARG(C(gpudyn_static_array_clear_status)(sa, NULL), "array");
    }

    if (skip != K_VMM) {
        gpudyn_vmm_array_t va = (gpudyn_vmm_array_t)h;
        gpudyn_vmm_array_view_t vv;
        REFUSE_ARG(C(gpudyn_vmm_array_reserve)(va, 10, NULL), "array");
        REFUSE_ARG(C(gpudyn_vmm_array_push_back)(va, &u64, 1, NULL, GPUDYN_INSERT_ATOMIC, NULL), "array");
        REFUSE_ARG(C(gpudyn_vmm_array_size)(va, &u64, NULL), "array");
        REFUSE_ARG(C(gpudyn_vmm_array_capacity)(va, &u64), "array");
        REFUSE_ARG(C(gpudyn_vmm_array_allocated_bytes)(va, &u64), "array");
        REFUSE_ARG(C(gpudyn_vmm_array_data)(va, &p), "array");
        REFUSE_ARG(C(gpudyn_vmm_array_flatten)(va, &u64, 8, NULL), "array");
        REFUSE_ARG(C(gpudyn_vmm_array_copy_to_host)(va, &u64, 8, NULL), "array");
        REFUSE_ARG(C(gpudyn_vmm_array_size_async)(va, &u64, NULL), "array");
        REFUSE_ARG(C(gpudyn_vmm_array_flatten_async)(va, &u64, 8, &u64b, NULL), "array");
        REFUSE_ARG(C(gpudyn_vmm_array_clear)(va, NULL), "array");
        REFUSE_ARG(C(gpudyn_vmm_array_get_view)(va, &vv), "array");
        REFUSE_ARG(C(gpudyn_vmm_array_get_status)(va, &u32, NULL), "array");
        REFUSE_ARG(C(gpudyn_vmm_array_clear_status)(va, NULL), "array");
    }

    if (h == NULL) { /* destroy accepts NULL */
        CHECK_OK(C(gpudyn_heap_destroy)(NULL));
        CHECK_OK(C(gpudyn_rw_heap_destroy)(NULL));
        CHECK_OK(C(gpudyn_warp_heap_destroy)(NULL));
        CHECK_OK(C(gpudyn_ggarray_destroy)(NULL));
        CHECK_OK(C(gpudyn_static_array_destroy)(NULL));
        CHECK_OK(C(gpudyn_vmm_array_destroy)(NULL));
    } else { /* garbage and other kinds' handles are refused, not dereferenced (nor destroyed) */
        if (skip != K_HEAP) REFUSE_ARG(C(gpudyn_heap_destroy)((gpudyn_heap_t)h), "heap");
        if (skip != K_RW_HEAP) REFUSE_ARG(C(gpudyn_rw_heap_destroy)((gpudyn_rw_heap_t)h), "heap");
        if (skip != K_WARP_HEAP) REFUSE_ARG(C(gpudyn_warp_heap_destroy)((gpudyn_warp_heap_t)h), "heap");
        if (skip != K_GGARRAY) REFUSE_ARG(C(gpudyn_ggarray_destroy)((gpudyn_ggarray_t)h), "array");
        if (skip != K_STATIC) REFUSE_ARG(C(gpudyn_static_array_destroy)((gpudyn_static_array_t)h), "array");
        if (skip != K_VMM) REFUSE_ARG(C(gpudyn_vmm_array_destroy)((gpudyn_vmm_array_t)h), "array");
    }
}

/* `create` refuses its options of type T with every struct_size but the published
 * ones (bad_sizes), naming struct_size. */
#define REFUSE_STRUCT_SIZES(T, opts, create, out)                 \
    do {                                                          \
        uint32_t sizes_[16];                                      \
        const int n_ = bad_sizes(sizeof(opts), sizes_);           \
        for (int i_ = 0; i_ < n_; ++i_) {                         \
            T b_ = (opts);                                        \
            b_.struct_size = sizes_[i_];                          \
            REFUSE_ARG(C(create)(out, &b_, NULL), "struct_size"); \
        }                                                         \
    } while (0)

/* Option structs: initializers, struct sizes, NULL/garbage options and out-handles, bounds. */
static void option_cases(void) {
    /* heap */
    gpudyn_heap_options_t ho;
    REFUSE_ARG(C(gpudyn_heap_options_init)(NULL), "options");
    REFUSE_ARG(C(gpudyn_heap_options_init)(GARBAGE), "options");
    CHECK_OK(C(gpudyn_heap_options_init)(&ho));
    gpudyn_heap_t h = NULL;
    REFUSE_ARG(C(gpudyn_heap_create)(NULL, &ho, NULL), "heap");
    REFUSE_ARG(C(gpudyn_heap_create)(GARBAGE, &ho, NULL), "heap");
    REFUSE_ARG(C(gpudyn_heap_create)(&h, NULL, NULL), "options");
    REFUSE_ARG(C(gpudyn_heap_create)(&h, GARBAGE, NULL), "options");
    REFUSE_STRUCT_SIZES(gpudyn_heap_options_t, ho, gpudyn_heap_create, &h);
    for (size_t i = 0; i < N_HUGE; ++i) {
        gpudyn_heap_options_t b = ho;
        b.initial_bytes = kHugeCounts[i];
        REFUSE_ARG(C(gpudyn_heap_create)(&h, &b, NULL), "initial_bytes");
        b = ho;
        b.max_bytes = kHugeCounts[i];
        REFUSE_ARG(C(gpudyn_heap_create)(&h, &b, NULL), "max_bytes");
        b = ho;
        b.page_size = kHugeCounts[i];
        REFUSE_ARG(C(gpudyn_heap_create)(&h, &b, NULL), "page_size");
    }
    CHECK(h == NULL);

    /* rw_heap */
    gpudyn_rw_heap_options_t ro;
    REFUSE_ARG(C(gpudyn_rw_heap_options_init)(NULL), "options");
    CHECK_OK(C(gpudyn_rw_heap_options_init)(&ro));
    gpudyn_rw_heap_t r = NULL;
    REFUSE_ARG(C(gpudyn_rw_heap_create)(NULL, &ro, NULL), "heap");
    REFUSE_ARG(C(gpudyn_rw_heap_create)(&r, GARBAGE, NULL), "options");
    REFUSE_STRUCT_SIZES(gpudyn_rw_heap_options_t, ro, gpudyn_rw_heap_create, &r);
    for (size_t i = 0; i < N_HUGE; ++i) {
        gpudyn_rw_heap_options_t b = ro;
        b.page_count = kHugeCounts[i];
        REFUSE_ARG(C(gpudyn_rw_heap_create)(&r, &b, NULL), "page_count");
        b = ro;
        b.page_size = kHugeCounts[i] & ~15ull; /* a multiple of 16: only the product overflows */
        REFUSE(C(gpudyn_rw_heap_create)(&r, &b, NULL));
    }
    CHECK(r == NULL);

    /* warp heap */
    gpudyn_warp_heap_options_t wo;
    REFUSE_ARG(C(gpudyn_warp_heap_options_init)(NULL), "options");
    CHECK_OK(C(gpudyn_warp_heap_options_init)(&wo));
    gpudyn_warp_heap_t w = NULL;
    REFUSE_ARG(C(gpudyn_warp_heap_create)(NULL, &wo, NULL), "heap");
    REFUSE_ARG(C(gpudyn_warp_heap_create)(&w, GARBAGE, NULL), "options");
    REFUSE_STRUCT_SIZES(gpudyn_warp_heap_options_t, wo, gpudyn_warp_heap_create, &w);
    for (size_t i = 0; i < N_HUGE; ++i) {
        gpudyn_warp_heap_options_t b = wo;
        b.superblock_bytes = kHugeCounts[i];
        REFUSE_ARG(C(gpudyn_warp_heap_create)(&w, &b, NULL), "superblock_bytes");
        b = wo;
        b.arena_header_slots = kHugeCounts[i];
        REFUSE_ARG(C(gpudyn_warp_heap_create)(&w, &b, NULL), "arena");
        b = wo;
        b.arena_chunk_bytes = kHugeCounts[i] & ~15ull;
        REFUSE(C(gpudyn_warp_heap_create)(&w, &b, NULL));
    }
    {
        gpudyn_warp_heap_options_t b = wo;
        b.backing = GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP;
        b.page_heap = GARBAGE;
        REFUSE_ARG(C(gpudyn_warp_heap_create)(&w, &b, NULL), "page_heap");
        b.page_heap = g_zero_host; /* mapped, but no page heap */
        REFUSE_ARG(C(gpudyn_warp_heap_create)(&w, &b, NULL), "page_heap");
        b.backing = 3;
        REFUSE_ARG(C(gpudyn_warp_heap_create)(&w, &b, NULL), "backing");
    }
    CHECK(w == NULL);

    /* GGArray: two published layouts, 40 (before max_budget_bytes) and 56 */
    gpudyn_ggarray_options_t go;
    REFUSE_ARG(C(gpudyn_ggarray_options_init)(NULL), "options");
    CHECK_OK(C(gpudyn_ggarray_options_init)(&go));
    CHECK(go.struct_size == 56 && offsetof(gpudyn_ggarray_options_t, max_budget_bytes) == 40);
    gpudyn_ggarray_t g = NULL;
    REFUSE_ARG(C(gpudyn_ggarray_create)(NULL, &go, NULL), "array");
    REFUSE_ARG(C(gpudyn_ggarray_create)(&g, GARBAGE, NULL), "options");
    const uint32_t g_bad[] = {0, 1, 4, 39, 41, 44, 48, 52, 55, 57, 64, 112, UINT32_MAX};
    for (size_t i = 0; i < sizeof g_bad / sizeof g_bad[0]; ++i) {
        gpudyn_ggarray_options_t b = go;
        b.struct_size = g_bad[i];
        b.heap = (gpudyn_heap_t)GARBAGE; /* half of it would arrive with 52 or 55 */
        REFUSE_ARG(C(gpudyn_ggarray_create)(&g, &b, NULL), "struct_size");
    }
    {
        gpudyn_ggarray_options_t b = go;
        b.heap = (gpudyn_heap_t)GARBAGE;
        REFUSE_ARG(C(gpudyn_ggarray_create)(&g, &b, NULL), "heap");
        b.heap = (gpudyn_heap_t)g_zero_host; /* mapped, but no heap */
        REFUSE_ARG(C(gpudyn_ggarray_create)(&g, &b, NULL), "heap");
    }
    for (size_t i = 0; i < N_HUGE; ++i) {
        gpudyn_ggarray_options_t b = go;
        b.first_bucket_elements = kHugeCounts[i];
        REFUSE_ARG(C(gpudyn_ggarray_create)(&g, &b, NULL), "first_bucket_elements");
        b = go;
        b.budget_bytes = kHugeCounts[i];
        b.max_budget_bytes = kHugeCounts[i];
        REFUSE(C(gpudyn_ggarray_create)(&g, &b, NULL)); /* more than the device (NO_DEVICE without one) */
    }
    {
        gpudyn_ggarray_options_t b = go;
        b.num_lfvectors = UINT32_MAX;
        REFUSE_ARG(C(gpudyn_ggarray_create)(&g, &b, NULL), "num_lfvectors");
        b = go;
        b.element_size = 3;
        REFUSE_ARG(C(gpudyn_ggarray_create)(&g, &b, NULL), "element_size");
    }
    CHECK(g == NULL);

    /* static array */
    gpudyn_static_array_options_t so;
    REFUSE_ARG(C(gpudyn_static_array_options_init)(NULL), "options");
    CHECK_OK(C(gpudyn_static_array_options_init)(&so));
    so.capacity = 256;
    gpudyn_static_array_t sa = NULL;
    REFUSE_ARG(C(gpudyn_static_array_create)(NULL, &so, NULL), "array");
    REFUSE_ARG(C(gpudyn_static_array_create)(&sa, GARBAGE, NULL), "options");
    REFUSE_STRUCT_SIZES(gpudyn_static_array_options_t, so, gpudyn_static_array_create, &sa);
    for (size_t i = 0; i < N_HUGE; ++i) {
        gpudyn_static_array_options_t b = so;
        b.capacity = kHugeCounts[i];
        b.element_size = 16;
        REFUSE(C(gpudyn_static_array_create)(&sa, &b, NULL)); /* too large, or more than the device */
    }
    CHECK(sa == NULL);

    /* VMM array */
    gpudyn_vmm_array_options_t vo;
    REFUSE_ARG(C(gpudyn_vmm_array_options_init)(NULL), "options");
    CHECK_OK(C(gpudyn_vmm_array_options_init)(&vo));
    gpudyn_vmm_array_t va = NULL;
    REFUSE_ARG(C(gpudyn_vmm_array_create)(NULL, &vo, NULL), "array");
    REFUSE_ARG(C(gpudyn_vmm_array_create)(&va, GARBAGE, NULL), "options");
    REFUSE_STRUCT_SIZES(gpudyn_vmm_array_options_t, vo, gpudyn_vmm_array_create, &va);
    for (size_t i = 0; i < N_HUGE; ++i) {
        gpudyn_vmm_array_options_t b = vo;
        b.max_capacity = kHugeCounts[i];
        b.initial_capacity = kHugeCounts[i];
        REFUSE_ARG(C(gpudyn_vmm_array_create)(&va, &b, NULL), "max_capacity");
    }
    CHECK(va == NULL);
}

/* The core calls: queries, raw memory, struct sizes of the device info. */
static void core_host_cases(void) {
    CHECK(C(gpudyn_get_version)() == GPUDYN_VERSION_NUMBER);
    CHECK(C(gpudyn_status_string)((gpudyn_status_t)-1) != NULL);
    CHECK(C(gpudyn_status_string)((gpudyn_status_t)0x7fffffff) != NULL);
    CHECK(C(gpudyn_last_error_message)() != NULL);
    REFUSE_ARG(C(gpudyn_get_device_count)(NULL), "count");
    REFUSE_ARG(C(gpudyn_get_device_count)(GARBAGE), "count");
    REFUSE_ARG(C(gpudyn_get_device)(NULL), "device");
    REFUSE_ARG(C(gpudyn_get_device)(GARBAGE), "device");
    REFUSE(C(gpudyn_set_device)(-1));
    REFUSE(C(gpudyn_set_device)(INT32_MAX));
    REFUSE(C(gpudyn_set_device)(INT32_MIN));
    REFUSE_ARG(C(gpudyn_stream_get_device)(NULL, NULL), "device");
    REFUSE_ARG(C(gpudyn_stream_get_device)(NULL, GARBAGE), "device");
    REFUSE_ARG(C(gpudyn_pointer_get_device)(GARBAGE, NULL), "device");
    {
        int32_t dev = 5;
        const gpudyn_status_t s = C(gpudyn_pointer_get_device)(GARBAGE, &dev); /* a query: any pointer, -1 */
        CHECK(s == GPUDYN_SUCCESS || s == GPUDYN_ERROR_NO_DEVICE);
        CHECK(dev == -1);
    }
    gpudyn_device_info_t info;
    memset(&info, 0, sizeof info);
    REFUSE_ARG(C(gpudyn_get_device_info)(0, NULL), "info");
    REFUSE_ARG(C(gpudyn_get_device_info)(0, GARBAGE), "info");
    uint32_t sizes[16];
    const int n = bad_sizes(sizeof info, sizes);
    for (int i = 0; i < n; ++i) {
        info.struct_size = sizes[i];
        REFUSE_ARG(C(gpudyn_get_device_info)(0, &info), "struct_size");
    }
    info.struct_size = sizeof info;
    REFUSE(C(gpudyn_get_device_info)(-1, &info));
    REFUSE(C(gpudyn_get_device_info)(INT32_MAX, &info));
    int32_t rt = 0, drv = 0;
    REFUSE_ARG(C(gpudyn_get_cuda_versions)(NULL, &drv), "runtime_version");
    REFUSE_ARG(C(gpudyn_get_cuda_versions)(&rt, GARBAGE), "driver_version");
    CHECK_OK(C(gpudyn_get_cuda_versions)(&rt, &drv));
    {
        const char *sass = GARBAGE, *ptx = GARBAGE;
        REFUSE_ARG(C(gpudyn_get_build_archs)(NULL, &ptx), "sass_archs");
        REFUSE_ARG(C(gpudyn_get_build_archs)(&sass, NULL), "ptx_arch");
        CHECK(ptx == GARBAGE); /* refused: nothing written */
        CHECK_OK(C(gpudyn_get_build_archs)(&sass, &ptx));
        CHECK(sass != NULL && ptx != NULL && strlen(sass) > 0);
    }

    void* p = (void*)1;
    REFUSE_ARG(C(gpudyn_device_alloc)(NULL, 16, NULL), "ptr");
    REFUSE_ARG(C(gpudyn_device_alloc)(GARBAGE, 16, NULL), "ptr");
    REFUSE_ARG(C(gpudyn_device_alloc)(&p, 0, NULL), "bytes");
    for (size_t i = 0; i < N_HUGE; ++i) {
        p = (void*)1;
        REFUSE(C(gpudyn_device_alloc)(&p, kHugeCounts[i], NULL)); /* OUT_OF_MEMORY (NO_DEVICE without one) */
        CHECK(p == NULL);
    }
    REFUSE_ARG(C(gpudyn_device_free)(GARBAGE, NULL), "ptr");
    CHECK_OK(C(gpudyn_device_free)(NULL, NULL));

    /* Raw copies: counts near 2^64 are refused on the host, before any device. */
    char host[64];
    for (size_t i = 0; i < N_HUGE; ++i) {
        REFUSE_ARG(C(gpudyn_memcpy)(host + 1, host, kHugeCounts[i], GPUDYN_MEMCPY_HOST_TO_DEVICE, NULL), "bytes");
        REFUSE_ARG(C(gpudyn_memcpy)(host, host + 1, kHugeCounts[i], GPUDYN_MEMCPY_DEVICE_TO_DEVICE, NULL), "bytes");
        REFUSE_ARG(C(gpudyn_memset)(host, 0, kHugeCounts[i], NULL), "bytes");
    }
    REFUSE_ARG(C(gpudyn_memcpy)(GARBAGE, host, 8, GPUDYN_MEMCPY_HOST_TO_DEVICE, NULL), "dst");
    REFUSE_ARG(C(gpudyn_memcpy)(host, GARBAGE, 8, GPUDYN_MEMCPY_DEVICE_TO_HOST, NULL), "src");
    REFUSE_ARG(C(gpudyn_memcpy)(host, host, 8, (gpudyn_memcpy_kind_t)0, NULL), "kind");
    REFUSE_ARG(C(gpudyn_memcpy)(host, host, 8, (gpudyn_memcpy_kind_t)-7, NULL), "kind");
    REFUSE_ARG(C(gpudyn_memset)(GARBAGE, 0, 8, NULL), "dst");
    REFUSE_ARG(C(gpudyn_memset)(host, 256, 8, NULL), "value");
    REFUSE_ARG(C(gpudyn_memset)(host, -1, 8, NULL), "value");

    REFUSE_ARG(C(gpudyn_trim)(0, GARBAGE), "bytes");
    REFUSE(C(gpudyn_trim)(-1, NULL)); /* INVALID_ARGUMENT naming 'device' (NO_DEVICE without one) */
    REFUSE(C(gpudyn_trim)(INT32_MAX, NULL));
    DEVICE_OK(C(gpudyn_trim)(0, NULL));

    DEVICE_OK(C(gpudyn_stream_synchronize)(NULL));
    DEVICE_OK(C(gpudyn_device_synchronize)());
    CHECK_OK(C(gpudyn_stream_wait)(NULL, NULL)); /* the same stream: nothing to do */
    DEVICE_OK(C(gpudyn_stream_wait)((gpudyn_stream_t)1, (gpudyn_stream_t)2));
}

/* ---- device part ---------------------------------------------------------- */

static int probe_heap(void* handle, unsigned char* out, size_t* bytes) {
    gpudyn_heap_stats_t st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    if (C(gpudyn_heap_get_stats)((gpudyn_heap_t)handle, &st, NULL) != GPUDYN_SUCCESS) return 1;
    memcpy(out, &st, sizeof st);
    *bytes = sizeof st;
    return C(gpudyn_heap_check)((gpudyn_heap_t)handle, NULL) != GPUDYN_SUCCESS;
}

static int probe_rw_heap(void* handle, unsigned char* out, size_t* bytes) {
    gpudyn_rw_heap_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (C(gpudyn_rw_heap_get_info)((gpudyn_rw_heap_t)handle, &info, NULL) != GPUDYN_SUCCESS) return 1;
    memcpy(out, &info, sizeof info);
    *bytes = sizeof info;
    return C(gpudyn_rw_heap_check)((gpudyn_rw_heap_t)handle, NULL) != GPUDYN_SUCCESS;
}

static int probe_warp_heap(void* handle, unsigned char* out, size_t* bytes) {
    gpudyn_warp_heap_t h = (gpudyn_warp_heap_t)handle;
    /* A kernel (one NULL header: skipped), then the counters and the batches. */
    if (C(gpudyn_warp_heap_free_kept)(h, (void* const*)D2, 1, NULL) != GPUDYN_SUCCESS) return 1;
    gpudyn_warp_heap_stats_t st;
    uint64_t batches = 0, free_bytes = 0;
    if (C(gpudyn_warp_heap_get_stats)(h, &st, NULL) != GPUDYN_SUCCESS) return 1;
    if (C(gpudyn_warp_heap_batch_count)(h, &batches) != GPUDYN_SUCCESS) return 1;
    if (C(gpudyn_warp_heap_backing_free_bytes)(h, &free_bytes, NULL) != GPUDYN_SUCCESS) return 1;
    memcpy(out, &st, sizeof st);
    memcpy(out + sizeof st, &batches, 8);
    memcpy(out + sizeof st + 8, &free_bytes, 8);
    *bytes = sizeof st + 16;
    return C(gpudyn_warp_heap_check)(h, NULL) != GPUDYN_SUCCESS;
}

static int probe_ggarray(void* handle, unsigned char* out, size_t* bytes) {
    gpudyn_ggarray_t a = (gpudyn_ggarray_t)handle;
    uint64_t v[5] = {0, 0, 0, 0, 0};
    uint32_t status = 0;
    if (C(gpudyn_ggarray_size)(a, &v[0], NULL) != GPUDYN_SUCCESS) return 1;     /* a kernel */
    if (C(gpudyn_ggarray_capacity)(a, &v[1], NULL) != GPUDYN_SUCCESS) return 1; /* a kernel */
    if (C(gpudyn_ggarray_allocated_bytes)(a, &v[2], NULL) != GPUDYN_SUCCESS) return 1;
    if (C(gpudyn_ggarray_get_budget)(a, &v[3], &v[4]) != GPUDYN_SUCCESS) return 1;
    if (C(gpudyn_ggarray_get_status)(a, &status, NULL) != GPUDYN_SUCCESS) return 1;
    memcpy(out, v, sizeof v);
    memcpy(out + sizeof v, &status, 4);
    *bytes = sizeof v + 4;
    return 0;
}

static int probe_static(void* handle, unsigned char* out, size_t* bytes) {
    gpudyn_static_array_t a = (gpudyn_static_array_t)handle;
    uint64_t v[3] = {0, 0, 0};
    uint32_t status = 0;
    void* data = NULL;
    if (C(gpudyn_static_array_clear_status)(a, NULL) != GPUDYN_SUCCESS) return 1; /* a kernel; the bits are 0 */
    if (C(gpudyn_static_array_size)(a, &v[0], NULL) != GPUDYN_SUCCESS) return 1;
    if (C(gpudyn_static_array_capacity)(a, &v[1]) != GPUDYN_SUCCESS) return 1;
    if (C(gpudyn_static_array_allocated_bytes)(a, &v[2]) != GPUDYN_SUCCESS) return 1;
    if (C(gpudyn_static_array_get_status)(a, &status, NULL) != GPUDYN_SUCCESS) return 1;
    if (C(gpudyn_static_array_data)(a, &data) != GPUDYN_SUCCESS) return 1;
    memcpy(out, v, sizeof v);
    memcpy(out + sizeof v, &status, 4);
    memcpy(out + sizeof v + 4, &data, sizeof data);
    *bytes = sizeof v + 4 + sizeof data;
    return 0;
}

static int probe_vmm(void* handle, unsigned char* out, size_t* bytes) {
    gpudyn_vmm_array_t a = (gpudyn_vmm_array_t)handle;
    uint64_t v[3] = {0, 0, 0};
    uint32_t status = 0;
    void* data = NULL;
    if (C(gpudyn_vmm_array_clear_status)(a, NULL) != GPUDYN_SUCCESS) return 1;
    if (C(gpudyn_vmm_array_size)(a, &v[0], NULL) != GPUDYN_SUCCESS) return 1;
    if (C(gpudyn_vmm_array_capacity)(a, &v[1]) != GPUDYN_SUCCESS) return 1;
    if (C(gpudyn_vmm_array_allocated_bytes)(a, &v[2]) != GPUDYN_SUCCESS) return 1;
    if (C(gpudyn_vmm_array_get_status)(a, &status, NULL) != GPUDYN_SUCCESS) return 1;
    if (C(gpudyn_vmm_array_data)(a, &data) != GPUDYN_SUCCESS) return 1;
    memcpy(out, v, sizeof v);
    memcpy(out + sizeof v, &status, 4);
    memcpy(out + sizeof v + 4, &data, sizeof data);
    *bytes = sizeof v + 4 + sizeof data;
    return 0;
}

/* Copies `n` uint64 values from the host into device buffer `dst`. */
static void put_u64(void* dst, const uint64_t* values, uint64_t n) {
    CHECK_OK(C(gpudyn_memcpy)(dst, values, n * 8, GPUDYN_MEMCPY_HOST_TO_DEVICE, NULL));
    CHECK_OK(C(gpudyn_stream_synchronize)(NULL));
}

static void heap_device_cases(void) {
    gpudyn_heap_options_t o;
    CHECK_OK(C(gpudyn_heap_options_init)(&o));
    o.initial_bytes = 8u << 20;
    o.max_bytes = 16u << 20;
    gpudyn_heap_t h = NULL;
    CHECK_OK(C(gpudyn_heap_create)(&h, &o, NULL));
    if (h == NULL) return;
    subject s = {"heap", h, probe_heap, {0}, 0};
    take_baseline(&s);
    handle_cases(h, K_HEAP); /* a live heap passed as any other structure */

    uint64_t stack[4] = {0, 0, 0, 0};
    bad_array bad[MAX_BAD];
    const int n = bad_arrays(8, stack, bad);
    for (int i = 0; i < n; ++i) {
        REFUSE(C(gpudyn_heap_malloc)(h, (const uint64_t*)bad[i].ptr, (uint64_t*)D2, bad[i].count, NULL));
        REFUSE(C(gpudyn_heap_malloc)(h, (const uint64_t*)D, (uint64_t*)bad[i].ptr, bad[i].count, NULL));
        REFUSE(C(gpudyn_heap_free)(h, (const uint64_t*)bad[i].ptr, bad[i].count, NULL));
    }
    for (size_t i = 0; i < N_HUGE; ++i) REFUSE(C(gpudyn_heap_grow)(h, kHugeCounts[i], NULL)); /* above bytes_max */
    uint32_t sizes[16];
    const int ns = bad_sizes(sizeof(gpudyn_heap_stats_t), sizes);
    for (int i = 0; i < ns; ++i) {
        gpudyn_heap_stats_t st;
        memset(&st, 0, sizeof st);
        st.struct_size = sizes[i];
        REFUSE_ARG(C(gpudyn_heap_get_stats)(h, &st, NULL), "struct_size");
    }
    REFUSE_ARG(C(gpudyn_heap_get_stats)(h, NULL, NULL), "stats");
    REFUSE_ARG(C(gpudyn_heap_get_stats)(h, GARBAGE, NULL), "stats");
    REFUSE_ARG(C(gpudyn_heap_get_view)(h, NULL), "view");
    REFUSE_ARG(C(gpudyn_heap_get_view)(h, GARBAGE), "view");

    /* Issue 39 item 3: a GGArray on this heap with options of a size between the layouts. */
    gpudyn_ggarray_options_t go;
    CHECK_OK(C(gpudyn_ggarray_options_init)(&go));
    go.heap = h;
    go.num_lfvectors = 4;
    go.first_bucket_elements = 32;
    go.pool_bytes = UINT64_MAX;
    const uint32_t between[] = {41, 48, 52, 55, 57};
    for (size_t i = 0; i < sizeof between / sizeof between[0]; ++i) {
        gpudyn_ggarray_t g = NULL;
        go.struct_size = between[i];
        REFUSE_ARG(C(gpudyn_ggarray_create)(&g, &go, NULL), "struct_size");
        CHECK(g == NULL);
    }

    /* The next valid calls: four mallocs and their frees. */
    const uint64_t want[4] = {16, 100, 4000, 70000};
    put_u64(D, want, 4);
    CHECK_OK(C(gpudyn_heap_malloc)(h, (const uint64_t*)D, (uint64_t*)D2, 4, NULL));
    gpudyn_heap_stats_t st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK_OK(C(gpudyn_heap_get_stats)(h, &st, NULL));
    CHECK(st.allocations == 4);
    CHECK_OK(C(gpudyn_heap_free)(h, (const uint64_t*)D2, 4, NULL));
    CHECK_OK(C(gpudyn_heap_get_stats)(h, &st, NULL));
    CHECK(st.allocations == 0 && st.bad_frees == 0);
    CHECK_OK(C(gpudyn_memset)(D, 0, DEVB, NULL));
    CHECK_OK(C(gpudyn_memset)(D2, 0, DEVB, NULL));
    CHECK_OK(C(gpudyn_heap_reset)(h, NULL));
    CHECK_OK(C(gpudyn_heap_clear_status)(h, NULL));
    g_subject = &g_none;
    CHECK_OK(C(gpudyn_heap_destroy)(h));
    /* A destroyed handle is refused, not dereferenced (no create in between reuses it). */
    gpudyn_heap_view_t hv;
    REFUSE_ARG(C(gpudyn_heap_get_view)(h, &hv), "heap");
    REFUSE_ARG(C(gpudyn_heap_destroy)(h), "heap");
}

static void rw_heap_device_cases(void) {
    gpudyn_rw_heap_options_t o;
    CHECK_OK(C(gpudyn_rw_heap_options_init)(&o));
    o.page_count = 4096;
    gpudyn_rw_heap_t h = NULL;
    CHECK_OK(C(gpudyn_rw_heap_create)(&h, &o, NULL));
    if (h == NULL) return;
    subject s = {"page heap", h, probe_rw_heap, {0}, 0};
    take_baseline(&s);
    handle_cases(h, K_RW_HEAP);

    uint64_t stack[4] = {0, 0, 0, 0};
    bad_array bad[MAX_BAD];
    int n = bad_arrays(4, stack, bad);
    for (int i = 0; i < n; ++i) {
        REFUSE(C(gpudyn_rw_heap_get_pages)(h, (uint32_t*)bad[i].ptr, bad[i].count, GPUDYN_RW_HEAP_RW_BM, NULL));
        REFUSE(C(gpudyn_exp_rw_heap_get_pages)(h, (uint32_t*)bad[i].ptr, bad[i].count, GPUDYN_RW_HEAP_CRW, 2, 7, NULL,
                                               NULL));
        REFUSE(C(gpudyn_rw_heap_free_pages)(h, (const uint32_t*)bad[i].ptr, bad[i].count, NULL));
    }
    REFUSE_ARG(C(gpudyn_rw_heap_get_pages)(h, (uint32_t*)D, 4097, GPUDYN_RW_HEAP_RW, NULL), "n");
    const int algos[] = {0, 5, -1, 0x7fffffff};
    for (size_t i = 0; i < 4; ++i)
        REFUSE_ARG(C(gpudyn_rw_heap_get_pages)(h, (uint32_t*)D, 1, (gpudyn_rw_heap_algorithm_t)algos[i], NULL),
                   "algorithm");
    REFUSE_ARG(C(gpudyn_exp_rw_heap_get_pages)(h, (uint32_t*)D, 1, GPUDYN_RW_HEAP_RW, 0, 7, NULL, NULL), "per_thread");
    uint32_t sizes[16];
    const int ns = bad_sizes(sizeof(gpudyn_exp_rw_heap_stats_t), sizes);
    for (int i = 0; i < ns; ++i) {
        gpudyn_exp_rw_heap_stats_t st;
        memset(&st, 0, sizeof st);
        st.struct_size = sizes[i];
        REFUSE_ARG(C(gpudyn_exp_rw_heap_get_pages)(h, (uint32_t*)D, 1, GPUDYN_RW_HEAP_RW, 1, 7, &st, NULL),
                   "struct_size");
    }
    REFUSE_ARG(C(gpudyn_exp_rw_heap_get_pages)(h, (uint32_t*)D, 1, GPUDYN_RW_HEAP_RW, 1, 7, GARBAGE, NULL), "stats");
    const int ni = bad_sizes(sizeof(gpudyn_rw_heap_info_t), sizes);
    for (int i = 0; i < ni; ++i) {
        gpudyn_rw_heap_info_t info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizes[i];
        REFUSE_ARG(C(gpudyn_rw_heap_get_info)(h, &info, NULL), "struct_size");
    }
    n = bad_arrays(8, stack, bad);
    for (int i = 0; i < n; ++i) {
        REFUSE(C(gpudyn_rw_heap_malloc)(h, (const uint64_t*)bad[i].ptr, (uint64_t*)D2, bad[i].count, NULL));
        REFUSE(C(gpudyn_rw_heap_malloc)(h, (const uint64_t*)D, (uint64_t*)bad[i].ptr, bad[i].count, NULL));
        REFUSE(C(gpudyn_exp_rw_heap_malloc)(h, (const uint64_t*)bad[i].ptr, (uint64_t*)D2, bad[i].count, 7, NULL));
        REFUSE(C(gpudyn_rw_heap_free)(h, (const uint64_t*)bad[i].ptr, bad[i].count, NULL));
    }
    const double fractions[] = {-0.5, 1.5, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < 5; ++i) REFUSE_ARG(C(gpudyn_exp_rw_heap_occupy)(h, fractions[i], 7, NULL), "fraction");
    REFUSE_ARG(C(gpudyn_rw_heap_max_malloc_size)(h, NULL), "bytes");
    REFUSE_ARG(C(gpudyn_rw_heap_max_malloc_size)(h, GARBAGE), "bytes");
    REFUSE_ARG(C(gpudyn_rw_heap_free_page_count)(h, NULL, NULL), "count");
    REFUSE_ARG(C(gpudyn_rw_heap_get_view)(h, NULL), "view");

    /* The next valid calls. */
    uint64_t max = 0, free_pages = 0;
    CHECK_OK(C(gpudyn_rw_heap_max_malloc_size)(h, &max));
    CHECK(max == 32ull * 32 * 256);
    CHECK_OK(C(gpudyn_rw_heap_get_pages)(h, (uint32_t*)D, 8, GPUDYN_RW_HEAP_CORW, NULL));
    CHECK_OK(C(gpudyn_rw_heap_free_page_count)(h, &free_pages, NULL));
    CHECK(free_pages == 4096 - 8);
    CHECK_OK(C(gpudyn_rw_heap_free_pages)(h, (const uint32_t*)D, 8, NULL));
    CHECK_OK(C(gpudyn_rw_heap_free_page_count)(h, &free_pages, NULL));
    CHECK(free_pages == 4096);
    CHECK_OK(C(gpudyn_exp_rw_heap_occupy)(h, 0.25, 7, NULL));
    CHECK_OK(C(gpudyn_rw_heap_free_page_count)(h, &free_pages, NULL));
    CHECK(free_pages == 3072);
    CHECK_OK(C(gpudyn_rw_heap_reset)(h, NULL));
    CHECK_OK(C(gpudyn_memset)(D, 0, DEVB, NULL));
    g_subject = &g_none;
    CHECK_OK(C(gpudyn_rw_heap_destroy)(h));
    gpudyn_rw_heap_view_t rv;
    REFUSE_ARG(C(gpudyn_rw_heap_get_view)(h, &rv), "heap");
    REFUSE_ARG(C(gpudyn_rw_heap_destroy)(h), "heap");
}

static void warp_heap_device_cases(void) {
    gpudyn_warp_heap_options_t o;
    CHECK_OK(C(gpudyn_warp_heap_options_init)(&o));
    o.arena_bytes = 16u << 20;
    gpudyn_warp_heap_t h = NULL;
    CHECK_OK(C(gpudyn_warp_heap_create)(&h, &o, NULL));
    if (h == NULL) return;
    subject s = {"warp heap", h, probe_warp_heap, {0}, 0};
    take_baseline(&s);
    handle_cases(h, K_WARP_HEAP);

    uint64_t stack[4] = {0, 0, 0, 0};
    bad_array bad[MAX_BAD];
    const int n = bad_arrays(8, stack, bad);
    for (int i = 0; i < n; ++i) {
        REFUSE(C(gpudyn_warp_heap_alloc_batch)(h, (const uint64_t*)bad[i].ptr, bad[i].count, (void**)D2, NULL));
        REFUSE(C(gpudyn_warp_heap_alloc_batch)(h, (const uint64_t*)D, bad[i].count, (void**)bad[i].ptr, NULL));
        REFUSE(C(gpudyn_warp_heap_free_kept)(h, (void* const*)bad[i].ptr, bad[i].count, NULL));
        REFUSE(C(gpudyn_warp_heap_tidy_up_kept)(h, (void* const*)bad[i].ptr, bad[i].count, NULL));
    }
    REFUSE_ARG(C(gpudyn_warp_heap_get_stats)(h, NULL, NULL), "stats");
    REFUSE_ARG(C(gpudyn_warp_heap_get_stats)(h, GARBAGE, NULL), "stats");
    REFUSE_ARG(C(gpudyn_warp_heap_batch_count)(h, NULL), "count");
    REFUSE_ARG(C(gpudyn_warp_heap_backing_free_bytes)(h, NULL, NULL), "bytes");
    REFUSE_ARG(C(gpudyn_warp_heap_get_view)(h, GARBAGE), "view");

    /* The next valid calls: a batch and its release. */
    const uint64_t want[4] = {16, 48, 100, 4000};
    put_u64(D, want, 4);
    CHECK_OK(C(gpudyn_warp_heap_alloc_batch)(h, (const uint64_t*)D, 4, (void**)D2, NULL));
    uint64_t batches = 0;
    CHECK_OK(C(gpudyn_warp_heap_batch_count)(h, &batches));
    CHECK(batches == 1);
    CHECK_OK(C(gpudyn_warp_heap_release)(h, NULL));
    CHECK_OK(C(gpudyn_warp_heap_batch_count)(h, &batches));
    CHECK(batches == 0);
    CHECK_OK(C(gpudyn_memset)(D, 0, DEVB, NULL));
    CHECK_OK(C(gpudyn_memset)(D2, 0, DEVB, NULL));
    g_subject = &g_none;
    CHECK_OK(C(gpudyn_warp_heap_destroy)(h));
    uint64_t count = 0;
    REFUSE_ARG(C(gpudyn_warp_heap_batch_count)(h, &count), "heap");
    REFUSE_ARG(C(gpudyn_warp_heap_destroy)(h), "heap");
}

/* push_back / flatten / copy_to_host cases shared by the three arrays (element size 4). */
typedef gpudyn_status_t (*push_fn)(void*, const void*, uint64_t, const uint8_t*, gpudyn_insert_algo_t, gpudyn_stream_t);
typedef gpudyn_status_t (*copy_fn)(void*, void*, uint64_t, gpudyn_stream_t);

static void array_cases(void* a, push_fn push, copy_fn flatten, copy_fn to_host) {
    uint64_t stack[4] = {0, 0, 0, 0};
    bad_array bad[MAX_BAD];
    int n = bad_arrays(4, stack, bad);
    for (int i = 0; i < n; ++i) {
        REFUSE(push(a, bad[i].ptr, bad[i].count, NULL, GPUDYN_INSERT_WARP_SCAN, NULL));
        REFUSE(flatten(a, (void*)bad[i].ptr, bad[i].count * 4 < bad[i].count ? UINT64_MAX : bad[i].count * 4, NULL));
    }
    n = bad_arrays(1, stack, bad);
    for (int i = 0; i < n; ++i) {
        if (bad[i].ptr == NULL) continue; /* a NULL mask means "no mask" */
        REFUSE(push(a, D, bad[i].count, (const uint8_t*)bad[i].ptr, GPUDYN_INSERT_ATOMIC, NULL));
    }
    const int algos[] = {3, -1, 0x7fffffff};
    for (size_t i = 0; i < 3; ++i) REFUSE_ARG(push(a, D, 1, NULL, (gpudyn_insert_algo_t)algos[i], NULL), "algorithm");
    REFUSE_ARG(flatten(a, D, DEVB + 4, NULL), "dst_bytes");     /* more than the allocation */
    REFUSE_ARG(flatten(a, D + DEVB - 4, 8, NULL), "dst_bytes"); /* the last element and one past it */
    REFUSE_ARG(flatten(a, D + 2, 64, NULL), "dst");             /* unaligned */
    REFUSE_ARG(to_host(a, D, 64, NULL), "dst");                 /* device memory */
    REFUSE_ARG(to_host(a, GARBAGE, 64, NULL), "dst");
    if (g_unmapped) REFUSE_ARG(to_host(a, g_unmapped, 64, NULL), "dst");
    REFUSE_ARG(to_host(a, stack, 1ull << 46, NULL), "dst"); /* far past the stack's mapping */
    if (!g_pageable) REFUSE_ARG(flatten(a, stack, sizeof stack, NULL), "dst");
    for (size_t i = 0; i < N_HUGE; ++i) REFUSE(to_host(a, stack, kHugeCounts[i], NULL));
}

/* flatten_async / size_async, and the status they report to, of the three arrays. */
typedef struct async_fns {
    gpudyn_status_t (*flatten)(void*, void*, uint64_t, uint64_t*, gpudyn_stream_t);
    gpudyn_status_t (*size)(void*, uint64_t*, gpudyn_stream_t);
    gpudyn_status_t (*get_status)(void*, uint32_t*);
    gpudyn_status_t (*clear_status)(void*);
} async_fns;

/* Hostile dst / size pointers of the stream-ordered calls (element size 4). */
static void async_cases(void* a, const async_fns* f) {
    uint64_t stack[4] = {0, 0, 0, 0};
    uint64_t* const good = (uint64_t*)(D2 + DEVB - 8); /* a valid size word */
    bad_array bad[MAX_BAD];
    int n = bad_arrays(4, stack, bad);
    for (int i = 0; i < n; ++i)
        REFUSE(f->flatten(a, (void*)bad[i].ptr, bad[i].count * 4 < bad[i].count ? UINT64_MAX : bad[i].count * 4, good,
                          NULL));
    n = bad_arrays(8, stack, bad);
    for (int i = 0; i < n; ++i) {
        if (bad[i].count != 1) continue; /* the size is one word */
        REFUSE_ARG(f->size(a, (uint64_t*)bad[i].ptr, NULL), "size");
        if (bad[i].ptr != NULL) REFUSE_ARG(f->flatten(a, D, 64, (uint64_t*)bad[i].ptr, NULL), "size");
    }
    REFUSE_ARG(f->flatten(a, NULL, 8, good, NULL), "dst");           /* NULL with bytes */
    REFUSE_ARG(f->flatten(a, D, DEVB + 4, good, NULL), "dst_bytes"); /* more than the allocation */
    REFUSE_ARG(f->flatten(a, D + 2, 64, good, NULL), "dst");         /* unaligned */
    REFUSE_ARG(f->size(a, (uint64_t*)(D + 4), NULL), "size");        /* unaligned */
    if (!g_pageable) REFUSE_ARG(f->flatten(a, stack, sizeof stack, good, NULL), "dst");
}

/* Wrappers with the shared signature (each still goes through C()), one set per array. */
#define ARRAY_WRAPPERS(p, kind)                                                                                    \
    static gpudyn_status_t p##_push(void* a, const void* v, uint64_t c, const uint8_t* m, gpudyn_insert_algo_t al, \
                                    gpudyn_stream_t s) {                                                           \
        return C(gpudyn_##kind##_push_back)((gpudyn_##kind##_t)a, v, c, m, al, s);                                 \
    }                                                                                                              \
    static gpudyn_status_t p##_flatten(void* a, void* d, uint64_t b, gpudyn_stream_t s) {                          \
        return C(gpudyn_##kind##_flatten)((gpudyn_##kind##_t)a, d, b, s);                                          \
    }                                                                                                              \
    static gpudyn_status_t p##_to_host(void* a, void* d, uint64_t b, gpudyn_stream_t s) {                          \
        return C(gpudyn_##kind##_copy_to_host)((gpudyn_##kind##_t)a, d, b, s);                                     \
    }                                                                                                              \
    static gpudyn_status_t p##_flatten_async(void* a, void* d, uint64_t b, uint64_t* n, gpudyn_stream_t s) {       \
        return C(gpudyn_##kind##_flatten_async)((gpudyn_##kind##_t)a, d, b, n, s);                                 \
    }                                                                                                              \
    static gpudyn_status_t p##_size_async(void* a, uint64_t* n, gpudyn_stream_t s) {                               \
        return C(gpudyn_##kind##_size_async)((gpudyn_##kind##_t)a, n, s);                                          \
    }                                                                                                              \
    static gpudyn_status_t p##_get_status(void* a, uint32_t* st) {                                                 \
        return C(gpudyn_##kind##_get_status)((gpudyn_##kind##_t)a, st, NULL);                                      \
    }                                                                                                              \
    static gpudyn_status_t p##_clear_status(void* a) {                                                             \
        return C(gpudyn_##kind##_clear_status)((gpudyn_##kind##_t)a, NULL);                                        \
    }                                                                                                              \
    static const async_fns p##_async = {p##_flatten_async, p##_size_async, p##_get_status, p##_clear_status};
ARRAY_WRAPPERS(gg, ggarray)
ARRAY_WRAPPERS(sa, static_array)
ARRAY_WRAPPERS(va, vmm_array)

/* Eight elements 1..8 (uint32) at D, pushed by the valid call before the hostile ones. */
static void eight_values(void) {
    const uint64_t v[4] = {0x0000000200000001ull, 0x0000000400000003ull, 0x0000000600000005ull, 0x0000000800000007ull};
    put_u64(D, v, 4);
}

/* True when out[0..n) holds each of 1..8 exactly `times` times (a GGArray's
 * copies go LFVector after LFVector, not in push order). */
static int holds_one_to_eight(const uint32_t* out, int n, int times) {
    int seen[9] = {0};
    for (int i = 0; i < n; ++i) {
        if (out[i] < 1 || out[i] > 8) return 0;
        ++seen[out[i]];
    }
    for (int v = 1; v <= 8; ++v)
        if (seen[v] != times) return 0;
    return 1;
}

/* After the hostile calls: the elements are still 1..8; then valid calls (a
 * flatten, a push of 8 more) work on the same array. */
static void check_elements(void* a, push_fn push, copy_fn to_host, copy_fn flatten) {
    uint32_t out[16];
    memset(out, 0, sizeof out);
    CHECK_OK(to_host(a, out, sizeof out, NULL));
    CHECK(holds_one_to_eight(out, 8, 1));
    CHECK_OK(flatten(a, D2, 32, NULL));
    CHECK_OK(push(a, D, 8, NULL, GPUDYN_INSERT_ATOMIC, NULL));
    memset(out, 0, sizeof out);
    CHECK_OK(to_host(a, out, sizeof out, NULL));
    CHECK(holds_one_to_eight(out, 16, 2));
}

/* The array holds 1..8 (uint32): the stream-ordered calls copy them and count
 * them on the device; a destination too small is left untouched and the status
 * says so, until clear_status. */
static void check_async(void* a, const async_fns* f) {
    uint32_t out[16];
    uint64_t count[2] = {0, 0};
    uint64_t* const words = (uint64_t*)(D2 + DEVB - 16); /* two size words */
    CHECK_OK(C(gpudyn_memset)(D2, 0xab, 64, NULL));
    CHECK_OK(f->flatten(a, D2, 32, words, NULL));
    CHECK_OK(f->size(a, words + 1, NULL));
    CHECK_OK(C(gpudyn_memcpy)(out, D2, 64, GPUDYN_MEMCPY_DEVICE_TO_HOST, NULL));
    CHECK_OK(C(gpudyn_memcpy)(count, words, 16, GPUDYN_MEMCPY_DEVICE_TO_HOST, NULL));
    CHECK_OK(C(gpudyn_stream_synchronize)(NULL));
    CHECK(holds_one_to_eight(out, 8, 1) && out[8] == 0xabababab && count[0] == 8 && count[1] == 8);
    uint32_t st = 0;
    CHECK_OK(f->get_status(a, &st));
    CHECK(st == 0);
    /* 28 bytes: seven elements fit, eight do not -- nothing is written. */
    CHECK_OK(C(gpudyn_memset)(D2, 0xcd, 64, NULL));
    CHECK_OK(f->flatten(a, D2, 28, words, NULL));
    CHECK_OK(f->flatten(a, NULL, 0, words + 1, NULL)); /* no destination: too small too, the size written */
    CHECK_OK(C(gpudyn_memcpy)(out, D2, 64, GPUDYN_MEMCPY_DEVICE_TO_HOST, NULL));
    CHECK_OK(C(gpudyn_memcpy)(count, words, 16, GPUDYN_MEMCPY_DEVICE_TO_HOST, NULL));
    CHECK_OK(C(gpudyn_stream_synchronize)(NULL));
    int untouched = 1;
    for (int i = 0; i < 16; ++i) untouched &= out[i] == 0xcdcdcdcd;
    CHECK(untouched && count[0] == 8 && count[1] == 8);
    CHECK_OK(f->get_status(a, &st));
    CHECK(st == GPUDYN_ARRAY_STATUS_DESTINATION_TOO_SMALL);
    CHECK_OK(f->clear_status(a));
    CHECK_OK(f->get_status(a, &st));
    CHECK(st == 0);
}

static void ggarray_device_cases(void) {
    gpudyn_ggarray_options_t o;
    CHECK_OK(C(gpudyn_ggarray_options_init)(&o));
    o.num_lfvectors = 4;
    o.first_bucket_elements = 32;
    o.budget_bytes = 4u << 20;
    gpudyn_ggarray_t a = NULL;
    CHECK_OK(C(gpudyn_ggarray_create)(&a, &o, NULL));
    if (a == NULL) return;
    eight_values();
    CHECK_OK(C(gpudyn_ggarray_push_back)(a, D, 8, NULL, GPUDYN_INSERT_ATOMIC, NULL));
    subject s = {"GGArray", a, probe_ggarray, {0}, 0};
    take_baseline(&s);
    handle_cases(a, K_GGARRAY);

    array_cases(a, gg_push, gg_flatten, gg_to_host);
    async_cases(a, &gg_async);
    for (size_t i = 0; i < N_HUGE; ++i) {
        REFUSE(C(gpudyn_ggarray_reserve)(a, kHugeCounts[i], NULL));
        REFUSE_ARG(C(gpudyn_ggarray_set_budget)(a, kHugeCounts[i], NULL), "budget_bytes");
    }
    REFUSE_ARG(C(gpudyn_ggarray_size)(a, NULL, NULL), "size");
    REFUSE_ARG(C(gpudyn_ggarray_capacity)(a, GARBAGE, NULL), "capacity");
    REFUSE_ARG(C(gpudyn_ggarray_allocated_bytes)(a, NULL, NULL), "bytes");
    REFUSE_ARG(C(gpudyn_ggarray_get_status)(a, NULL, NULL), "status");
    REFUSE_ARG(C(gpudyn_ggarray_get_view)(a, NULL, NULL), "view");
    REFUSE_ARG(C(gpudyn_ggarray_get_view)(a, GARBAGE, NULL), "view");

    check_async(a, &gg_async);
    check_elements(a, gg_push, gg_to_host, gg_flatten);
    gpudyn_ggarray_view_t v;
    CHECK_OK(C(gpudyn_ggarray_get_view)(a, &v, NULL));
    CHECK_OK(C(gpudyn_ggarray_reserve)(a, 1000, NULL));
    CHECK_OK(C(gpudyn_ggarray_set_budget)(a, 8u << 20, NULL));
    CHECK_OK(C(gpudyn_ggarray_clear_status)(a, NULL));
    CHECK_OK(C(gpudyn_ggarray_clear)(a, NULL));
    CHECK_OK(C(gpudyn_ggarray_trim)(a, NULL)); /* empty: every arena bucket given back */
    g_subject = &g_none;
    CHECK_OK(C(gpudyn_ggarray_destroy)(a));
    uint64_t size = 0;
    REFUSE_ARG(C(gpudyn_ggarray_size)(a, &size, NULL), "array");
    REFUSE_ARG(C(gpudyn_ggarray_destroy)(a), "array");
}

static void static_array_device_cases(void) {
    gpudyn_static_array_options_t o;
    CHECK_OK(C(gpudyn_static_array_options_init)(&o));
    o.capacity = 256;
    gpudyn_static_array_t a = NULL;
    CHECK_OK(C(gpudyn_static_array_create)(&a, &o, NULL));
    if (a == NULL) return;
    eight_values();
    CHECK_OK(C(gpudyn_static_array_push_back)(a, D, 8, NULL, GPUDYN_INSERT_ATOMIC, NULL));
    subject s = {"static array", a, probe_static, {0}, 0};
    take_baseline(&s);
    handle_cases(a, K_STATIC);
    array_cases(a, sa_push, sa_flatten, sa_to_host);
    async_cases(a, &sa_async);
    REFUSE_ARG(C(gpudyn_static_array_size)(a, NULL, NULL), "size");
    REFUSE_ARG(C(gpudyn_static_array_capacity)(a, NULL), "capacity");
    REFUSE_ARG(C(gpudyn_static_array_allocated_bytes)(a, GARBAGE), "bytes");
    REFUSE_ARG(C(gpudyn_static_array_data)(a, NULL), "data");
    REFUSE_ARG(C(gpudyn_static_array_get_status)(a, NULL, NULL), "status");
    REFUSE_ARG(C(gpudyn_static_array_get_view)(a, NULL), "view");
    check_async(a, &sa_async);
    check_elements(a, sa_push, sa_to_host, sa_flatten);
    gpudyn_static_array_view_t v;
    CHECK_OK(C(gpudyn_static_array_get_view)(a, &v));
    CHECK_OK(C(gpudyn_static_array_clear)(a, NULL));
    g_subject = &g_none;
    CHECK_OK(C(gpudyn_static_array_destroy)(a));
    uint64_t size = 0;
    REFUSE_ARG(C(gpudyn_static_array_size)(a, &size, NULL), "array");
    REFUSE_ARG(C(gpudyn_static_array_destroy)(a), "array");
}

static void vmm_array_device_cases(void) {
    gpudyn_vmm_array_options_t o;
    CHECK_OK(C(gpudyn_vmm_array_options_init)(&o));
    o.initial_capacity = 1024;
    o.max_capacity = 1u << 20;
    gpudyn_vmm_array_t a = NULL;
    const gpudyn_status_t st = C(gpudyn_vmm_array_create)(&a, &o, NULL);
    if (st == GPUDYN_ERROR_NOT_SUPPORTED) {
        printf("SKIP (part): the VMM array's device part: no virtual memory management (%s)\n",
               gpudyn_last_error_message());
        return;
    }
    CHECK_OK(st);
    if (a == NULL) return;
    eight_values();
    CHECK_OK(C(gpudyn_vmm_array_push_back)(a, D, 8, NULL, GPUDYN_INSERT_ATOMIC, NULL));
    subject s = {"VMM array", a, probe_vmm, {0}, 0};
    take_baseline(&s);
    handle_cases(a, K_VMM);
    array_cases(a, va_push, va_flatten, va_to_host);
    async_cases(a, &va_async);
    for (size_t i = 0; i < N_HUGE; ++i) REFUSE(C(gpudyn_vmm_array_reserve)(a, kHugeCounts[i], NULL));
    REFUSE(C(gpudyn_vmm_array_reserve)(a, (1u << 20) + 1, NULL)); /* beyond max_capacity */
    REFUSE_ARG(C(gpudyn_vmm_array_size)(a, NULL, NULL), "size");
    REFUSE_ARG(C(gpudyn_vmm_array_capacity)(a, NULL), "capacity");
    REFUSE_ARG(C(gpudyn_vmm_array_allocated_bytes)(a, NULL), "bytes");
    REFUSE_ARG(C(gpudyn_vmm_array_data)(a, GARBAGE), "data");
    REFUSE_ARG(C(gpudyn_vmm_array_get_status)(a, NULL, NULL), "status");
    REFUSE_ARG(C(gpudyn_vmm_array_get_view)(a, NULL), "view");
    check_async(a, &va_async);
    check_elements(a, va_push, va_to_host, va_flatten);
    g_subject = &g_none;
    /* The whole range (4 MiB: mapped in two chunks, the first at create) is one
     * buffer: a copy across the chunks is valid, one past the range's end is not. */
    CHECK_OK(C(gpudyn_vmm_array_reserve)(a, 1u << 16, NULL));
    CHECK_OK(C(gpudyn_vmm_array_reserve)(a, 1u << 20, NULL));
    void* data = NULL;
    void* t = NULL;
    CHECK_OK(C(gpudyn_vmm_array_data)(a, &data));
    CHECK_OK(C(gpudyn_device_alloc)(&t, 3u << 20, NULL));
    if (data && t) {
        unsigned char* from = (unsigned char*)data + (1u << 20);
        CHECK_OK(C(gpudyn_memcpy)(t, from, 3u << 20, GPUDYN_MEMCPY_DEVICE_TO_DEVICE, NULL));
        REFUSE_ARG(C(gpudyn_memcpy)(t, from + 8, 3u << 20, GPUDYN_MEMCPY_DEVICE_TO_DEVICE, NULL), "bytes");
        REFUSE_ARG(C(gpudyn_memset)(from, 0, (3u << 20) + 1, NULL), "bytes");
        CHECK_OK(C(gpudyn_memset)(from, 0, 3u << 20, NULL));
        CHECK_OK(C(gpudyn_stream_synchronize)(NULL));
    }
    CHECK_OK(C(gpudyn_device_free)(t, NULL));
    gpudyn_vmm_array_view_t v;
    CHECK_OK(C(gpudyn_vmm_array_get_view)(a, &v));
    CHECK_OK(C(gpudyn_vmm_array_clear)(a, NULL));
    CHECK_OK(C(gpudyn_vmm_array_destroy)(a));
    uint64_t size = 0;
    REFUSE_ARG(C(gpudyn_vmm_array_size)(a, &size, NULL), "array");
    REFUSE_ARG(C(gpudyn_vmm_array_destroy)(a), "array");
}

/* Raw memory with a device: device sides past their allocation, host sides that are device memory. */
static void core_device_cases(void) {
    uint64_t stack[4] = {1, 2, 3, 4};
    REFUSE_ARG(C(gpudyn_memcpy)(D + DEVB - 8, stack, 16, GPUDYN_MEMCPY_HOST_TO_DEVICE, NULL), "bytes");
    REFUSE_ARG(C(gpudyn_memcpy)(D, D2, 16, GPUDYN_MEMCPY_HOST_TO_DEVICE, NULL), "src"); /* src is device memory */
    REFUSE_ARG(C(gpudyn_memcpy)(D2, D, 16, GPUDYN_MEMCPY_DEVICE_TO_HOST, NULL), "dst"); /* dst is device memory */
    REFUSE_ARG(C(gpudyn_memcpy)(stack, D + DEVB - 8, 16, GPUDYN_MEMCPY_DEVICE_TO_HOST, NULL), "bytes");
    REFUSE_ARG(C(gpudyn_memcpy)(D, D2 + 8, DEVB, GPUDYN_MEMCPY_DEVICE_TO_DEVICE, NULL), "bytes");
    REFUSE_ARG(C(gpudyn_memcpy)(stack, stack + 1, 8, GPUDYN_MEMCPY_DEVICE_TO_DEVICE, NULL), "dst");
    if (g_unmapped) REFUSE_ARG(C(gpudyn_memcpy)(g_unmapped, D, 8, GPUDYN_MEMCPY_DEVICE_TO_HOST, NULL), "dst");
    REFUSE_ARG(C(gpudyn_memset)(D + DEVB - 8, 0, 16, NULL), "bytes");
    REFUSE_ARG(C(gpudyn_memset)(D, 0, DEVB + 1, NULL), "bytes");
    if (!g_pageable) REFUSE_ARG(C(gpudyn_memset)(stack, 0, sizeof stack, NULL), "dst");
    if (F) REFUSE_ARG(C(gpudyn_memset)(F, 0, 8, NULL), "dst"); /* another device's memory, on this device's stream */
    /* The next valid calls. */
    CHECK_OK(C(gpudyn_memcpy)(D + DEVB - 8, stack, 8, GPUDYN_MEMCPY_HOST_TO_DEVICE, NULL));
    uint64_t back = 0;
    CHECK_OK(C(gpudyn_memcpy)(&back, D + DEVB - 8, 8, GPUDYN_MEMCPY_DEVICE_TO_HOST, NULL));
    CHECK_OK(C(gpudyn_stream_synchronize)(NULL));
    CHECK(back == 1);
    CHECK_OK(C(gpudyn_memset)(D, 0, DEVB, NULL));
    int32_t dev = -1, cur = -2;
    CHECK_OK(C(gpudyn_get_device)(&cur));
    CHECK_OK(C(gpudyn_pointer_get_device)(D, &dev));
    CHECK(dev == cur);
    CHECK_OK(C(gpudyn_stream_get_device)(NULL, &dev));
    CHECK(dev == cur);
    gpudyn_device_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK_OK(C(gpudyn_get_device_info)(cur, &info));
}

/* ---- the exports the headers declare ---------------------------------------- */
static int check_enumeration(const char* dir) {
    if (dir == NULL) {
        fprintf(stderr, "usage: test_abi_fuzz <include/gpudyn directory>: the headers list the exports\n");
        return 1;
    }
    DIR* d = opendir(dir);
    if (d == NULL) {
        fprintf(stderr, "cannot open %s\n", dir);
        return 1;
    }
    static char names[MAX_EXPORTS][96];
    int n = 0, failures = 0;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        const size_t len = strlen(e->d_name);
        if (len < 3 || strcmp(e->d_name + len - 2, ".h") != 0) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE* f = fopen(path, "r");
        if (f == NULL) continue;
        char line[1024];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "GPUDYN_API", 10) != 0) continue;
            const char* paren = strchr(line, '(');
            if (paren == NULL) continue;
            const char* start = paren;
            while (start > line && (start[-1] == '_' || (start[-1] >= 'a' && start[-1] <= 'z') ||
                                    (start[-1] >= '0' && start[-1] <= '9')))
                --start;
            if (n < MAX_EXPORTS && paren - start > 0 && paren - start < 95) {
                memcpy(names[n], start, (size_t)(paren - start));
                names[n][paren - start] = '\0';
                ++n;
            }
        }
        fclose(f);
    }
    closedir(d);
    for (int i = 0; i < n; ++i) {
        int found = 0;
        for (int j = 0; j < n_covered && !found; ++j) found = strcmp(names[i], covered[j]) == 0;
        if (!found) {
            fprintf(stderr, "export %s (declared in %s) is not called by this test: add its hostile cases\n", names[i],
                    dir);
            ++failures;
        }
    }
    for (int j = 0; j < n_covered; ++j) {
        int found = 0;
        for (int i = 0; i < n && !found; ++i) found = strcmp(names[i], covered[j]) == 0;
        if (!found) {
            fprintf(stderr, "%s is called here but no header declares it with GPUDYN_API\n", covered[j]);
            ++failures;
        }
    }
    printf("%d exports declared, %d covered\n", n, n_covered);
    if (n < 101) {
        fprintf(stderr, "only %d exports found in %s (expected at least 101)\n", n, dir);
        ++failures;
    }
    return failures;
}

int main(int argc, char** argv) {
    g_gpu = gpudyn_test_has_device();
    char why[512];
    snprintf(why, sizeof why, "%s", gpudyn_last_error_message());
    core_host_cases();
    option_cases();
    handle_cases(NULL, K_NONE);
    handle_cases(GARBAGE, K_NONE);
    handle_cases(GARBAGE2, K_NONE);
    {
        uint64_t not_a_handle[64]; /* mapped host memory that no create returned */
        memset(not_a_handle, 0xab, sizeof not_a_handle);
        handle_cases(not_a_handle, K_NONE);
        handle_cases(g_zero_host, K_NONE);
    }

    if (!g_gpu) {
        printf(
            "SKIP (part): no CUDA device (%s): the device part (buffers, extents, the context after each refusal, "
            "the structures unchanged) did not run\n",
            why);
    } else {
        void* p = NULL;
        CHECK_OK(C(gpudyn_device_alloc)(&p, DEVB, NULL));
        D = (unsigned char*)p;
        CHECK_OK(C(gpudyn_device_alloc)(&p, DEVB, NULL));
        D2 = (unsigned char*)p;
        if (D && D2) {
            CHECK_OK(C(gpudyn_memset)(D, 0, DEVB, NULL));
            CHECK_OK(C(gpudyn_memset)(D2, 0, DEVB, NULL));
            CHECK_OK(C(gpudyn_stream_synchronize)(NULL));
            void* m = mmap(NULL, 1u << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (m != MAP_FAILED && munmap(m, 1u << 16) == 0) g_unmapped = m;
            int32_t count = 0, cur = 0;
            CHECK_OK(C(gpudyn_get_device_count)(&count));
            CHECK_OK(C(gpudyn_get_device)(&cur));
            if (count >= 2) {
                CHECK_OK(C(gpudyn_set_device)((cur + 1) % count));
                CHECK_OK(C(gpudyn_device_alloc)(&p, DEVB, NULL));
                CHECK_OK(C(gpudyn_device_synchronize)());
                F = (unsigned char*)p;
                CHECK_OK(C(gpudyn_set_device)(cur));
            } else {
                printf("SKIP (part): one device only: no other device's memory to pass\n");
            }
            /* Does the device reach pageable memory (HMM/ATS)?  Then host pointers are valid
             * device buffers and their cases are skipped: a free of one zero entry tells. */
            gpudyn_heap_options_t ho;
            gpudyn_heap_t h = NULL;
            CHECK_OK(C(gpudyn_heap_options_init)(&ho));
            ho.initial_bytes = 1u << 20;
            ho.max_bytes = 1u << 20;
            CHECK_OK(C(gpudyn_heap_create)(&h, &ho, NULL));
            if (C(gpudyn_heap_free)(h, g_zero_host, 1, NULL) == GPUDYN_SUCCESS) {
                g_pageable = 1;
                printf("SKIP (part): the device reaches pageable host memory: host-stack cases skipped\n");
            }
            CHECK_OK(C(gpudyn_stream_synchronize)(NULL));
            CHECK_OK(C(gpudyn_heap_destroy)(h));

            core_device_cases();
            heap_device_cases();
            rw_heap_device_cases();
            warp_heap_device_cases();
            ggarray_device_cases();
            static_array_device_cases();
            vmm_array_device_cases();
            CHECK_OK(C(gpudyn_device_synchronize)());
        }
        CHECK_OK(C(gpudyn_device_free)(D, NULL));
        CHECK_OK(C(gpudyn_device_free)(D2, NULL));
        if (F) {
            int32_t cur = 0, count = 0;
            CHECK_OK(C(gpudyn_get_device)(&cur));
            CHECK_OK(C(gpudyn_get_device_count)(&count));
            CHECK_OK(C(gpudyn_set_device)((cur + 1) % count));
            CHECK_OK(C(gpudyn_device_free)(F, NULL));
            CHECK_OK(C(gpudyn_device_synchronize)());
            CHECK_OK(C(gpudyn_set_device)(cur));
        }
        CHECK_OK(C(gpudyn_device_synchronize)());
    }
    gpudyn_test_failures += check_enumeration(argc > 1 ? argv[1] : NULL);
    return TEST_RESULT();
}
