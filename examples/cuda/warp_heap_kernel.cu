// gpudyn from CUDA C++: a kernel allocates inside itself through a warp heap
// (include/gpudyn/warp_heap.cuh), the host owns the heap through the C ABI.
// Each thread allocates (lane + 1) ints, fills them with its thread index and
// writes their sum; the host checks every sum.  Without a GPU it prints why on
// stderr and exits 77 (the test harnesses' "skipped").  Build: nvcc -arch=sm_75 warp_heap_kernel.cu $(pkg-config --cflags --libs gpudyn)
#include <gpudyn/gpudyn.h>
#include <gpudyn/warp_heap.cuh>

#include <cstdio>
#include <vector>

namespace {
constexpr int kThreads = 256; // one block of 8 warps: small enough for any GPU
constexpr int kBlocks = 4;

__global__ void fill_and_sum(gpudyn_warp_heap_view_t view, unsigned long long* sums) {
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x % 32;
    gpudyn::warp_heap_ref heap{view};
    gpudyn::warp_heap wh = heap.start(__activemask());
    int* block = static_cast<int*>(wh.alloc(sizeof(int) * (lane + 1)));
    unsigned long long sum = ~0ull; // marks a failed allocation
    if (block != nullptr) {
        sum = 0;
        for (int i = 0; i <= lane; ++i) block[i] = tid;
        for (int i = 0; i <= lane; ++i) sum += block[i];
    }
    sums[tid] = sum;
    wh.end();
}

int fail(const char* what, gpudyn_status_t s) {
    std::printf("%s: %s: %s\n", what, gpudyn_status_string(s), gpudyn_last_error_message());
    return 1;
}
} // namespace

int main() {
    int32_t devices = 0;
    gpudyn_status_t s = gpudyn_get_device_count(&devices);
    if (s == GPUDYN_ERROR_NO_DEVICE) {
        std::fprintf(stderr, "example_warp_heap_kernel: no CUDA device (%s); skipped\n", gpudyn_last_error_message());
        return 77;
    }
    if (s != GPUDYN_SUCCESS) return fail("gpudyn_get_device_count", s);

    gpudyn_warp_heap_options_t options;
    if ((s = gpudyn_warp_heap_options_init(&options)) != GPUDYN_SUCCESS) return fail("options_init", s);
    gpudyn_warp_heap_t heap = nullptr;
    if ((s = gpudyn_warp_heap_create(&heap, &options, nullptr)) != GPUDYN_SUCCESS) return fail("create", s);
    gpudyn_warp_heap_view_t view;
    if ((s = gpudyn_warp_heap_get_view(heap, &view)) != GPUDYN_SUCCESS) return fail("get_view", s);

    const int n = kThreads * kBlocks;
    void* d_sums = nullptr;
    if ((s = gpudyn_device_alloc(&d_sums, sizeof(unsigned long long) * n, nullptr)) != GPUDYN_SUCCESS)
        return fail("device_alloc", s);
    fill_and_sum<<<kBlocks, kThreads>>>(view, static_cast<unsigned long long*>(d_sums));
    if (cudaGetLastError() != cudaSuccess) {
        std::printf("kernel launch failed\n");
        return 1;
    }
    std::vector<unsigned long long> sums(n);
    if ((s = gpudyn_memcpy(sums.data(), d_sums, sizeof(unsigned long long) * n, GPUDYN_MEMCPY_DEVICE_TO_HOST,
                           nullptr)) != GPUDYN_SUCCESS ||
        (s = gpudyn_stream_synchronize(nullptr)) != GPUDYN_SUCCESS)
        return fail("memcpy", s);
    int wrong = 0;
    for (int t = 0; t < n; ++t)
        if (sums[t] != static_cast<unsigned long long>(t) * (t % 32 + 1)) ++wrong;
    gpudyn_device_free(d_sums, nullptr);
    gpudyn_warp_heap_destroy(heap);
    std::printf("%d threads allocated in-kernel, %d wrong sums\n", n, wrong);
    return wrong == 0 ? 0 : 1;
}
