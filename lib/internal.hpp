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
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>

namespace gpudyn {
inline namespace v0 { // the device headers' versioned namespace: one gpudyn::detail
namespace detail {

struct error {
    gpudyn_status_t status;
    std::string message;
};

// Records `message` as this thread's last error (empty on success).
void set_last_error(const std::string& message);

[[noreturn]] void raise(gpudyn_status_t status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Status for a CUDA runtime error: allocation failures are OUT_OF_MEMORY (kept
// apart from other CUDA errors, as RMM does), a missing device/driver NO_DEVICE.
gpudyn_status_t status_of(cudaError_t err);

// Throws with "<what>: <cudaErrorName> (<description>)" when err != cudaSuccess.
void check_cuda(cudaError_t err, const char* what);
#define GPUDYN_CUDA(call) ::gpudyn::detail::check_cuda((call), #call)
// After a kernel launch: launch-configuration errors surface here.
#define GPUDYN_CHECK_LAUNCH(kernel_name) ::gpudyn::detail::check_cuda(cudaGetLastError(), "launch of " kernel_name)

// ---- the architectures a build carries ------------------------------------------
// The library holds SASS (machine code) for the compute capabilities of meson's
// gpu_archs and PTX for gpu_ptx (lib/meson.build writes both into gpudyn_build_archs.h;
// "75,80,86,89,90" and "90" by default).  A device the build has no code for fails
// its first kernel load with one of these errors: create says so (NOT_SUPPORTED,
// arch_mismatch_message) rather than passing the CUDA error on.  They are not sticky:
// the context stays usable.
inline bool is_arch_error(cudaError_t err) {
    return err == cudaErrorNoKernelImageForDevice || err == cudaErrorUnsupportedPtxVersion ||
           err == cudaErrorJitCompilerNotFound || err == cudaErrorJitCompilationDisabled;
}

// What code of a build runs on a device of compute capability major.minor: SASS
// sm_XY runs on X.Y' for Y' >= Y (same major; an arch-specific "90a" only on 9.0),
// PTX compute_P is JIT-compiled by the driver for any compute capability >= P.
enum class arch_fit {
    sass,
    ptx,
    none
};
inline arch_fit arch_fit_of(int major, int minor, const char* sass, const char* ptx) {
    const int device = major * 10 + minor;
    for (const char* p = sass; p && *p;) {
        int arch = 0;
        while (*p >= '0' && *p <= '9') arch = arch * 10 + (*p++ - '0');
        const bool specific = *p == 'a'; // sm_90a: that compute capability only
        while (*p && *p != ',') ++p;
        if (*p == ',') ++p;
        if (arch != 0 && arch / 10 == major && (specific ? arch == device : arch % 10 <= minor)) return arch_fit::sass;
    }
    const int ptx_arch = ptx ? std::atoi(ptx) : 0;
    if (ptx_arch != 0 && device >= ptx_arch) return arch_fit::ptx;
    return arch_fit::none;
}

// "75,80,90" -> "7.5, 8.0, 9.0" (an arch-specific "90a" -> "9.0a").
inline std::string format_arch_list(const char* archs) {
    std::string out;
    for (const char* p = archs; p && *p;) {
        std::string arch;
        while (*p && *p != ',') arch += *p++;
        if (*p == ',') ++p;
        size_t digits = 0;
        while (digits < arch.size() && arch[digits] >= '0' && arch[digits] <= '9') ++digits;
        if (digits < 2) continue;
        if (!out.empty()) out += ", ";
        out += arch.substr(0, digits - 1) + "." + arch.substr(digits - 1);
    }
    return out;
}

// "SASS for compute capability 7.5, 8.0, 8.6, 8.9, 9.0 and PTX 9.0 (JIT-compiled by the
// driver on 9.0 and newer)": what `gpudyn info` says too (gpudyn/info.py, built_for).
inline std::string describe_build_archs(const char* sass, const char* ptx) {
    const std::string s = format_arch_list(sass), x = format_arch_list(ptx);
    std::string out = s.empty() ? std::string("no SASS") : "SASS for compute capability " + s;
    if (x.empty()) return out + " and no PTX";
    return out + " and PTX " + x + " (JIT-compiled by the driver on " + x + " and newer)";
}

// The message of an arch error (is_arch_error) from `what` on device `device` of
// compute capability major.minor, for a build carrying `sass` and `ptx`.
inline std::string arch_mismatch_message(int device, int major, int minor, cudaError_t err, const char* what,
                                         const char* sass, const char* ptx) {
    char head[160];
    std::snprintf(head, sizeof(head), "device %d (compute capability %d.%d) cannot run this build of libgpudyn, ",
                  device, major, minor);
    std::string out = head;
    out += "which carries " + describe_build_archs(sass, ptx);
    char tail[192];
    std::snprintf(tail, sizeof(tail), " [%s: %s]", what, cudaGetErrorName(err));
    out += tail;
    if (major * 10 + minor < 75) {
        out += "; gpudyn needs compute capability 7.5 or newer";
    } else if (arch_fit_of(major, minor, sass, ptx) == arch_fit::ptx) {
        // the build has PTX for it, but the driver could not JIT-compile it
        out += err == cudaErrorUnsupportedPtxVersion
                   ? "; the driver is older than the CUDA that compiled the PTX: update the NVIDIA driver, or"
                   : "; the driver did not JIT-compile the PTX:";
        std::snprintf(head, sizeof(head), " build gpudyn for this GPU (-Dgpu_archs=%d%d)", major, minor);
        out += head;
    } else {
        std::snprintf(head, sizeof(head),
                      "; build gpudyn for this GPU: pip install . -Csetup-args=-Dgpu_archs=%d%d "
                      "(docs/guides/packaging.md)",
                      major, minor);
        out += head;
    }
    return out;
}

// Loads the kernels into the current device's context now.  Under CUDA's lazy
// module loading (the default) a kernel is loaded at its first launch, and the
// load waits for the work of every stream on the device: a structure loads the
// kernels of its calls when it is created, so that a later call on one stream
// does not wait for another stream's work.  On a device this build has no code for,
// NOT_SUPPORTED naming its compute capability and the build's (check_cuda).
template <class... Kernels>
void preload_kernels(Kernels*... kernels) {
    for (const void* k : {reinterpret_cast<const void*>(kernels)...}) {
        cudaFuncAttributes attributes;
        check_cuda(cudaFuncGetAttributes(&attributes, k), "cudaFuncGetAttributes (kernel preload)");
    }
}

// Records the failure of `function`: never an empty message, never SUCCESS
// (a failure that carried neither gets a generic message naming both).
gpudyn_status_t fail(const char* function, gpudyn_status_t status, const std::string& message) noexcept;

// Runs an exported function's body.  Every failure leaves a message naming the
// function (enforced here, once, for every ABI call).  A success clears the
// message unless keep_message_on_success: destroy/free calls keep it, because
// garbage collectors run them between a failed call and the read of its message.
template <bool KeepMessageOnSuccess = false, class F>
gpudyn_status_t abi_call(const char* function, F&& body) noexcept {
    try {
        if (!KeepMessageOnSuccess) set_last_error(std::string());
        body();
        return GPUDYN_SUCCESS;
    } catch (const error& e) { return fail(function, e.status, e.message); } catch (const std::bad_alloc&) {
        return fail(function, GPUDYN_ERROR_OUT_OF_MEMORY, "host memory exhausted");
    } catch (const std::exception& e) {
        return fail(function, GPUDYN_ERROR_INTERNAL, std::string("internal error: ") + e.what());
    } catch (...) { return fail(function, GPUDYN_ERROR_INTERNAL, "internal error: unknown exception"); }
}
// Body of an exported function: GPUDYN_ABI({ ...statements... })
#define GPUDYN_ABI(...) return ::gpudyn::detail::abi_call(__func__, [&]() __VA_ARGS__)
// Body of a destroy/free function: as GPUDYN_ABI, but a success keeps this thread's message.
#define GPUDYN_ABI_RELEASE(...) return ::gpudyn::detail::abi_call<true>(__func__, [&]() __VA_ARGS__)

// Smallest address a pointer argument may hold: Linux never maps the first
// 64 KiB (vm.mmap_min_addr), so anything below is garbage (0x1000, a small
// integer passed for a pointer) and is refused before it is dereferenced.
constexpr uint64_t kMinAddress = uint64_t(1) << 16;
// Largest byte size of any buffer argument: 2^57, the largest virtual address
// space of any CPU or GPU (57-bit, 5-level paging).  A count whose bytes exceed
// it (or overflow 64 bits) is refused on the host, before any device work.
constexpr uint64_t kMaxBufferBytes = uint64_t(1) << 57;

// INVALID_ARGUMENT naming `arg` for NULL ("is NULL") and for an address below
// kMinAddress.  Host structs, handles and out-pointers; buffers: require_buffer.
void require_address(const void* ptr, const char* arg);

// Handles: every structure's handle is registered from its create to its
// destroy, with its kind, so that a call refuses (INVALID_ARGUMENT naming
// `arg`) a handle that is destroyed, of another kind (a heap passed as a
// GGArray) or garbage (a host address that is no handle) without
// dereferencing it.  NULL and addresses below kMinAddress as require_address.
enum class handle_kind : uint8_t {
    heap,
    rw_heap,
    warp_heap,
    ggarray,
    static_array,
    vmm_array
};
void require_handle(const void* handle, handle_kind kind, const char* arg);
// Registers a handle at the end of its create (may throw bad_alloc: inside the
// create's cleanup scope) and forgets it when destroy has freed it.
void register_handle(const void* handle, handle_kind kind);
void unregister_handle(const void* handle) noexcept;

// Argument checks: the message names the argument and the offending value.
#define GPUDYN_REQUIRE_NOT_NULL(arg) ::gpudyn::detail::require_address((arg), #arg)
#define GPUDYN_REQUIRE(cond, ...)                                                         \
    do {                                                                                  \
        if (!(cond)) ::gpudyn::detail::raise(GPUDYN_ERROR_INVALID_ARGUMENT, __VA_ARGS__); \
    } while (0)

// Checks a struct's size field (options and out-structs) against the sizes of
// its published layouts: exactly one of `known` (ascending; the last is
// sizeof the current struct).  Any other value -- between two layouts, above
// the current one, 0 -- is INVALID_ARGUMENT naming '<name>->struct_size': a
// size between two layouts would cut a field in half (issue 39, item 3).
void require_known_struct_size(uint32_t struct_size, const char* name, const size_t* known, size_t count);
// The struct's struct_size must be sizeof(S): one layout published so far.
template <class S>
void require_struct_size(const S* s, const char* name) {
    require_address(s, name);
    const size_t known[] = {sizeof(S)};
    require_known_struct_size(s->struct_size, name, known, 1);
}

// Zeroes an output struct the caller sized (after require_struct_size), keeping
// its struct_size.
template <class Out>
void clear_out_struct(Out* out) {
    const uint32_t size = out->struct_size;
    std::memset(out, 0, sizeof(Out));
    out->struct_size = size;
}

inline cudaStream_t to_cuda(gpudyn_stream_t s) { return reinterpret_cast<cudaStream_t>(s); }

// Throws NO_DEVICE / CUDA errors unless a CUDA device is usable; returns the current device.
int require_device();

// Multiprocessors of `device` (cached per device, safe from any thread).
int sm_count(int device);

// Grid size for a grid-stride loop over n items with `block` threads on the
// current device: enough blocks to fill every SM `blocks_per_sm` times, never
// more than needed.
unsigned grid_for(uint64_t n, unsigned block, unsigned blocks_per_sm = 8);

// Makes `device` current for a scope and restores the caller's device after it.
class device_guard {
public:
    explicit device_guard(int device);
    ~device_guard();
    device_guard(const device_guard&) = delete;
    device_guard& operator=(const device_guard&) = delete;

private:
    int previous_ = -1; // the caller's device when it differed, else -1
};

// Raises INVALID_ARGUMENT naming `arg` unless `stream` may be used on `device`:
// 0, cudaStreamLegacy (1) and cudaStreamPerThread (2) mean the default stream
// of the current device; any other stream must belong to `device`.
void require_stream_on(int device, cudaStream_t stream, const char* arg);

// Device a structure created on `stream` lives on: the stream's device, or the
// current one for the default streams (0, cudaStreamLegacy, cudaStreamPerThread).
// NO_DEVICE without a usable device; INVALID_ARGUMENT naming "stream" for a
// handle that is not a stream.
int create_device(cudaStream_t stream);

// A library-internal non-blocking stream of `device` (the current device),
// created once, never destroyed: destroy functions free stream-ordered there.
cudaStream_t internal_stream(int device);

// What every structure's handle holds besides its own state: the device it was
// created on, an event recorded at the end of every stream-taking call (the
// next call, on whatever stream, waits on it: calls on one structure run one
// after another) and a lock for its host-side state.
struct handle_state {
    int device = 0;
    cudaEvent_t done = nullptr;
    std::mutex mutex;

    // On the current device (the handle's): records it and creates the event.
    void init();
    // Makes internal_stream(device) wait for the handle's last call and returns
    // it; destroy frees there, stream-ordered, never synchronizing the device.
    cudaStream_t release_stream();
    // Destroys the event (after everything that waits on it has been enqueued).
    void release() noexcept;
};

// One ABI call on a handle, for its whole body (RAII): takes the handle's lock,
// makes its device current (the caller's comes back at the end), checks that
// `stream` belongs to that device, makes the stream wait for the handle's
// previous call and, at the end, records the handle's event on it.  Without a
// stream (host-only calls) only the lock and the device.
class handle_call {
public:
    handle_call(handle_state& h, gpudyn_stream_t stream, const char* stream_arg = "stream");
    explicit handle_call(handle_state& h);
    ~handle_call();
    handle_call(const handle_call&) = delete;
    handle_call& operator=(const handle_call&) = delete;
    cudaStream_t stream() const { return stream_; }

private:
    std::unique_lock<std::mutex> lock_;
    device_guard device_;
    handle_state& h_;
    cudaStream_t stream_ = nullptr;
    bool ordered_ = false;
};

// cudaMallocAsync of `bytes` on `stream`; a failure raises OUT_OF_MEMORY (or the
// CUDA error's status) with a message that starts with `what` (which names the
// argument or option behind the size, e.g. "options->capacity is 12").
void device_alloc(void** ptr, uint64_t bytes, cudaStream_t stream, const std::string& what);

// lib/rw_heap.cu, for the warp heaps it backs: the heap's handle state (a warp
// heap's calls are ordered with the page heap's through its event) and its count
// of warp heaps using it as backing (destroy refuses while it is not 0).
handle_state& rw_heap_state(gpudyn_rw_heap_t heap);
void rw_heap_add_backing_user(gpudyn_rw_heap_t heap, int delta);

// lib/heap.cu, for the GGArrays whose buckets come from a heap:
// heap_resolve_sizes fills initial/max bytes of 0 the way gpudyn_heap_create
// does (on the current device; page_size 0: the default page); heap_state is
// the heap's handle state (a GGArray's kernels are ordered with the heap's
// calls through its event); heap_add_user counts the GGArrays using it
// (destroy refuses while it is not 0); heap_sizes reads the bytes mapped now
// and the most grow may map.
void heap_resolve_sizes(uint64_t page_size, uint64_t* initial_bytes, uint64_t* max_bytes);
handle_state& heap_state(gpudyn_heap_t heap);
void heap_add_user(gpudyn_heap_t heap, int delta);
void heap_sizes(gpudyn_heap_t heap, uint64_t* mapped_bytes, uint64_t* max_bytes);
// GGArrays using the heap that hold no run of it as their growth arena yet
// (0 when every one holds a run: one taking another counts itself), read
// before holder_delta (+1: the caller now holds one; -1: it gave its runs
// back) is applied: an array takes that share of the free memory.
uint32_t heap_arena_share(gpudyn_heap_t heap, int holder_delta);

// Raises CUDA's device-malloc heap (cudaLimitMallocHeapSize) to at least
// `bytes` (0: leave it).  CUDA fixes the heap at the first launch of a kernel
// that uses device malloc, so a raise after that is refused: NOT_SUPPORTED with
// a message naming `option` (OUT_OF_MEMORY when the memory is not there).
void raise_device_malloc_heap(uint64_t bytes, const char* option);

// A heap's check (gpudyn_<heap>_check): `failed` and `bad` are its failure and
// bad-free (misuse) counters now, `seen` what the last check read of them (the
// counters only grow between the calls that zero them, which zero `seen` too).
// Raises OUT_OF_MEMORY for new failures, else INVALID_ARGUMENT for new bad
// frees, naming the counts with `failed_what` / `bad_what` and `hint`; `seen`
// takes the counts first, so each is reported once.
struct check_marks {
    uint64_t failed = 0, bad = 0;
};
void report_since_check(uint64_t failed, uint64_t bad, check_marks* seen, const char* failed_what, const char* bad_what,
                        const std::string& hint);

// Driver entry point by name, resolved at run time through the runtime so the
// library never links libcuda (machines without a driver can still load it).
void* driver_entry_point(const char* symbol, int cuda_version);
// True when `device` supports the driver's virtual memory management (cuMemMap).
bool vmm_supported(int device);
// Raises NOT_SUPPORTED when it does not.
void require_vmm(int device);
// Releases the device's reserve of unmapped growth chunks (memory_source.cu); the bytes released.
uint64_t growth_reserve_release(int device);

// ---- buffer arguments (issue 39: bad input never reaches a kernel) ----
//
// How a call uses a buffer argument.
enum class memory_use {
    // Read or written by the library's kernels (or copies) on `device`, the
    // structure's device.  Accepted: device memory of that device
    // (cudaMemoryTypeDevice: cudaMalloc, cudaMallocAsync, VMM mappings),
    // managed memory, and pinned host memory (cudaMemoryTypeHost) that is
    // mapped into that device at the same address (devicePointer == the
    // pointer: cudaHostAlloc / cudaMallocHost / cudaHostRegister under unified
    // addressing), which kernels reach over the bus.  Pageable host memory and
    // addresses CUDA does not know (cudaMemoryTypeUnregistered, e.g. the
    // stack, malloc, 0x100000) only where the device reports
    // cudaDevAttrPageableMemoryAccess (HMM, ATS); another device's memory never.
    device,
    // The device side of a copy (gpudyn_memcpy): as `device`, but memory of
    // any device (cudaMemcpyAsync reaches every device's memory).
    any_device,
    // The host side of a copy (copy_to_host, gpudyn_memcpy): anything but
    // device memory (cudaMemoryTypeDevice) -- pageable, pinned or managed.
    host,
};

// count * element_bytes, INVALID_ARGUMENT naming `count_arg` (and `arg`)
// when it overflows 64 bits or exceeds kMaxBufferBytes.  Host-only: call it
// before any device work.
uint64_t buffer_bytes(uint64_t count, uint64_t element_bytes, const char* count_arg, const char* arg);

// Checks a buffer argument of `count` elements of `element_bytes` before any
// device work uses it, raising INVALID_ARGUMENT naming `arg` (and `count_arg`
// for an extent) with the value, and never leaving a CUDA error pending:
//  - not NULL, not below kMinAddress, aligned to `alignment` (a power of two;
//    a misaligned access from a kernel poisons the context);
//  - the bytes as buffer_bytes (no overflow, at most kMaxBufferBytes), and
//    ptr + bytes does not wrap;
//  - the memory type of `use` (cudaPointerGetAttributes; on the structure's
//    device for memory_use::device);
//  - where the driver can tell the allocation's extent (cuMemGetAddressRange;
//    the chunks of a VMM range mapped one after another count as one, while
//    neighbouring cudaMalloc or pool allocations never do), the whole range
//    [ptr, ptr + bytes) lies inside it.  Where it cannot (pageable
//    memory; a driver without the entry point; the query failing) that part is
//    skipped.
// count 0 checks nothing (no memory is touched); callers return before it.
void require_buffer(const void* ptr, uint64_t count, uint64_t element_bytes, uint64_t alignment, memory_use use,
                    int device, const char* arg, const char* count_arg);

// An array of `count` T that the kernels of `device` read or write.
template <class T>
void require_device_array(int device, const T* ptr, uint64_t count, const char* arg, const char* count_arg) {
    require_buffer(ptr, count, sizeof(T), alignof(T), memory_use::device, device, arg, count_arg);
}

} // namespace detail
} // namespace v0
} // namespace gpudyn
