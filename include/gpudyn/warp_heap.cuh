/// @file
/// Warp heap (FDGMalloc: Widmer, Wodniok, Weber, Goesele, "Fast Dynamic Memory
/// Allocator for Massively Parallel Architectures", GPGPU-6, 2013), device side.
///
/// A warp's lanes share one WarpHeader.  One voted worker lane (the highest
/// lane of the calling mask, as in the paper) does the work of all: it takes
/// memory from the backing allocator (an arena of slots owned by the heap, the
/// default; CUDA device malloc, as in the paper; or a gpudyn random-walk page
/// heap), keeps every block it
/// took in a fixed-capacity SuperBlock list that chains to a new list when full,
/// and bumps a pointer inside the current superblock.  The lanes' requests are
/// packed by a warp prefix sum, so a warp's allocations are contiguous.  There
/// is no per-block free: memory goes back in bulk with tidy_up(), end(), or
/// after keep() in a later kernel.
///
/// @code{.cpp}
/// __global__ void k(gpudyn_warp_heap_view_t view) {
///     gpudyn::warp_heap_ref heap{view};
///     gpudyn::warp_heap wh = heap.start(__activemask());   // lanes that will allocate
///     while (...) {
///         void* p = wh.alloc(bytes);      // every lane that started calls (0 bytes: NULL)
///         ...
///         wh.tidy_up();                   // same lanes; frees all but the header
///     }
///     wh.end();                           // each started lane once, in any order
/// }
/// @endcode
///
/// Contract (the paper's Listing 2 misuse, made explicit for independent thread
/// scheduling): alloc/tidy_up/keep are warp collectives over a mask that must
/// be exactly the set of calling lanes and a subset of the lanes that started;
/// no two collectives on one header run at the same time (diverged groups of a
/// warp take turns); every started lane calls end() (or keep()) exactly once.
/// Always checked: a calling lane without a header makes the call return NULL
/// for the whole mask and counts as misuse.  With GPUDYN_WARP_HEAP_DEBUG
/// defined to 1 before inclusion, lanes outside the started set, concurrent
/// collectives on one header, and end() by a lane that did not start are
/// detected too (counted in stats.misuse; the call fails instead of corrupting).
///
/// Out of memory: the lanes that could not be served get NULL (counted in
/// stats.failed_allocations); everything handed out before stays valid.
#pragma once

#if defined(__CUDACC_RTC__)
#include <cuda/std/cstdint>
#include <cuda/std/cstddef>
#endif
#include "gpudyn/warp_heap.h"
#include "gpudyn/detail/warp.cuh"
#include "gpudyn/detail/random.cuh"
#include "gpudyn/rw_heap.cuh"

#ifndef GPUDYN_WARP_HEAP_DEBUG
#define GPUDYN_WARP_HEAP_DEBUG 0
#endif

