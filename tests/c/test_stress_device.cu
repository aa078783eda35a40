// Randomized allocation stress test (issue 39): several heaps, page heaps,
// warp heaps and GGArrays used from the same kernels, with many seeds, checked
// after every kernel against a host model of what is live.
//
// Scenarios (each prints one summary line):
//  * repro: the kernel of ../shared/repro/heap_duplicate_blocks.cu as it is
//    (timing-dependent: kept unchanged): heap A 64 MiB / 128 MiB, heap B
//    64 MiB / 64 MiB, 32 blocks x 128 threads; thread t asks A for 40000 B
//    (t % 16 in {0, 2}, j == 0) or 32 + hash % 480 B, twice, then B for 64 B.
//    Item 1 of the issue (one block of B handed to two threads) shows here.
//  * mixed: three heaps (64 KiB pages, 512 MiB grown to 1 GiB of 2 GiB between
//    rounds; 4 KiB pages, 128 MiB; 16 KiB pages, 4 MiB, which runs out), rounds
//    of an allocating kernel and a checking/freeing kernel.  Requests small,
//    medium (one page to many), huge (more than kRwRegionWords * 64 pages) and
//    the repro's 40000 B / 32..512 B / 64 B pattern; 1-D, 2-D and 3-D blocks;
//    data-dependent trip counts, early returns (at the top and inside the loop),
//    odd lanes only, lanes of one warp calling different heaps at one call site
//    (heap_ref{views[h]}), one call site per heap in different branches, a
//    second malloc in the loop, blocks freed in the same kernel; the later
//    kernel re-checks every stamp and frees a random half from another thread,
//    with deliberate bad frees (interior pointers, another heap's pointers,
//    double frees) that must be refused and counted, exactly those.
//  * structures: the mixed kernel plus, in the same kernels, a random-walk
//    page heap (get_page in odd lanes, warp-collective RW_malloc with shared
//    storage, one-lane RW_malloc with local storage; free_page / free from
//    another thread, double frees), a warp heap (start in a divergent branch,
//    alloc, keep; freed by the host's free_kept) and two GGArrays (one with
//    its own arena, one on a heap) pushed from inside the divergent loop.
//
// After every kernel, on the host: each live range distinct (sorted by
// address, no overlap of [p, p + size)), 16-byte aligned and inside its heap
// (base .. base + max_pages * page size, and inside the mapped bytes); every
// stamp intact (first and last 8 KiB of each block hold a per-(thread, j,
// round, seed) key, read back by a later kernel); the heap stats (allocations,
// bytes_allocated = the live blocks' usable_size, each the host reference's
// size class (heap_test_util.h), failed
// allocations = the nulls the kernels got, bad frees = the deliberate ones)
// and gpudyn_heap_check's status equal to the model; page heap: no page twice,
// free pages, failed requests and bad frees exact; warp heap: blocks distinct,
// stamps intact, everything back after free_kept; GGArrays: sorted contents
// equal to the host's list of pushed values.
//
// Size: full by default (24 seeds a scenario; mixed and structures: 5 rounds of
// 8192 threads; about 10 s on an H200); reduced (2 seeds; 2 rounds of 1024
// threads; the 64 KiB-page heap 64 MiB grown to 128 MiB, the 4 KiB-page heap
// 64 MiB) when GPUDYN_SANITIZER is set (tests/sanitize.sh exports it),
// GPUDYN_STRESS_REDUCED=1, or the argument --reduced.
// GPUDYN_STRESS_SEEDS=N overrides the number of seeds of each scenario;
// GPUDYN_STRESS_ONLY=repro,mixed,structures runs only the scenarios named.
#include "check.h"
#include "heap_test_util.h"

#include <gpudyn/ggarray.cuh>
#include <gpudyn/heap.cuh>
#include <gpudyn/rw_heap.cuh>
#include <gpudyn/warp_heap.cuh>

#include <algorithm>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

typedef unsigned long long u64;

#define CUDA_OK(call) CHECK((call) == cudaSuccess)

// Waits for a kernel of the test; a CUDA error there loses the context, so the
// test says where and stops (every later call would fail the same way).
static const char* g_where = "";
static void sync_kernel(const char* kernel, unsigned long long seed, unsigned round) {
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e == cudaSuccess) return;
    printf("stress %s: CUDA error %s (%s) in or before kernel %s, seed %llu round %u; the context is lost, stopping\n",
           g_where, cudaGetErrorName(e), cudaGetErrorString(e), kernel, seed, round);
    printf("1 check(s) failed\n");
    fflush(stdout);
    exit(1);
}

