// Shared by lib/ggarray.cu, lib/static_array.cu and lib/vmm_array.cu: element
// types, argument checks, the launch of the bulk push_back kernel (one kernel
// for the three arrays: include/gpudyn/detail/ggarray/kernels.cuh), the host
// state and ABI bodies of the static and VMM arrays, and the VMM range.
#pragma once

#include "internal.hpp"

#include <cuda.h> // driver types only (entry points come from driver_entry_point)

#include <utility>
#include <vector>

#include <gpudyn/detail/ggarray/kernels.cuh>
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

// Plan of push_kernel on the current device; targets: the GGArray's LFVector count, else 1;
// first_target: the size mod targets (keeps the LFVectors balanced; see plan_bulk_insert).
bulk_plan push_plan(unsigned long long count, unsigned targets, unsigned first_target);

template <class T, class Ref>
void launch_push(Ref ref, const void* values, const uint8_t* mask, uint64_t count, gpudyn_insert_algo_t algorithm,
                 const bulk_plan& plan, cudaStream_t stream) {
    if (plan.grid == 0) return;
    const ggarray_detail::chunk_sources<T> sources{static_cast<const T*>(values), mask};
    dispatch_algo(algorithm, [&](auto algo) {
        ggarray_detail::push_kernel<decltype(algo)::value>
            <<<plan.grid, ggarray_detail::kPushThreads, 0, stream>>>(ref, sources, count, plan);
        GPUDYN_CHECK_LAUNCH("push_kernel");
    });
}

// Loads push_kernel of every algorithm for Ref over arrays of T (see
// preload_kernels), and flatten_async's kernel, which every array launches
// over the Ref of its pushes.
template <class T, class Ref>
void preload_push() {
    using S = ggarray_detail::chunk_sources<T>;
    preload_kernels(&ggarray_detail::push_kernel<insert_algo::atomic, Ref, S>,
                    &ggarray_detail::push_kernel<insert_algo::warp_scan, Ref, S>,
                    &ggarray_detail::push_kernel<insert_algo::tensor_scan, Ref, S>,
                    &ggarray_detail::flatten_async_kernel<T, Ref>);
}

// Checks common to every push_back entry point.
inline void require_push_args(const void* values, uint64_t count, gpudyn_insert_algo_t algorithm) {
    if (count > 0) require_address(values, "values");
    dispatch_algo(algorithm, [](auto) {});
}
// The buffers of a push_back of `count` elements (count > 0), on the array's
// device (under its handle_call): `values` device memory of count elements,
// aligned to their size; `mask`, when given, count bytes.
inline void require_push_buffers(int device, const void* values, uint64_t count, uint32_t element_size,
                                 const uint8_t* mask) {
    require_buffer(values, count, element_size, element_size, memory_use::device, device, "values", "count");
    if (mask != nullptr) require_buffer(mask, count, 1, 1, memory_use::device, device, "mask", "count");
}
// flatten's and copy_to_host's `dst` when given: dst_bytes of device memory of
// the array's device aligned to the element size (flatten), or of host memory.
inline void require_copy_dst(int device, const void* dst, uint64_t dst_bytes, uint32_t element_size, bool to_host) {
    if (dst == nullptr) return;
    require_buffer(dst, dst_bytes, 1, to_host ? 1 : element_size, to_host ? memory_use::host : memory_use::device,
                   device, "dst", "dst_bytes");
}
// flatten_async's arguments (every array): `dst` as flatten's, NULL only with
// dst_bytes 0; `size`, when given, one uint64 a kernel of the device writes.
inline void require_flatten_async_args(int device, const void* dst, uint64_t dst_bytes, uint32_t element_size,
                                       const uint64_t* size) {
    GPUDYN_REQUIRE(dst != nullptr || dst_bytes == 0, "argument 'dst' is NULL with 'dst_bytes' %llu, expected 0",
                   (unsigned long long)dst_bytes);
    require_copy_dst(device, dst, dst_bytes, element_size, false);
    if (size != nullptr) require_device_array(device, size, 1, "size", "size");
}
// flatten_async of any array (ref: the library's view of it): one kernel that
// reads the size on the device and copies when dst_bytes holds the elements,
// else sets GPUDYN_ARRAY_STATUS_DESTINATION_TOO_SMALL in the users' status
// word `status`.  One block per part of dst, at most the resident blocks
// (grid-stride); at least one (it writes *size).
template <class T, class Ref>
void launch_flatten_async(const Ref& ref, void* dst, uint64_t dst_bytes, uint64_t* size, uint64_t* status,
                          cudaStream_t stream) {
    using namespace ggarray_detail;
    static_assert(detail::kArrayDestinationTooSmall == GPUDYN_ARRAY_STATUS_DESTINATION_TOO_SMALL, "ggarray.h's bit");
    const uint64_t capacity = dst_bytes / sizeof(T);
    const uint64_t parts = (capacity * sizeof(T) + kFlattenPartBytes - 1) / kFlattenPartBytes;
    const unsigned grid = grid_for(parts * kFlattenThreads, kFlattenThreads, kFlattenBlocksPerSm);
    flatten_async_kernel<T><<<grid, kFlattenThreads, 0, stream>>>(
        ref, static_cast<T*>(dst), capacity, reinterpret_cast<unsigned long long*>(size),
        reinterpret_cast<unsigned*>(status)); // the status word's low 32 bits
    GPUDYN_CHECK_LAUNCH("flatten_async_kernel");
}

