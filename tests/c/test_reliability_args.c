/* Host-side reliability of the error messages (runs with or without a GPU):
 * every failure names the function that failed, and the destroy/free calls a
 * garbage collector runs between a failed call and the read of its message
 * leave that message alone (issue 13, item 4). */
#include "check.h"

/* The message of the last failure names `fn` and is not empty. */
static void check_message_names(const char* fn) {
    const char* m = gpudyn_last_error_message();
    CHECK(m != NULL && m[0] != '\0');
    if (m != NULL && strstr(m, fn) == NULL) {
        fprintf(stderr, "message does not name %s: %s\n", fn, m);
        ++gpudyn_test_failures;
    }
}

int main(void) {
    uint64_t u = 0;
    /* One failure per structure and the core: each leaves a message naming its function. */
    CHECK_STATUS(gpudyn_ggarray_size(NULL, &u, NULL), GPUDYN_ERROR_INVALID_ARGUMENT);
    check_message_names("gpudyn_ggarray_size");
    CHECK_STATUS(gpudyn_static_array_size(NULL, &u, NULL), GPUDYN_ERROR_INVALID_ARGUMENT);
    check_message_names("gpudyn_static_array_size");
    CHECK_STATUS(gpudyn_vmm_array_reserve(NULL, 1, NULL), GPUDYN_ERROR_INVALID_ARGUMENT);
    check_message_names("gpudyn_vmm_array_reserve");
    CHECK_STATUS(gpudyn_rw_heap_free_page_count(NULL, &u, NULL), GPUDYN_ERROR_INVALID_ARGUMENT);
    check_message_names("gpudyn_rw_heap_free_page_count");
    CHECK_STATUS(gpudyn_warp_heap_alloc_batch(NULL, &u, 1, NULL, NULL), GPUDYN_ERROR_INVALID_ARGUMENT);
    check_message_names("gpudyn_warp_heap_alloc_batch");

    /* A failure, then what a garbage collector runs before the caller reads the
     * message (destroys of other objects, frees): the message stays. */
    CHECK_STATUS(gpudyn_warp_heap_alloc_batch(NULL, &u, 1, NULL, NULL), GPUDYN_ERROR_INVALID_ARGUMENT);
    CHECK_OK(gpudyn_ggarray_destroy(NULL));
    CHECK_OK(gpudyn_static_array_destroy(NULL));
    CHECK_OK(gpudyn_vmm_array_destroy(NULL));
    CHECK_OK(gpudyn_rw_heap_destroy(NULL));
    CHECK_OK(gpudyn_warp_heap_destroy(NULL));
    CHECK_OK(gpudyn_device_free(NULL, NULL));
    check_message_names("gpudyn_warp_heap_alloc_batch");

    /* Any other successful call clears it, as documented. */
    gpudyn_ggarray_options_t o;
    CHECK_OK(gpudyn_ggarray_options_init(&o));
    CHECK(strcmp(gpudyn_last_error_message(), "") == 0);
    return TEST_RESULT();
}
