/* gpudyn from plain C: print the library version and the first device.  Without
 * a device it says why on stderr and exits 77 (the test harnesses' "skipped").
 * Build: cc device_info.c $(pkg-config --cflags --libs gpudyn) */
#include <gpudyn/gpudyn.h>
#include <stdio.h>
#include <string.h>

/* Exit status meaning "skipped: needs a GPU" (meson, ctest SKIP_RETURN_CODE, automake). */
#define EXIT_NO_GPU 77

int main(void) {
    uint32_t v = gpudyn_get_version();
    printf("gpudyn %u.%u.%u\n", v / 10000, v / 100 % 100, v % 100);
    gpudyn_device_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    gpudyn_status_t s = gpudyn_get_device_info(0, &info);
    if (s != GPUDYN_SUCCESS) {
        fprintf(stderr, "%s: %s\n", gpudyn_status_string(s), gpudyn_last_error_message());
        return s == GPUDYN_ERROR_NO_DEVICE ? EXIT_NO_GPU : 1;
    }
    printf("%s, compute capability %d.%d, %d SMs, %.1f GiB\n", info.name, info.compute_capability_major,
           info.compute_capability_minor, info.multiprocessor_count, info.total_memory / 1073741824.0);
    return 0;
}
