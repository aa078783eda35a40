/// @file
/// gpudyn — random-walk page heap, device side (header-only; nvcc and NVRTC).
///
/// Pham et al., "Dynamic Buffer Management in Massively Parallel Systems: A Case
/// on GPUs": no global allocation state; a thread finds a free page by drawing
/// random positions in a bitmap of used bits (1 = used) and claiming a clear bit
/// atomically.  The host owns the heap (gpudyn_rw_heap_create) and hands kernels a
/// gpudyn_rw_heap_view_t by value; wrap it here:
///
/// @code{.cpp}
/// __global__ void k(gpudyn_rw_heap_view_t v, unsigned long long seed) {
///     gpudyn::rw_heap_ref heap{v};
///     gpudyn::detail::counter_rng rng(seed, blockIdx.x * blockDim.x + threadIdx.x);
///     unsigned steps = 0;
///     unsigned page = heap.get_page<gpudyn::rw_algorithm::rw_bm>(rng, steps);
///     if (page != gpudyn::kRwInvalidPage) { void* p = heap.page_address(page); ... heap.free_page(page); }
/// }
/// @endcode
///
/// Contract for every call (also for other structures using this heap as their
/// backing allocator, e.g. warp_heap superblocks):
///   - Thread-level calls (`get_page<rw|rw_bm|crw>`, free_page, free) may be made by
///     any thread at any time, diverged or not.
///   - Warp collectives (get_page_corw, malloc) take a lane mask: exactly the lanes
///     in `mask` call, with the same mask, converged or not (no lockstep assumed;
///     data moves through `*_sync` intrinsics and `__syncwarp(mask)`).
///   - Exhaustion returns kRwInvalidPage / nullptr after a bounded search (random
///     steps, then one sweep over the bitmap, or over regions for malloc) and
///     counts a failed request; nothing traps, loops forever or prints.
///   - A bad free (double, interior, foreign, or of the other kind: free_page on
///     a malloc page, free on a get_page page) returns false, is counted in
///     counters[kRwCounterBadFree] and changes nothing else.
///   - A page id or pointer is owned by exactly one caller until freed.  The pages'
///     bytes are not zeroed.
/// Correctness needs no lock: claims are atomicOr and a claim only counts for bits
/// the returned old word had clear, so racing threads never share a page.  The
/// LockMap (SIV-A), when enabled, only keeps threads from contending for one word.
#pragma once

#include "gpudyn/detail/bits.cuh"
#include "gpudyn/detail/warp.cuh"
#include "gpudyn/detail/random.cuh"

#if defined(__CUDACC_RTC__)
#include <cuda/std/cstdint>
#include <cuda/std/cstddef>
#endif
#include "gpudyn/rw_heap.h"