namespace gpudyn {
inline namespace v0 {

namespace warp_heap_detail {

/// Alignment of every block handed out: CUDA device malloc returns 16-byte
/// aligned memory (CUDA programming guide, "Dynamic Global Memory Allocation"),
/// and superblock offsets are multiples of min_block_bytes (>= 16).
constexpr unsigned kAlignment = GPUDYN_WARP_HEAP_ALIGNMENT;
/// Largest superblock (see warp_heap.h): the packing scan runs on 32-bit sums.
constexpr unsigned kMaxSuperblockBytes = GPUDYN_WARP_HEAP_MAX_SUPERBLOCK_BYTES;
/// Largest single request (2^40 B = 1 TiB, beyond any GPU): keeps rounding and
/// the 64-bit scan of large requests free of overflow.
constexpr unsigned long long kMaxRequestBytes = 1ull << 40;
/// Arena bitmap: 32 slots per uint32 word; a run of slots never crosses a word,
/// so one atomicOr claims it and one atomicAnd gives it back.
constexpr unsigned kArenaWordBits = 32;
constexpr unsigned kArenaNoSlot = 0xffffffffu;
/// Attempts on one word while it still shows a free run.  A failed attempt means
/// another warp changed the word meanwhile (a claim, or a claim being rolled
/// back); the next attempt sees the change.  Few attempts made warps that start
/// together fail spuriously with slots still free (4 warps of one block racing
/// for one word of header slots), so the bound only guards against livelock.
constexpr unsigned kArenaWordAttempts = 64;

struct entry {
    void* ptr;
    unsigned long long bytes;
};

/// One SuperBlock list: `capacity` entries follow this struct.
struct alignas(16) list {
    list* prev; ///< older list, or nullptr for the list embedded in the header block
    unsigned count;
    unsigned capacity;
    __device__ entry* entries() { return reinterpret_cast<entry*>(this + 1); }
};

/// The WarpHeader (paper, Fig. 1).  One backing allocation holds the header,
/// the first SuperBlock list and the first superblock, so start() costs one
/// backing call.
struct alignas(16) header {
    char* sb_base;                  ///< current superblock (nullptr without superblocks)
    list* lists;                    ///< newest SuperBlock list
    char* spare;                    ///< next unused superblock of the current run (arena)
    unsigned spare_count;           ///< unused superblocks left in that run
    unsigned next_run;              ///< superblocks the next run asks for (doubles, see warp_heap.h)
    unsigned sb_offset;             ///< bump pointer inside the current superblock
    unsigned superblocks;           ///< SB counter: superblocks this warp holds
    unsigned total_count;           ///< TotalCount: lanes that started
    unsigned active_count;          ///< ActiveCount: lanes that have not ended
    unsigned members;               ///< lane mask of the lanes that started
    unsigned busy;                  ///< debug: a collective is running on this header
    unsigned long long block_bytes; ///< bytes of the header block
    unsigned long long reserved;    ///< backing bytes held beyond the header block
    unsigned long long requested;   ///< bytes handed out since the last tidy_up
    unsigned long long flushed;     ///< part of `requested` already in the statistics
    unsigned large_blocks;          ///< live large blocks
    unsigned pad_;
};

__host__ __device__ constexpr unsigned long long round_up(unsigned long long x, unsigned long long to) {
    return (x + to - 1) / to * to;
}
__host__ __device__ constexpr unsigned long long list_bytes(unsigned capacity) {
    return sizeof(list) + (unsigned long long)capacity * sizeof(entry);
}
__host__ __device__ constexpr unsigned long long first_list_offset() { return round_up(sizeof(header), kAlignment); }
__host__ __device__ constexpr unsigned long long first_sb_offset(unsigned capacity) {
    return round_up(first_list_offset() + list_bytes(capacity), kAlignment);
}

/// Statistic fields, in the order of gpudyn_warp_heap_stats_t (all uint64_t).
enum stat_field {
    kHeaders,
    kSuperblocks,
    kLargeBlocks,
    kReserved,
    kRequested,
    kBackingCalls,
    kFailed,
    kMisuse
};
static_assert(sizeof(gpudyn_warp_heap_stats_t) == 8 * sizeof(unsigned long long), "stats layout");

__device__ __forceinline__ void count(void* stats, stat_field field, long long delta) {
    if (stats == nullptr || delta == 0) return;
    atomicAdd(static_cast<unsigned long long*>(stats) + field, (unsigned long long)delta);
}

} // namespace warp_heap_detail

class warp_heap;

/// Kernel-side wrapper of gpudyn_warp_heap_view_t (trivially copyable).
class warp_heap_ref {
public:
    gpudyn_warp_heap_view_t view;

    /// A view of another layout version makes every start() fail (invalid handle).
    __host__ __device__ bool valid() const {
        return view.version == GPUDYN_WARP_HEAP_VIEW_VERSION && view.min_block_bytes >= warp_heap_detail::kAlignment &&
               view.list_capacity > 0 && view.superblock_bytes <= warp_heap_detail::kMaxSuperblockBytes &&
               (view.backing != GPUDYN_WARP_HEAP_BACKING_ARENA ||
                (view.arena_header_bytes >=
                     warp_heap_detail::first_sb_offset(view.list_capacity) + view.superblock_bytes &&
                 view.arena_chunk_bytes >= warp_heap_detail::kAlignment)) &&
               (view.backing != GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP || view.page_heap != nullptr);
    }

    /// @name backing allocators (single thread: the worker lane)
    /// @{

    /// `header_slot`: the block is a warp's header block (the arena keeps those
    /// in their own slots).  Returns NULL when the backing has no memory left.
    __device__ void* backing_allocate(unsigned long long bytes, bool header_slot = false) const {
        void* p = nullptr;
        if (view.backing == GPUDYN_WARP_HEAP_BACKING_ARENA) p = arena_allocate(bytes, header_slot);
        else if (view.backing == GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP) p = page_heap_allocate(bytes);
        else if (view.backing == GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC) p = malloc(size_t(bytes));
        warp_heap_detail::count(view.stats, warp_heap_detail::kBackingCalls, 1);
        if (p != nullptr) warp_heap_detail::count(view.stats, warp_heap_detail::kReserved, (long long)bytes);
        return p;
    }
    __device__ void backing_free(void* p, unsigned long long bytes) const {
        if (p == nullptr) return;
        if (view.backing == GPUDYN_WARP_HEAP_BACKING_ARENA) arena_free(p, bytes);
        else if (view.backing == GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP) page_heap_free(p, bytes);
        else if (view.backing == GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC) free(p);
        warp_heap_detail::count(view.stats, warp_heap_detail::kReserved, -(long long)bytes);
    }

    /// Arena: header slots [0, arena_header_slots) at arena_base, chunk slots
    /// after them; bitmap words in the same order.
    __device__ char* arena_chunks() const {
        return static_cast<char*>(view.arena_base) +
               (unsigned long long)view.arena_header_slots * view.arena_header_bytes;
    }
    __device__ unsigned arena_header_words() const {
        return (view.arena_header_slots + warp_heap_detail::kArenaWordBits - 1) / warp_heap_detail::kArenaWordBits;
    }
    __device__ unsigned arena_chunk_words() const {
        return (view.arena_chunk_slots + warp_heap_detail::kArenaWordBits - 1) / warp_heap_detail::kArenaWordBits;
    }
    /// Chunk slots a block of `bytes` takes, or 0 when it is past one word's run.
    __device__ unsigned arena_run_length(unsigned long long bytes) const {
        const unsigned long long n = (bytes + view.arena_chunk_bytes - 1) / view.arena_chunk_bytes;
        return n <= warp_heap_detail::kArenaWordBits ? unsigned(n) : 0u;
    }
    /// Claims a run of n (1..32) clear bits inside one word of words[0, count),
    /// starting at slot `hint` (the first attempt goes straight to an atomicOr
    /// there, which also reads the word); one sweep over every word at most.
    __device__ static unsigned arena_claim(unsigned* words, unsigned count, unsigned n, unsigned hint) {
        using namespace warp_heap_detail;
        if (count == 0) return kArenaNoSlot;
        const unsigned run = n >= kArenaWordBits ? 0xffffffffu : (1u << n) - 1u;
        unsigned w = (hint / kArenaWordBits) % count;
        const unsigned spread = hint % kArenaWordBits; // this caller's preferred position
        unsigned pos = spread;
        if (pos + n > kArenaWordBits) pos = 0;
        unsigned used = 0; // first word: guess it free at `pos`
        for (unsigned i = 0; i < count; ++i) {
            for (unsigned attempt = 0; attempt < kArenaWordAttempts; ++attempt) {
                if (i != 0 || attempt != 0) {
                    // Starts of runs of n clear bits (bit j: bits j..j+n-1 clear).
                    unsigned starts = ~used;
                    for (unsigned k = 1; k < n && starts != 0; ++k) starts &= ~used >> k;
                    if (starts == 0) break;
                    // The first candidate at or after `spread`: racing callers
                    // pick different runs instead of all taking the lowest.
                    const unsigned after = starts & (0xffffffffu << spread);
                    pos = unsigned(__ffs(int(after != 0 ? after : starts))) - 1u;
                }
                const unsigned want = run << pos;
                const unsigned old = atomicOr(words + w, want);
                if ((old & want) == 0) return w * kArenaWordBits + pos;
                const unsigned mine = want & ~old; // bits this attempt set: give them back
                if (mine != 0) atomicAnd(words + w, ~mine);
                used = old;
            }
            w = w + 1 == count ? 0 : w + 1;
            used = *static_cast<volatile unsigned*>(words + w);
        }
        return kArenaNoSlot;
    }
    __device__ void* arena_allocate(unsigned long long bytes, bool header_slot) const {
        using namespace warp_heap_detail;
        unsigned* bits = static_cast<unsigned*>(view.arena_bitmap);
        // Search start: a hash of the caller's place and time spreads warps over
        // the words so that they rarely meet on one.
        const unsigned long long where =
            (unsigned long long)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)) * 1024u +
            (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
        const unsigned hint = unsigned(detail::mix64(where ^ ((unsigned long long)clock64() << 32)));
        if (header_slot && bytes <= view.arena_header_bytes) {
            const unsigned slot =
                arena_claim(bits, arena_header_words(), 1, hint % (arena_header_words() * kArenaWordBits));
            if (slot == kArenaNoSlot) return nullptr;
            return static_cast<char*>(view.arena_base) + (unsigned long long)slot * view.arena_header_bytes;
        }
        const unsigned n = arena_run_length(bytes);
        if (n == 0) return malloc(size_t(bytes)); // past a run of 32 slots: CUDA device malloc
        const unsigned slot = arena_claim(bits + arena_header_words(), arena_chunk_words(), n,
                                          hint % (arena_chunk_words() * kArenaWordBits));
        if (slot == kArenaNoSlot) return nullptr;
        return arena_chunks() + (unsigned long long)slot * view.arena_chunk_bytes;
    }
    __device__ void arena_free(void* p, unsigned long long bytes) const {
        using namespace warp_heap_detail;
        unsigned* bits = static_cast<unsigned*>(view.arena_bitmap);
        char* c = static_cast<char*>(p);
        char* base = static_cast<char*>(view.arena_base);
        char* chunks = arena_chunks();
        unsigned slot, n;
        if (c >= base && c < chunks) {
            slot = unsigned((unsigned long long)(c - base) / view.arena_header_bytes);
            n = 1;
        } else if (c >= chunks && c < chunks + (unsigned long long)view.arena_chunk_slots * view.arena_chunk_bytes) {
            slot = unsigned((unsigned long long)(c - chunks) / view.arena_chunk_bytes);
            n = arena_run_length(bytes);
            bits += arena_header_words();
        } else {
            free(p); // served by the CUDA malloc fallback
            return;
        }
        const unsigned run = n >= kArenaWordBits ? 0xffffffffu : (1u << n) - 1u;
        atomicAnd(bits + slot / kArenaWordBits, ~(run << (slot % kArenaWordBits)));
    }

    /// Page heap: a block of at most one page is one page (RW-BM, any thread),
    /// a larger one a run of pages from RW_malloc with this lane alone as the
    /// warp (its scratch then lives in this thread's local memory, as rw_heap.cuh
    /// allows for a single-lane mask).
    __device__ rw_heap_ref page_heap() const { return rw_heap_ref(*static_cast<const rw_heap_view*>(view.page_heap)); }
    /// Out of line: RW_malloc's registers and scratch stay out of the callers' hot path.
    __device__ __noinline__ void* page_heap_allocate(unsigned long long bytes) const {
        const rw_heap_ref rw = page_heap();
        detail::counter_rng rng((unsigned long long)clock64(),
                                (unsigned long long)(blockIdx.x + gridDim.x * blockIdx.y) * 1024u + threadIdx.x);
        if (bytes <= rw.page_size()) {
            const unsigned page = rw.get_page<rw_algorithm::rw_bm>(rng);
            return page == kRwInvalidPage ? nullptr : rw.page_address(page);
        }
        rw_malloc_storage scratch;
        return rw.malloc(1u << detail::lane_index(), bytes, scratch, rng);
    }
    __device__ __noinline__ void page_heap_free(void* p, unsigned long long bytes) const {
        const rw_heap_ref rw = page_heap();
        if (bytes <= rw.page_size()) rw.free_page(rw.page_of(p));
        else rw.free(p);
    }

    /// Collective over `mask` (all its lanes call, with the same mask): the lanes
    /// whose `wants` is true vote, the worker (highest voter) allocates the
    /// header block, and every voter gets a handle on it.  Lanes that do not
    /// want one, and every lane when memory is exhausted, get an invalid handle.
    __device__ inline warp_heap start(unsigned mask, bool wants = true) const;

    /// Collective over `mask`: lanes of a later kernel take over a header that
    /// an earlier kernel kept (warp_heap::keep()); they must end() it eventually.
    __device__ inline warp_heap resume(unsigned mask, void* kept) const;

    /// Single thread: frees a kept header and everything it holds, as end() by
    /// its last lane would (used by the host's release and free_kept).
    __device__ inline void destroy_kept(void* kept) const;

    /// Single thread: frees everything a kept header holds but the header block
    /// (its first superblock becomes current again), as tidy_up() by its warp
    /// would; the header stays kept, for resume() in a later kernel (used by the
    /// host's tidy_up_kept).  No warp may be using the header meanwhile.
    __device__ inline void tidy_up_kept(void* kept) const;

    /// Single thread: can `p` be a header block of this heap?  ARENA: the start
    /// of a header slot that is taken; PAGE_HEAP: the start of a page of its
    /// pool.  CUDA_MALLOC cannot tell (always true).  Lets the host's bulk calls
    /// skip a foreign pointer instead of freeing memory it does not own.
    __device__ inline bool may_be_header(const void* p) const;

    /// Single thread, worker only: frees every registered block and chained list
    /// of `h`; the embedded list becomes empty and the first superblock current.
    __device__ inline void free_blocks(warp_heap_detail::header* h) const;
    /// Worker only: registers a block in the SuperBlock list (chaining a new list
    /// when full); false when the new list cannot be allocated.
    __device__ inline bool register_block(warp_heap_detail::header* h, void* p, unsigned long long bytes) const;
    /// Worker only: the next superblock of h (from its current run, or a new run
    /// registered in the list); NULL when the backing has no memory left.
    __device__ inline char* next_superblock(warp_heap_detail::header* h) const;
    /// @}
};

/// A lane's handle on its warp's header (per thread, in registers).
class warp_heap {
public:
    __device__ warp_heap() : ref_{}, h_(nullptr), members_(0) {}
    __device__ warp_heap(const warp_heap_ref& ref, warp_heap_detail::header* h, unsigned members)
        : ref_(ref), h_(h), members_(members) {}

