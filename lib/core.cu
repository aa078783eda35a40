// Core of the C ABI: version, statuses, the thread-local error message,
// device information and raw stream-ordered device memory.
#include "internal.hpp"

#include <cuda.h> // driver types and enums only; libcuda is never linked

#if __has_include("gpudyn_build_archs.h")
#include "gpudyn_build_archs.h" // written by lib/meson.build: GPUDYN_BUILD_SASS_ARCHS, GPUDYN_BUILD_PTX_ARCH
#else                           // compiled outside meson (.ci/archs.sh's PTX check): nothing to name
#define GPUDYN_BUILD_SASS_ARCHS ""
#define GPUDYN_BUILD_PTX_ARCH ""
#endif

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

namespace gpudyn {
inline namespace v0 { // the device headers' versioned namespace: one gpudyn::detail
namespace detail {

namespace {
thread_local std::string last_error_message;
}

void set_last_error(const std::string& message) { last_error_message = message; }

gpudyn_status_t fail(const char* function, gpudyn_status_t status, const std::string& message) noexcept {
    try {
        if (status == GPUDYN_SUCCESS) {
            set_last_error(std::string(function) + ": internal error: a failure reported GPUDYN_SUCCESS" +
                           (message.empty() ? std::string() : ": " + message));
            return GPUDYN_ERROR_INTERNAL;
        }
        if (message.empty())
            set_last_error(std::string(function) + ": failed with " + gpudyn_status_string(status) +
                           " (no further detail)");
        else set_last_error(std::string(function) + ": " + message);
    } catch (...) {
        // No host memory even for the message: the static text cannot fail.
        last_error_message.clear();
        try {
            last_error_message = "gpudyn: host memory exhausted while recording an error";
        } catch (...) {}
    }
    return status;
}

void raise(gpudyn_status_t status, const char* fmt, ...) {
    char buffer[1024];
    va_list args;
    va_start(args, fmt);
    std::vsnprintf(buffer, sizeof(buffer), fmt, args);
    va_end(args);
    throw error{status, buffer};
}

gpudyn_status_t status_of(cudaError_t err) {
    switch (err) {
        case cudaSuccess: return GPUDYN_SUCCESS;
        case cudaErrorMemoryAllocation: return GPUDYN_ERROR_OUT_OF_MEMORY;
        case cudaErrorNoDevice:
        case cudaErrorInsufficientDriver:
        case cudaErrorInvalidDevice:
        case cudaErrorDevicesUnavailable:
        case cudaErrorSystemDriverMismatch:
        case cudaErrorCompatNotSupportedOnDevice: return GPUDYN_ERROR_NO_DEVICE;
        case cudaErrorNotSupported: return GPUDYN_ERROR_NOT_SUPPORTED;
        default: return is_arch_error(err) ? GPUDYN_ERROR_NOT_SUPPORTED : GPUDYN_ERROR_CUDA;
    }
}

namespace {
// 13000 -> "13.0" (the form of cudaRuntimeGetVersion / cudaDriverGetVersion).
std::string format_cuda_version(int version) {
    char text[32];
    std::snprintf(text, sizeof(text), "%d.%d", version / 1000, version % 1000 / 10);
    return text;
}

// Why no device is usable when the driver is the cause: none installed, or one
// older than this library's CUDA runtime (both versions named); empty otherwise.
std::string driver_problem(cudaError_t err) {
    int runtime = 0, driver = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0; // 0 also means "no driver" when it succeeds
    cudaGetLastError();
    // Minor-version compatibility: a driver of CUDA M.0 runs any M.x runtime.
    int needed = runtime / 1000 * 1000;
    // the runtime says even that is too old
    if (driver >= needed && err == cudaErrorInsufficientDriver) needed = runtime;
    if (needed == 0) return std::string(); // unknown runtime version: nothing to compare against
    if (driver == 0)
        return "no NVIDIA driver found (this library needs one supporting CUDA " + format_cuda_version(needed) +
               " or newer)";
    if (driver < needed)
        return "the NVIDIA driver supports CUDA " + format_cuda_version(driver) + " but this library needs CUDA " +
               format_cuda_version(needed) + " or newer (update the driver)";
    return std::string();
}
} // namespace

void check_cuda(cudaError_t err, const char* what) {
    if (err == cudaSuccess) return;
    gpudyn_status_t status = status_of(err);
    if (status == GPUDYN_ERROR_NO_DEVICE) {
        cudaGetLastError(); // a missing device is not sticky; clear it
        const std::string problem = driver_problem(err);
        if (!problem.empty()) raise(status, "%s [%s: %s]", problem.c_str(), what, cudaGetErrorName(err));
        raise(status, "no CUDA device: %s (%s: %s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
    }
    // Cleared whatever it is (a sticky error stays sticky anyway): left pending, it
    // would be read as the failure of this thread's next kernel launch.
    cudaGetLastError();
    if (is_arch_error(err)) {
        // no code for this device in the build (not sticky: the context stays usable)
        int device = -1, major = 0, minor = 0;
        if (cudaGetDevice(&device) != cudaSuccess ||
            cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
            cudaGetLastError();
        raise(status, "%s",
              arch_mismatch_message(device, major, minor, err, what, GPUDYN_BUILD_SASS_ARCHS, GPUDYN_BUILD_PTX_ARCH)
                  .c_str());
    }
    raise(status, "%s failed: %s (%s)", what, cudaGetErrorName(err), cudaGetErrorString(err));
}

void device_alloc(void** ptr, uint64_t bytes, cudaStream_t stream, const std::string& what) {
    *ptr = nullptr;
    if (bytes > uint64_t(SIZE_MAX))
        raise(GPUDYN_ERROR_OUT_OF_MEMORY, "%s: %llu bytes do not fit in size_t", what.c_str(),
              (unsigned long long)bytes);
    const cudaError_t err = cudaMallocAsync(ptr, size_t(bytes), stream);
    if (err == cudaSuccess) return;
    *ptr = nullptr;
    // With a valid stream, an invalid value can only be the size: as unsatisfiable as too large.
    const gpudyn_status_t status = err == cudaErrorInvalidValue ? GPUDYN_ERROR_OUT_OF_MEMORY : status_of(err);
    cudaGetLastError(); // never left pending (see check_cuda)
    raise(status, "%s: %llu bytes of device memory could not be allocated (%s: %s)", what.c_str(),
          (unsigned long long)bytes, cudaGetErrorName(err), cudaGetErrorString(err));
}

void report_since_check(uint64_t failed, uint64_t bad, check_marks* seen, const char* failed_what, const char* bad_what,
                        const std::string& hint) {
    const uint64_t new_failed = failed - std::min(seen->failed, failed), new_bad = bad - std::min(seen->bad, bad);
    seen->failed = failed;
    seen->bad = bad;
    if (new_failed != 0) {
        char also[128] = "";
        if (new_bad != 0) snprintf(also, sizeof(also), " (and %llu %s)", (unsigned long long)new_bad, bad_what);
        raise(GPUDYN_ERROR_OUT_OF_MEMORY, "%llu %s since the last check%s%s", (unsigned long long)new_failed,
              failed_what, also, hint.c_str());
    }
    if (new_bad != 0)
        raise(GPUDYN_ERROR_INVALID_ARGUMENT, "%llu %s since the last check; nothing changed",
              (unsigned long long)new_bad, bad_what);
}

void raise_device_malloc_heap(uint64_t bytes, const char* option) {
    if (bytes == 0) return;
    size_t current = 0;
    GPUDYN_CUDA(cudaDeviceGetLimit(&current, cudaLimitMallocHeapSize));
    if (current >= bytes) return;
    const cudaError_t err = cudaDeviceSetLimit(cudaLimitMallocHeapSize, size_t(bytes));
    size_t now = 0;
    if (err == cudaSuccess) GPUDYN_CUDA(cudaDeviceGetLimit(&now, cudaLimitMallocHeapSize));
    if (err == cudaSuccess && now >= bytes) return;
    if (err != cudaSuccess) cudaGetLastError(); // not sticky: clear it
    raise(err == cudaErrorMemoryAllocation ? GPUDYN_ERROR_OUT_OF_MEMORY : GPUDYN_ERROR_NOT_SUPPORTED,
          "%s is %llu but the device malloc heap (cudaLimitMallocHeapSize) is %zu bytes and can no longer grow "
          "(%s): a kernel using device malloc has already run in this process. Raise it before the first such "
          "kernel (the first structure created can), or pass 0",
          option, (unsigned long long)bytes, current, err != cudaSuccess ? cudaGetErrorName(err) : "limit not applied");
}

namespace {
// Number of CUDA devices (> 0); throws NO_DEVICE saying why there is none.
int device_count() {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaSuccess && count > 0) return count;
    cudaGetLastError();
    // A driver too old for this runtime (or none) also ends here: say so, with both versions.
    const std::string problem = driver_problem(err);
    if (!problem.empty()) raise(GPUDYN_ERROR_NO_DEVICE, "%s", problem.c_str());
    raise(GPUDYN_ERROR_NO_DEVICE, "no CUDA device (%s)",
          err != cudaSuccess ? cudaGetErrorString(err) : "the driver reports 0 devices");
}
} // namespace

int require_device() {
    device_count();
    int device = 0;
    GPUDYN_CUDA(cudaGetDevice(&device));
    return device;
}

namespace {
// Multiprocessor counts by device ordinal (0: not asked yet); any thread may
// fill an entry, every writer stores the same value.
constexpr int kCachedDevices = 64;
std::atomic<int> sm_counts[kCachedDevices];
} // namespace

int sm_count(int device) {
    if (device >= 0 && device < kCachedDevices) {
        const int cached = sm_counts[device].load(std::memory_order_relaxed);
        if (cached > 0) return cached;
    }
    int count = 0;
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || count <= 0) {
        cudaGetLastError(); // not sticky: a grid of one SM's worth still works
        return 1;
    }
    if (device >= 0 && device < kCachedDevices) sm_counts[device].store(count, std::memory_order_relaxed);
    return count;
}

unsigned grid_for(uint64_t n, unsigned block, unsigned blocks_per_sm) {
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) cudaGetLastError();
    const uint64_t needed = n / block + (n % block != 0);
    const uint64_t full = uint64_t(sm_count(device)) * blocks_per_sm;
    return unsigned(std::max<uint64_t>(1, std::min(needed, full)));
}

device_guard::device_guard(int device) {
    int current = 0;
    GPUDYN_CUDA(cudaGetDevice(&current));
    if (current == device) return;
    GPUDYN_CUDA(cudaSetDevice(device));
    previous_ = current;
}

device_guard::~device_guard() {
    if (previous_ >= 0 && cudaSetDevice(previous_) != cudaSuccess) cudaGetLastError();
}

namespace {
// The device of a non-default stream; -1 for the default streams (0,
// cudaStreamLegacy, cudaStreamPerThread: the current device's) and where a
// driver older than CUDA 12.8 cannot tell.  INVALID_ARGUMENT naming `arg` for
// a handle that is not a stream.
int stream_device(cudaStream_t stream, const char* arg) {
    if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return -1;
    int owner = -1;
    const cudaError_t err = cudaStreamGetDevice(stream, &owner);
    if (err == cudaSuccess) return owner;
    cudaGetLastError();
    if (err == cudaErrorInvalidResourceHandle || err == cudaErrorContextIsDestroyed)
        raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument '%s' (%p) is not a CUDA stream (%s)", arg,
              static_cast<void*>(stream), cudaGetErrorName(err));
    return -1;
}
} // namespace

void require_stream_on(int device, cudaStream_t stream, const char* arg) {
    const int owner = stream_device(stream, arg);
    if (owner >= 0 && owner != device)
        raise(GPUDYN_ERROR_INVALID_ARGUMENT,
              "argument '%s' is a stream of device %d, but the structure lives on device %d: pass a stream of "
              "device %d (0 is that device's default stream)",
              arg, owner, device, device);
}

int create_device(cudaStream_t stream) {
    const int current = require_device();
    const int owner = stream_device(stream, "stream");
    return owner >= 0 ? owner : current;
}

cudaStream_t internal_stream(int device) {
    static std::mutex mutex;
    static std::vector<cudaStream_t> streams; // by device ordinal; never destroyed
    std::lock_guard<std::mutex> lock(mutex);
    if (device < 0) raise(GPUDYN_ERROR_INTERNAL, "internal_stream of device %d", device);
    if (size_t(device) >= streams.size()) streams.resize(size_t(device) + 1, nullptr);
    if (streams[device] == nullptr) {
        cudaStream_t s = nullptr;
        GPUDYN_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        streams[device] = s;
    }
    return streams[device];
}

void handle_state::init() {
    GPUDYN_CUDA(cudaGetDevice(&device));
    GPUDYN_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
}

cudaStream_t handle_state::release_stream() {
    cudaStream_t s = internal_stream(device);
    GPUDYN_CUDA(cudaStreamWaitEvent(s, done, 0));
    return s;
}

void handle_state::release() noexcept {
    if (done != nullptr && cudaEventDestroy(done) != cudaSuccess) cudaGetLastError();
    done = nullptr;
}

handle_call::handle_call(handle_state& h, gpudyn_stream_t stream, const char* stream_arg)
    : lock_(h.mutex), device_(h.device), h_(h), stream_(to_cuda(stream)) {
    require_stream_on(h.device, stream_, stream_arg);
    GPUDYN_CUDA(cudaStreamWaitEvent(stream_, h.done, 0));
    ordered_ = true;
}

handle_call::handle_call(handle_state& h) : lock_(h.mutex), device_(h.device), h_(h) {}

handle_call::~handle_call() {
    // Also after a failure: whatever the call queued is ordered before the next one.
    if (ordered_ && cudaEventRecord(h_.done, stream_) != cudaSuccess) cudaGetLastError();
}

void* driver_entry_point(const char* symbol, int cuda_version) {
    require_device();
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    GPUDYN_CUDA(cudaGetDriverEntryPointByVersion(symbol, &fn, cuda_version, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || fn == nullptr)
        raise(GPUDYN_ERROR_NOT_SUPPORTED, "the installed driver has no %s (CUDA %d API)", symbol, cuda_version);
    return fn;
}

void require_address(const void* ptr, const char* arg) {
    if (ptr == nullptr) raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument '%s' is NULL", arg);
    if (reinterpret_cast<uintptr_t>(ptr) < kMinAddress)
        raise(GPUDYN_ERROR_INVALID_ARGUMENT,
              "argument '%s' is %p, not a valid address (the first %llu KiB of the address space are never mapped)",
              arg, ptr, (unsigned long long)(kMinAddress >> 10));
}

namespace {
// The live handles and their kinds.  Never destroyed: destroy calls may come
// from garbage collectors after static destructors have run.
struct handle_registry {
    std::shared_mutex mutex;
    std::unordered_map<const void*, handle_kind> live;
};
handle_registry& registry() {
    static handle_registry* r = new handle_registry;
    return *r;
}
const char* handle_kind_name(handle_kind k) {
    switch (k) {
        case handle_kind::heap: return "gpudyn_heap_t";
        case handle_kind::rw_heap: return "gpudyn_rw_heap_t";
        case handle_kind::warp_heap: return "gpudyn_warp_heap_t";
        case handle_kind::ggarray: return "gpudyn_ggarray_t";
        case handle_kind::static_array: return "gpudyn_static_array_t";
        case handle_kind::vmm_array: return "gpudyn_vmm_array_t";
    }
    return "handle";
}
} // namespace

void require_handle(const void* handle, handle_kind kind, const char* arg) {
    require_address(handle, arg);
    handle_registry& r = registry();
    std::shared_lock<std::shared_mutex> lock(r.mutex);
    const auto it = r.live.find(handle);
    if (it == r.live.end())
        raise(GPUDYN_ERROR_INVALID_ARGUMENT,
              "argument '%s' (%p) is not a live %s: destroyed already, never created, or not a handle of this library",
              arg, handle, handle_kind_name(kind));
    if (it->second != kind)
        raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument '%s' (%p) is a %s, expected a %s", arg, handle,
              handle_kind_name(it->second), handle_kind_name(kind));
}

void register_handle(const void* handle, handle_kind kind) {
    handle_registry& r = registry();
    std::unique_lock<std::shared_mutex> lock(r.mutex);
    r.live[handle] = kind;
}

void unregister_handle(const void* handle) noexcept {
    handle_registry& r = registry();
    std::unique_lock<std::shared_mutex> lock(r.mutex);
    r.live.erase(handle);
}

void require_known_struct_size(uint32_t struct_size, const char* name, const size_t* known, size_t count) {
    for (size_t i = 0; i < count; ++i)
        if (struct_size == known[i]) return;
    char sizes[128] = "";
    size_t used = 0;
    for (size_t i = 0; i < count && used < sizeof(sizes); ++i)
        used += size_t(std::snprintf(sizes + used, sizeof(sizes) - used, "%s%zu",
                                     i == 0 ? "" : (i + 1 == count ? " or " : ", "), known[i]));
    raise(GPUDYN_ERROR_INVALID_ARGUMENT,
          "%s->struct_size is %u, expected %s%s (the size of %s published layout; use the initializer or sizeof)", name,
          unsigned(struct_size), count > 1 ? "exactly " : "", sizes, count > 1 ? "a" : "its");
}

uint64_t buffer_bytes(uint64_t count, uint64_t element_bytes, const char* count_arg, const char* arg) {
    if (element_bytes != 0 && count > kMaxBufferBytes / element_bytes)
        raise(GPUDYN_ERROR_INVALID_ARGUMENT,
              "argument '%s' is %llu: %llu elements of %llu bytes in '%s' are more than any address space holds "
              "(2^57 bytes)",
              count_arg, (unsigned long long)count, (unsigned long long)count, (unsigned long long)element_bytes, arg);
    return count * element_bytes;
}

namespace {

const char* memory_type_name(cudaMemoryType t) {
    switch (t) {
        case cudaMemoryTypeUnregistered: return "unregistered (pageable host memory or an address CUDA does not know)";
        case cudaMemoryTypeHost: return "pinned host memory";
        case cudaMemoryTypeDevice: return "device memory";
        case cudaMemoryTypeManaged: return "managed memory";
    }
    return "memory of an unknown type";
}

// cudaDevAttrPageableMemoryAccess of `device` (cached; 0 when it cannot be read).
bool pageable_access(int device) {
    constexpr int kCached = 64;
    static std::atomic<int> cache[kCached]; // 0: not asked yet, 1: no, 2: yes
    if (device >= 0 && device < kCached) {
        const int c = cache[device].load(std::memory_order_relaxed);
        if (c != 0) return c == 2;
    }
    int v = 0;
    if (cudaDeviceGetAttribute(&v, cudaDevAttrPageableMemoryAccess, device) != cudaSuccess) {
        cudaGetLastError(); // not sticky: read as "no"
        v = 0;
    }
    if (device >= 0 && device < kCached) cache[device].store(v ? 2 : 1, std::memory_order_relaxed);
    return v != 0;
}

using address_range_fn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);

// cuMemGetAddressRange, or nullptr where the driver has none (resolved once).
address_range_fn address_range() {
    static const address_range_fn fn = []() -> address_range_fn {
        try {
            return reinterpret_cast<address_range_fn>(driver_entry_point("cuMemGetAddressRange", 12000));
        } catch (...) {
            cudaGetLastError();
            return nullptr;
        }
    }();
    return fn;
}

// The allocation holding `address`: true with its range, false where the driver cannot tell.
bool allocation_of(uint64_t address, uint64_t* base, uint64_t* bytes) {
    const address_range_fn fn = address_range();
    if (fn == nullptr) return false;
    CUdeviceptr b = 0;
    size_t n = 0;
    const CUresult r = fn(&b, &n, CUdeviceptr(address));
    cudaGetLastError(); // the driver call sets no runtime error; cleared anyway (see check_cuda)
    if (r != CUDA_SUCCESS || n == 0 || uint64_t(b) > address || address - uint64_t(b) >= n) return false;
    *base = uint64_t(b);
    *bytes = uint64_t(n);
    return true;
}

using retain_fn = CUresult (*)(CUmemGenericAllocationHandle*, void*);
using release_fn = CUresult (*)(CUmemGenericAllocationHandle);
using pointer_attribute_fn = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);

