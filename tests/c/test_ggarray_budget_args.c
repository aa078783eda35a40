/* Host-side argument checks of the GGArray's budget options and calls: every
 * bad input fails with INVALID_ARGUMENT and a message naming the argument,
 * before any device work (no GPU needed). */
#include <gpudyn/gpudyn.h>

#include <stddef.h>

#include "check.h"

int main(void) {
    gpudyn_ggarray_options_t o;
    CHECK_OK(gpudyn_ggarray_options_init(&o));
    /* defaults: the heap's default budget, its default range, an own heap */
    CHECK(o.struct_size == sizeof(o) && o.budget_bytes == 0 && o.max_budget_bytes == 0 && o.heap == NULL);
    gpudyn_ggarray_t g = NULL;
    gpudyn_ggarray_options_t bad = o;
    bad.budget_bytes = 64ull << 20;
    bad.max_budget_bytes = 32ull << 20;
    CHECK_INVALID(gpudyn_ggarray_create(&g, &bad, NULL), "budget_bytes");
    CHECK(strstr(gpudyn_last_error_message(), "max_budget_bytes") != NULL);
    /* a given heap is its own budget: budget and range must stay 0 */
    bad = o;
    bad.heap = (gpudyn_heap_t)0x10; /* never dereferenced: the check comes first */
    bad.budget_bytes = 1 << 20;
    CHECK_INVALID(gpudyn_ggarray_create(&g, &bad, NULL), "budget_bytes");
    bad.budget_bytes = 0;
    bad.max_budget_bytes = 1 << 20;
    CHECK_INVALID(gpudyn_ggarray_create(&g, &bad, NULL), "max_budget_bytes");
    /* struct_size: the size before max_budget_bytes is the smallest accepted */
    bad = o;
    bad.struct_size = (uint32_t)offsetof(gpudyn_ggarray_options_t, max_budget_bytes) - 1;
    CHECK_INVALID(gpudyn_ggarray_create(&g, &bad, NULL), "struct_size");
    bad.struct_size = (uint32_t)offsetof(gpudyn_ggarray_options_t, max_budget_bytes);
    bad.budget_bytes = 64ull << 20;
    bad.max_budget_bytes = 1; /* beyond struct_size: not read, so not refused */
    gpudyn_status_t st = gpudyn_ggarray_create(&g, &bad, NULL);
    CHECK(st == GPUDYN_SUCCESS || st == GPUDYN_ERROR_NO_DEVICE);
    CHECK_OK(gpudyn_ggarray_destroy(g));
    g = NULL;
    /* NULL handles */
    uint64_t b = 0, m = 0;
    CHECK_INVALID(gpudyn_ggarray_set_budget(NULL, 1 << 20, NULL), "array");
    CHECK_INVALID(gpudyn_ggarray_get_budget(NULL, &b, &m), "array");
    return TEST_RESULT();
}