    __device__ bool valid() const { return h_ != nullptr; }
    /// Lanes that started (the default mask of the collectives).
    __device__ unsigned members() const { return members_; }
    /// The header pointer (what keep() returns).
    __device__ void* header_pointer() const { return h_; }

    /// Collective over members(): see alloc(mask, bytes).
    __device__ void* alloc(unsigned long long bytes) { return alloc(members_, bytes); }

    /// Collective over `mask` (exactly the calling lanes, a subset of members()).
    /// Returns a block of at least `bytes` bytes, 16-byte aligned (NULL for 0
    /// bytes or when memory is exhausted).  Requests up to a superblock are packed
    /// into superblocks; larger ones share one backing block per call, so callers
    /// need not know which path served them.
    __device__ inline void* alloc(unsigned mask, unsigned long long bytes);

    /// Collective over `mask` (default members()): frees everything but the
    /// header; the first superblock becomes current again.  Pointers handed out
    /// before are invalid afterwards.
    __device__ void tidy_up() { tidy_up(members_); }
    __device__ inline void tidy_up(unsigned mask);

    /// Each started lane once, in any order, converged or not: the lane that
    /// brings ActiveCount to zero frees everything including the header (it
    /// returns true).  The handle is invalid afterwards.
    __device__ inline bool end();

