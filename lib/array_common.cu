// Host plumbing shared by the three arrays (see array_common.cuh).
#include "array_common.cuh"

#include <algorithm>
#include <cstring>

namespace gpudyn::detail {

using namespace ggarray_detail; // the arrays' bulk kernels and their constants

bulk_plan push_plan(unsigned long long count, unsigned targets, unsigned first_target) {
    // Resident blocks: grid_for caps at SMs x blocks per SM.
    const unsigned resident = grid_for(~0ull >> 1, kPushThreads, kPushBlocksPerSm);
    return plan_bulk_insert(count, resident, targets, (unsigned long long)kPushThreads * kPushItems, first_target);
}

namespace {
// The calling thread's page-locked word for the host's small reads: a copy
// into pageable memory goes through a staging buffer (a few microseconds more
// on every size / get_status).  Portable: any device's stream may copy into it.
// Kept for the thread's life and freed when it ends (a pool's short-lived
// threads would pile up page-locked pages); nullptr when it cannot be had.
struct pinned_holder {
    void* p = nullptr;
    pinned_holder() {
        if (cudaHostAlloc(&p, sizeof(uint64_t), cudaHostAllocPortable) != cudaSuccess) {
            cudaGetLastError(); // not sticky: the reads fall back to pageable memory
            p = nullptr;
        }
    }
    ~pinned_holder() {
        if (p != nullptr && cudaFreeHost(p) != cudaSuccess) cudaGetLastError(); // e.g. the runtime shutting down
    }
    pinned_holder(const pinned_holder&) = delete;
    pinned_holder& operator=(const pinned_holder&) = delete;
};
void* pinned_word() {
    thread_local pinned_holder word;
    return word.p;
}
// `bytes` (<= 8) from the device address to *out, after the stream's earlier work.
void read_small(void* out, const void* dev, size_t bytes, cudaStream_t stream) {
    void* stage = pinned_word();
    GPUDYN_CUDA(cudaMemcpyAsync(stage ? stage : out, dev, bytes, cudaMemcpyDeviceToHost, stream));
    GPUDYN_CUDA(cudaStreamSynchronize(stream));
    if (stage) std::memcpy(out, stage, bytes);
}
} // namespace

uint32_t read_status(const uint32_t* status_dev, cudaStream_t stream) {
    uint32_t s = 0;
    read_small(&s, status_dev, sizeof(s), stream);
    return s;
}

uint64_t read_u64(const uint64_t* dev, cudaStream_t stream) {
    uint64_t v = 0;
    read_small(&v, dev, sizeof(v), stream);
    return v;
}

void contiguous_init(contiguous_state& a, cudaStream_t stream) {
    void* p = nullptr;
    device_alloc(&p, kMetaWords * sizeof(uint64_t), stream, "the array's size counters");
    a.meta = static_cast<uint64_t*>(p);
    GPUDYN_CUDA(cudaMemsetAsync(a.meta, 0, kMetaWords * sizeof(uint64_t), stream));
    GPUDYN_CUDA(cudaMemsetAsync(a.meta + kMetaFailedAt, 0xff, sizeof(uint64_t), stream)); // kNoFailure
    preload_kernels(&contiguous_fold_kernel<uint64_t>, &contiguous_size_kernel<uint64_t>);
    dispatch_element(a.element_size, [](auto tag) {
        using T = typename decltype(tag)::type;
        preload_push<T, static_array_ref<T>>();
    });
}

void contiguous_free_meta(contiguous_state& a, cudaStream_t stream) {
    if (a.meta) GPUDYN_CUDA(cudaFreeAsync(a.meta, stream));
    a.meta = nullptr;
}

void contiguous_fold(contiguous_state& a, cudaStream_t stream) {
    contiguous_fold_kernel<<<1, 1, 0, stream>>>(a.meta);
    GPUDYN_CHECK_LAUNCH("contiguous_fold_kernel");
}

namespace {

// Elements held now; synchronizes.
uint64_t held_now(const contiguous_state& a, cudaStream_t stream) {
    uint64_t m[kMetaWords] = {};
    GPUDYN_CUDA(cudaMemcpyAsync(m, a.meta, sizeof(m), cudaMemcpyDeviceToHost, stream));
    GPUDYN_CUDA(cudaStreamSynchronize(stream));
    return held_elements(m[kMetaCounter], m[kMetaFailedAt]);
}

} // namespace

namespace contiguous_abi {

void push_back(contiguous_handle* array, const void* values, uint64_t count, const uint8_t* mask,
               gpudyn_insert_algo_t algorithm, gpudyn_stream_t stream, const char* what) {
    GPUDYN_REQUIRE_NOT_NULL(array);
    handle_call call(array->hs, stream);
    contiguous_state& a = array->a;
    cudaStream_t s = call.stream();
    require_push_args(values, count, algorithm);
    if (count == 0) return;
    buffer_bytes(count, a.element_size, "count", "values");
    require_push_buffers(array->hs.device, values, count, a.element_size, mask);
    // The snapshot is taken by the fold; the users' status bits stay (their
    // kernels' failures are reported by get_status until clear_status), ours
    // go to the host's own word.
    contiguous_fold(a, s);
    GPUDYN_CUDA(cudaMemsetAsync(a.meta + kMetaHostStatus, 0, sizeof(uint64_t), s));
    dispatch_element(a.element_size, [&](auto tag) {
        using T = typename decltype(tag)::type;
        gpudyn_static_array_view_t v;
        contiguous_fill_view(a, &v, GPUDYN_STATIC_ARRAY_VIEW_VERSION);
        v.status = reinterpret_cast<uint64_t>(a.meta + kMetaHostStatus);
        launch_push<T>(static_array_ref<T>{v}, values, mask, count, algorithm, push_plan(count, 1, 0), s);
    });
    const uint32_t status = read_status(reinterpret_cast<const uint32_t*>(a.meta + kMetaHostStatus), s);
    if (status != 0) {
        // Blocks below the failure stored their elements: restore the size (all or nothing per call).
        const uint64_t before = read_u64(a.meta + kMetaSnapshot, s);
        GPUDYN_CUDA(cudaMemcpyAsync(a.meta + kMetaCounter, a.meta + kMetaSnapshot, sizeof(uint64_t),
                                    cudaMemcpyDeviceToDevice, s));
        GPUDYN_CUDA(cudaMemsetAsync(a.meta + kMetaFailedAt, 0xff, sizeof(uint64_t), s)); // kNoFailure
        GPUDYN_CUDA(cudaStreamSynchronize(s));
        raise(GPUDYN_ERROR_OUT_OF_MEMORY,
              "%s: %llu element(s) (count %llu) do not fit: size %llu, capacity %llu; nothing was inserted", what,
              (unsigned long long)count, (unsigned long long)count, (unsigned long long)before,
              (unsigned long long)a.capacity);
    }
}

void size(contiguous_handle* array, uint64_t* size, gpudyn_stream_t stream) {
    GPUDYN_REQUIRE_NOT_NULL(array);
    GPUDYN_REQUIRE_NOT_NULL(size);
    handle_call call(array->hs, stream);
    *size = held_now(array->a, call.stream());
}

void capacity(contiguous_handle* array, uint64_t* capacity) {
    GPUDYN_REQUIRE_NOT_NULL(array);
    GPUDYN_REQUIRE_NOT_NULL(capacity);
    handle_call call(array->hs);
    *capacity = array->a.capacity;
}

void allocated_bytes(contiguous_handle* array, uint64_t* bytes) {
    GPUDYN_REQUIRE_NOT_NULL(array);
    GPUDYN_REQUIRE_NOT_NULL(bytes);
    handle_call call(array->hs);
    *bytes = array->a.bytes;
}

void data(contiguous_handle* array, void** data) {
    GPUDYN_REQUIRE_NOT_NULL(array);
    GPUDYN_REQUIRE_NOT_NULL(data);
    *data = array->a.data;
}

void copy_out(contiguous_handle* array, void* dst, uint64_t dst_bytes, cudaMemcpyKind kind, gpudyn_stream_t stream) {
    GPUDYN_REQUIRE_NOT_NULL(array);
    handle_call call(array->hs, stream);
    const contiguous_state& a = array->a;
    require_copy_dst(array->hs.device, dst, dst_bytes, a.element_size, kind == cudaMemcpyDeviceToHost);
    const uint64_t n = held_now(a, call.stream());
    const uint64_t bytes = n * a.element_size;
    if (bytes == 0) return;
    if (dst == nullptr) raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument 'dst' is NULL");
    if (dst_bytes < bytes)
        raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument 'dst_bytes' is %llu, expected >= %llu (size %llu x %u bytes)",
              (unsigned long long)dst_bytes, (unsigned long long)bytes, (unsigned long long)n,
              unsigned(a.element_size));
    GPUDYN_CUDA(cudaMemcpyAsync(dst, a.data, bytes, kind, call.stream()));
    if (kind == cudaMemcpyDeviceToHost) GPUDYN_CUDA(cudaStreamSynchronize(call.stream()));
}

void size_async(contiguous_handle* array, uint64_t* size, gpudyn_stream_t stream) {
    GPUDYN_REQUIRE_NOT_NULL(array);
    require_device_array(array->hs.device, size, 1, "size", "size");
    handle_call call(array->hs, stream);
    contiguous_size_kernel<<<1, 1, 0, call.stream()>>>(array->a.meta, size);
    GPUDYN_CHECK_LAUNCH("contiguous_size_kernel");
}

void flatten_async(contiguous_handle* array, void* dst, uint64_t dst_bytes, uint64_t* size, gpudyn_stream_t stream) {
    GPUDYN_REQUIRE_NOT_NULL(array);
    const contiguous_state& a = array->a;
    require_flatten_async_args(array->hs.device, dst, dst_bytes, a.element_size, size);
    handle_call call(array->hs, stream);
    dispatch_element(a.element_size, [&](auto tag) {
        using T = typename decltype(tag)::type;
        gpudyn_static_array_view_t v; // both arrays read through the static array's ref (as push_back)
        contiguous_fill_view(a, &v, GPUDYN_STATIC_ARRAY_VIEW_VERSION);
        launch_flatten_async<T>(static_array_ref<T>{v}, dst, dst_bytes, size, a.meta + kMetaStatus, call.stream());
    });
}

void clear(contiguous_handle* array, gpudyn_stream_t stream) {
    GPUDYN_REQUIRE_NOT_NULL(array);
    handle_call call(array->hs, stream);
    uint64_t* meta = array->a.meta;
    // Counter and users' status word 0, no failure.
    GPUDYN_CUDA(cudaMemsetAsync(meta + kMetaCounter, 0, 2 * sizeof(uint64_t), call.stream()));
    GPUDYN_CUDA(cudaMemsetAsync(meta + kMetaFailedAt, 0xff, sizeof(uint64_t), call.stream())); // kNoFailure
}

} // namespace contiguous_abi

} // namespace gpudyn::detail

