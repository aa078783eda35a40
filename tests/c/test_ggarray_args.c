/* Host-side argument checks of the GGArray, static and VMM array ABI: every bad
 * input fails with INVALID_ARGUMENT and a message naming the argument.  Needs
 * no GPU (checks come before any device work). */
#include <gpudyn/gpudyn.h>

#include "check.h"

int main(void) {
    gpudyn_ggarray_options_t go;
    CHECK_INVALID(gpudyn_ggarray_options_init(NULL), "options");
    CHECK_OK(gpudyn_ggarray_options_init(&go));
    CHECK(go.struct_size == sizeof(go) && go.element_size == 4 && go.num_lfvectors == 512 &&
          go.first_bucket_elements == 1024 && go.budget_bytes == 0);
    gpudyn_ggarray_t g = NULL;
    CHECK_INVALID(gpudyn_ggarray_create(NULL, &go, NULL), "array");
    CHECK_INVALID(gpudyn_ggarray_create(&g, NULL, NULL), "options");
    gpudyn_ggarray_options_t bad = go;
    bad.struct_size = 4;
    CHECK_INVALID(gpudyn_ggarray_create(&g, &bad, NULL), "struct_size");
    bad = go;
    bad.element_size = 3;
    CHECK_INVALID(gpudyn_ggarray_create(&g, &bad, NULL), "element_size");
    bad = go;
    bad.num_lfvectors = 0;
    CHECK_INVALID(gpudyn_ggarray_create(&g, &bad, NULL), "num_lfvectors");
    bad = go;
    bad.first_bucket_elements = 1000; /* not a power of two */
    CHECK_INVALID(gpudyn_ggarray_create(&g, &bad, NULL), "first_bucket_elements");
    bad = go;
    bad.first_bucket_elements = 16; /* below the minimum */
    CHECK_INVALID(gpudyn_ggarray_create(&g, &bad, NULL), "first_bucket_elements");
    CHECK(g == NULL);
    CHECK_OK(gpudyn_ggarray_destroy(NULL));
    uint64_t v = 0;
    CHECK_INVALID(gpudyn_ggarray_size(NULL, &v, NULL), "array");
    CHECK_INVALID(gpudyn_ggarray_push_back(NULL, NULL, 0, NULL, GPUDYN_INSERT_WARP_SCAN, NULL), "array");
    CHECK_INVALID(gpudyn_ggarray_reserve(NULL, 10, NULL), "array");
    CHECK_INVALID(gpudyn_ggarray_get_view(NULL, NULL, NULL), "array");

    gpudyn_static_array_options_t so;
    CHECK_OK(gpudyn_static_array_options_init(&so));
    CHECK(so.struct_size == sizeof(so) && so.element_size == 4 && so.capacity == 0);
    gpudyn_static_array_t s = NULL;
    CHECK_INVALID(gpudyn_static_array_create(&s, &so, NULL), "capacity");
    so.capacity = 10;
    so.element_size = 5;
    CHECK_INVALID(gpudyn_static_array_create(&s, &so, NULL), "element_size");
    CHECK_OK(gpudyn_static_array_destroy(NULL));
    CHECK_INVALID(gpudyn_static_array_capacity(NULL, &v), "array");

    gpudyn_vmm_array_options_t vo;
    CHECK_OK(gpudyn_vmm_array_options_init(&vo));
    CHECK(vo.struct_size == sizeof(vo) && vo.element_size == 4);
    gpudyn_vmm_array_t m = NULL;
    vo.element_size = 0;
    CHECK_INVALID(gpudyn_vmm_array_create(&m, &vo, NULL), "element_size");
    vo.element_size = 4;
    vo.initial_capacity = 100;
    vo.max_capacity = 10;
    CHECK_INVALID(gpudyn_vmm_array_create(&m, &vo, NULL), "initial_capacity");
    CHECK_OK(gpudyn_vmm_array_destroy(NULL));
    CHECK_INVALID(gpudyn_vmm_array_reserve(NULL, 1, NULL), "array");

    /* The stream-ordered size and flatten: the array is checked first, before any device work. */
    CHECK_INVALID(gpudyn_ggarray_size_async(NULL, &v, NULL), "array");
    CHECK_INVALID(gpudyn_ggarray_flatten_async(NULL, &v, 8, &v, NULL), "array");
    CHECK_INVALID(gpudyn_static_array_size_async(NULL, &v, NULL), "array");
    CHECK_INVALID(gpudyn_static_array_flatten_async(NULL, NULL, 0, NULL, NULL), "array");
    CHECK_INVALID(gpudyn_vmm_array_size_async(NULL, &v, NULL), "array");
    CHECK_INVALID(gpudyn_vmm_array_flatten_async(NULL, NULL, 0, NULL, NULL), "array");
    CHECK(GPUDYN_ARRAY_STATUS_DESTINATION_TOO_SMALL == 8);
    return TEST_RESULT();
}
