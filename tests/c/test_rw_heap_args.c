/* Host-side argument checks of the random-walk page heap's C ABI: every bad
 * input fails with INVALID_ARGUMENT and a message naming the argument; runs
 * without a GPU (argument checks come before any device call). */
#include "check.h"

#include <gpudyn/experimental.h>
#include <gpudyn/rw_heap.h>

int main(void) {
    gpudyn_rw_heap_options_t o;
    CHECK_INVALID(gpudyn_rw_heap_options_init(NULL), "options");
    CHECK_OK(gpudyn_rw_heap_options_init(&o));
    CHECK(o.struct_size == sizeof(o));
    CHECK(o.word_bits == 32);
    CHECK(o.page_size == 256);
    CHECK(o.page_count == (1u << 20));
    CHECK(o.use_lockmap == 0);
    CHECK(o.max_random_steps == 4096);

    gpudyn_rw_heap_t h = NULL;
    CHECK_INVALID(gpudyn_rw_heap_create(NULL, &o, NULL), "heap");
    CHECK_INVALID(gpudyn_rw_heap_create(&h, NULL, NULL), "options");
    CHECK(h == NULL);

    gpudyn_rw_heap_options_t bad = o;
    bad.struct_size = 4;
    CHECK_INVALID(gpudyn_rw_heap_create(&h, &bad, NULL), "struct_size");
    bad = o;
    bad.word_bits = 16;
    CHECK_INVALID(gpudyn_rw_heap_create(&h, &bad, NULL), "word_bits");
    CHECK(strstr(gpudyn_last_error_message(), "16") != NULL);
    bad = o;
    bad.page_size = 24;
    CHECK_INVALID(gpudyn_rw_heap_create(&h, &bad, NULL), "page_size");
    bad.page_size = 0;
    CHECK_INVALID(gpudyn_rw_heap_create(&h, &bad, NULL), "page_size");
    bad = o;
    bad.page_count = 0;
    CHECK_INVALID(gpudyn_rw_heap_create(&h, &bad, NULL), "page_count");
    bad.page_count = (1ull << 31) + 1;
    CHECK_INVALID(gpudyn_rw_heap_create(&h, &bad, NULL), "page_count");
    bad = o;
    bad.use_lockmap = 2;
    CHECK_INVALID(gpudyn_rw_heap_create(&h, &bad, NULL), "use_lockmap");
    bad = o;
    bad.max_random_steps = 0;
    CHECK_INVALID(gpudyn_rw_heap_create(&h, &bad, NULL), "max_random_steps");
    CHECK(h == NULL);

    /* NULL heap everywhere; destroy(NULL) is fine. */
    CHECK_OK(gpudyn_rw_heap_destroy(NULL));
    gpudyn_rw_heap_view_t v;
    uint32_t pages[1];
    uint64_t u64[1];
    CHECK_INVALID(gpudyn_rw_heap_get_view(NULL, &v), "heap");
    CHECK_INVALID(gpudyn_rw_heap_get_pages(NULL, pages, 1, GPUDYN_RW_HEAP_RW_BM, NULL), "heap");
    CHECK_INVALID(gpudyn_exp_rw_heap_get_pages(NULL, pages, 1, GPUDYN_RW_HEAP_RW_BM, 1, 0, NULL, NULL), "heap");
    CHECK_INVALID(gpudyn_rw_heap_free_pages(NULL, pages, 1, NULL), "heap");
    CHECK_INVALID(gpudyn_rw_heap_malloc(NULL, u64, u64, 1, NULL), "heap");
    CHECK_INVALID(gpudyn_exp_rw_heap_malloc(NULL, u64, u64, 1, 0, NULL), "heap");
    CHECK_INVALID(gpudyn_rw_heap_free(NULL, u64, 1, NULL), "heap");
    CHECK_INVALID(gpudyn_exp_rw_heap_occupy(NULL, 0.5, 1, NULL), "heap");
    CHECK_INVALID(gpudyn_rw_heap_reset(NULL, NULL), "heap");
    CHECK_INVALID(gpudyn_rw_heap_free_page_count(NULL, u64, NULL), "heap");
    CHECK_INVALID(gpudyn_rw_heap_max_malloc_size(NULL, u64), "heap");
    gpudyn_rw_heap_info_t info;
    info.struct_size = sizeof(info);
    CHECK_INVALID(gpudyn_rw_heap_get_info(NULL, &info, NULL), "heap");
    CHECK_INVALID(gpudyn_rw_heap_check(NULL, NULL), "heap");
    return TEST_RESULT();
}
