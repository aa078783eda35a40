// gpudyn_bench_warp_heap: the FDGMalloc paper's experiments (Widmer et al.
// 2013, Figs. 4-6) for the warp heap on its default arena backing, against
// CUDA device malloc, the warp heap on CUDA malloc (the paper's configuration),
// the warp heap without superblocks (every warp request straight to CUDA
// malloc) and the warp heap on the random-walk page heap, all in the same run.
//
//   gpudyn_bench_warp_heap --out FILE.json [--quick]
//
// Each configuration is one kernel: X threads each make N allocations of S
// bytes, then free everything (warp heap: end(); CUDA malloc: free of each
// pointer), as in the paper's sec. 5.1.  Timed with CUDA events after a
// warm-up launch; the median of the repeats is reported.
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
// Page heap backing: pages that hold a warp's header block (header, list and
// first superblock), rounded to 4 KiB; enough of them for 65,536 threads of
// Fig. 4 and the target (2048 warps, a few superblocks each).
constexpr unsigned long long kPageRounding = 4096;
constexpr unsigned long long kPageCount = 1ull << 16;

#define CUDA_CHECK(call)                                                                          \
    do {                                                                                          \
        cudaError_t e_ = (call);                                                                  \
        if (e_ != cudaSuccess) {                                                                  \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
            std::exit(2);                                                                         \
        }                                                                                         \
    } while (0)
#define GPUDYN_CHECK(call)                                                                        \
    do {                                                                                          \
        gpudyn_status_t s_ = (call);                                                              \
        if (s_ != GPUDYN_SUCCESS) {                                                               \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, gpudyn_last_error_message()); \
            std::exit(2);                                                                         \
        }                                                                                         \
    } while (0)

