// gpudyn_bench_warp_heap: the FDGMalloc paper's experiments (Widmer et al.
// 2013, Figs. 4-6) for the warp heap on its default arena backing, against
// CUDA device malloc, the warp heap on CUDA malloc (the paper's configuration),
// the warp heap without superblocks (every warp request straight to CUDA
// malloc) and the warp heap on the random-walk page heap, all in the same run.
//
//   gpudyn_bench_warp_heap --out FILE.json [--quick] [--only target|fig4|fig5|fig6]
//
// Each configuration is one kernel: X threads each make N allocations of S
// bytes, then free everything (warp heap: end(); CUDA malloc: free of each
// pointer), as in the paper's sec. 5.1.  Timed with CUDA events after a
// warm-up launch; the median of the repeats is reported.
//
// Bytes held: after the timed launches, one more launch of the same job keeps
// its warp headers instead of ending them (keep()), so every warp's memory is
// live at once when the heap's statistics and its backing's free bytes are
// read (the job's peak when all its warps run together; a launch whose warps
// do not all fit on the GPU at once peaks lower), then the host frees the
// headers (free_kept).  Each such
// measurement checks itself (requested bytes against X * N * S rounded, held
// >= requested, everything back afterwards); a mismatch, and any allocation
// that failed (the run is sized to serve them all), goes to "failures".
#include <gpudyn/rw_heap.h>
#include <gpudyn/warp_heap.h>
#include <gpudyn/warp_heap.cuh>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

// CUDA malloc heap for the run: the largest configuration (512 blocks x 1024
// threads x 128 x 16 B = 1 GiB, plus 16384 warp-header blocks of ~34 KiB) fits
// with room to spare; sized once, before any kernel uses malloc.
constexpr size_t kDeviceHeapBytes = 6ull << 30;
// Most pointers a CUDA-malloc thread keeps before freeing them (largest N).
constexpr unsigned kMaxN = 512;
// Largest block size of the timed kernels (the paper's Fig. 6 uses 1024).
constexpr unsigned kMaxBlock = 1024;
// CUDA malloc baseline: skip configurations past this many allocations in one
// launch, and stop a series once one launch took longer than kSlowMs (CUDA
// malloc slows down sharply with concurrent requests; see the paper's Fig. 5).
constexpr unsigned long long kMaxBaselineAllocs = 1ull << 21;
constexpr double kSlowMs = 400.0;
// Fig. 5 skips configurations asking for more than this many bytes in one
// launch (the paper too: "the limited GPU memory does not allow us to perform
// all tests with all combinations"); it keeps every run inside kDeviceHeapBytes.
constexpr unsigned long long kMaxBytesPerLaunch = 2ull << 30;
// Arena of the default warp heap: header slots for the largest launch (Fig. 6:
// 512 x 1024 threads = 16384 warps) and chunks for kMaxBytesPerLaunch twice
// over (superblock runs may hold up to twice what a warp uses).
constexpr unsigned long long kArenaBytes = 8ull << 30;
constexpr unsigned long long kArenaHeaderSlots = 20480;
// Warp headers the bytes-held launch can keep at once: every warp of the largest launch.
constexpr unsigned long long kKeptSlots = kArenaHeaderSlots;
// Page heap backing: pages that hold a warp's header block (header, list and
// first superblock), rounded to 4 KiB; enough of them for 65,536 threads of
// Fig. 4 and the target (2048 warps, a few superblocks each).
constexpr unsigned long long kPageRounding = 4096;
constexpr unsigned long long kPageCount = 1ull << 16;

#define CUDA_CHECK(call)                                                                                  \
    do {                                                                                                  \
        cudaError_t e_ = (call);                                                                          \
        if (e_ != cudaSuccess) {                                                                          \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            std::exit(2);                                                                                 \
        }                                                                                                 \
    } while (0)
