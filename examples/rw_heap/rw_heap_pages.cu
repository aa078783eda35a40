// Example: a CUDA kernel that takes pages from a gpudyn random-walk page heap
// through its view, writes into them, and gives half of them back; then RW_malloc
// from a kernel.  The host checks every result and prints what it verified.
//
//   example_rw_heap_pages        (exits 0 when all checks pass, 77 without a GPU)
#include <gpudyn/experimental.h> // gpudyn_exp_rw_heap_occupy: the paper's pre-filled pool
#include <gpudyn/gpudyn.h>
#include <gpudyn/rw_heap.cuh>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

// Pool of 2^20 pages of 64 bytes (64 MiB), 1/4 of it occupied at random first.
constexpr unsigned kPages = 1u << 20;
constexpr unsigned kPageSize = 64;
constexpr double kOccupied = 0.25;
constexpr unsigned kThreads = 1u << 19; // one page per thread
constexpr unsigned kBlock = 256;
constexpr unsigned kMallocThreads = 1u << 16;
constexpr unsigned long long kMallocBytes = 200; // 4 pages of 64 B, not a multiple of the page size

#define GD(call)                                                                    \
    do {                                                                            \
        if ((call) != GPUDYN_SUCCESS) {                                             \
            fprintf(stderr, "%s failed: %s\n", #call, gpudyn_last_error_message()); \
            return 1;                                                               \
        }                                                                           \
    } while (0)
#define CU(call)                                                               \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess) {                                               \
            fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_)); \
            return 1;                                                          \
        }                                                                      \
    } while (0)
#define EXPECT(cond)                                      \
    do {                                                  \
        if (!(cond)) {                                    \
            fprintf(stderr, "check failed: %s\n", #cond); \
            return 1;                                     \
        }                                                 \
    } while (0)

// Every thread takes a page with CoRW (a warp collective: the lanes in `mask`,
// here the live ones, call together) and writes its id and the page id into it.
__global__ void take_pages(gpudyn_rw_heap_view_t view, unsigned n, unsigned long long seed, unsigned* pages) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned mask = __ballot_sync(0xffffffffu, tid < n);
    if (tid >= n) return;
    gpudyn::rw_heap_ref heap{view};
    gpudyn::detail::counter_rng rng(seed, tid);
    const unsigned page = heap.get_page_corw(mask, rng);
    if (page != gpudyn::kRwInvalidPage) {
        unsigned* p = static_cast<unsigned*>(heap.page_address(page));
        p[0] = tid;
        p[1] = page;
    }
    pages[tid] = page;
}

// Even threads give their page back (FREEPAGE; any thread, no collective).
__global__ void give_back_even(gpudyn_rw_heap_view_t view, unsigned n, const unsigned* pages, unsigned* bad) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n || tid % 2) return;
    gpudyn::rw_heap_ref heap{view};
    if (!heap.free_page(pages[tid])) atomicAdd(bad, 1u);
}

// RW_malloc (a warp collective with per-warp shared storage), then a write of
// the whole range so overlapping ranges would show up as wrong contents.
__global__ void malloc_and_fill(gpudyn_rw_heap_view_t view, unsigned n, unsigned long long bytes,
                                unsigned long long* out) {
    __shared__ gpudyn::rw_malloc_storage storage[kBlock / 32];
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned mask = __ballot_sync(0xffffffffu, tid < n);
    if (tid >= n) return;
    gpudyn::rw_heap_ref heap{view};
    gpudyn::detail::counter_rng rng(7, tid);
    unsigned char* p = static_cast<unsigned char*>(heap.malloc(mask, bytes, storage[threadIdx.x / 32], rng));
    if (p)
        for (unsigned long long i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(tid);
    out[tid] = reinterpret_cast<unsigned long long>(p);
}

// Each thread reads back what was written into its page (or its RW_malloc
// range): only written bytes are read, so the check itself is clean under
// compute-sanitizer initcheck, and no pool-sized copy reaches the host.
__global__ void read_pages(gpudyn_rw_heap_view_t view, unsigned n, const unsigned* pages, unsigned* words) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n || pages[tid] >= kPages) return;
    const unsigned* p = static_cast<const unsigned*>(gpudyn::rw_heap_ref{view}.page_address(pages[tid]));
    words[2 * tid] = p[0];
    words[2 * tid + 1] = p[1];
}

__global__ void count_wrong_bytes(unsigned n, unsigned long long bytes, const unsigned long long* ptrs,
                                  unsigned* wrong) {
    const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
    if (tid >= n || ptrs[tid] == 0) return;
    const unsigned char* p = reinterpret_cast<const unsigned char*>(ptrs[tid]);
    unsigned bad = 0;
    for (unsigned long long i = 0; i < bytes; ++i) bad += p[i] != static_cast<unsigned char>(tid);
    if (bad) atomicAdd(wrong, bad);
}

