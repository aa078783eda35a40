/* Helpers shared by the GGArray/static/VMM C tests: one interface over the
 * three arrays so every check runs on each of them. */
#ifndef GPUDYN_TESTS_GGARRAY_UTIL_H
#define GPUDYN_TESTS_GGARRAY_UTIL_H
#include <gpudyn/gpudyn.h>

#include "check.h"

typedef enum {
    KIND_GGARRAY = 0,
    KIND_STATIC = 1,
    KIND_VMM = 2
} array_kind;
static const char* const kind_name[] = {"ggarray", "static", "vmm"};

typedef struct {
    array_kind kind;
    uint32_t element_size;
    gpudyn_ggarray_t g;
    gpudyn_static_array_t s;
    gpudyn_vmm_array_t v;
} any_array;

/* capacity: static capacity / VMM initial mapping / GGArray reserve (0 = none). */
static gpudyn_status_t any_create(any_array* a, array_kind kind, uint32_t element_size, uint64_t capacity,
                                  uint32_t lfvectors, uint64_t first_bucket) {
    memset(a, 0, sizeof(*a));
    a->kind = kind;
    a->element_size = element_size;
    gpudyn_status_t st;
    if (kind == KIND_GGARRAY) {
        gpudyn_ggarray_options_t o;
        gpudyn_ggarray_options_init(&o);
        o.element_size = element_size;
        o.num_lfvectors = lfvectors;
        o.first_bucket_elements = first_bucket;
        st = gpudyn_ggarray_create(&a->g, &o, NULL);
        if (st == GPUDYN_SUCCESS && capacity) st = gpudyn_ggarray_reserve(a->g, capacity, NULL);
    } else if (kind == KIND_STATIC) {
        gpudyn_static_array_options_t o;
        gpudyn_static_array_options_init(&o);
        o.element_size = element_size;
        o.capacity = capacity;
        st = gpudyn_static_array_create(&a->s, &o, NULL);
    } else {
        gpudyn_vmm_array_options_t o;
        gpudyn_vmm_array_options_init(&o);
        o.element_size = element_size;
        o.initial_capacity = capacity;
        o.max_capacity = 1ull << 31;
        st = gpudyn_vmm_array_create(&a->v, &o, NULL);
    }
    return st;
}
static void any_destroy(any_array* a) {
    CHECK_OK(gpudyn_ggarray_destroy(a->g));
    CHECK_OK(gpudyn_static_array_destroy(a->s));
    CHECK_OK(gpudyn_vmm_array_destroy(a->v));
}
static gpudyn_status_t any_push(any_array* a, const void* values, uint64_t n, const uint8_t* mask,
                                gpudyn_insert_algo_t algo) {
    if (a->kind == KIND_GGARRAY) return gpudyn_ggarray_push_back(a->g, values, n, mask, algo, NULL);
    if (a->kind == KIND_STATIC) return gpudyn_static_array_push_back(a->s, values, n, mask, algo, NULL);
    return gpudyn_vmm_array_push_back(a->v, values, n, mask, algo, NULL);
}
static gpudyn_status_t any_reserve(any_array* a, uint64_t capacity) {
    if (a->kind == KIND_GGARRAY) return gpudyn_ggarray_reserve(a->g, capacity, NULL);
    if (a->kind == KIND_VMM) return gpudyn_vmm_array_reserve(a->v, capacity, NULL);
    return GPUDYN_SUCCESS;
}
static uint64_t any_size(any_array* a) {
    uint64_t n = ~0ull;
    if (a->kind == KIND_GGARRAY) CHECK_OK(gpudyn_ggarray_size(a->g, &n, NULL));
    else if (a->kind == KIND_STATIC) CHECK_OK(gpudyn_static_array_size(a->s, &n, NULL));
    else CHECK_OK(gpudyn_vmm_array_size(a->v, &n, NULL));
    return n;
}
static gpudyn_status_t any_to_host(any_array* a, void* dst, uint64_t bytes) {
    if (a->kind == KIND_GGARRAY) return gpudyn_ggarray_copy_to_host(a->g, dst, bytes, NULL);
    if (a->kind == KIND_STATIC) return gpudyn_static_array_copy_to_host(a->s, dst, bytes, NULL);
    return gpudyn_vmm_array_copy_to_host(a->v, dst, bytes, NULL);
}
static gpudyn_status_t any_flatten(any_array* a, void* dst, uint64_t bytes) {
    if (a->kind == KIND_GGARRAY) return gpudyn_ggarray_flatten(a->g, dst, bytes, NULL);
    if (a->kind == KIND_STATIC) return gpudyn_static_array_flatten(a->s, dst, bytes, NULL);
    return gpudyn_vmm_array_flatten(a->v, dst, bytes, NULL);
}

/* Element comparison for qsort of raw elements (size set before sorting). */
static size_t cmp_size_ = 4;
static int cmp_elem(const void* x, const void* y) { return memcmp(x, y, cmp_size_); }

/* Multiset equality of two arrays of n elements of `size` bytes (sorts both). */
static int same_multiset(void* a, void* b, uint64_t n, uint32_t size) {
    cmp_size_ = size;
    qsort(a, (size_t)n, size, cmp_elem);
    qsort(b, (size_t)n, size, cmp_elem);
    return memcmp(a, b, (size_t)(n * size)) == 0;
}
#endif
