// Size classes of the heap (include/gpudyn/heap.cuh), on the host: every size
// from 1 B to page_size / 2 maps to the smallest class that holds it, rounding
// wastes at most 12.5 % above 128 B (16 B steps below), 2^k sizes are classes
// of their own, and each class's slab holds 64 slots and 128 KiB (at most
// 1 MiB, and in a small heap 1/256 of it, but never fewer than 8 slots) in a
// power of two of pages.
// Checked for every page size the heap accepts against a brute-force reference
// built here from the rule in the header's comment.
#include "check.h"

#include <gpudyn/heap.cuh>

#include <algorithm>
#include <vector>

int main() {
    using namespace gpudyn;
    using namespace gpudyn::detail;
    for (unsigned shift = kHeapMinPageShift; shift <= kHeapMaxPageShift; ++shift) {
        const unsigned long long P = 1ull << shift;
        const unsigned count = heap_class_count(shift);
        CHECK(count <= kHeapMaxClasses);
        // Reference list: 16..128 step 16, then 8 per doubling.
        std::vector<unsigned long long> ref;
        for (unsigned long long s = 16; s <= 128; s += 16) ref.push_back(s);
        for (unsigned long long lo = 128; lo < P / 2; lo *= 2)
            for (unsigned i = 1; i <= 8; ++i) ref.push_back(lo + i * (lo / 8));
        CHECK(ref.size() == count);
        CHECK(ref.back() == P / 2);
        for (unsigned c = 0; c < count && c < ref.size(); ++c) {
            CHECK(heap_class_size(c) == ref[c]);
            const heap_class k = heap_class_geometry(c, shift);
            CHECK(k.size == ref[c]);
            CHECK(k.slots >= kHeapSlabMinSlots);
            CHECK((unsigned long long)k.slots * k.size <= (unsigned long long)k.slab_pages * P);
            // Room for two converged warps (64 slots; four, 128, from 2 KiB) and at
            // least 128 KiB, unless that is more than 1 MiB; never fewer than 8
            // slots; no page more than needed for that.
            const unsigned long long slab = (unsigned long long)k.slab_pages * P;
            const unsigned long long slots = k.size >= 2048 ? 128 : 64;
            const unsigned long long want = std::min(std::max(slots * k.size, 128ull << 10), 1ull << 20);
            CHECK(slab >= want && k.slots >= 8);
            CHECK((k.slab_pages & (k.slab_pages - 1)) == 0); // a power of two (claimed aligned)
            CHECK(k.slab_pages == 1 || slab / 2 < std::max(want, 8ull * k.size));
            CHECK((unsigned long long)k.slots * 16 <= slab); // fits the slot words of the slab's pages
            // A class with few requests holds little: at most 1 MiB, or 8 slots and a page.
            CHECK(slab <= std::max(1ull << 20, 16ull * k.size + P));
        }
        unsigned c = 0;
        int bad = 0;
        for (unsigned long long b = 1; b <= P / 2; ++b) {
            while (ref[c] < b) ++c;
            if (heap_class_of(b) != c) ++bad;
            if (b > 128 && (ref[c] - b) * 8 > b) ++bad; // <= 12.5 % waste
            if ((b & (b - 1)) == 0 && b >= 16 && ref[c] != b) ++bad;
        }
        if (bad) fprintf(stderr, "page size %llu: %d sizes in a wrong class\n", P, bad);
        CHECK(bad == 0);
        // Small heaps: a slab is at most 1/256 of the heap (or one page), unless 8
        // slots need more; large heaps (and no bound) get the geometry above.
        for (unsigned long long heap : {16ull << 20, 64ull << 20, 1ull << 30}) {
            if (heap < 4 * P) continue;
            for (unsigned c = 0; c < count; ++c) {
                const heap_class k = heap_class_geometry(c, shift, heap / P);
                const unsigned long long slab = (unsigned long long)k.slab_pages * P;
                const unsigned long long most = std::max(P, std::min(heap / 256, 1ull << 20));
                CHECK(k.slots >= 8 && (k.slab_pages & (k.slab_pages - 1)) == 0);
                CHECK(slab <= most || slab / 2 < 8ull * k.size);
                if (heap / 256 >= (1ull << 20)) {
                    const heap_class u = heap_class_geometry(c, shift);
                    CHECK(u.slab_pages == k.slab_pages && u.slots == k.slots);
                }
            }
        }
    }
    return TEST_RESULT();
}
