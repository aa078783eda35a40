/// @file
/// gpudyn — device allocator (heap), device side (header-only; nvcc and NVRTC).
///
/// malloc/free of 1 B .. >= 1 GiB from any thread of any kernel, under any
/// divergence, with no caller scratch and no caller RNG.  The host owns the heap
/// (gpudyn_heap_create) and hands kernels a gpudyn_heap_view_t by value:
///
/// @code{.cpp}
/// __global__ void k(gpudyn_heap_view_t v) {
///     gpudyn::heap_ref heap{v};
///     int* p = static_cast<int*>(heap.malloc(40 * sizeof(int)));   // any thread, any branch
///     if (p) { ...; heap.free(p); }                               // or free in a later kernel
/// }
/// @endcode
///
/// Design (issue 11).  Memory is one virtual range of max_pages pages of
/// page_size P bytes (a power of two), of which a prefix is mapped (mapped_pages,
/// read from device memory, so a view stays valid when the host grows the heap
/// between launches).  A page bitmap (64-bit words, 1 = used; pages not mapped
/// yet are marked used) is the random-walk page heap of rw_heap.cuh: pages and
/// runs are found with its primitives (RW-BM walk with a bounded sweep, its
/// region run search), never by a second copy.  Requests fall in three classes:
///
///  * Small (<= P/2): size classes 16, 32, .., 128 B, then 8 classes per
///    doubling (rounding wastes <= 12.5 %); class sizes that are powers of two
///    are exactly the 2^k requests, and slots are multiples of the class size
///    from a page boundary, so 2^k requests up to P are 2^k-aligned.  A class
///    carves slabs of slab_pages(c) pages: 64 slots (128 from 2 KiB) and
///    128 KiB, at most 1 MiB unless 8 slots need more, at least one page (a
///    slab lasts a few converged warps; the cap and the 8-slot floor keep what
///    a class with few requests holds small: with 64 KiB pages, 2-page slabs up
///    to the 1 KiB class, the 4 KiB class 8 pages, the 32 KiB class 16-page
///    slabs of 32; a power of two of pages, claimed at a
///    multiple of it so slabs leave no page between them), whose slot bits (1 =
///    used) live out of band (slot_bitmap, P/1024 words per page, indexed by the
///    slab's first page).  A class keeps a directory of its slabs (an
///    append-only array of first pages plus a count) and *current* slabs
///    (1 + slabs / 4 of them, at most 1024, eight to a cache line: SM s uses
///    cursor s, or a hash of s beyond that many, and once a class has more
///    current slabs than there are SMs, each SM's warps spread over several:
///    few partly filled slabs for a small class, less contention on one slab
///    for a large one).
///    malloc groups the lanes that arrive together (`__activemask`) at one heap by class
///    (`__match_any_sync`).  A fast pass serves every group of the warp in the
///    same instructions (a mixed-size warp's twenty-odd groups do not wait on
///    each other's loads): the group's leader loads its SM's current slab, lane
///    r of the group reads word start + r of it (a group-uniform random start),
///    and the lowest lane whose word has a free slot for the whole group claims
///    them with one atomicOr (a lone lane: a random bit of a random word,
///    claimed blind, then a free bit the lost claim returned) and hands them
///    out by rank.  A converged warp of one
///    class: a cursor load, a word load, one atomicOr, a few shuffles.  So
///    groups fill one slab at a time.  The lanes it did not serve go on in
///    rounds, by class: the group's lanes read words
///    of the current slab (lane r at start + r, + n, ..; the group stops once
///    the free slots found cover its need), split the need by a
///    prefix sum of the free bits they saw, claim with one atomicOr per lane
///    (a single slot at a random free bit, so racing groups of one collide less;
///    a group that won nothing reads again in the next round) and hand the won
///    slots out by rank (shuffles).
///    When the current slab had no free slot, the next rounds draw random slabs
///    of the class (half the lanes among the newest few, where a burst's free
///    slots are) and a few words in each; a draw that finds a slab with room
///    left makes it the current slab (CAS), so after frees the class refills
///    its slabs before it grows.  Only after kHeapMissesBeforeAttach rounds
///    that found no free slot (or at once when the class has no slab) does the
///    group's leader attach a slab: pages from the page bitmap, slot bits
///    initialised with the group's slots already taken, page records written,
///    `__threadfence`, then the directory entry is published (count first, entry
///    second; readers load the entry with a relaxed GPU-scope load, read what
///    it names only at addresses computed from it, and skip the 0xFFFFFFFF of
///    an entry not yet written) and the slab becomes current.  Attaches of a
///    class run at most kHeapMinConcurrentAttach + slabs / 16 at a time: a burst
///    grows a class by <= ~6 % per attach latency, so at most that share of
///    its slabs is nearly empty when the burst ends (the memory bound: held /
///    live <= ~1.1 plus a slab or two per class); a refused group sleeps and reads
///    the new current slab, and after kHeapMaxRefusals attaches regardless.
///    When no slab can be attached, a sweep over every word of every slab of
///    the class (the group reads one word per lane per round) is the fallback,
///    so a small request fails only when no slot of its class and no page for
///    a slab is free.  Empty slabs go back to the page pool when pages run
///    out (reclaim, below): memory freed as small blocks serves any size again.
///  * Reclaim.  A free whose slot word it leaves empty marks its class dirty
///    (one flag, written only when it reads clear).  When a slab attach, a
///    medium or huge run or malloc_pages finds no free pages, the caller runs
///    one reclaim pass (one at a time a heap; a caller that finds one running
///    waits for it) and tries once more.  The pass visits the dirty classes'
///    slabs; a slab whose slots are all free is locked by setting every bit of
///    its words (compare-and-swap from empty, word by word, undone if a slot
///    was claimed meanwhile: then no claim can win there), its page records
///    cleared, its directory entry made a tombstone (a later attach of the class
///    reuses it), and after a fence its pages go back to the bitmap.  A thread
///    may still hold that slab from a cursor or entry it read before: so every
///    won slot claim reads its slab's first page record after the claim (an
///    address that depends on the claim's result) and, if the slab is no longer
///    of its class, gives the bits back and goes on.  Locked words stay set
///    until a slab's attach rewrites them, so a stale claim can win only in a
///    live slab, where that check catches it.
///  * Medium (> P/2, up to kRwRegionWords * 64 pages, 128 MiB with 64 KiB pages):
///    a run of ceil(bytes / P) pages from rw_heap's RW_malloc region search, called
///    by the lane alone (a one-lane mask with a local rw_malloc_storage), recorded
///    in run_meta by rw_heap's run records; free goes through rw_heap_ref::free
///    (the record is claimed by a CAS, so one of two concurrent frees wins).
///    When RW_malloc finds nothing (its draws and sweep can all lose races in a
///    burst), heap_page_run's scan of every mapped word decides, so a null means
///    no free run of those pages was seen anywhere.
///  * Huge (more pages than a region): detail::heap_page_run, a bounded scan
///    (every mapped word once, from a random word) for ceil(pages / 64)
///    consecutive all-free bitmap words, claimed word by word and rolled back
///    on a conflict; recorded as a huge record in slab_meta at the first page.
///    Sizes round up to 64 pages (4 MiB with 64 KiB pages, < 3.2 % of a huge
///    request).  malloc_pages (GGArray's buckets) takes every run size there:
///    short runs packed near a hint, longer ones across words (see it).
///
/// free(p) finds the page of p (p outside the range: bad free), then its record:
/// a slab (the first page, or a member page naming the class and its offset
/// to the first) -> the slot (p must be a slot start, else bad free), whose bit
/// is cleared with
/// atomicAnd: lanes freeing into the word of the lowest slot lane together
/// clear theirs with one (twice over: a converged warp's slots span a word or
/// two), the others alone; a bit that was already clear is a double free (of
/// lanes freeing one pointer together, one frees it).  Huge: CAS of the record to 0 (one winner),
/// then the words.  Otherwise rw_heap_ref::free (medium run record or bad free).
/// A double, foreign or interior free returns false, is counted in counters[1]
/// and changes nothing.  (A pointer freed twice after its slot was handed out
/// again frees the new owner's block: no allocator without per-block tags can
/// see that.)  free starts with a release fence (fence.acq_rel.gpu) so that the
/// caller's writes to the block are visible before another thread can be handed
/// the same bytes.
///
/// No counter is touched on the hot paths: failures and bad frees are counted
/// (counters[0], counters[1]), once per warp group; live bytes are computed by
/// the host's stats kernel from the records (usage_of_page).
///
/// Metadata, sized for the reserved range (max_pages pages): slot bits P/16 bits
/// per page (1/128 of the range: 0.78 %), rw_heap's live-run-start bits for the
/// medium runs (one bit per 16 bytes: another 0.78 %), two uint32 records per page, one bitmap bit per page,
/// the class directories (sum over classes of max_pages / slab_pages(c) uint32:
/// 0.4 % with 64 KiB pages, 2.5 % with 4 KiB pages).  About 2 % of max_bytes
/// with 64 KiB pages, 4 % with 4 KiB pages, plus the class states, 16.25 KiB per
/// class whatever the heap's size (1.1 MiB with 64 KiB pages, 1.8 MiB with 2 MiB).
///
/// Memory ordering: a slot's bit is set (atomicOr) before its pointer is handed
/// out; a slab is initialised and fenced (`__threadfence`) before its directory
/// entry or a current slab is stored; readers load those with a relaxed
/// gpu-scope load and read what they name only through L2, at addresses
/// computed from the loaded value (load_published), so a reader that sees an
/// entry sees the slab's bits and records.  Huge and medium records
/// are written by the allocating thread before it returns the pointer; a free
/// clears the record (CAS) and fences before releasing the page bits.
///
/// Contract: every call may be made by any thread at any time, diverged or not;
/// lanes that arrive together are aggregated inside (the mask is the lanes of
/// the `__activemask()` taken at entry that call the same heap, and every lane of
/// it runs every collective step).
/// Pointers are 16-byte aligned; malloc_aligned gives alignments up to P.  Bytes
/// are not zeroed.  Needs sm_70+ (match, nanosleep, ld.relaxed); CUDA 13 is sm_75+.
/// Registers: a kernel calling malloc takes about 80 a thread (sm_90, nvcc 13.0),
/// so blocks of up to 768 threads launch as they are; a kernel launched with
/// larger blocks needs `__launch_bounds__(threads)` (ptxas then fits 64, with a
/// stack frame and no spills on sm_90), else the launch fails with
/// cudaErrorLaunchOutOfResources.
#pragma once

#include "gpudyn/detail/bits.cuh"
#include "gpudyn/detail/warp.cuh"
#include "gpudyn/detail/random.cuh"
#include "gpudyn/rw_heap.cuh" // page bitmap walk and run search, rw_heap_ref (medium runs)

#if defined(__CUDACC_RTC__)
#include <cuda/std/cstdint>
#include <cuda/std/cstddef>
#endif
#include "gpudyn/heap.h"