// True when `address` lies in memory mapped with cuMemMap (the driver's VMM)
// that no stream-ordered pool hands out: a chunk of a range like the VMM
// array's, whose next chunk may follow it.  False where the driver cannot tell.
bool vmm_mapping(uint64_t address) {
    struct fns {
        retain_fn retain = nullptr;
        release_fn release = nullptr;
        pointer_attribute_fn attribute = nullptr;
    };
    static const fns f = [] {
        fns r;
        try {
            r.retain = reinterpret_cast<retain_fn>(driver_entry_point("cuMemRetainAllocationHandle", 12000));
            r.release = reinterpret_cast<release_fn>(driver_entry_point("cuMemRelease", 12000));
            r.attribute = reinterpret_cast<pointer_attribute_fn>(driver_entry_point("cuPointerGetAttribute", 12000));
        } catch (...) {
            cudaGetLastError();
            r = fns{};
        }
        return r;
    }();
    if (f.retain == nullptr || f.release == nullptr || f.attribute == nullptr) return false;
    CUmemoryPool pool = nullptr;
    if (f.attribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, CUdeviceptr(address)) != CUDA_SUCCESS ||
        pool != nullptr)
        return false; // a pool's allocations are its own ranges, whatever backs them
    CUmemGenericAllocationHandle h{};
    if (f.retain(&h, reinterpret_cast<void*>(address)) != CUDA_SUCCESS) return false;
    f.release(h);
    return true;
}

