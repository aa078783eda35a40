/* Host-side checks of the core ABI: run with or without a GPU. */
#include "check.h"

int main(void) {
    CHECK(gpudyn_get_version() == GPUDYN_VERSION_NUMBER);
    CHECK(strcmp(gpudyn_status_string(GPUDYN_ERROR_OUT_OF_MEMORY), "GPUDYN_ERROR_OUT_OF_MEMORY") == 0);
    CHECK(strcmp(gpudyn_status_string((gpudyn_status_t)12345), "GPUDYN_STATUS_UNKNOWN") == 0);
    CHECK(gpudyn_last_error_message() != NULL);

    CHECK_INVALID(gpudyn_get_device_count(NULL), "count");
    CHECK_INVALID(gpudyn_get_device_info(0, NULL), "info");
    CHECK_INVALID(gpudyn_get_device(NULL), "device");
    CHECK_INVALID(gpudyn_stream_get_device(NULL, NULL), "device");
    CHECK_INVALID(gpudyn_pointer_get_device(NULL, NULL), "device");
    gpudyn_device_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = 4; /* too small: an older caller's struct */
    CHECK_INVALID(gpudyn_get_device_info(0, &info), "struct_size");
    CHECK_INVALID(gpudyn_get_cuda_versions(NULL, NULL), "runtime_version");
    int32_t rt = 0;
    CHECK_INVALID(gpudyn_get_cuda_versions(&rt, NULL), "driver_version");
    CHECK_INVALID(gpudyn_device_alloc(NULL, 16, NULL), "ptr");
    void* p = (void*)1;
    CHECK_INVALID(gpudyn_device_alloc(&p, 0, NULL), "bytes");
    CHECK(p == NULL); /* output cleared on failure */
    CHECK_OK(gpudyn_device_free(NULL, NULL));
    char host[8];
    CHECK_INVALID(gpudyn_memcpy(NULL, host, 8, GPUDYN_MEMCPY_HOST_TO_DEVICE, NULL), "dst");
    CHECK_INVALID(gpudyn_memcpy(host, NULL, 8, GPUDYN_MEMCPY_DEVICE_TO_HOST, NULL), "src");
    CHECK_INVALID(gpudyn_memcpy(host, host, 8, (gpudyn_memcpy_kind_t)99, NULL), "kind");
    CHECK_INVALID(gpudyn_memset(NULL, 0, 8, NULL), "dst");
    CHECK_INVALID(gpudyn_memset(host, 300, 8, NULL), "value");

    /* The runtime version is known without a GPU; without a driver the
     * driver version is 0 and device queries say NO_DEVICE. */
    int32_t drv = -1;
    CHECK_OK(gpudyn_get_cuda_versions(&rt, &drv));
    CHECK(rt >= 12000);
    int32_t n = -1;
    gpudyn_status_t s = gpudyn_get_device_count(&n);
    CHECK(s == GPUDYN_SUCCESS || s == GPUDYN_ERROR_NO_DEVICE);
    if (s == GPUDYN_ERROR_NO_DEVICE) {
        CHECK(n == 0);
        /* The message names the cause: no driver, a driver older than the
         * runtime's CUDA major version (both versions), or no device. */
        char want[160], want2[160];
        want2[0] = '\0';
        if (drv == 0) {
            snprintf(want, sizeof want, "no NVIDIA driver found (this library needs one supporting CUDA %d.0 or newer)",
                     (int)(rt / 1000));
        } else if (drv < rt / 1000 * 1000) {
            snprintf(want, sizeof want, "the NVIDIA driver supports CUDA %d.%d", (int)(drv / 1000),
                     (int)(drv % 1000 / 10));
            snprintf(want2, sizeof want2, "this library needs CUDA %d.0 or newer (update the driver)",
                     (int)(rt / 1000));
        } else { /* a driver new enough: no device, unless the runtime wants a newer minor version */
            snprintf(
                want, sizeof want, "%s",
                strstr(gpudyn_last_error_message(), "(update the driver)") ? "(update the driver)" : "no CUDA device");
        }
        CHECK(strstr(gpudyn_last_error_message(), want) != NULL);
        CHECK(strstr(gpudyn_last_error_message(), want2) != NULL);
        if (drv == 0) CHECK(strstr(gpudyn_last_error_message(), "no CUDA device") == NULL);
        info.struct_size = sizeof info;
        CHECK_STATUS(gpudyn_get_device_info(0, &info), GPUDYN_ERROR_NO_DEVICE);
        CHECK(strstr(gpudyn_last_error_message(), want) != NULL);
        int32_t dev = -1;
        CHECK_STATUS(gpudyn_get_device(&dev), GPUDYN_ERROR_NO_DEVICE);
        CHECK(strstr(gpudyn_last_error_message(), want) != NULL);
        p = (void*)1;
        CHECK_STATUS(gpudyn_device_alloc(&p, 16, NULL), GPUDYN_ERROR_NO_DEVICE);
        CHECK(strstr(gpudyn_last_error_message(), want) != NULL);
        CHECK(p == NULL);
        CHECK_STATUS(gpudyn_device_synchronize(), GPUDYN_ERROR_NO_DEVICE);
        CHECK(strstr(gpudyn_last_error_message(), "gpudyn_device_synchronize") != NULL);
    } else {
        info.struct_size = sizeof info;
        CHECK_INVALID(gpudyn_get_device_info(n, &info), "device");
        CHECK_INVALID(gpudyn_get_device_info(-1, &info), "device");
        CHECK_INVALID(gpudyn_set_device(n), "device");
        CHECK_INVALID(gpudyn_set_device(-1), "device");
        int32_t cur = -1, dev = -2;
        CHECK_OK(gpudyn_get_device(&cur));
        CHECK_OK(gpudyn_set_device(cur));
        CHECK_OK(gpudyn_stream_get_device(NULL, &dev)); /* the default stream: the current device */
        CHECK(dev == cur);
        dev = -2;
        CHECK_OK(gpudyn_pointer_get_device(host, &dev)); /* host memory is no device's */
        CHECK(dev == -1);
        void* d = NULL;
        CHECK_OK(gpudyn_device_alloc(&d, 16, NULL));
        CHECK_OK(gpudyn_pointer_get_device(d, &dev));
        CHECK(dev == cur);
        CHECK_OK(gpudyn_device_free(d, NULL));
        CHECK_OK(gpudyn_stream_synchronize(NULL));
        CHECK_OK(gpudyn_device_synchronize());
    }
    return TEST_RESULT();
}