// ---- the repro's helpers (kept as they are: the defect is timing-dependent) ----
__host__ __device__ inline u64 mix64(u64 x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
__device__ inline u64 global_tid() {
    const u64 block = blockIdx.x + (u64)gridDim.x * (blockIdx.y + (u64)gridDim.y * blockIdx.z);
    return block * (blockDim.x * blockDim.y * blockDim.z) + threadIdx.x +
           blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
// every 4-byte word of the first and last 8 KiB (all of a smaller block) holds key ^ index; tail bytes too
__device__ void stamp(void* p, u64 bytes, unsigned key) {
    unsigned* w = static_cast<unsigned*>(p);
    const u64 nw = bytes / 4;
    for (u64 i = 0; i < nw; ++i) {
        if (i == 2048 && nw > 4096) i = nw - 2048;
        w[i] = key ^ (unsigned)i;
    }
    unsigned char* b = static_cast<unsigned char*>(p);
    for (u64 k = nw * 4; k < bytes; ++k) b[k] = (unsigned char)(key ^ k);
}
__host__ __device__ inline unsigned key_of(u64 tid, unsigned j, u64 seed) {
    return (unsigned)mix64(seed ^ (tid * 64 + j)) | 1u;
}

// The words stamp() wrote that no longer hold the key.
__device__ unsigned stamp_errors(const void* p, u64 bytes, unsigned key) {
    const unsigned* w = static_cast<const unsigned*>(p);
    const u64 nw = bytes / 4;
    unsigned bad = 0;
    for (u64 i = 0; i < nw; ++i) {
        if (i == 2048 && nw > 4096) i = nw - 2048;
        bad += w[i] != (key ^ (unsigned)i);
    }
    const unsigned char* b = static_cast<const unsigned char*>(p);
    for (u64 k = nw * 4; k < bytes; ++k) bad += b[k] != (unsigned char)(key ^ k);
    return bad;
}

// ---- configuration ---------------------------------------------------------
struct Config {
    bool reduced = false;
    int seeds = 24;             // per scenario
    unsigned mixed_blocks = 64; // blocks of 128 threads
    unsigned rounds = 5;
};
static Config g_cfg;

// ---- failure bookkeeping: per scenario, per check ----------------------------
struct Tally {
    std::string scenario;
    std::map<std::string, u64> fails; // check -> count
    std::map<std::string, int> shown; // check -> detail lines printed
    u64 blocks = 0, nulls = 0, bad_frees = 0, pages = 0, pushes = 0, warp_blocks = 0;
    void fail(const std::string& check, u64 count) {
        if (count == 0) return;
        fails[check] += count;
        ++gpudyn_test_failures;
    }
    // A detail line (at most 8 per check and scenario).
    void detail(const std::string& check, const char* fmt, ...) {
        if (shown[check]++ >= 8) return;
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "  [%s] %s: ", scenario.c_str(), check.c_str());
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
    }
};

static void summary(const Tally& t, int seeds, const char* what) {
    printf("stress %-10s %2d seeds, %s: %llu blocks, %llu nulls, %llu bad frees refused", t.scenario.c_str(), seeds,
           what, t.blocks, t.nulls, t.bad_frees);
    if (t.pages) printf(", %llu pages", t.pages);
    if (t.warp_blocks) printf(", %llu warp-heap blocks", t.warp_blocks);
    if (t.pushes) printf(", %llu pushes", t.pushes);
    if (t.fails.empty()) {
        printf(": ok\n");
    } else {
        printf(": FAILED (");
        bool first = true;
        for (auto& f : t.fails) {
            printf("%s%s %llu", first ? "" : ", ", f.first.c_str(), f.second);
            first = false;
        }
        printf(")\n");
    }
    fflush(stdout);
}

// ---- host reference of the heap's usable sizes (the rule in heap.cuh) --------
struct HeapModel {
    std::string name;
    gpudyn_heap_t h = nullptr;
    gpudyn_heap_view_t v{};
    u64 P = 0;
    std::vector<uint64_t> classes;
    u64 failed = 0, bad = 0;           // totals the kernels caused
    u64 failed_seen = 0, bad_seen = 0; // at the last gpudyn_heap_check
    u64 usable(u64 bytes) const {
        if (bytes == 0) return 0;
        if (bytes <= P / 2)
            for (u64 s : classes)
                if (s >= bytes) return s;
        const u64 pages = (bytes + P - 1) / P;
        if (pages <= u64(gpudyn::kRwRegionWords) * 64) return pages * P;
        return (pages + 63) / 64 * 64 * P;
    }
    u64 range_end() const { return v.base + u64(v.max_pages) * P; }
};

static bool open_heap(HeapModel& m, const char* name, u64 initial, u64 max, u64 page) {
    m = HeapModel();
    m.name = name;
    gpudyn_heap_options_t o;
    CHECK_OK(gpudyn_heap_options_init(&o));
    o.initial_bytes = initial;
    o.max_bytes = max;
    o.page_size = page;
    gpudyn_status_t s = gpudyn_heap_create(&m.h, &o, nullptr);
    CHECK_OK(s);
    if (s != GPUDYN_SUCCESS) return false;
    CHECK_OK(gpudyn_heap_get_view(m.h, &m.v));
    m.P = page;
    m.classes = ref_classes(page);
    CHECK(m.v.base != 0 && (1ull << m.v.page_shift) == page);
    return true;
}

// One live block of the host model.
struct Block {
    u64 p = 0, bytes = 0;
    unsigned key = 0;
    unsigned heap = 0; // index into the scenario's heaps
    unsigned tid = 0, j = 0, round = 0;
};

// Ranges of one structure: distinct, aligned, inside [lo, hi).  `what` names it.
static void check_ranges(Tally& t, u64 seed, unsigned round, const std::string& what, std::vector<Block> v, u64 lo,
                         u64 hi, u64 align = 16) {
    std::sort(v.begin(), v.end(),
              [](const Block& a, const Block& b) { return a.p < b.p || (a.p == b.p && a.tid < b.tid); });
    u64 dup = 0, overlap = 0, outside = 0, misaligned = 0;
    for (size_t i = 0; i < v.size(); ++i) {
        const Block& b = v[i];
        if (b.p < lo || b.p + b.bytes > hi || b.p + b.bytes < b.p) {
            ++outside;
            t.detail("out of range " + what,
                     "seed %llu round %u: 0x%llx + %llu outside [0x%llx, 0x%llx) (thread %u, j %u)", seed, round, b.p,
                     b.bytes, lo, hi, b.tid, b.j);
        }
        if (b.p % align != 0) {
            ++misaligned;
            t.detail("misaligned " + what, "seed %llu round %u: 0x%llx (thread %u, j %u)", seed, round, b.p, b.tid,
                     b.j);
        }
        if (i == 0) continue;
        const Block& a = v[i - 1];
        if (a.p == b.p) {
            ++dup;
            t.detail(
                "duplicates " + what,
                "seed %llu round %u: 0x%llx given to thread %u (j %u, round %u, %llu B) and thread %u (j %u, round %u, %llu B)",
                seed, round, b.p, a.tid, a.j, a.round, a.bytes, b.tid, b.j, b.round, b.bytes);
        } else if (a.p + a.bytes > b.p) {
            ++overlap;
            t.detail("overlaps " + what,
                     "seed %llu round %u: [0x%llx, +%llu) (thread %u j %u) overlaps 0x%llx (thread %u j %u)", seed,
                     round, a.p, a.bytes, a.tid, a.j, b.p, b.tid, b.j);
        }
    }
    t.fail("duplicates " + what, dup);
    t.fail("overlaps " + what, overlap);
    t.fail("out of range " + what, outside);
    t.fail("misaligned " + what, misaligned);
}

__global__ void usable_sizes_kernel(gpudyn_heap_view_t v, const u64* p, u64 n, u64* out) {
    const gpudyn::heap_ref heap{v};
    for (u64 i = blockIdx.x * u64(blockDim.x) + threadIdx.x; i < n; i += u64(gridDim.x) * blockDim.x)
        out[i] = heap.usable_size(reinterpret_cast<const void*>(p[i]));
}
// usable_size of each live block, from the device.
static std::vector<u64> device_usable(const HeapModel& m, const std::vector<Block>& live) {
    const u64 n = live.size();
    std::vector<u64> ptrs(n), u(n);
    if (n == 0) return u;
    for (u64 i = 0; i < n; ++i) ptrs[i] = live[i].p;
    u64 *dp = nullptr, *du = nullptr;
    CUDA_OK(cudaMalloc(&dp, n * sizeof(u64)));
    CUDA_OK(cudaMalloc(&du, n * sizeof(u64)));
    CUDA_OK(cudaMemcpy(dp, ptrs.data(), n * sizeof(u64), cudaMemcpyHostToDevice));
    usable_sizes_kernel<<<unsigned((n + 255) / 256), 256>>>(m.v, dp, n, du);
    CUDA_OK(cudaMemcpy(u.data(), du, n * sizeof(u64), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaFree(dp));
    CUDA_OK(cudaFree(du));
    return u;
}

// Stats and check() of heap m against the model (live: its live blocks).  A
// block's usable size (usable_size, read on the device) is the model's; the
// stats must count exactly those sizes.
static void check_heap(Tally& t, u64 seed, unsigned round, const char* when, HeapModel& m,
                       const std::vector<Block>& live) {
    u64 n = 0, bytes = 0, wrong = 0;
    const std::vector<u64> usable = device_usable(m, live);
    for (size_t i = 0; i < live.size(); ++i) {
        const Block& b = live[i];
        n += 1;
        bytes += usable[i];
        const u64 want = m.usable(b.bytes);
        if (usable[i] != want) {
            if (wrong++ == 0)
                t.detail("usable_size (heap " + m.name + ")",
                         "seed %llu round %u %s: a %llu-byte request's block reports %llu, the model says %llu", seed,
                         round, when, b.bytes, usable[i], want);
        }
    }
    t.fail("usable_size (heap " + m.name + ")", wrong);
    const gpudyn_heap_stats_t st = heap_stats(m.h);
    const std::string hn = " (heap " + m.name + ")";
    auto cmp = [&](const char* field, u64 got, u64 want) {
        if (got == want) return;
        t.fail(std::string("stats.") + field + hn, 1);
        t.detail(std::string("stats.") + field + hn, "seed %llu round %u %s: %llu, the model says %llu", seed, round,
                 when, got, want);
    };
    cmp("allocations", st.allocations, n);
    cmp("bytes_allocated", st.bytes_allocated, bytes);
    cmp("failed_allocations", st.failed_allocations, m.failed);
    cmp("bad_frees", st.bad_frees, m.bad);
    if (st.bytes_held < st.bytes_allocated || st.bytes_held > st.bytes_mapped) {
        t.fail("stats.bytes_held" + hn, 1);
        t.detail("stats.bytes_held" + hn, "seed %llu round %u %s: held %llu, allocated %llu, mapped %llu", seed, round,
                 when, (u64)st.bytes_held, (u64)st.bytes_allocated, (u64)st.bytes_mapped);
    }
    for (const Block& b : live)
        if (b.p + b.bytes > m.v.base + st.bytes_mapped) {
            t.fail("unmapped" + hn, 1);
            t.detail("unmapped" + hn, "seed %llu round %u: 0x%llx + %llu past the %llu mapped bytes", seed, round, b.p,
                     b.bytes, (u64)st.bytes_mapped);
        }
    const gpudyn_status_t want = m.failed > m.failed_seen ? GPUDYN_ERROR_OUT_OF_MEMORY
                                 : m.bad > m.bad_seen     ? GPUDYN_ERROR_INVALID_ARGUMENT
                                                          : GPUDYN_SUCCESS;
    const gpudyn_status_t got = gpudyn_heap_check(m.h, nullptr);
    if (got != want) {
        t.fail("check()" + hn, 1);
        t.detail("check()" + hn,
                 "seed %llu round %u %s: %s (%s), the model says %s (failed %llu -> %llu, bad frees %llu -> %llu)",
                 seed, round, when, gpudyn_status_string(got), gpudyn_last_error_message(), gpudyn_status_string(want),
                 m.failed_seen, m.failed, m.bad_seen, m.bad);
    }
    m.failed_seen = m.failed;
    m.bad_seen = m.bad;
}

// Splits live blocks by heap.
static std::vector<Block> of_heap(const std::vector<Block>& all, unsigned h) {
    std::vector<Block> v;
    for (const Block& b : all)
        if (b.heap == h) v.push_back(b);
    return v;
}

// ---- the later kernel: re-check stamps, free (some from another thread) ------
// What a checked entry is, and what the check kernel does with it.
enum EntryKind : unsigned char {
    kHeapBlock,
    kRwPage,
    kRwBlock,
    kWarpBlock
};
enum EntryAction : unsigned char {
    kKeep,          // stamp check only
    kFree,          // free
    kFreeInterior,  // free(p + 16) first (refused), then free
    kFreeWrongHeap, // free into the next heap first (refused there), then free
    kFreeTwice,     // free, then free again (refused)
};
struct Entry {
    u64 p;
    u64 bytes;
    unsigned key;
    unsigned char kind, heap, action, pad;
};
struct HeapViews {
    gpudyn_heap_view_t h[3];
};

__global__ void check_free_kernel(HeapViews V, gpudyn_rw_heap_view_t rwv, const Entry* e, u64 n, unsigned* stamp_bad,
                                  unsigned char* result) {
    const u64 i = global_tid();
    if (i >= n) return;
    const Entry x = e[i];
    unsigned char r = 0;
    if (x.kind == kRwPage) {
        const gpudyn::rw_heap_ref rw{rwv};
        const unsigned page = unsigned(x.p);
        stamp_bad[i] = stamp_errors(rw.page_address(page), x.bytes, x.key);
        if (x.action != kKeep) {
            r |= rw.free_page(page) ? 1 : 0;
            if (x.action == kFreeTwice) r |= rw.free_page(page) ? 2 : 0;
        }
    } else if (x.kind == kRwBlock) {
        const gpudyn::rw_heap_ref rw{rwv};
        void* p = reinterpret_cast<void*>(x.p);
        stamp_bad[i] = stamp_errors(p, x.bytes, x.key);
        if (x.action != kKeep) {
            r |= rw.free(p) ? 1 : 0;
            if (x.action == kFreeTwice) r |= rw.free(p) ? 2 : 0;
        }
    } else if (x.kind == kWarpBlock) {
        stamp_bad[i] = stamp_errors(reinterpret_cast<void*>(x.p), x.bytes, x.key);
    } else {
        void* p = reinterpret_cast<void*>(x.p);
        stamp_bad[i] = stamp_errors(p, x.bytes, x.key);
        const gpudyn::heap_ref heap{V.h[x.heap]};
        // Different branches free at different call sites (divergent frees).
        switch (x.action) {
            case kKeep: break;
            case kFree: r |= heap.free(p) ? 1 : 0; break;
            case kFreeInterior:
                r |= heap.free(static_cast<char*>(p) + 16) ? 2 : 0;
                r |= heap.free(p) ? 1 : 0;
                break;
            case kFreeWrongHeap:
                r |= gpudyn::heap_ref{V.h[(x.heap + 1) % 3]}.free(p) ? 2 : 0;
                r |= heap.free(p) ? 1 : 0;
                break;
            case kFreeTwice:
                r |= heap.free(p) ? 1 : 0;
                r |= heap.free(p) ? 2 : 0;
                break;
        }
    }
    result[i] = r;
}

// ---- scenario 1: the repro's kernel, unchanged ----------------------------------
__global__ void alloc_two_heaps(gpudyn_heap_view_t a, gpudyn_heap_view_t b, u64* pa, u64* sa, u64* pb, u64 n,
                                u64 seed) {
    const gpudyn::heap_ref A{a}, B{b};
    const u64 t = global_tid();
    if (t >= n) return;
    for (int j = 0; j < 2; ++j) {
        const u64 bytes = ((t % 16 == 0 || t % 16 == 2) && j == 0) ? 40000 : 32 + (mix64(t * 2 + j + seed) % 480);
        void* p = A.malloc(bytes);
        pa[t * 2 + j] = reinterpret_cast<u64>(p);
        sa[t * 2 + j] = bytes;
        if (p) stamp(p, bytes, key_of(t, j, seed));
    }
    void* q = B.malloc(64);
    pb[t] = reinterpret_cast<u64>(q);
    if (q) stamp(q, 64, key_of(t, 7, seed));
}

template <class T>
static T* dev_alloc(u64 n) {
    T* p = nullptr;
    CUDA_OK(cudaMalloc(&p, n * sizeof(T) + 16));
    if (p) CUDA_OK(cudaMemset(p, 0, n * sizeof(T) + 16));
    return p;
}
template <class T>
static std::vector<T> to_host(const T* d, u64 n) {
    std::vector<T> h(n);
    if (n) CUDA_OK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// Runs the check kernel over `entries` from a shuffled order (so a block is
// checked and freed by another thread than the one that took it), applies the
// results to the model.  Returns the result bytes in entry order.
struct CheckOut {
    std::vector<unsigned> stamp_bad;
    std::vector<unsigned char> result;
};
static CheckOut run_check(const HeapViews& V, const gpudyn_rw_heap_view_t& rwv, std::vector<Entry>& entries,
                          std::mt19937_64& rng, u64 seed, unsigned round) {
    std::shuffle(entries.begin(), entries.end(), rng);
    CheckOut out;
    const u64 n = entries.size();
    if (n == 0) return out;
    Entry* d_e = dev_alloc<Entry>(n);
    unsigned* d_bad = dev_alloc<unsigned>(n);
    unsigned char* d_res = dev_alloc<unsigned char>(n);
    CUDA_OK(cudaMemcpy(d_e, entries.data(), n * sizeof(Entry), cudaMemcpyHostToDevice));
    check_free_kernel<<<unsigned((n + 127) / 128), 128>>>(V, rwv, d_e, n, d_bad, d_res);
    sync_kernel("check_free_kernel", seed, round);
    out.stamp_bad = to_host(d_bad, n);
    out.result = to_host(d_res, n);
    cudaFree(d_e);
    cudaFree(d_bad);
    cudaFree(d_res);
    return out;
}

// What a free's result must be: bit 0 set when the block was freed, bit 1 never.
static void check_results(Tally& t, u64 seed, unsigned round, const std::vector<Entry>& e, const CheckOut& o,
                          const std::vector<std::string>& names) {
    for (size_t i = 0; i < e.size(); ++i) {
        const char* kind = e[i].kind == kHeapBlock ? "heap"
                           : e[i].kind == kRwPage  ? "page"
                           : e[i].kind == kRwBlock ? "rw"
                                                   : "warp";
        const std::string where =
            e[i].kind == kHeapBlock ? " (heap " + names[e[i].heap] + ")" : std::string(" (") + kind + ")";
        if (o.stamp_bad[i] != 0) {
            t.fail("stamps" + where, 1);
            t.detail("stamps" + where, "seed %llu round %u: block 0x%llx (%llu B) has %u overwritten words", seed,
                     round, e[i].p, e[i].bytes, o.stamp_bad[i]);
        }
        const bool freed = (o.result[i] & 1) != 0, bad_ok = (o.result[i] & 2) != 0;
        if (e[i].action != kKeep && !freed) {
            t.fail("free refused" + where, 1);
            t.detail("free refused" + where, "seed %llu round %u: free(0x%llx) returned false", seed, round, e[i].p);
        }
        if (bad_ok) {
            t.fail("bad free accepted" + where, 1);
            t.detail("bad free accepted" + where, "seed %llu round %u: action %u on 0x%llx accepted the bad free", seed,
                     round, e[i].action, e[i].p);
        }
    }
}

static void scenario_repro() {
    Tally t;
    t.scenario = "repro";
    g_where = "repro";
    const u64 n = 4096;
    const int seeds = g_cfg.seeds;
    u64 *pa = dev_alloc<u64>(n * 2), *sa = dev_alloc<u64>(n * 2), *pb = dev_alloc<u64>(n);
    gpudyn_rw_heap_view_t no_rw{};
    for (int s = 0; s < seeds; ++s) {
        const u64 seed = s == 0 ? 12345 : u64(s);
        std::mt19937_64 rng(seed * 31 + 7);
        HeapModel hm[2];
        if (!open_heap(hm[0], "A", 64ull << 20, 128ull << 20, 64 << 10) ||
            !open_heap(hm[1], "B", 64ull << 20, 64ull << 20, 64 << 10))
            return;
        HeapViews V{{hm[0].v, hm[1].v, hm[1].v}};
        CUDA_OK(cudaMemset(pa, 0, n * 16));
        CUDA_OK(cudaMemset(pb, 0, n * 8));
        sync_kernel("(before alloc_two_heaps)", seed, 0);
        alloc_two_heaps<<<unsigned(n / 128), 128>>>(hm[0].v, hm[1].v, pa, sa, pb, n, seed);
        sync_kernel("alloc_two_heaps", seed, 0);
        const auto hpa = to_host(pa, n * 2), hsa = to_host(sa, n * 2), hpb = to_host(pb, n);
        std::vector<Block> live;
        for (u64 i = 0; i < n * 2; ++i) {
            Block b;
            b.p = hpa[i], b.bytes = hsa[i], b.heap = 0, b.tid = unsigned(i / 2), b.j = unsigned(i % 2);
            b.key = key_of(b.tid, b.j, seed);
            const u64 want = ((b.tid % 16 == 0 || b.tid % 16 == 2) && b.j == 0) ? 40000 : 32 + (mix64(i + seed) % 480);
            if (b.bytes != want) t.fail("kernel sizes", 1);
            if (b.p) live.push_back(b);
            else ++hm[0].failed;
        }
        for (u64 i = 0; i < n; ++i) {
            Block b;
            b.p = hpb[i], b.bytes = 64, b.heap = 1, b.tid = unsigned(i), b.j = 7, b.key = key_of(i, 7, seed);
            if (b.p) live.push_back(b);
            else ++hm[1].failed;
        }
        t.nulls += hm[0].failed + hm[1].failed;
        t.blocks += live.size();
        for (unsigned h = 0; h < 2; ++h) {
            check_ranges(t, seed, 0, "(heap " + hm[h].name + ")", of_heap(live, h), hm[h].v.base, hm[h].range_end());
            check_heap(t, seed, 0, "after malloc", hm[h], of_heap(live, h));
        }
        // Stamps re-checked and everything freed by other threads; a quarter
        // of B's blocks freed twice (refused, counted).
        std::vector<Entry> e;
        for (const Block& b : live) {
            unsigned char a = b.heap == 1 && rng() % 4 == 0 ? kFreeTwice : kFree;
            e.push_back(Entry{b.p, b.bytes, b.key, kHeapBlock, (unsigned char)b.heap, a, 0});
        }
        // Two threads with one pointer: both free it; the model can say only
        // how many frees succeed in total, so duplicates are left to the check above.
        CheckOut o = run_check(V, no_rw, e, rng, seed, 0);
        std::vector<std::string> names{"A", "B", "B"};
        // A block handed to two threads is in `e` twice: one of its frees is refused.
        std::map<u64, int> seen;
        for (const Entry& x : e) seen[x.p]++;
        std::vector<Entry> e1;
        CheckOut o1;
        for (size_t i = 0; i < e.size(); ++i) {
            if (e[i].action == kFreeTwice) {
                ++hm[e[i].heap].bad;
                ++t.bad_frees;
            }
            if (seen[e[i].p] > 1) { // reported as duplicates already; not counted again
                if (!(o.result[i] & 1)) ++hm[e[i].heap].bad;
                continue;
            }
            e1.push_back(e[i]);
            o1.stamp_bad.push_back(o.stamp_bad[i]);
            o1.result.push_back(o.result[i]);
        }
        check_results(t, seed, 0, e1, o1, names);
        for (unsigned h = 0; h < 2; ++h) check_heap(t, seed, 1, "after free", hm[h], {});
        for (auto& m : hm) CHECK_OK(gpudyn_heap_destroy(m.h));
    }
    cudaFree(pa);
    cudaFree(sa);
    cudaFree(pb);
    summary(t, seeds, "2 heaps, 32 x 128 threads");
}

// ---- scenarios 2 and 3: mixed requests, several structures ---------------------
constexpr unsigned kThreads = 128; // per block, in every shape
constexpr unsigned kSlots = 4;     // per thread and round
constexpr unsigned kEarly = 0xffu; // trips: return at the top
enum Site : unsigned char {
    kSiteOne,    // heap_ref{views[h]}.malloc: lanes of one warp, different heaps, one call site
    kSiteOdd,    // odd lanes only
    kSiteBranch, // one call site per heap, in different branches
    kSiteTwice,  // a second malloc in the loop: a first block freed at once, then the kept one
    kSiteReturn, // the thread returns here (no request)
};
struct SlotPlan {
    u64 bytes;
    unsigned char heap, site, free_now, push; // free_now: freed in this kernel; push: to GGArray 0 / 1 (2: none)
};
struct Extras {
    bool on;
    gpudyn_rw_heap_view_t rw;
    gpudyn_warp_heap_view_t wh;
    gpudyn_ggarray_view_t g[2];
    unsigned* pages;       // per thread: get_page (odd lanes)
    u64* rw_ptrs;          // per thread: RW_malloc (lanes % 3 == 0: warp collective; lane 31: alone)
    u64* wh_ptrs;          // per thread, 2: warp heap blocks
    void** kept;           // per warp: the kept warp header
    unsigned char* pushed; // per slot: push result + 1 (0: no push)
    unsigned round;
    u64 seed;
};

// Sizes of the structures' requests, for the kernel and the host model alike.
// 1..6 pages
__host__ __device__ inline u64 rw_bytes(u64 t, u64 seed, u64 P) { return P + mix64(t ^ (seed << 20)) % (5 * P); }
__host__ __device__ inline u64 wh_bytes(u64 t, unsigned k, u64 seed) {
    const u64 h = mix64(t * 4 + k + (seed << 24));
    return (t % 32 == 0 && k == 1) ? 40000 : 16 + h % 2000; // lane 0's second: beyond a superblock
}
__host__ __device__ inline u64 push_value(u64 seed, unsigned round, u64 slot) {
    return ((seed & 0xffff) << 48) | (u64(round) << 40) | slot;
}
__host__ __device__ inline unsigned slot_key(u64 slot, unsigned round, u64 seed) {
    return key_of(slot, round & 63, seed * 977 + round);
}

__device__ void structures_part(const Extras& x, u64 t, unsigned lane) {
#ifndef STRESS_NO_RW
    __shared__ gpudyn::rw_malloc_storage storage[kThreads / 32];
    const gpudyn::rw_heap_ref rw{x.rw};
    gpudyn::detail::counter_rng rng(x.seed * 131 + x.round, t);
    const u64 P = rw.page_size();
    // Page heap, odd lanes: one page each, stamped whole.
    if (lane & 1) {
        const unsigned page = rw.get_page<gpudyn::rw_algorithm::rw_bm>(rng);
        x.pages[t] = page;
        if (page != gpudyn::kRwInvalidPage) stamp(rw.page_address(page), P, slot_key(t, x.round, x.seed ^ 0x5a));
    }
    // RW_malloc, a warp collective over lanes % 3 == 0 (shared storage of the warp).
    const unsigned rw_mask = __ballot_sync(0xffffffffu, lane % 3 == 0);
    void* q = nullptr;
    u64 qb = 0;
    if (lane % 3 == 0) {
        qb = rw_bytes(t, x.seed + x.round, P);
        q = rw.malloc(rw_mask, qb, storage[(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) / 32],
                      rng);
    } else if (lane == 31) { // alone, with local storage
        gpudyn::rw_malloc_storage local;
        qb = 200;
        q = rw.malloc(1u << 31, qb, local, rng);
    }
    if (q) stamp(q, qb, slot_key(t, x.round, x.seed ^ 0xa5));
    if (lane % 3 == 0 || lane == 31) x.rw_ptrs[t] = reinterpret_cast<u64>(q);
#endif
#ifndef STRESS_NO_WH
    // Warp heap: started in a divergent branch (lanes % 4 != 3), two allocs, kept.
    const unsigned wh_mask = __ballot_sync(0xffffffffu, lane % 4 != 3);
    if (lane % 4 != 3) {
        const gpudyn::warp_heap_ref wref{x.wh};
        gpudyn::warp_heap w = wref.start(wh_mask);
        for (unsigned k = 0; k < 2; ++k) {
            const u64 b = wh_bytes(t, k, x.seed + x.round);
            void* p = w.alloc(b);
            x.wh_ptrs[t * 2 + k] = reinterpret_cast<u64>(p);
            if (p) stamp(p, b, slot_key(t * 2 + k, x.round, x.seed ^ 0x77));
        }
        void* kept = w.keep();
        if (lane == 0) x.kept[t / 32] = kept;
    }
#endif
}

__global__ void __launch_bounds__(kThreads)
    mixed_kernel(HeapViews V, const SlotPlan* plan, const unsigned char* trips, u64* ptrs, unsigned char* first_null,
                 unsigned* same_kernel_bad, u64 n, Extras x) {
    const u64 t = global_tid();
    const unsigned lane = unsigned(t % 32); // blocks of whole warps: the linear id's lane
#ifndef STRESS_NO_PART // (diagnostic builds: -DSTRESS_NO_PART, _NO_RW, _NO_WH, _NO_PUSH leave a part out)
    if (x.on) structures_part(x, t, lane);
#endif
    if (t >= n) return;
    const unsigned tr = trips[t];
    if (tr == kEarly) return; // early return
    const gpudyn::heap_ref H0{V.h[0]}, H1{V.h[1]}, H2{V.h[2]};
    for (unsigned j = 0; j < tr; ++j) { // data-dependent trip count
        const u64 s = t * kSlots + j;
        const SlotPlan sp = plan[s];
        if (sp.site == kSiteReturn) return; // early return inside the loop
        void* p = nullptr;
        if (sp.site == kSiteOne) {
            p = gpudyn::heap_ref{V.h[sp.heap]}.malloc(sp.bytes);
        } else if (sp.site == kSiteOdd) {
            if (lane & 1) p = gpudyn::heap_ref{V.h[sp.heap]}.malloc(sp.bytes);
        } else if (sp.site == kSiteBranch) {
            if (sp.heap == 0) p = H0.malloc(sp.bytes);
            else if (sp.heap == 1) p = H1.malloc(sp.bytes);
            else p = H2.malloc(sp.bytes);
        } else { // kSiteTwice: a block freed at once, then a second malloc for the kept one
            const gpudyn::heap_ref h{V.h[sp.heap]};
            for (unsigned k = 0; k < 2; ++k) {
                p = h.malloc(k == 0 ? 48 : sp.bytes);
                if (k == 0) {
                    if (p != nullptr) {
                        stamp(p, 48, ~slot_key(s, 0, 0));
                        if (stamp_errors(p, 48, ~slot_key(s, 0, 0)) != 0 || !h.free(p)) atomicAdd(same_kernel_bad, 1u);
                    } else {
                        first_null[s] = 1; // a null for the first 48 B: a failure the model counts
                    }
                }
            }
        }
        ptrs[s] = reinterpret_cast<u64>(p);
        if (p != nullptr) {
            const unsigned key = slot_key(s, x.round, x.seed);
            stamp(p, sp.bytes, key);
            if (sp.free_now) {
                if (stamp_errors(p, sp.bytes, key) != 0 || !gpudyn::heap_ref{V.h[sp.heap]}.free(p))
                    atomicAdd(same_kernel_bad, 1u);
            }
        }
#ifdef STRESS_NO_PUSH
        if (false) {
#else
        if (x.on && sp.push < 2) {
#endif
            const gpudyn::ggarray_ref<u64> g{x.g[sp.push]};
            x.pushed[s] = g.push_back(push_value(x.seed, x.round, s)) ? 2 : 1;
        }
    }
}

// Request sizes of a slot for a heap of page P (range bytes R).
static u64 plan_bytes(std::mt19937_64& rng, u64 P) {
    const unsigned r = unsigned(rng() % 1000);
    if (r < 520) { // small: log-uniform 1 .. P/2
        const unsigned bits = 4 + unsigned(rng() % 100) * (unsigned(__builtin_ctzll(P)) - 4) / 100;
        const u64 hi = 1ull << bits;
        return 1 + rng() % std::min(hi, P / 2);
    }
    if (r < 700) return 32 + rng() % 480; // the repro's medium-small mix
    if (r < 760) return 40000;
    if (r < 780) return 64;
    if (r < 920) return P / 2 + 1 + rng() % (4 * P);      // one page to a few
    if (r < 990) return P * (2 + rng() % 14) + rng() % P; // many pages
    return P * (16 + rng() % 48);
}

static void scenario_mixed(bool structures) {
    Tally t;
    t.scenario = structures ? "structures" : "mixed";
    g_where = structures ? "structures" : "mixed";
    const int seeds = g_cfg.seeds;
    const unsigned blocks = g_cfg.mixed_blocks, rounds = g_cfg.rounds;
    const u64 n = u64(blocks) * kThreads;
    const u64 nslots = n * kSlots;
    SlotPlan* d_plan = dev_alloc<SlotPlan>(nslots);
    unsigned char* d_trips = dev_alloc<unsigned char>(n);
    u64* d_ptrs = dev_alloc<u64>(nslots);
    unsigned* d_skb = dev_alloc<unsigned>(2);
    unsigned char* d_first = dev_alloc<unsigned char>(nslots);
    unsigned* d_pages = dev_alloc<unsigned>(n);
    u64* d_rw = dev_alloc<u64>(n);
    u64* d_wh = dev_alloc<u64>(n * 2);
    void** d_kept = dev_alloc<void*>(n / 32);
    unsigned char* d_pushed = dev_alloc<unsigned char>(nslots);
    for (int si = 0; si < seeds; ++si) {
        const u64 seed = 1000 + u64(si) * 7919;
        std::mt19937_64 rng(seed);
        HeapModel hm[3];
        const bool big = !g_cfg.reduced;
        if (!open_heap(hm[0], "64K", (big ? 512ull : 64ull) << 20, (big ? 2ull : 1ull) << 30, 64 << 10) ||
            !open_heap(hm[1], "4K", (big ? 128ull : 64ull) << 20, (big ? 128ull : 64ull) << 20, 4 << 10) ||
            !open_heap(hm[2], "16K-small", 4ull << 20, 4ull << 20, 16 << 10))
            return;
        HeapViews V{{hm[0].v, hm[1].v, hm[2].v}};
        std::vector<std::string> names{hm[0].name, hm[1].name, hm[2].name};
        // Structures of the third scenario.
        Extras x{};
        x.on = structures;
        gpudyn_rw_heap_t rwh = nullptr;
        gpudyn_warp_heap_t whh = nullptr;
        gpudyn_ggarray_t ga[2] = {nullptr, nullptr};
        HeapModel gheap; // the second GGArray's heap
        u64 rw_page = 4096, rw_count = 1u << 15;
        uint64_t wh_free0 = 0;
        std::vector<u64> pushed_expect[2];
        if (structures) {
            gpudyn_rw_heap_options_t ro;
            CHECK_OK(gpudyn_rw_heap_options_init(&ro));
            ro.word_bits = si % 2 ? 64 : 32;
            ro.page_size = rw_page;
            ro.page_count = rw_count;
            ro.use_lockmap = si % 4 == 3;
            CHECK_OK(gpudyn_rw_heap_create(&rwh, &ro, nullptr));
            CHECK_OK(gpudyn_rw_heap_get_view(rwh, &x.rw));
            gpudyn_warp_heap_options_t wo;
            CHECK_OK(gpudyn_warp_heap_options_init(&wo));
            wo.arena_bytes = 128ull << 20;
            CHECK_OK(gpudyn_warp_heap_create(&whh, &wo, nullptr));
            CHECK_OK(gpudyn_warp_heap_get_view(whh, &x.wh));
            CHECK_OK(gpudyn_warp_heap_backing_free_bytes(whh, &wh_free0, nullptr));
            if (!open_heap(gheap, "ggarray", 64ull << 20, 64ull << 20, 64 << 10)) return;
            for (int a = 0; a < 2; ++a) {
                gpudyn_ggarray_options_t go;
                CHECK_OK(gpudyn_ggarray_options_init(&go));
                go.element_size = 8;
                go.num_lfvectors = 64;
                go.first_bucket_elements = 32;
                go.pool_bytes = ~0ull; // no pool: every bucket grows inside kernels
                if (a == 0) go.budget_bytes = 32ull << 20;
                else go.heap = gheap.h;
                CHECK_OK(gpudyn_ggarray_create(&ga[a], &go, nullptr));
            }
            x.pages = d_pages, x.rw_ptrs = d_rw, x.wh_ptrs = d_wh, x.kept = d_kept, x.pushed = d_pushed;
        }
        std::vector<Block> live;    // heap blocks
        std::vector<Entry> rw_live; // page heap pages and blocks
        u64 rw_failed = 0, rw_bad = 0, rw_failed_seen = 0, rw_bad_seen = 0;
        const int shape = si % 3;
        for (unsigned round = 0; round < rounds; ++round) {
            if (round == 1) { // grow between launches; the views stay valid
                CHECK_OK(gpudyn_heap_grow(hm[0].h, (big ? 1024ull : 128ull) << 20, nullptr));
            }
            // The plan of this round, and which slots request (the kernel's rule).
            std::vector<SlotPlan> plan(nslots);
            std::vector<unsigned char> trips(n);
            const bool repro_round = round % 2 == 1;
            for (u64 tt = 0; tt < n; ++tt) {
                const unsigned lane = unsigned(tt % 32);
                const unsigned r = unsigned(rng() % 16);
                trips[tt] = r == 0 ? kEarly : (unsigned char)(1 + rng() % kSlots);
                for (unsigned j = 0; j < kSlots; ++j) {
                    SlotPlan& sp = plan[tt * kSlots + j];
                    const unsigned pick = unsigned(rng() % 4);
                    sp.heap = (unsigned char)(pick == 0 ? lane % 3 : pick == 1 ? (lane / 2) % 3 : rng() % 3);
                    sp.site = (unsigned char)(rng() % 4);
                    if (rng() % 24 == 0) sp.site = kSiteReturn;
                    sp.bytes = plan_bytes(rng, hm[sp.heap].P);
                    sp.free_now = rng() % 5 == 0;
                    sp.push = (unsigned char)(structures ? rng() % 3 : 2);
                    if (repro_round && j < 3) { // the repro's pattern: A twice, then 64 B of B
                        sp.heap = j < 2 ? 0 : 1;
                        sp.bytes = j == 2 ? 64 : ((tt % 16 == 0 || tt % 16 == 2) && j == 0) ? 40000 : 32 + rng() % 480;
                        sp.site = j == 2 ? kSiteBranch : kSiteOne;
                        sp.free_now = 0;
                    }
                }
                if (repro_round && trips[tt] != kEarly) trips[tt] = (unsigned char)std::max<unsigned>(trips[tt], 3);
            }
            // Huge requests: a few threads, in heaps with room for them.
            for (unsigned k = 0; k < 2; ++k) {
                const u64 tt = rng() % n;
                if (trips[tt] == kEarly) trips[tt] = 1;
                SlotPlan& sp = plan[tt * kSlots];
                sp.heap = (unsigned char)(k == 0 && big ? 0 : 1);
                sp.site = kSiteOne;
                sp.bytes = u64(gpudyn::kRwRegionWords) * 64 * hm[sp.heap].P + 1 + rng() % (8 * hm[sp.heap].P);
                sp.free_now = k == 1;
            }
            CUDA_OK(cudaMemcpy(d_plan, plan.data(), nslots * sizeof(SlotPlan), cudaMemcpyHostToDevice));
            CUDA_OK(cudaMemcpy(d_trips, trips.data(), n, cudaMemcpyHostToDevice));
            CUDA_OK(cudaMemset(d_ptrs, 0, nslots * 8));
            CUDA_OK(cudaMemset(d_skb, 0, 8));
            CUDA_OK(cudaMemset(d_first, 0, nslots));
            u64 gheap_allocs = 0;
            if (structures) {
                CUDA_OK(cudaMemset(d_pages, 0xff, n * 4));
                CUDA_OK(cudaMemset(d_rw, 0, n * 8));
                CUDA_OK(cudaMemset(d_wh, 0, n * 16));
                CUDA_OK(cudaMemset(d_kept, 0, n / 32 * 8));
                CUDA_OK(cudaMemset(d_pushed, 0, nslots));
                for (int a = 0; a < 2; ++a) CHECK_OK(gpudyn_ggarray_get_view(ga[a], &x.g[a], nullptr));
                gheap_allocs = heap_stats(gheap.h).allocations;
            }
            x.round = round;
            x.seed = seed;
            const dim3 block = shape == 0   ? dim3(kThreads)
                               : shape == 1 ? dim3(32, kThreads / 32)
                                            : dim3(8, 4, kThreads / 32);
            const dim3 grid = shape == 2 ? dim3(blocks / 2, 2) : dim3(blocks);
            sync_kernel("(before mixed_kernel)", seed, round);
            mixed_kernel<<<grid, block>>>(V, d_plan, d_trips, d_ptrs, d_first, d_skb, n, x);
            sync_kernel("mixed_kernel", seed, round);
            const auto ptrs = to_host(d_ptrs, nslots);
            const auto skb = to_host(d_skb, 2);
            const auto first_null = to_host(d_first, nslots);
            if (skb[0] != 0) {
                t.fail("same-kernel stamp or free", skb[0]);
                t.detail(
                    "same-kernel stamp or free",
                    "seed %llu round %u: %u blocks freed in the allocating kernel had a bad stamp or a refused free",
                    seed, round, skb[0]);
            }
            // The model: what each slot asked for, what it got.
            std::vector<Block> fresh;
            for (u64 tt = 0; tt < n; ++tt) {
                if (trips[tt] == kEarly) continue;
                for (unsigned j = 0; j < trips[tt]; ++j) {
                    const u64 s = tt * kSlots + j;
                    const SlotPlan& sp = plan[s];
                    if (sp.site == kSiteReturn) break;
                    const bool asks = sp.site != kSiteOdd || (tt % 32) % 2 == 1;
                    if (!asks) {
                        if (ptrs[s] != 0) t.fail("pointer without a request", 1);
                        continue;
                    }
                    if (sp.site == kSiteTwice) { // its first malloc, of 48 B, freed at once
                        ++t.blocks;
                        if (first_null[s]) ++hm[sp.heap].failed, ++t.nulls;
                    }
                    if (sp.bytes == 0) continue;
                    if (ptrs[s] == 0) {
                        ++hm[sp.heap].failed;
                        ++t.nulls;
                        continue;
                    }
                    ++t.blocks;
                    if (sp.free_now) continue; // freed by its thread in this kernel
                    Block b;
                    b.p = ptrs[s], b.bytes = sp.bytes, b.heap = sp.heap, b.tid = unsigned(tt), b.j = j, b.round = round;
                    b.key = slot_key(s, round, seed);
                    fresh.push_back(b);
                }
            }
            live.insert(live.end(), fresh.begin(), fresh.end());
            for (unsigned h = 0; h < 3; ++h) {
                check_ranges(t, seed, round, "(heap " + hm[h].name + ")", of_heap(live, h), hm[h].v.base,
                             hm[h].range_end());
                check_heap(t, seed, round, "after the allocating kernel", hm[h], of_heap(live, h));
            }
            // The structures' results.
            std::vector<Entry> entries;
            if (structures) {
                const auto pages = to_host(d_pages, n);
                const auto rwp = to_host(d_rw, n);
                const auto whp = to_host(d_wh, n * 2);
                const auto kept = to_host(d_kept, n / 32);
                const auto pushed = to_host(d_pushed, nslots);
                std::vector<Block> rw_blocks, wh_blocks;
                for (u64 tt = 0; tt < n; ++tt) {
                    const unsigned lane = unsigned(tt % 32);
                    if (lane & 1) {
                        if (pages[tt] == gpudyn::kRwInvalidPage) ++rw_failed;
                        else if (pages[tt] >= rw_count) t.fail("page out of range", 1);
                        else
                            rw_live.push_back(
                                Entry{pages[tt], rw_page, slot_key(tt, round, seed ^ 0x5a), kRwPage, 0, kKeep, 0});
                    }
                    if (lane % 3 == 0 || lane == 31) {
                        const u64 b = lane % 3 == 0 ? rw_bytes(tt, seed + round, rw_page) : 200;
                        if (rwp[tt] == 0) ++rw_failed;
                        else
                            rw_live.push_back(
                                Entry{rwp[tt], b, slot_key(tt, round, seed ^ 0xa5), kRwBlock, 0, kKeep, 0});
                    }
                    if (lane % 4 != 3)
                        for (unsigned k = 0; k < 2; ++k) {
                            Block b;
                            b.p = whp[tt * 2 + k], b.bytes = wh_bytes(tt, k, seed + round), b.tid = unsigned(tt),
                            b.j = k;
                            b.key = slot_key(tt * 2 + k, round, seed ^ 0x77), b.round = round;
                            if (b.p == 0) {
                                t.fail("warp heap null", 1);
                                continue;
                            }
                            wh_blocks.push_back(b);
                            entries.push_back(Entry{b.p, b.bytes, b.key, kWarpBlock, 0, kKeep, 0});
                        }
                }
                t.warp_blocks += wh_blocks.size();
                for (u64 w = 0; w < n / 32; ++w)
                    if (kept[w] == nullptr) t.fail("warp heap header not kept", 1);
                // Page heap: no page twice, blocks distinct and in the pool (pages as ranges).
                for (const Entry& e : rw_live) {
                    Block b;
                    b.p = e.kind == kRwPage ? x.rw.pool + e.p * rw_page : e.p;
                    b.bytes = e.kind == kRwPage ? rw_page : e.bytes;
                    rw_blocks.push_back(b);
                }
                check_ranges(t, seed, round, "(page heap)", rw_blocks, x.rw.pool, x.rw.pool + rw_count * rw_page);
                gpudyn_warp_heap_stats_t ws;
                CHECK_OK(gpudyn_warp_heap_get_stats(whh, &ws, nullptr));
                // Warp heap blocks: inside its arena (header slots, then chunk slots; no
                // request here is large enough for the CUDA-malloc fallback).
                const u64 arena = reinterpret_cast<u64>(x.wh.arena_base);
                const u64 arena_end = arena + u64(x.wh.arena_header_slots) * x.wh.arena_header_bytes +
                                      u64(x.wh.arena_chunk_slots) * x.wh.arena_chunk_bytes;
                check_ranges(t, seed, round, "(warp heap)", wh_blocks, arena, arena_end);
                if (ws.headers != n / 32 || ws.failed_allocations != 0 || ws.misuse != 0) {
                    t.fail("warp heap stats", 1);
                    t.detail("warp heap stats",
                             "seed %llu round %u: headers %llu (model %llu), failed %llu, misuse %llu", seed, round,
                             (u64)ws.headers, n / 32, (u64)ws.failed_allocations, (u64)ws.misuse);
                }
                // GGArrays: every pushed value present exactly once.
                for (u64 s = 0; s < nslots; ++s) {
                    if (pushed[s] == 0) continue;
                    ++t.pushes;
                    if (pushed[s] == 2) pushed_expect[plan[s].push].push_back(push_value(seed, round, s));
                    else t.fail("ggarray push refused", 1);
                }
                for (int a = 0; a < 2; ++a) {
                    uint64_t size = 0;
                    CHECK_OK(gpudyn_ggarray_size(ga[a], &size, nullptr));
                    std::vector<u64> got(size);
                    if (size) CHECK_OK(gpudyn_ggarray_copy_to_host(ga[a], got.data(), size * 8, nullptr));
                    std::sort(got.begin(), got.end());
                    std::vector<u64>& want = pushed_expect[a];
                    std::sort(want.begin(), want.end());
                    if (got != want) {
                        u64 missing = 0, extra = 0;
                        std::vector<u64> d;
                        std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(d));
                        missing = d.size();
                        d.clear();
                        std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(d));
                        extra = d.size();
                        t.fail("ggarray contents", 1);
                        t.detail(
                            "ggarray contents",
                            "seed %llu round %u array %d: size %llu, model %zu, %llu missing, %llu extra or repeated",
                            seed, round, a, (u64)size, want.size(), missing, extra);
                    }
                    uint32_t status = 0;
                    CHECK_OK(gpudyn_ggarray_get_status(ga[a], &status, nullptr));
                    if (status != 0) t.fail("ggarray status", 1);
                }
                const gpudyn_heap_stats_t gs = heap_stats(gheap.h);
                if (gs.allocations != gheap_allocs || gs.failed_allocations != 0 || gs.bad_frees != 0) {
                    t.fail("stats (heap ggarray)", 1);
                    t.detail(
                        "stats (heap ggarray)",
                        "seed %llu round %u: allocations %llu (before the kernel %llu), failed %llu, bad frees %llu",
                        seed, round, (u64)gs.allocations, gheap_allocs, (u64)gs.failed_allocations, (u64)gs.bad_frees);
                }
            }
            // The later kernel: every stamp, a random half freed (by other threads), bad frees.
            const bool last = round + 1 == rounds;
            std::vector<Block> keep;
            for (const Block& b : live) {
                unsigned char a = kKeep;
                if (last || rng() % 2 == 0) {
                    const unsigned r = unsigned(rng() % 10);
                    a = r == 0 && b.bytes > 16 ? kFreeInterior : r == 1 ? kFreeWrongHeap : r == 2 ? kFreeTwice : kFree;
                }
                if (a == kFreeInterior || a == kFreeTwice) {
                    ++hm[b.heap].bad;
                    ++t.bad_frees;
                }
                if (a == kFreeWrongHeap) {
                    ++hm[(b.heap + 1) % 3].bad;
                    ++t.bad_frees;
                }
                if (a == kKeep) keep.push_back(b);
                entries.push_back(Entry{b.p, b.bytes, b.key, kHeapBlock, (unsigned char)b.heap, a, 0});
            }
            std::vector<Entry> rw_keep;
            for (Entry e : rw_live) {
                e.action = kKeep;
                if (last || rng() % 2 == 0) e.action = rng() % 8 == 0 ? kFreeTwice : kFree;
                if (e.action == kFreeTwice) {
                    ++rw_bad;
                    ++t.bad_frees;
                }
                if (e.action == kKeep) rw_keep.push_back(e);
                entries.push_back(e);
            }
            t.pages += rw_live.size();
            const CheckOut o = run_check(V, x.rw, entries, rng, seed, round);
            check_results(t, seed, round, entries, o, names);
            live.swap(keep);
            rw_live.swap(rw_keep);
            for (unsigned h = 0; h < 3; ++h)
                check_heap(t, seed, round, "after the freeing kernel", hm[h], of_heap(live, h));
            if (structures) {
                // Warp heap: the kept headers freed by the host; everything back.
                CHECK_OK(gpudyn_warp_heap_free_kept(whh, d_kept, n / 32, nullptr));
                gpudyn_warp_heap_stats_t ws;
                CHECK_OK(gpudyn_warp_heap_get_stats(whh, &ws, nullptr));
                uint64_t free_now = 0;
                CHECK_OK(gpudyn_warp_heap_backing_free_bytes(whh, &free_now, nullptr));
                if (ws.headers || ws.superblocks || ws.large_blocks || ws.bytes_reserved || ws.misuse ||
                    free_now != wh_free0) {
                    t.fail("warp heap after free_kept", 1);
                    t.detail(
                        "warp heap after free_kept",
                        "seed %llu round %u: headers %llu superblocks %llu large %llu reserved %llu misuse %llu, backing free %llu of %llu",
                        seed, round, (u64)ws.headers, (u64)ws.superblocks, (u64)ws.large_blocks, (u64)ws.bytes_reserved,
                        (u64)ws.misuse, (u64)free_now, (u64)wh_free0);
                }
                // Page heap: free pages, failures and bad frees as the model says.
                u64 used = 0;
                for (const Entry& e : rw_live) used += e.kind == kRwPage ? 1 : (e.bytes + rw_page - 1) / rw_page;
                gpudyn_rw_heap_info_t info;
                memset(&info, 0, sizeof info);
                info.struct_size = sizeof info;
                CHECK_OK(gpudyn_rw_heap_get_info(rwh, &info, nullptr));
                if (info.free_pages != rw_count - used || info.failed_requests != rw_failed ||
                    info.bad_frees != rw_bad) {
                    t.fail("page heap info", 1);
                    t.detail(
                        "page heap info",
                        "seed %llu round %u: free pages %llu (model %llu), failed %llu (model %llu), bad frees %llu (model %llu)",
                        seed, round, (u64)info.free_pages, rw_count - used, (u64)info.failed_requests, rw_failed,
                        (u64)info.bad_frees, rw_bad);
                }
                const gpudyn_status_t want = rw_failed > rw_failed_seen ? GPUDYN_ERROR_OUT_OF_MEMORY
                                             : rw_bad > rw_bad_seen     ? GPUDYN_ERROR_INVALID_ARGUMENT
                                                                        : GPUDYN_SUCCESS;
                const gpudyn_status_t got = gpudyn_rw_heap_check(rwh, nullptr);
                if (got != want) {
                    t.fail("page heap check()", 1);
                    t.detail("page heap check()", "seed %llu round %u: %s, the model says %s", seed, round,
                             gpudyn_status_string(got), gpudyn_status_string(want));
                }
                rw_failed_seen = rw_failed, rw_bad_seen = rw_bad;
            }
        }
        // Everything freed: nothing live in any heap.
        for (unsigned h = 0; h < 3; ++h) {
            const gpudyn_heap_stats_t st = heap_stats(hm[h].h);
            if (st.allocations != 0 || st.bytes_allocated != 0) {
                t.fail("live after freeing all (heap " + hm[h].name + ")", 1);
            }
        }
        if (structures) {
            for (int a = 0; a < 2; ++a) CHECK_OK(gpudyn_ggarray_destroy(ga[a]));
            CHECK_OK(gpudyn_heap_destroy(gheap.h));
            CHECK_OK(gpudyn_warp_heap_destroy(whh));
            CHECK_OK(gpudyn_rw_heap_destroy(rwh));
        }
        for (auto& m : hm) CHECK_OK(gpudyn_heap_destroy(m.h));
    }
    cudaFree(d_plan);
    cudaFree(d_trips);
    cudaFree(d_ptrs);
    cudaFree(d_skb);
    cudaFree(d_first);
    cudaFree(d_pages);
    cudaFree(d_rw);
    cudaFree(d_wh);
    cudaFree(d_kept);
    cudaFree(d_pushed);
    char what[128];
    snprintf(what, sizeof what, "3 heaps%s, %u rounds of %llu threads (1-D/2-D/3-D)",
             structures ? " + page heap + warp heap + 2 GGArrays" : "", rounds, n);
    summary(t, seeds, what);
}

int main(int argc, char** argv) {
    REQUIRE_DEVICE();
    g_cfg.reduced = getenv("GPUDYN_SANITIZER") != nullptr;
    if (const char* r = getenv("GPUDYN_STRESS_REDUCED")) g_cfg.reduced = g_cfg.reduced || strcmp(r, "0") != 0;
    for (int i = 1; i < argc; ++i)
        if (strcmp(argv[i], "--reduced") == 0) g_cfg.reduced = true;
    if (g_cfg.reduced) {
        g_cfg.seeds = 2;
        g_cfg.mixed_blocks = 8;
        g_cfg.rounds = 2;
    }
    if (const char* s = getenv("GPUDYN_STRESS_SEEDS")) g_cfg.seeds = std::max(1, atoi(s));
    printf("stress: %s size, %d seeds a scenario\n", g_cfg.reduced ? "reduced" : "full", g_cfg.seeds);
    fflush(stdout);
    // GPUDYN_STRESS_ONLY=NAME[,NAME]: only those scenarios (repro, mixed, structures).
    const char* only = getenv("GPUDYN_STRESS_ONLY");
    auto wanted = [&](const char* name) {
        if (only == nullptr || *only == 0) return true;
        const std::string o = std::string(",") + only + ",";
        return o.find(std::string(",") + name + ",") != std::string::npos;
    };
    if (wanted("repro")) STEP(scenario_repro());
    if (wanted("mixed")) STEP(scenario_mixed(false));
    if (wanted("structures")) STEP(scenario_mixed(true));
    return TEST_RESULT();
}
