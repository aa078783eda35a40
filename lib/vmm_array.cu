// C ABI of the VMM array (the paper's semi-static "memMap"): one virtual range
// reserved at creation; reserve() maps more physical memory at its end from
// the host (cuMemCreate + cuMemMap + cuMemSetAccess): no copy, no new address.
// Driver calls come through driver_entry_point (libcuda is never linked).
#include "array_common.cuh"

#include <algorithm>

using namespace gpudyn;
using namespace gpudyn::detail;

struct gpudyn_vmm_array_s : contiguous_handle {
    vmm_range range;           // the virtual range and its physically mapped prefix
    uint64_t max_elements = 0; // options->max_capacity (the range is rounded up to the granularity)

    // Maps physical memory until capacity >= elements.
    void grow(uint64_t elements) {
        if (elements > max_elements)
            raise(GPUDYN_ERROR_OUT_OF_MEMORY,
                  "argument 'capacity' is %llu elements, more than options->max_capacity (%llu elements)",
                  (unsigned long long)elements, (unsigned long long)max_elements);
        range.map_to(elements * a.element_size);
        a.capacity = std::min<uint64_t>(range.mapped / a.element_size, max_elements);
        a.bytes = range.mapped;
    }
};

extern "C" {

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_options_init(gpudyn_vmm_array_options_t* options) {
    GPUDYN_ABI({ contiguous_abi::options_init(options); });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_create(gpudyn_vmm_array_t* array, const gpudyn_vmm_array_options_t* options,
                                                   gpudyn_stream_t stream) {
    GPUDYN_ABI({
        contiguous_abi::begin_create(array, options);
        GPUDYN_REQUIRE(options->max_capacity == 0 || options->initial_capacity <= options->max_capacity,
                       "options->initial_capacity is %llu, expected <= options->max_capacity (%llu)",
                       (unsigned long long)options->initial_capacity, (unsigned long long)options->max_capacity);
        GPUDYN_REQUIRE(options->max_capacity <= (1ull << 50), "options->max_capacity is %llu, expected <= 2^50",
                       (unsigned long long)options->max_capacity);
        cudaStream_t s = to_cuda(stream);
        const int device = create_device(s); // the stream's device, else the current one
        device_guard on_device(device);
        auto* h = new gpudyn_vmm_array_s{};
        h->a.element_size = options->element_size;
        try {
            h->hs.init();
            h->range.reserve(device, options->max_capacity * options->element_size,
                             "options->max_capacity * element_size");
            h->max_elements =
                options->max_capacity != 0 ? options->max_capacity : h->range.reserved / options->element_size;
            h->a.data = reinterpret_cast<void*>(h->range.base);
            contiguous_init(h->a, s);
            try {
                h->grow(options->initial_capacity);
            } catch (const error& e) {
                raise(e.status, "options->initial_capacity is %llu: %s", (unsigned long long)options->initial_capacity,
                      e.message.c_str());
            }
            GPUDYN_CUDA(cudaEventRecord(h->hs.done, s));
            register_handle(h, handle_kind::vmm_array);
        } catch (...) {
            if (h->a.meta) cudaFreeAsync(h->a.meta, s);
            h->range.release();
            h->hs.release();
            delete h;
            throw;
        }
        *array = h;
    });
}

// Waits for the array's last call (its own event, not the device), unmaps and
// frees.  A failure leaves the handle owning what it still holds: call destroy again.
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_destroy(gpudyn_vmm_array_t array) {
    GPUDYN_ABI_RELEASE({
        if (array == nullptr) return;
        require_handle(array, handle_kind::vmm_array, "array"); // destroyed, foreign, garbage: refused
        {
            handle_call call(array->hs);
            cudaStream_t s = array->hs.release_stream();
            contiguous_free_meta(array->a, s);
            // The mapping is not stream-ordered: wait for the calls that used it.
            GPUDYN_CUDA(cudaEventSynchronize(array->hs.done));
            array->range.release();
        }
        array->hs.release();
        unregister_handle(array);
        delete array;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_reserve(gpudyn_vmm_array_t array, uint64_t capacity,
                                                    gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        handle_call call(array->hs, stream);
        // Mapping is a host call; kernels already queued keep their (smaller) capacity.
        const uint64_t before = array->a.capacity;
        array->grow(capacity);
        // A reservation that failed in a kernel left the counter above the size:
        // fold it so that kernels after this call can use the new capacity.
        if (array->a.capacity != before) contiguous_fold(array->a, call.stream());
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_push_back(gpudyn_vmm_array_t array, const void* values, uint64_t count,
                                                      const uint8_t* mask, gpudyn_insert_algo_t algorithm,
                                                      gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        contiguous_abi::push_back(array, values, count, mask, algorithm, stream, "VMM array");
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_size(gpudyn_vmm_array_t array, uint64_t* size, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        contiguous_abi::size(array, size, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_capacity(gpudyn_vmm_array_t array, uint64_t* capacity) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        contiguous_abi::capacity(array, capacity);
    });
}

// The bytes mapped: the capacity rounded up to the driver's granularity.
GPUDYN_API gpudyn_status_t gpudyn_vmm_array_allocated_bytes(gpudyn_vmm_array_t array, uint64_t* bytes) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        contiguous_abi::allocated_bytes(array, bytes);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_data(gpudyn_vmm_array_t array, void** data) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        contiguous_abi::data(array, data);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_flatten(gpudyn_vmm_array_t array, void* dst, uint64_t dst_bytes,
                                                    gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        contiguous_abi::copy_out(array, dst, dst_bytes, cudaMemcpyDeviceToDevice, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_copy_to_host(gpudyn_vmm_array_t array, void* dst, uint64_t dst_bytes,
                                                         gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        contiguous_abi::copy_out(array, dst, dst_bytes, cudaMemcpyDeviceToHost, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_size_async(gpudyn_vmm_array_t array, uint64_t* size,
                                                       gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        contiguous_abi::size_async(array, size, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_flatten_async(gpudyn_vmm_array_t array, void* dst, uint64_t dst_bytes,
                                                          uint64_t* size, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        contiguous_abi::flatten_async(array, dst, dst_bytes, size, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_clear(gpudyn_vmm_array_t array, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        contiguous_abi::clear(array, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_get_status(gpudyn_vmm_array_t array, uint32_t* status,
                                                       gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        array_get_status(array, status, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_clear_status(gpudyn_vmm_array_t array, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        array_clear_status(array, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_vmm_array_get_view(gpudyn_vmm_array_t array, gpudyn_vmm_array_view_t* view) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::vmm_array, "array");
        contiguous_abi::get_view(array, view, GPUDYN_VMM_ARRAY_VIEW_VERSION);
    });
}

} // extern "C"