// Raises unless [address, address + bytes) lies in the allocation holding `address`
// (for VMM mappings, and the mappings that follow it without a gap: the chunks of
// one range); nothing when the driver cannot tell the allocation's extent.
void require_extent(uint64_t address, uint64_t bytes, const void* ptr, uint64_t count, uint64_t element_bytes,
                    const char* arg, const char* count_arg) {
    uint64_t base = 0, size = 0;
    if (!allocation_of(address, &base, &size)) return;
    const uint64_t want_end = address + bytes; // no wrap: checked by the caller
    uint64_t end = base + size;
    // A VMM range is mapped in chunks, each its own range for the driver: follow
    // them while they touch (bounded: past the limit the rest is not checked).
    // Other allocations (cudaMalloc, a pool's) may lie next to each other: never followed.
    constexpr int kMaxRanges = 1024;
    int steps = 0;
    if (end < want_end && vmm_mapping(address)) {
        while (end < want_end && steps++ < kMaxRanges) {
            uint64_t next_base = 0, next_size = 0;
            if (!allocation_of(end, &next_base, &next_size) || next_base != end || !vmm_mapping(end)) break;
            end = next_base + next_size;
        }
    }
    cudaGetLastError(); // the driver calls set no runtime error; cleared anyway
    if (end >= want_end || steps > kMaxRanges) return;
    raise(GPUDYN_ERROR_INVALID_ARGUMENT,
          "argument '%s' is %llu, but '%s' (%p) has %llu bytes up to the end of its allocation (%llu bytes at "
          "0x%llx), fewer than the %llu bytes %llu elements of %llu bytes need",
          count_arg, (unsigned long long)count, arg, ptr, (unsigned long long)(end - address), (unsigned long long)size,
          (unsigned long long)base, (unsigned long long)bytes, (unsigned long long)count,
          (unsigned long long)element_bytes);
}

