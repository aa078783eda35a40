/* Core ABI on a GPU: device information and a stream-ordered round trip. */
#include "check.h"

int main(void) {
    REQUIRE_DEVICE();
    gpudyn_device_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK_OK(gpudyn_get_device_info(0, &info));
    CHECK(info.name[0] != '\0');
    CHECK(info.compute_capability_major >= 7);
    CHECK(info.multiprocessor_count > 0);
    CHECK(info.total_memory > 0 && info.free_memory <= info.total_memory);
    CHECK(info.driver_version >= info.runtime_version / 1000 * 1000);
    printf("device: %s (sm_%d%d, %d SMs)\n", info.name, info.compute_capability_major, info.compute_capability_minor,
           info.multiprocessor_count);

    enum {
        N = 1 << 20
    };
    unsigned* host_in = malloc(N * sizeof(unsigned));
    unsigned* host_out = malloc(N * sizeof(unsigned));
    for (unsigned i = 0; i < N; ++i) host_in[i] = i * 2654435761u;
    void* d = NULL;
    CHECK_OK(gpudyn_device_alloc(&d, N * sizeof(unsigned), NULL));
    CHECK(d != NULL);
    CHECK_OK(gpudyn_memcpy(d, host_in, N * sizeof(unsigned), GPUDYN_MEMCPY_HOST_TO_DEVICE, NULL));
    CHECK_OK(gpudyn_memcpy(host_out, d, N * sizeof(unsigned), GPUDYN_MEMCPY_DEVICE_TO_HOST, NULL));
    CHECK_OK(gpudyn_stream_synchronize(NULL));
    CHECK(memcmp(host_in, host_out, N * sizeof(unsigned)) == 0);
    CHECK_OK(gpudyn_memset(d, 0xAB, N * sizeof(unsigned), NULL));
    CHECK_OK(gpudyn_memcpy(host_out, d, N * sizeof(unsigned), GPUDYN_MEMCPY_DEVICE_TO_HOST, NULL));
    CHECK_OK(gpudyn_stream_synchronize(NULL));
    CHECK(host_out[0] == 0xABABABABu && host_out[N - 1] == 0xABABABABu);
    CHECK_OK(gpudyn_device_free(d, NULL));
    /* An impossible allocation reports OUT_OF_MEMORY, not a generic CUDA error. */
    void* huge = NULL;
    CHECK_STATUS(gpudyn_device_alloc(&huge, (uint64_t)1 << 50, NULL), GPUDYN_ERROR_OUT_OF_MEMORY);
    CHECK(huge == NULL);
    free(host_in);
    free(host_out);
    return TEST_RESULT();
}
