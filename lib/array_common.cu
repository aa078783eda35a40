// Host plumbing shared by the three arrays (see array_common.cuh).
#include "array_common.cuh"

#include <algorithm>

namespace gpudyn::detail {

bulk_plan push_plan(unsigned long long count, unsigned targets, unsigned first_target) {
    // Resident blocks: grid_for caps at SMs x blocks per SM.
    const unsigned resident = grid_for(~0ull >> 1, kPushThreads, kPushBlocksPerSm);
    return plan_bulk_insert(count, resident, targets, (unsigned long long)kPushThreads * kPushItems, first_target);
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

namespace {
constexpr int kMetaWords = 5;
constexpr int kHostStatusWord = 4;
constexpr uint64_t kNoFailure = ~0ull;

// One thread: size = min(counter, failed_at), failure forgotten, snapshot taken.
__global__ void normalize_kernel(uint64_t* meta, bool clear_status) {
    const uint64_t n = meta[0] < meta[3] ? meta[0] : meta[3];
    meta[0] = n;
    meta[2] = n;
    meta[3] = kNoFailure;
    if (clear_status) meta[1] = 0;
}
}  // namespace

void contiguous_init(contiguous_state& a, cudaStream_t stream) {
    void* p = nullptr;
    device_alloc(&p, kMetaWords * sizeof(uint64_t), stream, "the array's size counters");
    a.meta = static_cast<uint64_t*>(p);
    GPUDYN_CUDA(cudaMemsetAsync(a.meta, 0, kMetaWords * sizeof(uint64_t), stream));
    GPUDYN_CUDA(cudaMemsetAsync(a.meta + 3, 0xff, sizeof(uint64_t), stream));
}

uint32_t contiguous_status(const contiguous_state& a, cudaStream_t stream) {
    return read_status(reinterpret_cast<const uint32_t*>(a.meta + 1), stream);
}

void contiguous_free_meta(contiguous_state& a, cudaStream_t stream) {
    if (a.meta) GPUDYN_CUDA(cudaFreeAsync(a.meta, stream));
    a.meta = nullptr;
}

void contiguous_normalize(contiguous_state& a, cudaStream_t stream, bool clear_status) {
    normalize_kernel<<<1, 1, 0, stream>>>(a.meta, clear_status);
    GPUDYN_CHECK_LAUNCH("normalize_kernel");
}

void contiguous_push(contiguous_state& a, const void* values, uint64_t count, const uint8_t* mask,
                     gpudyn_insert_algo_t algorithm, cudaStream_t stream, const char* what) {
    require_push_args(values, count, algorithm);
    if (count == 0) return;
    // Snapshot in meta[2]; the users' status bits stay (their kernels' failures
    // are reported by get_status until clear_status), ours go to meta[4].
    contiguous_normalize(a, stream, false);
    GPUDYN_CUDA(cudaMemsetAsync(a.meta + kHostStatusWord, 0, sizeof(uint64_t), stream));
    dispatch_element(a.element_size, [&](auto tag) {
        using T = typename decltype(tag)::type;
        gpudyn_static_array_view_t v;
        contiguous_fill_view(a, &v, GPUDYN_STATIC_ARRAY_VIEW_VERSION);
        v.status = reinterpret_cast<uint64_t>(a.meta + kHostStatusWord);
        launch_push<T>(static_array_ref<T>{v}, values, mask, count, algorithm, push_plan(count, 1, 0), stream);
    });
    const uint32_t status = read_status(reinterpret_cast<const uint32_t*>(a.meta + kHostStatusWord), stream);
    if (status != 0) {
        // Blocks below the failure stored their elements: restore the size (all or nothing per call).
        const uint64_t before = read_u64(a.meta + 2, stream);
        GPUDYN_CUDA(cudaMemcpyAsync(a.meta, a.meta + 2, sizeof(uint64_t), cudaMemcpyDeviceToDevice, stream));
        GPUDYN_CUDA(cudaMemsetAsync(a.meta + 3, 0xff, sizeof(uint64_t), stream));
        GPUDYN_CUDA(cudaStreamSynchronize(stream));
        raise(GPUDYN_ERROR_OUT_OF_MEMORY,
              "%s: %llu element(s) (count %llu) do not fit: size %llu, capacity %llu; nothing was inserted", what,
              (unsigned long long)count, (unsigned long long)count, (unsigned long long)before,
              (unsigned long long)a.capacity);
    }
}

uint64_t contiguous_size(const contiguous_state& a, cudaStream_t stream) {
    uint64_t m[kMetaWords] = {};
    GPUDYN_CUDA(cudaMemcpyAsync(m, a.meta, sizeof(m), cudaMemcpyDeviceToHost, stream));
    GPUDYN_CUDA(cudaStreamSynchronize(stream));
    return m[0] < m[3] ? m[0] : m[3];
}

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
    GPUDYN_CUDA(cudaMemsetAsync(a.meta + 3, 0xff, sizeof(uint64_t), stream));
}

}  // namespace gpudyn::detail

namespace gpudyn::detail {

namespace {

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

// VMM entry points exist since CUDA 10.2; ask for the CUDA 12.0 ABI of each.
constexpr int kDriverApi = 12000;

const vmm_api& api() {
    static const vmm_api a = [] {
        vmm_api r;
        r.address_reserve = reinterpret_cast<decltype(r.address_reserve)>(driver_entry_point("cuMemAddressReserve", kDriverApi));
        r.address_free = reinterpret_cast<decltype(r.address_free)>(driver_entry_point("cuMemAddressFree", kDriverApi));
        r.create = reinterpret_cast<decltype(r.create)>(driver_entry_point("cuMemCreate", kDriverApi));
        r.release = reinterpret_cast<decltype(r.release)>(driver_entry_point("cuMemRelease", kDriverApi));
        r.map = reinterpret_cast<decltype(r.map)>(driver_entry_point("cuMemMap", kDriverApi));
        r.unmap = reinterpret_cast<decltype(r.unmap)>(driver_entry_point("cuMemUnmap", kDriverApi));
        r.set_access = reinterpret_cast<decltype(r.set_access)>(driver_entry_point("cuMemSetAccess", kDriverApi));
        r.granularity = reinterpret_cast<decltype(r.granularity)>(
            driver_entry_point("cuMemGetAllocationGranularity", kDriverApi));
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

}  // namespace

void vmm_range::reserve(int dev, uint64_t bytes, const char* option) {
    int vmm = 0;
    GPUDYN_CUDA(cudaDeviceGetAttribute(
        &vmm, static_cast<cudaDeviceAttr>(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED), dev));
    if (!vmm) raise(GPUDYN_ERROR_NOT_SUPPORTED, "device %d does not support virtual memory management", dev);
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
        raise(GPUDYN_ERROR_OUT_OF_MEMORY, "%s is %llu bytes: no virtual address range of %llu bytes could be reserved (%s)",
              option, (unsigned long long)asked, (unsigned long long)rounded, name);
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

}  // namespace gpudyn::detail
