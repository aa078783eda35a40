// Device correctness of the warp heap: every block handed out is disjoint from
// every other and 16-byte aligned, data written by a lane survives until
// tidy_up, superblock counts match a host simulation of the packing, requests
// larger than a superblock, partial and divergent warps, exhaustion, keep across
// kernels then end (the backing allocator gets all its memory back), the
// host's tidy_up_kept (memory back, headers resumable), the bulk
// ABI (alloc_batch / release, OOM roll-back) and the heap without superblocks;
// every test on each backing (arena, CUDA malloc, random-walk page heap).
#include <cstdlib>
#include "check.h"

#include <gpudyn/rw_heap.h>
#include <gpudyn/warp_heap.h>
#include <gpudyn/warp_heap.cuh>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

using gpudyn::detail::kFullWarpMask;

// CUDA malloc heap for the whole test (process-wide limit, raised at the first create).
static const uint64_t kDeviceHeapBytes = 512ull << 20;

#define CUDA_OK(call) CHECK((call) == cudaSuccess)

struct record {
    unsigned long long ptr;
    unsigned long long bytes;
};

// Pattern word of (owner, round, word index): a lane checks its own blocks.
__device__ __host__ inline unsigned pattern(unsigned owner, unsigned round, unsigned i) {
    return owner * 2654435761u ^ (round * 40503u + i * 7u + 1u);
}

__device__ void fill(void* p, unsigned long long bytes, unsigned owner, unsigned round) {
    unsigned* w = static_cast<unsigned*>(p);
    for (unsigned long long i = 0; i < bytes / 4; ++i) w[i] = pattern(owner, round, unsigned(i));
}
__device__ unsigned long long verify(const void* p, unsigned long long bytes, unsigned owner, unsigned round) {
    const unsigned* w = static_cast<const unsigned*>(p);
    unsigned long long bad = 0;
    for (unsigned long long i = 0; i < bytes / 4; ++i) bad += w[i] != pattern(owner, round, unsigned(i));
    return bad;
}

// Size of lane `lane`'s request in round r (16..144 B, and 0 now and then).
__device__ __host__ inline unsigned small_size(unsigned tid, unsigned r) {
    unsigned v = (tid * 7u + r * 3u) % 10u;
    return v == 9 ? 0u : 16u * (1u + v);
}

// Backing of the tests now running, and the page heap of the PAGE_HEAP runs
// (pages of 36 KiB hold a header block with a 32 KiB superblock; 576 MiB, room
// for the counts test's 64 warps x 128 superblocks).
static gpudyn_warp_heap_backing_t g_backing = GPUDYN_WARP_HEAP_BACKING_ARENA;
static gpudyn_rw_heap_t g_pages = nullptr;
static const uint64_t kPageBytes = 36 << 10;
static const uint64_t kPageCount = 16384;
// Arena header slots when superblocks are huge (the exhaustion test's 32 MiB):
// room for its 4 warps, the rest of the pool for chunks.
static const uint64_t kHugeSuperblock = 1 << 20;
static const uint64_t kFewHeaderSlots = 8;

static gpudyn_warp_heap_t make_heap(uint64_t superblock_bytes) {
    gpudyn_warp_heap_options_t o;
    gpudyn_warp_heap_options_init(&o);
    o.superblock_bytes = superblock_bytes;
    o.device_heap_bytes = kDeviceHeapBytes;
    o.backing = g_backing;
    o.arena_bytes = kDeviceHeapBytes;
    if (superblock_bytes > kHugeSuperblock) o.arena_header_slots = kFewHeaderSlots;
    o.page_heap = g_pages;
    gpudyn_warp_heap_t h = nullptr;
    CHECK_OK(gpudyn_warp_heap_create(&h, &o, nullptr));
    return h;
}

static gpudyn_warp_heap_stats_t stats_of(gpudyn_warp_heap_t h) {
    gpudyn_warp_heap_stats_t s{};
    CHECK_OK(gpudyn_warp_heap_get_stats(h, &s, nullptr));
    return s;
}

static void check_all_released(gpudyn_warp_heap_t h, const char* what) {
    gpudyn_warp_heap_stats_t s = stats_of(h);
    if (s.headers || s.superblocks || s.large_blocks || s.bytes_reserved || s.bytes_requested) {
        fprintf(stderr, "%s: not all released: headers %llu superblocks %llu large %llu reserved %llu requested %llu\n",
                what, (unsigned long long)s.headers, (unsigned long long)s.superblocks,
                (unsigned long long)s.large_blocks, (unsigned long long)s.bytes_reserved,
                (unsigned long long)s.bytes_requested);
        ++gpudyn_test_failures;
    }
}

// Host check: no two non-empty ranges overlap, all 16-byte aligned and non-null
// where bytes != 0.
static void check_disjoint(std::vector<record> recs, const char* what) {
    recs.erase(std::remove_if(recs.begin(), recs.end(), [](const record& r) { return r.bytes == 0; }), recs.end());
    size_t misaligned = 0, nulls = 0, overlaps = 0;
    for (const record& r : recs) {
        if (r.ptr == 0) ++nulls;
        if (r.ptr % 16 != 0) ++misaligned;
    }
    std::sort(recs.begin(), recs.end(), [](const record& a, const record& b) { return a.ptr < b.ptr; });
    for (size_t i = 1; i < recs.size(); ++i)
        if (recs[i - 1].ptr + recs[i - 1].bytes > recs[i].ptr) ++overlaps;
    if (misaligned || nulls || overlaps || recs.empty()) {
        fprintf(stderr, "%s: %zu ranges, %zu null, %zu misaligned, %zu overlapping\n", what, recs.size(), nulls,
                misaligned, overlaps);
        ++gpudyn_test_failures;
    }
}