// Host copy of the status word (synchronizes the stream).
uint32_t read_status(const uint32_t* status_dev, cudaStream_t stream);
uint64_t read_u64(const uint64_t* dev, cudaStream_t stream);

} // namespace gpudyn::detail

namespace gpudyn::detail {

// get_status and clear_status of every array, each run inside the exported
// function's GPUDYN_ABI (so a message names that function).  Handle: `hs`;
// user_status(), the device word (64 bits, the status in the low 32) that
// users' kernels set; fold(stream), which folds the counters back to the sizes
// and lifts the failures (the status bits stay).
template <class Handle>
void array_get_status(Handle* array, uint32_t* status, gpudyn_stream_t stream) {
    GPUDYN_REQUIRE_NOT_NULL(array);
    GPUDYN_REQUIRE_NOT_NULL(status);
    handle_call call(array->hs, stream);
    *status = read_status(reinterpret_cast<const uint32_t*>(array->user_status()), call.stream());
}
template <class Handle>
void array_clear_status(Handle* array, gpudyn_stream_t stream) {
    GPUDYN_REQUIRE_NOT_NULL(array);
    handle_call call(array->hs, stream);
    GPUDYN_CUDA(cudaMemsetAsync(array->user_status(), 0, sizeof(uint64_t), call.stream()));
    array->fold(call.stream());
}

// Host state shared by the static and the VMM array.  meta (device) holds the
// words of ggarray_detail::contiguous_meta_word; the size is
// min(counter, failed_at) (include/gpudyn/detail/array_state.cuh).
struct contiguous_state {
    uint32_t element_size = 0;
    void* data = nullptr;
    uint64_t capacity = 0; // elements usable now
    uint64_t bytes = 0;    // device bytes held for the elements (allocated_bytes)
    uint64_t* meta = nullptr;
};

void contiguous_init(contiguous_state& a, cudaStream_t stream);
// Stream-ordered free of the meta words on `stream`.
void contiguous_free_meta(contiguous_state& a, cudaStream_t stream);
// Folds the counter back to the size (after a failed in-kernel reservation)
// and forgets the failure; the status word stays.
void contiguous_fold(contiguous_state& a, cudaStream_t stream);

template <class View>
void contiguous_fill_view(const contiguous_state& a, View* view, uint32_t version) {
    using namespace ggarray_detail;
    view->version = version;
    view->element_size = a.element_size;
    view->data = reinterpret_cast<uint64_t>(a.data);
    view->capacity = a.capacity;
    view->size = reinterpret_cast<uint64_t>(a.meta + kMetaCounter);
    view->status = reinterpret_cast<uint64_t>(a.meta + kMetaStatus);
    view->failed_at = reinterpret_cast<uint64_t>(a.meta + kMetaFailedAt);
}

// The handle of the static and the VMM array (each adds its own state).
struct contiguous_handle {
    handle_state hs; // device, call ordering, lock
    contiguous_state a;