int main() {
    int32_t devices = 0;
    if (gpudyn_get_device_count(&devices) == GPUDYN_ERROR_NO_DEVICE) {
        // 77: "skipped" to meson, ctest (SKIP_RETURN_CODE) and the pkg-config Makefile.
        fprintf(stderr, "example_rw_heap_pages: no CUDA device (%s); skipped\n", gpudyn_last_error_message());
        return 77;
    }
    gpudyn_rw_heap_options_t o;
    GD(gpudyn_rw_heap_options_init(&o));
    o.page_count = kPages;
    o.page_size = kPageSize;
    gpudyn_rw_heap_t heap;
    GD(gpudyn_rw_heap_create(&heap, &o, nullptr));
    GD(gpudyn_exp_rw_heap_occupy(heap, kOccupied, 1, nullptr));
    uint64_t free0 = 0;
    GD(gpudyn_rw_heap_free_page_count(heap, &free0, nullptr));
    gpudyn_rw_heap_view_t view;
    GD(gpudyn_rw_heap_get_view(heap, &view));

    // 1. Pages from a kernel.
    unsigned *d_pages, *d_bad;
    CU(cudaMalloc(&d_pages, kThreads * sizeof(unsigned)));
    CU(cudaMalloc(&d_bad, sizeof(unsigned)));
    CU(cudaMemset(d_bad, 0, sizeof(unsigned)));
    take_pages<<<(kThreads + kBlock - 1) / kBlock, kBlock>>>(view, kThreads, 42, d_pages);
    CU(cudaGetLastError());
    std::vector<unsigned> pages(kThreads);
    CU(cudaMemcpy(pages.data(), d_pages, kThreads * sizeof(unsigned), cudaMemcpyDeviceToHost));
    unsigned* d_words;
    CU(cudaMalloc(&d_words, 2 * size_t(kThreads) * sizeof(unsigned)));
    read_pages<<<(kThreads + kBlock - 1) / kBlock, kBlock>>>(view, kThreads, d_pages, d_words);
    std::vector<unsigned> words(2 * size_t(kThreads));
    CU(cudaMemcpy(words.data(), d_words, words.size() * sizeof(unsigned), cudaMemcpyDeviceToHost));
    for (unsigned t = 0; t < kThreads; ++t) {
        EXPECT(pages[t] < kPages);
        EXPECT(words[2 * t] == t && words[2 * t + 1] == pages[t]); // the thread's own writes: no page shared
    }
    std::vector<unsigned> sorted = pages;
    std::sort(sorted.begin(), sorted.end());
    EXPECT(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
    uint64_t free1 = 0;
    GD(gpudyn_rw_heap_free_page_count(heap, &free1, nullptr));
    EXPECT(free1 == free0 - kThreads);
    printf("CoRW: %u threads got %u distinct pages, each holding its thread's writes; free %llu -> %llu\n", kThreads,
           kThreads, (unsigned long long)free0, (unsigned long long)free1);

    // 2. Half of them back from a kernel.
    give_back_even<<<(kThreads + kBlock - 1) / kBlock, kBlock>>>(view, kThreads, d_pages, d_bad);
    CU(cudaGetLastError());
    unsigned bad = 0;
    CU(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost));
    uint64_t free2 = 0;
    GD(gpudyn_rw_heap_free_page_count(heap, &free2, nullptr));
    EXPECT(bad == 0 && free2 == free1 + kThreads / 2);
    printf("free_page: %u pages back from a kernel, free count %llu (exact)\n", kThreads / 2,
           (unsigned long long)free2);

    // 3. RW_malloc from a kernel on an empty heap.
    GD(gpudyn_rw_heap_reset(heap, nullptr));
    unsigned long long* d_ptrs;
    CU(cudaMalloc(&d_ptrs, kMallocThreads * sizeof(unsigned long long)));
    malloc_and_fill<<<(kMallocThreads + kBlock - 1) / kBlock, kBlock>>>(view, kMallocThreads, kMallocBytes, d_ptrs);
    CU(cudaGetLastError());
    std::vector<unsigned long long> ptrs(kMallocThreads);
    CU(cudaMemcpy(ptrs.data(), d_ptrs, kMallocThreads * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    const unsigned long long pool_end = view.pool + (unsigned long long)kPages * kPageSize;
    for (unsigned t = 0; t < kMallocThreads; ++t) {
        EXPECT(ptrs[t] != 0 && ptrs[t] % 16 == 0);
        EXPECT(ptrs[t] >= view.pool && ptrs[t] + kMallocBytes <= pool_end);
    }
    CU(cudaMemset(d_bad, 0, sizeof(unsigned)));
    count_wrong_bytes<<<(kMallocThreads + kBlock - 1) / kBlock, kBlock>>>(kMallocThreads, kMallocBytes, d_ptrs, d_bad);
    unsigned wrong = 1;
    CU(cudaMemcpy(&wrong, d_bad, sizeof wrong, cudaMemcpyDeviceToHost));
    EXPECT(wrong == 0); // each range holds its own thread's bytes
    std::vector<unsigned long long> sp = ptrs;
    std::sort(sp.begin(), sp.end());
    for (unsigned i = 1; i < kMallocThreads; ++i) EXPECT(sp[i - 1] + kMallocBytes <= sp[i]); // disjoint
    GD(gpudyn_rw_heap_free(heap, reinterpret_cast<const uint64_t*>(d_ptrs), kMallocThreads, nullptr));
    uint64_t free3 = 0;
    GD(gpudyn_rw_heap_free_page_count(heap, &free3, nullptr));
    EXPECT(free3 == kPages);
    printf("RW_malloc: %u x %llu B, disjoint, 16-byte aligned, contents intact; all freed, %llu pages free\n",
           kMallocThreads, kMallocBytes, (unsigned long long)free3);

    cudaFree(d_pages);
    cudaFree(d_words);
    cudaFree(d_bad);
    cudaFree(d_ptrs);
    GD(gpudyn_rw_heap_destroy(heap));
    printf("example_rw_heap_pages: OK\n");
    return 0;
}