__global__ void __launch_bounds__(kMaxBlock) warp_heap_kernel(gpudyn_warp_heap_view_t view, unsigned n, unsigned s, unsigned* failures) {
    gpudyn::warp_heap_ref ref{view};
    const unsigned mask = gpudyn::detail::block_warp_mask();  // partial last warp when blockDim.x % 32 != 0
    gpudyn::warp_heap heap = ref.start(mask);
    unsigned failed = heap.valid() ? 0u : n;
#pragma unroll 1
    for (unsigned i = 0; i < n; ++i) failed += heap.alloc(mask, s) == nullptr;
    if (heap.valid()) heap.end();
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

enum class allocator { warp_heap, warp_heap_no_sb, cuda_malloc, warp_heap_cuda_malloc, warp_heap_page_heap };
const char* name_of(allocator a) {
    switch (a) {
        case allocator::warp_heap: return "warp_heap";
        case allocator::warp_heap_no_sb: return "warp_heap_no_superblocks";
        case allocator::warp_heap_cuda_malloc: return "warp_heap_cuda_malloc";
        case allocator::warp_heap_page_heap: return "warp_heap_page_heap";
        default: return "cuda_malloc";
    }
}

struct bench {
    gpudyn_warp_heap_view_t with_sb{}, without_sb{}, on_malloc{}, on_pages{};
    unsigned* failures = nullptr;
    int repeats = 5;
    cudaEvent_t start{}, stop{};

    void launch(allocator a, unsigned threads, unsigned block, unsigned n, unsigned s) {
        const unsigned grid = (threads + block - 1) / block;
        if (a == allocator::cuda_malloc) cuda_malloc_kernel<<<grid, block>>>(n, s, failures);
        else {
            const gpudyn_warp_heap_view_t& v = a == allocator::warp_heap ? with_sb
                                               : a == allocator::warp_heap_no_sb ? without_sb
                                               : a == allocator::warp_heap_cuda_malloc ? on_malloc : on_pages;
            warp_heap_kernel<<<grid, block>>>(v, n, s, failures);
        }
        CUDA_CHECK(cudaGetLastError());
    }

    // Median kernel time in ms over `repeats` launches after one warm-up; the
    // failed allocations of the timed launches go to *failed.
    double time(allocator a, unsigned threads, unsigned n, unsigned s, unsigned block, unsigned long long* failed) {
        block = std::min(block, threads);
        launch(a, threads, block, n, s);  // warm-up (first use of the heap, code loading)
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
            if (t > kSlowMs) break;  // one slow sample is enough: the baseline is far off anyway
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
};

std::string json_rows(const std::vector<row>& rows) {
    std::string out = "[\n";
    char buf[512];
    for (size_t i = 0; i < rows.size(); ++i) {
        const row& r = rows[i];
        const double allocs = double(r.threads) * r.n;
        snprintf(buf, sizeof buf,
                 "  {\"figure\": \"%s\", \"allocator\": \"%s\", \"threads\": %u, \"n\": %u, \"s\": %u, "
                 "\"block\": %u, \"ms\": %.6g, \"ns_per_alloc\": %.6g, \"failed\": %llu}%s\n",
                 r.figure.c_str(), name_of(r.alloc), r.threads, r.n, r.s, r.block, r.ms, r.ms * 1e6 / allocs,
                 r.failed, i + 1 < rows.size() ? "," : "");
        out += buf;
    }
    return out + "]";
}

}  // namespace

int main(int argc, char** argv) {
    const char* out_path = nullptr;
    bool quick = false;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out_path = argv[++i];
        else if (!strcmp(argv[i], "--quick")) quick = true;
        else {
            fprintf(stderr, "usage: %s --out FILE.json [--quick]\n", argv[0]);
            return 2;
        }
    }
    if (!out_path) {
        fprintf(stderr, "usage: %s --out FILE.json [--quick]\n", argv[0]);
        return 2;
    }
    const auto wall0 = std::chrono::steady_clock::now();

    bench b;
    b.repeats = quick ? 3 : 5;
    gpudyn_warp_heap_options_t o;
    GPUDYN_CHECK(gpudyn_warp_heap_options_init(&o));
    o.device_heap_bytes = kDeviceHeapBytes;
    gpudyn_warp_heap_t with_sb = nullptr, without_sb = nullptr, on_malloc = nullptr, on_pages = nullptr;
    // Default warp heap: the arena backing (options_init's default).
    o.arena_bytes = kArenaBytes;
    o.arena_header_slots = kArenaHeaderSlots;
    GPUDYN_CHECK(gpudyn_warp_heap_create(&with_sb, &o, nullptr));
    // The paper's configuration: CUDA malloc backing, one superblock at a time.
    o.backing = GPUDYN_WARP_HEAP_BACKING_CUDA_MALLOC;
    GPUDYN_CHECK(gpudyn_warp_heap_create(&on_malloc, &o, nullptr));
    o.superblock_bytes = 0;  // every warp request straight to CUDA malloc
    GPUDYN_CHECK(gpudyn_warp_heap_create(&without_sb, &o, nullptr));
    // Page heap backing: pages that fit a header block.
    gpudyn_rw_heap_options_t ro;
    GPUDYN_CHECK(gpudyn_rw_heap_options_init(&ro));
    GPUDYN_CHECK(gpudyn_warp_heap_options_init(&o));
    ro.page_size = (gpudyn::warp_heap_detail::first_sb_offset(o.list_capacity) + o.superblock_bytes + kPageRounding - 1) /
                   kPageRounding * kPageRounding;
    ro.page_count = kPageCount;
    gpudyn_rw_heap_t pages = nullptr;
    GPUDYN_CHECK(gpudyn_rw_heap_create(&pages, &ro, nullptr));
    o.backing = GPUDYN_WARP_HEAP_BACKING_PAGE_HEAP;
    o.page_heap = pages;
    GPUDYN_CHECK(gpudyn_warp_heap_create(&on_pages, &o, nullptr));
    GPUDYN_CHECK(gpudyn_warp_heap_get_view(with_sb, &b.with_sb));
    GPUDYN_CHECK(gpudyn_warp_heap_get_view(without_sb, &b.without_sb));
    GPUDYN_CHECK(gpudyn_warp_heap_get_view(on_malloc, &b.on_malloc));
    GPUDYN_CHECK(gpudyn_warp_heap_get_view(on_pages, &b.on_pages));
    CUDA_CHECK(cudaMalloc(&b.failures, sizeof(unsigned)));
    CUDA_CHECK(cudaEventCreate(&b.start));
    CUDA_CHECK(cudaEventCreate(&b.stop));

    // ---- the sweeps (defaults in one place) ----
    std::vector<unsigned> fig4_s;  // paper: S = 16, 32, ..., 8192
    for (unsigned s = 16; s <= 8192; s *= 2) fig4_s.push_back(s);
    std::vector<unsigned> fig5_x;  // paper: X = 1, 2, 4, ..., 65536
    for (unsigned x = 1; x <= 65536; x *= quick ? 16 : 4) fig5_x.push_back(x);
    // Paper: N, S in {16, ..., 512}; a subset of both keeps the run short.
    const std::vector<unsigned> fig5_n = quick ? std::vector<unsigned>{16} : std::vector<unsigned>{16, 64, 512};
    const std::vector<unsigned> fig5_s = quick ? std::vector<unsigned>{16} : std::vector<unsigned>{16, 64, 512};
    std::vector<unsigned> fig6_blocks;  // paper: 1..512 blocks of 1024 threads
    for (unsigned g = 1; g <= 512; g *= quick ? 8 : 2) fig6_blocks.push_back(g);
    const std::vector<unsigned> fig6_n = {1, 16, 128};
    // Every allocator runs the target and Fig. 4; Fig. 5 leaves out the page
    // heap (its pool is sized for Fig. 4), Fig. 6 compares the two backings.
    const allocator all[] = {allocator::warp_heap, allocator::warp_heap_cuda_malloc, allocator::warp_heap_no_sb,
                             allocator::warp_heap_page_heap, allocator::cuda_malloc};
    const allocator fig5_all[] = {allocator::warp_heap, allocator::warp_heap_cuda_malloc, allocator::warp_heap_no_sb,
                                  allocator::cuda_malloc};
    const allocator fig6_all[] = {allocator::warp_heap, allocator::warp_heap_cuda_malloc};
    constexpr size_t kAll = sizeof(all) / sizeof(all[0]), kFig5 = sizeof(fig5_all) / sizeof(fig5_all[0]),
                     kFig6 = sizeof(fig6_all) / sizeof(fig6_all[0]);

    const size_t total = kAll /*target*/ + fig4_s.size() * kAll + fig5_x.size() * fig5_n.size() * fig5_s.size() * kFig5 +
                         fig6_blocks.size() * fig6_n.size() * kFig6;
    size_t done = 0;
    std::vector<row> rows;
    auto progress = [&](const char* label) { fprintf(stderr, "progress %zu %zu %s\n", ++done, total, label); };

    // Target configuration: 65,536 threads x 16 allocations x 16 B (blocks of 256).
    for (allocator a : all) {
        unsigned long long failed = 0;
        double ms = b.time(a, 65536, 16, 16, 256, &failed);
        rows.push_back({"target", a, 65536, 16, 16, 256, ms, failed});
        progress("target");
    }
    // Fig. 4: 64 threads x 16 allocations x S.
    for (unsigned s : fig4_s)
        for (allocator a : all) {
            unsigned long long failed = 0;
            double ms = b.time(a, 64, 16, s, 64, &failed);
            rows.push_back({"fig4", a, 64, 16, s, 64, ms, failed});
            progress("fig4");
        }
    // Fig. 5: threads x N x S.  The baseline is capped (see kMaxBaselineAllocs, kSlowMs).
    for (unsigned n : fig5_n)
        for (unsigned s : fig5_s)
            for (allocator a : fig5_all) {
                bool slow = false;
                for (unsigned x : fig5_x) {
                    const bool skip = (unsigned long long)x * n * s > kMaxBytesPerLaunch ||
                                      (a != allocator::warp_heap &&
                                       (slow || (unsigned long long)x * n > kMaxBaselineAllocs));
                    if (!skip) {
                        unsigned long long failed = 0;
                        double ms = b.time(a, x, n, s, 256, &failed);
                        rows.push_back({"fig5", a, x, n, s, 256, ms, failed});
                        slow = ms > kSlowMs;
                    }
                    progress("fig5");
                }
            }
    // Fig. 6: scalability of the warp heap, blocks of 1024 threads, 16 B.
    for (allocator a : fig6_all)
        for (unsigned n : fig6_n)
            for (unsigned g : fig6_blocks) {
                unsigned long long failed = 0;
                double ms = b.time(a, g * kMaxBlock, n, 16, kMaxBlock, &failed);
                rows.push_back({"fig6", a, g * kMaxBlock, n, 16, kMaxBlock, ms, failed});
                progress("fig6");
            }

    const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    FILE* f = fopen(out_path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", out_path);
        return 2;
    }
    fprintf(f,
            "{\n \"superblock_bytes\": %llu,\n \"min_block_bytes\": %u,\n \"list_capacity\": %u,\n"
            " \"arena_bytes\": %llu,\n \"arena_header_slots\": %llu,\n \"max_superblock_run\": %u,\n"
            " \"page_size\": %llu,\n \"page_count\": %llu,\n"
            " \"device_heap_bytes\": %llu,\n \"repeats\": %d,\n \"baseline_cap_allocs\": %llu,\n"
            " \"baseline_slow_ms\": %g,\n \"wall_seconds\": %.2f,\n \"rows\": %s\n}\n",
            (unsigned long long)b.with_sb.superblock_bytes, b.with_sb.min_block_bytes, b.with_sb.list_capacity,
            kArenaBytes, kArenaHeaderSlots, b.with_sb.max_superblock_run, (unsigned long long)ro.page_size, kPageCount,
            (unsigned long long)kDeviceHeapBytes, b.repeats, kMaxBaselineAllocs, kSlowMs, wall_s,
            json_rows(rows).c_str());
    fclose(f);
    GPUDYN_CHECK(gpudyn_warp_heap_destroy(with_sb));
    GPUDYN_CHECK(gpudyn_warp_heap_destroy(without_sb));
    GPUDYN_CHECK(gpudyn_warp_heap_destroy(on_malloc));
    GPUDYN_CHECK(gpudyn_warp_heap_destroy(on_pages));
    GPUDYN_CHECK(gpudyn_rw_heap_destroy(pages));
    CUDA_CHECK(cudaFree(b.failures));
    return 0;
}
