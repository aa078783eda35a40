/// @file
/// Parallel insertion algorithms (GGArray paper §III-B), separate from the
/// structures that use them: each gives every thread of a block a unique slot
/// among the block's inserting threads, plus the block's total, so a structure
/// reserves the whole block's range with one operation.
///
/// - `atomic`: each inserting thread takes its slot with atomicAdd on a
///   block-shared counter (slot order is arbitrary);
/// - `warp_scan`: exclusive prefix sum with `__shfl_up_sync` per warp, then over
///   the warp totals (slots in thread-rank order);
/// - `tensor_scan`: the prefix sum as 16x16 half-precision matrix products on
///   tensor cores (WMMA), after Dakkak et al. (ICS 2019): a tile of
///   256 flags is A; A·U (U upper-triangular ones) scans each row,
///   (L·A)·1 (L strictly lower ones) adds the sums of earlier rows.
///
/// Deviation from the paper, on purpose: its "atomic" variant does one global
/// atomicAdd per element, which cannot give all-or-nothing insertion at a
/// capacity limit; here every algorithm ranks inside the block and the structure
/// reserves once per block, so the three differ only in how ranks are found.
///
/// Compiles under nvcc and NVRTC.  Block-cooperative: every thread of the block
/// must call, with the same arguments where stated; the caller provides the
/// TempStorage (shared memory), as in CUB.
#pragma once

#include "gpudyn/detail/warp.cuh"
#include "gpudyn/detail/warp_push.cuh" // detail::reserve_range

#include <mma.h>

