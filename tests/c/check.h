/* Minimal test harness for the C ABI tests: each CHECK prints the failing
 * expression with the library's message; a test returns 77 (meson's "skip")
 * when it needs a GPU and none is present. */
#ifndef GPUDYN_TESTS_CHECK_H
#define GPUDYN_TESTS_CHECK_H
#include <gpudyn/gpudyn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPUDYN_TEST_SKIP 77

static int gpudyn_test_failures = 0;

#define CHECK(cond)                                                                                   \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK(%s) failed; last message: %s\n", __FILE__, __LINE__, #cond, \
                    gpudyn_last_error_message());                                                     \
            ++gpudyn_test_failures;                                                                   \
        }                                                                                             \
    } while (0)

#define CHECK_STATUS(call, expected)                                                                        \
    do {                                                                                                    \
        gpudyn_status_t s_ = (call);                                                                        \
        if (s_ != (expected)) {                                                                             \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s; message: %s\n", __FILE__, __LINE__, #call, \
                    gpudyn_status_string(s_), gpudyn_status_string(expected), gpudyn_last_error_message()); \
            ++gpudyn_test_failures;                                                                         \
        }                                                                                                   \
    } while (0)

#define CHECK_OK(call) CHECK_STATUS(call, GPUDYN_SUCCESS)

/* The call must fail with INVALID_ARGUMENT and a message naming `argname`. */
#define CHECK_INVALID(call, argname)                                                                             \
    do {                                                                                                         \
        CHECK_STATUS(call, GPUDYN_ERROR_INVALID_ARGUMENT);                                                       \
        if (strstr(gpudyn_last_error_message(), argname) == NULL) {                                              \
            fprintf(stderr, "%s:%d: message of %s does not name '%s': %s\n", __FILE__, __LINE__, #call, argname, \
                    gpudyn_last_error_message());                                                                \
            ++gpudyn_test_failures;                                                                              \
        }                                                                                                        \
    } while (0)

static int gpudyn_test_has_device(void) {
    int32_t n = 0;
    return gpudyn_get_device_count(&n) == GPUDYN_SUCCESS && n > 0;
}

#define REQUIRE_DEVICE()                                                        \
    do {                                                                        \
        if (!gpudyn_test_has_device()) {                                        \
            printf("SKIP: no CUDA device (%s)\n", gpudyn_last_error_message()); \
            return GPUDYN_TEST_SKIP;                                            \
        }                                                                       \
    } while (0)

#define TEST_RESULT() \
    (gpudyn_test_failures == 0 ? (printf("OK\n"), 0) : (printf("%d check(s) failed\n", gpudyn_test_failures), 1))
#ifdef __cplusplus
extern "C++" { /* some tests include this header inside extern "C" */
#include <chrono>
/* Runs one part of a test and says so on stderr, with its seconds: a run cut
 * short by a time limit (or slowed 100x by a sanitizer) shows where it was. */
template <class F>
static void gpudyn_test_step(const char* name, F&& f) {
    fprintf(stderr, "== %s\n", name);
    fflush(stderr);
    const auto t0 = std::chrono::steady_clock::now();
    f();
    fprintf(stderr, "   %s: %.1f s\n", name,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}
}
#define STEP(call) gpudyn_test_step(#call, [&] { call; })
#endif
#endif
