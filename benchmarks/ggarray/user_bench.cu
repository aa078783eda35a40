// gpudyn_bench_user --out FILE.json [--quick] [--only variable|compaction|growth] [--budget-mib N]
//
// "A benchmark a user recognizes" (issue 10, item 4): GGArray and the static
// array used from a user's own kernel through the per-thread device API
// (gpudyn::ggarray_ref<T>{view}.push_back), against what that user would write
// instead with the CUDA toolkit (CUB), side by side in one run.
//
// a. variable output ("variable"): M threads (1e8; --quick 1e6), thread t emits
//    k(t) uint32 values value_of(t, j), j < k(t); k from a hash of t:
//      mean 0.01  Bernoulli(0.01)          (max k 1)
//      mean 1     uniform on {0, 1, 2}     (max k 2)
//      mean 8     uniform on {0, ..., 16}  (max k 16)
//    Contenders, each timed with CUDA events around everything a user does,
//    median of kRepeats after a warm-up:
//      cub_two_pass       cudaMallocAsync counts -> count kernel ->
//                         cub::DeviceScan::ExclusiveSum (temp size query and
//                         cudaMallocAsync inside the timing) -> total to the host
//                         -> cudaMallocAsync of exactly the output -> write kernel
//                         -> cudaFreeAsync of counts and temp; the output is freed
//                         after the timing.  The default memory pool keeps its
//                         memory between runs (release threshold raised): what a
//                         CUB user running this repeatedly does, the strongest
//                         baseline;
//      static_worst_case  a gpudyn static array of capacity M * max k created
//                         before the timing; timed: clear + kernel + size;
//      ggarray_fresh      create + get_view + kernel + size (destroy after the
//                         timing: it unmaps the array's heap and pool on the host,
//                         its wall time is recorded as destroy_ms);
//      ggarray_reused     clear + get_view + kernel + size on one array per mean
//                         and kernel, kept across the runs (buckets kept);
//      floor              issue 40's floor for the per-thread forms (loop and
//                         bulk only): the same emit kernels, each push
//                         warp-aggregated into one atomicAdd on counter
//                         blockIdx.x mod L (L: the GGArray's default
//                         num_lfvectors; bulk: the lanes' k scanned over the
//                         active lanes, one atomicAdd of the sum) into region l
//                         of a buffer preallocated for the worst case (L regions
//                         of ceil(blocks / L) x 256 x max k elements); timed:
//                         zero the L counters + kernel + their sum to the host
//                         (a one-block reduction, a copy, a sync).  What a
//                         GGArray does minus growth.
//    Four kernels for each gpudyn array: loop (for j < k: push_back(v)), bulk
//    (the values into a local array, one push_back(values, k)), block (the
//    block-level push_back(storage, flags, values), every thread of the block
//    calling: one reservation a block, coalesced stores) and warp (the
//    per-thread push_back(flags, values): one reservation for the lanes that
//    call together, coalesced stores, early returns allowed).
// b. stream compaction ("compaction"): N = 1e9 int32 (--quick 1e7) from a hash,
//    keep x < threshold at 1 / 50 / 99 % kept:
//      select_if          cub::DeviceSelect::If into an output of N elements,
//                         temp storage allocated before the timing; timed: the
//                         call + num_selected to the host;
//      ggarray            reused GGArray, timed clear + get_view + kernel + size,
//                         kernels: one_per_thread (if (x < t) push_back(x)),
//                         grid_stride (the same in a grid-stride loop sized by
//                         the occupancy calculator), chunk (block-level
//                         push_back_chunk over kChunk elements a block),
//                         warp_tiles / warp_tiles16 (per-thread
//                         push_back(flags, values) of 8 / 16 candidates a
//                         lane, the 16 loaded as int4, grid-stride);
//      static             static array of capacity N, clear + kernel + size,
//                         one_per_thread, grid_stride, warp_tiles, warp_tiles16;
//      floor              issue 40's floor (as in a), one_per_thread and
//                         grid_stride (the GGArray's grid-stride grid): the same
//                         kernels with warp-aggregated atomics on L counters into
//                         a preallocated buffer of L regions, each as large as
//                         the blocks mapped to its counter can keep; timed like
//                         the static array (zero the counters + kernel + count).
// c. growth inside the kernel ("growth", the paper's Fig. 5 with the growth
//    moved into the kernel): 1e6 elements (--quick 1e5) doubled 7 times to 1.28e8,
//    one per-thread push_back per element; time of each doubling (median of
//    kGrowthRepeats passes, each on a new structure):
//      ggarray_in_kernel  a fresh GGArray, no host reserve: the kernel grows it;
//      ggarray_reserved   a GGArray reserved by the host before each doubling
//                         (reserve + get_view + kernel);
//      vmm_reserved       the VMM array reserved by the host (reserve + get_view + kernel).
//
// Every run is verified outside its timing: count, sum and xor of mix64(v ^
// kDigestSeed) over every value v, compared with a host reference computed from
// the same formulas; a GGArray also by its size, its status word and the
// elements its spans visit; the floor by its regions' [0, counter) (every
// counter within its region, their sum the count).  A failed verification is recorded in the JSON
// ("verified": false plus a "failures" list), the run goes on, and the program
// exits 1 at the end.
//
// Budget of a GGArray (the memory its kernels may take for buckets; mapped when
// the array's own arena is made, at the first get_view).  Each case starts
// from --budget-mib (default 0: the library's default budget) and does what a
// user does after an out-of-memory status: doubles the budget and runs again,
// during the warm-up; the timed runs use the budget that worked (recorded as
// budget_bytes, with budget_raises).  bytes_held of a GGArray is
// gpudyn_ggarray_allocated_bytes (buckets; the unused budget is not counted,
// budget_bytes is).
//
// Estimated time on an H200 at full size (the JSON records each section's
// seconds): variable output ~10-15 s (per mean 15 series x 8 runs of up to ~20 ms,
// each verified; a fresh GGArray maps its budget and builds its heap every run,
// up to ~100 ms with its destroy), stream compaction ~5-15 s (4 GB input, 12
// series x 3 selectivities x 8 runs of ~2-10 ms plus a read of the output; the
// floor's grid-stride buffer is the largest allocation, L regions sized for
// the blocks of the busiest counter: ~16 GB at 1 block an SM on 132 SMs),
// growth ~3 s, host references ~2 s on 16 cores (~20 s on one): well under a
// minute; --quick takes a few seconds.
#include <gpudyn/ggarray.cuh>
#include <gpudyn/static_array.cuh>
#include <gpudyn/vmm_array.cuh>
#include <gpudyn/detail/random.cuh> // mix64: the hashes below, host and device

#include <cub/cub.cuh>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../bench_check.hpp" // CUDA(), GD()

using gpudyn::detail::mix64;
using u64 = unsigned long long;