namespace gpudyn::detail {

namespace {
// VMM entry points exist since CUDA 10.2; ask for the CUDA 12.0 ABI of each.
constexpr int kDriverApi = 12000;
const vmm_api& api() { return vmm_driver(); }
} // namespace

const vmm_api& vmm_driver() {
    static const vmm_api a = [] {
        vmm_api r;
        r.address_reserve =
            reinterpret_cast<decltype(r.address_reserve)>(driver_entry_point("cuMemAddressReserve", kDriverApi));
        r.address_free = reinterpret_cast<decltype(r.address_free)>(driver_entry_point("cuMemAddressFree", kDriverApi));
        r.create = reinterpret_cast<decltype(r.create)>(driver_entry_point("cuMemCreate", kDriverApi));
        r.release = reinterpret_cast<decltype(r.release)>(driver_entry_point("cuMemRelease", kDriverApi));
        r.map = reinterpret_cast<decltype(r.map)>(driver_entry_point("cuMemMap", kDriverApi));
        r.unmap = reinterpret_cast<decltype(r.unmap)>(driver_entry_point("cuMemUnmap", kDriverApi));
        r.set_access = reinterpret_cast<decltype(r.set_access)>(driver_entry_point("cuMemSetAccess", kDriverApi));
        r.granularity =
            reinterpret_cast<decltype(r.granularity)>(driver_entry_point("cuMemGetAllocationGranularity", kDriverApi));
        r.error_name = reinterpret_cast<decltype(r.error_name)>(driver_entry_point("cuGetErrorName", kDriverApi));
        return r;
    }();
    return a;
}

void check_cu(CUresult r, const char* what) {
    if (r == CUDA_SUCCESS) return;
    const char* name = "CUDA_ERROR_UNKNOWN";
    api().error_name(r, &name);
    raise(r == CUDA_ERROR_OUT_OF_MEMORY ? GPUDYN_ERROR_OUT_OF_MEMORY : GPUDYN_ERROR_CUDA, "%s failed: %s", what, name);
}
#define GPUDYN_CU(call) check_cu((call), #call)

CUmemAllocationProp device_prop(int device) {
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = device;
    return p;
}

void vmm_range::reserve(int dev, uint64_t bytes, const char* option) {
    require_vmm(dev);
    device = dev;
    CUmemAllocationProp p = device_prop(device);
    size_t g = 0;
    GPUDYN_CU(api().granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    granularity = g;
    const uint64_t asked = bytes;
    if (bytes == 0) {
        size_t free_b = 0, total_b = 0;
        GPUDYN_CUDA(cudaMemGetInfo(&free_b, &total_b));
        bytes = total_b;
    }
    // Rounded up to the granularity without wrapping to 0.
    if (bytes > ~uint64_t(0) - (g - 1))
        raise(GPUDYN_ERROR_INVALID_ARGUMENT, "%s is %llu bytes: rounded up to the %zu-byte granularity it overflows",
              option, (unsigned long long)asked, g);
    const uint64_t rounded = (bytes + g - 1) / g * g;
    const CUresult r = api().address_reserve(&base, rounded, 0, 0, 0);
    if (r != CUDA_SUCCESS) {
        base = 0;
        const char* name = "CUDA_ERROR_UNKNOWN";
        api().error_name(r, &name);
        raise(GPUDYN_ERROR_OUT_OF_MEMORY,
              "%s is %llu bytes: no virtual address range of %llu bytes could be reserved (%s)", option,
              (unsigned long long)asked, (unsigned long long)rounded, name);
    }
    reserved = rounded;
}

void vmm_range::map_to(uint64_t bytes) {
    const uint64_t want = (bytes + granularity - 1) / granularity * granularity;
    if (want <= mapped) return;
    if (want > reserved)
        raise(GPUDYN_ERROR_OUT_OF_MEMORY, "%llu bytes exceed the reserved virtual range of %llu bytes",
              (unsigned long long)want, (unsigned long long)reserved);
    const uint64_t add = want - mapped;
    CUmemAllocationProp p = device_prop(device);
    CUmemGenericAllocationHandle h{};
    GPUDYN_CU(api().create(&h, add, &p, 0));
    CUresult r = api().map(base + mapped, add, 0, h, 0);
    if (r != CUDA_SUCCESS) {
        api().release(h);
        check_cu(r, "cuMemMap");
    }
    CUmemAccessDesc access{};
    access.location = p.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = api().set_access(base + mapped, add, &access, 1);
    if (r != CUDA_SUCCESS) {
        api().unmap(base + mapped, add);
        api().release(h);
        check_cu(r, "cuMemSetAccess");
    }
    chunks.emplace_back(h, add);
    mapped = want;
}

void vmm_range::release() {
    uint64_t off = 0;
    for (auto& c : chunks) {
        api().unmap(base + off, c.second);
        api().release(c.first);
        off += c.second;
    }
    chunks.clear();
    mapped = 0;
    if (base) api().address_free(base, reserved);
    base = 0;
}

} // namespace gpudyn::detail
