// C ABI of the static array: one cudaMalloc of `capacity` elements.
#include "array_common.cuh"

using namespace gpudyn;
using namespace gpudyn::detail;

struct gpudyn_static_array_s {
    contiguous_state a;
};

extern "C" {

GPUDYN_API gpudyn_status_t gpudyn_static_array_options_init(gpudyn_static_array_options_t* options) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(options);
        *options = gpudyn_static_array_options_t{};
        options->struct_size = sizeof(*options);
        options->element_size = 4;
        options->capacity = 0;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_create(gpudyn_static_array_t* array,
                                                      const gpudyn_static_array_options_t* options,
                                                      gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        *array = nullptr;
        require_struct_size(options, "options");
        require_element_size(options->element_size, "options->element_size");
        GPUDYN_REQUIRE(options->capacity > 0, "options->capacity is 0, expected > 0");
        GPUDYN_REQUIRE(options->capacity <= (UINT64_MAX / 16), "options->capacity is %llu, too large",
                       (unsigned long long)options->capacity);
        require_device();
        auto* h = new gpudyn_static_array_s{};
        h->a.element_size = options->element_size;
        h->a.capacity = options->capacity;
        cudaStream_t s = to_cuda(stream);
        try {
            contiguous_init(h->a, s);
            GPUDYN_CUDA(cudaMallocAsync(&h->a.data, size_t(options->capacity * options->element_size), s));
        } catch (...) {
            cudaStreamSynchronize(s);
            if (h->a.data) cudaFree(h->a.data);
            contiguous_free_meta(h->a);
            delete h;
            throw;
        }
        *array = h;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_destroy(gpudyn_static_array_t array) {
    GPUDYN_ABI({
        if (array == nullptr) return;
        GPUDYN_CUDA(cudaDeviceSynchronize());  // kernels may still use the memory
        GPUDYN_CUDA(cudaFree(array->a.data));
        contiguous_free_meta(array->a);
        delete array;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_push_back(gpudyn_static_array_t array, const void* values,
                                                         uint64_t count, const uint8_t* mask,
                                                         gpudyn_insert_algo_t algorithm, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        contiguous_push(array->a, values, count, mask, algorithm, to_cuda(stream), "static array");
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_size(gpudyn_static_array_t array, uint64_t* size,
                                                    gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        GPUDYN_REQUIRE_NOT_NULL(size);
        *size = contiguous_size(array->a, to_cuda(stream));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_capacity(gpudyn_static_array_t array, uint64_t* capacity) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        GPUDYN_REQUIRE_NOT_NULL(capacity);
        *capacity = array->a.capacity;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_allocated_bytes(gpudyn_static_array_t array, uint64_t* bytes) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        GPUDYN_REQUIRE_NOT_NULL(bytes);
        *bytes = array->a.capacity * array->a.element_size;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_data(gpudyn_static_array_t array, void** data) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        GPUDYN_REQUIRE_NOT_NULL(data);
        *data = array->a.data;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_flatten(gpudyn_static_array_t array, void* dst, uint64_t dst_bytes,
                                                       gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        contiguous_copy_out(array->a, dst, dst_bytes, cudaMemcpyDeviceToDevice, to_cuda(stream));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_copy_to_host(gpudyn_static_array_t array, void* dst,
                                                            uint64_t dst_bytes, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        contiguous_copy_out(array->a, dst, dst_bytes, cudaMemcpyDeviceToHost, to_cuda(stream));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_clear(gpudyn_static_array_t array, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        contiguous_clear(array->a, to_cuda(stream));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_static_array_get_view(gpudyn_static_array_t array,
                                                        gpudyn_static_array_view_t* view) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(array);
        GPUDYN_REQUIRE_NOT_NULL(view);
        contiguous_fill_view(array->a, view, GPUDYN_STATIC_ARRAY_VIEW_VERSION);
    });
}

}  // extern "C"