namespace {

// ---- configuration (defaults in one place) -------------------------------------
constexpr unsigned kBlock = 256; // every kernel here: GGArray kernels use ~130-165 registers
constexpr int kRepeats = 7;      // timed runs per series (median), after kWarmups
constexpr int kQuickRepeats = 3;
constexpr int kWarmups = 1;
constexpr u64 kThreads = 100000000ull; // issue 10: M = 1e8
constexpr u64 kQuickThreads = 1000000ull;
constexpr u64 kCompactionN = 1000000000ull; // issue 10: 1e9 int32
constexpr u64 kQuickCompactionN = 10000000ull;
constexpr u64 kGrowthStart = 1000000ull; // paper: 1e6 doubled 7 times to 1.28e8
constexpr u64 kQuickGrowthStart = 100000ull;
constexpr int kGrowthDoublings = 7;
constexpr int kGrowthRepeats = 5;
constexpr int kQuickGrowthRepeats = 2;
constexpr int kChunkItems = 8; // items a thread in push_back_chunk's tiles (its default)
// Elements a block hands to one push_back_chunk: one tile, 256 threads x 8 items
// (8 KiB of int32 per reservation): a chunk of at most one tile a warp is read
// once, into registers; a larger one is read twice (count, then store).
constexpr u64 kChunk = u64(kBlock) * kChunkItems;
// Grid of the grid-stride helper kernels (input fill, verification): 8 blocks of
// 256 threads per SM, the 2048 resident threads an SM holds on sm_80/sm_90.
constexpr unsigned kHelperBlocksPerSm = 8;
constexpr int kMaxBudgetRaises = 8;      // 1 GiB doubled 8 times: 256 GiB, beyond any GPU
constexpr u64 kDigestChunk = 1ull << 16; // elements a verification block walks at a time

// The three means of section a: k(t) in 0..max_k.
struct mean_case {
    double mean;
    unsigned mode; // 0 Bernoulli, 1 uniform 0..2, 2 uniform 0..16
    unsigned max_k;
};
constexpr mean_case kMeans[] = {{0.01, 0, 1}, {1.0, 1, 2}, {8.0, 2, 16}};
constexpr unsigned kMaxK = 16;
// round(0.01 * 2^32): k = 1 when the top 32 bits of the hash are below it.
constexpr u64 kBernoulliThreshold = 42949673ull;
constexpr double kKeptPercent[] = {1.0, 50.0, 99.0};

// Seeds of the hashes (arbitrary odd constants; each stream its own).
constexpr u64 kCountSeed = 0x243F6A8885A308D3ull; // pi
constexpr u64 kValueSeed = 0x13198A2E03707344ull;
constexpr u64 kInputSeed = 0xA4093822299F31D0ull;
constexpr u64 kGrowSeed = 0x082EFA98EC4E6C89ull;
constexpr u64 kDigestSeed = 0x452821E638D01377ull;

// ---- the user's formulas (host and device) --------------------------------------
__host__ __device__ __forceinline__ unsigned count_of(u64 t, unsigned mode) {
    const u64 h = mix64(t ^ kCountSeed) >> 32;
    if (mode == 0) return h < kBernoulliThreshold ? 1u : 0u;
    const u64 choices = mode == 1 ? 3 : kMaxK + 1;
    return unsigned((h * choices) >> 32); // uniform on 0..choices-1 (multiply-shift)
}
__host__ __device__ __forceinline__ unsigned value_of(u64 t, unsigned j) {
    return unsigned(mix64(((t << 5) | j) + kValueSeed));
}
__host__ __device__ __forceinline__ int input_of(u64 i) { return int(mix64(i + kInputSeed) >> 33); } // [0, 2^31)
__host__ __device__ __forceinline__ unsigned grow_value_of(u64 i) { return unsigned(mix64(i + kGrowSeed)); }

// ---- verification digest: count, sum and xor of a 64-bit mix of every value ------
struct digest {
    u64 count = 0, sum = 0, x = 0;
    bool operator==(const digest& o) const { return count == o.count && sum == o.sum && x == o.x; }
};
__host__ __device__ __forceinline__ u64 digest_mix(unsigned v) { return mix64(u64(v) ^ kDigestSeed); }

__device__ void digest_add(digest* out, u64 c, u64 s, u64 x) {
    // Every lane of the warp calls (kernels below call once, at their end, from every thread).
    for (int o = 16; o > 0; o >>= 1) {
        c += __shfl_xor_sync(0xffffffffu, c, o);
        s += __shfl_xor_sync(0xffffffffu, s, o);
        x ^= __shfl_xor_sync(0xffffffffu, x, o);
    }
    if ((threadIdx.x & 31u) == 0 && c != 0) {
        atomicAdd(&out->count, c);
        atomicAdd(&out->sum, s);
        atomicXor(&out->x, x);
    }
}
template <class T>
__global__ void __launch_bounds__(kBlock) digest_flat(const T* p, u64 n, digest* out) {
    u64 c = 0, s = 0, x = 0;
    for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) {
        const u64 h = digest_mix(unsigned(p[i]));
        ++c, s += h, x ^= h;
    }
    digest_add(out, c, s, x);
}
template <class T>
__global__ void __launch_bounds__(kBlock) digest_ggarray(gpudyn_ggarray_view_t view, digest* out) {
    const gpudyn::ggarray_ref<T> a{view};
    u64 c = 0, s = 0, x = 0;
    const u64 n = a.ranged_size();
    for (u64 lo = blockIdx.x * kDigestChunk; lo < n; lo += u64(gridDim.x) * kDigestChunk)
        a.for_each_span(lo, lo + kDigestChunk, [&](T* p, u64 m, u64) {
            for (u64 i = threadIdx.x; i < m; i += blockDim.x) {
                const u64 h = digest_mix(unsigned(p[i]));
                ++c, s += h, x ^= h;
            }
        });
    digest_add(out, c, s, x);
}

// The floor's buffer: elements [0, counters[l]) of each of L regions of `region`
// elements (a counter past its region is reported by the host check; read up to
// the region here).  A block walks kDigestChunk elements of one region at a time.
template <class T>
__global__ void __launch_bounds__(kBlock)
    digest_regions(const T* data, const unsigned long long* counters, u64 region, unsigned L, digest* out) {
    u64 c = 0, s = 0, x = 0;
    const u64 chunks = (region + kDigestChunk - 1) / kDigestChunk; // per region
    for (u64 w = blockIdx.x; w < u64(L) * chunks; w += gridDim.x) {
        const unsigned l = unsigned(w / chunks);
        const u64 lo = (w % chunks) * kDigestChunk;
        const u64 held = counters[l] < region ? counters[l] : region;
        const u64 hi = lo + kDigestChunk < held ? lo + kDigestChunk : held;
        const T* p = data + u64(l) * region;
        for (u64 i = lo + threadIdx.x; i < hi; i += blockDim.x) {
            const u64 h = digest_mix(unsigned(p[i]));
            ++c, s += h, x ^= h;
        }
    }
    digest_add(out, c, s, x);
}

// ---- section a kernels: the user's, one thread per t ------------------------------
// gpudyn arrays, Bulk = false: push_back(v) per value; true: values into a local
// array, one push_back(values, k).
template <class Ref, class View, bool Bulk>
__global__ void __launch_bounds__(kBlock) emit(View view, unsigned m, unsigned mode) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) return;
    const Ref out{view};
    const unsigned k = count_of(t, mode);
    if constexpr (Bulk) {
        unsigned v[kMaxK];
        for (unsigned j = 0; j < k; ++j) v[j] = value_of(t, j);
        out.push_back(v, k);
    } else {
        for (unsigned j = 0; j < k; ++j) out.push_back(value_of(t, j));
    }
}
// Value j of each thread as item j (flag j < k), item-major order (item j of the
// flagged threads side by side: coalesced stores).  MaxK: the largest k of the
// mean (items a thread).  Block = true: the block-level push_back(storage,
// flags, values), every thread of the block calling (no early return), one
// reservation a block; false: the per-thread push_back(flags, values), the
// lanes that call together sharing one reservation, early returns allowed.
template <class Ref, class View, int MaxK, bool Block>
__global__ void __launch_bounds__(kBlock) emit_items(View view, unsigned m, unsigned mode) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (!Block && t >= m) return;
    const Ref out{view};
    const unsigned k = t < m ? count_of(t, mode) : 0u;
    bool f[MaxK];
    unsigned v[MaxK];
#pragma unroll
    for (int j = 0; j < MaxK; ++j) {
        f[j] = unsigned(j) < k;
        v[j] = f[j] ? value_of(t, unsigned(j)) : 0u;
    }
    if constexpr (Block) {
        __shared__ gpudyn::push_storage<kBlock> temp;
        out.push_back(temp, f, v);
    } else {
        out.push_back(f, v);
    }
}
template <class Ref, bool Block, class View>
void launch_emit_items(const View& v, unsigned grid, unsigned m, const mean_case& mc) {
    if (mc.max_k <= 1) emit_items<Ref, View, 1, Block><<<grid, kBlock>>>(v, m, mc.mode);
    else if (mc.max_k <= 2) emit_items<Ref, View, 2, Block><<<grid, kBlock>>>(v, m, mc.mode);
    else emit_items<Ref, View, kMaxK, Block><<<grid, kBlock>>>(v, m, mc.mode);
}
// One launch of kernel `kind` (0 loop, 1 bulk, 2 block, 3 warp) for array type Ref.
template <class Ref, class View>
void launch_emit(int kind, const View& v, unsigned grid, unsigned m, const mean_case& mc) {
    if (kind == 3) launch_emit_items<Ref, false>(v, grid, m, mc);
    else if (kind == 2) launch_emit_items<Ref, true>(v, grid, m, mc);
    else if (kind == 1) emit<Ref, View, true><<<grid, kBlock>>>(v, m, mc.mode);
    else emit<Ref, View, false><<<grid, kBlock>>>(v, m, mc.mode);
}
constexpr int kEmitKernels = 4;
const char* const kEmitKernelNames[kEmitKernels] = {"loop", "bulk", "block", "warp"};
// CUB two-pass: counts[t] = k(t) for t < m, counts[m] = 0 (so the exclusive sum's
// last element is the total).
__global__ void __launch_bounds__(kBlock) count_pass(unsigned* counts, unsigned m, unsigned mode) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t <= m) counts[t] = t < m ? count_of(t, mode) : 0u;
}
__global__ void __launch_bounds__(kBlock)
    write_pass(const unsigned* offsets, unsigned* out, unsigned m, unsigned mode) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= m) return;
    const unsigned k = count_of(t, mode);
    unsigned* o = out + offsets[t];
    for (unsigned j = 0; j < k; ++j) o[j] = value_of(t, j);
}