    // For array_get_status / array_clear_status.
    uint64_t* user_status() const { return a.meta + ggarray_detail::kMetaStatus; }
    void fold(cudaStream_t stream) { contiguous_fold(a, stream); }
};

// The ABI calls the static and the VMM array answer alike, each run inside
// the exported function's GPUDYN_ABI; `array` is its handle argument.
namespace contiguous_abi {
template <class Options>
void options_init(Options* options) {
    GPUDYN_REQUIRE_NOT_NULL(options);
    *options = Options{};
    options->struct_size = sizeof(*options);
    options->element_size = 4;
}
// The checks create starts with (the array's own follow).
template <class Handle, class Options>
void begin_create(Handle** array, const Options* options) {
    GPUDYN_REQUIRE_NOT_NULL(array);
    *array = nullptr;
    require_struct_size(options, "options");
    require_element_size(options->element_size, "options->element_size");
}
// All-or-nothing bulk insertion; raises OUT_OF_MEMORY (capacity) with the size
// restored.  `what` names the array in the message.
void push_back(contiguous_handle* array, const void* values, uint64_t count, const uint8_t* mask,
               gpudyn_insert_algo_t algorithm, gpudyn_stream_t stream, const char* what);
void size(contiguous_handle* array, uint64_t* size, gpudyn_stream_t stream);
void capacity(contiguous_handle* array, uint64_t* capacity);
void allocated_bytes(contiguous_handle* array, uint64_t* bytes);
void data(contiguous_handle* array, void** data);
// flatten (kind DeviceToDevice) and copy_to_host (DeviceToHost, synchronizes).
void copy_out(contiguous_handle* array, void* dst, uint64_t dst_bytes, cudaMemcpyKind kind, gpudyn_stream_t stream);
// The size into device memory, and flatten with the size taken on the device: no host wait.
void size_async(contiguous_handle* array, uint64_t* size, gpudyn_stream_t stream);
void flatten_async(contiguous_handle* array, void* dst, uint64_t dst_bytes, uint64_t* size, gpudyn_stream_t stream);
void clear(contiguous_handle* array, gpudyn_stream_t stream);
template <class View>
void get_view(contiguous_handle* array, View* view, uint32_t version) {
    GPUDYN_REQUIRE_NOT_NULL(array);
    GPUDYN_REQUIRE_NOT_NULL(view);
    handle_call call(array->hs);
    contiguous_fill_view(array->a, view, version);
}
} // namespace contiguous_abi

} // namespace gpudyn::detail

namespace gpudyn::detail {

// The driver's VMM entry points (taken once with driver_entry_point).
struct vmm_api {
    decltype(&::cuMemAddressReserve) address_reserve;
    decltype(&::cuMemAddressFree) address_free;
    decltype(&::cuMemCreate) create;
    decltype(&::cuMemRelease) release;
    decltype(&::cuMemMap) map;
    decltype(&::cuMemUnmap) unmap;
    decltype(&::cuMemSetAccess) set_access;
    decltype(&::cuMemGetAllocationGranularity) granularity;
    decltype(&::cuGetErrorName) error_name;
};
const vmm_api& vmm_driver();
// Raises for r != CUDA_SUCCESS: OUT_OF_MEMORY for the driver's, CUDA otherwise, naming `what`.
void check_cu(CUresult r, const char* what);
// Pinned device memory of `device`: what every physical allocation here asks for.
CUmemAllocationProp device_prop(int device);

// A virtual address range reserved once, whose prefix is backed by physical
// memory mapped from the host with the driver's VMM calls (cuMemCreate,
// cuMemMap, cuMemSetAccess): the VMM array's storage and the GGArray's bucket
// pool.  Addresses never move.
struct vmm_range {
    int device = 0;
    CUdeviceptr base = 0;
    uint64_t reserved = 0;                                                 // bytes of virtual range
    uint64_t mapped = 0;                                                   // bytes of the physically backed prefix
    uint64_t granularity = 0;                                              // physical allocations are multiples of this
    std::vector<std::pair<CUmemGenericAllocationHandle, uint64_t>> chunks; // handle, bytes

