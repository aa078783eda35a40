// Host test (no GPU): the bulk-insertion plan shared by the library's
// push_back and the benchmark (include/gpudyn/insert.cuh).  For many counts,
// target counts and part sizes: the parts cover [0, count) exactly once, each
// target gets count/targets (+1 for the first count mod targets), one-target
// ranges start 256-aligned, the grid never exceeds the resident blocks or the
// parts; and dealing targets from size mod targets keeps every LFVector at
// floor(size/L) + (l < size mod L) over a sequence of insertions of any size.
#include <gpudyn/insert.cuh>

extern "C" {
#include "check.h"
}

#include <algorithm>
#include <utility>
#include <vector>

using gpudyn::bulk_plan;

static unsigned long long lcg(unsigned long long& x) {
    x = x * 6364136223846793005ull + 1442695040888963407ull; // Knuth's MMIX LCG
    return x >> 33;
}

// Checks one plan; adds each part's length to sizes[(t + first_target) mod targets].
static void check_plan(unsigned long long count, unsigned resident, unsigned targets, unsigned long long min_part,
                       unsigned first_target, std::vector<unsigned long long>* sizes) {
    const bulk_plan p = gpudyn::plan_bulk_insert(count, resident, targets, min_part, first_target);
    if (count == 0) {
        CHECK(p.parts == 0 && p.grid == 0);
        return;
    }
    CHECK(p.parts > 0 && p.parts % targets == 0);
    CHECK(p.grid >= 1 && p.grid <= resident && p.grid <= p.parts);
    CHECK(p.first_target == first_target % targets);
    std::vector<std::pair<unsigned long long, unsigned long long>> r;
    std::vector<unsigned long long> per_target(targets, 0);
    for (unsigned long long q = 0; q < p.parts; ++q) {
        unsigned long long lo = 0, hi = 0;
        gpudyn::bulk_part_range(count, p, q, &lo, &hi);
        CHECK(lo <= hi && hi <= count);
        if (targets == 1 && lo != hi) CHECK(lo % gpudyn::kBulkPartAlign == 0);
        r.emplace_back(lo, hi);
        per_target[q % targets] += hi - lo;
        if (sizes) (*sizes)[(q % targets + p.first_target) % targets] += hi - lo;
    }
    std::sort(r.begin(), r.end());
    unsigned long long at = 0;
    for (auto& x : r) {
        if (x.first == x.second) continue;
        CHECK(x.first == at); // no gap, no overlap
        at = x.second;
    }
    CHECK(at == count);
    for (unsigned t = 0; t < targets; ++t) CHECK(per_target[t] == count / targets + (t < count % targets ? 1 : 0));
}

int main() {
    unsigned long long seed = 12345;
    const unsigned targets_list[] = {1, 2, 7, 32, 512, 2048};
    const unsigned long long counts[] = {0,    1,    2,      255,     256,          257,
                                         4095, 4096, 100003, 1000000, 512000000ull, (1ull << 40) + 12345};
    for (unsigned T : targets_list)
        for (unsigned long long n : counts)
            for (unsigned resident : {1u, 7u, 264u}) check_plan(n, resident, T, 4096, unsigned(n % 97), nullptr);
    // A sequence of insertions keeps the LFVectors dealt round-robin.
    for (unsigned T : {7u, 512u}) {
        std::vector<unsigned long long> sizes(T, 0);
        unsigned long long total = 0;
        for (int step = 0; step < 300; ++step) {
            const unsigned long long n = step % 3 == 0 ? 1 : lcg(seed) % (step % 3 == 1 ? 5000 : 3000000);
            check_plan(n, 264, T, 4096, unsigned(total % T), &sizes);
            total += n;
            bool dealt = true;
            for (unsigned l = 0; l < T; ++l) dealt = dealt && sizes[l] == total / T + (l < total % T ? 1 : 0);
            if (!dealt) {
                fprintf(stderr, "targets %u step %d: LFVector sizes left the round-robin deal\n", T, step);
                ++gpudyn_test_failures;
                break;
            }
        }
    }
    return TEST_RESULT();
}