// Host memory the CUDA driver does not know (pageable): raises unless every page
// of [address, address + bytes) is mapped in this process (msync reports ENOMEM
// for a range with a hole), so that neither the library's host copies nor a
// device reaching pageable memory (HMM, ATS) touch an unmapped address.
void require_host_mapped(uint64_t address, uint64_t bytes, const void* ptr, uint64_t count, const char* arg,
                         const char* count_arg) {
    static const uint64_t page = [] {
        const long p = sysconf(_SC_PAGESIZE);
        return p > 0 ? uint64_t(p) : uint64_t(4096);
    }();
    const uint64_t first = address / page * page;
    const uint64_t end = (address + bytes + page - 1) / page * page; // no wrap: address + bytes <= 2^64 - page
    if (msync(reinterpret_cast<void*>(first), size_t(end - first), MS_ASYNC) == 0 || errno != ENOMEM) return;
    raise(GPUDYN_ERROR_INVALID_ARGUMENT,
          "argument '%s' is %llu, but '%s' (%p) is host memory of which part of the %llu bytes from there is not "
          "mapped in this process",
          count_arg, (unsigned long long)count, arg, ptr, (unsigned long long)bytes);
}

} // namespace

void require_buffer(const void* ptr, uint64_t count, uint64_t element_bytes, uint64_t alignment, memory_use use,
                    int device, const char* arg, const char* count_arg) {
    if (count == 0) return;
    require_address(ptr, arg);
    const uint64_t address = reinterpret_cast<uintptr_t>(ptr);
    if (alignment > 1 && address % alignment != 0)
        raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument '%s' (%p) is not aligned to %llu bytes (its elements' %s)", arg,
              ptr, (unsigned long long)alignment, alignment == element_bytes ? "size" : "alignment");
    const uint64_t bytes = buffer_bytes(count, element_bytes, count_arg, arg);
    constexpr uint64_t kTop = ~uint64_t(0) - (uint64_t(1) << 30); // room for the page rounding below
    if (address > kTop || bytes > kTop - address)
        raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument '%s' is %llu: '%s' (%p) plus %llu bytes wraps the address space",
              count_arg, (unsigned long long)count, arg, ptr, (unsigned long long)bytes);
    // On the structure's device: a pinned buffer's devicePointer is that device's.
    std::optional<device_guard> on_device;
    if (use == memory_use::device) on_device.emplace(device);
    cudaPointerAttributes attr;
    std::memset(&attr, 0, sizeof(attr));
    const cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
    if (err != cudaSuccess) {
        cudaGetLastError(); // never left pending (see check_cuda)
        // Memory CUDA cannot tell about: the host's, where it is mapped.
        if (use == memory_use::host || (use == memory_use::device && pageable_access(device)))
            return require_host_mapped(address, bytes, ptr, count, arg, count_arg);
        raise(GPUDYN_ERROR_INVALID_ARGUMENT,
              "argument '%s' (%p) is not memory CUDA knows (cudaPointerGetAttributes: %s), expected device memory", arg,
              ptr, cudaGetErrorName(err));
    }
    uint64_t extent_address = address; // the address the driver knows the allocation by
    switch (attr.type) {
        case cudaMemoryTypeDevice:
            if (use == memory_use::host)
                raise(GPUDYN_ERROR_INVALID_ARGUMENT,
                      "argument '%s' (%p) is device memory (of device %d), expected host memory", arg, ptr,
                      attr.device);
            if (use == memory_use::device && attr.device != device)
                raise(GPUDYN_ERROR_INVALID_ARGUMENT,
                      "argument '%s' (%p) is device memory of device %d, but the structure lives on device %d", arg,
                      ptr, attr.device, device);
            break;
        case cudaMemoryTypeManaged: break;
        case cudaMemoryTypeHost:
            if (use == memory_use::host) {
                if (attr.devicePointer == nullptr) return; // not mapped: no extent to ask for
                extent_address = reinterpret_cast<uintptr_t>(attr.devicePointer);
                break;
            }
            if (attr.devicePointer != ptr)
                raise(GPUDYN_ERROR_INVALID_ARGUMENT,
                      "argument '%s' (%p) is pinned host memory that %s at this address (its device pointer is %p): "
                      "pass device memory, or the pointer cudaHostGetDevicePointer gives",
                      arg, ptr, use == memory_use::device ? "the structure's device cannot reach" : "no device maps",
                      attr.devicePointer);
            break;
        case cudaMemoryTypeUnregistered:
        default:
            // Pageable host memory: the driver knows no extent, the process's mappings tell.
            if (use == memory_use::host || (use == memory_use::device && pageable_access(device)))
                return require_host_mapped(address, bytes, ptr, count, arg, count_arg);
            if (use == memory_use::device)
                raise(GPUDYN_ERROR_INVALID_ARGUMENT,
                      "argument '%s' (%p) is %s, expected device memory of device %d (it cannot access pageable "
                      "memory)",
                      arg, ptr, memory_type_name(attr.type), device);
            raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument '%s' (%p) is %s, expected device memory", arg, ptr,
                  memory_type_name(attr.type));
    }
    require_extent(extent_address, bytes, ptr, count, element_bytes, arg, count_arg);
}

