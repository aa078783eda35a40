// Shared plumbing of the C ABI implementation (lib/*.cu).  Not installed.
//
// Inside the library, failures travel as gpudyn::detail::error exceptions; every
// exported function body runs inside abi_call(), which converts them (and any
// other C++ exception) into a status plus the thread-local message.  Nothing
// crosses the C boundary as an exception.
#pragma once

#include <gpudyn/gpudyn.h>

#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

namespace gpudyn {
inline namespace v0 {  // the device headers' versioned namespace: one gpudyn::detail
namespace detail {

struct error {
    gpudyn_status_t status;
    std::string message;
};

// Records `message` as this thread's last error (empty on success).
void set_last_error(const std::string& message);

[[noreturn]] void raise(gpudyn_status_t status, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));

// Status for a CUDA runtime error: allocation failures are OUT_OF_MEMORY (kept
// apart from other CUDA errors, as RMM does), a missing device/driver NO_DEVICE.
gpudyn_status_t status_of(cudaError_t err);

// Throws with "<what>: <cudaErrorName> (<description>)" when err != cudaSuccess.
void check_cuda(cudaError_t err, const char* what);
#define GPUDYN_CUDA(call) ::gpudyn::detail::check_cuda((call), #call)
// After a kernel launch: launch-configuration errors surface here.
#define GPUDYN_CHECK_LAUNCH(kernel_name) ::gpudyn::detail::check_cuda(cudaGetLastError(), "launch of " kernel_name)

template <class F>
gpudyn_status_t abi_call(const char* function, F&& body) noexcept {
    try {
        set_last_error(std::string());
        body();
        return GPUDYN_SUCCESS;
    } catch (const error& e) {
        set_last_error(std::string(function) + ": " + e.message);
        return e.status;
    } catch (const std::bad_alloc&) {
        set_last_error(std::string(function) + ": host memory exhausted");
        return GPUDYN_ERROR_OUT_OF_MEMORY;
    } catch (const std::exception& e) {
        set_last_error(std::string(function) + ": internal error: " + e.what());
        return GPUDYN_ERROR_INTERNAL;
    } catch (...) {
        set_last_error(std::string(function) + ": internal error: unknown exception");
        return GPUDYN_ERROR_INTERNAL;
    }
}
// Body of an exported function: GPUDYN_ABI({ ...statements... })
#define GPUDYN_ABI(...) return ::gpudyn::detail::abi_call(__func__, [&]() __VA_ARGS__)

// Argument checks: the message names the argument and the offending value.
#define GPUDYN_REQUIRE_NOT_NULL(arg)                                                        \
    do {                                                                                    \
        if ((arg) == nullptr)                                                               \
            ::gpudyn::detail::raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument '%s' is NULL", #arg); \
    } while (0)
#define GPUDYN_REQUIRE(cond, ...)                                                           \
    do {                                                                                    \
        if (!(cond)) ::gpudyn::detail::raise(GPUDYN_ERROR_INVALID_ARGUMENT, __VA_ARGS__);   \
    } while (0)

// Checks an option struct's size field against what this library knows.
template <class Options>
void require_struct_size(const Options* options, const char* name) {
    if (options == nullptr) raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument '%s' is NULL", name);
    if (options->struct_size < sizeof(Options))
        raise(GPUDYN_ERROR_INVALID_ARGUMENT, "%s->struct_size is %u, expected at least %zu (use the initializer)",
              name, unsigned(options->struct_size), sizeof(Options));
}

inline cudaStream_t to_cuda(gpudyn_stream_t s) { return reinterpret_cast<cudaStream_t>(s); }

// Throws NO_DEVICE / CUDA errors unless a CUDA device is usable; returns the current device.
int require_device();

// Grid size for a grid-stride loop over n items with `block` threads: enough
// blocks to fill every SM `blocks_per_sm` times, never more than needed.
unsigned grid_for(uint64_t n, unsigned block, unsigned blocks_per_sm = 8);

// Raises CUDA's device-malloc heap (cudaLimitMallocHeapSize) to at least
// `bytes` (0: leave it).  CUDA fixes the heap at the first launch of a kernel
// that uses device malloc, so a raise after that is refused: NOT_SUPPORTED with
// a message naming `option` (OUT_OF_MEMORY when the memory is not there).
void raise_device_malloc_heap(uint64_t bytes, const char* option);

// Driver entry point by name, resolved at run time through the runtime so the
// library never links libcuda (machines without a driver can still load it).
void* driver_entry_point(const char* symbol, int cuda_version);

}  // namespace detail
}  // namespace v0
}  // namespace gpudyn
