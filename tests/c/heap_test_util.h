// Helpers shared by the C++ heap tests: the host reference of the Heap's size
// classes (the rule heap.cuh states) and its stats.
#pragma once
#include <gpudyn/heap.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "check.h"

// Size classes of a heap with pages of P bytes: 16-byte steps up to 128 B, then
// 8 classes a doubling up to P / 2.
static std::vector<uint64_t> ref_classes(uint64_t P) {
    std::vector<uint64_t> c;
    for (uint64_t s = 16; s <= 128; s += 16) c.push_back(s);
    for (uint64_t lo = 128; lo < P / 2; lo *= 2)
        for (uint64_t i = 1; i <= 8; ++i) c.push_back(lo + i * (lo / 8));
    return c;
}

static gpudyn_heap_stats_t heap_stats(gpudyn_heap_t h) {
    gpudyn_heap_stats_t st;
    memset(&st, 0, sizeof st);
    st.struct_size = sizeof st;
    CHECK_OK(gpudyn_heap_get_stats(h, &st, nullptr));
    return st;
}