// ---- section b kernels ----------------------------------------------------------
__global__ void __launch_bounds__(kBlock) fill_input(int* in, u64 n) {
    for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x)
        in[i] = input_of(i);
}
struct less_than {
    int threshold;
    __host__ __device__ bool operator()(const int& x) const { return x < threshold; }
};
template <class Ref, class View>
__global__ void __launch_bounds__(kBlock) keep_one_per_thread(View view, const int* in, u64 n, int threshold) {
    const u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    const Ref out{view};
    const int x = in[i];
    if (x < threshold) out.push_back(x);
}
template <class Ref, class View>
__global__ void __launch_bounds__(kBlock) keep_grid_stride(View view, const int* in, u64 n, int threshold) {
    const Ref out{view};
    for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x) {
        const int x = in[i];
        if (x < threshold) out.push_back(x);
    }
}
// Warp-level: each lane loads Items candidates of its warp's tile, then one
// push_back(flags, values) per tile: one reservation a warp, no shared memory,
// no barrier; grid-stride.  Vec = false: candidate k * 32 + lane (coalesced
// 4-byte loads, input order kept); true: Items / 4 int4 loads a lane (a warp
// reads 16 bytes a lane at a time; kept values in tile order, not input order).
template <class Ref, class View, int Items, bool Vec>
__global__ void __launch_bounds__(kBlock) keep_warp_tiles(View view, const int* in, u64 n, int threshold) {
    constexpr u64 kTile = 32 * Items;
    const Ref out{view};
    const unsigned lane = threadIdx.x % 32;
    const u64 warps = u64(gridDim.x) * (blockDim.x / 32);
    for (u64 t = (blockIdx.x * u64(blockDim.x) + threadIdx.x) / 32; t * kTile < n; t += warps) {
        bool keep[Items];
        int x[Items];
        const u64 first = t * kTile;
        if (Vec && first + kTile <= n && (reinterpret_cast<uintptr_t>(in + first) & 15) == 0) {
            const int4* p = reinterpret_cast<const int4*>(in + first);
#pragma unroll
            for (int q = 0; q < Items / 4; ++q) {
                const int4 w = p[q * 32 + lane];
                x[4 * q] = w.x, x[4 * q + 1] = w.y, x[4 * q + 2] = w.z, x[4 * q + 3] = w.w;
            }
#pragma unroll
            for (int k = 0; k < Items; ++k) keep[k] = x[k] < threshold;
        } else { // scalar loads (and the last, partial tile)
#pragma unroll
            for (int k = 0; k < Items; ++k) {
                const u64 j = first + u64(k) * 32 + lane;
                x[k] = j < n ? in[j] : 0;
                keep[k] = j < n && x[k] < threshold;
            }
        }
        out.push_back(keep, x);
    }
}
// Block-level: each block hands kChunk candidates at a time to push_back_chunk
// (one reservation per chunk), grid-stride over the chunks.
struct keep_source {
    const int* in;
    int threshold;
    __device__ bool all_flagged() const { return false; }
    __device__ bool flag(u64 j) const { return in[j] < threshold; }
    __device__ int value(u64 j) const { return in[j]; }
};
__global__ void __launch_bounds__(kBlock) keep_chunk(gpudyn_ggarray_view_t view, const int* in, u64 n, int threshold) {
    __shared__ gpudyn::push_storage<kBlock> temp;
    const gpudyn::ggarray_ref<int> out{view};
    for (u64 lo = blockIdx.x * kChunk; lo < n; lo += u64(gridDim.x) * kChunk) {
        const u64 m = n - lo < kChunk ? n - lo : kChunk;
        out.push_back_chunk<kChunkItems>(temp, m, keep_source{in + lo, threshold});
    }
}

// ---- the floor (issue 40, item 3) --------------------------------------------------
// What a GGArray's per-thread pushes do minus growth, for the same kernels
// (emit, keep_one_per_thread, keep_grid_stride instantiated with floor_ref): the
// lanes that push together take one atomicAdd on counter l = blockIdx.x mod L
// (L: the GGArray's default num_lfvectors; a mask when L is a power of two, as
// ggarray_ref::block_lfvector takes it) and store into region l of a buffer
// preallocated for the worst case (region: the most the blocks mapped to l can
// push).  Offsets are 64-bit: L regions can exceed 2^32 elements.
struct floor_view {
    void* data;                   // L regions of `region` elements each
    unsigned long long* counters; // L counters, zeroed before each launch
    u64 region;
    unsigned num_lfvectors; // L
};
template <class T>
struct floor_ref {
    floor_view view;
    __device__ unsigned counter() const {
        const unsigned L = view.num_lfvectors;
        return (L & (L - 1)) == 0 ? blockIdx.x & (L - 1) : blockIdx.x % L;
    }
    __device__ T* region(unsigned l) const { return static_cast<T*>(view.data) + u64(l) * view.region; }
    // x: the active lanes' count in one atomicAdd of the lowest lane, each lane at
    // base + its rank among them.
    __device__ bool push_back(const T& x) const {
        namespace gd = gpudyn::detail;
        const unsigned mask = gd::active_lanes();
        const unsigned leader = gd::lowest_bit(mask);
        const unsigned l = counter();
        u64 base = 0;
        if (gd::lane_index() == leader) base = atomicAdd(view.counters + l, u64(__popc(mask)));
        base = __shfl_sync(mask, base, int(leader));
        region(l)[base + unsigned(__popc(mask & gd::lanes_below()))] = x;
        return true;
    }
    // values[0..n) (n may be 0 and differ per lane): the lanes' n scanned over the
    // active lanes, one atomicAdd of the sum, each lane's values at base + its
    // exclusive prefix.
    __device__ bool push_back(const T* values, unsigned n) const {
        namespace gd = gpudyn::detail;
        const unsigned mask = gd::active_lanes();
        const unsigned leader = gd::lowest_bit(mask);
        const unsigned l = counter();
        const unsigned inclusive = gd::masked_inclusive_sum(mask, n);
        const unsigned total = __shfl_sync(mask, inclusive, int(gd::highest_lane(mask)));
        u64 base = 0;
        if (gd::lane_index() == leader && total != 0) base = atomicAdd(view.counters + l, u64(total));
        base = __shfl_sync(mask, base, int(leader));
        T* out = region(l) + base + (inclusive - n);
        for (unsigned j = 0; j < n; ++j) out[j] = values[j];
        return true;
    }
};
// Sum of the L counters into *total (one block of kBlock threads): the floor's
// element count, for the host.
__global__ void __launch_bounds__(kBlock)
    floor_total(const unsigned long long* counters, unsigned L, unsigned long long* total) {
    __shared__ unsigned long long warp_sums[kBlock / 32];
    unsigned long long s = 0;
    for (unsigned i = threadIdx.x; i < L; i += blockDim.x) s += counters[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (unsigned w = 1; w < blockDim.x / 32; ++w) s += warp_sums[w];
        *total = s;
    }
}

// ---- section c kernel -----------------------------------------------------------
template <class Ref, class View>
__global__ void __launch_bounds__(kBlock) push_n(View view, u64 n, u64 first) {
    const u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x;
    if (i < n) Ref{view}.push_back(grow_value_of(first + i));
}

