// gpudyn — device allocator (heap), device side (header-only; nvcc and NVRTC).
//
// malloc/free of 1 B .. >= 1 GiB from any thread of any kernel, under any
// divergence, with no caller scratch and no caller RNG.  The host owns the heap
// (gpudyn_heap_create) and hands kernels a gpudyn_heap_view_t by value:
//
//   __global__ void k(gpudyn_heap_view_t v) {
//       gpudyn::heap_ref heap{v};
//       int* p = static_cast<int*>(heap.malloc(40 * sizeof(int)));   // any thread, any branch
//       if (p) { ...; heap.free(p); }                               // or free in a later kernel
//   }
//
// Design (issue 11).  Memory is one virtual range of max_pages pages of
// page_size P bytes (a power of two), of which a prefix is mapped (mapped_pages,
// read from device memory, so a view stays valid when the host grows the heap
// between launches).  A page bitmap (64-bit words, 1 = used; pages not mapped
// yet are marked used) is the random-walk page heap of rw_heap.cuh: pages and
// runs are found with its primitives (RW-BM walk with a bounded sweep, its
// region run search), never by a second copy.  Requests fall in three classes:
//
//  * Small (<= P/2): size classes 16, 32, .., 128 B, then 8 classes per
//    doubling (rounding wastes <= 12.5 %); class sizes that are powers of two
//    are exactly the 2^k requests, and slots are multiples of the class size
//    from a page boundary, so 2^k requests up to P are 2^k-aligned.  A class
//    carves slabs of 2^scale base slabs (a base slab: ceil(8 * size / P)
//    pages, >= 8 slots; the scale grows with the class, up to 8x, so a busy
//    class switches slabs rarely and a quiet one holds little), whose slot
//    bits (1 = used) live out of band (slot_bitmap, P/1024 words per page,
//    indexed by the slab's first page); a directory lists a class's slabs.
//    A class has up to 32 cursors (64-bit: slab, offset), enabled as it grows
//    (1 + slabs / 4); a group uses its SM's cursor, or cursor 0 while that one
//    is not enabled.  malloc groups the lanes that arrive together
//    (__activemask) by class (__match_any_sync); the leader adds the group's
//    count to the cursor (one atomic, acquire) and lane r takes slot offset + r
//    of the cursor's *bump* slab, whose slot bits were all set when it was
//    attached: a converged warp or a lone lane costs one atomic.  Offsets are
//    unique, so exactly one group takes a slab's last slot; it switches the
//    cursor (atomicExch) while groups that came later wait for the change.
//    The switch takes, in order: a slab of the class with >= 1/8 of its slots
//    free (random probes, only when a free marked the class dirty; served
//    through its bitmap, the offset counting its free slots down), a fresh
//    bump slab (pages from the page bitmap, bits set by the group's lanes,
//    records written, fenced, published in the directory), or an exhausted
//    mark.  A bump slab a cursor leaves with slots not handed out (a race of
//    installs, a reset of the mark) is *retired*: those bits are cleared and
//    the class marked dirty, so nothing is stranded.  Under the exhausted mark
//    the slow path sweeps every slab of the class, then tries to attach again
//    (memory may have been freed), which re-arms the cursor.  So a small
//    request fails only when no slot of its class and no page for a slab is
//    free.  Slabs stay with their class until reset.  A free of a slot past a
//    bump cursor's offset (the slab's record names its cursor) is a bad free.
//  * Medium (> P/2, up to kRwRegionWords * 64 pages, 128 MiB with 64 KiB pages):
//    a run of ceil(bytes / P) pages from rw_heap's RW_malloc region search, called
//    by the lane alone (a one-lane mask with a local rw_malloc_storage), recorded
//    in run_meta by rw_heap's run records; free goes through rw_heap_ref::free
//    (the record is claimed by a CAS, so one of two concurrent frees wins).
//  * Huge (more pages than a region): a bounded scan (every mapped word once,
//    from a random word) for ceil(pages / 64) consecutive all-free bitmap
//    words, claimed word by word with CAS 0 -> all ones and rolled back on a
//    conflict; recorded as a huge record in slab_meta at the first page.  Sizes
//    round up to 64 pages (4 MiB with 64 KiB pages, < 3.2 % of a huge request).
//
// free(p) finds the page of p (p outside the range: bad free), then its record:
// a slab (the first page or a member page pointing back to it) -> the slot
// (p must be a slot start, else bad free); lanes freeing the same pointer
// together: the lowest lane frees, the others are bad frees; lanes freeing into
// the same bitmap word together clear their bits with one atomicAnd; a bit that
// was already clear is a double free.  Huge: CAS of the record to 0 (one winner),
// then the words.  Otherwise rw_heap_ref::free (medium run record or bad free).
// A double, foreign or interior free returns false, is counted in counters[1]
// and changes nothing.  (A pointer freed twice after its slot was handed out
// again frees the new owner's block: no allocator without per-block tags can
// see that.)  free starts with a release fence (fence.acq_rel.gpu) so that the
// caller's writes to the block are visible before another thread can be handed
// the same bytes.
//
// No counter is touched on the hot paths: failures and bad frees are counted
// (counters[0], counters[1]), once per warp group; live bytes are computed by
// the host's stats kernel from the records (usage_of_page).
//
// Metadata, sized for the reserved range (max_pages pages): slot bits P/16 bits
// per page (1/128 of the range: 0.78 %), rw_heap's live-run-start bits for the
// medium runs (one bit per 16 bytes: another 0.78 %), two uint32 records per page, one bitmap bit per page,
// the class directories (sum over classes of max_pages / slab_pages(c) uint32:
// 0.4 % with 64 KiB pages, 2.5 % with 4 KiB pages).  About 2 % of max_bytes
// with 64 KiB pages, 4 % with 4 KiB pages.
//
// Memory ordering: a slot's bit is set (atomicOr) before its pointer is handed
// out; a slab is initialised and fenced (__threadfence) before its directory
// entry is stored, and readers load entries with ld.acquire.gpu, so a reader
// that sees an entry sees the slab's bits and records.  Huge and medium records
// are written by the allocating thread before it returns the pointer; a free
// clears the record (CAS) and fences before releasing the page bits.
//
// Contract: every call may be made by any thread at any time, diverged or not;
// lanes that arrive together are aggregated inside (the mask is the
// __activemask() taken at entry and every lane of it runs every collective step).
// Pointers are 16-byte aligned; malloc_aligned gives alignments up to P.  Bytes
// are not zeroed.  Needs sm_70+ (match, nanosleep, ld.acquire); CUDA 13 is sm_75+.
#pragma once

#include "gpudyn/detail/bits.cuh"
#include "gpudyn/detail/lane_mask.cuh"
#include "gpudyn/detail/random.cuh"
#include "gpudyn/rw_heap.cuh"  // page bitmap walk and run search, rw_heap_ref (medium runs)

#if !defined(__CUDACC_RTC__)
#include "gpudyn/heap.h"
#endif

