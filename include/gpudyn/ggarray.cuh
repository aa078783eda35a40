/// @file
/// GGArray (Meneses, Navarro & Ferrada): a growable GPU array made of LFVectors
/// (a thread block pushes into LFVector blockIdx mod num_lfvectors).  LFVector l
/// holds its elements in buckets; bucket b has first·2^b elements and is
/// allocated inside a kernel, on demand, by the one thread that wins a
/// compare-and-swap on its state (the precursor report's fix: no thread
/// allocates before knowing it is the one): in place in the host-mapped bucket
/// pool, else bumped off the array's growth arena (memory the host allocated or
/// took from a gpudyn heap: the array's budget; never CUDA's device malloc).
/// `ranges` is the exclusive prefix sum of the LFVector sizes (computed by
/// get_view) so a global index finds its LFVector by binary search.
///
/// The natural call is the fast one: any thread, any branch, one element.
///
/// @code{.cpp}
/// __global__ void keep_small(gpudyn_ggarray_view_t view, const int* in, unsigned n) {
///     const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
///     if (i >= n) return;                              // early return: fine
///     const gpudyn::ggarray_ref<int> a{view};
///     if (in[i] < 90 && !a.push_back(in[i])) { ... } // false: out of memory (status set)
/// }
/// @endcode
///
/// Lanes that call push_back together share one reservation (one atomicAdd on
/// their LFVector's counter per warp group, warp_push.cuh); a range that lies in
/// the bucket the LFVector's window names (almost all of them) is stored through
/// the window's pointer, read together with the atomic, with no bucket
/// arithmetic; stores are coalesced; no shared memory, no barrier.  Block-level forms with storage from
/// the block shape (`push_storage<256>`) remain for kernels that ask for them.
///
/// Element access goes by *spans* — contiguous pieces of one bucket — so
/// read/write loops are plain coalesced loops over memory, with the bucket
/// arithmetic done once per span, not once per element.
///
/// Nothing lost, failure visible.  Reservations take ranges of an LFVector with
/// one atomicAdd; a range whose buckets cannot be had fails whole (nothing
/// stored), records its start in failed_at[l] (atomicMin) and the status word
/// says why.  LFVector l then holds exactly [0, min(sizes[l], failed_at[l])):
/// every range below the lowest failed start was stored and every range at or
/// above it failed, because
///   - buckets become ready in order: a reservation makes every bucket from the
///     ready prefix (growth word, bits 0-7) up to its last one ready before it
///     stores, so a ready bucket has every lower bucket ready;
///   - a failed allocation of bucket b seals the LFVector at b (growth word bits
///     8-15) before the bucket is released, and no reservation that needs a
///     bucket >= the seal succeeds afterwards (the seal and the ready prefix
///     live in one word: the prefix never passes a seal).
/// So once a range failed, no range above it can have been stored.  The host
/// folds the counters back (size = min(sizes, failed_at), seal lifted) at its
/// next push_back / reserve / set_budget (a raise) / clear / clear_status; the
/// status bits stay until clear_status or clear.
///
/// A view of another layout version or element size is refused: valid() is
/// false, every push returns false, size() is 0 and spans visit nothing; no
/// counter or bucket is touched.  A `ggarray_ref<T>` whose sizeof(T) is not the
/// array's element size sets GPUDYN_ARRAY_STATUS_WRONG_ELEMENT_SIZE, so the
/// host sees the mistake (a view of another version has no status word to set).
///
/// Registers.  A kernel that pushes into a GGArray contains the growth path
/// (bucket claim, then a bump of the growth arena), which is why that path is
/// a bump and not a heap's page-run search, and why nothing in it waits but
/// ensure_bucket's one loop (an arena bucket the host has yet to map is
/// published pending, and its claimer polls the host from that loop): values
/// live across a nested wait are values every push kernel keeps in registers.
/// A kernel pushing one value a thread takes 32-36 registers a thread (sm_90,
/// nvcc 13.0; it took 40-46 with the wait nested in the bump), so full or 75 %
/// occupancy to hide the latency of the reservation's atomic; under
/// `__launch_bounds__(256)` ptxas keeps it at 32 with a few bytes of spills.
/// Kernels that hold many items a thread (16 flags and values) take 64-80;
/// blocks of up to 768 threads launch as they are, a kernel launched with
/// larger blocks needs `__launch_bounds__(threads)`, else the launch fails with
/// cudaErrorLaunchOutOfResources.
/// Compiles under nvcc and NVRTC.
#pragma once

#if defined(__CUDACC_RTC__)
#include <cuda/std/cstdint>
#include <cuda/std/cstddef>
#endif
#include "gpudyn/ggarray.h"
#include "gpudyn/detail/array_state.cuh"
#include "gpudyn/detail/contiguous_array.cuh"