bool vmm_supported(int device) {
    int vmm = 0;
    // The runtime has no enumerator for this driver attribute; its value is shared.
    GPUDYN_CUDA(cudaDeviceGetAttribute(
        &vmm, static_cast<cudaDeviceAttr>(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED), device));
    return vmm != 0;
}

void require_vmm(int device) {
    if (!vmm_supported(device))
        raise(GPUDYN_ERROR_NOT_SUPPORTED, "device %d does not support virtual memory management", device);
}

} // namespace detail
} // namespace v0
} // namespace gpudyn

using namespace gpudyn::detail;

extern "C" {

GPUDYN_API uint32_t gpudyn_get_version(void) { return GPUDYN_VERSION_NUMBER; }

GPUDYN_API const char* gpudyn_status_string(gpudyn_status_t status) {
    switch (status) {
        case GPUDYN_SUCCESS: return "GPUDYN_SUCCESS";
        case GPUDYN_ERROR_INVALID_ARGUMENT: return "GPUDYN_ERROR_INVALID_ARGUMENT";
        case GPUDYN_ERROR_OUT_OF_MEMORY: return "GPUDYN_ERROR_OUT_OF_MEMORY";
        case GPUDYN_ERROR_NO_DEVICE: return "GPUDYN_ERROR_NO_DEVICE";
        case GPUDYN_ERROR_CUDA: return "GPUDYN_ERROR_CUDA";
        case GPUDYN_ERROR_NOT_SUPPORTED: return "GPUDYN_ERROR_NOT_SUPPORTED";
        case GPUDYN_ERROR_INTERNAL: return "GPUDYN_ERROR_INTERNAL";
    }
    return "GPUDYN_STATUS_UNKNOWN";
}

GPUDYN_API const char* gpudyn_last_error_message(void) { return last_error_message.c_str(); }

GPUDYN_API gpudyn_status_t gpudyn_get_device_count(int32_t* count) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(count);
        *count = 0;
        *count = device_count();
    });
}