// Probe of the CUDA malloc heap: how many 4 MiB blocks can be taken at once.
// The pointers go to a global array (not a 2 KiB local one, past CUDA's default
// 1 KiB stack).
constexpr unsigned kProbeMax = 256; // 256 x 4 MiB = 1 GiB > kDeviceHeapBytes
__global__ void probe_kernel(void** blocks, unsigned* count) {
    unsigned n = 0;
    while (n < kProbeMax && (blocks[n] = malloc(4u << 20)) != nullptr) ++n;
    for (unsigned i = 0; i < n; ++i) free(blocks[i]);
    *count = n;
}
static unsigned probe_cuda_heap() {
    unsigned* d = nullptr;
    void** blocks = nullptr;
    unsigned n = 0;
    CUDA_OK(cudaMalloc(&d, sizeof(unsigned)));
    CUDA_OK(cudaMalloc(&blocks, sizeof(void*) * kProbeMax));
    probe_kernel<<<1, 1>>>(blocks, d);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaMemcpy(&n, d, sizeof(unsigned), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaFree(d));
    CUDA_OK(cudaFree(blocks));
    return n;
}
// Free memory of the backing in its own unit (CUDA malloc: 4 MiB blocks that
// can be had; arena and page heap: free bytes).
static uint64_t backing_level(gpudyn_warp_heap_t h) {
    if (g_backing == GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC) return probe_cuda_heap();
    uint64_t bytes = 0;
    CHECK_OK(gpudyn_warp_heap_backing_free_bytes(h, &bytes, nullptr));
    return bytes;
}

// ---- 1: small requests, data survival, tidy_up, end -------------------------
constexpr unsigned kRounds = 40;

// Kernel A allocates and keeps (so every block is live when the host checks
// them: blocks freed by one warp may be reused by another, so only live blocks
// must be disjoint); kernel B resumes, checks the data survived, tidies up,
// allocates again and ends with the lanes leaving one by one.
__global__ void small_kernel(gpudyn_warp_heap_view_t view, record* recs, unsigned long long* bad, void** kept) {
    gpudyn::warp_heap_ref ref{view};
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    gpudyn::warp_heap heap = ref.start(kFullWarpMask);
#pragma unroll 1
    for (unsigned r = 0; r < kRounds; ++r) {
        const unsigned bytes = small_size(tid, r);
        void* p = heap.alloc(bytes);
        recs[tid * kRounds + r] = record{(unsigned long long)p, bytes};
        if (p != nullptr) fill(p, bytes, tid, r);
    }
    __syncwarp();
    unsigned long long b = 0;
#pragma unroll 1
    for (unsigned r = 0; r < kRounds; ++r) {
        const record& rec = recs[tid * kRounds + r];
        if (rec.ptr) b += verify((void*)rec.ptr, rec.bytes, tid, r);
    }
    if (b) atomicAdd(bad, b);
    void* k = heap.keep();
    if (threadIdx.x % 32 == 0) kept[tid / 32] = k;
}

__global__ void small_resume_kernel(gpudyn_warp_heap_view_t view, const record* recs, unsigned long long* bad,
                                    void** kept) {
    gpudyn::warp_heap_ref ref{view};
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = gpudyn::detail::lane_index();
    gpudyn::warp_heap heap = ref.resume(kFullWarpMask, kept[tid / 32]);
    unsigned long long b = heap.valid() ? 0 : 1;
#pragma unroll 1
    for (unsigned r = 0; r < kRounds; ++r) {
        const record& rec = recs[tid * kRounds + r];
        if (rec.ptr) b += verify((void*)rec.ptr, rec.bytes, tid, r);
    }
    heap.tidy_up();
    void* mine[4];
#pragma unroll 1
    for (unsigned r = 0; r < 4; ++r) {
        mine[r] = heap.alloc(small_size(tid, r + 1));
        if (mine[r] != nullptr) fill(mine[r], small_size(tid, r + 1), tid, r + 1);
    }
    __syncwarp();
    for (unsigned r = 0; r < 4; ++r)
        if (mine[r] != nullptr) b += verify(mine[r], small_size(tid, r + 1), tid, r + 1);
    if (b) atomicAdd(bad, b);
    // End at different times: the lanes leave one by one in a divergent loop.
#pragma unroll 1
    for (unsigned step = 0; step < 32; ++step)
        if (step == 31 - lane) heap.end();
}

static void test_small() {
    const unsigned blocks = 64, threads = 128, n = blocks * threads;
    gpudyn_warp_heap_t h = make_heap(32768);
    gpudyn_warp_heap_view_t v;
    CHECK_OK(gpudyn_warp_heap_get_view(h, &v));
    record* d_recs;
    unsigned long long* d_bad;
    CUDA_OK(cudaMalloc(&d_recs, sizeof(record) * n * kRounds));
    CUDA_OK(cudaMalloc(&d_bad, sizeof(unsigned long long)));
    CUDA_OK(cudaMemset(d_bad, 0, sizeof(unsigned long long)));
    void** d_kept;
    CUDA_OK(cudaMalloc(&d_kept, sizeof(void*) * n / 32));
    small_kernel<<<blocks, threads>>>(v, d_recs, d_bad, d_kept);
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<record> recs(size_t(n) * kRounds);
    CUDA_OK(cudaMemcpy(recs.data(), d_recs, sizeof(record) * recs.size(), cudaMemcpyDeviceToHost));
    check_disjoint(recs, "small");
    uint64_t want = 0;
    for (const record& r : recs) want += (r.bytes + 15) / 16 * 16;
    CHECK(stats_of(h).bytes_requested == want);
    small_resume_kernel<<<blocks, threads>>>(v, d_recs, d_bad, d_kept);
    CUDA_OK(cudaGetLastError());
    unsigned long long bad = 1;
    CUDA_OK(cudaMemcpy(&bad, d_bad, sizeof(bad), cudaMemcpyDeviceToHost));
    CHECK(bad == 0);
    CUDA_OK(cudaFree(d_kept));
    gpudyn_warp_heap_stats_t s = stats_of(h);
    CHECK(s.failed_allocations == 0);
    CHECK(s.misuse == 0);
    check_all_released(h, "small");
    CUDA_OK(cudaFree(d_recs));
    CUDA_OK(cudaFree(d_bad));
    CHECK_OK(gpudyn_warp_heap_destroy(h));
}