namespace gpudyn {
inline namespace v0 {

/// Page id meaning "no page" (GPUDYN_RW_HEAP_INVALID_PAGE as uint32).
constexpr unsigned kRwInvalidPage = 0xffffffffu;
/// View layout this header reads (GPUDYN_RW_HEAP_VIEW_VERSION).
constexpr unsigned kRwHeapViewVersion = 2;
/// RW_malloc reads one region of this many consecutive bitmap words per round
/// (Alg. 4: one word per lane of a warp; 2048 bits with 64-bit words as in SIV-C).
constexpr unsigned kRwRegionWords = 32;
/// CoRW read rationing (see corw_impl): words read in the first round per word
/// of pages needed (4 words of 32 bits cover a full warp at >= 25% free), and the
/// cover factor of later rounds over the need at the free density seen so far.
constexpr unsigned kCorwFirstReadFactor = 4;
constexpr unsigned kCorwReadMargin = 2;
/// Alignment of every RW_malloc pointer (malloc's guarantee for any built-in type).
constexpr unsigned long long kRwMallocAlign = 16;
/// Bits per word of the live-start bitmap (view.live_starts): one bit per
/// kRwMallocAlign granule of the pool, set while a malloc pointer starting there
/// is live.  free() clears its bit first: a pointer whose bit was clear (double
/// free, interior or foreign pointer) is a bad free and changes nothing else.
constexpr unsigned kRwLiveWordBits = 32;

/// Slots of gpudyn_rw_heap_view_t::counters.
constexpr unsigned kRwCounterFailed = 0;
constexpr unsigned kRwCounterBadFree = 1;

/// Page-record tags (top 2 bits of page_meta[p]) written by malloc, read by free.
constexpr unsigned kRwMetaTagShift = 30;
constexpr unsigned kRwMetaNone = 0;   ///< not a malloc page (get_page pages, free pages)
constexpr unsigned kRwMetaLarge = 1;  ///< first page of a run of n pages: low 16 bits = n
constexpr unsigned kRwMetaShared = 2; ///< first page of a warp-aggregated run: n | refcount << 16
constexpr unsigned kRwMetaMember = 3; ///< later page of either run: low 16 bits = offset to first
constexpr unsigned kRwMetaRefShift = 16;
constexpr unsigned kRwMetaLowMask = 0xffffu;
constexpr unsigned kRwMetaRefMask = 0x3fffu;

enum class rw_algorithm : unsigned {
    rw = 1,
    rw_bm = 2,
    corw = 3,
    crw = 4
};

/// The C view's layout with the field types this header reads; checked
/// against gpudyn_rw_heap_view_t below.
struct rw_heap_view {
    unsigned version;
    unsigned word_bits;
    unsigned long long pool;
    unsigned long long bitmap;
    unsigned long long lockmap;
    unsigned long long page_meta;
    unsigned long long counters;
    unsigned long long page_size;
    unsigned page_count;
    unsigned word_count;
    unsigned max_random_steps;
    unsigned reserved;
    unsigned long long live_starts;
};

static_assert(sizeof(rw_heap_view) == sizeof(gpudyn_rw_heap_view_t), "rw_heap_view must mirror the C view");
#if !defined(__CUDACC_RTC__) // some NVRTC versions have no __builtin_offsetof
static_assert(__builtin_offsetof(rw_heap_view, page_size) == __builtin_offsetof(gpudyn_rw_heap_view_t, page_size),
              "rw_heap_view must mirror the C view");
static_assert(__builtin_offsetof(rw_heap_view, reserved) == __builtin_offsetof(gpudyn_rw_heap_view_t, reserved),
              "rw_heap_view must mirror the C view");
static_assert(__builtin_offsetof(rw_heap_view, live_starts) == __builtin_offsetof(gpudyn_rw_heap_view_t, live_starts),
              "rw_heap_view must mirror the C view");
#endif

/// Per-warp scratch of RW_malloc: in `__shared__` memory (one per warp) or, when
/// the mask has a single lane, a local variable.
struct rw_malloc_storage {
    unsigned long long region[kRwRegionWords]; ///< bitmap region; then the planned claims
    unsigned long long lost[kRwRegionWords];   ///< bits another thread took first
    unsigned need[32];                         ///< pages each lane's unit needs
    unsigned start[32];                        ///< planned first bit in the region, or kRwInvalidPage
    unsigned base;                             ///< first word of the region
};

namespace detail {

template <class Word>
__device__ __forceinline__ Word load_word(const Word* p) {
    // Fresh from L2 (volatile bypasses L1): claims of other SMs are visible.
    return *static_cast<const volatile Word*>(p);
}

/// Bitmap word operations for one word width.
template <class Word>
struct rw_bitmap {
    static constexpr unsigned kBits = sizeof(Word) * 8;
    Word* words;
    unsigned* lockmap;
    unsigned word_count;

    /// Claims the clear bits of `want`; returns those it won (set by nobody else).
    __device__ __forceinline__ Word claim(unsigned w, Word want) const {
        Word old = atomicOr(words + w, want);
        return want & ~old;
    }
    __device__ __forceinline__ Word release(unsigned w, Word bits) const {
        return atomicAnd(words + w, ~bits) & bits; // bits that were set
    }
    /// LockMap (SIV-A): try-lock of word w; true when this thread took it.
    __device__ __forceinline__ bool try_lock(unsigned w) const {
        if (lockmap == nullptr) return true;
        unsigned bit = 1u << (w % 32u);
        return (atomicOr(lockmap + w / 32u, bit) & bit) == 0;
    }
    __device__ __forceinline__ void unlock(unsigned w) const {
        if (lockmap != nullptr) atomicAnd(lockmap + w / 32u, ~(1u << (w % 32u)));
    }
    /// Takes one clear bit of word w (starting from the observed value `seen`);
    /// returns its page id or kRwInvalidPage when the word is (or became) full.
    __device__ __forceinline__ unsigned take_one(unsigned w, Word seen) const {
        Word free_bits = ~seen;
        while (free_bits != 0) {
            Word bit = Word(1) << lowest_bit(free_bits);
            Word old = atomicOr(words + w, bit);
            if ((old & bit) == 0) return w * kBits + lowest_bit(bit);
            free_bits = ~(old | bit); // someone was first; retry on what is left
        }
        return kRwInvalidPage;
    }
    /// One sweep over every word from a random start: finds a page whenever one
    /// stayed free during the sweep.  Bounded: word_count steps.
    __device__ unsigned sweep(counter_rng& rng, unsigned& steps) const {
        unsigned w = rng.below(word_count);
        for (unsigned i = 0; i < word_count; ++i) {
            ++steps;
            Word seen = load_word(words + w);
            if (~seen != 0) {
                // Never skip a word because another thread holds its lock (the
                // lock is only a courtesy; claims are atomic): a skipped word's
                // last free page could be the one this request needed, and
                // requests equal to the free pages would then fail.
                const bool locked = try_lock(w);
                unsigned page = take_one(w, load_word(words + w));
                if (locked) unlock(w);
                if (page != kRwInvalidPage) return page;
            }
            w = (w + 1 == word_count) ? 0 : w + 1;
        }
        return kRwInvalidPage;
    }
};

/// A malloc run's page records: pages after the first point back to it, the
/// first holds `head` (what the run is; free() reads it after the live bit).
__device__ __forceinline__ void write_run_records(unsigned* meta, unsigned first, unsigned n, unsigned head) {
    for (unsigned i = 1; i < n; ++i) meta[first + i] = (kRwMetaMember << kRwMetaTagShift) | i;
    meta[first] = head;
}

/// Sets the live-start bit of the pointer `offset` bytes from the pool: last,
/// after the records are fenced, so only a free that clears it frees.
__device__ __forceinline__ void set_live_start(unsigned* live, unsigned long long offset) {
    const unsigned long long g = offset / kRwMallocAlign;
    atomicOr(live + g / kRwLiveWordBits, 1u << (g % kRwLiveWordBits));
}

} // namespace detail

/// Device handle over a view.  Cheap to construct; copy freely.
class rw_heap_ref {
public:
    __device__ explicit rw_heap_ref(const rw_heap_view& view) : v_(view) {
        // A view of another layout version is refused: every call then fails and
        // writes nothing (its counters may not be a heap's).
        if (v_.version != kRwHeapViewVersion) {
            v_.page_count = 0;
            v_.counters = 0;
        }
    }
    __device__ explicit rw_heap_ref(const gpudyn_rw_heap_view_t& view)
        : rw_heap_ref(*reinterpret_cast<const rw_heap_view*>(&view)) {}

    __device__ bool valid() const { return v_.page_count != 0; }
    __device__ unsigned page_count() const { return v_.page_count; }
    __device__ unsigned long long page_size() const { return v_.page_size; }
    __device__ void* page_address(unsigned page) const {
        return reinterpret_cast<char*>(v_.pool) + static_cast<unsigned long long>(page) * v_.page_size;
    }
    /// Page holding `p`, or kRwInvalidPage when p is outside the pool.
    __device__ unsigned page_of(const void* p) const {
        unsigned long long off = reinterpret_cast<unsigned long long>(p) - v_.pool;
        unsigned long long page = off / v_.page_size;
        return (reinterpret_cast<unsigned long long>(p) >= v_.pool && page < v_.page_count) ? unsigned(page)
                                                                                            : kRwInvalidPage;
    }
    /// Largest RW_malloc request in bytes: one region of bits.
    __device__ unsigned long long max_malloc_size() const {
        return static_cast<unsigned long long>(kRwRegionWords) * v_.word_bits * v_.page_size;
    }

    /// @name GETPAGE (thread level: rw, rw_bm, crw; corw: see get_page_corw)
    /// @{

    /// `steps` is increased by the steps taken (the paper's TAS unit: pages
    /// visited for RW, bitmap words visited otherwise).  CRW keeps its cluster
    /// hint in `last_page` (start with kRwInvalidPage).
    template <rw_algorithm Algo>
    __device__ unsigned get_page(detail::counter_rng& rng, unsigned& steps, unsigned& last_page) const {
        static_assert(Algo != rw_algorithm::corw, "CoRW is a warp collective: call get_page_corw(mask, ...)");
        return v_.word_bits == 64 ? get_page_impl<Algo>(bitmap<unsigned long long>(), rng, steps, last_page)
                                  : get_page_impl<Algo>(bitmap<unsigned>(), rng, steps, last_page);
    }
    template <rw_algorithm Algo>
    __device__ unsigned get_page(detail::counter_rng& rng, unsigned& steps) const {
        unsigned last = kRwInvalidPage;
        return get_page<Algo>(rng, steps, last);
    }
    template <rw_algorithm Algo>
    __device__ unsigned get_page(detail::counter_rng& rng) const {
        unsigned steps = 0; // dead after inlining: no cost when unused
        return get_page<Algo>(rng, steps);
    }

    /// CoRW (Alg. 3), a warp collective over `mask`: every lane of mask gets a
    /// page (or kRwInvalidPage on exhaustion).  Each round every lane reads one
    /// random word; a warp prefix sum of the free-bit counts decides which lanes
    /// claim how many bits, and the claimed pages are handed to the lanes still
    /// without one.  Reads are rationed to what the free density seen so far
    /// needs (kCorwFirstReadFactor, kCorwReadMargin; every lane reads once no free
    /// bit was seen).  `steps` counts the rounds until this lane was served.
    __device__ unsigned get_page_corw(unsigned mask, detail::counter_rng& rng, unsigned& steps) const {
        return v_.word_bits == 64 ? corw_impl(bitmap<unsigned long long>(), mask, rng, steps)
                                  : corw_impl(bitmap<unsigned>(), mask, rng, steps);
    }
    __device__ unsigned get_page_corw(unsigned mask, detail::counter_rng& rng) const {
        unsigned steps = 0;
        return get_page_corw(mask, rng, steps);
    }

    /// FREEPAGE: clears the page's bit.  Returns false (and counts a bad free)
    /// when the id is out of range, the page was already free, or it belongs to
    /// an RW_malloc run (those go back through free(); their pages carry a record).
    __device__ bool free_page(unsigned page) const {
        if (page >= v_.page_count) return bad_free();
        if ((detail::load_word(meta() + page) >> kRwMetaTagShift) != kRwMetaNone) return bad_free();
        bool was_used = v_.word_bits == 64 ? release_page(bitmap<unsigned long long>(), page)
                                           : release_page(bitmap<unsigned>(), page);
        return was_used ? true : bad_free();
    }

    /// @}

    /// @name RW_malloc (Alg. 4), a warp collective over `mask`
    /// @{

    /// Each lane of mask asks for `bytes` (0: nothing, returns nullptr).  Requests
    /// below page_size are packed into one run for the warp (SIV-C); larger ones
    /// get ceil(bytes / page_size) consecutive pages.  Pointers are 16-byte
    /// aligned; nullptr when bytes > max_malloc_size() or no free run of the
    /// needed length was found: max_random_steps random regions, then one sweep
    /// (a run that fits in a region and stays free during the sweep is found).
    /// `storage` must be visible to all lanes of mask (see rw_malloc_storage).
    __device__ void* malloc(unsigned mask, unsigned long long bytes, rw_malloc_storage& storage,
                            detail::counter_rng& rng, unsigned& steps) const {
        return v_.word_bits == 64 ? malloc_impl(bitmap<unsigned long long>(), mask, bytes, storage, rng, steps)
                                  : malloc_impl(bitmap<unsigned>(), mask, bytes, storage, rng, steps);
    }
    __device__ void* malloc(unsigned mask, unsigned long long bytes, rw_malloc_storage& storage,
                            detail::counter_rng& rng) const {
        unsigned steps = 0;
        return malloc(mask, bytes, storage, rng, steps);
    }

    /// Frees a pointer returned by malloc (any thread, nullptr ignored).  Returns
    /// false (and counts a bad free), changing nothing else, for a pointer malloc
    /// did not return or that is already free: a double free (of two racing
    /// frees exactly one succeeds), an interior or foreign pointer, a get_page page.
    __device__ bool free(void* p) const {
        if (p == nullptr) return true;
        return v_.word_bits == 64 ? free_impl(bitmap<unsigned long long>(), p) : free_impl(bitmap<unsigned>(), p);
    }

    /// @}
private:
    rw_heap_view v_;

    template <class Word>
    __device__ detail::rw_bitmap<Word> bitmap() const {
        return {reinterpret_cast<Word*>(v_.bitmap), reinterpret_cast<unsigned*>(v_.lockmap), v_.word_count};
    }
    __device__ unsigned long long* counters() const { return reinterpret_cast<unsigned long long*>(v_.counters); }
    __device__ unsigned* meta() const { return reinterpret_cast<unsigned*>(v_.page_meta); }
    __device__ unsigned* live_starts() const { return reinterpret_cast<unsigned*>(v_.live_starts); }
    __device__ unsigned fail() const {
        if (v_.counters != 0) atomicAdd(counters() + kRwCounterFailed, 1ull);
        return kRwInvalidPage;
    }
    __device__ bool bad_free() const {
        if (v_.counters != 0) atomicAdd(counters() + kRwCounterBadFree, 1ull);
        return false;
    }

    template <class Word>
    __device__ static bool release_page(const detail::rw_bitmap<Word>& bm, unsigned page) {
        constexpr unsigned B = detail::rw_bitmap<Word>::kBits;
        return bm.release(page / B, Word(1) << (page % B)) != 0;
    }

    /// Clears bits [first, first + n) (a run handed out by malloc).
    template <class Word>
    __device__ static void release_run(const detail::rw_bitmap<Word>& bm, unsigned first, unsigned n) {
        constexpr unsigned B = detail::rw_bitmap<Word>::kBits;
        unsigned end = first + n;
        for (unsigned w = first / B; w * B < end; ++w) {
            unsigned lo = first > w * B ? first - w * B : 0;
            unsigned hi = end - w * B < B ? end - w * B : B;
            bm.release(w, detail::bit_range<Word>(lo, hi));
        }
    }

    /// RW-BM step loop (Alg. 2) from a random word; shared by rw_bm and crw.
    template <class Word>
    __device__ unsigned rw_bm_walk(const detail::rw_bitmap<Word>& bm, detail::counter_rng& rng, unsigned& steps) const {
        for (unsigned s = 0; s < v_.max_random_steps; ++s) {
            ++steps;
            unsigned w = rng.below(bm.word_count);
            Word seen = detail::load_word(bm.words + w);
            if (~seen == 0 || !bm.try_lock(w)) continue; // full, or locked: the step fails
            unsigned page = bm.take_one(w, seen);
            bm.unlock(w);
            if (page != kRwInvalidPage) return page;
        }
        unsigned page = bm.sweep(rng, steps);
        return page != kRwInvalidPage ? page : fail();
    }

    template <rw_algorithm Algo, class Word>
    __device__ unsigned get_page_impl(const detail::rw_bitmap<Word>& bm, detail::counter_rng& rng, unsigned& steps,
                                      unsigned& last_page) const {
        constexpr unsigned B = detail::rw_bitmap<Word>::kBits;
        if (!valid()) return kRwInvalidPage;
        if constexpr (Algo == rw_algorithm::rw) {
            // Alg. 1: one random page per step; claim it if its bit is clear.
            for (unsigned s = 0; s < v_.max_random_steps; ++s) {
                ++steps;
                unsigned page = rng.below(v_.page_count);
                Word bit = Word(1) << (page % B);
                if ((detail::load_word(bm.words + page / B) & bit) != 0) continue;
                if (bm.claim(page / B, bit) != 0) return page;
            }
            unsigned page = bm.sweep(rng, steps);
            return page != kRwInvalidPage ? page : fail();
        } else if constexpr (Algo == rw_algorithm::rw_bm) {
            return rw_bm_walk(bm, rng, steps);
        } else {
            // Alg. 5 (CRW): the page after this thread's last one, else RW-BM.
            unsigned next = last_page + 1;
            if (last_page != kRwInvalidPage && next < v_.page_count) {
                ++steps;
                Word bit = Word(1) << (next % B);
                if ((detail::load_word(bm.words + next / B) & bit) == 0 && bm.claim(next / B, bit) != 0) {
                    last_page = next;
                    return next;
                }
            }
            unsigned page = rw_bm_walk(bm, rng, steps);
            if (page != kRwInvalidPage) last_page = page;
            return page;
        }
    }

    template <class Word>
    __device__ unsigned corw_impl(const detail::rw_bitmap<Word>& bm, unsigned mask, detail::counter_rng& rng,
                                  unsigned& steps) const {
        mask = detail::member_mask(mask);
        constexpr unsigned B = detail::rw_bitmap<Word>::kBits;
        if (!valid()) return kRwInvalidPage;
        unsigned page = kRwInvalidPage;
        const unsigned lanes = detail::popcount(mask);
        const unsigned lane_rank = detail::popcount(mask & detail::lanes_below());
        const unsigned last_lane = detail::highest_lane(mask);
        // Words read and free bits seen so far by the warp (warp-uniform).
        unsigned words_read = 0, free_seen = 0;
        for (unsigned round = 0;; ++round) {
            const unsigned needy = detail::ballot(mask, page == kRwInvalidPage);
            if (needy == 0 || round == v_.max_random_steps) break; // same decision in every lane
            if (page == kRwInvalidPage) ++steps;
            const unsigned need = detail::popcount(needy);
            // Readers this round (warp-uniform): Alg. 3 line 6 has every lane read a
            // random word.  We ration the reads: kCorwFirstReadFactor words per B
            // pages needed in the first round, then enough words to cover the need
            // kCorwReadMargin times at the free density seen so far, and every lane
            // once no free bit has been seen.  With plentiful pages a warp then reads
            // a few words instead of 32 (Fig. 17's probe), with scarce ones it reads
            // as Alg. 3 does.  Correctness does not depend on it (claims are atomic).
            unsigned readers = lanes;
            if (round == 0) {
                readers = kCorwFirstReadFactor * ((need + B - 1) / B);
            } else if (free_seen != 0) {
                readers = unsigned(
                    (static_cast<unsigned long long>(kCorwReadMargin) * need * words_read + free_seen - 1) / free_seen);
            }
            readers = readers < 1 ? 1 : (readers > lanes ? lanes : readers);
            words_read += readers;
            // A reader draws a random word; a word locked by another warp offers
            // nothing (line 7); lanes that do not read offer nothing.
            const unsigned w = lane_rank < readers ? rng.below(bm.word_count) : 0u;
            Word free_bits = lane_rank < readers ? Word(~detail::load_word(bm.words + w)) : Word(0);
            bool locked = false;
            if (free_bits != 0) {
                locked = bm.try_lock(w);
                if (!locked) free_bits = 0;
            }
            const unsigned f = detail::popcount(free_bits);
            const unsigned incl = detail::masked_inclusive_sum(mask, f);
            const unsigned s = incl - f; // pages offered by lower lanes
            free_seen += __shfl_sync(mask, incl, int(last_lane));
            const unsigned k = s < need ? (f < need - s ? f : need - s) : 0;
            const Word want = detail::lowest_set_bits(free_bits, k);
            const Word won = k != 0 ? bm.claim(w, want) : Word(0);
            if (locked) bm.unlock(w);
            // Hand-off: the lane of rank r among the needy takes the (r - s_c)-th
            // bit offered by contributor c when s_c <= r < s_c + k_c (line 12-14);
            // a bit lost to another warp leaves its receiver needy for next round.
            const unsigned rank = detail::popcount(needy & detail::lanes_below());
            for (unsigned contributors = detail::ballot(mask, k != 0); contributors != 0;
                 contributors &= contributors - 1) {
                const int c = int(detail::lowest_bit(contributors));
                const unsigned cs = __shfl_sync(mask, s, c);
                const unsigned ck = __shfl_sync(mask, k, c);
                const Word cwant = __shfl_sync(mask, want, c);
                const Word cwon = __shfl_sync(mask, won, c);
                const unsigned cw = __shfl_sync(mask, w, c);
                if (page == kRwInvalidPage && rank >= cs && rank < cs + ck) {
                    unsigned bit = detail::nth_set_bit(cwant, rank - cs);
                    if ((cwon >> bit) & 1) page = cw * B + bit;
                }
            }
        }
        if (page == kRwInvalidPage) { // bounded fallback, thread by thread
            page = bm.sweep(rng, steps);
            if (page == kRwInvalidPage) fail();
        }
        return page;
    }

    /// First run of n clear bits in the region (storage.region, kRwRegionWords
    /// words of B bits, bit i = page base*B + i), at or after bit 0; kRwInvalidPage if none.
    template <class Word>
    __device__ static unsigned find_run(const rw_malloc_storage& st, unsigned n) {
        constexpr unsigned B = detail::rw_bitmap<Word>::kBits;
        constexpr unsigned kTotal = kRwRegionWords * B;
        unsigned pos = 0;
        while (pos + n <= kTotal) {
            // Skip used bits.
            Word used = Word(st.region[pos / B]) >> (pos % B);
            if (used & 1) {
                Word clear = ~used;
                if ((pos % B) != 0) clear &= (Word(1) << (B - pos % B)) - 1; // bits past the word are not ours
                pos = clear == 0 ? (pos / B + 1) * B : pos + detail::lowest_bit(clear);
                continue;
            }
            // Measure the clear run from pos, across words, up to n.
            unsigned run = 0, p = pos;
            while (run < n && p < kTotal) {
                Word rest = Word(st.region[p / B]) >> (p % B);
                unsigned avail = B - p % B;
                unsigned len = rest == 0 ? avail : detail::lowest_bit(rest);
                if (len > avail) len = avail;
                run += len;
                p += len;
                if (len < avail) break; // hit a used bit
            }
            if (run >= n) return pos;
            pos += run;
        }
        return kRwInvalidPage;
    }

    template <class Word>
    __device__ void* malloc_impl(const detail::rw_bitmap<Word>& bm, unsigned mask, unsigned long long bytes,
                                 rw_malloc_storage& st, detail::counter_rng& rng, unsigned& steps) const {
        mask = detail::member_mask(mask);
        constexpr unsigned B = detail::rw_bitmap<Word>::kBits;
        const unsigned lane = detail::lane_index();
        const unsigned long long S = v_.page_size;
        const bool ok = valid() && bytes <= max_malloc_size();
        if (bytes != 0 && !ok) fail();
        // Small requests share one run (SIV-C): offsets by a warp prefix sum of the
        // 16-byte-rounded sizes; the lowest small lane owns the shared run.
        const bool small = ok && bytes != 0 && bytes < S;
        const unsigned long long rounded = small ? (bytes + kRwMallocAlign - 1) / kRwMallocAlign * kRwMallocAlign : 0;
        const unsigned long long small_end = detail::masked_inclusive_sum(mask, rounded);
        const unsigned small_mask = detail::ballot(mask, small);
        const unsigned long long small_total = __shfl_sync(mask, small_end, int(detail::highest_lane(mask)));
        const unsigned owner = small_mask != 0 ? detail::lowest_bit(small_mask) : 32u;
        unsigned my_need = 0;
        if (ok && bytes >= S) my_need = unsigned((bytes + S - 1) / S);
        if (lane == owner) my_need = unsigned((small_total + S - 1) / S);
        const unsigned my_count = detail::popcount(mask);
        const unsigned my_rank = detail::popcount(mask & detail::lanes_below());
        const unsigned leader = detail::lowest_bit(mask);
        unsigned first = kRwInvalidPage; // first page of this lane's run
        const unsigned regions = bm.word_count > kRwRegionWords ? bm.word_count - kRwRegionWords + 1 : 1;
        // After max_random_steps random regions, the bounded fallback: one sweep
        // over regions `stride` words apart (from a random one), the stride chosen
        // so that any run of the largest pending need lies wholly inside one swept
        // region, and word locks ignored (claims are atomic; the lock is only a
        // courtesy).  A request then fails only when no run it needs stayed free
        // during the sweep.  Warp-uniform: stride and sweep_count.
        unsigned stride = 1, sweep_count = 0, sweep_next = 0;
        for (unsigned round = 0;; ++round) {
            const bool want = my_need != 0 && first == kRwInvalidPage;
            const unsigned pending = detail::ballot(mask, want);
            if (pending == 0) break;
            const bool sweeping = round >= v_.max_random_steps;
            if (round == v_.max_random_steps) {
                // A run of n bits crosses at most (n + B - 2) / B words past its first.
                const unsigned n_max = detail::masked_max(mask, want ? my_need : 0u);
                const unsigned span = (n_max + B - 2) / B;
                stride = span < kRwRegionWords ? kRwRegionWords - span : 1u;
                sweep_count = (regions - 1 + stride - 1) / stride + 1; // bases 0, stride, ..., regions - 1
                sweep_next = rng.below(sweep_count);                   // used by the leader
            }
            if (sweeping && round - v_.max_random_steps == sweep_count) break;
            if (want) ++steps;
            // 1. Read a region: lanes take words rank, rank + count, ...
            if (lane == leader) {
                if (sweeping) {
                    const unsigned b = sweep_next * stride;
                    st.base = b < regions ? b : regions - 1;
                    sweep_next = sweep_next + 1 == sweep_count ? 0 : sweep_next + 1;
                } else {
                    st.base = rng.below(regions);
                }
            }
            st.need[lane] = want ? my_need : 0;
            __syncwarp(mask);
            const unsigned base = st.base;
            for (unsigned i = my_rank; i < kRwRegionWords; i += my_count) {
                unsigned w = base + i;
                st.region[i] = w < bm.word_count ? (unsigned long long)detail::load_word(bm.words + w)
                                                 : (unsigned long long)~Word(0);
                st.lost[i] = st.region[i]; // keep the observed words to diff against
            }
            __syncwarp(mask);
            // 2. The leader plans first-fit runs for the pending lanes in lane
            //    order, marking them in the region copy.
            if (lane == leader) {
                for (unsigned rest = pending; rest != 0; rest &= rest - 1) {
                    unsigned u = detail::lowest_bit(rest);
                    unsigned n = st.need[u];
                    unsigned at = find_run<Word>(st, n);
                    st.start[u] = at;
                    if (at == kRwInvalidPage) continue;
                    for (unsigned b = at; b < at + n;) {
                        unsigned hi = (b / B + 1) * B < at + n ? (b / B + 1) * B : at + n;
                        st.region[b / B] |= (unsigned long long)detail::bit_range<Word>(b % B, hi - (b / B) * B);
                        b = hi;
                    }
                }
            }
            __syncwarp(mask);
            // 3. Claim the planned bits word by word; record bits lost to others.
            for (unsigned i = my_rank; i < kRwRegionWords; i += my_count) {
                Word plan = Word(st.region[i]) & ~Word(st.lost[i]);
                Word lost = 0;
                if (plan != 0) {
                    bool locked = bm.try_lock(base + i);
                    lost = (locked || sweeping) ? Word(plan & ~bm.claim(base + i, plan)) : plan;
                    if (locked) bm.unlock(base + i);
                }
                st.lost[i] = (unsigned long long)lost;
            }
            __syncwarp(mask);
            // 4. A lane whose run lost a bit gives back the rest and retries.
            if (st.need[lane] != 0 && st.start[lane] != kRwInvalidPage) {
                const unsigned at = st.start[lane], end = at + my_need;
                bool intact = true;
                for (unsigned i = at / B; i * B < end; ++i) {
                    Word mine = detail::bit_range<Word>(at > i * B ? at - i * B : 0, end - i * B < B ? end - i * B : B);
                    if (Word(st.lost[i]) & mine) intact = false;
                }
                if (intact) {
                    first = base * B + at;
                } else {
                    for (unsigned i = at / B; i * B < end; ++i) {
                        Word mine =
                            detail::bit_range<Word>(at > i * B ? at - i * B : 0, end - i * B < B ? end - i * B : B);
                        Word back = mine & ~Word(st.lost[i]);
                        if (back) bm.release(base + i, back);
                    }
                }
            }
            __syncwarp(mask); // storage is rewritten next round
        }
        // Records for free(), written (and fenced) before any live bit is set:
        // the first page says what the run is, its later pages point back to it
        // (so free_page refuses them too).
        if (first != kRwInvalidPage) {
            detail::write_run_records(meta(), first, my_need,
                                      lane == owner ? (kRwMetaShared << kRwMetaTagShift) |
                                                          (detail::popcount(small_mask) << kRwMetaRefShift) | my_need
                                                    : (kRwMetaLarge << kRwMetaTagShift) | my_need);
            __threadfence();
        } else if (my_need != 0) {
            fail();
        }
        const unsigned shared_first = __shfl_sync(mask, first, int(owner < 32 ? owner : leader));
        __syncwarp(mask);
        char* p = nullptr;
        if (small) {
            if (shared_first == kRwInvalidPage) {
                if (lane != owner) fail();
                return nullptr;
            }
            p = reinterpret_cast<char*>(v_.pool) + static_cast<unsigned long long>(shared_first) * S +
                (small_end - rounded);
        } else if (first != kRwInvalidPage) {
            p = static_cast<char*>(page_address(first));
        }
        // Each pointer's start goes live last: only a free that clears it frees.
        if (p != nullptr) detail::set_live_start(live_starts(), reinterpret_cast<unsigned long long>(p) - v_.pool);
        return p;
    }

    /// The first page of a malloc run and its n pages go back: records cleared
    /// before the bits, so a page is never reused with a stale record.
    template <class Word>
    __device__ void release_malloc_run(const detail::rw_bitmap<Word>& bm, unsigned first, unsigned n) const {
        unsigned* m = meta();
        for (unsigned i = 1; i < n; ++i) m[first + i] = kRwMetaNone;
        m[first] = kRwMetaNone;
        __threadfence();
        release_run(bm, first, n);
    }

    /// Every bad pointer is refused before anything changes: the free must
    /// clear the pointer's live-start bit (set by malloc for exactly the pointers
    /// it returned).  A double free (also two racing frees: one atomicAnd wins),
    /// an interior or foreign pointer, or a get_page page finds the bit clear.
    /// Only a free that cleared its bit drops a shared run's count, so the count
    /// never goes below the lanes still holding a pointer into the run.
    template <class Word>
    __device__ bool free_impl(const detail::rw_bitmap<Word>& bm, void* p) const {
        const unsigned page = page_of(p);
        if (page == kRwInvalidPage || !valid()) return bad_free();
        const unsigned long long off = reinterpret_cast<unsigned long long>(p) - v_.pool;
        if (off % kRwMallocAlign != 0) return bad_free();
        const unsigned long long g = off / kRwMallocAlign;
        const unsigned bit = 1u << (g % kRwLiveWordBits);
        if ((atomicAnd(live_starts() + g / kRwLiveWordBits, ~bit) & bit) == 0) return bad_free();
        __threadfence(); // the run's record was written before the bit was set
        unsigned* m = meta();
        const unsigned rec = detail::load_word(m + page);
        unsigned head = page;
        unsigned head_rec = rec;
        if ((rec >> kRwMetaTagShift) == kRwMetaMember) {
            head = page - (rec & kRwMetaLowMask);
            head_rec = detail::load_word(m + head);
        }
        const unsigned tag = head_rec >> kRwMetaTagShift;
        if (tag == kRwMetaLarge && head == page) {
            release_malloc_run(bm, head, head_rec & kRwMetaLowMask);
            return true;
        }
        if (tag == kRwMetaShared) {
            const unsigned old = atomicSub(m + head, 1u << kRwMetaRefShift);
            if (((old >> kRwMetaRefShift) & kRwMetaRefMask) == 1) // last sharer: the run goes back
                release_malloc_run(bm, head, old & kRwMetaLowMask);
            return true;
        }
        return bad_free(); // a live bit without a record: only a foreign view gets here
    }
};

} // namespace v0
} // namespace gpudyn