#define GPUDYN_CHECK(call)                                                                                     \
    do {                                                                                                       \
        gpudyn_status_t s_ = (call);                                                                           \
        if (s_ != GPUDYN_SUCCESS) {                                                                            \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, gpudyn_last_error_message()); \
            std::exit(2);                                                                                      \
        }                                                                                                      \
    } while (0)

// Keep = false: the timed job.  Keep = true: the same job, but each warp keeps
// its header (written to kept[warp of the grid]) so that the host can read what
// the heap holds at the job's end before freeing it.
template <bool Keep>
__global__ void __launch_bounds__(kMaxBlock)
    warp_heap_kernel(gpudyn_warp_heap_view_t view, unsigned n, unsigned s, unsigned* failures, void** kept) {
    gpudyn::warp_heap_ref ref{view};
    const unsigned mask = gpudyn::detail::block_warp_mask(); // partial last warp when blockDim.x % 32 != 0
    gpudyn::warp_heap heap = ref.start(mask);
    unsigned failed = heap.valid() ? 0u : n;
#pragma unroll 1
    for (unsigned i = 0; i < n; ++i) failed += heap.alloc(mask, s) == nullptr;
    if constexpr (Keep) {
        void* k = heap.valid() ? heap.keep() : nullptr;
        if (threadIdx.x % 32 == 0) kept[blockIdx.x * ((blockDim.x + 31) / 32) + threadIdx.x / 32] = k;
    } else {
        if (heap.valid()) heap.end();
    }
    if (failed) atomicAdd(failures, failed);
}

__global__ void cuda_malloc_kernel(unsigned n, unsigned s, unsigned* failures) {
    void* ptrs[kMaxN];
    unsigned failed = 0;
#pragma unroll 1
    for (unsigned i = 0; i < n; ++i) {
        ptrs[i] = malloc(s);
        failed += ptrs[i] == nullptr;
    }
#pragma unroll 1
    for (unsigned i = 0; i < n; ++i) free(ptrs[i]);
    if (failed) atomicAdd(failures, failed);
}

enum class allocator {
    warp_heap,
    warp_heap_no_sb,
    cuda_malloc,
    warp_heap_cuda_malloc,
    warp_heap_page_heap
};
const char* name_of(allocator a) {
    switch (a) {
        case allocator::warp_heap: return "warp_heap";
        case allocator::warp_heap_no_sb: return "warp_heap_no_superblocks";
        case allocator::warp_heap_cuda_malloc: return "warp_heap_cuda_malloc";
        case allocator::warp_heap_page_heap: return "warp_heap_page_heap";
        default: return "cuda_malloc";
    }
}

// Where a row's held_bytes comes from.
enum class held_measure {
    backing,
    reserved,
    requested
};
const char* name_of(held_measure m) {
    switch (m) {
        case held_measure::backing: return "backing";   // arena slots / page-heap pages taken
        case held_measure::reserved: return "reserved"; // bytes asked of CUDA malloc (lower bound)
        default: return "requested";                    // X * N * S rounded (lower bound)
    }
}

// What the allocator holds for one job at its end (its peak).
struct held {
    unsigned long long requested = 0; // X * N * S, S rounded to the 16-byte minimum block
    unsigned long long reserved = 0;  // stats.bytes_reserved: bytes asked of the backing
    long long backing_taken = -1;     // backing free bytes before minus at the end (-1: cannot be asked)
    unsigned long long bytes = 0;     // held_bytes (see held_measure)
    held_measure measure = held_measure::requested;
};

constexpr unsigned long long kMinBlock = 16; // the heaps' min_block_bytes (options_init's default)
unsigned long long rounded(unsigned s) { return (s + kMinBlock - 1) / kMinBlock * kMinBlock; }

struct bench {
    gpudyn_warp_heap_view_t with_sb{}, without_sb{}, on_malloc{}, on_pages{};
    gpudyn_warp_heap_t h_with_sb = nullptr, h_without_sb = nullptr, h_on_malloc = nullptr, h_on_pages = nullptr;
    unsigned* failures = nullptr;
    void** kept = nullptr; // kKeptSlots warp headers of the keep launch
    int repeats = 5;
    cudaEvent_t start{}, stop{};
    std::vector<std::string> problems; // failed self-checks, for the JSON