// ---- 2: superblock counts against a host simulation, keep + free_kept -------
__global__ void count_kernel(gpudyn_warp_heap_view_t view, unsigned calls, unsigned bytes, void** kept) {
    gpudyn::warp_heap_ref ref{view};
    gpudyn::warp_heap heap = ref.start(kFullWarpMask);
#pragma unroll 1
    for (unsigned c = 0; c < calls; ++c) heap.alloc(bytes);
    void* k = heap.keep();
    if (threadIdx.x % 32 == 0) kept[(blockIdx.x * blockDim.x + threadIdx.x) / 32] = k;
}

// Superblocks one warp holds after `calls` calls of 32 lanes x bytes: the lanes
// are served greedily in lane order, a lane that does not fit opens a new one.
static uint64_t simulate_superblocks(uint64_t sb, unsigned calls, unsigned bytes) {
    uint64_t count = 1, offset = 0;
    for (unsigned i = 0; i < calls * 32u; ++i) {
        if (offset + bytes > sb) {
            ++count;
            offset = 0;
        }
        offset += bytes;
    }
    return count;
}

static void test_counts() {
    const unsigned warps = 64;
    struct {
        unsigned calls, bytes;
    } cases[] = {{128, 16}, {100, 48}, {7, 1024}, {4, 32768}} /* the last chains a second list (127 > 126) */;
    for (auto c : cases) {
        gpudyn_warp_heap_t h = make_heap(32768);
        const uint64_t before = backing_level(h);
        gpudyn_warp_heap_view_t v;
        CHECK_OK(gpudyn_warp_heap_get_view(h, &v));
        void** d_kept;
        CUDA_OK(cudaMalloc(&d_kept, sizeof(void*) * warps));
        count_kernel<<<warps / 4, 128>>>(v, c.calls, c.bytes, d_kept);
        CUDA_OK(cudaGetLastError());
        gpudyn_warp_heap_stats_t s = stats_of(h);
        const uint64_t expect = warps * simulate_superblocks(32768, c.calls, c.bytes);
        if (s.superblocks != expect || s.headers != warps || s.failed_allocations != 0 || s.large_blocks != 0 ||
            s.bytes_requested != uint64_t(warps) * c.calls * 32u * c.bytes) {
            fprintf(stderr, "counts %u x %u B: superblocks %llu (expected %llu), headers %llu, requested %llu\n",
                    c.calls, c.bytes, (unsigned long long)s.superblocks, (unsigned long long)expect,
                    (unsigned long long)s.headers, (unsigned long long)s.bytes_requested);
            ++gpudyn_test_failures;
        }
        CHECK_OK(gpudyn_warp_heap_free_kept(h, d_kept, warps, nullptr));
        check_all_released(h, "counts");
        const uint64_t after = backing_level(h);
        CHECK(before > 0);
        CHECK(after == before);
        CUDA_OK(cudaFree(d_kept));
        CHECK_OK(gpudyn_warp_heap_destroy(h));
    }
}

// ---- 3: requests larger than a superblock, mixed with small ones ------------
__global__ void large_kernel(gpudyn_warp_heap_view_t view, record* recs, unsigned long long* bad) {
    gpudyn::warp_heap_ref ref{view};
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    gpudyn::warp_heap heap = ref.start(kFullWarpMask);
    void* mine[4];
    unsigned sizes[4];
    for (unsigned r = 0; r < 4; ++r) {
        // Every 5th lane asks for more than a 32 KiB superblock.
        sizes[r] = (tid + r) % 5 == 0 ? 40000u + 16u * r : small_size(tid, r);
        mine[r] = heap.alloc(sizes[r]);
        recs[tid * 4 + r] = record{(unsigned long long)mine[r], sizes[r]};
        if (mine[r]) fill(mine[r], sizes[r], tid, r);
    }
    __syncwarp();
    unsigned long long b = 0;
    for (unsigned r = 0; r < 4; ++r)
        if (mine[r]) b += verify(mine[r], sizes[r], tid, r);
    if (b) atomicAdd(bad, b);
    heap.end();
}

static void test_large() {
    const unsigned blocks = 16, threads = 64, n = blocks * threads;
    gpudyn_warp_heap_t h = make_heap(32768);
    gpudyn_warp_heap_view_t v;
    CHECK_OK(gpudyn_warp_heap_get_view(h, &v));
    record* d_recs;
    unsigned long long* d_bad;
    CUDA_OK(cudaMalloc(&d_recs, sizeof(record) * n * 4));
    CUDA_OK(cudaMalloc(&d_bad, sizeof(unsigned long long)));
    CUDA_OK(cudaMemset(d_bad, 0, sizeof(unsigned long long)));
    large_kernel<<<blocks, threads>>>(v, d_recs, d_bad);
    CUDA_OK(cudaGetLastError());
    std::vector<record> recs(size_t(n) * 4);
    unsigned long long bad = 1;
    CUDA_OK(cudaMemcpy(recs.data(), d_recs, sizeof(record) * recs.size(), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&bad, d_bad, sizeof(bad), cudaMemcpyDeviceToHost));
    CHECK(bad == 0);
    check_disjoint(recs, "large");
    gpudyn_warp_heap_stats_t s = stats_of(h);
    CHECK(s.failed_allocations == 0);
    CHECK(s.backing_allocations > n / 32); // headers plus one large block per call with a large request
    check_all_released(h, "large");
    CUDA_OK(cudaFree(d_recs));
    CUDA_OK(cudaFree(d_bad));
    CHECK_OK(gpudyn_warp_heap_destroy(h));
}

