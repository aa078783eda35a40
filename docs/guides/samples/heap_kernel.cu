// A kernel that mallocs a row of a different length in every thread from a gpudyn Heap,
// fills it, and a second kernel that checks and frees the rows.  Exits 0 when every row
// is right, 1 on an error (printing why; GPUDYN_ERROR_NO_DEVICE without a GPU).
#include <gpudyn/gpudyn.h>
#include <gpudyn/heap.cuh>

#include <cstdio>
#include <cstdlib>
#include <vector>

// [make_rows]
__global__ void make_rows(gpudyn_heap_view_t view, const unsigned* len, float** rows, unsigned n) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return; // any thread, any branch
    const gpudyn::heap_ref heap{view};
    float* row = static_cast<float*>(heap.malloc(len[i] * sizeof(float))); // nullptr when full (counted)
    if (row)
        for (unsigned k = 0; k < len[i]; ++k) row[k] = float(k);
    rows[i] = row; // a later kernel may heap.free(rows[i])
}
// [make_rows]

__global__ void check_and_free(gpudyn_heap_view_t view, const unsigned* len, float** rows, unsigned n,
                               unsigned* wrong) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const gpudyn::heap_ref heap{view};
    bool ok = rows[i] != nullptr;
    for (unsigned k = 0; ok && k < len[i]; ++k) ok = rows[i][k] == float(k);
    if (!ok || !heap.free(rows[i])) atomicAdd(wrong, 1u);
}

static void check(gpudyn_status_t s) {
    if (s != GPUDYN_SUCCESS) {
        std::printf("%s: %s\n", gpudyn_status_string(s), gpudyn_last_error_message());
        std::exit(1);
    }
}

int main() {
    constexpr unsigned kRows = 1u << 16, kBlock = 256; // 64K threads, a block size any GPU takes
    gpudyn_heap_options_t options;
    check(gpudyn_heap_options_init(&options));
    gpudyn_heap_t heap;
    check(gpudyn_heap_create(&heap, &options, nullptr));
    gpudyn_heap_view_t view;
    check(gpudyn_heap_get_view(heap, &view));

    std::vector<unsigned> len(kRows);
    for (unsigned i = 0; i < kRows; ++i) len[i] = 1 + i % 1000; // 4 B to 4000 B a row
    void *d_len, *d_rows, *d_wrong;
    check(gpudyn_device_alloc(&d_len, kRows * sizeof(unsigned), nullptr));
    check(gpudyn_device_alloc(&d_rows, kRows * sizeof(float*), nullptr));
    check(gpudyn_device_alloc(&d_wrong, sizeof(unsigned), nullptr));
    check(gpudyn_memcpy(d_len, len.data(), kRows * sizeof(unsigned), GPUDYN_MEMCPY_HOST_TO_DEVICE, nullptr));
    check(gpudyn_memset(d_wrong, 0, sizeof(unsigned), nullptr));
    const unsigned grid = (kRows + kBlock - 1) / kBlock;
    make_rows<<<grid, kBlock>>>(view, static_cast<unsigned*>(d_len), static_cast<float**>(d_rows), kRows);
    check_and_free<<<grid, kBlock>>>(view, static_cast<unsigned*>(d_len), static_cast<float**>(d_rows), kRows,
                                     static_cast<unsigned*>(d_wrong));
    if (cudaGetLastError() != cudaSuccess) return 1;
    unsigned wrong = 0;
    check(gpudyn_memcpy(&wrong, d_wrong, sizeof wrong, GPUDYN_MEMCPY_DEVICE_TO_HOST, nullptr));
    check(gpudyn_stream_synchronize(nullptr));
    check(gpudyn_heap_check(heap, nullptr)); // OUT_OF_MEMORY if a malloc got nullptr
    std::printf("%u rows, %u wrong\n", kRows, wrong);
    for (void* p : {d_len, d_rows, d_wrong}) check(gpudyn_device_free(p, nullptr));
    check(gpudyn_heap_destroy(heap));
    return wrong == 0 ? 0 : 1;
}