    /// Each started lane once, in any order: keeps the header and its memory for
    /// a later kernel (warp_heap_ref::resume, then end, or the host's free_kept).
    /// Returns the header pointer on every lane; the handle is invalid afterwards.
    __device__ inline void* keep();

private:
    __device__ inline bool enter(unsigned mask);
    __device__ inline void leave(unsigned mask);
    __device__ inline void flush_requested(bool drop);

    warp_heap_ref ref_;
    warp_heap_detail::header* h_;
    unsigned members_;
};

// ---- implementation ---------------------------------------------------------

__device__ inline warp_heap warp_heap_ref::start(unsigned mask, bool wants) const {
    mask = detail::member_mask(mask);
    using namespace warp_heap_detail;
    const unsigned voters = detail::ballot(mask, wants);
    if (voters == 0) return warp_heap();
    const unsigned worker = detail::highest_lane(voters);
    header* h = nullptr;
    if (detail::lane_index() == worker && valid()) {
        const unsigned long long sb = view.superblock_bytes;
        const unsigned long long bytes = first_sb_offset(view.list_capacity) + sb;
        char* block = static_cast<char*>(backing_allocate(bytes, true));
        if (block != nullptr) {
            h = reinterpret_cast<header*>(block);
            list* first = reinterpret_cast<list*>(block + first_list_offset());
            first->prev = nullptr;
            first->count = 0;
            first->capacity = view.list_capacity;
            h->sb_base = sb != 0 ? block + first_sb_offset(view.list_capacity) : nullptr;
            h->lists = first;
            h->spare = nullptr;
            h->spare_count = 0;
            h->next_run = 1;
            h->sb_offset = 0;
            h->superblocks = sb != 0 ? 1u : 0u;
            h->total_count = unsigned(__popc(voters));
            h->active_count = h->total_count;
            h->members = voters;
            h->busy = 0;
            h->block_bytes = bytes;
            h->reserved = 0;
            h->requested = 0;
            h->flushed = 0;
            h->large_blocks = 0;
            count(view.stats, kHeaders, 1);
            if (sb != 0) count(view.stats, kSuperblocks, 1);
        } else {
            count(view.stats, kFailed, __popc(voters));
        }
    }
    // Every lane of the mask takes part in the broadcast; only voters keep it.
    h = detail::broadcast_pointer(mask, h, worker);
    if (h == nullptr || !wants) return warp_heap();
    return warp_heap(*this, h, voters);
}

__device__ inline warp_heap warp_heap_ref::resume(unsigned mask, void* kept) const {
    mask = detail::member_mask(mask);
    using namespace warp_heap_detail;
    header* h = static_cast<header*>(kept);
    const unsigned have = detail::ballot(mask, h != nullptr);
    if (have != mask) {
        if (have != 0 && detail::lane_index() == detail::highest_lane(mask)) count(view.stats, kMisuse, 1);
        return warp_heap();
    }
    if (detail::lane_index() == detail::highest_lane(mask)) {
        h->total_count = unsigned(__popc(mask));
        h->active_count = h->total_count;
        h->members = mask;
        h->busy = 0;
    }
    __syncwarp(mask);
    return warp_heap(*this, h, mask);
}

__device__ inline bool warp_heap_ref::register_block(warp_heap_detail::header* h, void* p,
                                                     unsigned long long bytes) const {
    using namespace warp_heap_detail;
    list* l = h->lists;
    if (l->count == l->capacity) {
        // Full list: chain a new one (the paper registers the old list in the new).
        list* fresh = static_cast<list*>(backing_allocate(list_bytes(view.list_capacity)));
        if (fresh == nullptr) return false;
        fresh->prev = l;
        fresh->count = 0;
        fresh->capacity = view.list_capacity;
        h->lists = fresh;
        h->reserved += list_bytes(view.list_capacity);
        l = fresh;
    }
    l->entries()[l->count] = entry{p, bytes};
    l->count += 1;
    h->reserved += bytes;
    return true;
}

__device__ inline char* warp_heap_ref::next_superblock(warp_heap_detail::header* h) const {
    const unsigned long long sb = view.superblock_bytes;
    if (h->spare_count != 0) {
        char* p = h->spare;
        h->spare = p + sb;
        h->spare_count -= 1;
        return p;
    }
    // A run of `want` superblocks in one backing block (1 unless the arena
    // allows runs); when the run cannot be had, a single superblock.
    unsigned want = 1;
    if (view.backing == GPUDYN_WARP_HEAP_BACKING_ARENA) {
        want = h->next_run < view.max_superblock_run ? h->next_run : view.max_superblock_run;
        if (want == 0) want = 1;
    }
    for (;;) {
        char* run = static_cast<char*>(backing_allocate(sb * want));
        if (run != nullptr && !register_block(h, run, sb * want)) {
            backing_free(run, sb * want);
            return nullptr;
        }
        if (run != nullptr) {
            h->spare = run + sb;
            h->spare_count = want - 1;
            h->next_run = want * 2;
            return run;
        }
        if (want == 1) return nullptr;
        want = 1;
    }
}

__device__ inline void warp_heap_ref::free_blocks(warp_heap_detail::header* h) const {
    using namespace warp_heap_detail;
    // The lanes' writes to the blocks (ordered before this lane by the caller's
    // __syncwarp or ActiveCount atomics) happen before another warp reuses them.
    if (view.backing != GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC) __threadfence();
    list* l = h->lists;
    while (l != nullptr) {
        entry* e = l->entries();
        for (unsigned i = 0; i < l->count; ++i) backing_free(e[i].ptr, e[i].bytes);
        list* prev = l->prev;
        if (prev != nullptr) backing_free(l, list_bytes(l->capacity)); // chained, not embedded
        else l->count = 0;
        if (prev == nullptr) h->lists = l;
        l = prev;
    }
    // Registered superblocks go; the first one (in the header block) stays.
    if (h->superblocks > 1) count(view.stats, kSuperblocks, -(long long)(h->superblocks - 1));
    count(view.stats, kLargeBlocks, -(long long)h->large_blocks);
    h->superblocks = view.superblock_bytes != 0 ? 1u : 0u;
    h->large_blocks = 0;
    h->reserved = 0;
    h->spare = nullptr;
    h->spare_count = 0;
    h->next_run = 1;
    h->sb_base =
        view.superblock_bytes != 0 ? reinterpret_cast<char*>(h) + first_sb_offset(view.list_capacity) : nullptr;
    h->sb_offset = 0;
}

__device__ inline void warp_heap_ref::destroy_kept(void* kept) const {
    using namespace warp_heap_detail;
    header* h = static_cast<header*>(kept);
    if (h == nullptr) return;
    free_blocks(h);
    if (h->flushed != 0) count(view.stats, kRequested, -(long long)h->flushed);
    if (view.superblock_bytes != 0) count(view.stats, kSuperblocks, -1);
    count(view.stats, kHeaders, -1);
    backing_free(h, h->block_bytes);
}

__device__ inline void warp_heap_ref::tidy_up_kept(void* kept) const {
    using namespace warp_heap_detail;
    header* h = static_cast<header*>(kept);
    if (h == nullptr) return;
    // keep() folded everything requested into the statistics (flushed); it goes.
    if (h->flushed != 0) count(view.stats, kRequested, -(long long)h->flushed);
    h->requested = h->flushed = 0;
    free_blocks(h);
}

__device__ inline bool warp_heap_ref::may_be_header(const void* p) const {
    using namespace warp_heap_detail;
    const char* c = static_cast<const char*>(p);
    if (view.backing == GPUDYN_WARP_HEAP_BACKING_ARENA) {
        const char* base = static_cast<const char*>(view.arena_base);
        if (c < base || view.arena_header_bytes == 0) return false;
        const unsigned long long off = (unsigned long long)(c - base);
        const unsigned long long slot = off / view.arena_header_bytes;
        if (slot >= view.arena_header_slots || off % view.arena_header_bytes != 0) return false;
        const unsigned word =
            *static_cast<volatile unsigned*>(static_cast<unsigned*>(view.arena_bitmap) + slot / kArenaWordBits);
        return (word >> (slot % kArenaWordBits) & 1u) != 0; // a free slot holds no header
    }
    if (view.backing == GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP) {
        const rw_heap_ref rw = page_heap();
        const unsigned page = rw.page_of(p);
        return page != kRwInvalidPage && rw.page_address(page) == p;
    }
    return true;
}

__device__ inline bool warp_heap::enter(unsigned mask) {
    mask = detail::member_mask(mask);
    // A lane outside its own mask (an invalid warp_heap has no members) must not
    // take part in a warp collective on that mask: it fails alone.
    if ((mask >> detail::lane_index() & 1u) == 0) {
        if (h_ != nullptr) warp_heap_detail::count(ref_.view.stats, warp_heap_detail::kMisuse, 1);
        return false;
    }
    // Every lane of the mask must hold a header (Listing 2: a lane that never
    // started would dereference NULL in the paper's code).
    const unsigned have = detail::ballot(mask, h_ != nullptr);
    bool ok = have == mask;
#if GPUDYN_WARP_HEAP_DEBUG
    if (ok) {
        warp_heap_detail::header* h = h_;
        const bool worker = detail::lane_index() == detail::highest_lane(mask);
        unsigned verdict = 1;
        if (worker) {
            // Lanes outside the started set, or two collectives at once on a header.
            verdict = (mask & ~h->members) == 0 && atomicExch(&h->busy, 1u) == 0u;
        }
        ok = __shfl_sync(mask, verdict, int(detail::highest_lane(mask))) != 0;
        if (!ok && worker) warp_heap_detail::count(ref_.view.stats, warp_heap_detail::kMisuse, 1);
        return ok;
    }
#endif
    // Reported once, by the highest lane that has a header (and so a view).
    if (!ok && have != 0 && detail::lane_index() == detail::highest_lane(have))
        warp_heap_detail::count(ref_.view.stats, warp_heap_detail::kMisuse, 1);
    return ok;
}

__device__ inline void warp_heap::leave(unsigned mask) {
    mask = detail::member_mask(mask);
#if GPUDYN_WARP_HEAP_DEBUG
    if (detail::lane_index() == detail::highest_lane(mask)) atomicExch(&h_->busy, 0u);
#endif
    __syncwarp(mask);
}

__device__ inline void* warp_heap::alloc(unsigned mask, unsigned long long bytes) {
    mask = detail::member_mask(mask);
    using namespace warp_heap_detail;
    if (!enter(mask)) return nullptr;
    header* const h = h_;
    const gpudyn_warp_heap_view_t& v = ref_.view;
    const unsigned lane = detail::lane_index();
    const unsigned worker = detail::highest_lane(mask);
    const bool is_worker = lane == worker;

    const bool too_big = bytes > kMaxRequestBytes;
    const unsigned long long rounded = too_big ? 0ull : round_up(bytes, v.min_block_bytes);
    const bool large = rounded > v.superblock_bytes; // every request without superblocks
    const unsigned small = large ? 0u : unsigned(rounded);
    char* result = nullptr;
    unsigned long long handed_out = 0; // worker: bytes (rounded) served by this call

    // Phase 1: small requests, packed in lane order into superblocks.
    unsigned pending = detail::ballot(mask, small != 0);
    if (pending != 0) {
        const unsigned incl = detail::masked_inclusive_sum(mask, small);
        const unsigned excl = incl - small;
        char* cursor = nullptr; // where the first pending lane's block goes
        unsigned room = 0;      // bytes left in the superblock from cursor
        unsigned origin = 0;    // exclusive prefix of the first pending lane
        if (is_worker) {
            cursor = h->sb_base != nullptr ? h->sb_base + h->sb_offset : nullptr;
            room = h->sb_base != nullptr ? v.superblock_bytes - h->sb_offset : 0u;
        }
        cursor = detail::broadcast_pointer(mask, cursor, worker);
        room = __shfl_sync(mask, room, int(worker));
        for (;;) {
            const bool mine = (pending >> lane & 1u) && excl - origin + small <= room;
            if (mine) result = cursor + (excl - origin);
            const unsigned served = detail::ballot(mask, mine);
            pending &= ~served;
            // End of the last served lane's block, relative to the cursor.
            const unsigned used =
                served != 0 ? __shfl_sync(mask, incl, int(detail::highest_lane(served))) - origin : 0u;
            if (is_worker) {
                h->sb_offset += used;
                handed_out += used;
            }
            if (pending == 0) break;
            // Some lanes did not fit: the worker takes a new superblock.
            origin = __shfl_sync(mask, excl, int(__ffs(pending) - 1));
            char* fresh = nullptr;
            if (is_worker) {
                fresh = ref_.next_superblock(h);
                if (fresh != nullptr) {
                    h->sb_base = fresh;
                    h->sb_offset = 0;
                    h->superblocks += 1;
                    count(v.stats, kSuperblocks, 1);
                } else {
                    count(v.stats, kFailed, __popc(pending));
                }
            }
            cursor = detail::broadcast_pointer(mask, fresh, worker);
            if (cursor == nullptr) break; // out of memory: pending lanes get NULL
            room = v.superblock_bytes;
        }
    }

    // Phase 2: requests larger than a superblock (all of them without
    // superblocks) share one backing block, registered in the list.
    const unsigned big = detail::ballot(mask, large);
    if (big != 0) {
        const unsigned long long want = large ? rounded : 0ull;
        const unsigned long long incl = detail::masked_inclusive_sum(mask, want);
        const unsigned long long total = __shfl_sync(mask, incl, int(detail::highest_lane(big)));
        char* block = nullptr;
        if (is_worker) {
            block = static_cast<char*>(ref_.backing_allocate(total));
            if (block != nullptr && !ref_.register_block(h, block, total)) {
                ref_.backing_free(block, total);
                block = nullptr;
            }
            if (block != nullptr) {
                handed_out += total;
                h->large_blocks += 1;
                count(v.stats, kLargeBlocks, 1);
            } else {
                count(v.stats, kFailed, __popc(big));
            }
        }
        block = detail::broadcast_pointer(mask, block, worker);
        if (large && block != nullptr) result = block + (incl - want);
    }
    if (too_big) count(v.stats, kFailed, 1);   // beyond kMaxRequestBytes: no backing can serve it
    if (is_worker) h->requested += handed_out; // to the statistics at tidy_up/end/keep
    leave(mask);
    return result;
}

__device__ inline void warp_heap::flush_requested(bool drop) {
    using namespace warp_heap_detail;
    header* h = h_;
    if (h->requested != h->flushed) count(ref_.view.stats, kRequested, (long long)(h->requested - h->flushed));
    h->flushed = h->requested;
    if (drop) {
        if (h->flushed != 0) count(ref_.view.stats, kRequested, -(long long)h->flushed);
        h->requested = h->flushed = 0;
    }
}

__device__ inline void warp_heap::tidy_up(unsigned mask) {
    mask = detail::member_mask(mask);
    if (!enter(mask)) return;
    if (detail::lane_index() == detail::highest_lane(mask)) {
        flush_requested(true);
        ref_.free_blocks(h_);
    }
    leave(mask);
}

__device__ inline bool warp_heap::end() {
    using namespace warp_heap_detail;
    header* h = h_;
    h_ = nullptr;
    if (h == nullptr) {
        // end() without a header: the paper's Listing 2 misuse.
        count(ref_.view.stats, kMisuse, 1);
        return false;
    }
#if GPUDYN_WARP_HEAP_DEBUG
    if (((h->members >> detail::lane_index()) & 1u) == 0u) {
        count(ref_.view.stats, kMisuse, 1);
        return false;
    }
#endif
    // Release: this lane's writes (as a worker) happen before the last lane frees.
    __threadfence();
    if (atomicSub(&h->active_count, 1u) != 1u) return false;
    __threadfence(); // acquire: see every other lane's writes to the header
    ref_.destroy_kept(h);
    return true;
}

__device__ inline void* warp_heap::keep() {
    warp_heap_detail::header* h = h_;
    if (h == nullptr) {
        warp_heap_detail::count(ref_.view.stats, warp_heap_detail::kMisuse, 1);
        return nullptr;
    }
    h_ = nullptr;
    __threadfence();
    if (atomicSub(&h->active_count, 1u) == 1u) {
        __threadfence();
        // The last lane folds the requested bytes into the statistics.
        warp_heap tmp(ref_, h, 0);
        tmp.flush_requested(false);
        h->active_count = h->total_count;
    }
    return h;
}

} // namespace v0
} // namespace gpudyn