// ---- 4: partial warps, voting subsets, subset masks, divergent end ----------
__global__ void partial_kernel(gpudyn_warp_heap_view_t view, record* recs, unsigned long long* bad, void** kept) {
    gpudyn::warp_heap_ref ref{view};
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned lane = gpudyn::detail::lane_index();
    // Lanes of this (possibly partial) warp that exist in the block.
    const unsigned warp_base = threadIdx.x - lane;
    const unsigned lanes = min(32u, blockDim.x - warp_base);
    const unsigned in_block = lanes == 32 ? kFullWarpMask : (1u << lanes) - 1u;
    // Only every third lane votes for a header.
    const bool wants = lane % 3 == 0;
    gpudyn::warp_heap heap = ref.start(in_block, wants);
    unsigned long long b = 0;
    if (wants) {
        const unsigned members = heap.members();
        void* mine[8];
        for (unsigned r = 0; r < 8; ++r) {
            mine[r] = nullptr;
            if (r % 2 == 0) {
                mine[r] = heap.alloc(small_size(tid, r)); // all members
            } else if (lane & 1u) {
                // Only the odd members, on a diverged path, with their own mask.
                mine[r] = heap.alloc(members & 0xaaaaaaaau, small_size(tid, r));
            }
            recs[tid * 8 + r] = record{(unsigned long long)mine[r], mine[r] ? small_size(tid, r) : 0u};
            if (mine[r]) fill(mine[r], small_size(tid, r), tid, r);
            // Collectives on one header take turns: the even members wait here
            // for the odd ones before the next all-members call.
            __syncwarp(members);
        }
        __syncwarp(members);
        for (unsigned r = 0; r < 8; ++r)
            if (mine[r]) b += verify(mine[r], small_size(tid, r), tid, r);
        // Keep at different times (the lanes leave one by one); the host frees.
        void* k = nullptr;
#pragma unroll 1
        for (unsigned step = 0; step < 32; ++step)
            if (step == 31 - lane) k = heap.keep();
        if (lane == 0) kept[blockIdx.x * ((blockDim.x + 31) / 32) + threadIdx.x / 32] = k;
    } else {
        for (unsigned r = 0; r < 8; ++r) recs[tid * 8 + r] = record{0, 0};
    }
    if (b) atomicAdd(bad, b);
}

static void test_partial() {
    const unsigned blocks = 8, threads = 100, n = blocks * threads; // last warp of each block: 4 lanes
    gpudyn_warp_heap_t h = make_heap(1024);                         // small superblocks: several per warp
    gpudyn_warp_heap_view_t v;
    CHECK_OK(gpudyn_warp_heap_get_view(h, &v));
    record* d_recs;
    unsigned long long* d_bad;
    CUDA_OK(cudaMalloc(&d_recs, sizeof(record) * n * 8));
    CUDA_OK(cudaMalloc(&d_bad, sizeof(unsigned long long)));
    CUDA_OK(cudaMemset(d_bad, 0, sizeof(unsigned long long)));
    const unsigned warps = blocks * ((threads + 31) / 32);
    void** d_kept;
    CUDA_OK(cudaMalloc(&d_kept, sizeof(void*) * warps));
    CUDA_OK(cudaMemset(d_kept, 0, sizeof(void*) * warps));
    partial_kernel<<<blocks, threads>>>(v, d_recs, d_bad, d_kept);
    CUDA_OK(cudaGetLastError());
    std::vector<record> recs(size_t(n) * 8);
    unsigned long long bad = 1;
    CUDA_OK(cudaMemcpy(recs.data(), d_recs, sizeof(record) * recs.size(), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&bad, d_bad, sizeof(bad), cudaMemcpyDeviceToHost));
    CHECK(bad == 0);
    // Every lane that asked on an all-members round got memory.
    size_t expected = 0, got = 0;
    for (unsigned t = 0; t < n; ++t) {
        unsigned lane = (t % threads) % 32;
        if (lane % 3 != 0) continue;
        for (unsigned r = 0; r < 8; r += 2)
            if (small_size(t, r) != 0) {
                ++expected;
                got += recs[t * 8 + r].ptr != 0;
            }
    }
    CHECK(expected > 0 && got == expected);
    check_disjoint(recs, "partial");
    gpudyn_warp_heap_stats_t s = stats_of(h);
    CHECK(s.headers == warps);
    CHECK_OK(gpudyn_warp_heap_free_kept(h, d_kept, warps, nullptr));
    CUDA_OK(cudaFree(d_kept));
    CHECK(s.misuse == 0);
    CHECK(s.failed_allocations == 0);
    check_all_released(h, "partial");
    CUDA_OK(cudaFree(d_recs));
    CUDA_OK(cudaFree(d_bad));
    CHECK_OK(gpudyn_warp_heap_destroy(h));
}

// ---- 5: exhaustion ------------------------------------------------------------
constexpr unsigned kExhaustRounds = 24;

