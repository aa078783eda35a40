// GGArray under exhaustion of its budget (the heap its buckets beyond the pool
// rows come from):
//   - a push whose buckets do not fit fails with OUT_OF_MEMORY naming the
//     budget, the array keeps exactly what it had (size and contents), and
//     later pushes that fit work;
//   - the bucket pool: reserve maps rows far beyond the budget and a push_back
//     then needs no heap; rows beyond a small pool fall back to the heap and
//     report OUT_OF_MEMORY there, elements kept.
#include <gpudyn/gpudyn.h>

extern "C" {
#include "ggarray_test_util.h"
}

#include <vector>

// Small budget so that a 64 MB push cannot fit.
static const uint64_t kBudgetBytes = 32ull << 20;

int main(void) {
    REQUIRE_DEVICE();
    for (int algo = 0; algo < 3; ++algo) {
        gpudyn_ggarray_options_t o;
        gpudyn_ggarray_options_init(&o);
        o.num_lfvectors = 4;
        o.budget_bytes = kBudgetBytes;
        o.pool_bytes = ~0ull; // no pool: every bucket from the (small) heap
        gpudyn_ggarray_t g = NULL;
        CHECK_OK(gpudyn_ggarray_create(&g, &o, NULL));
        const uint64_t small = 1000000, big = 16000000; // 4 MB fits, 64 MB does not
        std::vector<unsigned> in(big);
        for (uint64_t i = 0; i < big; ++i) in[i] = unsigned(i * 2654435761u);
        void* d = NULL;
        CHECK_OK(gpudyn_device_alloc(&d, big * 4, NULL));
        CHECK_OK(gpudyn_memcpy(d, in.data(), big * 4, GPUDYN_MEMCPY_HOST_TO_DEVICE, NULL));
        CHECK_OK(gpudyn_ggarray_push_back(g, d, small, NULL, gpudyn_insert_algo_t(algo), NULL));
        std::vector<unsigned> before(small);
        CHECK_OK(gpudyn_ggarray_copy_to_host(g, before.data(), small * 4, NULL));
        CHECK_STATUS(gpudyn_ggarray_push_back(g, d, big, NULL, gpudyn_insert_algo_t(algo), NULL),
                     GPUDYN_ERROR_OUT_OF_MEMORY);
        CHECK(strstr(gpudyn_last_error_message(), "budget") != NULL);
        uint64_t n = 0;
        CHECK_OK(gpudyn_ggarray_size(g, &n, NULL));
        CHECK(n == small);
        std::vector<unsigned> after(small);
        CHECK_OK(gpudyn_ggarray_copy_to_host(g, after.data(), small * 4, NULL));
        CHECK(memcmp(before.data(), after.data(), small * 4) == 0); // nothing lost, nothing moved
        std::vector<unsigned> ref(in.begin(), in.begin() + small);
        CHECK(same_multiset(after.data(), ref.data(), small, 4));
        CHECK_OK(gpudyn_ggarray_push_back(g, d, small, NULL, gpudyn_insert_algo_t(algo), NULL));
        CHECK_OK(gpudyn_ggarray_size(g, &n, NULL));
        CHECK(n == 2 * small);
        // reserve beyond the budget also reports OUT_OF_MEMORY
        CHECK_STATUS(gpudyn_ggarray_reserve(g, 64ull << 20, NULL), GPUDYN_ERROR_OUT_OF_MEMORY);
        gpudyn_device_free(d, NULL);
        CHECK_OK(gpudyn_ggarray_destroy(g));
    }
    { // the pool: 64 MB of elements with a 32 MB budget
        const uint64_t big = 16000000;
        std::vector<unsigned> in(big);
        for (uint64_t i = 0; i < big; ++i) in[i] = unsigned(i * 2654435761u);
        void* d = NULL;
        CHECK_OK(gpudyn_device_alloc(&d, big * 4, NULL));
        CHECK_OK(gpudyn_memcpy(d, in.data(), big * 4, GPUDYN_MEMCPY_HOST_TO_DEVICE, NULL));
        gpudyn_ggarray_options_t o;
        gpudyn_ggarray_options_init(&o);
        o.num_lfvectors = 4;
        o.budget_bytes = kBudgetBytes;
        gpudyn_ggarray_t g = NULL;
        CHECK_OK(gpudyn_ggarray_create(&g, &o, NULL));
        CHECK_OK(gpudyn_ggarray_reserve(g, 2 * big, NULL)); // far beyond the budget: pool rows
        uint64_t cap = 0, bytes = 0, n = 0;
        CHECK_OK(gpudyn_ggarray_capacity(g, &cap, NULL));
        CHECK(cap >= 2 * big);
        CHECK_OK(gpudyn_ggarray_push_back(g, d, big, NULL, GPUDYN_INSERT_WARP_SCAN, NULL));
        CHECK_OK(gpudyn_ggarray_size(g, &n, NULL));
        CHECK(n == big);
        CHECK_OK(gpudyn_ggarray_allocated_bytes(g, &bytes, NULL));
        CHECK(bytes >= cap * 4 && bytes < cap * 4 + (64ull << 20));
        std::vector<unsigned> out(big), ref(in);
        CHECK_OK(gpudyn_ggarray_copy_to_host(g, out.data(), big * 4, NULL));
        CHECK(same_multiset(out.data(), ref.data(), big, 4));
        CHECK_OK(gpudyn_ggarray_destroy(g));
        // a small pool: the rows beyond it come from the heap, which cannot hold them
        o.pool_bytes = 4ull << 20;
        CHECK_OK(gpudyn_ggarray_create(&g, &o, NULL));
        CHECK_OK(gpudyn_ggarray_push_back(g, d, 1000, NULL, GPUDYN_INSERT_ATOMIC, NULL));
        CHECK_STATUS(gpudyn_ggarray_reserve(g, 4 * big, NULL), GPUDYN_ERROR_OUT_OF_MEMORY);
        CHECK_OK(gpudyn_ggarray_size(g, &n, NULL));
        CHECK(n == 1000);
        std::vector<unsigned> small(1000), sref(in.begin(), in.begin() + 1000);
        CHECK_OK(gpudyn_ggarray_copy_to_host(g, small.data(), 1000 * 4, NULL));
        CHECK(same_multiset(small.data(), sref.data(), 1000, 4));
        CHECK_OK(gpudyn_ggarray_destroy(g));
        gpudyn_device_free(d, NULL);
    }
    return TEST_RESULT();
}