namespace gpudyn {
inline namespace v0 {

// View layout this header reads (GPUDYN_HEAP_VIEW_VERSION).
constexpr unsigned kHeapViewVersion = 2;
// Alignment of every pointer (malloc's guarantee for any built-in type).
constexpr unsigned long long kHeapAlign = 16;
// "No page" / "entry not published yet" (directory entries are memset to 0xFF).
constexpr unsigned kHeapNoPage = 0xffffffffu;
// Slots of gpudyn_heap_view_t::counters: failed allocations, bad frees, then
// the failures of slab attaches (rw_heap's own failure count while attaching a
// slab, not a failed allocation; kept apart so it is not counted twice).
constexpr unsigned kHeapCounterFailed = 0;
constexpr unsigned kHeapCounterBadFree = 1;
constexpr unsigned kHeapCounterAttachScratch = 2;
constexpr unsigned kHeapCounterCount = 4;

// slab_meta records: tag in the top 2 bits.
constexpr unsigned kHeapTagShift = 30;
constexpr unsigned kHeapLowMask = (1u << kHeapTagShift) - 1;
constexpr unsigned kHeapTagNone = 0;    // free page, or a page of a medium run (see run_meta)
constexpr unsigned kHeapTagSlab = 1;    // first page of a slab: low bits = class
constexpr unsigned kHeapTagMember = 2;  // later page of a slab: low bits = offset to the first page
constexpr unsigned kHeapTagHuge = 3;    // first page of a huge run: low bits = bitmap words (64 pages each)

// Size classes: 16-byte steps up to kHeapLinearLimit, then this many classes
// per doubling (12.5 % worst rounding waste, the bound the design asks for).
constexpr unsigned kHeapLinearLimit = 128;
constexpr unsigned kHeapLinearClasses = kHeapLinearLimit / 16;
constexpr unsigned kHeapClassesPerDoubling = 8;
constexpr unsigned kHeapLinearShift = 7;  // log2(kHeapLinearLimit)
// Page sizes the heap accepts: 4 KiB (the smallest VMM-friendly page worth a
// bitmap bit) to 2 MiB (the VMM granularity: a page never straddles a mapping).
constexpr unsigned kHeapMinPageShift = 12;
constexpr unsigned kHeapMaxPageShift = 21;
// Classes for the largest page: sizes up to 2^20 = 8 * (21 - 7) classes.
constexpr unsigned kHeapMaxClasses = kHeapClassesPerDoubling * (kHeapMaxPageShift - kHeapLinearShift);
// A slab holds at least this many slots (and at least one page): small enough
// that a class with few requests holds little (a 32 KiB class: 4 pages), and a
// page of a class up to P/8 is one slab.
constexpr unsigned kHeapSlabMinSlots = 8;
// Slot bitmap words per page: P / 16 slots at most (the 16-byte class) / 64.
constexpr unsigned kHeapSlotWordShift = 10;  // P >> 10 words of 64 bits = P / 16 bits
// Words of a slab one lane reads in a bitmap claim (the lanes of a group split the slab).
constexpr unsigned kHeapScanWords = 8;
// atomicOr attempts of a lane on one word (each after a lost race).
constexpr unsigned kHeapClaimTries = 4;
// Class state (uint32 words per class): slabs attached, the first-install
// lock, the dirty mark (a free since the class last found no slab to
// recycle), cursors enabled beyond the first, then kHeapCursors 64-bit
// cursors.  A group uses cursor smid % kHeapCursors when it is enabled, else
// cursor 0; a class of s slabs enables 1 + s / kHeapSlabsPerCursor of them
// (few partly filled slabs for a small class, one atomic address per few SMs
// for a busy one).
constexpr unsigned kHeapStateCount = 0;
constexpr unsigned kHeapStateLock = 1;
constexpr unsigned kHeapStateDirty = 2;
constexpr unsigned kHeapStateEnabled = 3;
constexpr unsigned kHeapStateCursorWord = 4;
constexpr unsigned kHeapCursors = 32;
constexpr unsigned kHeapSlabsPerCursor = 4;
constexpr unsigned kHeapClassStateWords = kHeapStateCursorWord + 2 * kHeapCursors;
// Cursor field (the high word): slab + 1 in the low 27 bits (0: none yet;
// kHeapFieldExhausted: no page was left for a slab), the slab's scale, and
// the recycle flag (a slab served through its bitmap).
constexpr unsigned kHeapFieldSlabBits = 27;
constexpr unsigned kHeapFieldSlabMask = (1u << kHeapFieldSlabBits) - 1;
constexpr unsigned kHeapFieldNone = 0;
constexpr unsigned kHeapFieldExhausted = kHeapFieldSlabMask;
constexpr unsigned kHeapFieldScaleShift = kHeapFieldSlabBits;
constexpr unsigned kHeapScaleMask = 0xf;
constexpr unsigned kHeapFieldRecycle = 1u << 31;
// Pages a heap may have (slab + 1 fits the field, below kHeapFieldExhausted).
constexpr unsigned long long kHeapMaxPages = 1ull << 26;
// A cursor without a slab still takes the groups' adds: its offset is cut
// back below 2^31 so it never carries into the field.
constexpr unsigned kHeapOffsetWrap = 1u << 30;
// Bump slabs grow with the class: 2^scale base slabs, scale + 1 once the
// class has kHeapScaleSlabs << scale slabs (at most 2^kHeapMaxScale), so a busy
// class switches slabs rarely and a quiet one holds little.
constexpr unsigned kHeapMaxScale = 3;
constexpr unsigned kHeapScaleSlabs = 16;
// Slab record (slab_meta of a slab's first page): tag, scale, the cursor
// that bump-allocates it (+ 1; 0: none), class.
constexpr unsigned kHeapRecScaleShift = 26;
constexpr unsigned kHeapRecMarkerShift = 20;
constexpr unsigned kHeapRecMarkerMask = 0x3f;
constexpr unsigned kHeapRecClassMask = 0xff;
// Recycling: random slabs of the class probed when a cursor switches after
// frees; a slab qualifies with >= 1 / kHeapRecycleShare of its slots free.
constexpr unsigned kHeapRecycleProbes = 8;
constexpr unsigned kHeapRecycleShare = 8;
// Fast-path rounds of one call before the slow path (a bound, never reached
// in practice), and the wait for a switch: rounds of a sleep from
// kHeapWaitNs ns, doubled up to 16x.
constexpr unsigned kHeapFastRounds = 256;
constexpr unsigned kHeapWaitRounds = 64;
constexpr unsigned kHeapWaitNs = 64;

// The C view's layout, restated for NVRTC (which has no <stdint.h>); checked
// against gpudyn_heap_view_t below whenever the C header is available.
struct heap_view {
    unsigned version;
    unsigned page_shift;
    unsigned long long base;
    unsigned long long page_bitmap;
    unsigned long long run_meta;
    unsigned long long run_starts;
    unsigned long long slab_meta;
    unsigned long long slot_bitmap;
    unsigned long long class_table;
    unsigned long long class_state;
    unsigned long long directory;
    unsigned long long mapped_pages;
    unsigned long long counters;
    unsigned class_count;
    unsigned max_pages;
    unsigned max_random_steps;
    unsigned reserved;
};

#if !defined(__CUDACC_RTC__)
static_assert(sizeof(heap_view) == sizeof(gpudyn_heap_view_t), "heap_view must mirror the C view");
static_assert(__builtin_offsetof(heap_view, directory) == __builtin_offsetof(gpudyn_heap_view_t, directory),
              "heap_view must mirror the C view");
static_assert(__builtin_offsetof(heap_view, counters) == __builtin_offsetof(gpudyn_heap_view_t, counters),
              "heap_view must mirror the C view");
static_assert(__builtin_offsetof(heap_view, reserved) == __builtin_offsetof(gpudyn_heap_view_t, reserved),
              "heap_view must mirror the C view");
#endif

// One size class (class_table entry), filled by the host from heap_class_geometry.
struct heap_class {
    unsigned size;        // bytes per slot
    unsigned slab_pages;  // pages per slab
    unsigned slots;       // slots per slab (<= P / 16)
    unsigned dir_offset;  // first directory entry of the class
};

// Usage of one page, for the stats kernel (usage_of_page).
struct heap_page_usage {
    unsigned long long allocations;      // live allocations starting on this page
    unsigned long long bytes_allocated;  // their usable bytes
    unsigned long long largest_slot;     // largest class size with a free slot in a slab starting here
};

namespace detail {

// Class of a small request (1 <= bytes <= P/2).
__host__ __device__ __forceinline__ unsigned heap_class_of(unsigned long long bytes) {
    if (bytes <= kHeapLinearLimit) return unsigned((bytes + 15) / 16) - (bytes != 0 ? 1u : 0u);
    // 2^e < bytes <= 2^(e+1), e >= 7: 8 classes of 2^(e-3) bytes in that doubling.
#if defined(__CUDA_ARCH__)
    const unsigned e = 63u - unsigned(__clzll(static_cast<long long>(bytes - 1)));
#else
    const unsigned e = 63u - unsigned(__builtin_clzll(bytes - 1));
#endif
    unsigned long long step = 1ull << (e - 3);
    unsigned idx = unsigned((bytes - (1ull << e) + step - 1) / step) - 1;
    return kHeapLinearClasses + (e - kHeapLinearShift) * kHeapClassesPerDoubling + idx;
}

__host__ __device__ __forceinline__ unsigned long long heap_class_size(unsigned c) {
    if (c < kHeapLinearClasses) return 16ull * (c + 1);
    unsigned d = (c - kHeapLinearClasses) / kHeapClassesPerDoubling;
    unsigned i = (c - kHeapLinearClasses) % kHeapClassesPerDoubling;
    unsigned e = kHeapLinearShift + d;
    return (1ull << e) + (i + 1ull) * (1ull << (e - 3));
}

// Classes of a heap with pages of 2^page_shift bytes (sizes up to P / 2).
__host__ __device__ __forceinline__ unsigned heap_class_count(unsigned page_shift) {
    return kHeapClassesPerDoubling * (page_shift - kHeapLinearShift);
}

// Geometry of class c (dir_offset left 0: the host sums the directories).
__host__ __device__ __forceinline__ heap_class heap_class_geometry(unsigned c, unsigned page_shift) {
    const unsigned long long P = 1ull << page_shift;
    const unsigned long long size = heap_class_size(c);
    const unsigned long long pages = (kHeapSlabMinSlots * size + P - 1) / P;
    heap_class k;
    k.size = unsigned(size);
    k.slab_pages = unsigned(pages);
    k.slots = unsigned(pages * P / size);
    k.dir_offset = 0;
    return k;
}

// ld.acquire at GPU scope: later loads of this thread see what the writer
// stored before its release (here: its __threadfence before the store).
__device__ __forceinline__ unsigned load_acquire(const unsigned* p) {
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Release fence at GPU scope: this thread's earlier writes are visible to any
// thread that later observes one of its later writes (lighter than the
// sequentially consistent __threadfence).
__device__ __forceinline__ void release_fence() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

// atomicAdd with acquire semantics at GPU scope: a thread that reads a cursor
// installed after a slab's records were written and fenced sees the records.
__device__ __forceinline__ unsigned long long atomic_add_acquire(unsigned long long* p, unsigned long long v) {
    unsigned long long old;
    asm volatile("atom.acquire.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
    return old;
}

// OR of a 64-bit value over the lanes of mask (a warp collective over mask).
__device__ __forceinline__ unsigned long long masked_or64(unsigned mask, unsigned long long v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned lo = __reduce_or_sync(mask, unsigned(v));
    unsigned hi = __reduce_or_sync(mask, unsigned(v >> 32));
    return (static_cast<unsigned long long>(hi) << 32) | lo;
#else
    unsigned long long r = 0;
    for (unsigned rest = mask; rest != 0; rest &= rest - 1) r |= __shfl_sync(mask, v, int(lowest_bit(rest)));
    return r;
#endif
}

// The SM the thread runs on.
__device__ __forceinline__ unsigned sm_id() {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

// A per-call random stream without caller state: the thread's global id and
// the SM clock (different on every call).
__device__ __forceinline__ counter_rng heap_rng() {
    const unsigned long long block =
        (static_cast<unsigned long long>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const unsigned long long thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    const unsigned long long id = block * (static_cast<unsigned long long>(blockDim.x) * blockDim.y * blockDim.z) + thread;
    return counter_rng(static_cast<unsigned long long>(clock64()), id);
}

}  // namespace detail

// Device handle over a view.  Cheap to construct; copy freely.
class heap_ref {
public:
    __device__ explicit heap_ref(const heap_view& view) : v_(view) {
        // A view of another layout version is refused: every call then fails.
        if (v_.version != kHeapViewVersion) v_.class_count = 0;
    }
#if !defined(__CUDACC_RTC__)
    __device__ explicit heap_ref(const gpudyn_heap_view_t& view) : heap_ref(*reinterpret_cast<const heap_view*>(&view)) {}
#endif

    __device__ bool valid() const { return v_.class_count != 0; }
    __device__ unsigned long long page_size() const { return 1ull << v_.page_shift; }
    // Largest small request (served from slabs).
    __device__ unsigned long long max_small_size() const { return page_size() / 2; }

    // Any thread, any time, any divergence; lanes arriving together are
    // aggregated (one claim per class).  nullptr on failure (bytes == 0 gives
    // nullptr without counting; exhaustion is counted).  16-byte aligned; 2^k
    // requests up to the page size are 2^k-aligned.
    __device__ void* malloc(unsigned long long bytes) const {
        const unsigned mask = __activemask();
        const bool ok = valid() && bytes != 0;
        const unsigned cls = ok && bytes <= max_small_size() ? detail::heap_class_of(bytes) : kHeapNoPage;
        // Group key: the class (small), kKeyRun (medium/huge: each lane alone), kKeyNone.
        const unsigned key = !ok ? kKeyNone : (cls != kHeapNoPage ? cls : kKeyRun);
        const unsigned group = __match_any_sync(mask, key);
        if (key == kKeyNone) {
            count_failures(group, bytes != 0);  // an invalid view: every request fails
            return nullptr;
        }
        if (key == kKeyRun) {
            void* p = run_malloc(bytes);
            if (p == nullptr) atomicAdd(counters() + kHeapCounterFailed, 1ull);
            return p;
        }
        return small_malloc(group, cls);
    }

    // malloc with the pointer a multiple of `alignment` (a power of two up to
    // the page size; larger or non-power-of-two alignments fail and are counted).
    // The block is the request rounded up to the alignment.
    __device__ void* malloc_aligned(unsigned long long bytes, unsigned long long alignment) const {
        const bool bad = alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > page_size();
        if (bad) {
            if (bytes != 0) atomicAdd(counters() + kHeapCounterFailed, 1ull);
            return nullptr;
        }
        // Class sizes from a multiple of `alignment` on are multiples of it (see the
        // classes: each doubling's step divides its sizes), and slots start at
        // multiples of the class size from a page boundary.
        const unsigned long long rounded = bytes == 0 ? 0 : (bytes + alignment - 1) / alignment * alignment;
        return malloc(rounded);
    }

    // Any thread, any later kernel.  nullptr -> true.  A double free, a foreign
    // pointer or an interior pointer returns false, is counted as a bad free,
    // and changes nothing.
    __device__ bool free(void* p) const {
        const unsigned mask = __activemask();
        const unsigned lane = detail::lane_index();
        // The caller's writes to the block are visible before anyone can get it again.
        detail::release_fence();
        slot_ref s = locate(p);
        // Lanes freeing one pointer together: the lowest frees it, the others are double frees.
        const unsigned same = __match_any_sync(mask, reinterpret_cast<unsigned long long>(p));
        if (s.kind == kSlot && detail::lowest_bit(same) != lane) s.kind = kBad;
        // Lanes freeing into one slot word together clear their bits with one atomicAnd.
        const unsigned long long key = s.kind == kSlot ? reinterpret_cast<unsigned long long>(s.word)
                                                       : (static_cast<unsigned long long>(lane) << 1) | 1ull;
        const unsigned group = __match_any_sync(mask, key);
        if (s.kind == kSlot) {
            const unsigned long long bits = detail::masked_or64(group, s.bit);
            const unsigned leader = detail::lowest_bit(group);
            unsigned long long old = 0;
            if (lane == leader) old = atomicAnd(s.word, ~bits);
            old = __shfl_sync(group, old, int(leader));
            if ((old & s.bit) == 0) return bad_free();  // the slot was free already: nothing changed
            // The class has free slots to recycle (a plain load first: the mark is usually set).
            unsigned* dirty = class_state(s.cls) + kHeapStateDirty;
            if (lane == leader && detail::load_word(dirty) == 0) atomicExch(dirty, 1u);
            return true;
        }
        if (s.kind == kNull) return true;
        if (s.kind == kHuge) return huge_free(s.page);
        if (s.kind == kRun) return run_ref(kHeapCounterFailed).free(p);
        return bad_free();
    }

    // Usable bytes of the block at p (a pointer malloc returned and not yet
    // freed); 0 for nullptr, a foreign or an interior pointer.
    __device__ unsigned long long usable_size(const void* p) const {
        const slot_ref s = locate(p);
        if (s.kind == kSlot) return s.size;
        if (s.kind == kHuge) {
            const unsigned words = detail::load_word(slab_meta() + s.page) & kHeapLowMask;
            return (static_cast<unsigned long long>(words) * 64) << v_.page_shift;
        }
        if (s.kind == kRun) {
            const unsigned rec = detail::load_word(run_meta() + s.page);
            if ((rec >> kRwMetaTagShift) == kRwMetaLarge && p == page_address(s.page))
                return static_cast<unsigned long long>(rec & kRwMetaLowMask) << v_.page_shift;
        }
        return 0;
    }

    // For the stats kernel (lib/heap.cu): the allocations that start on `page`
    // (a snapshot; exact when no kernel runs concurrently).
    __device__ heap_page_usage usage_of_page(unsigned page) const {
        heap_page_usage u{0, 0, 0};
        const unsigned rec = detail::load_word(slab_meta() + page);
        const unsigned tag = rec >> kHeapTagShift;
        if (tag == kHeapTagSlab) {
            const unsigned c = rec & kHeapRecClassMask;
            const heap_class k = class_info(c);
            const unsigned slots = slab_slots(k, (rec >> kHeapRecScaleShift) & kHeapScaleMask);
            const unsigned long long* w = slot_words(page);
            unsigned used = 0;
            for (unsigned i = 0; i * 64 < slots; ++i) {
                unsigned long long valid = (slots - i * 64) >= 64 ? ~0ull : ((1ull << (slots - i * 64)) - 1);
                used += detail::popcount(detail::load_word(w + i) & valid);
            }
            // A cursor's bump slab: the slots past its offset are set but not handed out.
            const unsigned marker = (rec >> kHeapRecMarkerShift) & kHeapRecMarkerMask;
            if (marker != 0) {
                const unsigned long long cv = detail::load_word(cursor(c, marker - 1));
                const unsigned field = unsigned(cv >> 32);
                if (field_is_slab(field) && !field_recycle(field) && field_slab(field) == page && unsigned(cv) < slots)
                    used -= slots - unsigned(cv);
            }
            u.allocations = used;
            u.bytes_allocated = static_cast<unsigned long long>(used) * k.size;
            u.largest_slot = used < slots ? k.size : 0;
        } else if (tag == kHeapTagHuge) {
            u.allocations = 1;
            u.bytes_allocated = (static_cast<unsigned long long>(rec & kHeapLowMask) * 64) << v_.page_shift;
        } else if (tag == kHeapTagNone) {
            const unsigned r = detail::load_word(run_meta() + page);
            if ((r >> kRwMetaTagShift) == kRwMetaLarge) {
                u.allocations = 1;
                u.bytes_allocated = static_cast<unsigned long long>(r & kRwMetaLowMask) << v_.page_shift;
            }
        }
        return u;
    }

private:
    heap_view v_;

    static constexpr unsigned kKeyNone = 0xfffffffeu;
    static constexpr unsigned kKeyRun = 0xfffffffdu;
    enum kind_t : unsigned { kNull, kBad, kSlot, kHuge, kRun };
    struct slot_ref {
        unsigned kind;
        unsigned page;            // page of p (kHuge, kRun)
        unsigned long long* word; // slot bitmap word (kSlot)
        unsigned long long bit;   // the slot's bit in it (kSlot)
        unsigned long long size;  // class size (kSlot)
        unsigned cls;             // class (kSlot)
    };

    __device__ unsigned long long* counters() const { return reinterpret_cast<unsigned long long*>(v_.counters); }
    __device__ unsigned* slab_meta() const { return reinterpret_cast<unsigned*>(v_.slab_meta); }
    __device__ unsigned* run_meta() const { return reinterpret_cast<unsigned*>(v_.run_meta); }
    __device__ unsigned long long* page_words() const { return reinterpret_cast<unsigned long long*>(v_.page_bitmap); }
    __device__ unsigned* class_state(unsigned c) const { return reinterpret_cast<unsigned*>(v_.class_state) + kHeapClassStateWords * c; }
    __device__ unsigned* directory() const { return reinterpret_cast<unsigned*>(v_.directory); }
    __device__ unsigned mapped_pages() const { return detail::load_word(reinterpret_cast<const unsigned*>(v_.mapped_pages)); }
    __device__ char* page_address(unsigned page) const {
        return reinterpret_cast<char*>(v_.base) + (static_cast<unsigned long long>(page) << v_.page_shift);
    }
    __device__ unsigned long long* slot_words(unsigned page) const {
        return reinterpret_cast<unsigned long long*>(v_.slot_bitmap) +
               (static_cast<unsigned long long>(page) << (v_.page_shift - kHeapSlotWordShift));
    }
    __device__ heap_class class_info(unsigned c) const {
        // Read-only for the kernel's lifetime: the non-coherent cache is fine.
        const uint4 k = __ldg(reinterpret_cast<const uint4*>(v_.class_table) + c);
        return heap_class{k.x, k.y, k.z, k.w};
    }
    __device__ bool bad_free() const {
        atomicAdd(counters() + kHeapCounterBadFree, 1ull);
        return false;
    }
    // Counts the lanes of `group` for which `failed` holds, with one atomic.
    __device__ void count_failures(unsigned group, bool failed) const {
        const unsigned f = __ballot_sync(group, failed);
        if (f != 0 && detail::lane_index() == detail::lowest_bit(group))
            atomicAdd(counters() + kHeapCounterFailed, static_cast<unsigned long long>(detail::popcount(f)));
    }

    // rw_heap's view of the page bitmap and the run records; its failures go to
    // counters[failed_slot] (kHeapCounterFailed for medium runs, the scratch slot
    // for slab attaches), its bad frees to ours.
    __device__ rw_heap_ref run_ref(unsigned failed_slot) const {
        const unsigned pages = mapped_pages();
        rw_heap_view rv{};
        rv.version = kRwHeapViewVersion;
        rv.word_bits = 64;
        rv.pool = v_.base;
        rv.bitmap = v_.page_bitmap;
        rv.lockmap = 0;
        rv.page_meta = v_.run_meta;
        rv.live_starts = v_.run_starts;
        rv.counters = reinterpret_cast<unsigned long long>(counters() + failed_slot);
        rv.page_size = page_size();
        rv.page_count = pages;
        rv.word_count = (pages + 63) / 64;
        rv.max_random_steps = v_.max_random_steps;
        rv.reserved = 0;
        return rw_heap_ref(rv);
    }

    // What p is (thread-level; no side effects).
    __device__ slot_ref locate(const void* p) const {
        slot_ref s{kBad, 0, nullptr, 0, 0, 0};
        if (p == nullptr) {
            s.kind = kNull;
            return s;
        }
        const unsigned long long off = reinterpret_cast<unsigned long long>(p) - v_.base;
        if (!valid() || reinterpret_cast<unsigned long long>(p) < v_.base ||
            (off >> v_.page_shift) >= v_.max_pages)
            return s;
        unsigned page = unsigned(off >> v_.page_shift);
        s.page = page;
        unsigned rec = detail::load_word(slab_meta() + page);
        unsigned tag = rec >> kHeapTagShift;
        unsigned head = page;
        if (tag == kHeapTagMember) {
            head = page - (rec & kHeapLowMask);
            rec = detail::load_word(slab_meta() + head);
            tag = rec >> kHeapTagShift;
            if (tag != kHeapTagSlab) return s;
        }
        if (tag == kHeapTagSlab) {
            const unsigned c = rec & kHeapRecClassMask;
            if (c >= v_.class_count) return s;
            const heap_class k = class_info(c);
            const unsigned long long in = reinterpret_cast<unsigned long long>(p) -
                                          reinterpret_cast<unsigned long long>(page_address(head));
            const unsigned long long slot = in / k.size;
            const unsigned slots = slab_slots(k, (rec >> kHeapRecScaleShift) & kHeapScaleMask);
            if (slot * k.size != in || slot >= slots) return s;  // interior pointer or slab tail
            // A slot of a cursor's bump slab past its offset was never handed out
            // (its bit is set until then): a bad free.
            const unsigned marker = (rec >> kHeapRecMarkerShift) & kHeapRecMarkerMask;
            if (marker != 0) {
                const unsigned long long cv = detail::load_word(cursor(c, marker - 1));
                const unsigned field = unsigned(cv >> 32);
                if (field_is_slab(field) && !field_recycle(field) && field_slab(field) == head && slot >= unsigned(cv))
                    return s;
            }
            s.kind = kSlot;
            s.cls = c;
            s.word = slot_words(head) + slot / 64;
            s.bit = 1ull << (slot % 64);
            s.size = k.size;
            return s;
        }
        if (tag == kHeapTagHuge) {
            if (p == page_address(page)) s.kind = kHuge;
            return s;
        }
        s.kind = kRun;  // rw_heap_ref::free decides (run start, or bad free)
        return s;
    }

    // ---- small: slabs of a size class ------------------------------------
    // Cursor word: [63:32] field, [31:0] offset (slots taken from the slab).
    __device__ unsigned long long* cursor(unsigned c, unsigned i) const {
        return reinterpret_cast<unsigned long long*>(class_state(c) + kHeapStateCursorWord) + i;
    }
    __device__ static unsigned field_slab(unsigned field) { return (field & kHeapFieldSlabMask) - 1; }
    __device__ static unsigned field_scale(unsigned field) { return (field >> kHeapFieldScaleShift) & kHeapScaleMask; }
    __device__ static bool field_recycle(unsigned field) { return (field & kHeapFieldRecycle) != 0; }
    __device__ static bool field_is_slab(unsigned field) {
        return field != kHeapFieldNone && (field & kHeapFieldSlabMask) != kHeapFieldExhausted;
    }
    __device__ static unsigned long long cursor_value(unsigned field, unsigned offset) {
        return (static_cast<unsigned long long>(field) << 32) | offset;
    }
    __device__ static unsigned make_field(unsigned slab, unsigned scale, bool recycle) {
        return (slab + 1) | (scale << kHeapFieldScaleShift) | (recycle ? kHeapFieldRecycle : 0u);
    }
    __device__ static unsigned slab_slots(const heap_class& k, unsigned scale) { return k.slots << scale; }
    __device__ char* slot_address(unsigned slab, const heap_class& k, unsigned slot) const {
        return page_address(slab) + static_cast<unsigned long long>(slot) * k.size;
    }

    // A warp collective over `group` (lanes of one class that arrived together).
    // Fast path: the leader adds the group's need to the SM's cursor of the
    // class (one atomic, whatever the convergence) and each lane takes the
    // slot offset + rank of the cursor's bump slab, whose slot bits were all
    // set when it was attached.  The group whose range reaches the slab's end
    // switches the cursor (exactly one per slab: offsets are unique); groups
    // that came after wait for the switch.  A recycled slab (frees made room)
    // is served through its bitmap instead, the cursor's offset counting down
    // its free slots.  When no slab can be had, the slow path sweeps the class.
    __device__ void* small_malloc(unsigned group, unsigned c) const {
        const unsigned lane = detail::lane_index();
        const unsigned leader = detail::lowest_bit(group);
        const heap_class k = class_info(c);
        unsigned ci = detail::sm_id() % kHeapCursors;
        char* mine = nullptr;
        bool slow = false;
        for (unsigned round = 0; round < kHeapFastRounds; ++round) {
            const unsigned needy = __ballot_sync(group, mine == nullptr);
            if (needy == 0) break;
            const unsigned need = detail::popcount(needy);
            const unsigned r = detail::popcount(needy & detail::lanes_below());
            unsigned long long old = 0;
            if (lane == leader) {
                old = detail::atomic_add_acquire(cursor(c, ci), need);
                if ((old >> 32) == kHeapFieldNone && ci != 0) {  // not enabled yet: cursor 0 serves
                    ci = 0;
                    old = detail::atomic_add_acquire(cursor(c, 0), need);
                }
                // Offsets of a cursor without a slab only grow: keep them off the field.
                if (!field_is_slab(unsigned(old >> 32)) && unsigned(old) >= kHeapOffsetWrap)
                    atomicAnd(cursor(c, ci), ~static_cast<unsigned long long>(kHeapOffsetWrap | (kHeapOffsetWrap << 1)));
            }
            old = __shfl_sync(group, old, int(leader));
            ci = __shfl_sync(group, ci, int(leader));
            const unsigned field = unsigned(old >> 32), off = unsigned(old);
            if (field == kHeapFieldNone) {  // cursor 0 of a class without a slab: one group installs it
                unsigned* lock = class_state(c) + kHeapStateLock;
                bool installer = false;
                if (lane == leader && atomicCAS(lock, 0u, 1u) == 0u) {
                    installer = unsigned(detail::load_word(cursor(c, 0)) >> 32) == kHeapFieldNone;
                    if (!installer) atomicExch(lock, 0u);  // installed since this group's add
                }
                if (__shfl_sync(group, installer, int(leader))) {
                    switch_cursor(group, c, k, ci, old, mine);
                    if (lane == leader) atomicExch(lock, 0u);
                } else {
                    wait_for_switch(group, c, ci, field, 0);
                }
                continue;
            }
            if (!field_is_slab(field)) {  // no page left for a slab when it was last tried
                slow = true;
                break;
            }
            const unsigned slab = field_slab(field);
            const unsigned slots = slab_slots(k, field_scale(field));
            if (off < slots) {
                const unsigned avail = need < slots - off ? need : slots - off;
                if (!field_recycle(field)) {
                    if (mine == nullptr && r < avail) mine = slot_address(slab, k, off + r);
                } else {
                    claim_slab(group, k, slab, slots, off / 4, avail, mine);
                }
                if (off + need >= slots) switch_cursor(group, c, k, ci, old, mine);  // this group took the last
            } else {
                wait_for_switch(group, c, ci, field, slots);
            }
        }
        if (slow || __ballot_sync(group, mine == nullptr) != 0) sweep_class(group, c, k, ci, mine);
        count_failures(group, mine == nullptr);
        return mine;
    }

    // Groups that came after a slab's last slot wait until the cursor changes.
    __device__ void wait_for_switch(unsigned group, unsigned c, unsigned ci, unsigned field, unsigned slots) const {
        if (detail::lane_index() == detail::lowest_bit(group)) {
            for (unsigned i = 0; i < kHeapWaitRounds; ++i) {
                __nanosleep(kHeapWaitNs << (i < 4 ? i : 4u));
                const unsigned long long v = detail::load_word(cursor(c, ci));
                if (unsigned(v >> 32) != field || unsigned(v) < slots) break;
            }
        }
        __syncwarp(group);
    }

    // Claims up to `want` free slots of `slab` (slot bits: 1 = used) for the
    // lanes of `group` without one, scanning words from `start`: lane r reads
    // words start + r, + n, .. (at most kHeapScanWords), a prefix sum of the
    // free bits seen splits the want, each lane claims its share on its word
    // with atomicOr (again on the bits still free after a lost race), and the
    // won slots go out by rank.  Returns the slots won (group-uniform).
    __device__ unsigned claim_slab(unsigned group, const heap_class& k, unsigned slab, unsigned slots,
                                   unsigned start, unsigned want, char*& mine) const {
        const unsigned n = detail::popcount(group);
        const unsigned rank = detail::popcount(group & detail::lanes_below());
        const unsigned needy = __ballot_sync(group, mine == nullptr);
        const unsigned needy_rank = detail::popcount(needy & detail::lanes_below());
        const unsigned nwords = (slots + 63) / 64;
        unsigned long long* sw = slot_words(slab);
        unsigned w = 0;
        unsigned long long free_bits = 0;
        for (unsigned j = rank, steps = 0; j < nwords && steps < kHeapScanWords; j += n, ++steps) {
            w = (start + j) % nwords;
            free_bits = ~detail::load_word(sw + w);  // tail bits past `slots` are set
            if (free_bits != 0) break;
        }
        const unsigned f = detail::popcount(free_bits);
        const unsigned s = detail::masked_inclusive_sum(group, f) - f;
        const unsigned take = s < want ? (f < want - s ? f : want - s) : 0;
        unsigned long long got = 0, avail = free_bits;
        for (unsigned tries = 0; take != 0 && tries < kHeapClaimTries; ++tries) {
            const unsigned have = detail::popcount(got);
            if (have >= take || avail == 0) break;
            const unsigned long long bits = detail::lowest_set_bits(avail, take - have);
            const unsigned long long old = atomicOr(sw + w, bits);
            got |= bits & ~old;
            avail = ~(old | bits);
        }
        const unsigned g = detail::popcount(got);
        const unsigned incl = detail::masked_inclusive_sum(group, g);
        const unsigned s2 = incl - g;
        const unsigned total = __shfl_sync(group, incl, int(detail::highest_lane(group)));
        for (unsigned rest = __ballot_sync(group, g != 0); rest != 0; rest &= rest - 1) {
            const int src = int(detail::lowest_bit(rest));
            const unsigned cs = __shfl_sync(group, s2, src);
            const unsigned cg = __shfl_sync(group, g, src);
            const unsigned long long cgot = __shfl_sync(group, got, src);
            const unsigned cw = __shfl_sync(group, w, src);
            if (mine == nullptr && needy_rank >= cs && needy_rank < cs + cg)
                mine = slot_address(slab, k, cw * 64 + detail::nth_set_bit(cgot, needy_rank - cs));
        }
        return total;
    }

    // The group that took a slab's last slot installs the cursor's next slab:
    // a slab of the class with room after frees (when a free marked the class
    // dirty), else a fresh bump slab (its first slots for the group's lanes
    // still without one), else the exhausted mark (the slow path serves).
    // Then the class may enable one more cursor.
    __device__ void switch_cursor(unsigned group, unsigned c, const heap_class& k, unsigned ci,
                                  unsigned long long old, char*& mine) const {
        const unsigned lane = detail::lane_index();
        const unsigned leader = detail::lowest_bit(group);
        unsigned* state = class_state(c);
        unsigned long long value = 0;
        if (detail::load_word(state + kHeapStateDirty) != 0) {
            detail::counter_rng rng = detail::heap_rng();
            value = find_recycle(group, c, k, rng);
            if (value == 0 && lane == leader) atomicExch(state + kHeapStateDirty, 0u);
        }
        const unsigned count = __shfl_sync(group, lane == leader ? detail::load_word(state) : 0u, int(leader));
        unsigned scale = 0;
        while (scale < kHeapMaxScale && count >= (kHeapScaleSlabs << scale)) ++scale;
        if (value == 0) {
            const unsigned still = __ballot_sync(group, mine == nullptr);
            const unsigned still_n = detail::popcount(still);
            const unsigned head = attach_bump(group, c, k, scale, ci);
            if (head != kHeapNoPage) {
                const unsigned slots = slab_slots(k, scale);
                const unsigned claimed = still_n < slots ? still_n : slots;
                const unsigned r = detail::popcount(still & detail::lanes_below());
                if (mine == nullptr && r < claimed) mine = slot_address(head, k, r);
                value = cursor_value(make_field(head, scale, false), claimed);
            } else {
                value = cursor_value(kHeapFieldExhausted, 0);
            }
        }
        if (lane == leader) retire(c, k, atomicExch(cursor(c, ci), value));
        // One more cursor when the class has grown (spreads the groups of a busy class).
        unsigned en = 0;
        bool enable = false;
        if (lane == leader && field_is_slab(unsigned(value >> 32))) {
            en = detail::load_word(state + kHeapStateEnabled);
            enable = en + 1 < kHeapCursors && count >= (en + 1) * kHeapSlabsPerCursor &&
                     atomicCAS(state + kHeapStateEnabled, en, en + 1) == en;
        }
        if (__shfl_sync(group, enable, int(leader))) {
            en = __shfl_sync(group, en, int(leader)) + 1;
            const unsigned head = attach_bump(group, c, k, scale, en);
            if (lane == leader && head != kHeapNoPage)
                retire(c, k, atomicExch(cursor(c, en), cursor_value(make_field(head, scale, false), 0)));
        }
        (void)old;
    }

    // A cursor's previous value: a bump slab it leaves with slots never handed
    // out gets their bits cleared (they become free slots the class can
    // recycle), and its record loses the cursor mark (free needs no offset check).
    __device__ void retire(unsigned c, const heap_class& k, unsigned long long prev) const {
        const unsigned field = unsigned(prev >> 32);
        if (!field_is_slab(field) || field_recycle(field)) return;
        const unsigned slab = field_slab(field);
        const unsigned slots = slab_slots(k, field_scale(field));
        atomicAnd(slab_meta() + slab, ~(kHeapRecMarkerMask << kHeapRecMarkerShift));
        unsigned off = unsigned(prev);
        if (off >= slots) return;
        __threadfence();  // the mark is gone before the slots are free
        unsigned long long* sw = slot_words(slab);
        for (; off < slots; off = (off / 64 + 1) * 64) {
            const unsigned end = (off / 64 + 1) * 64 < slots ? (off / 64 + 1) * 64 : slots;
            const unsigned long long bits = (end - off == 64 ? ~0ull : ((1ull << (end - off)) - 1)) << (off % 64);
            atomicAnd(sw + off / 64, ~bits);
        }
        atomicExch(class_state(c) + kHeapStateDirty, 1u);
    }

    // A slab of the class with at least kHeapRecycleShare of its slots free
    // (random slabs of the directory; the group counts a slab's free bits
    // together); its cursor value (offset = slots - free), or 0.
    __device__ unsigned long long find_recycle(unsigned group, unsigned c, const heap_class& k,
                                               detail::counter_rng& rng) const {
        const unsigned lane = detail::lane_index();
        const unsigned leader = detail::lowest_bit(group);
        const unsigned n = detail::popcount(group);
        const unsigned rank = detail::popcount(group & detail::lanes_below());
        const unsigned count = __shfl_sync(group, lane == leader ? detail::load_word(class_state(c)) : 0u, int(leader));
        if (count == 0) return 0;
        const unsigned* dir = directory() + k.dir_offset;
        for (unsigned probe = 0; probe < kHeapRecycleProbes; ++probe) {
            unsigned slab = lane == leader ? detail::load_acquire(dir + rng.below(count)) : 0u;
            slab = __shfl_sync(group, slab, int(leader));
            if (slab == kHeapNoPage) continue;
            const unsigned rec = detail::load_word(slab_meta() + slab);
            const unsigned scale = (rec >> kHeapRecScaleShift) & kHeapScaleMask;
            const unsigned slots = slab_slots(k, scale);
            const unsigned nwords = (slots + 63) / 64;
            unsigned f = 0;
            for (unsigned j = rank; j < nwords; j += n) f += detail::popcount(~detail::load_word(slot_words(slab) + j));
            f = __shfl_sync(group, detail::masked_inclusive_sum(group, f), int(detail::highest_lane(group)));
            if (f * kHeapRecycleShare >= slots && f > 0)
                return cursor_value(make_field(slab, scale, true), slots - f);
        }
        return 0;
    }

    // Attaches a bump slab of class c (2^scale base slabs, fewer when the
    // pages for it are not there) marked as cursor `ci`'s: every slot bit set
    // (the cursor's offset hands the slots out), records written, fenced, then
    // published in the class's directory.  Collective over `group` (its lanes
    // set the bits).  Returns the first page or kHeapNoPage; `scale` becomes the
    // one used.
    __device__ unsigned attach_bump(unsigned group, unsigned c, const heap_class& k, unsigned& scale,
                                    unsigned ci) const {
        const unsigned lane = detail::lane_index();
        const unsigned leader = detail::lowest_bit(group);
        const unsigned n = detail::popcount(group);
        const unsigned rank = detail::popcount(group & detail::lanes_below());
        unsigned head = kHeapNoPage;
        if (lane == leader) {
            detail::counter_rng rng = detail::heap_rng();
            const rw_heap_ref pages = run_ref(kHeapCounterAttachScratch);
            for (;; --scale) {
                const unsigned np = k.slab_pages << scale;
                if (np == 1) {
                    head = pages.get_page<rw_algorithm::rw_bm>(rng);
                } else {
                    rw_malloc_storage st;  // a one-lane RW_malloc: local scratch
                    void* p = pages.malloc(1u << lane, static_cast<unsigned long long>(np) << v_.page_shift, st, rng);
                    if (p != nullptr) {
                        head = unsigned((reinterpret_cast<unsigned long long>(p) - v_.base) >> v_.page_shift);
                        // The slab's records are ours (slab_meta), not a run's: free and the
                        // stats never read run_meta or rw_heap's live-start bit for slab pages.
                        for (unsigned i = 0; i < np; ++i) run_meta()[head + i] = 0;
                    }
                }
                if (head != kHeapNoPage || scale == 0) break;
            }
        }
        head = __shfl_sync(group, head, int(leader));
        scale = __shfl_sync(group, scale, int(leader));
        if (head == kHeapNoPage) return head;
        const unsigned slots = slab_slots(k, scale);
        unsigned long long* w = slot_words(head);
        for (unsigned i = rank; i < (slots + 63) / 64; i += n) w[i] = ~0ull;
        __threadfence();
        __syncwarp(group);
        if (lane == leader) {
            unsigned* m = slab_meta();
            const unsigned np = k.slab_pages << scale;
            for (unsigned i = 1; i < np; ++i) m[head + i] = (kHeapTagMember << kHeapTagShift) | i;
            m[head] = (kHeapTagSlab << kHeapTagShift) | (scale << kHeapRecScaleShift) |
                      ((ci + 1) << kHeapRecMarkerShift) | c;
            // Release: bits and records reach memory before the slab is published.
            __threadfence();
            unsigned* state = class_state(c);
            const unsigned idx = atomicAdd(state + kHeapStateCount, 1u);
            atomicExch(directory() + k.dir_offset + idx, head);
        }
        __syncwarp(group);
        return head;
    }

    // The slow path (no page for a slab when the cursor last switched): every
    // slab of the class once from a random one, the group scanning each, then
    // one more attach (memory may have been freed since), which re-arms the cursor.
    __device__ void sweep_class(unsigned group, unsigned c, const heap_class& k, unsigned ci, char*& mine) const {
        const unsigned lane = detail::lane_index();
        const unsigned leader = detail::lowest_bit(group);
        unsigned* state = class_state(c);
        const unsigned* dir = directory() + k.dir_offset;
        const unsigned count = __shfl_sync(group, lane == leader ? detail::load_word(state) : 0u, int(leader));
        detail::counter_rng rng = detail::heap_rng();
        const unsigned first = __shfl_sync(group, count > 1 ? rng.below(count) : 0u, int(leader));
        for (unsigned i = 0; i < count; ++i) {
            const unsigned still = __ballot_sync(group, mine == nullptr);
            if (still == 0) return;
            const unsigned slab = detail::load_acquire(dir + (first + i) % count);
            if (slab == kHeapNoPage) continue;
            const unsigned rec = detail::load_word(slab_meta() + slab);
            const unsigned slots = slab_slots(k, (rec >> kHeapRecScaleShift) & kHeapScaleMask);
            // Every word of the slab: scans of kHeapScanWords words per lane until one finds nothing.
            for (unsigned start = 0; start < (slots + 63) / 64; start += kHeapScanWords * detail::popcount(group)) {
                const unsigned want = detail::popcount(__ballot_sync(group, mine == nullptr));
                if (want == 0) return;
                claim_slab(group, k, slab, slots, start, want, mine);
            }
        }
        if (__ballot_sync(group, mine == nullptr) == 0) return;
        unsigned scale = 0;
        const unsigned still = __ballot_sync(group, mine == nullptr);
        const unsigned head = attach_bump(group, c, k, scale, ci);
        if (head == kHeapNoPage) return;
        const unsigned slots = slab_slots(k, scale);
        const unsigned still_n = detail::popcount(still);
        const unsigned claimed = still_n < slots ? still_n : slots;
        const unsigned r = detail::popcount(still & detail::lanes_below());
        if (mine == nullptr && r < claimed) mine = slot_address(head, k, r);
        if (lane == leader) retire(c, k, atomicExch(cursor(c, ci), cursor_value(make_field(head, scale, false), claimed)));
    }

    // ---- medium and huge: runs of pages (thread-level) ---------------------
    __device__ void* run_malloc(unsigned long long bytes) const {
        const unsigned long long pages = (bytes + page_size() - 1) >> v_.page_shift;
        detail::counter_rng rng = detail::heap_rng();
        if (pages <= static_cast<unsigned long long>(kRwRegionWords) * 64) {
            rw_malloc_storage st;  // a one-lane RW_malloc: local scratch
            // Whole pages, so rw_heap records a run (not a shared small run).
            // Its failure count is ours, so it must not count: the caller does.
            return run_ref(kHeapCounterAttachScratch)
                .malloc(1u << detail::lane_index(), pages << v_.page_shift, st, rng);
        }
        return huge_malloc(pages, rng);
    }

    __device__ void* huge_malloc(unsigned long long pages, detail::counter_rng& rng) const {
        const unsigned words = mapped_pages() / 64;  // whole mapped words (the tail word is never all free)
        const unsigned long long need64 = (pages + 63) / 64;
        if (need64 > words || need64 > kHeapLowMask) return nullptr;
        const unsigned need = unsigned(need64);
        unsigned long long* bm = page_words();
        // Every word once from a random start, plus `need` words so a run across
        // the start is seen too; a run never wraps past the last word.
        const unsigned start = rng.below(words);
        unsigned run = 0, run_start = 0;
        for (unsigned long long i = 0; i < static_cast<unsigned long long>(words) + need; ++i) {
            const unsigned w = unsigned((start + i) % words);
            if (w == 0) run = 0;
            if (detail::load_word(bm + w) != 0) {
                run = 0;
                continue;
            }
            if (run++ == 0) run_start = w;
            if (run < need) continue;
            // Claim the run word by word; roll back on a conflict.
            unsigned got = 0;
            while (got < need && atomicCAS(bm + run_start + got, 0ull, ~0ull) == 0ull) ++got;
            if (got == need) {
                const unsigned head = run_start * 64;
                slab_meta()[head] = (kHeapTagHuge << kHeapTagShift) | need;
                return page_address(head);
            }
            for (unsigned j = 0; j < got; ++j) atomicExch(bm + run_start + j, 0ull);  // ours: all ones
            run = 0;
        }
        return nullptr;
    }

    __device__ bool huge_free(unsigned page) const {
        unsigned* m = slab_meta() + page;
        const unsigned rec = detail::load_word(m);
        if ((rec >> kHeapTagShift) != kHeapTagHuge || atomicCAS(m, rec, 0u) != rec) return bad_free();
        __threadfence();  // the record is cleared before the pages can be claimed again
        const unsigned words = rec & kHeapLowMask;
        for (unsigned j = 0; j < words; ++j) atomicExch(page_words() + page / 64 + j, 0ull);
        return true;
    }
};

}  // namespace v0
}  // namespace gpudyn