__global__ void exhaust_kernel(gpudyn_warp_heap_view_t view, record* recs, unsigned long long* bad) {
    gpudyn::warp_heap_ref ref{view};
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    gpudyn::warp_heap heap = ref.start(kFullWarpMask);
    void* first = heap.alloc(64);
    if (first) fill(first, 64, tid, 999);
    void* mine[kExhaustRounds];
    // 32 lanes x 1 MiB per call: one 32 MiB superblock per call, until the heap is gone.
#pragma unroll 1
    for (unsigned r = 0; r < kExhaustRounds; ++r) {
        mine[r] = heap.alloc(1u << 20);
        recs[tid * (kExhaustRounds + 2) + r] = record{(unsigned long long)mine[r], mine[r] ? (1ull << 20) : 0ull};
        if (mine[r]) fill(mine[r], 4096, tid, r); // first page of each block is enough to see overlap
    }
    // Beyond any backing: NULL, nothing else disturbed.
    void* huge = heap.alloc(1ull << 41);
    recs[tid * (kExhaustRounds + 2) + kExhaustRounds] = record{(unsigned long long)first, first ? 64ull : 0ull};
    recs[tid * (kExhaustRounds + 2) + kExhaustRounds + 1] = record{(unsigned long long)huge, 0};
    if (huge) atomicAdd(bad, 1000000ull);
    __syncwarp();
    unsigned long long b = first ? verify(first, 64, tid, 999) : 1;
    for (unsigned r = 0; r < kExhaustRounds; ++r)
        if (mine[r]) b += verify(mine[r], 4096, tid, r);
    if (b) atomicAdd(bad, b);
    // Every warp's blocks stay live until all warps have recorded and verified
    // theirs: a warp that ended earlier would hand its memory back, another
    // warp could then be served the same addresses legitimately, and the
    // overlap check below would see two records of one range.
    __syncthreads();
    heap.end();
}

static void test_exhaustion() {
    // One block, so that the barrier above spans every warp.
    const unsigned blocks = 1, threads = 128, n = blocks * threads;
    gpudyn_warp_heap_t h = make_heap(32u << 20);
    const uint64_t before = backing_level(h);
    gpudyn_warp_heap_view_t v;
    CHECK_OK(gpudyn_warp_heap_get_view(h, &v));
    record* d_recs;
    unsigned long long* d_bad;
    const unsigned per = kExhaustRounds + 2;
    CUDA_OK(cudaMalloc(&d_recs, sizeof(record) * n * per));
    CUDA_OK(cudaMalloc(&d_bad, sizeof(unsigned long long)));
    CUDA_OK(cudaMemset(d_bad, 0, sizeof(unsigned long long)));
    exhaust_kernel<<<blocks, threads>>>(v, d_recs, d_bad);
    CUDA_OK(cudaGetLastError());
    std::vector<record> recs(size_t(n) * per);
    unsigned long long bad = 1;
    CUDA_OK(cudaMemcpy(recs.data(), d_recs, sizeof(record) * recs.size(), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&bad, d_bad, sizeof(bad), cudaMemcpyDeviceToHost));
    CHECK(bad == 0);
    size_t served = 0, refused = 0;
    for (unsigned t = 0; t < n; ++t)
        for (unsigned r = 0; r < kExhaustRounds; ++r) (recs[t * per + r].ptr ? served : refused) += 1;
    // 4 warps x 24 calls x 32 MiB = 3 GiB asked of a 512 MiB heap.
    CHECK(served > 0 && refused > 0);
    check_disjoint(recs, "exhaustion");
    gpudyn_warp_heap_stats_t s = stats_of(h);
    CHECK(s.failed_allocations >= refused);
    check_all_released(h, "exhaustion");
    CHECK(backing_level(h) == before);
    CHECK_OK(gpudyn_warp_heap_destroy(h));
    CUDA_OK(cudaFree(d_recs));
    CUDA_OK(cudaFree(d_bad));
}

// ---- 6: keep across kernels, resume, end ---------------------------------------
__global__ void keep_kernel(gpudyn_warp_heap_view_t view, void** kept, void** ptrs) {
    gpudyn::warp_heap_ref ref{view};
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    gpudyn::warp_heap heap = ref.start(kFullWarpMask);
    void* p = heap.alloc(96 + 16 * (tid % 4));
    void* big = heap.alloc(50000); // a large block, kept too
    if (p) fill(p, 96, tid, 1);
    if (big) fill(big, 50000, tid, 2);
    ptrs[2 * tid] = p;
    ptrs[2 * tid + 1] = big;
    void* k = heap.keep();
    if (threadIdx.x % 32 == 0) kept[tid / 32] = k;
}
__global__ void resume_kernel(gpudyn_warp_heap_view_t view, void** kept, void** ptrs, unsigned long long* bad) {
    gpudyn::warp_heap_ref ref{view};
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    gpudyn::warp_heap heap = ref.resume(kFullWarpMask, kept[tid / 32]);
    unsigned long long b = heap.valid() ? 0 : 1;
    b += ptrs[2 * tid] ? verify(ptrs[2 * tid], 96, tid, 1) : 1;
    b += ptrs[2 * tid + 1] ? verify(ptrs[2 * tid + 1], 50000, tid, 2) : 1;
    void* q = heap.alloc(32);
    if (q == nullptr) ++b;
    if (b) atomicAdd(bad, b);
    heap.end();
}

static void test_keep() {
    const unsigned blocks = 4, threads = 64, n = blocks * threads;
    gpudyn_warp_heap_t h = make_heap(32768);
    const uint64_t before = backing_level(h);
    gpudyn_warp_heap_view_t v;
    CHECK_OK(gpudyn_warp_heap_get_view(h, &v));
    void **d_kept, **d_ptrs;
    unsigned long long* d_bad;
    CUDA_OK(cudaMalloc(&d_kept, sizeof(void*) * n / 32));
    CUDA_OK(cudaMalloc(&d_ptrs, sizeof(void*) * n * 2));
    CUDA_OK(cudaMalloc(&d_bad, sizeof(unsigned long long)));
    CUDA_OK(cudaMemset(d_bad, 0, sizeof(unsigned long long)));
    keep_kernel<<<blocks, threads>>>(v, d_kept, d_ptrs);
    CUDA_OK(cudaGetLastError());
    gpudyn_warp_heap_stats_t s = stats_of(h);
    CHECK(s.headers == n / 32);
    CHECK(s.large_blocks == n / 32);
    CHECK(s.bytes_requested > 0);
    CHECK(backing_level(h) < before); // the kept memory is still held
    resume_kernel<<<blocks, threads>>>(v, d_kept, d_ptrs, d_bad);
    CUDA_OK(cudaGetLastError());
    unsigned long long bad = 1;
    CUDA_OK(cudaMemcpy(&bad, d_bad, sizeof(bad), cudaMemcpyDeviceToHost));
    CHECK(bad == 0);
    check_all_released(h, "keep");
    CHECK(backing_level(h) == before);
    CUDA_OK(cudaFree(d_kept));
    CUDA_OK(cudaFree(d_ptrs));
    CUDA_OK(cudaFree(d_bad));
    CHECK_OK(gpudyn_warp_heap_destroy(h));
}

