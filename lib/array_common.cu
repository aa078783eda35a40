// Host plumbing shared by the three arrays (see array_common.cuh).
#include "array_common.cuh"

#include <algorithm>

namespace gpudyn::detail {

unsigned push_grid(unsigned long long count, unsigned lfvectors) {
    const unsigned long long per_tile = (unsigned long long)kPushThreads * kPushItems;
    // Two resident 512-thread blocks per SM fill an SM's 2048 thread slots (sm_75..sm_90).
    unsigned grid = grid_for((count + per_tile - 1) / per_tile * kPushThreads, kPushThreads, 4);
    if (lfvectors > 0) grid = std::max(1u, (grid + lfvectors - 1) / lfvectors) * lfvectors;
    return grid;
}

uint32_t read_status(const uint32_t* status_dev, cudaStream_t stream) {
    uint32_t s = 0;
    GPUDYN_CUDA(cudaMemcpyAsync(&s, status_dev, sizeof(s), cudaMemcpyDeviceToHost, stream));
    GPUDYN_CUDA(cudaStreamSynchronize(stream));
    return s;
}

uint64_t read_u64(const uint64_t* dev, cudaStream_t stream) {
    uint64_t v = 0;
    GPUDYN_CUDA(cudaMemcpyAsync(&v, dev, sizeof(v), cudaMemcpyDeviceToHost, stream));
    GPUDYN_CUDA(cudaStreamSynchronize(stream));
    return v;
}

void contiguous_init(contiguous_state& a, cudaStream_t stream) {
    void* p = nullptr;
    GPUDYN_CUDA(cudaMallocAsync(&p, 3 * sizeof(uint64_t), stream));
    a.meta = static_cast<uint64_t*>(p);
    GPUDYN_CUDA(cudaMemsetAsync(a.meta, 0, 3 * sizeof(uint64_t), stream));
}

void contiguous_free_meta(contiguous_state& a) {
    if (a.meta) cudaFree(a.meta);
    a.meta = nullptr;
}

void contiguous_push(contiguous_state& a, const void* values, uint64_t count, const uint8_t* mask,
                     gpudyn_insert_algo_t algorithm, cudaStream_t stream, const char* what) {
    require_push_args(values, count, algorithm);
    if (count == 0) return;
    GPUDYN_CUDA(cudaMemcpyAsync(a.meta + 2, a.meta, sizeof(uint64_t), cudaMemcpyDeviceToDevice, stream));
    GPUDYN_CUDA(cudaMemsetAsync(a.meta + 1, 0, sizeof(uint64_t), stream));
    dispatch_element(a.element_size, [&](auto tag) {
        using T = typename decltype(tag)::type;
        dev::contiguous_array_ref<T> ref;
        gpudyn_static_array_view_t v;
        contiguous_fill_view(a, &v, GPUDYN_STATIC_ARRAY_VIEW_VERSION);
        ref.bind(v, GPUDYN_STATIC_ARRAY_VIEW_VERSION);
        launch_push<T>(ref, values, mask, count, algorithm, push_grid(count, 0), stream);
    });
    const uint32_t status = read_status(reinterpret_cast<const uint32_t*>(a.meta + 1), stream);
    if (status != 0) {
        // Some blocks may have stored before one hit the capacity: restore the size.
        const uint64_t before = read_u64(a.meta + 2, stream);
        GPUDYN_CUDA(cudaMemcpyAsync(a.meta, a.meta + 2, sizeof(uint64_t), cudaMemcpyDeviceToDevice, stream));
        GPUDYN_CUDA(cudaStreamSynchronize(stream));
        raise(GPUDYN_ERROR_OUT_OF_MEMORY,
              "%s: %llu element(s) (count %llu) do not fit: size %llu, capacity %llu; nothing was inserted", what,
              (unsigned long long)count, (unsigned long long)count, (unsigned long long)before,
              (unsigned long long)a.capacity);
    }
}

uint64_t contiguous_size(const contiguous_state& a, cudaStream_t stream) { return read_u64(a.meta, stream); }

void contiguous_copy_out(const contiguous_state& a, void* dst, uint64_t dst_bytes, cudaMemcpyKind kind,
                         cudaStream_t stream) {
    const uint64_t n = contiguous_size(a, stream);
    const uint64_t bytes = n * a.element_size;
    if (bytes == 0) return;
    if (dst == nullptr) raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument 'dst' is NULL");
    if (dst_bytes < bytes)
        raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument 'dst_bytes' is %llu, expected >= %llu (size %llu x %u bytes)",
              (unsigned long long)dst_bytes, (unsigned long long)bytes, (unsigned long long)n,
              unsigned(a.element_size));
    GPUDYN_CUDA(cudaMemcpyAsync(dst, a.data, bytes, kind, stream));
    if (kind == cudaMemcpyDeviceToHost) GPUDYN_CUDA(cudaStreamSynchronize(stream));
}

void contiguous_clear(contiguous_state& a, cudaStream_t stream) {
    GPUDYN_CUDA(cudaMemsetAsync(a.meta, 0, 2 * sizeof(uint64_t), stream));
}

}  // namespace gpudyn::detail
