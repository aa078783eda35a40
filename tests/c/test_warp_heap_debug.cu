// The debug build's contract checks (GPUDYN_WARP_HEAP_DEBUG=1, see
// warp_heap.cuh): a collective whose mask holds a lane outside the started set,
// and end() by such a lane, are counted as misuse and fail instead of
// corrupting the header; the lanes that started keep working and free
// everything.  Cheap: one small kernel on the default (arena) backing.
#define GPUDYN_WARP_HEAP_DEBUG 1
#include "check.h"

#include <gpudyn/warp_heap.h>
#include <gpudyn/warp_heap.cuh>

#include <cstdint>
#include <cstdio>

#define CUDA_OK(call) CHECK((call) == cudaSuccess)

// Lanes that start (the low half); lane kIntruder is not among them but is
// handed the header pointer by shuffle and pretends to be.
constexpr unsigned kStarters = 0x0000ffffu;
constexpr unsigned kIntruder = 16;
constexpr unsigned kWithIntruder = kStarters | (1u << kIntruder);

__global__ void debug_kernel(gpudyn_warp_heap_view_t view, unsigned* served, unsigned* wrong) {
    gpudyn::warp_heap_ref ref{view};
    const unsigned lane = gpudyn::detail::lane_index();
    if ((kWithIntruder >> lane & 1u) == 0) return;
    const bool starter = (kStarters >> lane & 1u) != 0;
    gpudyn::warp_heap heap = ref.start(kWithIntruder, starter);
    void* h = gpudyn::detail::broadcast_pointer(kWithIntruder, heap.header_pointer(), 0);
    gpudyn::warp_heap fake(ref, static_cast<gpudyn::warp_heap_detail::header*>(h), kStarters);
    gpudyn::warp_heap& mine = starter ? heap : fake;
    // Misuse 1: a lane outside the started set takes part in a collective.
    void* p = mine.alloc(kWithIntruder, 16);
    if (p != nullptr) atomicAdd(wrong, 1u);
    if (starter) {
        // The started lanes go on as if nothing happened.
        void* q = heap.alloc(kStarters, 16);
        if (q != nullptr) {
            atomicAdd(served, 1u);
            *static_cast<unsigned*>(q) = lane;
        }
        __syncwarp(kStarters);
        if (q != nullptr && *static_cast<unsigned*>(q) != lane) atomicAdd(wrong, 1u);
    } else {
        // Misuse 2: end() by a lane that did not start (would drop ActiveCount).
        if (fake.end()) atomicAdd(wrong, 1u);
    }
    if (starter) heap.end();
}

int main() {
    REQUIRE_DEVICE();
    gpudyn_warp_heap_options_t o;
    CHECK_OK(gpudyn_warp_heap_options_init(&o));
    o.arena_bytes = 64u << 20;
    gpudyn_warp_heap_t h = nullptr;
    CHECK_OK(gpudyn_warp_heap_create(&h, &o, nullptr));
    uint64_t before = 0, after = 0;
    CHECK_OK(gpudyn_warp_heap_backing_free_bytes(h, &before, nullptr));
    gpudyn_warp_heap_view_t v;
    CHECK_OK(gpudyn_warp_heap_get_view(h, &v));
    unsigned* d;
    CUDA_OK(cudaMalloc(&d, 2 * sizeof(unsigned)));
    CUDA_OK(cudaMemset(d, 0, 2 * sizeof(unsigned)));
    const unsigned warps = 8;
    debug_kernel<<<warps / 2, 64>>>(v, d, d + 1);
    CUDA_OK(cudaGetLastError());
    unsigned r[2] = {0, 1};
    CUDA_OK(cudaMemcpy(r, d, sizeof r, cudaMemcpyDeviceToHost));
    CHECK(r[0] == warps * 16); // every started lane served
    CHECK(r[1] == 0);          // no misuse got memory, no data lost
    gpudyn_warp_heap_stats_t s{};
    CHECK_OK(gpudyn_warp_heap_get_stats(h, &s, nullptr));
    CHECK(s.misuse == warps * 2);
    CHECK(s.headers == 0 && s.superblocks == 0 && s.bytes_reserved == 0 && s.bytes_requested == 0);
    CHECK_OK(gpudyn_warp_heap_backing_free_bytes(h, &after, nullptr));
    CHECK(after == before);
    printf("debug contract checks: misuse %llu (expected %u) %s\n", (unsigned long long)s.misuse, warps * 2,
           gpudyn_test_failures ? "FAILED" : "ok");
    CUDA_OK(cudaFree(d));
    CHECK_OK(gpudyn_warp_heap_destroy(h));
    return TEST_RESULT();
}