GPUDYN_API gpudyn_status_t gpudyn_get_device(int32_t* device) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(device);
        *device = require_device();
    });
}

GPUDYN_API gpudyn_status_t gpudyn_set_device(int32_t device) {
    GPUDYN_ABI({
        const int count = device_count();
        GPUDYN_REQUIRE(device >= 0 && device < count, "argument 'device' is %d, expected 0 <= device < %d", int(device),
                       count);
        GPUDYN_CUDA(cudaSetDevice(device));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_stream_get_device(gpudyn_stream_t stream, int32_t* device) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(device);
        *device = -1;
        *device = create_device(to_cuda(stream));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_pointer_get_device(const void* ptr, int32_t* device) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(device);
        *device = -1;
        if (ptr == nullptr) return;
        require_device();
        cudaPointerAttributes attr;
        if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) { // memory CUDA cannot tell about: -1
            cudaGetLastError();                                    // never left pending (see check_cuda)
            return;
        }
        if (attr.type == cudaMemoryTypeDevice) *device = attr.device;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_get_cuda_versions(int32_t* runtime_version, int32_t* driver_version) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(runtime_version);
        GPUDYN_REQUIRE_NOT_NULL(driver_version);
        int rt = 0, drv = 0;
        GPUDYN_CUDA(cudaRuntimeGetVersion(&rt));
        if (cudaDriverGetVersion(&drv) != cudaSuccess) drv = 0; // 0 means "no driver"
        *runtime_version = rt;
        *driver_version = drv;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_get_build_archs(const char** sass_archs, const char** ptx_arch) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(sass_archs);
        GPUDYN_REQUIRE_NOT_NULL(ptx_arch);
        *sass_archs = GPUDYN_BUILD_SASS_ARCHS;
        *ptx_arch = GPUDYN_BUILD_PTX_ARCH;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_trim(int32_t device, uint64_t* bytes) {
    GPUDYN_ABI({
        if (bytes) {
            require_address(bytes, "bytes");
            *bytes = 0;
        }
        const int count = device_count();
        GPUDYN_REQUIRE(device >= 0 && device < count, "argument 'device' is %d, expected 0 <= device < %d", int(device),
                       count);
        const uint64_t n = growth_reserve_release(device);
        if (bytes) *bytes = n;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_get_device_info(int32_t device, gpudyn_device_info_t* info) {
    GPUDYN_ABI({
        require_struct_size(info, "info");
        const int count = device_count();
        GPUDYN_REQUIRE(device >= 0 && device < count, "argument 'device' is %d, expected 0 <= device < %d", int(device),
                       count);
        cudaDeviceProp prop;
        GPUDYN_CUDA(cudaGetDeviceProperties(&prop, device));
        clear_out_struct(info);
        info->device = device;
        std::snprintf(info->name, sizeof(info->name), "%s", prop.name);
        info->compute_capability_major = prop.major;
        info->compute_capability_minor = prop.minor;
        info->multiprocessor_count = prop.multiProcessorCount;
        info->warp_size = prop.warpSize;
        info->total_memory = prop.totalGlobalMem;
        info->l2_cache_bytes = uint64_t(prop.l2CacheSize);
        int current = 0;
        GPUDYN_CUDA(cudaGetDevice(&current));
        if (current == device) {
            size_t free_b = 0, total_b = 0;
            GPUDYN_CUDA(cudaMemGetInfo(&free_b, &total_b));
            info->free_memory = free_b;
        }
        int rt = 0, drv = 0;
        GPUDYN_CUDA(cudaRuntimeGetVersion(&rt));
        GPUDYN_CUDA(cudaDriverGetVersion(&drv));
        info->runtime_version = rt;
        info->driver_version = drv;
        int vmm = 0;
        // The runtime has no enumerator for this driver attribute; its value is shared.
        if (cudaDeviceGetAttribute(&vmm,
                                   static_cast<cudaDeviceAttr>(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED),
                                   device) != cudaSuccess) {
            cudaGetLastError();
            vmm = 0;
        }
        info->vmm_supported = vmm;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_device_alloc(void** ptr, uint64_t bytes, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        GPUDYN_REQUIRE_NOT_NULL(ptr);
        *ptr = nullptr;
        GPUDYN_REQUIRE(bytes > 0, "argument 'bytes' is 0, expected > 0");
        require_device();
        void* p = nullptr;
        device_alloc(&p, bytes, to_cuda(stream), "argument 'bytes'");
        *ptr = p;
    });
}

GPUDYN_API gpudyn_status_t gpudyn_device_free(void* ptr, gpudyn_stream_t stream) {
    GPUDYN_ABI_RELEASE({
        if (ptr == nullptr) return;
        require_address(ptr, "ptr");
        GPUDYN_CUDA(cudaFreeAsync(ptr, to_cuda(stream)));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_memcpy(void* dst, const void* src, uint64_t bytes, gpudyn_memcpy_kind_t kind,
                                         gpudyn_stream_t stream) {
    GPUDYN_ABI({
        if (bytes == 0) return;
        GPUDYN_REQUIRE_NOT_NULL(dst);
        GPUDYN_REQUIRE_NOT_NULL(src);
        cudaMemcpyKind k;
        switch (kind) {
            case GPUDYN_MEMCPY_HOST_TO_DEVICE: k = cudaMemcpyHostToDevice; break;
            case GPUDYN_MEMCPY_DEVICE_TO_HOST: k = cudaMemcpyDeviceToHost; break;
            case GPUDYN_MEMCPY_DEVICE_TO_DEVICE: k = cudaMemcpyDeviceToDevice; break;
            default:
                raise(GPUDYN_ERROR_INVALID_ARGUMENT, "argument 'kind' is %d, expected a gpudyn_memcpy_kind_t",
                      int(kind));
        }
        buffer_bytes(bytes, 1, "bytes", "dst");
        require_device();
        // The device side(s) must be device memory holding `bytes` from there, the host side not device memory.
        const bool dst_device = k != cudaMemcpyDeviceToHost, src_device = k != cudaMemcpyHostToDevice;
        require_buffer(dst, bytes, 1, 1, dst_device ? memory_use::any_device : memory_use::host, -1, "dst", "bytes");
        require_buffer(src, bytes, 1, 1, src_device ? memory_use::any_device : memory_use::host, -1, "src", "bytes");
        GPUDYN_CUDA(cudaMemcpyAsync(dst, src, size_t(bytes), k, to_cuda(stream)));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_memset(void* dst, int32_t value, uint64_t bytes, gpudyn_stream_t stream) {
    GPUDYN_ABI({
        if (bytes == 0) return;
        GPUDYN_REQUIRE(dst != nullptr, "argument 'dst' is NULL");
        GPUDYN_REQUIRE(value >= 0 && value <= 255, "argument 'value' is %d, expected a byte 0..255", int(value));
        GPUDYN_REQUIRE_NOT_NULL(dst); // not garbage below 64 KiB either (checked after the value)
        buffer_bytes(bytes, 1, "bytes", "dst");
        // Device memory of the stream's device (the current one for the default streams).
        const int device = create_device(to_cuda(stream));
        require_buffer(dst, bytes, 1, 1, memory_use::device, device, "dst", "bytes");
        GPUDYN_CUDA(cudaMemsetAsync(dst, value, size_t(bytes), to_cuda(stream)));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_stream_synchronize(gpudyn_stream_t stream) {
    GPUDYN_ABI({
        require_device();
        GPUDYN_CUDA(cudaStreamSynchronize(to_cuda(stream)));
    });
}

GPUDYN_API gpudyn_status_t gpudyn_device_synchronize(void) {
    GPUDYN_ABI({
        require_device();
        GPUDYN_CUDA(cudaDeviceSynchronize());
    });
}

GPUDYN_API gpudyn_status_t gpudyn_stream_wait(gpudyn_stream_t stream, gpudyn_stream_t producer) {
    GPUDYN_ABI({
        if (stream == producer) return;
        require_device();
        // The handle values 1 and 2 are cudaStreamLegacy and cudaStreamPerThread themselves,
        // so CAI's spellings pass through to_cuda unchanged.
        cudaEvent_t done = nullptr;
        GPUDYN_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
        // Destroyed on every path; destroying an event a stream still waits on is allowed
        // (CUDA releases it once the wait is satisfied).
        struct EventGuard {
            cudaEvent_t e;
            ~EventGuard() { cudaEventDestroy(e); }
        } guard{done};
        GPUDYN_CUDA(cudaEventRecord(done, to_cuda(producer)));
        GPUDYN_CUDA(cudaStreamWaitEvent(to_cuda(stream), done, 0));
    });
}

} // extern "C"
