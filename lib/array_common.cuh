// Shared by lib/ggarray.cu, lib/static_array.cu and lib/vmm_array.cu: element
// types, argument checks and the bulk push_back kernel (one kernel body for the
// three arrays; the algorithms themselves are in include/gpudyn/insert.cuh).
#pragma once

#include "internal.hpp"

#include <cuda.h>  // driver types only (entry points come from driver_entry_point)

#include <utility>
#include <vector>

#include <gpudyn/ggarray.cuh>
#include <gpudyn/vmm_array.cuh>

namespace gpudyn::detail {

// 16-byte element (the largest element size the ABI allows).
struct alignas(16) element16 {
    unsigned long long lo, hi;
};

template <class T>
struct type_tag {
    using type = T;
};

// Calls f(type_tag<T>{}) with the unsigned type of `element_size` bytes.
template <class F>
void dispatch_element(uint32_t element_size, F&& f) {
    switch (element_size) {
        case 1: f(type_tag<uint8_t>{}); return;
        case 2: f(type_tag<uint16_t>{}); return;
        case 4: f(type_tag<uint32_t>{}); return;
        case 8: f(type_tag<uint64_t>{}); return;
        case 16: f(type_tag<element16>{}); return;
    }
    raise(GPUDYN_ERROR_INTERNAL, "element size %u reached dispatch", unsigned(element_size));
}

inline void require_element_size(uint32_t element_size, const char* name) {
    if (element_size != 1 && element_size != 2 && element_size != 4 && element_size != 8 && element_size != 16)
        raise(GPUDYN_ERROR_INVALID_ARGUMENT, "%s is %u, expected 1, 2, 4, 8 or 16", name, unsigned(element_size));
}

template <class F>
void dispatch_algo(gpudyn_insert_algo_t algorithm, F&& f) {
    switch (algorithm) {
        case GPUDYN_INSERT_ATOMIC: f(std::integral_constant<insert_algo, insert_algo::atomic>{}); return;
        case GPUDYN_INSERT_WARP_SCAN: f(std::integral_constant<insert_algo, insert_algo::warp_scan>{}); return;
        case GPUDYN_INSERT_TENSOR_SCAN: f(std::integral_constant<insert_algo, insert_algo::tensor_scan>{}); return;
    }
    raise(GPUDYN_ERROR_INVALID_ARGUMENT,
          "argument 'algorithm' is %d, expected GPUDYN_INSERT_ATOMIC (0), GPUDYN_INSERT_WARP_SCAN (1) or "
          "GPUDYN_INSERT_TENSOR_SCAN (2)",
          int(algorithm));
}

// Bulk insertion: threads per block, elements per thread per ranked tile and
// resident blocks per SM (<= 64 registers a thread with 8 items, no spills:
// enough warps to hide each tile's scan latency).  benchmarks/ggarray measures it.
constexpr unsigned kPushThreads = 512;
constexpr int kPushItems = 8;
constexpr int kPushBlocksPerSm = 2;

// Candidates of one part: values[j], flagged by mask[j] (all without a mask).
template <class T>
struct chunk_source {
    const T* values;
    const uint8_t* mask;
    __device__ bool all_flagged() const { return mask == nullptr; }
    __device__ bool flag(unsigned long long j) const { return mask == nullptr || mask[j] != 0; }
    __device__ T value(unsigned long long j) const { return values[j]; }
};

// One kernel body for every array (Ref has push_back_part): the parts of
// plan_bulk_insert, each with one reservation.
template <class T, insert_algo Algo, class Ref>
__global__ void __launch_bounds__(kPushThreads, kPushBlocksPerSm)
    push_kernel(Ref ref, const T* values, const uint8_t* mask, unsigned long long count, bulk_plan plan) {
    __shared__ push_storage<kPushThreads, Algo> temp;
    push_back_parts<kPushItems>(temp, ref, count, plan, [&](unsigned long long lo) {
        return chunk_source<T>{values + lo, mask ? mask + lo : nullptr};
    });  // failure: the status word
}

// Plan of push_kernel on the current device; targets: the GGArray's LFVector count, else 1;
// first_target: the size mod targets (keeps the LFVectors balanced; see plan_bulk_insert).
bulk_plan push_plan(unsigned long long count, unsigned targets, unsigned first_target);

template <class T, class Ref>
void launch_push(Ref ref, const void* values, const uint8_t* mask, uint64_t count, gpudyn_insert_algo_t algorithm,
                 const bulk_plan& plan, cudaStream_t stream) {
    if (plan.grid == 0) return;
    dispatch_algo(algorithm, [&](auto algo) {
        push_kernel<T, decltype(algo)::value, Ref>
            <<<plan.grid, kPushThreads, 0, stream>>>(ref, static_cast<const T*>(values), mask, count, plan);
        GPUDYN_CHECK_LAUNCH("push_kernel");
    });
}

// Checks common to every push_back entry point.
inline void require_push_args(const void* values, uint64_t count, gpudyn_insert_algo_t algorithm) {
    if (count > 0 && values == nullptr) raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument 'values' is NULL");
    dispatch_algo(algorithm, [](auto) {});
}

// Host copy of the status word (synchronizes the stream).
uint32_t read_status(const uint32_t* status_dev, cudaStream_t stream);
uint64_t read_u64(const uint64_t* dev, cudaStream_t stream);

}  // namespace gpudyn::detail