// ---- 6b: tidy_up_kept from the host, then resume in a later kernel ------------
// The lanes resume a header the host tidied up, allocate, check their data, end.
__global__ void tidy_resume_kernel(gpudyn_warp_heap_view_t view, void** kept, unsigned calls, unsigned bytes,
                                   unsigned long long* bad) {
    gpudyn::warp_heap_ref ref{view};
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    gpudyn::warp_heap heap = ref.resume(kFullWarpMask, kept[tid / 32]);
    unsigned long long b = heap.valid() ? 0 : 1;
    void* first = nullptr;
    const unsigned span = bytes < 64 ? bytes : 64; // the first (up to) 64 bytes of each block
#pragma unroll 1
    for (unsigned c = 0; c < calls; ++c) {
        void* p = heap.alloc(bytes);
        if (p == nullptr) ++b;
        else fill(p, span, tid, c);
        if (c == 0) first = p;
    }
    __syncwarp();
    if (first) b += verify(first, span, tid, 0);
    if (b) atomicAdd(bad, b);
    heap.end();
}

static void test_tidy_up_kept() {
    const unsigned warps = 64;
    // 4 calls x 32 lanes x 32 KiB: 128 superblocks per warp (a second list chained),
    // 256 MiB in all; then 48 B requests: several superblocks per warp.
    struct {
        unsigned calls, bytes;
    } cases[] = {{4, 32768}, {100, 48}};
    for (auto c : cases) {
        gpudyn_warp_heap_t h = make_heap(32768);
        const uint64_t before = backing_level(h);
        gpudyn_warp_heap_view_t v;
        CHECK_OK(gpudyn_warp_heap_get_view(h, &v));
        void** d_kept;
        unsigned long long* d_bad;
        CUDA_OK(cudaMalloc(&d_kept, sizeof(void*) * warps));
        CUDA_OK(cudaMalloc(&d_bad, sizeof(unsigned long long)));
        CUDA_OK(cudaMemset(d_bad, 0, sizeof(unsigned long long)));
        count_kernel<<<warps / 4, 128>>>(v, c.calls, c.bytes, d_kept);
        CUDA_OK(cudaGetLastError());
        const gpudyn_warp_heap_stats_t kept = stats_of(h);
        const uint64_t held = backing_level(h);
        CHECK(kept.headers == warps && kept.superblocks > warps && kept.bytes_requested > 0);
        CHECK(held < before);

        CHECK_OK(gpudyn_warp_heap_tidy_up_kept(h, d_kept, warps, nullptr));
        const gpudyn_warp_heap_stats_t tidy = stats_of(h);
        // Each header keeps its block (header, first list, first superblock) and nothing else.
        if (tidy.headers != warps || tidy.superblocks != warps || tidy.large_blocks != 0 || tidy.bytes_requested != 0 ||
            tidy.bytes_reserved >= kept.bytes_reserved || tidy.bytes_reserved % warps != 0 || tidy.misuse != 0) {
            fprintf(stderr,
                    "tidy_up_kept %u x %u B: headers %llu superblocks %llu large %llu requested %llu "
                    "reserved %llu (kept: %llu) misuse %llu\n",
                    c.calls, c.bytes, (unsigned long long)tidy.headers, (unsigned long long)tidy.superblocks,
                    (unsigned long long)tidy.large_blocks, (unsigned long long)tidy.bytes_requested,
                    (unsigned long long)tidy.bytes_reserved, (unsigned long long)kept.bytes_reserved,
                    (unsigned long long)tidy.misuse);
            ++gpudyn_test_failures;
        }
        const uint64_t tidied = backing_level(h);
        // The memory really went back (CUDA malloc is probed in 4 MiB blocks: only
        // the 256 MiB case frees enough for the probe to see it for sure).
        if (g_backing != GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC || c.bytes == 32768) CHECK(tidied > held);
        if (g_backing == GPUDYN_WARP_HEAP_BACKING_ARENA) CHECK(before - tidied == warps * v.arena_header_bytes);
        if (g_backing == GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP) CHECK(before - tidied == warps * kPageBytes);

        // Bad input: nothing to do, NULL array, and (where the backing can tell)
        // pointers that are no header of this heap.
        CHECK_OK(gpudyn_warp_heap_tidy_up_kept(h, nullptr, 0, nullptr));
        CHECK_INVALID(gpudyn_warp_heap_tidy_up_kept(h, nullptr, 3, nullptr), "headers");
        if (g_backing != GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC) {
            void* first = nullptr;
            CUDA_OK(cudaMemcpy(&first, d_kept, sizeof(void*), cudaMemcpyDeviceToHost));
            void* bogus[3] = {nullptr, static_cast<char*>(first) + 16, reinterpret_cast<void*>(uintptr_t(4096))};
            void** d_bogus;
            CUDA_OK(cudaMalloc(&d_bogus, sizeof(bogus)));
            CUDA_OK(cudaMemcpy(d_bogus, bogus, sizeof(bogus), cudaMemcpyHostToDevice));
            CHECK_INVALID(gpudyn_warp_heap_tidy_up_kept(h, d_bogus, 3, nullptr), "2 of 3 entries");
            CHECK(strstr(gpudyn_last_error_message(), "index 1") != nullptr);
            CHECK_OK(gpudyn_warp_heap_free_kept(h, d_bogus, 3, nullptr)); // skipped, not freed
            const gpudyn_warp_heap_stats_t after = stats_of(h);
            CHECK(after.misuse == 4 && after.headers == warps && after.bytes_reserved == tidy.bytes_reserved);
            CHECK(backing_level(h) == tidied);
            CUDA_OK(cudaFree(d_bogus));
        }

        // The headers still work: a later kernel resumes, allocates, checks, ends.
        tidy_resume_kernel<<<warps / 4, 128>>>(v, d_kept, c.calls, c.bytes, d_bad);
        CUDA_OK(cudaGetLastError());
        unsigned long long bad = 1;
        CUDA_OK(cudaMemcpy(&bad, d_bad, sizeof(bad), cudaMemcpyDeviceToHost));
        CHECK(bad == 0);
        const gpudyn_warp_heap_stats_t s = stats_of(h);
        CHECK(s.failed_allocations == 0);
        check_all_released(h, "tidy_up_kept");
        CHECK(backing_level(h) == before);
        CUDA_OK(cudaFree(d_kept));
        CUDA_OK(cudaFree(d_bad));
        CHECK_OK(gpudyn_warp_heap_destroy(h));
    }
}