    const gpudyn_warp_heap_view_t& view_of(allocator a) const {
        return a == allocator::warp_heap               ? with_sb
               : a == allocator::warp_heap_no_sb       ? without_sb
               : a == allocator::warp_heap_cuda_malloc ? on_malloc
                                                       : on_pages;
    }
    gpudyn_warp_heap_t handle_of(allocator a) const {
        return a == allocator::warp_heap               ? h_with_sb
               : a == allocator::warp_heap_no_sb       ? h_without_sb
               : a == allocator::warp_heap_cuda_malloc ? h_on_malloc
                                                       : h_on_pages;
    }

    void launch(allocator a, unsigned threads, unsigned block, unsigned n, unsigned s, bool keep = false) {
        const unsigned grid = (threads + block - 1) / block;
        if (a == allocator::cuda_malloc) cuda_malloc_kernel<<<grid, block>>>(n, s, failures);
        else if (keep) warp_heap_kernel<true><<<grid, block>>>(view_of(a), n, s, failures, kept);
        else warp_heap_kernel<false><<<grid, block>>>(view_of(a), n, s, failures, nullptr);
        CUDA_CHECK(cudaGetLastError());
    }

    // Backing free bytes, or -1 where the backing cannot be asked (CUDA malloc).
    long long free_bytes(allocator a) {
        if (a == allocator::warp_heap_cuda_malloc || a == allocator::warp_heap_no_sb) return -1;
        uint64_t b = 0;
        GPUDYN_CHECK(gpudyn_warp_heap_backing_free_bytes(handle_of(a), &b, nullptr));
        return (long long)b;
    }

    // Bytes the allocator holds at the end of the job (see the file comment),
    // checked against the request; `where` names the point in a failure.
    held measure_held(allocator a, unsigned threads, unsigned n, unsigned s, unsigned block, const char* where) {
        block = std::min(block, threads);
        held h;
        h.requested = (unsigned long long)threads * n * rounded(s);
        if (a == allocator::cuda_malloc) {
            h.bytes = h.requested; // CUDA has no query for its device heap: the request is the floor
            return h;
        }
        const unsigned grid = (threads + block - 1) / block;
        const unsigned long long warps = (unsigned long long)grid * ((block + 31) / 32);
        if (warps > kKeptSlots) {
            problems.push_back(std::string(where) + ": more warps than kept-header slots");
            return h;
        }
        gpudyn_warp_heap_t heap = handle_of(a);
        gpudyn_warp_heap_stats_t s0{}, s1{}, s2{};
        GPUDYN_CHECK(gpudyn_warp_heap_get_stats(heap, &s0, nullptr));
        const long long free0 = free_bytes(a);
        CUDA_CHECK(cudaMemset(failures, 0, sizeof(unsigned)));
        launch(a, threads, block, n, s, true);
        CUDA_CHECK(cudaDeviceSynchronize());
        unsigned failed = 0;
        CUDA_CHECK(cudaMemcpy(&failed, failures, sizeof(unsigned), cudaMemcpyDeviceToHost));
        GPUDYN_CHECK(gpudyn_warp_heap_get_stats(heap, &s1, nullptr));
        const long long free1 = free_bytes(a);
        GPUDYN_CHECK(gpudyn_warp_heap_free_kept(heap, kept, warps, nullptr));
        GPUDYN_CHECK(gpudyn_warp_heap_get_stats(heap, &s2, nullptr));
        const long long free2 = free_bytes(a);

        h.reserved = s1.bytes_reserved - s0.bytes_reserved;
        if (free0 >= 0) {
            h.backing_taken = free0 - free1;
            // Slots / pages taken; blocks past the arena's 32-slot runs come from
            // CUDA malloc and show only in `reserved`, hence the larger of the two.
            h.bytes = std::max<unsigned long long>((unsigned long long)h.backing_taken, h.reserved);
            h.measure = held_measure::backing;
        } else {
            h.bytes = h.reserved;
            h.measure = held_measure::reserved;
        }
        // Self-checks: every request served and counted, nothing left behind.
        char buf[320];
        if (failed != 0) {
            snprintf(buf, sizeof buf, "%s %s: %u allocations failed in the bytes-held launch", where, name_of(a),
                     failed);
            problems.push_back(buf);
        }
        const unsigned long long got = s1.bytes_requested - s0.bytes_requested;
        if (failed == 0 && got != h.requested) {
            snprintf(buf, sizeof buf, "%s %s: stats.bytes_requested grew by %llu, expected %llu", where, name_of(a),
                     got, h.requested);
            problems.push_back(buf);
        }
        if (failed == 0 && h.bytes < h.requested) {
            snprintf(buf, sizeof buf, "%s %s: held %llu bytes < requested %llu", where, name_of(a), h.bytes,
                     h.requested);
            problems.push_back(buf);
        }
        if (s2.headers != s0.headers || s2.superblocks != s0.superblocks || s2.large_blocks != s0.large_blocks ||
            s2.bytes_reserved != s0.bytes_reserved || s2.bytes_requested != s0.bytes_requested || free2 != free0) {
            snprintf(buf, sizeof buf, "%s %s: free_kept left headers %llu, reserved %llu, backing free %lld of %lld",
                     where, name_of(a), (unsigned long long)(s2.headers - s0.headers),
                     (unsigned long long)(s2.bytes_reserved - s0.bytes_reserved), free2, free0);
            problems.push_back(buf);
        }
        return h;
    }

