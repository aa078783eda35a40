// C ABI of the VMM array (the paper's semi-static "memMap"): one virtual range
// reserved at creation; reserve() maps more physical memory at its end from
// the host (cuMemCreate + cuMemMap + cuMemSetAccess): no copy, no new address.
// Driver calls come through driver_entry_point (libcuda is never linked).
#include "array_common.cuh"

#include <cuda.h>  // driver types only

#include <vector>

using namespace gpudyn;
using namespace gpudyn::detail;

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

}  // namespace

struct gpudyn_vmm_array_s {
    contiguous_state a;
    int device = 0;
    CUdeviceptr base = 0;
    uint64_t reserved_bytes = 0;   // virtual range
    uint64_t mapped_bytes = 0;     // physically backed prefix
    uint64_t granularity = 0;      // physical allocations are multiples of this
    std::vector<std::pair<CUmemGenericAllocationHandle, uint64_t>> chunks;  // handle, bytes

    CUmemAllocationProp prop() const {
        CUmemAllocationProp p{};
        p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        p.location.id = device;
        return p;
    }
    // Maps physical memory until capacity >= elements.
    void grow(uint64_t elements) {
        const uint64_t want = (elements * a.element_size + granularity - 1) / granularity * granularity;
        if (want <= mapped_bytes) return;
        if (want > reserved_bytes)
            raise(GPUDYN_ERROR_OUT_OF_MEMORY, "capacity %llu exceeds the reserved range of %llu elements (max_capacity)",
                  (unsigned long long)elements, (unsigned long long)(reserved_bytes / a.element_size));
        const uint64_t bytes = want - mapped_bytes;
        CUmemAllocationProp p = prop();
        CUmemGenericAllocationHandle h{};
        GPUDYN_CU(api().create(&h, bytes, &p, 0));
        CUresult r = api().map(base + mapped_bytes, bytes, 0, h, 0);
        if (r != CUDA_SUCCESS) {
            api().release(h);
            check_cu(r, "cuMemMap");
        }
        CUmemAccessDesc access{};
        access.location = p.location;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        r = api().set_access(base + mapped_bytes, bytes, &access, 1);
        if (r != CUDA_SUCCESS) {
            api().unmap(base + mapped_bytes, bytes);
            api().release(h);
            check_cu(r, "cuMemSetAccess");
        }
        chunks.emplace_back(h, bytes);
        mapped_bytes = want;
        a.capacity = mapped_bytes / a.element_size;
    }
    void release_all() {
        uint64_t off = 0;
        for (auto& c : chunks) {
            api().unmap(base + off, c.second);
            api().release(c.first);
            off += c.second;
        }
        chunks.clear();
        if (base) api().address_free(base, reserved_bytes);
        base = 0;
    }
};

extern "C" {

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_options_init(gpudyn_vmm_array_options_t* options) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(options);
        *options = gpudyn_vmm_array_options_t{};
        options->struct_size = sizeof(*options);
        options->element_size = 4;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_create(gpudyn_vmm_array_t* array,
                                                   const gpudyn_vmm_array_options_t* options,
                                                   gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        *array = nullptr;
        require_struct_size(options, "options");
        require_element_size(options->element_size, "options->element_size");
        GPUDYN_REQUIRE(options->max_capacity == 0 || options->initial_capacity <= options->max_capacity,
                       "options->initial_capacity is %llu, expected <= options->max_capacity (%llu)",
                       (unsigned long long)options->initial_capacity, (unsigned long long)options->max_capacity);
        GPUDYN_REQUIRE(options->max_capacity <= (1ull << 50), "options->max_capacity is %llu, expected <= 2^50",
                       (unsigned long long)options->max_capacity);
        const int device = require_device();
        int vmm = 0;
        GPUDYN_CUDA(cudaDeviceGetAttribute(
            &vmm, static_cast<cudaDeviceAttr>(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED), device));
        if (!vmm) raise(GPUDYN_ERROR_NOT_SUPPORTED, "device %d does not support virtual memory management", device);
        auto* h = new gpudyn_vmm_array_s{};
        h->device = device;
        h->a.element_size = options->element_size;
        try {
            CUmemAllocationProp p = h->prop();
            size_t g = 0;
            GPUDYN_CU(api().granularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
            h->granularity = g;
            uint64_t max_bytes = options->max_capacity * options->element_size;
            if (max_bytes == 0) {
                size_t free_b = 0, total_b = 0;
                GPUDYN_CUDA(cudaMemGetInfo(&free_b, &total_b));
                max_bytes = total_b;
            }
            h->reserved_bytes = (max_bytes + g - 1) / g * g;
            GPUDYN_CU(api().address_reserve(&h->base, h->reserved_bytes, 0, 0, 0));
            h->a.data = reinterpret_cast<void*>(h->base);
            contiguous_init(h->a, to_cuda(stream));
            h->grow(options->initial_capacity);
        } catch (...) {
            h->release_all();
            contiguous_free_meta(h->a);
            delete h;
            throw;
        }
        *array = h;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_destroy(gpudyn_vmm_array_t array) {
    GPUDYN_ABI({
        if (array == nullptr) return;
        GPUDYN_CUDA(cudaDeviceSynchronize());  // kernels may still use the mapping
        array->release_all();
        contiguous_free_meta(array->a);
        delete array;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_reserve(gpudyn_vmm_array_t array, uint64_t capacity,
                                                    gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        (void)stream;  // mapping is a host call; kernels already queued keep their (smaller) capacity
        array->grow(capacity);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_push_back(gpudyn_vmm_array_t array, const void* values, uint64_t count,
                                                      const uint8_t* mask, gpudyn_insert_algo_t algorithm,
                                                      gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        contiguous_push(array->a, values, count, mask, algorithm, to_cuda(stream), "VMM array");
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_size(gpudyn_vmm_array_t array, uint64_t* size, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        GPUDYN_REQUIRE_NOT_NULL(size);
        *size = contiguous_size(array->a, to_cuda(stream));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_capacity(gpudyn_vmm_array_t array, uint64_t* capacity) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        GPUDYN_REQUIRE_NOT_NULL(capacity);
        *capacity = array->a.capacity;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_allocated_bytes(gpudyn_vmm_array_t array, uint64_t* bytes) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        GPUDYN_REQUIRE_NOT_NULL(bytes);
        *bytes = array->mapped_bytes;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_data(gpudyn_vmm_array_t array, void** data) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        GPUDYN_REQUIRE_NOT_NULL(data);
        *data = array->a.data;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_flatten(gpudyn_vmm_array_t array, void* dst, uint64_t dst_bytes,
                                                    gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        contiguous_copy_out(array->a, dst, dst_bytes, cudaMemcpyDeviceToDevice, to_cuda(stream));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_copy_to_host(gpudyn_vmm_array_t array, void* dst, uint64_t dst_bytes,
                                                         gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        contiguous_copy_out(array->a, dst, dst_bytes, cudaMemcpyDeviceToHost, to_cuda(stream));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_clear(gpudyn_vmm_array_t array, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        contiguous_clear(array->a, to_cuda(stream));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_get_view(gpudyn_vmm_array_t array, gpudyn_vmm_array_view_t* view) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        GPUDYN_REQUIRE_NOT_NULL(view);
        contiguous_fill_view(array->a, view, GPUDYN_VMM_ARRAY_VIEW_VERSION);
    });
}

}  // extern "C"
