// C ABI of the static array: one cudaMalloc of `capacity` elements.
#include "array_common.cuh"

using namespace gpudyn;
using namespace gpudyn::detail;

struct gpudyn_static_array_s : contiguous_handle {};

extern "C" {

GPUDYN_API gpudyn_status_t gpudyn_static_array_options_init(gpudyn_static_array_options_t* options) {
    GPUDYN_ABI({ contiguous_abi::options_init(options); });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_create(gpudyn_static_array_t* array,
                                                      const gpudyn_static_array_options_t* options,
                                                      gpudyn_stream_t stream) {
    GPUDYN_ABI({
        contiguous_abi::begin_create(array, options);
        GPUDYN_REQUIRE(options->capacity > 0, "options->capacity is 0, expected > 0");
        GPUDYN_REQUIRE(options->capacity <= (UINT64_MAX / 16), "options->capacity is %llu, too large",
                       (unsigned long long)options->capacity);
        cudaStream_t s = to_cuda(stream);
        const int device = create_device(s); // the stream's device, else the current one
        device_guard on_device(device);
        auto* h = new gpudyn_static_array_s{};
        h->a.element_size = options->element_size;
        h->a.capacity = options->capacity;
        try {
            h->hs.init();
            contiguous_init(h->a, s);
            char what[96];
            std::snprintf(what, sizeof(what), "options->capacity is %llu", (unsigned long long)options->capacity);
            device_alloc(&h->a.data, options->capacity * options->element_size, s, what);
            h->a.bytes = options->capacity * options->element_size;
            GPUDYN_CUDA(cudaEventRecord(h->hs.done, s));
            register_handle(h, handle_kind::static_array);
        } catch (...) {
            if (h->a.data) cudaFreeAsync(h->a.data, s);
            if (h->a.meta) cudaFreeAsync(h->a.meta, s);
            h->hs.release();
            delete h;
            throw;
        }
        *array = h;
    });
}

// Frees stream-ordered after the array's last call (no device synchronization).
// A failure leaves the handle owning what it still holds: call destroy again.
GPUDYN_API gpudyn_status_t gpudyn_static_array_destroy(gpudyn_static_array_t array) {
    GPUDYN_ABI_RELEASE({
        if (array == nullptr) return;
        require_handle(array, handle_kind::static_array, "array"); // destroyed, foreign, garbage: refused
        {
            handle_call call(array->hs);
            cudaStream_t s = array->hs.release_stream();
            if (array->a.data) GPUDYN_CUDA(cudaFreeAsync(array->a.data, s));
            array->a.data = nullptr;
            contiguous_free_meta(array->a, s);
        }
        array->hs.release();
        unregister_handle(array);
        delete array;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_push_back(gpudyn_static_array_t array, const void* values,
                                                         uint64_t count, const uint8_t* mask,
                                                         gpudyn_insert_algo_t algorithm, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::static_array, "array");
        contiguous_abi::push_back(array, values, count, mask, algorithm, stream, "static array");
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_size(gpudyn_static_array_t array, uint64_t* size,
                                                    gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::static_array, "array");
        contiguous_abi::size(array, size, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_capacity(gpudyn_static_array_t array, uint64_t* capacity) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::static_array, "array");
        contiguous_abi::capacity(array, capacity);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_allocated_bytes(gpudyn_static_array_t array, uint64_t* bytes) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::static_array, "array");
        contiguous_abi::allocated_bytes(array, bytes);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_data(gpudyn_static_array_t array, void** data) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::static_array, "array");
        contiguous_abi::data(array, data);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_flatten(gpudyn_static_array_t array, void* dst, uint64_t dst_bytes,
                                                       gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::static_array, "array");
        contiguous_abi::copy_out(array, dst, dst_bytes, cudaMemcpyDeviceToDevice, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_copy_to_host(gpudyn_static_array_t array, void* dst, uint64_t dst_bytes,
                                                            gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::static_array, "array");
        contiguous_abi::copy_out(array, dst, dst_bytes, cudaMemcpyDeviceToHost, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_size_async(gpudyn_static_array_t array, uint64_t* size,
                                                          gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::static_array, "array");
        contiguous_abi::size_async(array, size, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_flatten_async(gpudyn_static_array_t array, void* dst, uint64_t dst_bytes,
                                                             uint64_t* size, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::static_array, "array");
        contiguous_abi::flatten_async(array, dst, dst_bytes, size, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_clear(gpudyn_static_array_t array, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::static_array, "array");
        contiguous_abi::clear(array, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_get_status(gpudyn_static_array_t array, uint32_t* status,
                                                          gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::static_array, "array");
        array_get_status(array, status, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_clear_status(gpudyn_static_array_t array, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::static_array, "array");
        array_clear_status(array, stream);
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_get_view(gpudyn_static_array_t array, gpudyn_static_array_view_t* view) {
    GPUDYN_ABI({
        require_handle(array, handle_kind::static_array, "array");
        contiguous_abi::get_view(array, view, GPUDYN_STATIC_ARRAY_VIEW_VERSION);
    });
}

} // extern "C"