    // Median kernel time in ms over `repeats` launches after one warm-up; the
    // failed allocations of the timed launches go to *failed.
    double time(allocator a, unsigned threads, unsigned n, unsigned s, unsigned block, unsigned long long* failed) {
        block = std::min(block, threads);
        launch(a, threads, block, n, s); // warm-up (first use of the heap, code loading)
        CUDA_CHECK(cudaDeviceSynchronize());
        CUDA_CHECK(cudaMemset(failures, 0, sizeof(unsigned)));
        std::vector<float> ms;
        for (int r = 0; r < repeats; ++r) {
            CUDA_CHECK(cudaEventRecord(start));
            launch(a, threads, block, n, s);
            CUDA_CHECK(cudaEventRecord(stop));
            CUDA_CHECK(cudaEventSynchronize(stop));
            float t = 0;
            CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
            ms.push_back(t);
            if (t > kSlowMs) break; // one slow sample is enough: the baseline is far off anyway
        }
        unsigned f = 0;
        CUDA_CHECK(cudaMemcpy(&f, failures, sizeof(unsigned), cudaMemcpyDeviceToHost));
        *failed = f;
        std::sort(ms.begin(), ms.end());
        return ms[ms.size() / 2];
    }
};

struct row {
    std::string figure;
    allocator alloc;
    unsigned threads, n, s, block;
    double ms;
    unsigned long long failed;
    held mem;
};

std::string json_string(const std::string& text) {
    std::string out = "\"";
    for (char c : text) {
        if (c == '"' || c == '\\') out += '\\';
        out += (c >= 0 && c < 0x20) ? ' ' : c;
    }
    return out + "\"";
}