// ---- 7: Listing 2 misuse is detected, not a crash ------------------------------
__global__ void misuse_kernel(gpudyn_warp_heap_view_t view, unsigned* nonnull) {
    gpudyn::warp_heap_ref ref{view};
    const unsigned lane = gpudyn::detail::lane_index();
    // Paper, Listing 2: only some lanes start, all allocate, one lane ends.
    gpudyn::warp_heap heap = ref.start(kFullWarpMask, lane % 5 == 0);
    void* p = heap.alloc(kFullWarpMask, 16);
    if (p) atomicAdd(nonnull, 1u);
    if (lane % 5 == 0) heap.end(); // the lanes that started do end properly
    gpudyn::warp_heap none;
    if (lane == 1) none.end(); // end without a header
}

static void test_misuse() {
    gpudyn_warp_heap_t h = make_heap(32768);
    gpudyn_warp_heap_view_t v;
    CHECK_OK(gpudyn_warp_heap_get_view(h, &v));
    unsigned* d_nonnull;
    CUDA_OK(cudaMalloc(&d_nonnull, sizeof(unsigned)));
    CUDA_OK(cudaMemset(d_nonnull, 0, sizeof(unsigned)));
    misuse_kernel<<<2, 64>>>(v, d_nonnull);
    CUDA_OK(cudaGetLastError());
    unsigned nonnull = 1;
    CUDA_OK(cudaMemcpy(&nonnull, d_nonnull, sizeof(unsigned), cudaMemcpyDeviceToHost));
    CHECK(nonnull == 0);
    gpudyn_warp_heap_stats_t s = stats_of(h);
    // Per warp: the alloc with header-less lanes; end() without a header is not
    // reported (that handle has no view), so 4 warps -> 4.
    CHECK(s.misuse == 4);
    check_all_released(h, "misuse");
    CUDA_OK(cudaFree(d_nonnull));
    CHECK_OK(gpudyn_warp_heap_destroy(h));
}

// ---- 8: bulk ABI: alloc_batch / release, OOM roll-back, no superblocks ------
__global__ void fill_ranges(void* const* ptrs, const uint64_t* sizes, uint64_t n) {
    for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
        if (ptrs[i]) fill(ptrs[i], sizes[i], unsigned(i), 7);
}
__global__ void verify_ranges(void* const* ptrs, const uint64_t* sizes, uint64_t n, unsigned long long* bad) {
    for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
        if (ptrs[i]) {
            unsigned long long b = verify(ptrs[i], sizes[i], unsigned(i), 7);
            if (b) atomicAdd(bad, b);
        }
}