namespace gpudyn {
inline namespace v0 {

/// Compile-time bool for generic lambdas (std::bool_constant without host headers).
template <bool B>
struct bool_constant {
    static constexpr bool value = B;
};

/// Values equal gpudyn_insert_algo_t in ggarray.h.
enum class insert_algo : int {
    atomic = 0,
    warp_scan = 1,
    tensor_scan = 2
};

/// Largest block the default TempStorage serves (CUDA's limit on threads per block).
constexpr unsigned kMaxBlockThreads = 1024;

template <insert_algo Algo, unsigned MaxThreads = kMaxBlockThreads>
struct block_rank;

// ---- atomic --------------------------------------------------------------
template <unsigned MaxThreads>
struct block_rank<insert_algo::atomic, MaxThreads> {
    struct TempStorage {
        unsigned counter;
    };
    /// Slot of the calling thread among the block's flagged threads (meaningful
    /// when flag is true); `*total` gets the number of flagged threads.
    __device__ static unsigned rank(TempStorage& s, bool flag, unsigned* total) {
        if (detail::block_thread_rank() == 0) s.counter = 0;
        __syncthreads();
        unsigned slot = flag ? atomicAdd(&s.counter, 1u) : 0u;
        __syncthreads();
        *total = s.counter;
        __syncthreads(); // the storage may be reused right after the call
        return slot;
    }
};

// ---- warp-shuffle scan ---------------------------------------------------
template <unsigned MaxThreads>
struct block_rank<insert_algo::warp_scan, MaxThreads> {
    static_assert(MaxThreads >= 1 && MaxThreads <= kMaxBlockThreads, "MaxThreads must be 1..1024");
    static constexpr unsigned kWarps = (MaxThreads + detail::kWarpLanes - 1) / detail::kWarpLanes;
    /// rank_items packs the flags of up to kPackedItems items into 16-bit fields
    /// of 64-bit words and scans all items at once (one block scan instead of one
    /// per item).  A field never carries: it counts at most 1024 threads (< 2^16).
    static constexpr unsigned kFieldBits = 16;
    static constexpr unsigned kFieldsPerWord = 64 / kFieldBits;
    static constexpr int kPackedItems = 16;
    static constexpr unsigned kPackedWords = kPackedItems / kFieldsPerWord;
    struct TempStorage {
        union {
            struct {
                unsigned warp_offset[kWarps];
                unsigned total;
            } one;
            struct {
                unsigned long long warp_offset[kWarps][kPackedWords];
                unsigned long long total[kPackedWords];
            } packed;
        };
    };
    __device__ static unsigned rank(TempStorage& ts, bool flag, unsigned* total) {
        auto& s = ts.one;
        const unsigned n = detail::block_thread_count();
        const unsigned r = detail::block_thread_rank();
        const unsigned warp = r / detail::kWarpLanes;
        const unsigned nwarps = (n + detail::kWarpLanes - 1) / detail::kWarpLanes;
        const unsigned mask = detail::block_warp_mask(); // lanes 0..k-1: contiguous
        const unsigned mine = flag ? 1u : 0u;
        const unsigned incl = detail::contiguous_lanes_inclusive_sum(mask, mine);
        const unsigned last_lane = detail::highest_lane(mask);
        if (detail::lane_index() == last_lane) s.warp_offset[warp] = incl;
        __syncthreads();
        if (warp == 0) {
            // Warp 0 has min(n, 32) lanes and nwarps <= that many (nwarps > 1 implies n > 32).
            const unsigned lane = detail::lane_index();
            const unsigned v = lane < nwarps ? s.warp_offset[lane] : 0u;
            const unsigned inc = detail::contiguous_lanes_inclusive_sum(mask, v);
            if (lane < nwarps) s.warp_offset[lane] = inc - v;
            if (lane == nwarps - 1) s.total = inc;
        }
        __syncthreads();
        const unsigned slot = s.warp_offset[warp] + incl - mine;
        *total = s.total;
        __syncthreads();
        return slot;
    }

    /// Items ranks at once: slot[k] among the block's threads flagged in item k,
    /// total[k] their number.  Same result as Items calls of rank().
    template <int Items>
    __device__ static void rank_items(TempStorage& ts, const bool (&flag)[Items], unsigned (&slot)[Items],
                                      unsigned (&total)[Items]) {
        if constexpr (Items > kPackedItems) {
#pragma unroll
            for (int k = 0; k < Items; ++k) slot[k] = rank(ts, flag[k], &total[k]);
        } else {
            constexpr unsigned W = (unsigned(Items) + kFieldsPerWord - 1) / kFieldsPerWord;
            constexpr unsigned long long kField = (1ull << kFieldBits) - 1ull;
            auto& s = ts.packed;
            const unsigned n = detail::block_thread_count();
            const unsigned r = detail::block_thread_rank();
            const unsigned warp = r / detail::kWarpLanes;
            const unsigned nwarps = (n + detail::kWarpLanes - 1) / detail::kWarpLanes;
            const unsigned mask = detail::block_warp_mask();
            const unsigned last_lane = detail::highest_lane(mask);
            static_assert(W == (Items * kFieldBits + 63) / 64, "one word per kFieldsPerWord items");
            unsigned long long mine[W], incl[W];
            detail::pack_item_flags<kFieldBits, Items>(flag, mine);
#pragma unroll
            for (unsigned w = 0; w < W; ++w) {
                incl[w] = detail::contiguous_lanes_inclusive_sum(mask, mine[w]);
                if (detail::lane_index() == last_lane) s.warp_offset[warp][w] = incl[w];
            }
            __syncthreads();
            if (warp == 0) { // as in rank(): warp 0 has at least nwarps lanes
                const unsigned lane = detail::lane_index();
#pragma unroll
                for (unsigned w = 0; w < W; ++w) {
                    const unsigned long long v = lane < nwarps ? s.warp_offset[lane][w] : 0ull;
                    const unsigned long long inc = detail::contiguous_lanes_inclusive_sum(mask, v);
                    if (lane < nwarps) s.warp_offset[lane][w] = inc - v;
                    if (lane == nwarps - 1) s.total[w] = inc;
                }
            }
            __syncthreads();
#pragma unroll
            for (unsigned w = 0; w < W; ++w) {
                const unsigned long long excl = s.warp_offset[warp][w] + incl[w] - mine[w];
                const unsigned long long tot = s.total[w];
#pragma unroll
                for (unsigned f = 0; f < kFieldsPerWord; ++f) {
                    const int k = int(w * kFieldsPerWord + f);
                    if (k < Items) {
                        slot[k] = unsigned((excl >> (kFieldBits * f)) & kField);
                        total[k] = unsigned((tot >> (kFieldBits * f)) & kField);
                    }
                }
            }
            __syncthreads();
        }
    }
};

/// Items ranks for any algorithm: one packed scan where the algorithm has one
/// (warp_scan), else one rank() per item.
template <insert_algo Algo, unsigned MaxThreads, int Items>
__device__ void block_rank_items(typename block_rank<Algo, MaxThreads>::TempStorage& s, const bool (&flag)[Items],
                                 unsigned (&slot)[Items], unsigned (&total)[Items]) {
    if constexpr (Algo == insert_algo::warp_scan) {
        block_rank<Algo, MaxThreads>::template rank_items<Items>(s, flag, slot, total);
    } else {
#pragma unroll
        for (int k = 0; k < Items; ++k) slot[k] = block_rank<Algo, MaxThreads>::rank(s, flag[k], &total[k]);
    }
}

// ---- tensor-core scan ----------------------------------------------------
template <unsigned MaxThreads>
struct block_rank<insert_algo::tensor_scan, MaxThreads> {
    /// WMMA half-precision tile (CUDA programming guide, "warp matrix functions": m16n16k16).
    static constexpr unsigned kTile = 16;
    static constexpr unsigned kTileElems = kTile * kTile;
    static constexpr unsigned kTiles = (MaxThreads + kTileElems - 1) / kTileElems;
    using fallback = block_rank<insert_algo::warp_scan, MaxThreads>;
    struct TempStorage {
        union {
            struct {
                __align__(32) unsigned short a[kTiles * kTileElems];       ///< flags, row-major tiles
                __align__(32) unsigned short lower_a[kTiles * kTileElems]; ///< L·A per tile, as half
                __align__(32) unsigned short upper[kTileElems];            ///< U[k][c] = k <= c
                __align__(32) unsigned short strict_lower[kTileElems];     ///< L[r][k] = k < r
                __align__(32) float c[kTiles * kTileElems];                ///< inclusive scan per tile
                unsigned tile_offset[kTiles];
                unsigned total;
            } mma;
            typename fallback::TempStorage warp;
        };
    };
    /// Exact: every intermediate is an integer <= 256 (half holds integers up to 2048,
    /// float accumulators up to 2^24).  Blocks whose size is not a multiple of 32
    /// use the warp-shuffle scan (WMMA needs every lane of a warp).
    __device__ static unsigned rank(TempStorage& s, bool flag, unsigned* total) {
        using namespace nvcuda;
        // Half tiles live as raw 16-bit storage (a union member needs trivial types).
        __half* a_all = reinterpret_cast<__half*>(s.mma.a);
        __half* la_all = reinterpret_cast<__half*>(s.mma.lower_a);
        const __half* upper = reinterpret_cast<const __half*>(s.mma.upper);
        const __half* strict_lower = reinterpret_cast<const __half*>(s.mma.strict_lower);
        __half* upper_w = reinterpret_cast<__half*>(s.mma.upper);
        __half* strict_lower_w = reinterpret_cast<__half*>(s.mma.strict_lower);
        const unsigned n = detail::block_thread_count();
        if (n % detail::kWarpLanes != 0) return fallback::rank(s.warp, flag, total);
        const unsigned r = detail::block_thread_rank();
        const unsigned tiles = (n + kTileElems - 1) / kTileElems;
        a_all[r] = __float2half(flag ? 1.0f : 0.0f);
        for (unsigned i = n + r; i < tiles * kTileElems; i += n) a_all[i] = __float2half(0.0f);
        for (unsigned i = r; i < kTileElems; i += n) {
            const unsigned row = i / kTile, col = i % kTile;
            upper_w[i] = __float2half(row <= col ? 1.0f : 0.0f);
            strict_lower_w[i] = __float2half(col < row ? 1.0f : 0.0f);
        }
        __syncthreads();
        const unsigned warp = r / detail::kWarpLanes;
        if (warp < tiles) { // whole warps: n is a multiple of 32
            __half* a = a_all + warp * kTileElems;
            __half* la = la_all + warp * kTileElems;
            float* c = s.mma.c + warp * kTileElems;
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa, fl;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb, fu, fones;
            wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
            // L·A: column sums of the rows above each row.
            wmma::load_matrix_sync(fl, strict_lower, kTile);
            wmma::load_matrix_sync(fb, a, kTile);
            wmma::fill_fragment(acc, 0.0f);
            wmma::mma_sync(acc, fl, fb, acc);
            wmma::store_matrix_sync(c, acc, kTile, wmma::mem_row_major);
            __syncwarp();
            for (unsigned i = detail::lane_index(); i < kTileElems; i += detail::kWarpLanes) la[i] = __float2half(c[i]);
            __syncwarp();
            // (L·A)·1 broadcasts each row's "earlier rows" total across the row;
            // A·U added on top gives the inclusive scan in row-major order.
            wmma::load_matrix_sync(fa, la, kTile);
            wmma::fill_fragment(fones, __float2half(1.0f));
            wmma::fill_fragment(acc, 0.0f);
            wmma::mma_sync(acc, fa, fones, acc);
            wmma::load_matrix_sync(fa, a, kTile);
            wmma::load_matrix_sync(fu, upper, kTile);
            wmma::mma_sync(acc, fa, fu, acc);
            __syncwarp();
            wmma::store_matrix_sync(c, acc, kTile, wmma::mem_row_major);
        }
        __syncthreads();
        if (r == 0) {
            unsigned run = 0;
            for (unsigned t = 0; t < tiles; ++t) {
                s.mma.tile_offset[t] = run;
                run += unsigned(s.mma.c[t * kTileElems + kTileElems - 1]);
            }
            s.mma.total = run;
        }
        __syncthreads();
        const unsigned slot = s.mma.tile_offset[r / kTileElems] + unsigned(s.mma.c[r]) - (flag ? 1u : 0u);
        *total = s.mma.total;
        __syncthreads();
        return slot;
    }
};

// ---- warp-level ranking (the chunked path) -------------------------------
/// push_chunk hands each warp a contiguous piece of the block's chunk and ranks
/// it tile by tile (32 x Items candidates) inside the warp, so its loop has no
/// block barrier.  rank_tile gives each flagged item of the calling lane its
/// offset inside the warp's tile (chunk order for the scans, arbitrary for
/// atomic) and the tile's count.  Lanes = the contiguous low lanes of `mask`.
template <insert_algo Algo, unsigned MaxThreads = kMaxBlockThreads>
struct warp_rank;

/// Warp-shuffle scan: the Items flags of a lane packed into 8-bit fields of
/// 64-bit words, one shuffle scan over the lanes for every 8 items.  A field
/// never carries: it counts at most 32 lanes.
template <unsigned MaxThreads>
struct warp_rank<insert_algo::warp_scan, MaxThreads> {
    static constexpr unsigned kFieldBits = 8, kFields = 64 / kFieldBits;
    struct TempStorage {};
    template <int Items>
    __device__ static void rank_tile(TempStorage&, unsigned mask, unsigned nlanes, const bool (&flag)[Items],
                                     unsigned (&off)[Items], unsigned* tile_total) {
        *tile_total = detail::rank_flagged_items<Items>(mask, flag, off);
    }
};

/// Atomic: every flagged item takes its offset with atomicAdd on the warp's
/// shared counter (order arbitrary); the count is the counter after the warp's adds.
template <unsigned MaxThreads>
struct warp_rank<insert_algo::atomic, MaxThreads> {
    static constexpr unsigned kWarps = (MaxThreads + detail::kWarpLanes - 1) / detail::kWarpLanes;
    struct TempStorage {
        unsigned counter[kWarps];
    };
    template <int Items>
    __device__ static void rank_tile(TempStorage& s, unsigned mask, unsigned, const bool (&flag)[Items],
                                     unsigned (&off)[Items], unsigned* tile_total) {
        unsigned& c = s.counter[detail::block_thread_rank() / detail::kWarpLanes];
        if (detail::lane_index() == 0) c = 0;
        __syncwarp(mask);
#pragma unroll
        for (int k = 0; k < Items; ++k)
            if (flag[k]) off[k] = atomicAdd(&c, 1u);
        __syncwarp(mask);
        *tile_total = c;
        __syncwarp(mask); // every lane has read c before lane 0 resets it next tile
    }
};

/// Tensor-core scan, one warp per 16x16 tile of 256 flags (8 items of 32 lanes,
/// chunk order = row-major): C = (L·A)·1 + A·U is the inclusive scan (L strictly
/// lower ones, U upper ones; see `block_rank<tensor_scan>`).  Half accumulators are
/// exact: every value is an integer <= 256 (half holds integers up to 2048).  A
/// warp with fewer than 32 lanes (block size not a multiple of 32) uses the
/// shuffle scan: WMMA needs the whole warp.
template <unsigned MaxThreads>
struct warp_rank<insert_algo::tensor_scan, MaxThreads> {
    static constexpr unsigned kTile = 16, kTileElems = kTile * kTile;
    static constexpr unsigned kItemsPerTile = kTileElems / detail::kWarpLanes; ///< 8
    static constexpr unsigned kWarps = (MaxThreads + detail::kWarpLanes - 1) / detail::kWarpLanes;
    using fallback = warp_rank<insert_algo::warp_scan, MaxThreads>;
    struct TempStorage {
        __align__(32) unsigned short upper[kTileElems];        ///< U[k][c] = k <= c (half)
        __align__(32) unsigned short strict_lower[kTileElems]; ///< L[r][k] = k < r (half)
        __align__(32) unsigned short t[kWarps][kTileElems];    ///< the warp's tile: flags, L·A, scan
    };
    /// Block-cooperative, once before the first rank_tile (callers barrier after it).
    __device__ static void init(TempStorage& s) {
        __half* u = reinterpret_cast<__half*>(s.upper);
        __half* l = reinterpret_cast<__half*>(s.strict_lower);
        for (unsigned i = detail::block_thread_rank(); i < kTileElems; i += detail::block_thread_count()) {
            const unsigned row = i / kTile, col = i % kTile;
            u[i] = __float2half(row <= col ? 1.0f : 0.0f);
            l[i] = __float2half(col < row ? 1.0f : 0.0f);
        }
    }
    template <int Items>
    __device__ static void rank_tile(TempStorage& s, unsigned mask, unsigned nlanes, const bool (&flag)[Items],
                                     unsigned (&off)[Items], unsigned* tile_total) {
        if (nlanes != detail::kWarpLanes) {
            typename fallback::TempStorage none;
            fallback::template rank_tile<Items>(none, mask, nlanes, flag, off, tile_total);
            return;
        }
        using namespace nvcuda;
        const unsigned warp = detail::block_thread_rank() / detail::kWarpLanes, lane = detail::lane_index();
        __half* t = reinterpret_cast<__half*>(s.t[warp]);
        constexpr int kGroups = (Items + int(kItemsPerTile) - 1) / int(kItemsPerTile);
        unsigned run = 0;
#pragma unroll
        for (int g = 0; g < kGroups; ++g) {
#pragma unroll
            for (int i = 0; i < int(kItemsPerTile); ++i) {
                const int k = g * int(kItemsPerTile) + i;
                t[i * detail::kWarpLanes + lane] = __float2half(k < Items && flag[k] ? 1.0f : 0.0f);
            }
            __syncwarp();
            // A is kept in registers (as both operands) so the one tile buffer can take L·A.
            wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa, flags_a;
            wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
            wmma::fragment<wmma::accumulator, 16, 16, 16, __half> acc;
            wmma::load_matrix_sync(flags_a, t, kTile);
            wmma::load_matrix_sync(fb, t, kTile);
            wmma::load_matrix_sync(fa, reinterpret_cast<const __half*>(s.strict_lower), kTile);
            wmma::fill_fragment(acc, __float2half(0.0f));
            wmma::mma_sync(acc, fa, fb, acc); // L·A
            __syncwarp();                     // every lane's loads of the flags are done
            wmma::store_matrix_sync(t, acc, kTile, wmma::mem_row_major);
            __syncwarp();
            wmma::load_matrix_sync(fa, t, kTile);
            wmma::fill_fragment(fb, __float2half(1.0f));
            wmma::fill_fragment(acc, __float2half(0.0f));
            wmma::mma_sync(acc, fa, fb, acc); // (L·A)·1
            wmma::load_matrix_sync(fb, reinterpret_cast<const __half*>(s.upper), kTile);
            wmma::mma_sync(acc, flags_a, fb, acc); // + A·U
            __syncwarp();                          // every lane's loads of L·A are done
            wmma::store_matrix_sync(t, acc, kTile, wmma::mem_row_major);
            __syncwarp();
#pragma unroll
            for (int i = 0; i < int(kItemsPerTile); ++i) {
                const int k = g * int(kItemsPerTile) + i;
                if (k < Items && flag[k]) off[k] = run + unsigned(__half2float(t[i * detail::kWarpLanes + lane])) - 1u;
            }
            run += unsigned(__half2float(t[kTileElems - 1]));
            __syncwarp(); // reads done before the next group overwrites the tile
        }
        *tile_total = run;
    }
};

// ---- block-level insertion into any structure ----------------------------
/// Shared-memory window a sink fills once per reservation (one thread), so the
/// stores into that range need no global lookups: the GGArray keeps the bucket
/// pointers of the reserved range there (one word per bucket index; its
/// GPUDYN_GGARRAY_MAX_BUCKETS is 40, checked in ggarray.cuh).
constexpr unsigned kSinkWindowWords = 40;
struct sink_window {
    unsigned long long word[kSinkWindowWords];
};

/// Sink (provided by the structure): warp_push.cuh's claim side (hint, claim,
/// fast, settle, advance: one thread reserves with detail::reserve_range), and
/// @code{.cpp}
///   void open(sink_window& w, unsigned long long base, unsigned long long n)
///        called by the same thread after a successful reservation with n > 0;
///   void store(const sink_window& w, unsigned long long index, const T& value)  any thread,
///        index inside the opened range;
///   T* extent(const sink_window& w, unsigned long long index, unsigned long long* first,
///             unsigned long long* end)  any thread: the piece of contiguous memory holding
///        index: indices [*first, *end) of the opened range live at the returned pointer
///        onward (it points at index *first).
/// @endcode
/// Source of a block's chunk (push_chunk), all members uniform except flag/value:
/// @code{.cpp}
///   bool all_flagged() const          true when every candidate is inserted (no counting pass);
///   bool flag(unsigned long long j) const, T value(unsigned long long j) const  for j < n.
/// @endcode
template <insert_algo Algo, unsigned MaxThreads = kMaxBlockThreads>
struct block_inserter {
    using rank_type = block_rank<Algo, MaxThreads>;
    using warp_rank_type = warp_rank<Algo, MaxThreads>;
    static constexpr unsigned kWarps = (MaxThreads + detail::kWarpLanes - 1) / detail::kWarpLanes;
    struct TempStorage {
        union {
            typename rank_type::TempStorage rank;      ///< push()
            typename warp_rank_type::TempStorage warp; ///< push_chunk()
        };
        sink_window window;
        unsigned long long warp_base[kWarps]; ///< push_chunk: each warp's count, then its offset
        unsigned long long base;
        unsigned long long count;
        int ok;
    };

    /// Thread 0 reserves `total` and opens the window; every thread returns the
    /// outcome and the base (one barrier).  Callers read s.window afterwards.
    template <class Sink>
    __device__ static bool reserve_block(TempStorage& s, Sink& sink, unsigned long long total,
                                         unsigned long long* base) {
        if (detail::block_thread_rank() == 0) {
            unsigned long long b = 0;
            const bool ok = total == 0 || detail::reserve_range(sink, total, &b);
            if (ok && total > 0) sink.open(s.window, b, total);
            s.ok = ok ? 1 : 0;
            s.base = b;
        }
        __syncthreads();
        *base = s.base;
        return s.ok != 0;
    }

    /// Every thread of the block calls with Items (flag, value) pairs.  Round k's
    /// inserted values are stored contiguously (coalesced), rounds one after the
    /// other; one reservation covers all rounds.  Returns the same bool in every
    /// thread: true when all flagged values were stored, false when the structure
    /// refused the reservation (then nothing of this call is stored).
    template <int Items, class T, class Sink>
    __device__ static bool push(TempStorage& s, Sink& sink, const bool (&flag)[Items], const T (&value)[Items]) {
        if (detail::block_thread_count() > MaxThreads) return false; // storage too small: refuse, touch nothing
        unsigned slot[Items], total[Items];
        block_rank_items<Algo, MaxThreads, Items>(s.rank, flag, slot, total);
        // Offsets within the block's range fit 32 bits (at most Items x 1024).
        unsigned off[Items], run = 0;
#pragma unroll
        for (int k = 0; k < Items; ++k) {
            off[k] = run + slot[k];
            run += total[k];
        }
        unsigned long long base = 0;
        const bool ok = reserve_block(s, sink, run, &base);
        if (ok && run > 0) {
            // Block-uniform: a range inside one contiguous piece (the usual case:
            // a GGArray bucket holds many blocks' ranges) is stored through one
            // pointer, without the per-element bucket lookup of sink.store.
            unsigned long long first = 0, end = 0;
            T* const ext = sink.extent(s.window, base, &first, &end);
            if (base + run <= end) {
                T* const p = ext + (base - first);
#pragma unroll
                for (int k = 0; k < Items; ++k)
                    if (flag[k]) p[off[k]] = value[k];
            } else {
#pragma unroll
                for (int k = 0; k < Items; ++k)
                    if (flag[k]) sink.store(s.window, base + off[k], value[k]);
            }
        }
        __syncthreads(); // the storage (base, window) may be reused right after the call
        return ok;
    }

    /// push_chunk when every warp's piece [lo, hi) is at most one tile: each
    /// candidate is read once, into registers, ranked in the warp, and stored
    /// after the block's reservation (no counting pass, two barriers).
    template <int Items, class T, class Sink, class Src>
    __device__ static bool push_one_tile(TempStorage& s, Sink& sink, unsigned long long lo, unsigned long long hi,
                                         const Src& src, unsigned warp, unsigned nwarps, unsigned mask,
                                         unsigned nlanes) {
        const unsigned lane = detail::lane_index();
        bool flag[Items];
        T value[Items];
#pragma unroll
        for (int k = 0; k < Items; ++k) {
            const unsigned long long j = lo + (unsigned long long)k * nlanes + lane;
            flag[k] = j < hi && (src.all_flagged() || src.flag(j));
            value[k] = flag[k] ? src.value(j) : T{};
        }
        unsigned off[Items], total = 0;
        warp_rank_type::template rank_tile<Items>(s.warp, mask, nlanes, flag, off, &total);
        if (lane == 0) s.warp_base[warp] = total;
        __syncthreads();
        unsigned long long count = 0; // thread 0's: the block's total, for reserve_block
        if (detail::block_thread_rank() == 0) {
            for (unsigned w = 0; w < nwarps; ++w) {
                const unsigned long long c = s.warp_base[w];
                s.warp_base[w] = count;
                count += c;
            }
        }
        unsigned long long base = 0;
        const bool ok = reserve_block(s, sink, count, &base);
        if (ok && total > 0) {
            const unsigned long long at = base + s.warp_base[warp];
            unsigned long long first = 0, end = 0;
            T* p = sink.extent(s.window, at, &first, &end);
            if (at + total <= end) {
                p += at - first;
#pragma unroll
                for (int k = 0; k < Items; ++k)
                    if (flag[k]) p[off[k]] = value[k];
            } else { // the warp's values straddle two pieces
#pragma unroll
                for (int k = 0; k < Items; ++k)
                    if (flag[k]) sink.store(s.window, at + off[k], value[k]);
            }
        }
        __syncthreads(); // the storage may be reused right after the call
        return ok;
    }

    /// A block's whole chunk with ONE reservation: every thread calls with the
    /// same n and src; the candidates are j in [0, n) (j: index in the block's
    /// chunk).  The chunk is cut into one contiguous piece per warp (multiples of
    /// 32 candidates).  Each warp counts its piece's flagged candidates (nothing
    /// to count when src.all_flagged()), the warps' counts are scanned, one thread
    /// reserves the block's total and opens the window (the only barriers), then
    /// every warp ranks its piece tile by tile (32 x Items candidates, candidate
    /// tile + k*32 + lane is item k) with Algo's warp-level ranking and stores the
    /// flagged ones at its offset, coalesced.  Chunk order is kept (atomic: order
    /// inside a tile arbitrary).  Returns the same bool in every thread; false:
    /// nothing of the chunk is stored.
    template <int Items, class T, class Sink, class Src>
    __device__ static bool push_chunk(TempStorage& s, Sink& sink, unsigned long long n, const Src& src) {
        if (detail::block_thread_count() > MaxThreads) return false; // storage too small: refuse, touch nothing
        const unsigned nt = detail::block_thread_count(), r = detail::block_thread_rank();
        const unsigned warp = r / detail::kWarpLanes, lane = detail::lane_index();
        const unsigned nwarps = (nt + detail::kWarpLanes - 1) / detail::kWarpLanes;
        const unsigned mask = detail::block_warp_mask(); // contiguous low lanes
        const unsigned nlanes = unsigned(__popc(mask));
        // Warp w's piece: [w*piece, (w+1)*piece) cut to n; piece a multiple of 32.
        unsigned long long piece = (n + nwarps - 1) / nwarps;
        piece = (piece + detail::kWarpLanes - 1) / detail::kWarpLanes * detail::kWarpLanes;
        const unsigned long long lo = (unsigned long long)warp * piece < n ? (unsigned long long)warp * piece : n;
        const unsigned long long hi = lo + piece < n ? lo + piece : n;
        if constexpr (Algo != insert_algo::tensor_scan) { // (its ranking needs init and a barrier first)
            // Block-uniform: full warps hold a tile of 32 x Items, the last warp
            // (maybe fewer lanes) what is left of n after the others' pieces.
            const unsigned long long last_lo = (nwarps - 1) * piece < n ? (nwarps - 1) * piece : n;
            const unsigned last_lanes = nt - (nwarps - 1) * detail::kWarpLanes;
            if (piece <= (unsigned long long)detail::kWarpLanes * Items &&
                n - last_lo <= (unsigned long long)last_lanes * Items)
                return push_one_tile<Items, T>(s, sink, lo, hi, src, warp, nwarps, mask, nlanes);
        }
        unsigned long long mine = 0;
        if (src.all_flagged()) {
            mine = lane == 0 ? hi - lo : 0;
        } else {
            for (unsigned long long j = lo + lane; j < hi; j += nlanes) mine += src.flag(j) ? 1u : 0u;
        }
        mine = detail::contiguous_lanes_inclusive_sum(mask, mine); // the last lane holds the warp's count
        if (lane == nlanes - 1) s.warp_base[warp] = mine;
        if constexpr (Algo == insert_algo::tensor_scan) warp_rank_type::init(s.warp);
        __syncthreads();
        if (r == 0) { // nwarps <= 32 values: one thread
            unsigned long long run = 0;
            for (unsigned w = 0; w < nwarps; ++w) {
                const unsigned long long c = s.warp_base[w];
                s.warp_base[w] = run;
                run += c;
            }
            s.count = run;
        }
        __syncthreads();
        const unsigned long long count = s.count;
        unsigned long long base = 0;
        const bool ok = reserve_block(s, sink, count, &base);
        if (ok && count > 0) {
            unsigned long long run = base + s.warp_base[warp];
            // The contiguous piece of the structure the warp is storing into
            // (a GGArray bucket), looked up again only when a tile leaves it.
            T* ext = nullptr;
            unsigned long long ext_first = 0, ext_end = 0;
            const unsigned long long per = (unsigned long long)nlanes * Items;
            // Full tiles skip the bounds checks (the compiler cannot drop them).
            auto tile = [&](unsigned long long t, auto full) {
                bool flag[Items];
                T value[Items];
#pragma unroll
                for (int k = 0; k < Items; ++k) {
                    const unsigned long long j = t + (unsigned long long)k * nlanes + lane;
                    flag[k] = (decltype(full)::value || j < hi) && src.flag(j);
                    value[k] = flag[k] ? src.value(j) : T{};
                }
                unsigned off[Items], total = 0;
                warp_rank_type::template rank_tile<Items>(s.warp, mask, nlanes, flag, off, &total);
                if (total == 0) return;
                if (run + total > ext_end) ext = sink.extent(s.window, run, &ext_first, &ext_end);
                if (run + total <= ext_end) {
                    T* p = ext + (run - ext_first);
#pragma unroll
                    for (int k = 0; k < Items; ++k)
                        if (flag[k]) p[off[k]] = value[k];
                } else { // the tile straddles two pieces
#pragma unroll
                    for (int k = 0; k < Items; ++k)
                        if (flag[k]) sink.store(s.window, run + off[k], value[k]);
                }
                run += total;
            };
            unsigned long long t = lo;
            for (; t + per <= hi; t += per) tile(t, bool_constant<true>{}); // uniform in the warp
            if (t < hi) tile(t, bool_constant<false>{});
        }
        __syncthreads(); // the storage may be reused right after the call
        return ok;
    }
};

/// Shared memory of a block's block-level push (push_back(storage, ...),
/// push_back_chunk), sized from the block shape, as CUB's `BlockScan<T, X, ALGO, Y, Z>`:
///
/// @code{.cpp}
/// __shared__ gpudyn::push_storage<256> temp;                    // 256-thread blocks
/// __shared__ gpudyn::push_storage<16, insert_algo::atomic, 16> t; // 16x16 blocks
/// @endcode
///
/// The refs' block-level calls deduce every parameter from it.  A block with
/// more threads than the storage serves is refused (every thread gets false;
/// nothing is reserved); fewer threads, any 1-D/2-D/3-D shape, are fine.
template <unsigned BlockDimX, insert_algo Algo = insert_algo::warp_scan, unsigned BlockDimY = 1, unsigned BlockDimZ = 1>
struct push_storage : block_inserter<Algo, BlockDimX * BlockDimY * BlockDimZ>::TempStorage {
    static_assert(BlockDimX >= 1 && BlockDimY >= 1 && BlockDimZ >= 1, "block dimensions are >= 1");
    static_assert(BlockDimX * BlockDimY * BlockDimZ <= kMaxBlockThreads, "a block has at most 1024 threads");
    static constexpr insert_algo algorithm = Algo;
    static constexpr unsigned max_threads = BlockDimX * BlockDimY * BlockDimZ;
    using inserter = block_inserter<Algo, max_threads>;
};

// ---- bulk insertion over a whole grid ------------------------------------
/// A bulk insertion of `count` candidates is cut into `parts` input ranges;
/// block b takes parts b, b + blocks, b + 2*blocks, ... and inserts each with one
/// reservation (push_back_part).  Several parts per resident block keep the
/// blocks' finishing times within one part of each other (one part per block
/// leaves SMs idle when the part count is not a multiple of the resident blocks).
///
/// A structure with several targets (the GGArray's LFVectors) gets a multiple of
/// `targets` parts; part p serves target t = p mod targets, and target t's parts
/// together cover count/targets candidates, the first count mod targets targets
/// one more.  Targets are dealt from first_target on (part p goes to the
/// structure's target (t + first_target) mod targets): with first_target = size
/// mod targets, every host insertion keeps LFVector l at floor(size/L) + (l <
/// size mod L) elements, i.e. the LFVectors within one element of each other.
/// With one target, range boundaries are rounded down to kBulkPartAlign candidates.
constexpr unsigned kBulkPartsPerBlock = 8;
/// One-target range starts on 256-element (>= 256-byte) boundaries: aligned loads and stores.
constexpr unsigned long long kBulkPartAlign = 256;

struct bulk_plan {
    unsigned long long parts; ///< 0 when count is 0; a multiple of targets
    unsigned targets;
    unsigned first_target;
    unsigned grid; ///< blocks to launch: min(resident, parts)
};
/// resident: blocks that run at once (SMs x blocks per SM); targets >= 1;
/// min_part: the smallest part worth a reservation, in candidates (a block's
/// tile, threads x items: below it warps idle and each part's barriers and
/// reservation dominate, so small insertions use fewer, fuller parts).
__host__ __device__ inline bulk_plan plan_bulk_insert(unsigned long long count, unsigned resident, unsigned targets,
                                                      unsigned long long min_part, unsigned first_target = 0) {
    bulk_plan p{0, targets == 0 ? 1u : targets, 0, 0};
    p.first_target = first_target % p.targets;
    if (count == 0) return p;
    if (resident == 0) resident = 1;
    if (min_part == 0) min_part = 1;
    unsigned long long parts = (unsigned long long)resident * kBulkPartsPerBlock;
    const unsigned long long by_size = (count + min_part - 1) / min_part;
    if (parts > by_size) parts = by_size;
    p.parts = (parts + p.targets - 1) / p.targets * p.targets;
    p.grid = unsigned(p.parts < resident ? p.parts : resident);
    return p;
}

/// Input range [`*lo`, `*hi`) of part p (see above).
__host__ __device__ inline void bulk_part_range(unsigned long long count, const bulk_plan& plan, unsigned long long p,
                                                unsigned long long* lo, unsigned long long* hi) {
    const unsigned long long T = plan.targets, each = plan.parts / T;
    const unsigned long long t = p % T, k = p / T;
    const unsigned long long base = count / T, extra = count % T;
    const unsigned long long start = t * base + (t < extra ? t : extra);
    const unsigned long long len = base + (t < extra ? 1 : 0);
    // floor(k * len / each) without overflow, aligned down with one target.
    auto sub = [&](unsigned long long j) {
        if (j >= each) return len;
        const unsigned long long v = (len / each) * j + (len % each) * j / each;
        return T == 1 ? v / kBulkPartAlign * kBulkPartAlign : v;
    };
    *lo = start + sub(k);
    *hi = start + sub(k + 1);
}

/// Every thread of every block calls (any grid shape: blocks beyond the parts do
/// nothing).  make_source(lo) gives the source of the range starting at
/// candidate lo.  Returns false in every thread of a block when one of its parts
/// was refused (the structure's status says why).
template <int Items, class Storage, class Ref, class MakeSource>
__device__ bool push_back_parts(Storage& s, const Ref& ref, unsigned long long count, const bulk_plan& plan,
                                MakeSource make_source) {
    bool ok = true;
    const unsigned long long blocks = (unsigned long long)gridDim.x * gridDim.y * gridDim.z;
    for (unsigned long long p = detail::block_linear_index(); p < plan.parts; p += blocks) {
        unsigned long long lo = 0, hi = 0;
        bulk_part_range(count, plan, p, &lo, &hi);
        ok = ref.template push_back_part<Items>(p + plan.first_target, s, hi - lo, make_source(lo)) && ok;
    }
    return ok;
}

} // namespace v0
} // namespace gpudyn