std::string json_rows(const std::vector<row>& rows) {
    std::string out = "[\n";
    char buf[768], taken[32];
    for (size_t i = 0; i < rows.size(); ++i) {
        const row& r = rows[i];
        const double allocs = double(r.threads) * r.n;
        if (r.mem.backing_taken >= 0) snprintf(taken, sizeof taken, "%lld", r.mem.backing_taken);
        else snprintf(taken, sizeof taken, "null");
        snprintf(buf, sizeof buf,
                 "  {\"figure\": \"%s\", \"allocator\": \"%s\", \"threads\": %u, \"n\": %u, \"s\": %u, "
                 "\"block\": %u, \"ms\": %.6g, \"ns_per_alloc\": %.6g, \"failed\": %llu, "
                 "\"requested_bytes\": %llu, \"reserved_bytes\": %llu, \"backing_taken_bytes\": %s, "
                 "\"held_bytes\": %llu, \"held_measure\": \"%s\"}%s\n",
                 r.figure.c_str(), name_of(r.alloc), r.threads, r.n, r.s, r.block, r.ms, r.ms * 1e6 / allocs, r.failed,
                 r.mem.requested, r.mem.reserved, taken, r.mem.bytes, name_of(r.mem.measure),
                 i + 1 < rows.size() ? "," : "");
        out += buf;
    }
    return out + "]";
}

} // namespace

