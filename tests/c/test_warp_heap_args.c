/* Host-side argument checks of the warp heap ABI: every bad input fails with
 * INVALID_ARGUMENT and a message naming the argument; runs without a GPU. */
#include "check.h"

#include <gpudyn/warp_heap.h>

int main(void) {
    gpudyn_warp_heap_options_t o;
    CHECK_INVALID(gpudyn_warp_heap_options_init(NULL), "options");
    CHECK_OK(gpudyn_warp_heap_options_init(&o));
    CHECK(o.struct_size == sizeof(o));
    CHECK(o.backing == GPUDYN_WARP_HEAP_BACKING_ARENA);
    CHECK(o.arena_bytes > 0 && o.max_superblock_run >= 1 && o.page_heap == NULL);
    CHECK(o.superblock_bytes == 32768); /* paper, sec. 5.1 */
    CHECK(o.min_block_bytes == 16);     /* paper, sec. 3.3 */
    CHECK(o.list_capacity == 126);      /* paper, sec. 5.1 */

    gpudyn_warp_heap_t h = (gpudyn_warp_heap_t)1;
    CHECK_INVALID(gpudyn_warp_heap_create(NULL, &o, NULL), "heap");
    CHECK_INVALID(gpudyn_warp_heap_create(&h, NULL, NULL), "options");
    CHECK(h == NULL);

    gpudyn_warp_heap_options_t bad = o;
    bad.struct_size = 4;
    CHECK_INVALID(gpudyn_warp_heap_create(&h, &bad, NULL), "struct_size");
    bad = o;
    bad.backing = 7;
    CHECK_INVALID(gpudyn_warp_heap_create(&h, &bad, NULL), "backing");
    bad = o;
    bad.min_block_bytes = 24; /* not a power of two */
    CHECK_INVALID(gpudyn_warp_heap_create(&h, &bad, NULL), "min_block_bytes");
    bad.min_block_bytes = 8; /* below the 16-byte alignment */
    CHECK_INVALID(gpudyn_warp_heap_create(&h, &bad, NULL), "min_block_bytes");
    bad = o;
    bad.superblock_bytes = 40; /* not a multiple of the minimum block */
    CHECK_INVALID(gpudyn_warp_heap_create(&h, &bad, NULL), "superblock_bytes");
    bad.superblock_bytes = 1ull << 27; /* beyond GPUDYN_WARP_HEAP_MAX_SUPERBLOCK_BYTES */
    CHECK_INVALID(gpudyn_warp_heap_create(&h, &bad, NULL), "superblock_bytes");
    bad = o;
    bad.backing = GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP; /* without options.page_heap */
    CHECK_INVALID(gpudyn_warp_heap_create(&h, &bad, NULL), "page_heap");
    bad = o;
    bad.max_superblock_run = 33; /* past one bitmap word */
    CHECK_INVALID(gpudyn_warp_heap_create(&h, &bad, NULL), "max_superblock_run");
    bad = o;
    bad.arena_bytes = 4096; /* not even one header slot */
    CHECK_INVALID(gpudyn_warp_heap_create(&h, &bad, NULL), "arena_bytes");
    bad = o;
    bad.arena_chunk_bytes = 1000; /* not a multiple of 16 */
    CHECK_INVALID(gpudyn_warp_heap_create(&h, &bad, NULL), "arena_chunk_bytes");
    bad = o;
    bad.list_capacity = 0;
    CHECK_INVALID(gpudyn_warp_heap_create(&h, &bad, NULL), "list_capacity");
    CHECK(strstr(gpudyn_last_error_message(), "is 0") != NULL); /* the value is named too */

    CHECK_OK(gpudyn_warp_heap_destroy(NULL));
    gpudyn_warp_heap_view_t view;
    gpudyn_warp_heap_stats_t stats;
    uint64_t count = 0;
    CHECK_INVALID(gpudyn_warp_heap_get_view(NULL, &view), "heap");
    CHECK_INVALID(gpudyn_warp_heap_get_stats(NULL, &stats, NULL), "heap");
    CHECK_INVALID(gpudyn_warp_heap_check(NULL, NULL), "heap");
    CHECK_INVALID(gpudyn_warp_heap_alloc_batch(NULL, NULL, 1, NULL, NULL), "heap");
    CHECK_INVALID(gpudyn_warp_heap_release(NULL, NULL), "heap");
    CHECK_INVALID(gpudyn_warp_heap_batch_count(NULL, &count), "heap");
    CHECK_INVALID(gpudyn_warp_heap_free_kept(NULL, NULL, 1, NULL), "heap");
    CHECK_INVALID(gpudyn_warp_heap_tidy_up_kept(NULL, NULL, 1, NULL), "heap");
    CHECK_INVALID(gpudyn_warp_heap_tidy_up_kept(NULL, NULL, 0, NULL), "heap");

    /* With a device, the per-heap argument checks too. */
    if (gpudyn_test_has_device()) {
        CHECK_OK(gpudyn_warp_heap_create(&h, &o, NULL));
        CHECK_INVALID(gpudyn_warp_heap_get_view(h, NULL), "view");
        CHECK_INVALID(gpudyn_warp_heap_alloc_batch(h, NULL, 5, NULL, NULL), "sizes");
        CHECK_OK(gpudyn_warp_heap_alloc_batch(h, NULL, 0, NULL, NULL)); /* nothing to do */
        CHECK_INVALID(gpudyn_warp_heap_free_kept(h, NULL, 3, NULL), "headers");
        CHECK_INVALID(gpudyn_warp_heap_tidy_up_kept(h, NULL, 3, NULL), "headers");
        CHECK_OK(gpudyn_warp_heap_tidy_up_kept(h, NULL, 0, NULL)); /* nothing to do */
        CHECK_INVALID(gpudyn_warp_heap_get_stats(h, NULL, NULL), "stats");
        CHECK_OK(gpudyn_warp_heap_get_view(h, &view));
        CHECK(view.version == GPUDYN_WARP_HEAP_VIEW_VERSION);
        CHECK(view.superblock_bytes == 32768 && view.stats != NULL);
        CHECK_OK(gpudyn_warp_heap_destroy(h));
    }
    return TEST_RESULT();
}
