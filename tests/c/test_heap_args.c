/* Host-side argument checks of the heap's C ABI: every bad input fails with
 * INVALID_ARGUMENT and a message naming the argument; runs without a GPU
 * (argument checks come before any device call). */
#include "check.h"

#include <gpudyn/heap.h>

int main(void) {
    gpudyn_heap_options_t o;
    CHECK_INVALID(gpudyn_heap_options_init(NULL), "options");
    CHECK_OK(gpudyn_heap_options_init(&o));
    CHECK(o.struct_size == sizeof(o));
    CHECK(o.reserved == 0);
    CHECK(o.initial_bytes == 0); /* 0: 1 GiB or half the free memory, chosen at create */
    CHECK(o.max_bytes == 0);     /* 0: initial_bytes x 8, at most the device's memory */
    CHECK(o.page_size == 65536);

    gpudyn_heap_t h = NULL;
    CHECK_INVALID(gpudyn_heap_create(NULL, &o, NULL), "heap");
    CHECK_INVALID(gpudyn_heap_create(&h, NULL, NULL), "options");
    CHECK(h == NULL);

    gpudyn_heap_options_t bad = o;
    bad.struct_size = 4;
    CHECK_INVALID(gpudyn_heap_create(&h, &bad, NULL), "struct_size");
    bad = o;
    bad.reserved = 1;
    CHECK_INVALID(gpudyn_heap_create(&h, &bad, NULL), "reserved");
    bad = o;
    bad.page_size = 3 * 4096; /* not a power of two */
    CHECK_INVALID(gpudyn_heap_create(&h, &bad, NULL), "page_size");
    CHECK(strstr(gpudyn_last_error_message(), "12288") != NULL);
    bad.page_size = 2048; /* below 4 KiB */
    CHECK_INVALID(gpudyn_heap_create(&h, &bad, NULL), "page_size");
    bad.page_size = 4u << 20; /* above 2 MiB */
    CHECK_INVALID(gpudyn_heap_create(&h, &bad, NULL), "page_size");
    bad.page_size = 0;
    CHECK_INVALID(gpudyn_heap_create(&h, &bad, NULL), "page_size");
    bad = o;
    bad.initial_bytes = 100; /* less than one page */
    CHECK_INVALID(gpudyn_heap_create(&h, &bad, NULL), "initial_bytes");
    bad = o;
    bad.initial_bytes = 1u << 26;
    bad.max_bytes = 1u << 25; /* below initial_bytes */
    CHECK_INVALID(gpudyn_heap_create(&h, &bad, NULL), "max_bytes");
    bad = o;
    bad.page_size = 4096;
    bad.max_bytes = 1ull << 44; /* 2^32 pages */
    CHECK_INVALID(gpudyn_heap_create(&h, &bad, NULL), "max_bytes");
    CHECK(h == NULL);

    /* NULL heap everywhere; destroy(NULL) is fine. */
    CHECK_OK(gpudyn_heap_destroy(NULL));
    gpudyn_heap_view_t v;
    gpudyn_heap_stats_t st;
    st.struct_size = sizeof(st);
    uint64_t u64[1];
    CHECK_INVALID(gpudyn_heap_get_view(NULL, &v), "heap");
    CHECK_INVALID(gpudyn_heap_grow(NULL, 1u << 20, NULL), "heap");
    CHECK_INVALID(gpudyn_heap_get_stats(NULL, &st, NULL), "heap");
    CHECK_INVALID(gpudyn_heap_clear_status(NULL, NULL), "heap");
    CHECK_INVALID(gpudyn_heap_check(NULL, NULL), "heap");
    CHECK_INVALID(gpudyn_heap_malloc(NULL, u64, u64, 1, NULL), "heap");
    CHECK_INVALID(gpudyn_heap_free(NULL, u64, 1, NULL), "heap");
    CHECK_INVALID(gpudyn_heap_reset(NULL, NULL), "heap");
    return TEST_RESULT();
}