int main(int argc, char** argv) {
    const char* out_path = nullptr;
    const char* only = nullptr; // one section alone (profiling runs); `gpudyn bench` runs all
    bool quick = false;
    const char* usage = "usage: %s --out FILE.json [--quick] [--only target|fig4|fig5|fig6]\n";
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            fprintf(stderr, usage, argv[0]);
            return 2;
        }
    }
    if (!out_path ||
        (only && strcmp(only, "target") && strcmp(only, "fig4") && strcmp(only, "fig5") && strcmp(only, "fig6"))) {
        fprintf(stderr, usage, argv[0]);
        return 2;
    }
    auto section = [&](const char* name) { return only == nullptr || !strcmp(only, name); };
    const auto wall0 = std::chrono::steady_clock::now();

    bench b;
    b.repeats = quick ? 3 : 5;
    gpudyn_warp_heap_options_t o;
    GPUDYN_CHECK(gpudyn_warp_heap_options_init(&o));
    o.device_heap_bytes = kDeviceHeapBytes;
    // Default warp heap: the arena backing (options_init's default).
    o.arena_bytes = kArenaBytes;
    o.arena_header_slots = kArenaHeaderSlots;
    GPUDYN_CHECK(gpudyn_warp_heap_create(&b.h_with_sb, &o, nullptr));
    // The paper's configuration: CUDA malloc backing, one superblock at a time.
    o.backing = GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC;
    GPUDYN_CHECK(gpudyn_warp_heap_create(&b.h_on_malloc, &o, nullptr));
    o.superblock_bytes = 0; // every warp request straight to CUDA malloc
    GPUDYN_CHECK(gpudyn_warp_heap_create(&b.h_without_sb, &o, nullptr));
    // Page heap backing: pages that fit a header block.
    gpudyn_rw_heap_options_t ro;
    GPUDYN_CHECK(gpudyn_rw_heap_options_init(&ro));
    GPUDYN_CHECK(gpudyn_warp_heap_options_init(&o));
    ro.page_size =
        (gpudyn::warp_heap_detail::first_sb_offset(o.list_capacity) + o.superblock_bytes + kPageRounding - 1) /
        kPageRounding * kPageRounding;
    ro.page_count = kPageCount;
    gpudyn_rw_heap_t pages = nullptr;
    GPUDYN_CHECK(gpudyn_rw_heap_create(&pages, &ro, nullptr));
    o.backing = GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP;
    o.page_heap = pages;
    GPUDYN_CHECK(gpudyn_warp_heap_create(&b.h_on_pages, &o, nullptr));
    GPUDYN_CHECK(gpudyn_warp_heap_get_view(b.h_with_sb, &b.with_sb));
    GPUDYN_CHECK(gpudyn_warp_heap_get_view(b.h_without_sb, &b.without_sb));
    GPUDYN_CHECK(gpudyn_warp_heap_get_view(b.h_on_malloc, &b.on_malloc));
    GPUDYN_CHECK(gpudyn_warp_heap_get_view(b.h_on_pages, &b.on_pages));
    CUDA_CHECK(cudaMalloc(&b.failures, sizeof(unsigned)));
    CUDA_CHECK(cudaMalloc(&b.kept, kKeptSlots * sizeof(void*)));
    CUDA_CHECK(cudaEventCreate(&b.start));
    CUDA_CHECK(cudaEventCreate(&b.stop));

    // ---- the sweeps (defaults in one place) ----
    // Fig. 4, paper: S = 16, 32, 64, ..., 8160, 8176, 8192.  Here every power of
    // two and the midpoints between them (x 1.5), from 16 B past the 32 KiB
    // superblock to 64 KiB, so that each configuration shows where it stops
    // being flat: S * 32 > superblock (1 KiB) packs fewer lanes per superblock,
    // S > superblock (32 KiB) takes the large-block path; 8176 is the paper's
    // last point below 8 KiB.  --quick: the powers of two only.
    std::vector<unsigned> fig4_s;
    for (unsigned s = 16; s <= 65536; s *= 2) {
        fig4_s.push_back(s);
        if (!quick && s >= 32 && s < 65536) fig4_s.push_back(s + s / 2);
        if (!quick && s == 4096) fig4_s.push_back(8176);
    }
    std::sort(fig4_s.begin(), fig4_s.end());
    std::vector<unsigned> fig5_x; // paper: X = 1, 2, 4, ..., 65536
    for (unsigned x = 1; x <= 65536; x *= quick ? 16 : 4) fig5_x.push_back(x);
    // Paper: N, S in {16, ..., 512}; a subset of both keeps the run short.
    const std::vector<unsigned> fig5_n = quick ? std::vector<unsigned>{16} : std::vector<unsigned>{16, 64, 512};
    const std::vector<unsigned> fig5_s = quick ? std::vector<unsigned>{16} : std::vector<unsigned>{16, 64, 512};
    std::vector<unsigned> fig6_blocks; // paper: 1..512 blocks of 1024 threads
    for (unsigned g = 1; g <= 512; g *= quick ? 8 : 2) fig6_blocks.push_back(g);
    const std::vector<unsigned> fig6_n = {1, 16, 128};
    // Every allocator runs the target and Fig. 4; Fig. 5 leaves out the page
    // heap (its pool is sized for Fig. 4), Fig. 6 compares the default backing
    // with the paper's (CUDA malloc itself would add ~10 s past 1M allocations).
    const allocator all[] = {allocator::warp_heap, allocator::warp_heap_cuda_malloc, allocator::warp_heap_no_sb,
                             allocator::warp_heap_page_heap, allocator::cuda_malloc};
    const allocator fig5_all[] = {allocator::warp_heap, allocator::warp_heap_cuda_malloc, allocator::warp_heap_no_sb,
                                  allocator::cuda_malloc};
    const allocator fig6_all[] = {allocator::warp_heap, allocator::warp_heap_cuda_malloc};
    constexpr size_t kAll = sizeof(all) / sizeof(all[0]), kFig5 = sizeof(fig5_all) / sizeof(fig5_all[0]),
                     kFig6 = sizeof(fig6_all) / sizeof(fig6_all[0]);

    const size_t total = (section("target") ? kAll : 0) + (section("fig4") ? fig4_s.size() * kAll : 0) +
                         (section("fig5") ? fig5_x.size() * fig5_n.size() * fig5_s.size() * kFig5 : 0) +
                         (section("fig6") ? fig6_blocks.size() * fig6_n.size() * kFig6 : 0);
    size_t done = 0;
    std::vector<row> rows;
    auto progress = [&](const char* label) { fprintf(stderr, "progress %zu %zu %s\n", ++done, total, label); };
    // One timed point and its bytes held.
    auto point = [&](const char* figure, allocator a, unsigned x, unsigned n, unsigned s, unsigned block) {
        unsigned long long failed = 0;
        const double ms = b.time(a, x, n, s, block, &failed);
        char where[96];
        snprintf(where, sizeof where, "%s X=%u N=%u S=%u", figure, x, n, s);
        if (failed != 0) // the run is sized so that every allocation is served
            b.problems.push_back(std::string(where) + " " + name_of(a) + ": " + std::to_string(failed) +
                                 " allocations failed in the timed launches");
        const held mem = b.measure_held(a, x, n, s, block, where);
        rows.push_back({figure, a, x, n, s, std::min(block, x), ms, failed, mem});
        return ms;
    };

    // Target configuration: 65,536 threads x 16 allocations x 16 B (blocks of 256).
    if (section("target"))
        for (allocator a : all) {
            point("target", a, 65536, 16, 16, 256);
            progress("target");
        }
    // Fig. 4: 64 threads x 16 allocations x S.
    if (section("fig4"))
        for (unsigned s : fig4_s)
            for (allocator a : all) {
                point("fig4", a, 64, 16, s, 64);
                progress("fig4");
            }
    // Fig. 5: threads x N x S.  The baselines are capped (see kMaxBaselineAllocs, kSlowMs).
    if (section("fig5"))
        for (unsigned n : fig5_n)
            for (unsigned s : fig5_s)
                for (allocator a : fig5_all) {
                    bool slow = false;
                    for (unsigned x : fig5_x) {
                        const bool skip =
                            (unsigned long long)x * n * s > kMaxBytesPerLaunch ||
                            (a != allocator::warp_heap && (slow || (unsigned long long)x * n > kMaxBaselineAllocs));
                        if (!skip) slow = point("fig5", a, x, n, s, 256) > kSlowMs;
                        progress("fig5");
                    }
                }
    // Fig. 6: scalability of the warp heap, blocks of 1024 threads, 16 B.
    if (section("fig6"))
        for (allocator a : fig6_all)
            for (unsigned n : fig6_n)
                for (unsigned g : fig6_blocks) {
                    point("fig6", a, g * kMaxBlock, n, 16, kMaxBlock);
                    progress("fig6");
                }

    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    FILE* f = fopen(out_path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", out_path);
        return 2;
    }
    std::string failures = "[";
    for (size_t i = 0; i < b.problems.size(); ++i) failures += (i ? ", " : "") + json_string(b.problems[i]);
    failures += "]";
    fprintf(f,
            "{\n \"superblock_bytes\": %llu,\n \"min_block_bytes\": %u,\n \"list_capacity\": %u,\n"
            " \"arena_bytes\": %llu,\n \"arena_header_slots\": %llu,\n \"max_superblock_run\": %u,\n"
            " \"page_size\": %llu,\n \"page_count\": %llu,\n"
            " \"device_heap_bytes\": %llu,\n \"repeats\": %d,\n \"baseline_cap_allocs\": %llu,\n"
            " \"baseline_slow_ms\": %g,\n \"quick\": %s,\n \"only\": %s,\n \"verified\": %s,\n \"failures\": %s,\n"
            " \"wall_seconds\": %.2f,\n \"rows\": %s\n}\n",
            (unsigned long long)b.with_sb.superblock_bytes, b.with_sb.min_block_bytes, b.with_sb.list_capacity,
            kArenaBytes, kArenaHeaderSlots, b.with_sb.max_superblock_run, (unsigned long long)ro.page_size, kPageCount,
            (unsigned long long)kDeviceHeapBytes, b.repeats, kMaxBaselineAllocs, kSlowMs, quick ? "true" : "false",
            only ? json_string(only).c_str() : "null", b.problems.empty() ? "true" : "false", failures.c_str(), wall_s,
            json_rows(rows).c_str());
    fclose(f);
    GPUDYN_CHECK(gpudyn_warp_heap_destroy(b.h_with_sb));
    GPUDYN_CHECK(gpudyn_warp_heap_destroy(b.h_without_sb));
    GPUDYN_CHECK(gpudyn_warp_heap_destroy(b.h_on_malloc));
    GPUDYN_CHECK(gpudyn_warp_heap_destroy(b.h_on_pages));
    GPUDYN_CHECK(gpudyn_rw_heap_destroy(pages));
    CUDA_CHECK(cudaFree(b.failures));
    CUDA_CHECK(cudaFree(b.kept));
    return 0;
}