// ---- timing ---------------------------------------------------------------------
// Events recorded between the steps of one run on the default stream: the
// elapsed time between consecutive marks is each step, host work included (the
// GPU waits for the next mark while the host works).
struct marks {
    std::vector<cudaEvent_t> ev;
    int used = 0;
    marks() : ev(8) {
        for (auto& e : ev) CUDA(cudaEventCreate(&e));
    }
    ~marks() {
        for (auto& e : ev) cudaEventDestroy(e);
    }
    void start() {
        used = 0;
        mark();
    }
    void mark() { CUDA(cudaEventRecord(ev[used++], nullptr)); }
    // Steps' ms (used - 1 of them); waits for the last mark.
    std::vector<double> steps() {
        CUDA(cudaEventSynchronize(ev[used - 1]));
        std::vector<double> out;
        for (int i = 1; i < used; ++i) {
            float ms = 0;
            CUDA(cudaEventElapsedTime(&ms, ev[i - 1], ev[i]));
            out.push_back(ms);
        }
        return out;
    }
};
static double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}
static double wall_ms(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// ---- JSON -----------------------------------------------------------------------
struct jobj {
    std::string s;
    jobj& raw(const std::string& k, const std::string& v) {
        s += (s.empty() ? "\"" : ", \"") + k + "\": " + v;
        return *this;
    }
    jobj& num(const std::string& k, double v) {
        char b[64];
        snprintf(b, sizeof b, "%.6g", v);
        return raw(k, b);
    }
    jobj& u(const std::string& k, u64 v) { return raw(k, std::to_string(v)); }
    jobj& b(const std::string& k, bool v) { return raw(k, v ? "true" : "false"); }
    jobj& str(const std::string& k, const std::string& v) { return raw(k, "\"" + v + "\""); }
    jobj& arr(const std::string& k, const std::vector<double>& v) {
        std::string a = "[";
        char b[64];
        for (size_t i = 0; i < v.size(); ++i) {
            snprintf(b, sizeof b, "%s%.6g", i ? ", " : "", v[i]);
            a += b;
        }
        return raw(k, a + "]");
    }
    jobj& obj(const std::string& k, const jobj& o) { return raw(k, o.str()); }
    std::string str() const { return "{" + s + "}"; }
};
static std::string jlist(const std::vector<std::string>& items) {
    std::string a = "[";
    for (size_t i = 0; i < items.size(); ++i) a += (i ? ", " : "") + items[i];
    return a + "]";
}
static jobj digest_json(const digest& d) { return jobj().u("count", d.count).u("sum", d.sum).u("xor", d.x); }

// ---- run-wide state ---------------------------------------------------------------
int g_sms = 0;
int g_done = 0, g_total = 1;
uint64_t g_budget_start = 0;         // --budget-mib (0: the library default)
std::vector<std::string> g_failures; // every failed verification, for the JSON and stderr

void progress(const std::string& label) { fprintf(stderr, "progress %d %d %s\n", ++g_done, g_total, label.c_str()); }
void fail(const std::string& what) {
    fprintf(stderr, "gpudyn_bench_user: VERIFICATION FAILED: %s\n", what.c_str());
    g_failures.push_back(what);
}

// Host reference: K digests over the indices [0, n), threads over index ranges;
// add_index(i, d) adds index i's values to the digests d[0..K).
template <size_t K, class F>
std::array<digest, K> parallel_digests(u64 n, F&& add_index) {
    const unsigned nt = std::max(1u, std::min(64u, std::thread::hardware_concurrency()));
    std::vector<std::array<digest, K>> part(nt);
    std::vector<std::thread> th;
    for (unsigned w = 0; w < nt; ++w)
        th.emplace_back([&, w] {
            std::array<digest, K> d{};
            for (u64 i = n * w / nt; i < n * (w + 1) / nt; ++i) add_index(i, d);
            part[w] = d;
        });
    std::array<digest, K> all{};
    for (unsigned w = 0; w < nt; ++w) {
        th[w].join();
        for (size_t k = 0; k < K; ++k)
            all[k].count += part[w][k].count, all[k].sum += part[w][k].sum, all[k].x ^= part[w][k].x;
    }
    return all;
}
inline void digest_push(digest& d, unsigned v) {
    const u64 h = digest_mix(v);
    ++d.count, d.sum += h, d.x ^= h;
}

// Device digest of a flat array / a GGArray (its view taken now: ranges as of now).
struct digester {
    digest* d = nullptr;
    digester() { CUDA(cudaMalloc(&d, sizeof(digest))); }
    ~digester() { cudaFree(d); }
    unsigned grid() const { return unsigned(g_sms) * kHelperBlocksPerSm; }
    template <class T>
    digest flat(const T* p, u64 n) {
        CUDA(cudaMemset(d, 0, sizeof(digest)));
        digest_flat<T><<<grid(), kBlock>>>(p, n, d);
        CUDA(cudaGetLastError());
        return read();
    }
    template <class T>
    digest ggarray(gpudyn_ggarray_t g) {
        gpudyn_ggarray_view_t v;
        GD(gpudyn_ggarray_get_view(g, &v, nullptr));
        CUDA(cudaMemset(d, 0, sizeof(digest)));
        digest_ggarray<T><<<grid(), kBlock>>>(v, d);
        CUDA(cudaGetLastError());
        return read();
    }
    template <class T>
    digest regions(const T* data, const unsigned long long* counters, u64 region, unsigned L) {
        CUDA(cudaMemset(d, 0, sizeof(digest)));
        digest_regions<T><<<grid(), kBlock>>>(data, counters, region, L, d);
        CUDA(cudaGetLastError());
        return read();
    }
    digest read() {
        digest h;
        CUDA(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost));
        return h;
    }
};

// A GGArray as a user makes one: default options but the budget (0: the default).
gpudyn_ggarray_t make_ggarray(u64 budget) {
    gpudyn_ggarray_options_t o;
    GD(gpudyn_ggarray_options_init(&o));
    o.budget_bytes = budget;
    gpudyn_ggarray_t g = nullptr;
    GD(gpudyn_ggarray_create(&g, &o, nullptr));
    return g;
}
uint32_t ggarray_status(gpudyn_ggarray_t g) {
    uint32_t st = 0;
    GD(gpudyn_ggarray_get_status(g, &st, nullptr));
    return st;
}
uint64_t ggarray_budget(gpudyn_ggarray_t g) {
    uint64_t now = 0;
    GD(gpudyn_ggarray_get_budget(g, &now, nullptr));
    return now;
}
uint64_t ggarray_held(gpudyn_ggarray_t g) {
    uint64_t b = 0;
    GD(gpudyn_ggarray_allocated_bytes(g, &b, nullptr));
    return b;
}
// The budget of one case: starts at --budget-mib, doubled after each run that ran out.
struct budget_state {
    uint64_t bytes = g_budget_start;
    int raises = 0;
    // After a warm-up run on g: true when it ran out (then the budget is doubled).
    bool raise_if_out(gpudyn_ggarray_t g, const std::string& where) {
        if (!(ggarray_status(g) & GPUDYN_ARRAY_STATUS_ALLOCATION_FAILED)) return false;
        if (++raises > kMaxBudgetRaises) {
            fprintf(stderr, "gpudyn_bench_user: %s: still out of budget at %llu bytes\n", where.c_str(),
                    (u64)ggarray_budget(g));
            exit(1);
        }
        bytes = 2 * ggarray_budget(g);
        fprintf(stderr, "%s: out of budget, raised to %llu MiB\n", where.c_str(), (u64)(bytes >> 20));
        return true;
    }
};

// Summary of one contender's timed runs.
struct series {
    std::vector<double> ms;                 // total per timed run
    std::vector<std::vector<double>> steps; // per timed run, per step
    std::vector<std::string> step_names;
    uint64_t bytes_held = 0;   // largest over all runs
    uint64_t budget_bytes = 0; // GGArrays: budget mapped for kernels' buckets
    int budget_raises = 0;
    std::vector<double> destroy; // ggarray_fresh: destroy wall time per timed run (not in ms)
    bool verified = true;
    std::string kernel; // which kernel (variant) ran

    jobj json() const {
        jobj j;
        j.num("ms", median(ms)).arr("samples_ms", ms);
        jobj sp;
        for (size_t k = 0; k < step_names.size(); ++k) {
            std::vector<double> v;
            for (const auto& s : steps) v.push_back(s[k]);
            sp.num(step_names[k], median(v));
        }
        j.obj("steps_ms", sp).u("bytes_held", bytes_held).b("verified", verified);
        if (budget_bytes) j.u("budget_bytes", budget_bytes).raw("budget_raises", std::to_string(budget_raises));
        if (!destroy.empty()) j.num("destroy_ms", median(destroy));
        if (!kernel.empty()) j.str("kernel", kernel);
        return j;
    }
};
// Runs run_once (warm-ups first, untimed results kept only for verification),
// collecting the timed ones.  run_once(timed) returns the steps' ms.
template <class F>
void measure(series& s, int repeats, F&& run_once) {
    for (int w = 0; w < kWarmups; ++w) run_once(false);
    for (int r = 0; r < repeats; ++r) {
        std::vector<double> st = run_once(true);
        double total = 0;
        for (double x : st) total += x;
        s.ms.push_back(total);
        s.steps.push_back(st);
    }
}
// Checks a GGArray after a run: size, status, digest through its spans.
bool check_ggarray(gpudyn_ggarray_t g, u64 size, const digest& want, digester& dg, const std::string& what) {
    const uint32_t st = ggarray_status(g);
    const digest got = dg.ggarray<unsigned>(g);
    if (st == 0 && size == want.count && got == want) return true;
    char b[512];
    snprintf(b, sizeof b,
             "%s: size %llu, status %u, spans count %llu sum %llu xor %llu; expected count %llu sum %llu xor %llu",
             what.c_str(), size, st, got.count, got.sum, got.x, want.count, want.sum, want.x);
    fail(b);
    return false;
}
bool check_flat(const digest& got, u64 size, const digest& want, const std::string& what) {
    if (size == want.count && got == want) return true;
    char b[512];
    snprintf(b, sizeof b, "%s: size %llu, count %llu sum %llu xor %llu; expected count %llu sum %llu xor %llu",
             what.c_str(), size, got.count, got.sum, got.x, want.count, want.sum, want.x);
    fail(b);
    return false;
}
bool check_static(gpudyn_static_array_t a, u64 size, const digest& want, digester& dg, const std::string& what) {
    uint32_t st = 0;
    GD(gpudyn_static_array_get_status(a, &st, nullptr));
    void* data = nullptr;
    GD(gpudyn_static_array_data(a, &data));
    const digest got = dg.flat(static_cast<const unsigned*>(data), size);
    if (st != 0) {
        fail(what + ": status " + std::to_string(st));
        return false;
    }
    return check_flat(got, size, want, what);
}