namespace gpudyn {
inline namespace v0 {

/// View layout this header reads (GPUDYN_HEAP_VIEW_VERSION).
constexpr unsigned kHeapViewVersion = 1;
/// Alignment of every pointer (malloc's guarantee for any built-in type).
constexpr unsigned long long kHeapAlign = 16;
/// "No page" / "entry not published yet" (directory entries are memset to 0xFF).
constexpr unsigned kHeapNoPage = 0xffffffffu;
/// Slots of gpudyn_heap_view_t::counters: failed allocations, bad frees, then
/// the failures of slab attaches (rw_heap's own failure count while attaching a
/// slab, not a failed allocation; kept apart so it is not counted twice).
constexpr unsigned kHeapCounterFailed = 0;
constexpr unsigned kHeapCounterBadFree = 1;
constexpr unsigned kHeapCounterAttachScratch = 2;
/// Not a counter: the bitmap word where heap_page_run last placed a short run
/// (a hint; zeroed with the counters).
constexpr unsigned kHeapCounterRunHint = 3;
/// Short runs start within this many words past the hint, fewer in a heap of
/// fewer than 64 x this many words (1 + words / 64): wide enough that GGArray's
/// 512 LFVectors growing together do not queue on a few words (a window of 8
/// did), narrow enough in a small heap that short runs pack and leave whole
/// words for long ones (a window of 64 failed a 4-array test's 32 MiB budget).
constexpr unsigned kHeapRunHintWindow = 64;
constexpr unsigned kHeapCounterCount = 4;
/// A directory entry whose slab went back to the page pool: readers skip it
/// (as they skip kHeapNoPage, an entry not written yet), attaches reuse it.
constexpr unsigned kHeapTombstone = 0xfffffffeu;
/// Words of a class state's line 0 past the slab count (0) and the attaches
/// under way (1): a free emptied a slot word since the last reclaim (dirty),
/// and the directory's tombstones (holes).  Class 0's line also holds the
/// heap's reclaim lock and the passes finished (count << 1 | whether the last
/// one returned pages).
constexpr unsigned kHeapStateDirty = 2;
constexpr unsigned kHeapStateHoles = 3;
constexpr unsigned kHeapStateReclaimLock = 4;
constexpr unsigned kHeapStateReclaimPasses = 5;
/// No tombstone of the class's directory lies below this entry (a reclaim
/// lowers it; an attach that took one raises it if no reclaim moved it).
constexpr unsigned kHeapStateHoleHint = 6;
/// A caller that finds a reclaim pass running waits for it this many times
/// kHeapReclaimWaitNs at most (about a second: a pass reads every slot word of
/// the dirty classes' slabs on one thread, some 26 ms for 64 MiB of 16-byte
/// slots on an H200, so about 0.4 s a GiB), then tries its allocation again anyway.
constexpr unsigned kHeapReclaimWaits = 1u << 18;
constexpr unsigned kHeapReclaimWaitNs = 4000;
/// Loads and CASes a reclaim pass keeps in flight (more grew the malloc
/// kernel's registers: the pass is inlined where pages run out).
constexpr unsigned kHeapReclaimBatch = 4;

/// slab_meta records: tag in the top 2 bits.
constexpr unsigned kHeapTagShift = 30;
constexpr unsigned kHeapLowMask = (1u << kHeapTagShift) - 1;
constexpr unsigned kHeapTagNone = 0; ///< free page, or a page of a medium run (see run_meta)
constexpr unsigned kHeapTagSlab = 1; ///< first page of a slab: low bits = class
/// later page of a slab: class << kHeapMemberClassShift | offset to the first page
constexpr unsigned kHeapTagMember = 2;
constexpr unsigned kHeapTagHuge = 3; ///< first page of a huge run: low bits = bitmap words (64 pages each)
/// A member page names its class itself, so a free reads one record, not the
/// first page's after it (a dependent load on every mixed-size free).
constexpr unsigned kHeapMemberClassShift = 22;
constexpr unsigned kHeapMemberOffsetMask = (1u << kHeapMemberClassShift) - 1;

/// Size classes: 16-byte steps up to kHeapLinearLimit, then this many classes
/// per doubling (12.5 % worst rounding waste, the bound the design asks for).
constexpr unsigned kHeapLinearLimit = 128;
constexpr unsigned kHeapLinearClasses = kHeapLinearLimit / 16;
constexpr unsigned kHeapClassesPerDoubling = 8;
constexpr unsigned kHeapLinearShift = 7; ///< log2(kHeapLinearLimit)
/// Page sizes the heap accepts: 4 KiB (the smallest VMM-friendly page worth a
/// bitmap bit) to 2 MiB (the VMM granularity: a page never straddles a mapping).
constexpr unsigned kHeapMinPageShift = 12;
constexpr unsigned kHeapMaxPageShift = 21;
/// Classes for the largest page: sizes up to 2^20 = 8 * (21 - 7) classes.
constexpr unsigned kHeapMaxClasses = kHeapClassesPerDoubling * (kHeapMaxPageShift - kHeapLinearShift);
/// Slots of a slab: kHeapSlabSlots (kHeapSlabSlotsLarge from class size
/// kHeapSlabLargeClass) and kHeapSlabMinBytes (a slab serves a few converged
/// warps; each slab change sends groups through the slow rounds, and below
/// 2 KiB the 128 KiB floor gives 64-8192 slots anyway).  128 slots from 2 KiB:
/// faster large-class bursts for a little more held in small populations; more
/// slots, or the larger count from 1 KiB, cost usable memory at exhaustion for
/// no speed (benchmarks/results/h200/NOTES.md).  At most
/// kHeapSlabMaxBytes, but never fewer than kHeapSlabMinSlots (which decide for
/// pages of 1 MiB and more); at least one page, and a power of two of them
/// (slabs are claimed aligned).
constexpr unsigned kHeapSlabSlots = 64;
constexpr unsigned kHeapSlabSlotsLarge = 128;
constexpr unsigned long long kHeapSlabLargeClass = 2048;
constexpr unsigned long long kHeapSlabMinBytes = 128ull << 10;
constexpr unsigned long long kHeapSlabMaxBytes = 1ull << 20;
constexpr unsigned kHeapSlabMinSlots = 8;
/// A member record holds every class and every page offset within a slab (at
/// most kHeapSlabMaxBytes, or kHeapSlabMinSlots of P / 2: 4 pages).
static_assert(kHeapMaxClasses <= (kHeapLowMask >> kHeapMemberClassShift) + 1, "member records hold the class");
static_assert((kHeapSlabMaxBytes >> kHeapMinPageShift) <= kHeapMemberOffsetMask, "member records hold the offset");
/// A slab is at most 1 / kHeapSlabHeapShare of its heap's range (at least a page).
constexpr unsigned long long kHeapSlabHeapShare = 256;
// Slot bitmap words per page: P / 16 slots (the 16-byte class) / 64; a slab uses those of its pages.
constexpr unsigned kHeapSlotWordShift = 10; ///< P >> 10 words of 64 bits = P / 16 bits
/// Words of the current slab one lane reads in a round (the lanes of a group
/// split the slab), and random (slab, word) probes of one lane in a draw round.
constexpr unsigned kHeapScanWords = 8;
constexpr unsigned kHeapDrawProbes = 4;
/// Every other random probe goes to one of the class's newest slabs (this many).
constexpr unsigned kHeapRecentSlabs = 8;
/// A slot claim makes one atomicOr: a group that lost its race reads again in
/// the next round (retrying a contended word slowed mixed-size bursts).
/// Page-run claims (heap_claim_run) retry a word while it shows room.
/// Reads and claims of a lone lane's fast pass after its blind first claim (a
/// claim, or a step to the next word).
constexpr unsigned kHeapLoneTries = 4;
/// Rounds that found no free slot before the group attaches a slab: the
/// current slab, then draw rounds (n lanes x kHeapDrawProbes probes each).
/// A slab is memory: attach only when the class's slabs look full (a host
/// model of this policy, one class, churn of 50 %: 8 rounds x 4 probes keep
/// held / live near 1.05 where 5 x 2 drifted to 1.25 with 16-slot slabs).
constexpr unsigned kHeapMissesBeforeAttach = 8;
/// Attaches of one class under way at a time: this many plus 1/16 of its slabs
/// (a burst grows a class by <= ~6 % per attach latency, so at most that
/// share of its slabs is left nearly empty when the burst ends).
constexpr unsigned kHeapMinConcurrentAttach = 2;
constexpr unsigned kHeapAttachShare = 16;
/// Class state: 128-byte lines (with all of it on one line, which attaches and
/// promotions also write, every warp of a burst loaded that line three times
/// and the burst queued at one L2 slice).  Line 0: slabs attached, attaches under way.  Line 1: the current
/// slabs in use, 1 + slabs / kHeapSlabsPerCursor (at most kHeapCursors: few
/// partly filled slabs for a small class, while 2 slabs a cursor rather than 4
/// made small and mixed bursts faster for about as much held; a class of many slabs gives each
/// SM's warps slabs of their own, where 8 SMs a slab made most groups of a
/// burst miss it), written only when it grows (a group reads it from L2, a lone
/// caller's first try through L1).
/// Lines 2 ..: the current slabs (+ 1; 0: none), cursor i on line 2 + i % 128
/// (the first 128 each on a line of its own), 16 bytes apart.  SM s uses cursor
/// s while s < active; beyond one cursor an SM, warp slot w of SM s uses
/// i = s + SMs x (w % kHeapWarpCursors) while i < active: a 64-slot slab of
/// 4 KiB served two warps, and with one slab an SM the ~30 warps of an SM that
/// arrive together mostly missed it (4 % of a 1M x 4 KiB burst's lanes served
/// by the fast pass).
/// An i >= active picks a cursor by a multiplicative hash, not i % active (an
/// integer division is ~20 instructions of a lone caller's ~190;
/// benchmarks/results/h200/NOTES.md has the timings).
constexpr unsigned kHeapStateLineWords = 32;
constexpr unsigned kHeapCursorLines = 128;
constexpr unsigned kHeapCursorStride = 4; ///< words between cursors of one line
constexpr unsigned kHeapCursors = kHeapCursorLines * (kHeapStateLineWords / kHeapCursorStride);
constexpr unsigned kHeapWarpCursors = 8;
constexpr unsigned kHeapSlabsPerCursor = 4;
constexpr unsigned kHeapClassStateWords = kHeapStateLineWords * (2 + kHeapCursorLines);
/// Refusals after which a group attaches regardless (a bound on waiting).
constexpr unsigned kHeapMaxRefusals = 64;
/// Wait of a group refused an attach, in ns (about one attach's latency),
/// doubled per refusal up to 16x.
constexpr unsigned kHeapAttachWaitNs = 256;

/// The C view's layout with the field types this header reads; checked
/// against gpudyn_heap_view_t below.
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

static_assert(sizeof(heap_view) == sizeof(gpudyn_heap_view_t), "heap_view must mirror the C view");
#if !defined(__CUDACC_RTC__) // some NVRTC versions have no __builtin_offsetof
static_assert(__builtin_offsetof(heap_view, directory) == __builtin_offsetof(gpudyn_heap_view_t, directory),
              "heap_view must mirror the C view");
static_assert(__builtin_offsetof(heap_view, counters) == __builtin_offsetof(gpudyn_heap_view_t, counters),
              "heap_view must mirror the C view");
static_assert(__builtin_offsetof(heap_view, reserved) == __builtin_offsetof(gpudyn_heap_view_t, reserved),
              "heap_view must mirror the C view");
#endif

/// One size class (class_table entry), filled by the host from heap_class_geometry.
struct heap_class {
    unsigned size;       ///< bytes per slot
    unsigned slab_pages; ///< pages per slab
    unsigned slots;      ///< slots per slab (<= slab_pages * P / 16: the slot words of its pages)
    unsigned dir_offset; ///< first directory entry of the class
};

/// Usage of one page, for the stats kernel (usage_of_page).
struct heap_page_usage {
    unsigned long long allocations;     ///< live allocations starting on this page
    unsigned long long bytes_allocated; ///< their usable bytes
    unsigned long long largest_slot;    ///< largest class size with a free slot in a slab starting here
};

namespace detail {

/// Class of a small request (1 <= bytes <= P/2).
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

/// Classes of a heap with pages of 2^page_shift bytes (sizes up to P / 2).
__host__ __device__ __forceinline__ unsigned heap_class_count(unsigned page_shift) {
    return kHeapClassesPerDoubling * (page_shift - kHeapLinearShift);
}

/// Slot bitmap words of a slab of class k (64 slots a word).
__host__ __device__ __forceinline__ unsigned heap_slab_words(const heap_class& k) { return (k.slots + 63) / 64; }
/// Slots in word w of such a slab (64 but in its last word; the bits past them are the tail).
__host__ __device__ __forceinline__ unsigned heap_word_slots(const heap_class& k, unsigned w) {
    return k.slots - w * 64 < 64 ? k.slots - w * 64 : 64u;
}

/// Geometry of class c (dir_offset left 0: the host sums the directories).
/// max_pages: the heap's range (0: no bound from it).  In a heap of fewer than
/// 256 MiB a slab is at most 1/256 of it (and one page), so the first slabs of
/// the ~48 classes a mixed-size load touches stay a small share of the heap
/// (with 128 KiB slabs a 16 MiB heap filled up at 13 % usable).
__host__ __device__ __forceinline__ heap_class heap_class_geometry(unsigned c, unsigned page_shift,
                                                                   unsigned long long max_pages = 0) {
    const unsigned long long P = 1ull << page_shift;
    const unsigned long long size = heap_class_size(c);
    const unsigned long long share = max_pages == 0 ? kHeapSlabMaxBytes : (max_pages * P) / kHeapSlabHeapShare;
    const unsigned long long most = share < kHeapSlabMaxBytes ? (share > P ? share : P) : kHeapSlabMaxBytes;
    const unsigned long long cap = kHeapSlabMinSlots * size > most ? kHeapSlabMinSlots * size : most;
    const unsigned long long floor = kHeapSlabMinBytes < most ? kHeapSlabMinBytes : most;
    const unsigned long long slots = size >= kHeapSlabLargeClass ? kHeapSlabSlotsLarge : kHeapSlabSlots;
    const unsigned long long want = slots * size > floor ? slots * size : floor;
    const unsigned long long bytes = want < cap ? want : cap;
    unsigned long long pages = 1; // a power of two (aligned claims: see heap_claim_run)
    while (pages * P < bytes) pages *= 2;
    heap_class k;
    k.size = unsigned(size);
    k.slab_pages = unsigned(pages);
    k.slots = unsigned(pages * P / size);
    k.dir_offset = 0;
    return k;
}

/// A word another thread published (a slab's directory entry, a current slab)
/// after initialising what it names: a relaxed load at GPU scope.  Not
/// ld.acquire: that compiles to an invalidation of the SM's whole L1
/// (CCTL.IVALL), a large share of a burst of mallocs.  What the word
/// names is only read with loads that go to L2 (load_word), at addresses
/// computed from the loaded value, so they cannot be performed before it; the
/// publisher fences (`__threadfence`) before its store.
__device__ __forceinline__ unsigned load_published(const unsigned* p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/// A hint another SM may update (the class's cursors in use): a relaxed load at
/// CTA scope, which L1 may serve (a stale value only picks another cursor).
__device__ __forceinline__ unsigned load_hint(const unsigned* p) {
    unsigned v;
    asm volatile("ld.relaxed.cta.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/// A slab's first page record read after the slot claim that returned `claimed`:
/// the address depends on that result (through instructions the compilers do
/// not fold), so the load is performed after the claim, without a fence.
__device__ __forceinline__ unsigned load_record_after(const unsigned* p, unsigned long long claimed) {
    unsigned v;
    asm volatile(
        "{\n\t.reg .b32 z;\n\t.reg .b64 o;\n\t"
        "clz.b64 z, %2;\n\tshr.u32 z, z, 7;\n\tcvt.u64.u32 o, z;\n\tadd.s64 o, %1, o;\n\t"
        "ld.relaxed.gpu.global.u32 %0, [o];\n\t}"
        : "=r"(v)
        : "l"(p), "l"(claimed)
        : "memory");
    return v;
}

/// True when x, a slot word after a free, has no slot in use: no bit set, or only
/// a run of high bits (a last word's tail; a word whose top slots are live also
/// passes, which only costs the reclaim pass a look).
__device__ __forceinline__ bool slot_word_emptied(unsigned long long x) {
    const unsigned long long y = ~x;
    return (y & (y + 1)) == 0;
}

/// Release fence at GPU scope: this thread's earlier writes are visible to any
/// thread that later observes one of its later writes (lighter than the
/// sequentially consistent `__threadfence`).
__device__ __forceinline__ void release_fence() {
    // A release-only fence where the PTX has one (sm_90, PTX ISA 8.6: CUDA 12.8
    // on): it skips acq_rel's L1 invalidation, which a free does not need.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDACC_VER_MAJOR__) && \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 8))
    asm volatile("fence.release.gpu;" ::: "memory");
#else
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
#endif
}

/// The SM the thread runs on.
__device__ __forceinline__ unsigned sm_id() {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    return id;
}

/// SM identifiers (an upper bound on sm_id() + 1) and the warp's slot on its SM
/// (a hint: it may change while the warp runs).
__device__ __forceinline__ unsigned sm_count() {
    unsigned n;
    asm("mov.u32 %0, %%nsmid;" : "=r"(n));
    return n;
}
__device__ __forceinline__ unsigned warp_slot() {
    unsigned w;
    asm volatile("mov.u32 %0, %%warpid;" : "=r"(w));
    return w;
}

/// A per-call random stream without caller state: the thread's global id and
/// the SM clock (different on every call).
__device__ __forceinline__ counter_rng heap_rng() {
    const unsigned long long block =
        (static_cast<unsigned long long>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    const unsigned long long thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    const unsigned long long id =
        block * (static_cast<unsigned long long>(blockDim.x) * blockDim.y * blockDim.z) + thread;
    return counter_rng(static_cast<unsigned long long>(clock64()), id);
}

/// The probes of a small malloc (which slab, which word): a 32-bit linear
/// congruential step and a multiply-shift into [0, n), seeded from the SM clock
/// and the thread.  Its quality only spreads groups over words; counter_rng's
/// two 64-bit mixes per draw were a sixth of a malloc burst's instructions.
struct probe_rng {
    unsigned s;
    __device__ explicit probe_rng(unsigned seed) : s(seed) {}
    __device__ __forceinline__ unsigned below(unsigned n) {
        s = s * 1664525u + 1013904223u;
        return __umulhi(s, n);
    }
};
__device__ __forceinline__ unsigned probe_seed() {
    return (unsigned(clock()) ^ (threadIdx.x + 0x9E3779B9u * (blockIdx.x + 1))) * 0x9E3779B1u;
}

/// Bits of the lowest k set bits of x (k <= popcount(x)), and the r-th set bit of
/// such a word: when x's set bits from its lowest one on are contiguous (an empty
/// or emptied slab word) a shift, else detail::lowest_set_bits / nth_set_bit.
__device__ __forceinline__ unsigned long long take_lowest(unsigned long long x, unsigned k) {
    const unsigned long long run = k >= 64 ? ~0ull : (1ull << k) - 1;
    const unsigned long long want = run << (x != 0 ? lowest_bit(x) : 0u);
    return (x & want) == want ? want : lowest_set_bits(x, k);
}
__device__ __forceinline__ unsigned set_bit_at(unsigned long long x, unsigned r) {
    const unsigned lo = lowest_bit(x);
    const unsigned long long run = x >> lo;
    return (run & (run + 1)) == 0 ? lo + r : nth_set_bit(x, r);
}

/// The heap's view as the library keeps it in device memory, right after the
/// counters (lib/heap.cu writes it once, at create; a heap's view never changes).
/// Out-of-line code reaches the whole heap through this one pointer, so its
/// callers hold no copy of the view (a copy costs a hot kernel ~30 registers).
__device__ __forceinline__ const heap_view* heap_descriptor(unsigned long long counters) {
    return reinterpret_cast<const heap_view*>(counters + kHeapCounterCount * sizeof(unsigned long long));
}

/// Bit i of the result is set when bits i .. i + n - 1 of `free_bits` all are
/// (1 <= n <= 64): runs of n free pages that start at bit i and fit the word.
__device__ __forceinline__ unsigned long long run_starts_in(unsigned long long free_bits, unsigned n) {
    unsigned long long m = free_bits;
    for (unsigned covered = 1; covered < n && m != 0;) {
        const unsigned step = covered < n - covered ? covered : n - covered;
        m &= m >> step;
        covered += step;
    }
    return m;
}

/// Sets the bits of pages [first, first + n) in the page bitmap, all or none:
/// word by word with atomicOr; on a bit another thread holds, the bits this
/// call set are cleared again and it returns false.
__device__ __forceinline__ bool claim_pages(unsigned long long* bm, unsigned first, unsigned n) {
    const unsigned end = first + n;
    for (unsigned w = first / 64; w * 64 < end; ++w) {
        const unsigned lo = first > w * 64 ? first - w * 64 : 0;
        const unsigned hi = end - w * 64 < 64 ? end - w * 64 : 64;
        const unsigned long long want = bit_range<unsigned long long>(lo, hi);
        const unsigned long long old = atomicOr(bm + w, want);
        if ((old & want) != 0) {
            atomicAnd(bm + w, ~(want & ~old));
            for (unsigned k = first / 64; k < w; ++k) { // earlier words: all of `want` was ours
                const unsigned l2 = first > k * 64 ? first - k * 64 : 0;
                atomicAnd(bm + k, ~bit_range<unsigned long long>(l2, 64));
            }
            return false;
        }
    }
    return true;
}

/// The page search of heap_page_run: claims `pages` consecutive pages (huge:
/// a multiple of 64 from a word start; `aligned`, pages a power of two <= 64:
/// from a multiple of pages) and returns the first, or kHeapNoPage; writes no
/// record (a slab's attach writes its own).  Slabs are aligned: racing claims
/// that settled on odd starts left single pages no 2-page slab could use (a
/// 16 MiB heap exhausted at 87 % usable).
__device__ __forceinline__ unsigned heap_claim_run(const heap_view* h, unsigned long long pages, bool huge,
                                                   bool aligned = false) {
    const unsigned mapped = load_word(reinterpret_cast<const unsigned*>(h->mapped_pages));
    // Huge runs take whole words (the tail word of the mapping is never all free).
    const unsigned words = huge ? mapped / 64 : (mapped + 63) / 64;
    const unsigned long long span64 = (pages + 63) / 64;
    if (pages == 0 || span64 > words) return kHeapNoPage;
    const unsigned n = unsigned(pages);
    unsigned long long* bm = reinterpret_cast<unsigned long long*>(h->page_bitmap);
    unsigned long long* hint = reinterpret_cast<unsigned long long*>(h->counters) + kHeapCounterRunHint;
    unsigned first = kHeapNoPage;
    // Short runs: a word among the kHeapRunHintWindow from the hint (concurrent
    // growths rarely race for one word); long runs: any word.
    const unsigned long long r = mix64(clock64() ^ (threadIdx.x + 0x9E3779B9ull * blockIdx.x));
    const unsigned window =
        words / kHeapRunHintWindow < kHeapRunHintWindow ? words / kHeapRunHintWindow + 1 : kHeapRunHintWindow;
    unsigned w = unsigned((n <= 64 ? load_word(hint) + r % window : r) % words);
    unsigned run = 0, run_first = 0; // free pages just before word w, from run_first
    // Every word once, plus (long runs) the words of a run that crosses the start.
    const unsigned steps = n <= 64 ? words : words + unsigned(span64);
    for (unsigned i = 0; i < steps;) {
        const unsigned long long used = load_word(bm + w);
        unsigned cand = kHeapNoPage;
        if (n <= 64) {
            // Multiples of n: ~0 / (2^n - 1) has every n-th bit set (n < 64).
            const unsigned long long grid = !aligned ? ~0ull : n >= 64 ? 1ull : ~0ull / ((1ull << n) - 1);
            const unsigned long long starts = run_starts_in(~used, n) & grid;
            if (starts != 0) cand = w * 64 + lowest_bit(starts);
        } else {
            if (w == 0) run = 0; // a run never wraps
            // Free low bits of this word extend the run (huge runs: whole words only).
            const unsigned low = used == 0 ? 64u : (huge ? 0u : lowest_bit(used));
            if (run == 0) run_first = w * 64;
            if (run + low >= n) {
                cand = run_first;
                run = 0;
            } else if (used == 0) {
                run += 64;
            } else {
                run = huge ? 0u : unsigned(__clzll(static_cast<long long>(used))); // free high bits
                run_first = w * 64 + 64 - run;
            }
        }
        if (cand != kHeapNoPage) {
            if (claim_pages(bm, cand, n)) {
                first = cand;
                break;
            }
            // The same word again while it shows a free start: a lost claim means another
            // claim took pages there (lock-free), and giving up after a few losses made
            // a small heap (two words, every class attaching at once) refuse slabs with
            // most of its pages free.
            if (n <= 64) continue;
        }
        ++i;
        w = w + 1 == words ? 0 : w + 1;
    }
    if (first != kHeapNoPage && n <= 64 && load_word(hint) != first / 64)
        *static_cast<volatile unsigned long long*>(hint) = first / 64;
    return first;
}

/// A run of whole pages for `bytes` (one thread, any divergence), recorded so
/// heap_ref::free takes it; nullptr when none is free (not counted: callers
/// count).  Lean (a few words of state, the heap through one pointer):
/// GGArray's in-kernel bucket growth calls it, and every register it needs is
/// a register of every push kernel (inlined it costs them fewer than called:
/// 58 against 62, sm_90).  First fit over the page bitmap, each mapped word
/// visited once (a lost claim retries its word while it shows a free start; a
/// long run that crosses the start word is seen at the end), claimed with
/// claim_pages:
///  * n <= 64 pages: a run inside one word (run_starts_in), from a word near
///    the heap's run hint (counters[kHeapCounterRunHint], the word of the last
///    such run), so short runs pack into few words and whole free words stay
///    for long runs (random starts left no free word among thousands of short
///    runs: test_heap_device's malloc_pages mix failed);
///  * more: from a random word, a run of free pages across words (the free
///    high bits of one word, free words, the free low bits of the last).
/// Medium runs (<= kRwRegionWords * 64 pages) get rw_heap's run records (page
/// records, then the live-start bit, as RW_malloc writes them); larger ones
/// round up to whole bitmap words from a word start and get a huge record.
__device__ __forceinline__ void* heap_page_run(const heap_view* h, unsigned long long bytes) {
    const unsigned shift = h->page_shift;
    const unsigned long long pages = (bytes + (1ull << shift) - 1) >> shift;
    const bool huge = pages > static_cast<unsigned long long>(kRwRegionWords) * 64;
    const unsigned long long span64 = (pages + 63) / 64;
    if (bytes == 0 || span64 > kHeapLowMask) return nullptr;
    const unsigned first = heap_claim_run(h, huge ? span64 * 64 : pages, huge);
    if (first == kHeapNoPage) return nullptr;
    const unsigned n = huge ? unsigned(span64 * 64) : unsigned(pages);
    if (huge) {
        reinterpret_cast<unsigned*>(h->slab_meta)[first] = (kHeapTagHuge << kHeapTagShift) | unsigned(span64);
    } else {
        write_run_records(reinterpret_cast<unsigned*>(h->run_meta), first, n, (kRwMetaLarge << kRwMetaTagShift) | n);
        __threadfence(); // the records before the live bit (rw_heap_ref::free reads them after it)
        set_live_start(reinterpret_cast<unsigned*>(h->run_starts), static_cast<unsigned long long>(first) << shift);
    }
    return reinterpret_cast<char*>(h->base) + (static_cast<unsigned long long>(first) << shift);
}

} // namespace detail

/// Device handle over a view.  Cheap to construct; copy freely.
class heap_ref {
public:
    __device__ explicit heap_ref(const heap_view& view) : v_(view) {
        // A view of another layout version, or one never filled in (no counters), is
        // refused: every call then fails and writes nothing (its addresses may not be
        // the heap's, so not even a failure count).
        if (v_.version != kHeapViewVersion || v_.counters == 0) {
            v_.class_count = 0;
            v_.counters = 0;
        }
    }
    __device__ explicit heap_ref(const gpudyn_heap_view_t& view)
        : heap_ref(*reinterpret_cast<const heap_view*>(&view)) {}

    __device__ bool valid() const { return v_.class_count != 0; }
    __device__ unsigned long long page_size() const { return 1ull << v_.page_shift; }
    /// Largest small request (served from slabs).
    __device__ unsigned long long max_small_size() const { return page_size() / 2; }

    /// Any thread, any time, any divergence; lanes arriving together are
    /// aggregated (one claim per class).  nullptr on failure (bytes == 0 gives
    /// nullptr without counting; exhaustion is counted).  16-byte aligned; 2^k
    /// requests up to the page size are 2^k-aligned.  A call that finds no free
    /// pages first runs a reclaim pass (empty slabs back to the pool; it reads
    /// the slot words of the classes freed into since the last pass) or waits
    /// for one, and tries once more.
    __device__ void* malloc(unsigned long long bytes) const {
        // The lanes here now that allocate from this heap (others may call another heap).
        const unsigned mask = detail::peers_with(detail::active_lanes(), v_.counters);
        const bool ok = valid() && bytes != 0;
        const unsigned cls = ok && bytes <= max_small_size() ? detail::heap_class_of(bytes) : kHeapNoPage;
        // Group key: the class (small), kKeyRun (medium/huge: each lane alone), kKeyNone.
        const unsigned key = !ok ? kKeyNone : (cls != kHeapNoPage ? cls : kKeyRun);
        const unsigned group = detail::member_mask(__match_any_sync(mask, key) & mask);
        // The small lanes, while every lane of `mask` is here (the others return below).
        const unsigned small = detail::ballot(mask, key < kKeyRun);
        if (key == kKeyNone) {
            count_failures(group, bytes != 0); // an invalid view: every request fails
            return nullptr;
        }
        if (key == kKeyRun) {
            void* p = run_malloc(bytes);
            if (p == nullptr) count(kHeapCounterFailed, 1);
            return p;
        }
        // Every class group of the lanes here at once (a mixed-size warp's groups
        // make their dependent loads together, not one group after another).
        unsigned full_cur = 0;
        void* p = small == (1u << detail::lane_index()) ? lone_claim(cls, &full_cur)
                                                        : current_slab_claim(small, group, cls, &full_cur);
        const unsigned left = detail::ballot(detail::member_mask(small), p == nullptr);
        if (p == nullptr) p = small_malloc(group & left, cls, full_cur);
        return p;
    }

    /// Any thread, any time, any divergence: `bytes` rounded up to whole pages,
    /// a run of its own (no size class, no aggregation); nullptr on failure
    /// (counted; bytes == 0 gives nullptr without counting).  free() takes it.
    /// For callers that allocate rarely inside hot kernels: it compiles to about
    /// half the registers of malloc (the size-class path stays out of the
    /// caller's kernel, sm_90), which GGArray's in-kernel growth relies on.
    __device__ void* malloc_pages(unsigned long long bytes) const {
        if (bytes == 0) return nullptr;
        if (!valid()) {
            count(kHeapCounterFailed, 1);
            return nullptr;
        }
        const heap_view* h = detail::heap_descriptor(v_.counters);
        void* p = detail::heap_page_run(h, bytes);
        if (p == nullptr && reclaim(h)) p = detail::heap_page_run(h, bytes); // empty slabs back, then once more
        if (p == nullptr) count(kHeapCounterFailed, 1);
        return p;
    }

    /// malloc with the pointer a multiple of `alignment` (a power of two up to
    /// the page size; larger or non-power-of-two alignments fail and are counted).
    /// The block is the request rounded up to the alignment.
    __device__ void* malloc_aligned(unsigned long long bytes, unsigned long long alignment) const {
        const bool bad = alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > page_size();
        // A request that rounding up would wrap is as unsatisfiable as any too large one.
        if (bad || bytes > ~0ull - (alignment - 1)) {
            if (bytes != 0) count(kHeapCounterFailed, 1);
            return nullptr;
        }
        // Class sizes from a multiple of `alignment` on are multiples of it (see the
        // classes: each doubling's step divides its sizes), and slots start at
        // multiples of the class size from a page boundary.
        const unsigned long long rounded = bytes == 0 ? 0 : (bytes + alignment - 1) / alignment * alignment;
        return malloc(rounded);
    }

    /// Any thread, any later kernel.  nullptr -> true.  A double free, a foreign
    /// pointer or an interior pointer returns false, is counted as a bad free,
    /// and changes nothing.
    __device__ bool free(void* p) const {
        const unsigned mask = detail::active_lanes();
        const unsigned lane = detail::lane_index();
        const slot_ref s = locate(p);
        const bool slot = s.kind == kSlot;
        // The caller's writes to the block are visible before anyone can get it
        // again.  After locate's loads, so the fence's wait overlaps them.
        detail::release_fence();
        // Slot frees clear their bit with atomicAnd.  Lanes freeing into the word of
        // the lowest slot lane left (a converged warp's slots share a word or two)
        // clear their bits with one atomicAnd, twice over; the others alone (a
        // __match_any_sync grouping cost mixed-size frees, whose words all differ,
        // twice the time; a leader alone in its word ends the rounds at once).
        // A bit already clear is a double free, also between lanes freeing one
        // pointer together: their group falls back to one atomicAnd a lane, so
        // one of them frees it.
        unsigned rest = detail::ballot(mask, slot);
        bool done = !slot, ok = false, emptied = false;
        for (unsigned round = 0; round < 2 && rest != 0; ++round) {
            const unsigned leader = detail::lowest_bit(rest);
            const unsigned long long lead =
                __shfl_sync(mask, reinterpret_cast<unsigned long long>(s.word), int(leader));
            const bool mine = !done && reinterpret_cast<unsigned long long>(s.word) == lead;
            const unsigned group = detail::ballot(mask, mine);
            if ((group & (group - 1)) == 0) break; // the leader alone (mixed sizes): everyone alone below
            const unsigned long long bits = detail::masked_or64(mask, mine ? s.bit() : 0ull);
            rest &= ~group;
            if (detail::popcount(bits) != detail::popcount(group)) continue; // a pointer twice: alone below
            unsigned long long old = 0;
            if (lane == leader) {
                old = atomicAnd(s.word, ~bits);
                emptied = detail::slot_word_emptied(old & ~bits);
            }
            old = __shfl_sync(mask, old, int(leader));
            if (mine) {
                done = true;
                ok = (old & s.bit()) != 0;
            }
        }
        if (!done) {
            const unsigned long long old = atomicAnd(s.word, ~s.bit());
            ok = (old & s.bit()) != 0;
            emptied = ok && detail::slot_word_emptied(old & ~s.bit());
        }
        if (emptied) mark_dirty(s.where >> 6);
        if (slot) return ok ? true : bad_free(); // a slot that was free already: nothing changed
        if (s.kind == kNull) return true;
        if (s.kind == kHuge) return huge_free(s.page);
        if (s.kind == kRun) return run_ref(kHeapCounterFailed).free(p);
        return bad_free();
    }

    /// Usable bytes of the block at p (a pointer malloc returned and not yet
    /// freed); 0 for nullptr, a foreign or an interior pointer.
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

    /// For the stats kernel (lib/heap.cu): the allocations that start on `page`
    /// (a snapshot; exact when no kernel runs concurrently).
    __device__ heap_page_usage usage_of_page(unsigned page) const {
        heap_page_usage u{0, 0, 0};
        const unsigned rec = detail::load_word(slab_meta() + page);
        const unsigned tag = rec >> kHeapTagShift;
        if (tag == kHeapTagSlab) {
            const heap_class k = class_info(rec & kHeapLowMask);
            const unsigned long long* w = slot_words(page);
            unsigned used = 0;
            for (unsigned i = 0; i * 64 < k.slots; ++i) {
                const unsigned n = detail::heap_word_slots(k, i);
                const unsigned long long valid = n == 64 ? ~0ull : ((1ull << n) - 1);
                used += detail::popcount(detail::load_word(w + i) & valid);
            }
            u.allocations = used;
            u.bytes_allocated = static_cast<unsigned long long>(used) * k.size;
            u.largest_slot = used < k.slots ? k.size : 0;
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
    enum kind_t : unsigned {
        kNull,
        kBad,
        kSlot,
        kHuge,
        kRun
    };
    struct slot_ref {
        unsigned kind;
        unsigned page;            ///< page of p (kHuge, kRun)
        unsigned long long* word; ///< slot bitmap word (kSlot)
        unsigned where;           ///< class << 6 | the slot's bit in its word (kSlot; one register)
        unsigned long long size;  ///< class size (kSlot)
        __device__ unsigned long long bit() const { return 1ull << (where & 63u); }
    };
    /// A free left a slot word of class c empty: the class is marked for the
    /// reclaim pass (read first, through L1, so a burst of frees writes the flag
    /// about once; a stale 1 after a pass cleared it mid-kernel only delays that
    /// slab's reclaim to a later mark).
    __device__ void mark_dirty(unsigned c) const {
        unsigned* const flag = class_state(c) + kHeapStateDirty;
        if (detail::load_hint(flag) == 0) *static_cast<volatile unsigned*>(flag) = 1u;
    }

    __device__ unsigned long long* counters() const { return reinterpret_cast<unsigned long long*>(v_.counters); }
    __device__ unsigned* slab_meta() const { return reinterpret_cast<unsigned*>(v_.slab_meta); }
    __device__ unsigned* run_meta() const { return reinterpret_cast<unsigned*>(v_.run_meta); }
    __device__ unsigned long long* page_words() const { return reinterpret_cast<unsigned long long*>(v_.page_bitmap); }
    __device__ unsigned* class_state(unsigned c) const {
        return reinterpret_cast<unsigned*>(v_.class_state) + kHeapClassStateWords * c;
    }
    /// Cursor i of a class's state, and the cursor the calling SM uses now.
    __device__ static unsigned* cursor_word(unsigned* state, unsigned i) {
        return state + kHeapStateLineWords * (2 + i % kHeapCursorLines) + kHeapCursorStride * (i / kHeapCursorLines);
    }
    /// `fresh`: read the cursors in use from L2 (a group's round) rather than
    /// through L1 (a lone caller's try; a stale count only picks another cursor,
    /// but in a cold burst a stale 1 for every group crowded one slab, and the
    /// misses attached slabs that stayed nearly empty).
    __device__ static unsigned sm_cursor(unsigned* state, bool fresh) {
        const unsigned* in_use = state + kHeapStateLineWords;
        const unsigned active = fresh ? detail::load_word(in_use) : detail::load_hint(in_use);
        if (active <= 1) return 0u;
        const unsigned a = active < kHeapCursors ? active : kHeapCursors;
        const unsigned sms = detail::sm_count();
        const unsigned i = detail::sm_id() + (a > sms ? sms * (detail::warp_slot() % kHeapWarpCursors) : 0u);
        return i < a ? i : __umulhi(i * 0x9E3779B1u, a);
    }
    __device__ unsigned* directory() const { return reinterpret_cast<unsigned*>(v_.directory); }
    __device__ unsigned mapped_pages() const {
        return detail::load_word(reinterpret_cast<const unsigned*>(v_.mapped_pages));
    }
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
        count(kHeapCounterBadFree, 1);
        return false;
    }
    /// Adds n to counter `slot` (a refused view may have none).
    __device__ void count(unsigned slot, unsigned long long n) const {
        if (v_.counters != 0) atomicAdd(counters() + slot, n);
    }
    /// Counts the lanes of `group` for which `failed` holds, with one atomic.
    __device__ void count_failures(unsigned group, bool failed) const {
        group = detail::member_mask(group);
        const unsigned f = detail::ballot(group, failed);
        if (f != 0 && detail::lane_index() == detail::lowest_bit(group)) count(kHeapCounterFailed, detail::popcount(f));
    }

    /// rw_heap's view of the page bitmap and the run records; its failures go to
    /// counters[failed_slot] (kHeapCounterFailed for medium runs, the scratch slot
    /// for slab attaches), its bad frees to ours.
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

    /// What p is (thread-level; no side effects).
    __device__ slot_ref locate(const void* p) const {
        slot_ref s{kBad, 0, nullptr, 0, 0};
        if (p == nullptr) {
            s.kind = kNull;
            return s;
        }
        const unsigned long long off = reinterpret_cast<unsigned long long>(p) - v_.base;
        if (!valid() || reinterpret_cast<unsigned long long>(p) < v_.base || (off >> v_.page_shift) >= v_.max_pages)
            return s;
        unsigned page = unsigned(off >> v_.page_shift);
        s.page = page;
        unsigned rec = detail::load_word(slab_meta() + page);
        unsigned tag = rec >> kHeapTagShift;
        unsigned head = page;
        unsigned c = rec & kHeapLowMask;
        if (tag == kHeapTagMember) {
            head = page - (rec & kHeapMemberOffsetMask);
            c = (rec & kHeapLowMask) >> kHeapMemberClassShift;
            tag = kHeapTagSlab;
        }
        if (tag == kHeapTagSlab) {
            if (c >= v_.class_count) return s;
            const heap_class k = class_info(c);
            const unsigned long long in =
                reinterpret_cast<unsigned long long>(p) - reinterpret_cast<unsigned long long>(page_address(head));
            const unsigned slot = unsigned(in) / k.size; // in < a slab's bytes (< 2^32)
            // interior pointer or slab tail
            if (static_cast<unsigned long long>(slot) * k.size != in || slot >= k.slots) return s;
            s.kind = kSlot;
            s.word = slot_words(head) + slot / 64;
            s.where = c << 6 | slot % 64;
            s.size = k.size;
            return s;
        }
        if (tag == kHeapTagHuge) {
            if (p == page_address(page)) s.kind = kHuge;
            return s;
        }
        s.kind = kRun; // rw_heap_ref::free decides (run start, or bad free)
        return s;
    }

    /// @name small: slabs of a size class
    /// @{

    /// What the fast pass and the rounds know of a class group: the lane, the
    /// group's size, the lane's rank in it, its leader, the class and its slot words.
    struct class_group {
        unsigned lane, n, rank, leader;
        heap_class k;
        unsigned nwords;
    };
    __device__ class_group group_of(unsigned group, unsigned c) const {
        class_group g{
            detail::lane_index(),      detail::popcount(group), detail::popcount(group & detail::lanes_below()),
            detail::lowest_bit(group), class_info(c),           0};
        g.nwords = detail::heap_slab_words(g.k);
        return g;
    }

    /// The first free bit of `avail` (non-zero) from a random one (h's top bits).
    __device__ static unsigned long long random_free_bit(unsigned long long avail, unsigned h) {
        const unsigned r = h >> 26;
        const unsigned long long rot = r == 0 ? avail : (avail >> r) | (avail << (64 - r));
        return 1ull << ((detail::lowest_bit(rot) + r) & 63u);
    }

    /// After a won claim of `got` on slot word `wp` of slab `slab` of class c
    /// (`old`: what the claim returned): true while the slab is still c's; else
    /// the bits go back (a reclaim gave its pages to another use since the
    /// cursor or directory entry was read) and the claim counts as lost.
    __device__ bool keep_claim(unsigned slab, unsigned c, unsigned long long* wp, unsigned long long got,
                               unsigned long long old) const {
        if (detail::load_record_after(slab_meta() + slab, old) == ((kHeapTagSlab << kHeapTagShift) | c)) return true;
        atomicAnd(wp, ~got);
        return false;
    }

    /// Slot `slot` of the slab at page `slab`, for slots of `size` bytes.
    __device__ char* slot_address(unsigned slab, unsigned slot, unsigned size) const {
        return page_address(slab) + static_cast<unsigned long long>(slot) * size;
    }

    /// The fast pass of a lane with no other small request in its warp (divergent
    /// code): current_slab_claim's steps for a group of one, without its
    /// shuffles and ballots (a divergent burst is bound by the instructions it
    /// issues): a random word of the SM's current slab, a random slot of it;
    /// after a lost claim, a free bit of the word it returned; after a full
    /// word, the next (up to kHeapLoneTries reads and claims after the first).
    /// The cursor is read through L1 (load_hint): a stale one names a slab of
    /// the class or one a reclaim took back (keep_claim gives such a claim
    /// back), and its slot bits are only read and claimed in L2, so it costs at most a
    /// full slab's lost claim before the rounds read the cursor from L2 (a
    /// divergent burst is faster so; converged groups use L2).
    __device__ void* lone_claim(unsigned c, unsigned* full_cur) const {
        const heap_class k = class_info(c);
        const unsigned nwords = detail::heap_slab_words(k);
        unsigned* state = class_state(c);
        const unsigned cur = detail::load_hint(cursor_word(state, sm_cursor(state, false)));
        if (cur == 0) return nullptr;
        unsigned h = detail::probe_seed();
        unsigned w = __umulhi(h, nwords);
        unsigned long long* const sw = slot_words(cur - 1);
        // The first claim is blind: a random slot of word w (not a tail bit of a
        // slab of fewer slots), with no read of the word before it: one round
        // trip less while the slab has room, and a lost claim returns the word,
        // as the read would have.  (Folded into the loop below, one copy of the
        // claim step, it issued a third more warp instructions.)
        const unsigned b0 = __umulhi(h * 0x85EBCA6Bu, detail::heap_word_slots(k, w));
        unsigned long long bit = 1ull << b0;
        unsigned long long old = atomicOr(sw + w, bit);
        if ((old & bit) == 0)
            return keep_claim(cur - 1, c, sw + w, bit, old) ? slot_address(cur - 1, w * 64 + b0, k.size) : nullptr;
        h = h * 1664525u + 1013904223u;
        unsigned long long free_bits = ~old;
        unsigned full_words = 0; // words read in a row with no free bit
        for (unsigned t = 0; t < kHeapLoneTries; ++t) {
            if (free_bits == 0) {
                if (++full_words >= nwords) {
                    *full_cur = cur;
                    return nullptr;
                }
                w = w + 1 == nwords ? 0 : w + 1;
                free_bits = ~detail::load_word(sw + w);
                continue;
            }
            bit = random_free_bit(free_bits, h);
            old = atomicOr(sw + w, bit);
            if ((old & bit) == 0)
                return keep_claim(cur - 1, c, sw + w, bit, old)
                           ? slot_address(cur - 1, w * 64 + detail::lowest_bit(bit), k.size)
                           : nullptr;
            free_bits = ~old;
            full_words = 0;
            h = h * 1664525u + 1013904223u;
        }
        return nullptr;
    }

    /// The fast pass, a warp collective over `small` (every lane with a small
    /// request), each lane in `group` (its class's lanes among them): each group
    /// reads one word a lane of its SM's current slab (a group-uniform random
    /// start, lane r at start + r); the lowest lane whose word has a free slot
    /// for its whole group claims them with one atomicOr (a group of one takes a
    /// random free bit, since lone callers of one SM share the slab) and the
    /// group's lanes take them by rank.  All groups do this in the
    /// same instructions.  nullptr: not served here (the rounds go on);
    /// `*full_cur`: the cursor value of a current slab the group read whole and
    /// found full (0: none).  (Not kept: lanes beyond the slab's words reading
    /// the next cursors' slabs, which made warps of different SMs race for one
    /// slab; the cursor count read through L1 here and in the rounds.)
    __device__ void* current_slab_claim(unsigned small, unsigned group, unsigned c, unsigned* full_cur) const {
        small = detail::member_mask(small);
        group = detail::member_mask(group);
        const auto [lane, n, rank, leader, k, nwords] = group_of(group, c);
        unsigned cur = 0, seed = 0;
        if (lane == leader) {
            unsigned* state = class_state(c);
            // A lone caller reads the cursor count through L1 (a stale count only
            // picks another cursor); a group from L2 (see sm_cursor).
            cur = detail::load_published(cursor_word(state, sm_cursor(state, n > 1)));
            seed = detail::probe_seed();
        }
        cur = __shfl_sync(small, cur, int(leader));
        seed = __shfl_sync(small, seed, int(leader));
        unsigned w = __umulhi(seed, nwords) + rank;
        w = w >= nwords ? w - nwords : w;
        unsigned long long* const sw = cur != 0 ? slot_words(cur - 1) : nullptr;
        const unsigned long long free_bits = cur != 0 && rank < nwords ? ~detail::load_word(sw + w) : 0ull;
        const unsigned enough = detail::ballot(small, detail::popcount(free_bits) >= n) & group;
        const unsigned seen = detail::ballot(small, free_bits != 0) & group;
        *full_cur = cur != 0 && nwords <= n && seen == 0 ? cur : 0u;
        unsigned long long got = 0;
        if (enough != 0 && lane == detail::lowest_bit(enough)) {
            const unsigned long long want =
                n == 1 ? random_free_bit(free_bits, seed) : detail::take_lowest(free_bits, n);
            const unsigned long long old = atomicOr(sw + w, want);
            got = want & ~old;
            if (got != 0 && !keep_claim(cur - 1, c, sw + w, got, old)) got = 0;
        }
        const int claimer = int(enough != 0 ? detail::lowest_bit(enough) : leader);
        got = __shfl_sync(small, got, claimer);
        w = __shfl_sync(small, w, claimer);
        if (rank >= detail::popcount(got)) return nullptr;
        return slot_address(cur - 1, w * 64 + detail::set_bit_at(got, rank), k.size);
    }

    /// The rounds, a warp collective over `group` (lanes of one class the fast
    /// pass did not serve; full_cur: what it returned).  (a) the class's current
    /// slab, scanned by the group's lanes from a group-uniform random word
    /// (skipped while the cursor shows full_cur); (b) when it had no free slot, random slabs of
    /// the class (half the draws among the newest slabs, where a burst's free
    /// slots are); a draw that finds a slab with room left makes it current, so
    /// later groups fill it instead of attaching; (c) after
    /// kHeapMissesBeforeAttach rounds that found no free slot, the leader
    /// attaches a slab, with at most kHeapMinConcurrentAttach + slabs / 16
    /// attaches of the class under way (a refused group sleeps and reads the
    /// current slab again, which an attacher just replaced); (d) when no page is
    /// left for a slab, a sweep of every word of the class.  A round that won
    /// nothing (a lost race too) is a miss.
    __device__ void* small_malloc(unsigned group, unsigned c, unsigned full_cur) const {
        group = detail::member_mask(group);
        const auto [lane, n, rank, leader, k, nwords] = group_of(group, c);
        unsigned* state = class_state(c);
        const unsigned* dir = directory() + k.dir_offset;
        char* mine = nullptr;
        detail::probe_rng rng(detail::probe_seed());
        unsigned misses = 0, refusals = 0;
        bool sweeping = false, reclaimed = false;
        unsigned long long sweep_pos = 0, sweep_end = 0;
        for (unsigned round = 0;; ++round) {
            const unsigned needy = detail::ballot(group, mine == nullptr);
            if (needy == 0) break;
            const unsigned need = detail::popcount(needy);
            const unsigned needy_rank = detail::popcount(needy & detail::lanes_below());
            // 1. Each lane finds a word with free bits (or none).
            // The SM's current slab (its cursor among the class's cursors in use);
            // the slab count only when the group reads beyond it.
            unsigned count = 0, cur = 0, cursor = 0;
            if (lane == leader) {
                cursor = sm_cursor(state, true);
                cur = detail::load_published(cursor_word(state, cursor));
                if (sweeping || misses != 0 || cur == 0 || cur == full_cur) count = detail::load_word(state);
            }
            count = __shfl_sync(group, count, int(leader));
            cur = __shfl_sync(group, cur, int(leader));
            cursor = __shfl_sync(group, cursor, int(leader));
            const unsigned base = __shfl_sync(group, nwords > 1 ? rng.below(nwords) : 0u, int(leader));
            unsigned slab = kHeapNoPage, w = 0;
            unsigned long long free_bits = 0;
            const bool from_current = !sweeping && misses == 0 && cur != 0 && cur != full_cur;
            if (sweeping) {
                const unsigned long long q = sweep_pos + rank;
                if (q < sweep_end) {
                    slab = detail::load_published(dir + unsigned(q / nwords));
                    w = unsigned(q % nwords);
                    if (slab < kHeapTombstone) free_bits = ~detail::load_word(slot_words(slab) + w);
                    else slab = kHeapNoPage;
                }
                sweep_pos += n;
            } else if (from_current) {
                // The current slab: lane r reads words base + r, base + r + n, ..
                // until it finds free slots, and the group stops once the free
                // slots found cover its need (a round waits for its slowest
                // lane: lanes probing on after one had found room for the whole
                // group made the probes about two thirds of a round).
                slab = cur - 1;
                const unsigned long long* sw = slot_words(slab);
                for (unsigned steps = 0; steps < kHeapScanWords && steps * n < nwords; ++steps) {
                    const unsigned j = rank + steps * n;
                    if (free_bits == 0 && j < nwords) {
                        w = (base + j) % nwords;
                        free_bits = ~detail::load_word(sw + w);
                    }
                    if (detail::masked_sum(group, detail::popcount(free_bits)) >= need) break;
                }
            } else if (count != 0) {
                // Random probes: a random word of a random slab (every other probe
                // among the newest slabs), until the lane has a free slot or the
                // group's cover its need.
                const unsigned recent = count < kHeapRecentSlabs ? count : kHeapRecentSlabs;
                for (unsigned j = 0; j < kHeapDrawProbes; ++j) {
                    if (free_bits == 0) {
                        const unsigned idx = ((rank + j) & 1) != 0 ? count - 1 - rng.below(recent) : rng.below(count);
                        const unsigned sl = detail::load_published(dir + idx);
                        if (sl < kHeapTombstone) {
                            slab = sl;
                            w = nwords > 1 ? rng.below(nwords) : 0u;
                            free_bits = ~detail::load_word(slot_words(slab) + w);
                        }
                    }
                    if (detail::masked_sum(group, detail::popcount(free_bits)) >= need) break;
                }
            }
            // 2. Claims.  When one lane's word has a free slot for every needy lane
            //    (a converged group in a slab with room), that lane claims them all;
            //    else a prefix sum of the free bits splits the need.  A lane claims
            //    its share on its word with atomicOr, again on the bits still free
            //    when another warp took some first.
            unsigned long long* wp = free_bits != 0 ? slot_words(slab) + w : nullptr;
            const unsigned f = detail::popcount(free_bits);
            const unsigned enough = detail::ballot(group, f >= need);
            unsigned take = 0;
            if (enough != 0) {
                take = lane == detail::lowest_bit(enough) ? need : 0u;
            } else {
                const unsigned sf = detail::masked_inclusive_sum(group, f) - f;
                take = sf < need ? (f < need - sf ? f : need - sf) : 0u;
            }
            unsigned long long got = 0;
            unsigned left = 0; // free bits seen after the claim
            if (take != 0) {
                // One slot: a random free bit.  Single claims are most of a mixed-size
                // burst (groups of one or two), and every group that took the lowest
                // bit of a shared word raced for the same one: lost races count as
                // misses, and the attaches they caused held more than random bits do.
                // Random starts for the multi-slot claims of small groups as well
                // helped mixed sizes, but fragmented words for single sizes.
                const unsigned long long want = take == 1 ? random_free_bit(free_bits, rng.below(64) << 26)
                                                          : detail::lowest_set_bits(free_bits, take);
                const unsigned long long old = atomicOr(wp, want);
                got = want & ~old;
                left = detail::popcount(~(old | want));
                if (got != 0 && !keep_claim(slab, c, wp, got, old)) got = left = 0;
            }
            // 3. Hand-out by what was won: needy lane of rank r takes the (r - s2)-th
            //    won bit of the lane whose won range [s2, s2 + g) covers r.
            const unsigned g = detail::popcount(got);
            const unsigned contributors = detail::ballot(group, g != 0);
            const unsigned s2 = enough != 0 ? 0u : detail::masked_inclusive_sum(group, g) - g;
            for (unsigned rest = contributors; rest != 0; rest &= rest - 1) {
                const int src = int(detail::lowest_bit(rest));
                const unsigned cs = enough != 0 ? 0u : __shfl_sync(group, s2, src);
                const unsigned long long cgot = __shfl_sync(group, got, src);
                const unsigned cslab = __shfl_sync(group, slab, src);
                const unsigned cw = __shfl_sync(group, w, src);
                const unsigned cg = detail::popcount(cgot);
                if (mine == nullptr && needy_rank >= cs && needy_rank < cs + cg) {
                    const unsigned bit = detail::nth_set_bit(cgot, needy_rank - cs);
                    mine = slot_address(cslab, cw * 64 + bit, k.size);
                }
            }
            if (sweeping) {
                if (sweep_pos < sweep_end) continue;
                // Every word of every slab seen once: empty slabs of any class back
                // to the pool (once), then rounds that attach at once.
                if (reclaimed || !reclaim_for(group, leader)) break;
                reclaimed = true;
                sweeping = false;
                misses = kHeapMissesBeforeAttach - 1;
                continue;
            }
            // A random draw that found a slab with room left makes it the current slab.
            const unsigned room = k.slots / 4 < 8 ? (k.slots / 4 > 0 ? k.slots / 4 : 1u) : 8u;
            const unsigned promote = detail::ballot(group, !from_current && g != 0 && left >= room);
            // (A plain load first: when many groups promote at once, one CAS per cursor
            // lands.  Without it, and with the slab count loaded alongside the
            // cursor, the 1M bursts measured the same within noise.)
            if (promote != 0 && lane == detail::lowest_bit(promote) &&
                detail::load_word(cursor_word(state, cursor)) == cur)
                atomicCAS(cursor_word(state, cursor), cur, slab + 1);
            // A round that won nothing is a miss, a lost race too (not counting a
            // lost race on a word with free bits left made a mixed-size burst
            // 1.6x slower: groups kept coming back to a contended slab).
            const bool progress = contributors != 0;
            misses = progress ? 0 : misses + 1;
            if (!from_current && count == 0) misses = kHeapMissesBeforeAttach; // no slab yet: attach at once
            if (misses < kHeapMissesBeforeAttach) continue;
            // 4. Attach a slab (the leader), pre-claiming slots for the still needy lanes.
            const unsigned still = detail::ballot(group, mine == nullptr);
            const unsigned still_n = detail::popcount(still);
            const unsigned claimed = still_n < k.slots ? still_n : k.slots;
            unsigned head = kHeapNoPage;
            bool refused = false, grown = false;
            if (lane == leader) {
                // A slab attached since this round read the count has room: read it
                // first (in a burst, groups that decided together attached a slab
                // each, and the last ones stayed nearly empty).
                const unsigned now = detail::load_word(state);
                if (now != count && refusals < kHeapMaxRefusals) {
                    grown = true;
                } else {
                    const unsigned underway = atomicAdd(state + 1, 1u);
                    const unsigned limit = kHeapMinConcurrentAttach + now / kHeapAttachShare;
                    if (underway >= limit && refusals < kHeapMaxRefusals) {
                        refused = true;
                    } else {
                        head = attach_slab(c, k, claimed, cursor);
                    }
                    atomicSub(state + 1, 1u);
                }
            }
            head = __shfl_sync(group, head, int(leader));
            refused = __shfl_sync(group, refused, int(leader));
            if (__shfl_sync(group, grown, int(leader))) {
                ++refusals;
                misses = 0;
                continue;
            }
            if (head != kHeapNoPage) {
                const unsigned r = detail::popcount(still & detail::lanes_below());
                if (mine == nullptr && r < claimed) mine = slot_address(head, r, k.size);
                // A group larger than a slab: one draw round, then the next attach.
                misses = still_n > claimed ? kHeapMissesBeforeAttach - 1 : 0;
                continue;
            }
            if (refused) {
                // Another group is attaching: wait about one attach, then read the current slab.
                __nanosleep(kHeapAttachWaitNs << (refusals < 4 ? refusals : 4u));
                ++refusals;
                misses = 0;
                continue;
            }
            // No page for a slab: sweep every word of the class once.
            sweeping = true;
            sweep_pos = 0;
            sweep_end = static_cast<unsigned long long>(
                            __shfl_sync(group, lane == leader ? detail::load_word(state) : 0u, int(leader))) *
                        nwords;
            if (sweep_end == 0) { // no slab of the class yet: as after a sweep
                if (reclaimed || !reclaim_for(group, leader)) break;
                reclaimed = true;
                sweeping = false;
                misses = kHeapMissesBeforeAttach - 1;
            }
        }
        count_failures(group, mine == nullptr);
        return mine;
    }

    /// The group's leader runs a reclaim pass; true (for every lane) when the
    /// rounds should start again: it returned pages, or another pass ran.
    __device__ bool reclaim_for(unsigned group, unsigned leader) const {
        bool again = false;
        if (detail::lane_index() == leader) again = reclaim(detail::heap_descriptor(v_.counters));
        return __shfl_sync(group, again, int(leader));
    }

    /// Attaches a new slab to class c (one thread), its first `claimed` slots
    /// already taken by the caller.  Returns its first page or kHeapNoPage.
    __device__ unsigned attach_slab(unsigned c, const heap_class& k, unsigned claimed, unsigned cursor) const {
        const unsigned head = claim_slab_pages(k);
        if (head == kHeapNoPage) return kHeapNoPage; // (malloc reclaims empty slabs and tries again)
        unsigned* state = class_state(c);
        unsigned* const entry = reserve_entry(state, directory() + k.dir_offset, v_.max_pages / k.slab_pages);
        if (entry == nullptr) { // every entry holds a live slab or is being reused: the pages go back
            release_pages(page_words(), head, k.slab_pages);
            return kHeapNoPage;
        }
        // Slot bits: the caller's slots and the tail past `slots` are used.
        unsigned long long* w = slot_words(head);
        const unsigned nwords = detail::heap_slab_words(k);
        for (unsigned i = 0; i < nwords; ++i) {
            unsigned long long init = 0;
            if (i == 0) init |= claimed >= 64 ? ~0ull : ((1ull << claimed) - 1);
            init |= empty_word(k, i);
            w[i] = init;
        }
        unsigned* m = slab_meta();
        for (unsigned i = 1; i < k.slab_pages; ++i)
            m[head + i] = (kHeapTagMember << kHeapTagShift) | (c << kHeapMemberClassShift) | i;
        m[head] = (kHeapTagSlab << kHeapTagShift) | c;
        // Release: bits and records reach memory before the directory entry.
        __threadfence();
        const unsigned idx = unsigned(entry - (directory() + k.dir_offset));
        atomicExch(entry, head);
        atomicExch(cursor_word(state, cursor), head + 1); // the caller's current slab (0: none), after the fence
        const unsigned active = 1 + (idx + 1) / kHeapSlabsPerCursor;
        if ((idx + 1) % kHeapSlabsPerCursor == 0) // the class just grew a cursor
            atomicMax(state + kHeapStateLineWords, active < kHeapCursors ? active : kHeapCursors);
        return head;
    }

    /// The pages of a new slab of class k, or kHeapNoPage.
    __device__ unsigned claim_slab_pages(const heap_class& k) const {
        if (k.slab_pages == 1) {
            detail::counter_rng rng = detail::heap_rng(); // the page walk's (rw_heap's) generator
            return run_ref(kHeapCounterAttachScratch).get_page<rw_algorithm::rw_bm>(rng);
        }
        // heap_page_run's search (every mapped word once: a slab fails only when
        // no run of its pages is free; RW_malloc's random region search gave up in
        // a small heap with room left), without its run records: the slab's are ours.
        return detail::heap_claim_run(detail::heap_descriptor(v_.counters), k.slab_pages, k.slab_pages > 64,
                                      k.slab_pages <= 64);
    }

    /// Slot word w of an empty slab of class k: its tail bits (past the slots) set.
    __device__ static unsigned long long empty_word(const heap_class& k, unsigned w) {
        const unsigned n = detail::heap_word_slots(k, w);
        return n < 64 ? ~((1ull << n) - 1) : 0ull;
    }

    /// Clears the page bits of pages [first, first + n).
    __device__ static void release_pages(unsigned long long* bm, unsigned first, unsigned n) {
        const unsigned end = first + n;
        for (unsigned w = first / 64; w * 64 < end; ++w) {
            const unsigned lo = first > w * 64 ? first - w * 64 : 0;
            const unsigned hi = end - w * 64 < 64 ? end - w * 64 : 64;
            atomicAnd(bm + w, ~detail::bit_range<unsigned long long>(lo, hi));
        }
    }

    /// A directory entry for a new slab of the class whose state and directory
    /// these are: a tombstone while the class has any (taken by CAS, left at
    /// kHeapNoPage, which readers skip), else the next entry never written;
    /// nullptr when every one of its `capacity` entries is taken.
    __device__ static unsigned* reserve_entry(unsigned* state, unsigned* dir, unsigned capacity) {
        unsigned* const holes = state + kHeapStateHoles;
        unsigned* const hint = state + kHeapStateHoleHint;
        if (detail::load_word(holes) != 0) {
            const unsigned from = detail::load_word(hint);
            unsigned* e = take_tombstone(dir, from, detail::load_word(state));
            if (e != nullptr) {
                atomicSub(holes, 1u);
                // The next search starts past it, unless a reclaim lowered the hint meanwhile.
                atomicCAS(hint, from, unsigned(e - dir) + 1);
                return e;
            }
        }
        for (unsigned n = detail::load_word(state); n < capacity;) {
            const unsigned seen = atomicCAS(state, n, n + 1);
            if (seen == n) return dir + n;
            n = seen;
        }
        // Full: a tombstone the hint skipped (an attach raised it past a new one).
        if (detail::load_word(holes) != 0) {
            unsigned* e = take_tombstone(dir, 0, capacity);
            if (e != nullptr) {
                atomicSub(holes, 1u);
                return e;
            }
        }
        return nullptr;
    }

    /// Takes the first tombstone among entries [from, n) (CAS to kHeapNoPage).
    __device__ static unsigned* take_tombstone(unsigned* dir, unsigned from, unsigned n) {
        for (unsigned i0 = from; i0 < n; i0 += kHeapReclaimBatch) {
            unsigned e[kHeapReclaimBatch];
#pragma unroll
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                e[j] = i0 + j < n ? detail::load_published(dir + i0 + j) : 0u;
#pragma unroll
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                if (e[j] == kHeapTombstone && atomicCAS(dir + i0 + j, kHeapTombstone, kHeapNoPage) == kHeapTombstone)
                    return dir + i0 + j;
        }
        return nullptr;
    }

    /// @}

    /// @name reclaim: empty slabs back to the page pool (one thread; see the design notes)
    /// @{

    /// One reclaim pass, for a caller that found no free pages.  True when the
    /// caller should try once more: this pass gave pages back, or another
    /// caller's pass was running (this one waits for it, boundedly).  Out of
    /// line: the allocation paths pay for it only when pages run out.
    static __device__ __forceinline__ bool reclaim(const heap_view* h) {
        unsigned* const line0 = reinterpret_cast<unsigned*>(h->class_state);
        unsigned* const lock = line0 + kHeapStateReclaimLock;
        unsigned* const passes = line0 + kHeapStateReclaimPasses;
        const unsigned seen = detail::load_published(passes);
        if (atomicCAS(lock, 0u, 1u) != 0u) {
            unsigned now = seen;
            for (unsigned i = 0; i < kHeapReclaimWaits && now == seen; ++i) {
                __nanosleep(kHeapReclaimWaitNs);
                now = detail::load_published(passes);
            }
            return now == seen || (now & 1u) != 0; // (waited in vain: try anyway)
        }
        __threadfence(); // the last pass's writes are seen before this one reads
        bool freed = false;
        for (unsigned c0 = 0; c0 < h->class_count; c0 += kHeapReclaimBatch) {
            unsigned d[kHeapReclaimBatch];
#pragma unroll
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                d[j] = c0 + j < h->class_count ? detail::load_published(state_of(h, c0 + j) + kHeapStateDirty) : 0u;
            unsigned dirty = 0;
#pragma unroll
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j) dirty |= d[j] != 0 ? 1u << j : 0u;
            for (; dirty != 0; dirty &= dirty - 1)
                if (reclaim_class(h, c0 + detail::lowest_bit(dirty))) freed = true;
        }
        __threadfence();
        atomicExch(passes, (((detail::load_published(passes) >> 1) + 1) << 1) | (freed ? 1u : 0u));
        atomicExch(lock, 0u);
        return freed;
    }

    __device__ static unsigned* state_of(const heap_view* h, unsigned c) {
        return reinterpret_cast<unsigned*>(h->class_state) + kHeapClassStateWords * c;
    }
    __device__ static unsigned long long* slot_words_of(const heap_view* h, unsigned page) {
        return reinterpret_cast<unsigned long long*>(h->slot_bitmap) +
               (static_cast<unsigned long long>(page) << (h->page_shift - kHeapSlotWordShift));
    }

    /// Returns class c's empty slabs to the page pool; true when it freed any.
    /// The dirty flag is cleared first: a free that empties a word after the
    /// pass read it marks the class again.
    static __device__ bool reclaim_class(const heap_view* h, unsigned c) {
        unsigned* const state = state_of(h, c);
        atomicExch(state + kHeapStateDirty, 0u);
        const uint4 kk = __ldg(reinterpret_cast<const uint4*>(h->class_table) + c);
        const heap_class k{kk.x, kk.y, kk.z, kk.w};
        unsigned* const dir = reinterpret_cast<unsigned*>(h->directory) + k.dir_offset;
        const unsigned n = detail::load_word(state);
        const unsigned long long empty0 = empty_word(k, 0);
        bool freed = false;
        for (unsigned i0 = 0; i0 < n; i0 += kHeapReclaimBatch) {
            unsigned e[kHeapReclaimBatch];
            unsigned long long w0[kHeapReclaimBatch];
#pragma unroll
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                e[j] = i0 + j < n ? detail::load_published(dir + i0 + j) : kHeapNoPage;
#pragma unroll
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                w0[j] = e[j] < kHeapTombstone ? detail::load_word(slot_words_of(h, e[j])) : ~0ull;
            unsigned empty = 0;
#pragma unroll
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                empty |= w0[j] == empty0 && e[j] < kHeapTombstone ? 1u << j : 0u;
            // (The entry again: rare, and one copy of reclaim_slab, not one per j.)
            for (; empty != 0; empty &= empty - 1) {
                unsigned* const entry = dir + i0 + detail::lowest_bit(empty);
                if (reclaim_slab(h, state, k, entry, detail::load_published(entry))) freed = true;
            }
        }
        if (!freed) return false;
        // Current slabs that went back: none (0), so callers draw from the directory.
        const unsigned* m = reinterpret_cast<const unsigned*>(h->slab_meta);
        const unsigned active = detail::load_word(state + kHeapStateLineWords);
        const unsigned cursors = active == 0 ? 1u : (active < kHeapCursors ? active : kHeapCursors);
        const unsigned live = (kHeapTagSlab << kHeapTagShift) | c;
        for (unsigned i0 = 0; i0 < cursors; i0 += kHeapReclaimBatch) {
            unsigned cur[kHeapReclaimBatch], rec[kHeapReclaimBatch];
#pragma unroll
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                cur[j] = i0 + j < cursors ? detail::load_published(cursor_word(state, i0 + j)) : 0u;
#pragma unroll
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                rec[j] = cur[j] != 0 ? detail::load_word(m + cur[j] - 1) : live;
#pragma unroll
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                if (rec[j] != live) atomicCAS(cursor_word(state, i0 + j), cur[j], 0u);
        }
        return true;
    }

    /// Returns one slab to the page pool if every slot is free: its words are
    /// locked (CAS empty -> all ones; undone on the first word that changed),
    /// its records cleared, its entry made a tombstone, and after a fence its
    /// pages released.  True when it went back.
    static __device__ bool reclaim_slab(const heap_view* h, unsigned* state, const heap_class& k, unsigned* entry,
                                        unsigned slab) {
        if (slab >= kHeapTombstone) return false;
        unsigned long long* const w = slot_words_of(h, slab);
        const unsigned nwords = detail::heap_slab_words(k);
        for (unsigned i0 = 0; i0 < nwords; i0 += kHeapReclaimBatch) {
            unsigned long long x[kHeapReclaimBatch];
#pragma unroll
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                x[j] = i0 + j < nwords ? detail::load_word(w + i0 + j) : 0ull;
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                if (i0 + j < nwords && x[j] != empty_word(k, i0 + j)) return false;
        }
        for (unsigned i0 = 0; i0 < nwords; i0 += kHeapReclaimBatch) {
            unsigned long long was[kHeapReclaimBatch];
#pragma unroll
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                was[j] = i0 + j < nwords ? atomicCAS(w + i0 + j, empty_word(k, i0 + j), ~0ull) : 0ull;
            bool lost = false;
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                lost = lost || (i0 + j < nwords && was[j] != empty_word(k, i0 + j));
            if (!lost) continue;
            // A slot was claimed meanwhile: the words this call locked are empty again.
            for (unsigned j = 0; j < kHeapReclaimBatch; ++j)
                if (i0 + j < nwords && was[j] == empty_word(k, i0 + j)) atomicExch(w + i0 + j, was[j]);
            for (unsigned i = 0; i < i0; ++i) atomicExch(w + i, empty_word(k, i));
            return false;
        }
        volatile unsigned* const m = reinterpret_cast<volatile unsigned*>(h->slab_meta) + slab;
        for (unsigned i = 0; i < k.slab_pages; ++i) m[i] = 0u;
        const unsigned idx = unsigned(entry - (reinterpret_cast<unsigned*>(h->directory) + k.dir_offset));
        atomicExch(entry, kHeapTombstone);
        atomicAdd(state + kHeapStateHoles, 1u);
        atomicMin(state + kHeapStateHoleHint, idx);
        // The records are cleared before the pages can be claimed again.
        __threadfence();
        release_pages(reinterpret_cast<unsigned long long*>(h->page_bitmap), slab, k.slab_pages);
        return true;
    }

    /// @}

    /// @name medium and huge: runs of pages (thread-level)
    /// @{

    /// Medium: RW_malloc's random region search (a one-lane call); huge: the
    /// word scan of detail::heap_page_run (whole bitmap words).
    __device__ void* run_malloc(unsigned long long bytes) const {
        const unsigned long long pages = (bytes + page_size() - 1) >> v_.page_shift;
        if (pages <= static_cast<unsigned long long>(kRwRegionWords) * 64) {
            detail::counter_rng rng = detail::heap_rng();
            rw_malloc_storage st; // a one-lane RW_malloc: local scratch
            // Whole pages, so rw_heap records a run (not a shared small run).
            // Its failure count is ours, so it must not count: the caller does.
            void* p =
                run_ref(kHeapCounterAttachScratch).malloc(1u << detail::lane_index(), pages << v_.page_shift, st, rng);
            if (p != nullptr) return p;
            // RW_malloc's random regions and its sweep can all lose races (the lanes of a
            // burst plan the same first fit): before a null says "full", every mapped
            // word is scanned once more (same run records).
        }
        const heap_view* h = detail::heap_descriptor(v_.counters);
        void* p = nullptr;
#pragma unroll 1
        for (unsigned again = 0; p == nullptr && again < 2; ++again) {
            p = detail::heap_page_run(h, bytes);
            if (p == nullptr && (again != 0 || !reclaim(h))) break; // empty slabs back, then once more
        }
        return p;
    }

    __device__ bool huge_free(unsigned page) const {
        unsigned* m = slab_meta() + page;
        const unsigned rec = detail::load_word(m);
        if ((rec >> kHeapTagShift) != kHeapTagHuge || atomicCAS(m, rec, 0u) != rec) return bad_free();
        __threadfence(); // the record is cleared before the pages can be claimed again
        const unsigned words = rec & kHeapLowMask;
        for (unsigned j = 0; j < words; ++j) atomicExch(page_words() + page / 64 + j, 0ull);
        return true;
    }
    /// @}
};

} // namespace v0
} // namespace gpudyn