    // NOT_SUPPORTED without VMM; `bytes` 0 means the device's total memory.
    // A size that cannot be reserved raises INVALID_ARGUMENT (rounding overflows)
    // or OUT_OF_MEMORY (the driver refuses), the message naming `option`.
    void reserve(int device, uint64_t bytes, const char* option);
    // Maps physical memory until mapped >= bytes (rounded up to the granularity);
    // OUT_OF_MEMORY beyond the range or the device (nothing changes then).
    void map_to(uint64_t bytes);
    void release();
};

// A GGArray's growth arena when the device has VMM (memory_source.cu): a
// virtual range whose physical memory is mapped as kernels reach it.  The
// library's host thread watches the arena's host-mapped mailbox
// (ggarray.cuh's growth_mailbox) and maps what a waiting bucket asks for,
// while the kernel runs; the host maps nothing before a launch.  Chunks are
// power-of-two multiples of the granularity, taken from and given back to a
// per-device reserve of unmapped chunks (shared by every arena of the device;
// the host thread releases what stays unused for a second, and
// gpudyn_trim releases all of it).  A closed arena whose work is done stays
// mapped for a second, and the next array opened on its device adopts it.
struct growth_arena;
// NOT_SUPPORTED without VMM (the caller falls back to a fixed run);
// OUT_OF_MEMORY when `va_bytes` of virtual range cannot be reserved.  With
// `adopt`, an idle arena of the device with at least that range is taken
// instead when there is one (an array whose budget is mapped up front opens
// its own: giving back an adopted excess would unmap part of its budget).
growth_arena* growth_arena_open(int device, uint64_t va_bytes, bool adopt);
CUdeviceptr growth_arena_base(const growth_arena* a);
// Device address of the mailbox (for the arena record).
uint64_t growth_arena_mailbox(const growth_arena* a);
// Bytes mapped now.
uint64_t growth_arena_mapped(growth_arena* a);
// Before a launch (get_view and the host's pushes): lifts a refusal the host
// thread recorded (a later launch may find the memory) and tells the thread
// to watch closely.  True when a refusal was lifted.
bool growth_arena_prepare(growth_arena* a);
// Maps the first `bytes` now (an explicit budget); OUT_OF_MEMORY keeps what was mapped.
void growth_arena_map(growth_arena* a, uint64_t bytes);
// Unmaps whole chunks past `keep` bytes (no kernel may use the arena past
// keep: the caller synchronized the array's work).
void growth_arena_trim(growth_arena* a, uint64_t keep);
// True while an adopted arena maps more than the array's own buckets took.
bool growth_arena_ahead(growth_arena* a);
// An adopted arena gives back what its buckets did not take: the chunks past
// `end` (the arena record's end; the caller found the array's stream idle).
// True when it unmapped something (the caller zeroes the record's `mapped`).
bool growth_arena_give_back(growth_arena* a, uint64_t end);
// Gives the arena back once the work queued on `stream` so far is done (the
// host thread waits for it); never blocks.
void growth_arena_close(growth_arena* a, cudaStream_t stream);
// The device's reserve of unmapped chunks: gpudyn_trim releases it
// (growth_reserve_release, internal.hpp).

} // namespace gpudyn::detail