unsigned blocks_for(u64 n) { return unsigned((n + kBlock - 1) / kBlock); }
template <class K>
unsigned grid_stride_blocks(K kernel) {
    int per_sm = 0;
    CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlock, 0));
    return unsigned(std::max(1, per_sm) * g_sms);
}

// Runs on a structure kept across the runs (a static array, the floor's buffer):
// timed clear() + launch() + size() (the element count to the host, after a
// synchronize), then check(count) outside the timing.
template <class Clear, class Launch, class Size, class Check>
series kept_runs(int repeats, Clear&& clear, Launch&& launch, Size&& size, Check&& check) {
    series s;
    s.step_names = {"clear", "kernel", "size"};
    measure(s, repeats, [&](bool) {
        marks mk;
        mk.start();
        clear();
        mk.mark();
        launch();
        CUDA(cudaGetLastError());
        mk.mark();
        const u64 n = size();
        mk.mark();
        std::vector<double> st = mk.steps();
        s.verified &= check(n);
        return st;
    });
    return s;
}
// Runs on a static array kept across the runs: clear + launch(view) + size.
template <class Launch>
series static_array_runs(gpudyn_static_array_t a, const std::string& tag, int repeats, const digest& want, digester& dg,
                         Launch&& launch) {
    gpudyn_static_array_view_t v;
    GD(gpudyn_static_array_get_view(a, &v));
    series s = kept_runs(
        repeats, [&] { GD(gpudyn_static_array_clear(a, nullptr)); }, [&] { launch(v); },
        [&] {
            uint64_t n = 0;
            GD(gpudyn_static_array_size(a, &n, nullptr));
            return u64(n);
        },
        [&](u64 n) { return check_static(a, n, want, dg, tag); });
    GD(gpudyn_static_array_allocated_bytes(a, &s.bytes_held));
    return s;
}
// The floor's buffer (see floor_ref): L regions of `region` elements of T and L
// counters, allocated before its runs (freed after them); clear() and size()
// are what its user does per run: zero the counters; their sum to the host.
template <class T>
struct floor_buffer {
    floor_view view{};
    unsigned long long* total = nullptr;   // device: the counters' sum
    unsigned long long* h_total = nullptr; // pinned
    floor_buffer(unsigned L, u64 region) {
        view.num_lfvectors = L;
        view.region = region;
        CUDA(cudaMalloc(&view.data, std::max<u64>(1, u64(L) * region) * sizeof(T)));
        CUDA(cudaMalloc(&view.counters, u64(L) * sizeof(unsigned long long)));
        CUDA(cudaMalloc(&total, sizeof(unsigned long long)));
        CUDA(cudaMallocHost(&h_total, sizeof(unsigned long long)));
    }
    ~floor_buffer() {
        cudaDeviceSynchronize();
        cudaFree(view.data);
        cudaFree(view.counters);
        cudaFree(total);
        cudaFreeHost(h_total);
    }
    floor_buffer(const floor_buffer&) = delete;
    floor_buffer& operator=(const floor_buffer&) = delete;
    u64 bytes() const { return u64(view.num_lfvectors) * (view.region * sizeof(T) + sizeof(unsigned long long)); }
    void clear() {
        CUDA(cudaMemsetAsync(view.counters, 0, u64(view.num_lfvectors) * sizeof(unsigned long long), nullptr));
    }
    u64 size() {
        floor_total<<<1, kBlock>>>(view.counters, view.num_lfvectors, total);
        CUDA(cudaGetLastError());
        CUDA(cudaMemcpyAsync(h_total, total, sizeof(unsigned long long), cudaMemcpyDeviceToHost, nullptr));
        CUDA(cudaStreamSynchronize(nullptr));
        return *h_total;
    }
};
// Regions the floor needs: `blocks` blocks over L counters (block b on b mod L),
// each pushing at most per_block elements: the most blocks one counter gets, times that.
u64 floor_region(u64 blocks, unsigned L, u64 per_block) { return (blocks + L - 1) / L * per_block; }
// After a run of the floor with count n: every counter within its region, their
// sum n, the digest of the regions' [0, counter) the host's.
template <class T>
bool check_floor(const floor_buffer<T>& fb, u64 n, const digest& want, digester& dg, const std::string& what) {
    const unsigned L = fb.view.num_lfvectors;
    std::vector<unsigned long long> c(L);
    CUDA(cudaMemcpy(c.data(), fb.view.counters, u64(L) * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    u64 sum = 0;
    for (unsigned l = 0; l < L; ++l) {
        if (c[l] > fb.view.region) {
            fail(what + ": counter " + std::to_string(l) + " is " + std::to_string(c[l]) + ", past its region of " +
                 std::to_string(fb.view.region) + " elements");
            return false;
        }
        sum += c[l];
    }
    if (sum != n) {
        fail(what + ": counters sum to " + std::to_string(sum) + ", the count to the host was " + std::to_string(n));
        return false;
    }
    const digest got = dg.regions(static_cast<const T*>(fb.view.data), fb.view.counters, fb.view.region, L);
    return check_flat(got, n, want, what);
}
// Runs on the floor's buffer fb: zero the counters + launch(view) + count.
template <class T, class Launch>
series floor_runs(floor_buffer<T>& fb, const std::string& tag, int repeats, const digest& want, digester& dg,
                  Launch&& launch) {
    series s = kept_runs(
        repeats, [&] { fb.clear(); }, [&] { launch(fb.view); }, [&] { return fb.size(); },
        [&](u64 n) { return check_floor(fb, n, want, dg, tag); });
    s.bytes_held = fb.bytes();
    return s;
}
// One GGArray run: first() (create or clear), get_view, launch(view), size; the steps' ms.
template <class First, class Launch>
std::vector<double> ggarray_run(gpudyn_ggarray_t& g, First&& first, Launch&& launch, uint64_t* n) {
    marks mk;
    gpudyn_ggarray_view_t v;
    mk.start();
    first();
    mk.mark();
    GD(gpudyn_ggarray_get_view(g, &v, nullptr));
    mk.mark();
    launch(v);
    CUDA(cudaGetLastError());
    mk.mark();
    GD(gpudyn_ggarray_size(g, n, nullptr));
    mk.mark();
    return mk.steps();
}
// After a run of g with n elements: verification, bytes held and budget into s.
void record_ggarray(series& s, gpudyn_ggarray_t g, uint64_t n, const digest& want, digester& dg,
                    const std::string& tag) {
    s.verified &= check_ggarray(g, n, want, dg, tag);
    s.bytes_held = std::max(s.bytes_held, ggarray_held(g));
    s.budget_bytes = ggarray_budget(g);
}
// Runs on one GGArray kept across the runs (buckets kept): clear + get_view +
// launch(view) + size.  The warm-up raises the budget until the output fits.
template <class Launch>
series reused_ggarray_runs(const std::string& tag, int repeats, budget_state& budget, const digest& want, digester& dg,
                           Launch&& launch) {
    series s;
    s.step_names = {"clear", "get_view", "kernel", "size"};
    gpudyn_ggarray_t g = make_ggarray(budget.bytes);
    measure(s, repeats, [&](bool timed) {
        for (;;) {
            uint64_t n = 0;
            std::vector<double> st = ggarray_run(g, [&] { GD(gpudyn_ggarray_clear(g, nullptr)); }, launch, &n);
            if (!timed && budget.raise_if_out(g, tag)) {
                GD(gpudyn_ggarray_destroy(g));
                g = make_ggarray(budget.bytes);
                continue;
            }
            record_ggarray(s, g, n, want, dg, tag);
            return st;
        }
    });
    s.budget_raises = budget.raises;
    GD(gpudyn_ggarray_destroy(g));
    CUDA(cudaDeviceSynchronize());
    return s;
}

// ================================ a. variable output ================================
std::string section_variable(u64 m, int repeats) {
    std::vector<std::string> rows;
    digester dg;
    unsigned* pinned_total = nullptr;
    CUDA(cudaMallocHost(&pinned_total, sizeof(unsigned)));
    const unsigned grid = blocks_for(m);
    gpudyn_ggarray_options_t o;
    GD(gpudyn_ggarray_options_init(&o));
    const unsigned L = o.num_lfvectors; // the floor's counters: as many as a default GGArray's LFVectors
    for (const mean_case& mc : kMeans) {
        char label[64];
        snprintf(label, sizeof label, "mean %g", mc.mean);
        const digest want = parallel_digests<1>(m, [&](u64 t, std::array<digest, 1>& d) {
            const unsigned k = count_of(t, mc.mode);
            for (unsigned j = 0; j < k; ++j) digest_push(d[0], value_of(t, j));
        })[0];
        progress(std::string(label) + ": host reference");
        jobj row;
        row.num("mean", mc.mean)
            .u("max_k", mc.max_k)
            .obj("expected", digest_json(want))
            .u("output_bytes", want.count * 4);

        // ---- CUB two-pass ----
        series two_pass;
        two_pass.step_names = {"count", "scan", "total_to_host", "write"};
        measure(two_pass, repeats, [&](bool) {
            marks mk;
            unsigned *counts = nullptr, *out = nullptr;
            void* temp = nullptr;
            size_t temp_bytes = 0;
            mk.start();
            CUDA(cudaMallocAsync(reinterpret_cast<void**>(&counts), (m + 1) * sizeof(unsigned), nullptr));
            count_pass<<<blocks_for(m + 1), kBlock>>>(counts, unsigned(m), mc.mode);
            CUDA(cudaGetLastError());
            mk.mark();
            CUDA(cub::DeviceScan::ExclusiveSum(nullptr, temp_bytes, counts, counts, m + 1, nullptr));
            CUDA(cudaMallocAsync(&temp, temp_bytes, nullptr));
            CUDA(cub::DeviceScan::ExclusiveSum(temp, temp_bytes, counts, counts, m + 1, nullptr));
            mk.mark();
            CUDA(cudaMemcpyAsync(pinned_total, counts + m, sizeof(unsigned), cudaMemcpyDeviceToHost, nullptr));
            CUDA(cudaStreamSynchronize(nullptr));
            const u64 total = *pinned_total;
            mk.mark();
            CUDA(cudaMallocAsync(reinterpret_cast<void**>(&out), std::max<u64>(total, 1) * sizeof(unsigned), nullptr));
            write_pass<<<grid, kBlock>>>(counts, out, unsigned(m), mc.mode);
            CUDA(cudaGetLastError());
            CUDA(cudaFreeAsync(temp, nullptr));
            CUDA(cudaFreeAsync(counts, nullptr));
            mk.mark();
            std::vector<double> st = mk.steps();
            two_pass.bytes_held =
                std::max<u64>(two_pass.bytes_held, (m + 1) * sizeof(unsigned) + temp_bytes + total * sizeof(unsigned));
            two_pass.verified &= check_flat(dg.flat(out, total), total, want, std::string(label) + " cub_two_pass");
            CUDA(cudaFreeAsync(out, nullptr));
            CUDA(cudaStreamSynchronize(nullptr));
            return st;
        });
        progress(std::string(label) + ": cub_two_pass");

        budget_state budget;
        jobj stat_j, fresh_j, reused_j;
        for (int kind = 0; kind < kEmitKernels; ++kind) {
            const char* kname = kEmitKernelNames[kind];
            const std::string tag = std::string(label) + " " + kname;

            // ---- static array, worst case ----
            gpudyn_static_array_options_t so;
            GD(gpudyn_static_array_options_init(&so));
            so.capacity = m * mc.max_k;
            gpudyn_static_array_t sa = nullptr;
            GD(gpudyn_static_array_create(&sa, &so, nullptr));
            const series st = static_array_runs(
                sa, tag + " static_worst_case", repeats, want, dg, [&](const gpudyn_static_array_view_t& v) {
                    launch_emit<gpudyn::static_array_ref<unsigned>>(kind, v, grid, unsigned(m), mc);
                });
            GD(gpudyn_static_array_destroy(sa));
            CUDA(cudaDeviceSynchronize());
            stat_j.obj(kname, st.json());
            progress(tag + ": static_worst_case");

            auto launch = [&](const gpudyn_ggarray_view_t& v) {
                launch_emit<gpudyn::ggarray_ref<unsigned>>(kind, v, grid, unsigned(m), mc);
            };

            // ---- GGArray created fresh each run ----
            series fr;
            fr.step_names = {"create", "get_view", "kernel", "size"};
            measure(fr, repeats, [&](bool timed) {
                for (;;) {
                    gpudyn_ggarray_t g = nullptr;
                    uint64_t n = 0;
                    std::vector<double> s = ggarray_run(g, [&] { g = make_ggarray(budget.bytes); }, launch, &n);
                    const bool again = !timed && budget.raise_if_out(g, tag + " ggarray_fresh");
                    if (!again) record_ggarray(fr, g, n, want, dg, tag + " ggarray_fresh");
                    CUDA(cudaDeviceSynchronize());
                    const auto t0 = std::chrono::steady_clock::now();
                    GD(gpudyn_ggarray_destroy(g));
                    CUDA(cudaDeviceSynchronize());
                    if (timed) fr.destroy.push_back(wall_ms(t0));
                    if (!again) return s;
                }
            });
            fr.budget_raises = budget.raises;
            fresh_j.obj(kname, fr.json());
            progress(tag + ": ggarray_fresh");

            // ---- GGArray reused: one array kept across the runs ----
            const series ru = reused_ggarray_runs(tag + " ggarray_reused", repeats, budget, want, dg, launch);
            reused_j.obj(kname, ru.json());
            progress(tag + ": ggarray_reused");
        }

        // ---- the floor of the per-thread forms (loop, bulk): one buffer for both ----
        jobj floor_j;
        {
            using FR = floor_ref<unsigned>;
            floor_buffer<unsigned> fb(L, floor_region(grid, L, u64(kBlock) * mc.max_k));
            for (int kind = 0; kind < 2; ++kind) {
                const std::string tag = std::string(label) + " " + kEmitKernelNames[kind] + " floor";
                const series fl = floor_runs(fb, tag, repeats, want, dg, [&](const floor_view& v) {
                    if (kind == 1) emit<FR, floor_view, true><<<grid, kBlock>>>(v, unsigned(m), mc.mode);
                    else emit<FR, floor_view, false><<<grid, kBlock>>>(v, unsigned(m), mc.mode);
                });
                floor_j.obj(kEmitKernelNames[kind], fl.json());
                progress(tag);
            }
        }
        jobj c;
        c.obj("cub_two_pass", two_pass.json())
            .obj("static_worst_case", stat_j)
            .obj("ggarray_fresh", fresh_j)
            .obj("ggarray_reused", reused_j)
            .obj("floor", floor_j);
        row.obj("contenders", c);
        rows.push_back(row.str());
    }
    CUDA(cudaFreeHost(pinned_total));
    jobj sec;
    sec.u("threads", m)
        .u("block", kBlock)
        .u("num_lfvectors", o.num_lfvectors)
        .u("first_bucket_elements", o.first_bucket_elements)
        .u("element_bytes", sizeof(unsigned))
        .raw("means", jlist(rows));
    return sec.str();
}

// ================================ b. stream compaction ================================
std::string section_compaction(u64 n, int repeats) {
    using GR = gpudyn::ggarray_ref<int>;
    using GV = gpudyn_ggarray_view_t;
    using SR = gpudyn::static_array_ref<int>;
    using SV = gpudyn_static_array_view_t;
    using FR = floor_ref<int>;
    gpudyn_ggarray_options_t o;
    GD(gpudyn_ggarray_options_init(&o));
    const unsigned L = o.num_lfvectors; // the floor's counters: as many as a default GGArray's LFVectors
    std::vector<std::string> rows;
    digester dg;
    int* in = nullptr;
    CUDA(cudaMalloc(&in, n * sizeof(int)));
    fill_input<<<unsigned(g_sms) * kHelperBlocksPerSm, kBlock>>>(in, n);
    CUDA(cudaGetLastError());
    int thresholds[3];
    for (int p = 0; p < 3; ++p) thresholds[p] = int(kKeptPercent[p] / 100.0 * 2147483648.0 + 0.5);
    // Host reference: one pass for the three thresholds.
    const std::array<digest, 3> want = parallel_digests<3>(n, [&](u64 i, std::array<digest, 3>& d) {
        const int x = input_of(i);
        for (int p = 0; p < 3; ++p)
            if (x < thresholds[p]) digest_push(d[p], unsigned(x));
    });
    CUDA(cudaDeviceSynchronize());
    progress("compaction: input and host reference");

    // DeviceSelect::If's output and temp storage, allocated once (outside the timing).
    int* out = nullptr;
    long long* d_num = nullptr;
    long long* h_num = nullptr;
    CUDA(cudaMalloc(&out, n * sizeof(int)));
    CUDA(cudaMalloc(&d_num, sizeof(long long)));
    CUDA(cudaMallocHost(&h_num, sizeof(long long)));
    size_t temp_bytes = 0;
    CUDA(cub::DeviceSelect::If(nullptr, temp_bytes, in, out, d_num, (long long)n, less_than{thresholds[2]}, nullptr));
    void* temp = nullptr;
    CUDA(cudaMalloc(&temp, temp_bytes));

    const unsigned gs_gg = grid_stride_blocks(keep_grid_stride<gpudyn::ggarray_ref<int>, gpudyn_ggarray_view_t>);
    const unsigned gs_st =
        grid_stride_blocks(keep_grid_stride<gpudyn::static_array_ref<int>, gpudyn_static_array_view_t>);
    const unsigned gs_chunk = grid_stride_blocks(keep_chunk);
    const unsigned gs_warp_gg = grid_stride_blocks(keep_warp_tiles<GR, GV, kChunkItems, false>);
    const unsigned gs_warp_st = grid_stride_blocks(keep_warp_tiles<SR, SV, kChunkItems, false>);
    const unsigned gs_warp16_gg = grid_stride_blocks(keep_warp_tiles<GR, GV, 16, true>);
    const unsigned gs_warp16_st = grid_stride_blocks(keep_warp_tiles<SR, SV, 16, true>);
    gpudyn_static_array_options_t so;
    GD(gpudyn_static_array_options_init(&so));
    so.capacity = n;
    gpudyn_static_array_t sa = nullptr;
    GD(gpudyn_static_array_create(&sa, &so, nullptr));

    for (int p = 0; p < 3; ++p) {
        char label[64];
        snprintf(label, sizeof label, "%g %% kept", kKeptPercent[p]);
        const int thr = thresholds[p];
        jobj row;
        row.num("kept_percent", kKeptPercent[p])
            .raw("threshold", std::to_string(thr))
            .obj("expected", digest_json(want[p]))
            .u("output_bytes", want[p].count * sizeof(int));

        series sel;
        sel.step_names = {"select", "num_to_host"};
        sel.bytes_held = n * sizeof(int) + temp_bytes + sizeof(long long);
        measure(sel, repeats, [&](bool) {
            marks mk;
            mk.start();
            CUDA(cub::DeviceSelect::If(temp, temp_bytes, in, out, d_num, (long long)n, less_than{thr}, nullptr));
            mk.mark();
            CUDA(cudaMemcpyAsync(h_num, d_num, sizeof(long long), cudaMemcpyDeviceToHost, nullptr));
            CUDA(cudaStreamSynchronize(nullptr));
            mk.mark();
            std::vector<double> s = mk.steps();
            sel.verified &=
                check_flat(dg.flat(out, u64(*h_num)), u64(*h_num), want[p], std::string(label) + " select_if");
            return s;
        });
        progress(std::string(label) + ": select_if");

        // ---- GGArray, reused; three kernels ----
        budget_state budget;
        jobj gg_j;
        for (int kernel = 0; kernel < 5; ++kernel) {
            static const char* names[] = {"one_per_thread", "grid_stride", "chunk", "warp_tiles", "warp_tiles16"};
            const std::string tag = std::string(label) + " ggarray " + names[kernel];
            series s = reused_ggarray_runs(tag, repeats, budget, want[p], dg, [&](const gpudyn_ggarray_view_t& v) {
                if (kernel == 0)
                    keep_one_per_thread<gpudyn::ggarray_ref<int>><<<blocks_for(n), kBlock>>>(v, in, n, thr);
                else if (kernel == 1) keep_grid_stride<gpudyn::ggarray_ref<int>><<<gs_gg, kBlock>>>(v, in, n, thr);
                else if (kernel == 2) keep_chunk<<<gs_chunk, kBlock>>>(v, in, n, thr);
                else if (kernel == 3)
                    keep_warp_tiles<GR, GV, kChunkItems, false><<<gs_warp_gg, kBlock>>>(v, in, n, thr);
                else keep_warp_tiles<GR, GV, 16, true><<<gs_warp16_gg, kBlock>>>(v, in, n, thr);
            });
            s.kernel = names[kernel];
            gg_j.obj(names[kernel], s.json());
            progress(tag);
        }

        // ---- static array of capacity N ----
        jobj st_j;
        for (int kernel = 0; kernel < 4; ++kernel) {
            static const char* names[] = {"one_per_thread", "grid_stride", "warp_tiles", "warp_tiles16"};
            const std::string tag = std::string(label) + " static " + names[kernel];
            series s = static_array_runs(sa, tag, repeats, want[p], dg, [&](const gpudyn_static_array_view_t& v) {
                if (kernel == 0)
                    keep_one_per_thread<gpudyn::static_array_ref<int>><<<blocks_for(n), kBlock>>>(v, in, n, thr);
                else if (kernel == 1) keep_grid_stride<gpudyn::static_array_ref<int>><<<gs_st, kBlock>>>(v, in, n, thr);
                else if (kernel == 2)
                    keep_warp_tiles<SR, SV, kChunkItems, false><<<gs_warp_st, kBlock>>>(v, in, n, thr);
                else keep_warp_tiles<SR, SV, 16, true><<<gs_warp16_st, kBlock>>>(v, in, n, thr);
            });
            s.kernel = names[kernel];
            st_j.obj(names[kernel], s.json());
            progress(tag);
        }
        // ---- the floor: the same kernels, warp-aggregated atomics into a preallocated buffer ----
        jobj fl_j;
        for (int kernel = 0; kernel < 2; ++kernel) {
            static const char* names[] = {"one_per_thread", "grid_stride"};
            const std::string tag = std::string(label) + " floor " + names[kernel];
            // one_per_thread: a block keeps at most kBlock; grid-stride: kBlock times its iterations
            const u64 blocks = kernel == 0 ? blocks_for(n) : gs_gg;
            const u64 per_block =
                kernel == 0 ? kBlock : kBlock * ((n + u64(gs_gg) * kBlock - 1) / (u64(gs_gg) * kBlock));
            floor_buffer<int> fb(L, floor_region(blocks, L, per_block));
            series s = floor_runs(fb, tag, repeats, want[p], dg, [&](const floor_view& v) {
                if (kernel == 0) keep_one_per_thread<FR><<<blocks_for(n), kBlock>>>(v, in, n, thr);
                else keep_grid_stride<FR><<<gs_gg, kBlock>>>(v, in, n, thr);
            });
            s.kernel = names[kernel];
            fl_j.obj(names[kernel], s.json());
            progress(tag);
        }
        jobj c;
        c.obj("select_if", sel.json()).obj("ggarray", gg_j).obj("static", st_j).obj("floor", fl_j);
        row.obj("contenders", c);
        rows.push_back(row.str());
    }
    GD(gpudyn_static_array_destroy(sa));
    CUDA(cudaFree(temp));
    CUDA(cudaFree(out));
    CUDA(cudaFree(d_num));
    CUDA(cudaFreeHost(h_num));
    CUDA(cudaFree(in));
    CUDA(cudaDeviceSynchronize());
    jobj sec;
    sec.u("n", n)
        .u("block", kBlock)
        .u("chunk_elements", kChunk)
        .u("chunk_items", kChunkItems)
        .u("grid_stride_blocks_ggarray", gs_gg)
        .u("grid_stride_blocks_static", gs_st)
        .u("grid_stride_blocks_floor", gs_gg)
        .u("chunk_blocks", gs_chunk)
        .u("warp_tiles_blocks_ggarray", gs_warp_gg)
        .u("warp_tiles_blocks_static", gs_warp_st)
        .u("warp_tiles16_blocks_ggarray", gs_warp16_gg)
        .u("warp_tiles16_blocks_static", gs_warp16_st)
        .u("num_lfvectors", o.num_lfvectors)
        .u("first_bucket_elements", o.first_bucket_elements)
        .u("element_bytes", sizeof(int))
        .raw("selectivities", jlist(rows));
    return sec.str();
}

// ================================ c. growth inside the kernel ================================
std::string section_growth(u64 start, int repeats) {
    const u64 final_n = start << kGrowthDoublings;
    digester dg;
    const digest want =
        parallel_digests<1>(final_n, [](u64 i, std::array<digest, 1>& d) { digest_push(d[0], grow_value_of(i)); })[0];
    std::vector<double> sizes;
    for (int s = 0; s <= kGrowthDoublings; ++s) sizes.push_back(double(start << s));
    static const char* names[] = {"ggarray_in_kernel", "ggarray_reserved", "vmm_reserved"};
    budget_state budget;
    jobj contenders;
    for (int which = 0; which < 3; ++which) {
        // per step: the timed samples (one per repeat)
        std::vector<std::vector<double>> step_ms(kGrowthDoublings + 1);
        series s; // bytes, verification, budget
        double setup = 0;
        std::vector<double> setups;
        for (int r = -kWarmups; r < repeats; ++r) {
            const bool timed = r >= 0;
            gpudyn_ggarray_t g = nullptr;
            gpudyn_ggarray_view_t gv{};
            gpudyn_vmm_array_t vm = nullptr;
            marks mk;
            mk.start();
            if (which < 2) {
                g = make_ggarray(budget.bytes);
                GD(gpudyn_ggarray_get_view(g, &gv, nullptr)); // the heap (budget) is mapped here
            } else {
                gpudyn_vmm_array_options_t o;
                GD(gpudyn_vmm_array_options_init(&o));
                o.max_capacity = final_n;
                GD(gpudyn_vmm_array_create(&vm, &o, nullptr));
            }
            mk.mark();
            setup = mk.steps()[0];
            std::vector<double> per(kGrowthDoublings + 1);
            uint64_t n = 0;
            for (int st = 0; st <= kGrowthDoublings; ++st) {
                const u64 add = st == 0 ? start : n;
                mk.start();
                if (which == 0) {
                    // The view taken at creation serves every launch (pushes need no
                    // ranges): the doubling is the kernel alone, growth included.
                    push_n<gpudyn::ggarray_ref<unsigned>><<<blocks_for(add), kBlock>>>(gv, add, n);
                } else if (which == 1) {
                    // Slack: a block's 256 pushes go to one LFVector, so after st + 1
                    // launches an LFVector may hold up to st + 1 blocks more than the mean.
                    const u64 slack = u64(gv.num_lfvectors) * kBlock * u64(st + 1);
                    GD(gpudyn_ggarray_reserve(g, n + add + slack, nullptr));
                    GD(gpudyn_ggarray_get_view(g, &gv, nullptr)); // pool rows mapped now
                    push_n<gpudyn::ggarray_ref<unsigned>><<<blocks_for(add), kBlock>>>(gv, add, n);
                } else {
                    gpudyn_vmm_array_view_t v;
                    GD(gpudyn_vmm_array_reserve(vm, n + add, nullptr));
                    GD(gpudyn_vmm_array_get_view(vm, &v));
                    push_n<gpudyn::vmm_array_ref<unsigned>><<<blocks_for(add), kBlock>>>(v, add, n);
                }
                CUDA(cudaGetLastError());
                mk.mark();
                per[st] = mk.steps()[0];
                n += add;
            }
            uint64_t size = 0;
            if (which < 2) {
                GD(gpudyn_ggarray_size(g, &size, nullptr));
                if (!timed && budget.raise_if_out(g, std::string("growth ") + names[which])) {
                    GD(gpudyn_ggarray_destroy(g));
                    CUDA(cudaDeviceSynchronize());
                    --r; // the warm-up again, with the raised budget
                    continue;
                }
                record_ggarray(s, g, size, want, dg, std::string("growth ") + names[which]);
                GD(gpudyn_ggarray_destroy(g));
            } else {
                uint32_t stt = 0;
                GD(gpudyn_vmm_array_size(vm, &size, nullptr));
                GD(gpudyn_vmm_array_get_status(vm, &stt, nullptr));
                void* data = nullptr;
                GD(gpudyn_vmm_array_data(vm, &data));
                if (stt != 0) {
                    fail("growth vmm_reserved: status " + std::to_string(stt));
                    s.verified = false;
                }
                s.verified &=
                    check_flat(dg.flat(static_cast<const unsigned*>(data), size), size, want, "growth vmm_reserved");
                uint64_t b = 0;
                GD(gpudyn_vmm_array_allocated_bytes(vm, &b));
                s.bytes_held = std::max(s.bytes_held, b);
                GD(gpudyn_vmm_array_destroy(vm));
            }
            CUDA(cudaDeviceSynchronize());
            if (timed) {
                for (int st = 0; st <= kGrowthDoublings; ++st) step_ms[st].push_back(per[st]);
                setups.push_back(setup);
            }
        }
        std::vector<double> med;
        for (const auto& v : step_ms) med.push_back(median(v));
        jobj j;
        j.arr("ms", med).num("setup_ms", median(setups)).u("bytes_held", s.bytes_held).b("verified", s.verified);
        if (which < 2) j.u("budget_bytes", s.budget_bytes).raw("budget_raises", std::to_string(budget.raises));
        contenders.obj(names[which], j);
        progress(std::string("growth: ") + names[which]);
    }
    gpudyn_ggarray_options_t o;
    GD(gpudyn_ggarray_options_init(&o));
    jobj sec;
    sec.arr("sizes", sizes)
        .u("final_size", final_n)
        .u("element_bytes", sizeof(unsigned))
        .raw("repeats", std::to_string(repeats))
        .u("num_lfvectors", o.num_lfvectors)
        .u("first_bucket_elements", o.first_bucket_elements)
        .obj("expected", digest_json(want))
        .obj("contenders", contenders);
    return sec.str();
}

} // namespace

int main(int argc, char** argv) {
    const char* out = nullptr;
    const char* only = nullptr;
    bool quick = false;
    const char* usage = "usage: %s --out FILE.json [--quick] [--only variable|compaction|growth] [--budget-mib N]\n";
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--budget-mib") && i + 1 < argc) {
            char* end = nullptr;
            const unsigned long long mib = strtoull(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0') {
                fprintf(stderr, "gpudyn_bench_user: argument '--budget-mib' is '%s', expected a number of MiB\n",
                        argv[i]);
                return 2;
            }
            g_budget_start = mib << 20;
        } else {
            fprintf(stderr, usage, argv[0]);
            return 2;
        }
    }
    if (!out) {
        fprintf(stderr, "gpudyn_bench_user: --out FILE.json is required\n");
        fprintf(stderr, usage, argv[0]);
        return 2;
    }
    if (only && strcmp(only, "variable") && strcmp(only, "compaction") && strcmp(only, "growth")) {
        fprintf(stderr, "gpudyn_bench_user: argument '--only' is '%s', expected variable, compaction or growth\n",
                only);
        return 2;
    }
    auto section = [&](const char* name) { return only == nullptr || !strcmp(only, name); };

    int32_t devices = 0;
    if (gpudyn_get_device_count(&devices) != GPUDYN_SUCCESS || devices == 0) {
        fprintf(stderr, "gpudyn_bench_user: no CUDA device: %s\nthis benchmark runs on a GPU; nothing was measured\n",
                gpudyn_last_error_message());
        return 77; // the project's "skipped" status (tests/c, examples)
    }
    int dev = 0;
    CUDA(cudaGetDevice(&dev));
    CUDA(cudaDeviceGetAttribute(&g_sms, cudaDevAttrMultiProcessorCount, dev));
    // CUB's allocations come from the default pool; keep its memory between runs
    // (the default threshold 0 returns it to the driver at every synchronize).
    cudaMemPool_t pool;
    CUDA(cudaDeviceGetDefaultMemPool(&pool, dev));
    u64 keep = ~0ull;
    CUDA(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));

    const int repeats = quick ? kQuickRepeats : kRepeats;
    const u64 m = quick ? kQuickThreads : kThreads;
    const u64 n = quick ? kQuickCompactionN : kCompactionN;
    const u64 start = quick ? kQuickGrowthStart : kGrowthStart;
    const int growth_repeats = quick ? kQuickGrowthRepeats : kGrowthRepeats;
    // progress lines: per mean a host reference, CUB, 3 contenders x 4 kernels and 2 floor kernels; per
    // selectivity select_if, 5 GGArray, 4 static and 2 floor kernels (after the input); 3 growth contenders
    g_total = (section("variable") ? 3 * (2 + 3 * kEmitKernels + 2) : 0) +
              (section("compaction") ? 1 + 3 * (1 + 5 + 4 + 2) : 0) + (section("growth") ? 3 : 0);

    const auto t0 = std::chrono::steady_clock::now();
    jobj j;
    j.b("quick", quick)
        .raw("repeats", std::to_string(repeats))
        .raw("warmups", std::to_string(kWarmups))
        .u("sms", u64(g_sms))
        .u("budget_start_bytes", g_budget_start)
        .str("cub_pool", "default pool, release threshold max (memory kept between runs)");
    std::vector<double> secs;
    if (section("variable")) {
        const auto s0 = std::chrono::steady_clock::now();
        j.raw("variable_output", section_variable(m, repeats));
        j.num("variable_output_seconds", wall_ms(s0) / 1e3);
    }
    if (section("compaction")) {
        const auto s0 = std::chrono::steady_clock::now();
        j.raw("compaction", section_compaction(n, repeats));
        j.num("compaction_seconds", wall_ms(s0) / 1e3);
    }
    if (section("growth")) {
        const auto s0 = std::chrono::steady_clock::now();
        j.raw("growth", section_growth(start, growth_repeats));
        j.num("growth_seconds", wall_ms(s0) / 1e3);
    }
    std::vector<std::string> fl;
    for (const auto& f : g_failures) {
        std::string e = "\"";
        for (char c : f) e += (c == '"' || c == '\\') ? '_' : c;
        fl.push_back(e + "\"");
    }
    j.b("verified", g_failures.empty()).raw("failures", jlist(fl)).num("seconds", wall_ms(t0) / 1e3);
    FILE* f = fopen(out, "w");
    if (!f) {
        fprintf(stderr, "gpudyn_bench_user: cannot write %s\n", out);
        return 2;
    }
    fputs((j.str() + "\n").c_str(), f);
    fclose(f);
    if (!g_failures.empty()) {
        fprintf(stderr, "gpudyn_bench_user: %zu verification(s) failed (see above; written to %s)\n", g_failures.size(),
                out);
        return 1;
    }
    return 0;
}