static void test_batch(uint64_t superblock_bytes) {
    const uint64_t n = 100000;
    std::mt19937_64 rng(42);
    std::vector<uint64_t> sizes(n);
    uint64_t rounded_sum = 0;
    for (auto& s : sizes) {
        s = rng() % 8 == 0 ? 0 : 4 * (1 + rng() % 100); // 0 or 4..400 B
        rounded_sum += (s + 15) / 16 * 16;
    }
    gpudyn_warp_heap_t h = make_heap(superblock_bytes);
    const uint64_t level0 = g_backing != GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC ? backing_level(h) : 0;
    uint64_t* d_sizes;
    void** d_ptrs;
    unsigned long long* d_bad;
    CUDA_OK(cudaMalloc(&d_sizes, n * 8));
    CUDA_OK(cudaMalloc(&d_ptrs, n * sizeof(void*)));
    CUDA_OK(cudaMalloc(&d_bad, 8));
    CUDA_OK(cudaMemset(d_bad, 0, 8));
    CUDA_OK(cudaMemcpy(d_sizes, sizes.data(), n * 8, cudaMemcpyHostToDevice));
    CHECK_OK(gpudyn_warp_heap_alloc_batch(h, d_sizes, n, d_ptrs, nullptr));
    std::vector<void*> ptrs(n);
    CUDA_OK(cudaMemcpy(ptrs.data(), d_ptrs, n * sizeof(void*), cudaMemcpyDeviceToHost));
    std::vector<record> recs(n);
    size_t zero_ok = 0;
    for (uint64_t i = 0; i < n; ++i) {
        recs[i] = record{(unsigned long long)ptrs[i], sizes[i]};
        zero_ok += sizes[i] != 0 || ptrs[i] == nullptr;
    }
    CHECK(zero_ok == n);
    check_disjoint(recs, "batch");
    gpudyn_warp_heap_stats_t s = stats_of(h);
    CHECK(s.bytes_requested == rounded_sum);
    fill_ranges<<<256, 256>>>(d_ptrs, d_sizes, n);
    CUDA_OK(cudaGetLastError());

    // A batch the backing cannot serve (1 GiB each > the 512 MiB heap): rolled back.
    uint64_t* d_huge;
    void** d_huge_ptrs;
    std::vector<uint64_t> huge(64, 1ull << 30);
    CUDA_OK(cudaMalloc(&d_huge, 64 * 8));
    CUDA_OK(cudaMalloc(&d_huge_ptrs, 64 * sizeof(void*)));
    CUDA_OK(cudaMemcpy(d_huge, huge.data(), 64 * 8, cudaMemcpyHostToDevice));
    CHECK_STATUS(gpudyn_warp_heap_alloc_batch(h, d_huge, 64, d_huge_ptrs, nullptr), GPUDYN_ERROR_OUT_OF_MEMORY);
    std::vector<void*> hp(64, (void*)1);
    CUDA_OK(cudaMemcpy(hp.data(), d_huge_ptrs, 64 * sizeof(void*), cudaMemcpyDeviceToHost));
    CHECK(std::count(hp.begin(), hp.end(), nullptr) == 64);
    uint64_t batches = 0;
    CHECK_OK(gpudyn_warp_heap_batch_count(h, &batches));
    CHECK(batches == 1);
    gpudyn_warp_heap_stats_t s2 = stats_of(h);
    CHECK(s2.bytes_requested == s.bytes_requested && s2.bytes_reserved == s.bytes_reserved);
    verify_ranges<<<256, 256>>>(d_ptrs, d_sizes, n, d_bad);
    CUDA_OK(cudaGetLastError());
    unsigned long long bad = 1;
    CUDA_OK(cudaMemcpy(&bad, d_bad, 8, cudaMemcpyDeviceToHost));
    CHECK(bad == 0);

    CHECK_OK(gpudyn_warp_heap_alloc_batch(h, d_sizes, n, d_ptrs, nullptr)); // a second batch
    CHECK_OK(gpudyn_warp_heap_batch_count(h, &batches));
    CHECK(batches == 2);
    CHECK_OK(gpudyn_warp_heap_release(h, nullptr));
    CHECK_OK(gpudyn_warp_heap_batch_count(h, &batches));
    CHECK(batches == 0);
    check_all_released(h, superblock_bytes ? "batch" : "batch without superblocks");
    if (g_backing != GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC) CHECK(backing_level(h) == level0);
    CHECK_OK(gpudyn_warp_heap_alloc_batch(h, d_sizes, n, d_ptrs, nullptr)); // destroy releases it
    CHECK_OK(gpudyn_warp_heap_destroy(h));
    CUDA_OK(cudaFree(d_sizes));
    CUDA_OK(cudaFree(d_ptrs));
    CUDA_OK(cudaFree(d_bad));
    CUDA_OK(cudaFree(d_huge));
    CUDA_OK(cudaFree(d_huge_ptrs));
}

// Runs every test, or only those named on the command line (e.g. under a sanitizer).
int main(int argc, char** argv) {
    REQUIRE_DEVICE();
    struct {
        const char* name;
        void (*fn)();
    } tests[] = {
        {"small", test_small},
        {"counts", test_counts},
        {"large", test_large},
        {"partial", test_partial},
        {"exhaustion", test_exhaustion},
        {"keep", test_keep},
        {"tidy_up_kept", test_tidy_up_kept},
        {"misuse", test_misuse},
        {"batch", [] { test_batch(32768); }},
        {"batch_no_superblocks", [] { test_batch(0); }},
    };
    struct {
        const char* name;
        gpudyn_warp_heap_backing_t backing;
    } backings[] = {
        {"arena", GPUDYN_WARP_HEAP_BACKING_ARENA},
        {"cuda_malloc", GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC},
        {"page_heap", GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP},
    };
    gpudyn_rw_heap_options_t ro;
    CHECK_OK(gpudyn_rw_heap_options_init(&ro));
    ro.page_size = kPageBytes;
    ro.page_count = kPageCount;
    CHECK_OK(gpudyn_rw_heap_create(&g_pages, &ro, nullptr));
    // Arguments name tests ("keep"), backings ("arena") or both ("arena:keep").
    for (auto& b : backings) {
        g_backing = b.backing;
        for (auto& t : tests) {
            char both[64];
            snprintf(both, sizeof both, "%s:%s", b.name, t.name);
            bool wanted = argc < 2;
            for (int i = 1; i < argc; ++i)
                wanted = wanted || !strcmp(argv[i], t.name) || !strcmp(argv[i], b.name) || !strcmp(argv[i], both);
            if (!wanted) continue;
            // Under compute-sanitizer (tests/run.sh exports GPUDYN_SANITIZER), exhausting
            // CUDA's device-malloc heap ends this kernel in cudaErrorIllegalAddress while
            // memcheck reports 0 errors (seen on the H200, 2026-11-22); natively the case
            // passes, so it is left out under the tool only.
            if (getenv("GPUDYN_SANITIZER") && b.backing == GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC &&
                !strcmp(t.name, "exhaustion")) {
                printf("%-34s skipped under compute-sanitizer\n", both);
                continue;
            }
            int before = gpudyn_test_failures;
            t.fn();
            CHECK(cudaDeviceSynchronize() == cudaSuccess);
            printf("%-34s %s\n", both, gpudyn_test_failures == before ? "ok" : "FAILED");
            fflush(stdout);
        }
    }
    CHECK_OK(gpudyn_rw_heap_destroy(g_pages));
    return TEST_RESULT();
}