namespace gpudyn::detail {

// Host state shared by the static and the VMM array.  meta (device) holds
// [0] reservation counter, [1] status word (low 32 bits; users' kernels), [2]
// size snapshot for rollback, [3] lowest failed reservation start (~0 when
// none), [4] status word of the host's own pushes (their failure is the call's
// return status, so the users' word keeps only what kernels did); the size is
// min([0], [3]) (see include/gpudyn/detail/contiguous_array.cuh).
struct contiguous_state {
    uint32_t element_size = 0;
    void* data = nullptr;
    uint64_t capacity = 0;   // elements usable now
    uint64_t* meta = nullptr;
};

void contiguous_init(contiguous_state& a, cudaStream_t stream);
// Stream-ordered free of the meta words on `stream`.
void contiguous_free_meta(contiguous_state& a, cudaStream_t stream);
// All-or-nothing bulk insertion; raises OUT_OF_MEMORY (capacity) with the size restored.
void contiguous_push(contiguous_state& a, const void* values, uint64_t count, const uint8_t* mask,
                     gpudyn_insert_algo_t algorithm, cudaStream_t stream, const char* what);
uint64_t contiguous_size(const contiguous_state& a, cudaStream_t stream);
void contiguous_copy_out(const contiguous_state& a, void* dst, uint64_t dst_bytes, cudaMemcpyKind kind,
                         cudaStream_t stream);
void contiguous_clear(contiguous_state& a, cudaStream_t stream);
// Folds the counter back to the size (after a failed in-kernel reservation) and
// forgets the failure; with clear_status also zeroes the status word.
void contiguous_normalize(contiguous_state& a, cudaStream_t stream, bool clear_status);
// The users' status word (gpudyn_array_status_bits_t); synchronizes.
uint32_t contiguous_status(const contiguous_state& a, cudaStream_t stream);

template <class View>
void contiguous_fill_view(const contiguous_state& a, View* view, uint32_t version) {
    view->version = version;
    view->element_size = a.element_size;
    view->data = reinterpret_cast<uint64_t>(a.data);
    view->capacity = a.capacity;
    view->size = reinterpret_cast<uint64_t>(a.meta);
    view->status = reinterpret_cast<uint64_t>(a.meta + 1);
    view->failed_at = reinterpret_cast<uint64_t>(a.meta + 3);
}

}  // namespace gpudyn::detail

namespace gpudyn::detail {

// A virtual address range reserved once, whose prefix is backed by physical
// memory mapped from the host with the driver's VMM calls (cuMemCreate,
// cuMemMap, cuMemSetAccess): the VMM array's storage and the GGArray's bucket
// pool.  Addresses never move.
struct vmm_range {
    int device = 0;
    CUdeviceptr base = 0;
    uint64_t reserved = 0;     // bytes of virtual range
    uint64_t mapped = 0;       // bytes of the physically backed prefix
    uint64_t granularity = 0;  // physical allocations are multiples of this
    std::vector<std::pair<CUmemGenericAllocationHandle, uint64_t>> chunks;  // handle, bytes

    // NOT_SUPPORTED without VMM; `bytes` 0 means the device's total memory.
    // A size that cannot be reserved raises INVALID_ARGUMENT (rounding overflows)
    // or OUT_OF_MEMORY (the driver refuses), the message naming `option`.
    void reserve(int device, uint64_t bytes, const char* option);
    // Maps physical memory until mapped >= bytes (rounded up to the granularity);
    // OUT_OF_MEMORY beyond the range or the device (nothing changes then).
    void map_to(uint64_t bytes);
    void release();
};

}  // namespace gpudyn::detail