namespace gpudyn {
inline namespace v0 {

namespace ggarray_detail {
/// Bucket states (view .bucket_state): ready buckets are kReady (taken from
/// the growth arena) or kReadyPool (a slice of the pool); neither is freed
/// alone (the arena and the pool go whole, at destroy).
constexpr unsigned kEmpty = 0, kBusy = 1, kReady = 2, kReadyPool = 3;
/// Back-off while another thread allocates a bucket (ns): the first wait, then
/// doubled kWaitDoublings times (to 1 us; a growth takes a few global round
/// trips); a claimer polling the host's mailbox doubles to 8 us.
constexpr unsigned kWaitNs = 128, kWaitDoublings = 3, kPendingDoublings = 6;

/// The growth arena (view .arena): buckets beyond the pool rows are bumped
/// off [base, base + size).  Either a fixed run (the array's budget taken
/// whole, or a run of a heap it shares), or, by default, a virtual range whose
/// physical memory the host maps as the bumps reach it (mailbox != 0): a
/// bucket past the mapped end asks the library's host thread for more through
/// the host-mapped mailbox and waits for it, so memory follows the output and
/// a kernel can grow into what the device can give.  A bump is one atomicAdd;
/// it keeps the growth path of every push kernel to a few registers (the
/// page-run search of a heap made a per-thread push kernel 48-64 registers a
/// thread instead of 32-48: fewer resident warps to hide the reservation's
/// atomic).
struct arena_record {
    unsigned long long taken;    ///< bytes handed out or refused from base (refused ones stay counted)
    unsigned long long base;     ///< device address of the arena (0: none yet)
    unsigned long long size;     ///< bytes of it usable now (the budget)
    unsigned long long refused;  ///< largest request refused since the host last looked (atomicMax)
    unsigned long long end;      ///< end of the last bucket handed out (atomicMax): where the host resumes
    unsigned long long refusals; ///< requests refused (a count, for tests and stats)
    unsigned long long mailbox;  ///< device address of the growth_mailbox (0: the whole run is mapped)
    unsigned long long mapped;   ///< bytes from base known mapped (a lower bound, raised with atomicMax)
};
/// Host-mapped (pinned) words shared with the library's host thread while kernels run.
struct growth_mailbox {
    unsigned long long want;     ///< highest end a bucket waits for (device atomicMax)
    unsigned long long mapped;   ///< bytes from base mapped now (host writes, after the mapping is usable)
    unsigned long long limit;    ///< the host could not map past this (~0: no refusal yet)
    unsigned long long requests; ///< buckets that had to wait (a count, for stats)
};
/// Buckets start on this alignment (the widest vector access, and then some).
constexpr unsigned long long kArenaAlign = 256;
/// A claimer refuses its bucket when the host has not mapped it after this many
/// waits (some 4 s or more at the longest back-off): the host thread answers in
/// microseconds to milliseconds; this only ends a wait nobody answers.
constexpr unsigned kPendingPolls = 1u << 19;
/// The mailbox's words in global space: its address is read from memory, and
/// through a generic pointer every atomic tests for shared memory at run time
/// (a second code path and its registers in every push kernel).
__device__ inline unsigned long long mailbox_load(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.volatile.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ inline void mailbox_max(unsigned long long* p, unsigned long long v) {
    asm volatile("red.relaxed.gpu.global.max.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ inline void mailbox_add(unsigned long long* p, unsigned long long v) {
    asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
/// Bit 0 of a bucket slot: the bucket's memory is bumped off the arena but the
/// host has not mapped it yet (buckets start kArenaAlign-aligned, pool slices
/// on 32 elements: a published pointer never has it).
constexpr unsigned long long kSlotPending = 1;
/// A refusal of `need` bytes, for the host (largest refused, count).
__device__ inline void arena_refuse(arena_record* a, unsigned long long need) {
    atomicMax(&a->refused, need);
    atomicAdd(&a->refusals, 1ull);
}
/// True when the arena's first `end` bytes are mapped: by the device's lower
/// bound, else by the host's mailbox (the bound then raised to it).
__device__ inline bool arena_covers(arena_record* a, growth_mailbox* m, unsigned long long end) {
    if (end <= *static_cast<volatile unsigned long long*>(&a->mapped)) return true;
    const unsigned long long now = mailbox_load(&m->mapped);
    if (end > now) return false;
    atomicMax(&a->mapped, now);
    return true;
}
/// Bumps `need` bytes (a multiple of kArenaAlign) off the arena at `record`: the
/// bucket's address, | kSlotPending when the host must map it first (asked
/// here); 0 when it does not fit (refused; `taken` stays past it, so the rest
/// of the launch's requests fail too, until the host resets it to `end`).
/// No wait here: the claimer polls arena_pending in ensure_bucket's one wait
/// loop (a wait nested in the allocation kept six more registers live in
/// every push kernel, so fewer resident warps).
__device__ inline unsigned long long arena_take(unsigned long long record, unsigned long long need) {
    if (record == 0) return 0;
    arena_record* a = reinterpret_cast<arena_record*>(record);
    // The host changes base and size only between launches (size 0 while base is 0).
    const unsigned long long end = atomicAdd(&a->taken, need) + need;
    const unsigned long long size = *static_cast<volatile unsigned long long*>(&a->size);
    if (end > size || end < need) {
        arena_refuse(a, need);
        return 0;
    }
    const unsigned long long p = *static_cast<volatile unsigned long long*>(&a->base) + (end - need);
    const unsigned long long mb = *static_cast<volatile unsigned long long*>(&a->mailbox);
    if (mb != 0 && !arena_covers(a, reinterpret_cast<growth_mailbox*>(mb), end)) {
        growth_mailbox* m = reinterpret_cast<growth_mailbox*>(mb); // the host is asked; the claimer waits for it
        mailbox_max(&m->want, end);
        mailbox_add(&m->requests, 1ull);
        return p | kSlotPending;
    }
    atomicMax(&a->end, end);
    return p;
}
/// The mapping of a pending bucket (slot word w, `need` bytes): 1 once the host
/// has mapped it (recorded in the arena), -1 when it cannot (past its limit),
/// 0 not yet.
__device__ inline int arena_pending(unsigned long long record, unsigned long long w, unsigned long long need) {
    arena_record* a = reinterpret_cast<arena_record*>(record);
    const unsigned long long base = *static_cast<volatile unsigned long long*>(&a->base);
    const unsigned long long end = (w & ~kSlotPending) - base + need;
    growth_mailbox* m = reinterpret_cast<growth_mailbox*>(*static_cast<volatile unsigned long long*>(&a->mailbox));
    if (arena_covers(a, m, end)) {
        atomicMax(&a->end, end);
        return 1;
    }
    return end > mailbox_load(&m->limit) ? -1 : 0;
}
/// Growth word of an LFVector (view .growth): bits 0-7 the ready prefix (buckets
/// 0..n-1 ready), bits 8-15 1 + the sealed bucket (0: none).
constexpr unsigned kPrefixMask = 0xffu, kSealShift = 8;
/// The seal as a bucket bound: every bucket >= it is refused (255: no seal).
__host__ __device__ constexpr unsigned seal_of(unsigned g) { return ((g >> kSealShift) + 0xffu) & 0xffu; }
__host__ __device__ constexpr unsigned prefix_of(unsigned g) { return g & kPrefixMask; }
/// For the library's bookkeeping kernels (grow, capacity, ranges): the ref's internals.
struct internal;
} // namespace ggarray_detail

template <class T>
class ggarray_ref {
public:
    using value_type = T;

    __host__ __device__ explicit ggarray_ref(const gpudyn_ggarray_view_t& v) : view_(v) {}
    /// False for a view of another layout version or element size (every operation refuses it).
    __host__ __device__ bool valid() const {
        return view_.version == GPUDYN_GGARRAY_VIEW_VERSION && view_.element_size == sizeof(T);
    }
    __host__ __device__ unsigned num_lfvectors() const { return view_.num_lfvectors; }

    /// @name per-thread push (any thread, any divergence)
    /// @{

    /// Appends x to the calling block's LFVector (linear block index mod
    /// num_lfvectors).  The lanes that call together on this array share one
    /// reservation (lanes of the warp calling another array form their own group).
    /// False when no memory could be had (status set; x not stored) or the view
    /// is refused.
    __device__ bool push_back(const T& x) const {
        if (!valid()) return refuse();
        const unsigned l = block_lfvector();
        return detail::warp_push_one<T>(peers(l), sink{this, l}, x);
    }
    /// Appends values[0..n) (n may be 0 and differ per thread) to the block's
    /// LFVector: one reservation of the group's total; all or nothing per group
    /// (every lane of the group gets the group's answer, a lane with n == 0 too).
    __device__ bool push_back(const T* values, unsigned n) const {
        if (!valid()) return refuse();
        const unsigned l = block_lfvector();
        return detail::warp_push_many<T>(peers(l), sink{this, l}, values, n);
    }
    /// Items (flag, value) pairs per thread: the flagged values of the lanes that
    /// call together with one reservation, item k of every lane (lane order)
    /// before item k + 1 (a warp that loads candidate k * 32 + lane keeps input
    /// order); all or nothing per group.  No shared memory, no barrier.
    template <int Items>
    __device__ bool push_back(const bool (&flag)[Items], const T (&value)[Items]) const {
        if (!valid()) return refuse();
        const unsigned l = block_lfvector();
        return detail::warp_push_flagged<Items>(peers(l), sink{this, l}, flag, value);
    }
    /// Appends x to LFVector l (l < num_lfvectors, else false): lanes that call
    /// together with the same array and l share one reservation.
    __device__ bool push_back_to(unsigned l, const T& x) const {
        if (!valid()) return refuse();
        const unsigned group = peers(l);
        if (l >= view_.num_lfvectors) return false; // the whole peer group leaves together
        return detail::warp_push_one<T>(group, sink{this, l}, x);
    }

    /// @}

    /// @name block-level push (every thread of the block calls)
    /// @{

    /// Items (flag, value) pairs per thread appended to LFVector l with one
    /// reservation; the same bool in every thread.
    template <unsigned BX, insert_algo A, unsigned BY, unsigned BZ, int Items>
    __device__ bool push_back_to(unsigned l, push_storage<BX, A, BY, BZ>& s, const bool (&flag)[Items],
                                 const T (&value)[Items]) const {
        if (!valid()) return refuse();
        if (l >= view_.num_lfvectors) return false;
        sink k{this, l};
        return push_storage<BX, A, BY, BZ>::inserter::push(s, k, flag, value);
    }
    /// The block's own LFVector.
    template <unsigned BX, insert_algo A, unsigned BY, unsigned BZ, int Items>
    __device__ bool push_back(push_storage<BX, A, BY, BZ>& s, const bool (&flag)[Items],
                              const T (&value)[Items]) const {
        if (!valid()) return refuse(); // before block_lfvector: a refused view's fields mean nothing
        return push_back_to(block_lfvector(), s, flag, value);
    }
    template <unsigned BX, insert_algo A, unsigned BY, unsigned BZ>
    __device__ bool push_back(push_storage<BX, A, BY, BZ>& s, bool flag, const T& value) const {
        const bool f[1] = {flag};
        const T v[1] = {value};
        return push_back(s, f, v);
    }
    /// A block's chunk of n candidates (src.flag(j), src.value(j), j < n; see
    /// block_inserter::push_chunk) appended to LFVector l with ONE reservation.
    /// Every thread of the block calls with the same l, n and src.  Fastest with
    /// n <= threads x Items: each candidate is then read once (larger chunks are
    /// read twice, count then store).
    template <int Items = 8, unsigned BX, insert_algo A, unsigned BY, unsigned BZ, class Src>
    __device__ bool push_back_chunk_to(unsigned l, push_storage<BX, A, BY, BZ>& s, unsigned long long n,
                                       const Src& src) const {
        if (!valid()) return refuse();
        if (l >= view_.num_lfvectors) return false;
        sink k{this, l};
        return push_storage<BX, A, BY, BZ>::inserter::template push_chunk<Items, T>(s, k, n, src);
    }
    /// Into the block's own LFVector.
    template <int Items = 8, unsigned BX, insert_algo A, unsigned BY, unsigned BZ, class Src>
    __device__ bool push_back_chunk(push_storage<BX, A, BY, BZ>& s, unsigned long long n, const Src& src) const {
        if (!valid()) return refuse();
        return push_back_chunk_to<Items>(block_lfvector(), s, n, src);
    }
    /// Part p of a bulk insertion (push_back_parts): LFVector p mod num_lfvectors.
    template <int Items = 8, unsigned BX, insert_algo A, unsigned BY, unsigned BZ, class Src>
    __device__ bool push_back_part(unsigned long long p, push_storage<BX, A, BY, BZ>& s, unsigned long long n,
                                   const Src& src) const {
        if (!valid()) return refuse();
        return push_back_chunk_to<Items>(unsigned(p % view_.num_lfvectors), s, n, src);
    }

    /// @}

    /// @name sizes (any thread)
    /// @{

    /// Elements stored now: the sum over the LFVectors (num_lfvectors loads: call
    /// it from one thread, or read the host's size).  0 for a refused view.
    /// Counters are read live, so a kernel queued after the pushing one sees
    /// them all, whenever its view was taken; a consumer that does not push
    /// reads the same count in one load from ranged_size() (view taken after
    /// the producer was queued).
    __device__ unsigned long long size() const {
        if (!valid()) return refuse(), 0;
        unsigned long long n = 0;
        for (unsigned l = 0; l < view_.num_lfvectors; ++l) n += lfvector_size(l);
        return n;
    }
    /// Elements stored now in LFVector l.
    __device__ unsigned long long lfvector_size(unsigned l) const {
        if (!valid()) return refuse(), 0;
        if (l >= view_.num_lfvectors) return 0;
        return held(l);
    }

    /// @}

    /// @name access by global index (valid as of get_view)
    /// @{

    /// Elements covered by at() and the spans: the size as of the last get_view
    /// (one load).  get_view recomputes the ranges in a kernel on its stream, so
    /// a kernel queued after it on that stream sees every element the work
    /// queued before it stored, with no host wait.
    __device__ unsigned long long ranged_size() const {
        if (!valid()) return refuse(), 0;
        return ranges()[view_.num_lfvectors];
    }
    /// Element i, i < ranged_size() (valid() required): LFVector after LFVector,
    /// the order of flatten.
    __device__ T& at(unsigned long long i) const {
        const unsigned l = lfvector_of(i);
        const unsigned long long local = i - ranges()[l];
        const unsigned b = bucket_of(local);
        return bucket(l, b)[local - bucket_first(b)];
    }
    /// The first span of [lo, hi) ∩ [0, ranged_size()): p with p[0..`*n`) the
    /// global elements [lo, lo + `*n`), all in one bucket of one LFVector; `*n` = 0
    /// and nullptr when lo >= min(hi, ranged_size()).  Stepping lo by `*n` visits
    /// [lo, hi) as for_each_span does, in a loop a caller writes itself (Numba):
    /// @code{.cpp}
    /// for (unsigned long long n = 0; lo < hi; lo += n) { const T* p = a.span(lo, hi, &n); if (n == 0) break; ... }
    /// @endcode
    __device__ T* span(unsigned long long lo, unsigned long long hi, unsigned long long* n) const {
        *n = 0;
        if (!valid()) return refuse(), nullptr;
        const unsigned long long* r = ranges();
        const unsigned long long end = r[view_.num_lfvectors];
        if (hi > end) hi = end;
        if (lo >= hi) return nullptr;
        const unsigned l = lfvector_of(lo); // r[l] <= lo < r[l + 1]
        const unsigned long long local = lo - r[l];
        const unsigned b = bucket_of(local);
        const unsigned long long in_lfvector = r[l + 1] - lo, in_bucket = bucket_first(b) + bucket_elements(b) - local;
        unsigned long long m = hi - lo;
        if (m > in_lfvector) m = in_lfvector;
        if (m > in_bucket) m = in_bucket;
        *n = m;
        return bucket(l, b) + (local - bucket_first(b));
    }
    /// Calls f(T* p, n, first) for each contiguous piece p[0..n) holding global
    /// elements [first, first + n) of [lo, hi) ∩ [0, ranged_size()), in order.
    /// Per span: one bucket lookup; loop over p with coalesced accesses.
    template <class F>
    __device__ void for_each_span(unsigned long long lo, unsigned long long hi, F&& f) const {
        if (!valid()) {
            refuse();
            return;
        }
        const unsigned long long* r = ranges();
        const unsigned long long end = r[view_.num_lfvectors];
        if (hi > end) hi = end;
        if (lo >= hi) return;
        unsigned l = lfvector_of(lo);
        while (lo < hi) {
            const unsigned long long lfv_end = r[l + 1];
            if (lo >= lfv_end) {
                ++l;
                continue;
            }
            const unsigned long long local = lo - r[l];
            const unsigned b = bucket_of(local);
            const unsigned long long in_bucket = bucket_first(b) + bucket_elements(b) - local;
            unsigned long long n = hi - lo;
            if (n > lfv_end - lo) n = lfv_end - lo;
            if (n > in_bucket) n = in_bucket;
            f(bucket(l, b) + (local - bucket_first(b)), n, lo);
            lo += n;
        }
    }
    /// Every element (as of get_view), span by span.
    template <class F>
    __device__ void for_each_span(F&& f) const {
        for_each_span(0ull, ~0ull, static_cast<F&&>(f));
    }

    /// @}
private:
    friend struct ggarray_detail::internal;
    gpudyn_ggarray_view_t view_;

    /// A 1-D grid (the usual one) takes a 32-bit remainder, a mask when the
    /// count is a power of two (the default 512): the 64-bit remainder of the
    /// linear index is a library call of some 70 instructions at every push.
    __device__ unsigned block_lfvector() const {
        const unsigned L = view_.num_lfvectors;
        if (gridDim.y == 1 && gridDim.z == 1) return (L & (L - 1)) == 0 ? blockIdx.x & (L - 1) : blockIdx.x % L;
        return unsigned(detail::block_linear_index() % L);
    }

    /// @name layout arithmetic
    /// @{

    /// Bucket holding local index i: b with first·(2^b − 1) <= i < first·(2^(b+1) − 1).
    __device__ unsigned bucket_of(unsigned long long i) const {
        return 63u - unsigned(__clzll((long long)((i >> view_.log2_first_bucket) + 1ull)));
    }
    __host__ __device__ unsigned long long bucket_first(unsigned b) const {
        return ((1ull << b) - 1ull) << view_.log2_first_bucket;
    }
    __host__ __device__ unsigned long long bucket_elements(unsigned b) const {
        return 1ull << (view_.log2_first_bucket + b);
    }
    __device__ unsigned long long* counters() const { return reinterpret_cast<unsigned long long*>(view_.sizes); }
    /// The lanes calling now that push into LFVector l of this array (others may
    /// push into another array, or another LFVector).  l need not be valid.
    __device__ unsigned peers(unsigned l) const { return detail::peers_with(__activemask(), view_.sizes + 8ull * l); }
    __device__ unsigned long long* failed() const { return reinterpret_cast<unsigned long long*>(view_.failed_at); }
    /// Elements LFVector l holds: min(counter, lowest failed start).  No check of
    /// the element size: the library's ranges kernel reads any array's counters
    /// through one instantiation (`ggarray_ref<unsigned char>`), whose valid() is
    /// false for every other element size.
    __device__ unsigned long long held(unsigned l) const { return detail::held_elements(counters() + l, failed() + l); }
    __device__ unsigned* growth(unsigned l) const { return reinterpret_cast<unsigned*>(view_.growth) + l; }
    __device__ unsigned* status_word() const { return reinterpret_cast<unsigned*>(view_.status); }
    /// valid() is false.  A view of this layout bound with the wrong element type
    /// says so in its status word (read first: one atomic per misused array, not
    /// per call); a view of another version has no status word we can find.
    __device__ bool refuse() const {
        if (view_.version == GPUDYN_GGARRAY_VIEW_VERSION && view_.status != 0)
            detail::report_wrong_element_size(status_word());
        return false;
    }
    __device__ const unsigned long long* ranges() const {
        return reinterpret_cast<const unsigned long long*>(view_.ranges);
    }
    /// Bucket-major (bucket b of every LFVector side by side): the slots a kernel
    /// reads at each push, those of the LFVectors' newest buckets, share a few
    /// lines that stay in the SM's L1 (LFVector-major, each push of an SM read a
    /// line of its own LFVector, mostly from L2: a second round trip after the
    /// reservation's atomic).
    __device__ unsigned* state(unsigned l, unsigned b) const {
        return reinterpret_cast<unsigned*>(view_.bucket_state) + (unsigned long long)b * view_.num_lfvectors + l;
    }
    __device__ unsigned long long* bucket_slot(unsigned l, unsigned b) const {
        return reinterpret_cast<unsigned long long*>(view_.buckets) + (unsigned long long)b * view_.num_lfvectors + l;
    }
    /// Read through L2 (volatile): another SM may have just published it.
    __device__ T* bucket(unsigned l, unsigned b) const {
        return reinterpret_cast<T*>(*static_cast<volatile unsigned long long*>(bucket_slot(l, b)));
    }
    /// Bucket b of l, which the caller's reservation made ready.  Its slot goes
    /// from 0 to the pointer once within a kernel and never changes, so a
    /// non-null read is the pointer, whatever cache served it: the first read
    /// is a CTA-scope relaxed load, which the SM's L1 may serve (every warp of
    /// the SM pushing into this LFVector reads the same line; a read through
    /// L2 costs each push a second round trip after its atomic).  Null means
    /// the publication is not visible to this thread yet: ensure_bucket on a
    /// ready bucket reads the slot through L2 until it is.
    __device__ T* ready_bucket(unsigned l, unsigned b) const {
        unsigned long long w;
        asm volatile("ld.relaxed.cta.global.u64 %0, [%1];" : "=l"(w) : "l"(bucket_slot(l, b)));
        // Stale in L1 (0, or pending: the line holds other LFVectors' slots):
        // the pointer is in L2 already, the reservation made the bucket ready.
        while (w == 0 || (w & ggarray_detail::kSlotPending) != 0) w = slot_word(l, b);
        return reinterpret_cast<T*>(w);
    }

    /// Bucket b of l's slot word, read through L2: 0 (none), a pointer, or a
    /// pending one (| kSlotPending).
    __device__ unsigned long long slot_word(unsigned l, unsigned b) const {
        unsigned long long w;
        asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(bucket_slot(l, b)) : "memory");
        return w;
    }

    /// @}

    /// @name bucket pool
    /// @{

    /// True when bucket b's row (bucket b of every LFVector) is mapped in the pool.
    __device__ bool pool_has(unsigned b) const { return view_.pool != 0 && b < view_.pool_rows; }
    /// Pool address of bucket b of LFVector l (rows are laid out bucket after bucket).
    __device__ T* pool_bucket(unsigned l, unsigned b) const {
        const unsigned long long elems =
            (((unsigned long long)view_.num_lfvectors * ((1ull << b) - 1ull)) + ((unsigned long long)l << b))
            << view_.log2_first_bucket;
        return reinterpret_cast<T*>(view_.pool) + elems;
    }

    /// @}

    /// @name growth word
    /// @{

    /// Seals LFVector l at bucket b (see the file comment); a fence orders it
    /// before the caller releases the bucket, so whoever claims the bucket next sees it.
    __device__ void seal(unsigned l, unsigned b) const {
        using namespace ggarray_detail;
        unsigned g = *static_cast<volatile unsigned*>(growth(l));
        while (seal_of(g) > b) {
            const unsigned want = (g & ~(0xffu << kSealShift)) | ((b + 1u) << kSealShift);
            const unsigned seen = atomicCAS(growth(l), g, want);
            if (seen == g) break;
            g = seen;
        }
        __threadfence();
    }
    /// True when LFVector l is sealed at or below bucket b: no reservation that
    /// needs b can succeed before the host folds (volatile: through L2).
    __device__ bool sealed_at_or_below(unsigned l, unsigned b) const {
        return ggarray_detail::seal_of(*static_cast<volatile unsigned*>(growth(l))) <= b;
    }
    /// Buckets prefix..last made ready in order, then the ready prefix raised to
    /// last + 1 unless a seal at or below last came first (then false).  A seal
    /// already there fails the reservation before any allocation: once the
    /// budget ran out, every later reservation of the LFVector would otherwise
    /// retry the arena for the sealed bucket, one after the other (the bucket's
    /// state serializes them), which made an exhausted kernel crawl.
    /// g: the growth word as settle just read it (through L2).  Once every
    /// bucket up to last is ready no seal at or below last exists or can come (a
    /// seal marks a bucket that failed), so the answer is true.  Raising the
    /// prefix only spares later reservations the bucket checks: one lane of
    /// those arriving together does it (every lane of a warp group settles the
    /// same range; 32 compare-and-swaps on one word per group made each growth
    /// of a busy kernel a queue at that word).  (Letting only the allocating
    /// thread raise it, through an out-flag of ensure_bucket, made push kernels
    /// spill registers on their fast path; sm_90, nvcc 13.0.)
    __device__ bool grow_prefix(unsigned l, unsigned g, unsigned last) const {
        using namespace ggarray_detail;
        if (seal_of(g) <= last) return refuse_sealed();
        for (unsigned b = prefix_of(g); b <= last; ++b)
            if (!ensure_bucket(l, b)) return false;
        if (detail::lane_index() == detail::lowest_bit(__activemask())) raise_prefix(l, last);
        return true;
    }
    /// The ready prefix raised to last + 1 (buckets 0..last ready), unless it is
    /// there already or a seal would be passed.  (The word is read again here:
    /// settle's copy kept live across the bucket waits made push kernels spill
    /// on their fast path; sm_90, nvcc 13.0.)
    __device__ void raise_prefix(unsigned l, unsigned last) const {
        using namespace ggarray_detail;
        // Release: the buckets' pointers before the raised prefix (acq_rel, not
        // the sequentially consistent __threadfence: nothing here needs more).
        asm volatile("fence.acq_rel.gpu;" ::: "memory");
        unsigned g = *static_cast<volatile unsigned*>(growth(l));
        while (prefix_of(g) <= last && seal_of(g) > last) {
            const unsigned seen = atomicCAS(growth(l), g, (g & ~kPrefixMask) | (last + 1u));
            if (seen == g) return;
            g = seen;
        }
    }

    /// @}

    /// @name bucket allocation (paper Alg. 2), one thread
    /// @{

    /// True once bucket b of LFVector l exists.  Exactly one thread claims it
    /// (pool slice or arena bump); others wait for it.  An arena bucket the host
    /// has not mapped yet is published pending (its slot | kSlotPending) and its
    /// claimer, waiting in the same loop as the others, finishes it once mapped
    /// (or refuses it); the claimer waits only for the host, so no wait deadlocks.  When the
    /// arena has no room left (the budget) the LFVector is sealed at b, the
    /// bucket returns to empty and the status word says so; nothing stored is
    /// touched.  A bucket at or above a seal is refused without asking the arena.
    __device__ bool ensure_bucket(unsigned l, unsigned b) const {
        using namespace ggarray_detail;
        if (b >= GPUDYN_GGARRAY_MAX_BUCKETS) {
            atomicOr(status_word(), detail::kArrayCapacityExceeded);
            return false;
        }
        bool tried = false;
        unsigned polls = 0; // waits so far: the back-off, and the end of a pending wait
        for (;;) {
            // Published: the slot goes from 0 to the pointer once (through a
            // pending word for an arena bucket) and is what callers read
            // (ready_bucket), so seeing it through L2 is enough; no acquire (an
            // acquire load invalidates the SM's L1: at a growth every pusher of
            // the LFVector comes here).
            const unsigned long long w = slot_word(l, b);
            if (w != 0 && (w & kSlotPending) == 0) return true;
            if (w != 0) {
                // Pending: its claimer asks the host (the mailbox is host
                // memory: every waiter polling it across the bus slowed the
                // host's mapping and the whole kernel); the others wait for the slot.
                if (tried) {
                    const int mapped = arena_pending(view_.arena, w, arena_bytes(b));
                    if (mapped != 0 || polls > kPendingPolls) finish_pending(l, b, w, mapped > 0);
                }
            } else {
                const unsigned s = *static_cast<volatile unsigned*>(state(l, b));
                if (s >= kReady) continue; // ready: its slot is visible at the next read
                if (s == kEmpty) {
                    if (tried) return false; // our own attempt failed: report, do not loop
                    // A failed allocation sealed the LFVector at or below b: the
                    // arena had no room, and no reservation needing b can succeed
                    // until the host folds, so the arena is not asked again.
                    if (sealed_at_or_below(l, b)) return refuse_sealed();
                    if (atomicCAS(state(l, b), kEmpty, kBusy) == kEmpty) {
                        tried = true;
                        // Checked again as the bucket's owner: a seal written before
                        // the release this claim follows is visible now (the sealer
                        // fenced between the two), so each bucket fails at most once
                        // per fold instead of once per waiting reservation.
                        if (sealed_at_or_below(l, b)) {
                            atomicExch(state(l, b), kEmpty);
                            return refuse_sealed();
                        }
                        if (pool_has(b)) { // mapped by the host: nothing to allocate
                            publish(l, b, reinterpret_cast<unsigned long long>(pool_bucket(l, b)), kReadyPool);
                            return true;
                        }
                        const unsigned long long p = arena_take(view_.arena, arena_bytes(b));
                        if (p == 0) {
                            fail_bucket(l, b);
                            return false;
                        }
                        if ((p & kSlotPending) == 0) {
                            publish_arena(l, b, p);
                            return true;
                        }
                        *static_cast<volatile unsigned long long*>(bucket_slot(l, b)) = p; // pending
                        continue;
                    }
                    continue;
                }
            }
            // Busy or pending: wait with relaxed loads through L2 (an acquire
            // invalidates the SM's L1), backing off: at a growth every pusher of
            // the LFVector waits here, and their polls of the bucket's lines
            // queue the owner's own accesses to them.
            const unsigned most = w != 0 && tried ? kPendingDoublings : kWaitDoublings;
            __nanosleep(kWaitNs << (polls < most ? polls : most));
            ++polls;
        }
    }
    /// Bytes bucket b takes from the arena.
    __device__ unsigned long long arena_bytes(unsigned b) const {
        return (bucket_elements(b) * sizeof(T) + ggarray_detail::kArenaAlign - 1) & ~(ggarray_detail::kArenaAlign - 1);
    }
    /// Bucket b of l, claimed by the caller, holds p: the slot, then its state.
    __device__ void publish(unsigned l, unsigned b, unsigned long long p, unsigned ready) const {
        *static_cast<volatile unsigned long long*>(bucket_slot(l, b)) = p;
        __threadfence();
        atomicExch(state(l, b), ready);
    }
    /// Arena bucket b of l, claimed and mapped, holds p: counted, then published.
    __device__ void publish_arena(unsigned l, unsigned b, unsigned long long p) const {
        atomicAdd(reinterpret_cast<unsigned long long*>(view_.allocated_bytes), arena_bytes(b));
        publish(l, b, p, ggarray_detail::kReady);
    }
    /// The claimed bucket b of l could not be had: the status says so, the
    /// LFVector is sealed at b before the bucket is released (nothing above b
    /// succeeds from now on).
    __device__ void fail_bucket(unsigned l, unsigned b) const {
        atomicOr(status_word(), detail::kArrayAllocationFailed);
        seal(l, b);
        atomicExch(state(l, b), ggarray_detail::kEmpty);
    }
    /// The claimer of pending bucket b (slot word w) finishes it: published when
    /// `mapped`, else refused (slot back to 0, sealed, released).
    __device__ void finish_pending(unsigned l, unsigned b, unsigned long long w, bool mapped) const {
        using namespace ggarray_detail;
        if (mapped) {
            publish_arena(l, b, w & ~kSlotPending);
        } else {
            *static_cast<volatile unsigned long long*>(bucket_slot(l, b)) = 0ull;
            arena_refuse(reinterpret_cast<arena_record*>(view_.arena), arena_bytes(b));
            fail_bucket(l, b);
        }
    }
    /// A bucket refused at a seal: the status says why (the sealer set the bit
    /// in its own view's word, which may be another one's).
    __device__ bool refuse_sealed() const {
        atomicOr(status_word(), detail::kArrayAllocationFailed);
        return false;
    }
    /// Elements LFVector l can hold without allocating: its prefix of buckets
    /// that are ready or whose pool row is mapped.
    __device__ unsigned long long lfvector_capacity(unsigned l) const {
        unsigned b = 0;
        while (b < GPUDYN_GGARRAY_MAX_BUCKETS &&
               (pool_has(b) || *static_cast<volatile unsigned*>(state(l, b)) >= ggarray_detail::kReady))
            ++b;
        return bucket_first(b);
    }

    /// @}

    /// @name reservation: claim (one thread), then the window or settle (any threads)
    /// @{

    /// claim: one atomicAdd on LFVector l's counter; [base, base + n) is the
    /// caller's.  Most ranges lie in the bucket the LFVector's window names (see
    /// window_fast): then the range is stored through the window's pointer and
    /// nothing else is read.  Otherwise settle decides.
    /// settle: true once every bucket of the range is ready, else false (the
    /// range's start recorded in failed_at; nothing to store).  Any number of
    /// threads may settle one range (the lanes of a warp group each do): each
    /// gets the same answer, since buckets only become ready (never unready)
    /// within a kernel and a failed bucket is sealed before it is released.
    /// A window hit agrees with settle: a window names a ready bucket, and a
    /// ready bucket has every lower bucket ready and no seal at or below it.
    /// settle's fast check: the growth word's prefix already covers the range.
    /// Relaxed is enough to decide: prefix and seal are one word, a seal at b is
    /// written before b can be claimed again, and the prefix is raised past b
    /// only by a CAS that saw b ready after that claim (so after the seal, in
    /// the word's modification order) and refuses to pass a seal; hence a word
    /// with prefix > last has no seal <= last, now or later.
    __device__ unsigned long long claim(unsigned l, unsigned long long n) const { return atomicAdd(counters() + l, n); }
    __device__ bool settle(unsigned l, unsigned long long base, unsigned long long n) const {
        using namespace ggarray_detail;
        const unsigned long long hi = base + n;
        const unsigned last = hi < base ? GPUDYN_GGARRAY_MAX_BUCKETS : bucket_of(hi - 1);
        const unsigned g = *static_cast<volatile unsigned*>(growth(l));
        if (last < prefix_of(g) && last < seal_of(g)) return true;
        if (grow_prefix(l, g, last)) return true;
        atomicMin(failed() + l, base);
        return false;
    }

    /// @}

    /// @name the window: the bucket an LFVector's pushes go to now
    /// @{

    /// window[l] = (address of bucket b - first(b) elements) | (b + log2_first + 1),
    /// so element i of bucket b is at (T*)(w & ~63) + i: a push whose range lies
    /// in that bucket needs no bucket arithmetic and no slot read.  The word is
    /// read through L2 together with the claim's atomic (its latency hides
    /// behind the atomic's), so it is never stale in an SM's L1.  It only names
    /// ready buckets, whose pointers never change while the array lives, so any
    /// value it held is right; an old one only sends a range to settle.  The
    /// host points it at the bucket of each LFVector's size at every fold
    /// (clear included); a push that settled a range beyond it moves it on.
    /// 0 (or a bucket whose word cannot be formed: see window_word) means none.
    __device__ unsigned long long* window(unsigned l) const {
        return reinterpret_cast<unsigned long long*>(view_.window) + l;
    }
    __device__ unsigned long long window_hint(unsigned l) const {
        unsigned long long w;
        asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(window(l)));
        return w;
    }
    /// p with element i of [base, base + n) at p[i - base] when the range lies in
    /// the bucket window word w names, else nullptr.  Bucket b + log2_first has
    /// 2^(s - 1) elements (s = the low 6 bits; s = 0: none, 0 elements) and
    /// starts at 2^(s - 1) - first.
    __device__ T* window_fast(unsigned long long w, unsigned long long base, unsigned long long n) const {
        const unsigned long long elems = (1ull << (unsigned(w) & 63u)) >> 1;
        const unsigned long long at = base - (elems - (1ull << view_.log2_first_bucket)); // index in the bucket
        if (at >= elems || n > elems - at) return nullptr;
        return reinterpret_cast<T*>(w & ~63ull) + base;
    }
    /// The window word of ready bucket b of l; 0 when it cannot be formed (the
    /// bucket's start minus first(b) elements not 64-byte aligned: first
    /// bucket * element size < 64 bytes; or b + log2_first + 1 > 63).
    __device__ unsigned long long window_word(unsigned l, unsigned b) const {
        const unsigned s = b + view_.log2_first_bucket + 1u;
        const unsigned long long p =
            reinterpret_cast<unsigned long long>(ready_bucket(l, b)) - bucket_first(b) * sizeof(T);
        return s > 63u || (p & 63ull) != 0 ? 0ull : p | s;
    }
    /// One thread, after [base, base + n) settled: the window moves on to the
    /// range's last bucket when it names a lower one (or none), by a
    /// compare-and-swap from the word read here, so it never moves back.  (Read
    /// again, not the hint of the claim: the hint kept live across settle made
    /// push kernels spill it, and stall on its load, on their fast path.)
    __device__ void advance_window(unsigned l, unsigned long long base, unsigned long long n) const {
        const unsigned last = bucket_of(base + n - 1);
        const unsigned long long now = window_hint(l);
        if ((unsigned(now) & 63u) >= last + view_.log2_first_bucket + 1u) return;
        const unsigned long long w = window_word(l, last);
        if (w != 0) atomicCAS(window(l), now, w);
    }
    /// Host folds (one thread per LFVector): the window names the bucket that
    /// holds index `size` (where the next push goes) if it is ready, else none.
    __device__ void reset_window(unsigned l, unsigned long long size) const {
        const unsigned b = bucket_of(size);
        const bool ready =
            b < GPUDYN_GGARRAY_MAX_BUCKETS && *static_cast<volatile unsigned*>(state(l, b)) >= ggarray_detail::kReady;
        *window(l) = ready ? window_word(l, b) : 0ull;
    }

    /// Host's trim of an empty array (one thread per LFVector, no kernel
    /// pushing): the arena's buckets go back to empty, so the host can unmap
    /// the arena; pool slices stay (their rows are the pool's).  The ready
    /// prefix ends at the first bucket that is not ready now.
    __device__ void drop_arena_buckets(unsigned l) const {
        unsigned prefix = GPUDYN_GGARRAY_MAX_BUCKETS;
        for (unsigned b = 0; b < GPUDYN_GGARRAY_MAX_BUCKETS; ++b) {
            if (*state(l, b) == ggarray_detail::kReady) {
                *bucket_slot(l, b) = 0;
                *state(l, b) = ggarray_detail::kEmpty;
            }
            if (*state(l, b) != ggarray_detail::kReadyPool && prefix > b) prefix = b;
        }
        unsigned* g = reinterpret_cast<unsigned*>(view_.growth) + l;
        *g = prefix < ggarray_detail::prefix_of(*g) ? prefix : ggarray_detail::prefix_of(*g);
        reset_window(l, 0);
    }

    /// The structure's side of the insertion algorithms (insert.cuh, warp_push.cuh).
    struct sink {
        const ggarray_ref* a;
        unsigned l;
        __device__ unsigned long long hint() const { return a->window_hint(l); }
        __device__ T* fast(unsigned long long h, unsigned long long base, unsigned long long n) const {
            return a->window_fast(h, base, n);
        }
        __device__ unsigned long long claim(unsigned long long n) const { return a->claim(l, n); }
        __device__ bool settle(unsigned long long base, unsigned long long n) const { return a->settle(l, base, n); }
        __device__ void advance(unsigned long long base, unsigned long long n) const { a->advance_window(l, base, n); }
        /// Any thread, after settle: one bucket lookup per bucket touched.
        __device__ void store_run(unsigned long long i, const T* v, unsigned n) const {
            unsigned j = 0;
            while (j < n) {
                const unsigned b = a->bucket_of(i);
                const unsigned long long first = a->bucket_first(b), left = first + a->bucket_elements(b) - i;
                T* p = a->ready_bucket(l, b) + (i - first);
                const unsigned m = left < n - j ? unsigned(left) : n - j;
                for (unsigned k = 0; k < m; ++k) p[k] = v[j + k];
                j += m;
                i += m;
            }
        }
        /// One element (the value stays in a register: a pointer to it, as
        /// store_run takes, put per-lane value arrays in local memory).
        __device__ void store_one(unsigned long long i, const T& v) const {
            const unsigned b = a->bucket_of(i);
            a->ready_bucket(l, b)[i - a->bucket_first(b)] = v;
        }
        /// Any thread, after settle: p with element i of [base, base + n) at
        /// p[i - base] when the range lies in one bucket (the usual case: a
        /// bucket holds many groups' ranges), else nullptr (store element by
        /// element).  One bucket lookup for the whole range.
        __device__ T* span(unsigned long long base, unsigned long long n) const {
            const unsigned b = a->bucket_of(base);
            if (a->bucket_of(base + n - 1) != b) return nullptr;
            return a->ready_bucket(l, b) + (base - a->bucket_first(b));
        }
        /// Block sink: the pointers of the buckets holding [base, base + n), once,
        /// into shared memory (word b = bucket b), by the reserving thread.
        __device__ void open(sink_window& w, unsigned long long base, unsigned long long n) const {
            const unsigned last = a->bucket_of(base + n - 1);
            for (unsigned b = a->bucket_of(base); b <= last; ++b)
                w.word[b] = reinterpret_cast<unsigned long long>(a->ready_bucket(l, b));
        }
        /// Any thread: no global lookup, one shared-memory load per element.
        __device__ void store(const sink_window& w, unsigned long long i, const T& v) const {
            const unsigned b = a->bucket_of(i);
            reinterpret_cast<T*>(w.word[b])[i - a->bucket_first(b)] = v;
        }
        /// The bucket holding i: local indices [`*first`, `*end`), its pointer from the window.
        __device__ T* extent(const sink_window& w, unsigned long long i, unsigned long long* first,
                             unsigned long long* end) const {
            const unsigned b = a->bucket_of(i);
            *first = a->bucket_first(b);
            *end = *first + a->bucket_elements(b);
            return reinterpret_cast<T*>(w.word[b]);
        }
    };
    static_assert(GPUDYN_GGARRAY_MAX_BUCKETS <= kSinkWindowWords, "the sink window holds one word per bucket");

    /// LFVector holding global index i: last l with ranges[l] <= i.  A guess in
    /// proportion (i * L / total, in float: a 64-bit division is a library call
    /// of some 70 instructions), right when the LFVectors are even (host
    /// pushes); LFVectors filled by user kernels differ in size, so the answer
    /// is then usually a few away: galloping from the guess finds it in a few
    /// loads where a bisection of [0, L) took log2 L dependent ones per at().
    __device__ unsigned lfvector_of(unsigned long long i) const {
        const unsigned long long* r = ranges();
        const unsigned L = view_.num_lfvectors;
        const unsigned long long total = r[L];
        unsigned g = i < total ? unsigned(float(i) * (float(L) / float(total))) : L - 1u;
        if (g >= L) g = L - 1u;
        unsigned lo, hi; // r[lo] <= i < r[hi] (r[0] = 0, r[L] = total > i)
        if (r[g] <= i) {
            if (g + 1u == L || i < r[g + 1]) return g;
            lo = g + 1u;
            for (unsigned step = 1;; step <<= 1) {
                if (step >= L - lo) {
                    hi = L;
                    break;
                }
                if (r[lo + step] > i) {
                    hi = lo + step;
                    break;
                }
                lo += step;
            }
        } else {
            hi = g;
            for (unsigned step = 1;; step <<= 1) {
                if (step >= hi) {
                    lo = 0;
                    break;
                }
                if (r[hi - step] <= i) {
                    lo = hi - step;
                    break;
                }
                hi -= step;
            }
        }
        while (hi - lo > 1) {
            const unsigned mid = lo + (hi - lo) / 2;
            if (r[mid] <= i) lo = mid;
            else hi = mid;
        }
        return lo;
    }

    /// Block-cooperative (one block): out = exclusive prefix sum of the sizes,
    /// out[num_lfvectors] = total (counters of any element size: see held).  Each thread sums a contiguous chunk, then the
    /// block scans the chunk sums.  `scratch` holds 33 values in shared memory.
    __device__ void compute_ranges(unsigned long long* scratch, unsigned long long* out) const {
        const unsigned L = view_.num_lfvectors;
        const unsigned n = detail::block_thread_count(), r = detail::block_thread_rank();
        const unsigned chunk = (L + n - 1) / n;
        const unsigned begin = r * chunk < L ? r * chunk : L;
        const unsigned stop = begin + chunk < L ? begin + chunk : L;
        unsigned long long mine = 0;
        for (unsigned i = begin; i < stop; ++i) mine += held(i);
        const unsigned mask = detail::block_warp_mask();
        const unsigned long long incl = detail::contiguous_lanes_inclusive_sum(mask, mine);
        const unsigned warp = r / detail::kWarpLanes, nwarps = (n + detail::kWarpLanes - 1) / detail::kWarpLanes;
        if (detail::lane_index() == detail::highest_lane(mask)) scratch[warp] = incl;
        __syncthreads();
        if (r == 0) {
            unsigned long long run = 0;
            for (unsigned w = 0; w < nwarps; ++w) {
                const unsigned long long t = scratch[w];
                scratch[w] = run;
                run += t;
            }
            scratch[32] = run;
        }
        __syncthreads();
        unsigned long long run = scratch[warp] + incl - mine;
        if (out != nullptr)
            for (unsigned i = begin; i < stop; ++i) {
                out[i] = run;
                run += held(i);
            }
        if (r == 0 && out != nullptr) out[L] = scratch[32];
        __syncthreads();
    }
    /// @}
};

namespace ggarray_detail {
/// The library's bookkeeping kernels (lib/ggarray.cu) reach the ref's internals here.
struct internal {
    template <class T>
    __device__ static bool ensure_bucket(const ggarray_ref<T>& a, unsigned l, unsigned b) {
        return a.ensure_bucket(l, b);
    }
    template <class T>
    __device__ static unsigned long long bucket_first(const ggarray_ref<T>& a, unsigned b) {
        return a.bucket_first(b);
    }
    template <class T>
    __device__ static void reset_window(const ggarray_ref<T>& a, unsigned l, unsigned long long size) {
        a.reset_window(l, size);
    }
    template <class T>
    __device__ static void drop_arena_buckets(const ggarray_ref<T>& a, unsigned l) {
        a.drop_arena_buckets(l);
    }
    template <class T>
    __device__ static unsigned long long lfvector_capacity(const ggarray_ref<T>& a, unsigned l) {
        return a.lfvector_capacity(l);
    }
    /// One block: ranges (out = view.ranges) or only the total into scratch[32] (out = nullptr).
    template <class T>
    __device__ static void compute_ranges(const ggarray_ref<T>& a, unsigned long long* scratch,
                                          unsigned long long* out) {
        a.compute_ranges(scratch, out);
    }
};
} // namespace ggarray_detail

} // namespace v0
} // namespace gpudyn
