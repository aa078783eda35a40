/** @file
 * gpudyn — dynamic memory inside CUDA kernels.  The stable C ABI.
 *
 * Rules every declaration in this file (and in the per-structure headers it
 * includes) follows, so that any language can bind it and cffi can read it
 * verbatim once preprocessor lines are dropped:
 *   - C99, fixed-width integer types only, no CUDA or C++ types;
 *   - every call returns gpudyn_status_t; the reason for a failure is in
 *     gpudyn_last_error_message() (thread-local, names the argument/value);
 *   - handles are opaque pointers; destroy functions accept NULL;
 *   - option structs begin with `struct_size` and have an initializer function;
 *   - host calls that touch device memory take a gpudyn_stream_t (a
 *     cudaStream_t; NULL is the legacy default stream) and are stream-ordered.
 *
 * Preprocessor lines must stay on lines of their own: the Python binding drops
 * every line that starts with '#' and the GPUDYN_API token.
 */
#ifndef GPUDYN_GPUDYN_H
#define GPUDYN_GPUDYN_H

/* NVRTC has no C library headers: device code compiled at run time (CuPy
 * RawModule) gets the fixed-width types from libcu++ instead. */
#if defined(__CUDACC_RTC__)
#include <cuda/std/cstddef>
#include <cuda/std/cstdint>
#else
#include <stddef.h>
#include <stdint.h>
#endif

#define GPUDYN_VERSION_MAJOR 0
#define GPUDYN_VERSION_MINOR 1
#define GPUDYN_VERSION_PATCH 0
/* MAJOR * 10000 + MINOR * 100 + PATCH, as returned by gpudyn_get_version(). */
#define GPUDYN_VERSION_NUMBER (GPUDYN_VERSION_MAJOR * 10000 + GPUDYN_VERSION_MINOR * 100 + GPUDYN_VERSION_PATCH)

#if defined(GPUDYN_BUILDING_LIBRARY)
#define GPUDYN_API __attribute__((visibility("default")))
#else
#define GPUDYN_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status ---------------------------------------------------------- */
typedef enum gpudyn_status_t {
    GPUDYN_SUCCESS = 0,
    GPUDYN_ERROR_INVALID_ARGUMENT = 1,
    GPUDYN_ERROR_OUT_OF_MEMORY = 2,
    GPUDYN_ERROR_NO_DEVICE = 3,
    GPUDYN_ERROR_CUDA = 4,
    GPUDYN_ERROR_NOT_SUPPORTED = 5,
    GPUDYN_ERROR_INTERNAL = 6
} gpudyn_status_t;

/** A cudaStream_t, passed as an opaque pointer; NULL is the default stream.
 *
 * Devices and streams.  Every structure belongs to one device: the device of
 * the stream given to its create call, or the current device when that stream
 * is a default stream (NULL / 0, cudaStreamLegacy (1), cudaStreamPerThread (2)).
 * Every call on a structure runs on its device and gives the caller back the
 * current device it had.  A stream argument must belong to the structure's
 * device; a stream of another device is GPUDYN_ERROR_INVALID_ARGUMENT naming
 * the argument (checked with cudaStreamGetDevice, CUDA 12.8+ drivers); the
 * default streams mean the default stream of the structure's device.
 *
 * Order.  Calls on one structure run in the order they are made, whatever
 * streams they use: each call waits (cudaStreamWaitEvent) for the structure's
 * previous call and records an event at its end.  Calls from several host
 * threads on one structure are serialized by a lock per structure.  Kernels a
 * user launches with a view are ordered by the user: before a destroy, as with
 * cudaFreeAsync, they must have completed or be followed, on their stream, by
 * any stream-taking call on the structure.
 *
 * Destroy.  destroy frees stream-ordered after the structure's last call (on a
 * stream of the library's own) and never synchronizes the device; memory that
 * is not stream-ordered (VMM mappings) waits for the structure's own event.  A
 * destroy that fails leaves the handle valid for another destroy call only,
 * owning what it has not yet freed.
 *
 * Bad input.  Every argument is checked before any device work, and a refused
 * call (INVALID_ARGUMENT naming the argument and its value) leaves the
 * structure unchanged, the CUDA context healthy and no CUDA error pending:
 *   - struct_size must be exactly the size of a published layout of its struct
 *     (the current sizeof; gpudyn_ggarray_options_t also 40), never a size
 *     between two layouts, smaller or larger;
 *   - structs and out-pointers: NULL, and addresses below 64 KiB (never
 *     mapped: 0x1000 is garbage), are refused;
 *   - handles: only live handles of the right kind are accepted (the library
 *     keeps a registry from create to destroy): NULL (except for destroy),
 *     garbage, a destroyed handle or another structure's handle is refused
 *     without being dereferenced (a new handle may reuse a destroyed one's
 *     address: using a handle after its destroy stays a bug);
 *   - counts: count x element size must fit in 64 bits and be at most 2^57
 *     bytes, and no more than the buffer holds (below);
 *   - buffer arguments the calls call "device" (sizes, pointers, pages,
 *     values, mask, headers, flatten's dst) must be memory the structure's
 *     device can use: its own device memory (cudaMalloc, cudaMallocAsync,
 *     VMM), managed memory, or pinned host memory mapped into it at the same
 *     address (cudaHostAlloc / cudaMallocHost / cudaHostRegister under unified
 *     addressing: slow, over the bus, but valid); another device's memory and
 *     pageable host memory are refused, the latter unless the device reports
 *     cudaDevAttrPageableMemoryAccess (HMM, ATS), and then only mapped pages;
 *     aligned to their element size; and where the driver tells the
 *     allocation's extent (cuMemGetAddressRange; the chunks of a VMM range
 *     mapped one after another count as one, neighbouring cudaMalloc or pool
 *     allocations never do), [ptr, ptr + count x element size) must lie
 *     inside it.  Host buffers (copy_to_host's dst, gpudyn_memcpy's host
 *     side) must not be device memory, and pageable ones must be mapped.
 * Streams are checked as described above (a handle the driver reports is not
 * a stream); an arbitrary garbage stream value is undefined behaviour, as in
 * CUDA. */
typedef struct gpudyn_stream_s* gpudyn_stream_t;

/** GPUDYN_VERSION_NUMBER of the loaded library. */
GPUDYN_API uint32_t gpudyn_get_version(void);

/** Static string naming a status ("GPUDYN_ERROR_OUT_OF_MEMORY"); never NULL. */
GPUDYN_API const char* gpudyn_status_string(gpudyn_status_t status);

/** Why the last failed call on this thread failed; never NULL, never "" after a
 * failure (it names the function).  A successful call clears it ("") except the
 * destroy functions and gpudyn_device_free, which leave it as it is: garbage
 * collectors run them between a failed call and the read of its message.
 * Valid until the next gpudyn call on the same thread. */
GPUDYN_API const char* gpudyn_last_error_message(void);

/* ---- devices --------------------------------------------------------- */
typedef struct gpudyn_device_info_t {
    uint32_t struct_size; /**< sizeof(gpudyn_device_info_t), set by caller */
    int32_t device;       /**< CUDA device ordinal */
    char name[256];
    int32_t compute_capability_major;
    int32_t compute_capability_minor;
    int32_t multiprocessor_count;
    int32_t warp_size;
    uint64_t total_memory; /**< bytes */
    uint64_t free_memory;  /**< bytes, at the time of the call */
    uint64_t l2_cache_bytes;
    int32_t runtime_version; /**< CUDA runtime linked into libgpudyn, e.g. 13000 */
    int32_t driver_version;  /**< installed driver's CUDA version, 0 if no driver */
    int32_t vmm_supported;   /**< 1 when the driver's virtual memory management works */
    int32_t reserved;
} gpudyn_device_info_t;

/** Number of CUDA devices; GPUDYN_ERROR_NO_DEVICE (count = 0) when there is no
 * usable device or driver. */
GPUDYN_API gpudyn_status_t gpudyn_get_device_count(int32_t* count);

/** The calling thread's current CUDA device ordinal. */
GPUDYN_API gpudyn_status_t gpudyn_get_device(int32_t* device);

/** Makes `device` (0 <= device < count) the calling thread's current CUDA
 * device (cudaSetDevice); the structures' calls never need it (they run on
 * their own device), a binding that allocates memory for a structure does. */
GPUDYN_API gpudyn_status_t gpudyn_set_device(int32_t device);

/** The device a structure created on `stream` belongs to: the stream's device,
 * or the current device for the default streams (NULL, 1, 2) and where the
 * driver (older than CUDA 12.8) cannot tell; INVALID_ARGUMENT naming `stream`
 * for a handle the driver reports is not a stream.  A stream already destroyed
 * is undefined behaviour, as in CUDA (its handle may be reused or freed). */
GPUDYN_API gpudyn_status_t gpudyn_stream_get_device(gpudyn_stream_t stream, int32_t* device);

/** The device whose memory `ptr` points into, as cudaPointerGetAttributes
 * reports it (device memory), or -1 for NULL and any memory CUDA does not
 * report as one device's own (host, pinned, managed or unknown memory, or
 * where the query fails). */
GPUDYN_API gpudyn_status_t gpudyn_pointer_get_device(const void* ptr, int32_t* device);

/** Fills `*info` for `device` (info->struct_size must be set by the caller to
 * sizeof(gpudyn_device_info_t), its only published layout). */
GPUDYN_API gpudyn_status_t gpudyn_get_device_info(int32_t device, gpudyn_device_info_t* info);

/** CUDA runtime version linked into the library and the driver's version
 * (0 when no driver is installed); works without a GPU. */
GPUDYN_API gpudyn_status_t gpudyn_get_cuda_versions(int32_t* runtime_version, int32_t* driver_version);

/** The GPU code this library carries (meson's gpu_archs and gpu_ptx): `*sass_archs`
 * gets the architectures with machine code, comma-separated ("75,80,86,89,90"),
 * `*ptx_arch` the one whose PTX newer GPUs JIT-compile ("90"; "" for none).  Static
 * strings, valid for the life of the process; works without a GPU. */
GPUDYN_API gpudyn_status_t gpudyn_get_build_archs(const char** sass_archs, const char** ptx_arch);

/* ---- raw device memory (used by the Python DeviceBuffer) ------------- */
typedef enum gpudyn_memcpy_kind_t {
    GPUDYN_MEMCPY_HOST_TO_DEVICE = 1,
    GPUDYN_MEMCPY_DEVICE_TO_HOST = 2,
    GPUDYN_MEMCPY_DEVICE_TO_DEVICE = 3
} gpudyn_memcpy_kind_t;

/** Stream-ordered allocation of `bytes` (> 0) of device memory. */
GPUDYN_API gpudyn_status_t gpudyn_device_alloc(void** ptr, uint64_t bytes, gpudyn_stream_t stream);
/** Stream-ordered free; NULL is accepted; a success keeps this thread's message. */
GPUDYN_API gpudyn_status_t gpudyn_device_free(void* ptr, gpudyn_stream_t stream);
/** Stream-ordered copy; host memory is pageable or pinned.  The device side(s)
 * must be device (any device's), managed or mapped pinned memory holding
 * `bytes` from there, the host side not device memory (see "Bad input"). */
GPUDYN_API gpudyn_status_t gpudyn_memcpy(void* dst, const void* src, uint64_t bytes, gpudyn_memcpy_kind_t kind,
                                         gpudyn_stream_t stream);
/** Stream-ordered byte fill of device memory of the stream's device (the
 * current one for the default streams) holding `bytes` from `dst`. */
GPUDYN_API gpudyn_status_t gpudyn_memset(void* dst, int32_t value, uint64_t bytes, gpudyn_stream_t stream);
/** Waits for all work on `stream`. */
GPUDYN_API gpudyn_status_t gpudyn_stream_synchronize(gpudyn_stream_t stream);
/** Waits for all work on the current device, every stream's.  For releasing
 * memory whose stream may no longer exist (a raw handle the user destroyed). */
GPUDYN_API gpudyn_status_t gpudyn_device_synchronize(void);
/** Gives back to the driver the device memory gpudyn keeps for reuse on
 * `device`: the growth arenas of destroyed GGArrays, kept mapped for the next
 * array to adopt, and the reserve of unmapped chunks that arenas gave back
 * (trim, an adopted arena's excess) and take again when they grow.  The
 * library's host thread also releases either once it has been unused for a
 * second.  `*bytes` (may be NULL) = the bytes released.  No synchronization. */
GPUDYN_API gpudyn_status_t gpudyn_trim(int32_t device, uint64_t* bytes);
/** Makes later work on `stream` wait until the work queued on `producer` so far
 * has finished, without blocking the host (an event recorded on `producer`,
 * waited on by `stream`).  Either stream may be NULL or the handle values 1
 * (cudaStreamLegacy) and 2 (cudaStreamPerThread), the spellings of the CUDA
 * Array Interface v3 `stream` field; producer == stream does nothing.  Used to
 * honour the producer stream of arrays passed in from other libraries. */
GPUDYN_API gpudyn_status_t gpudyn_stream_wait(gpudyn_stream_t stream, gpudyn_stream_t producer);

#ifdef __cplusplus
}
#endif

/* The structures, one C header each (same rules as this file). */
#include "gpudyn/warp_heap.h"
#include "gpudyn/ggarray.h"
#include "gpudyn/rw_heap.h"
#include "gpudyn/heap.h"

#endif /* GPUDYN_GPUDYN_H */
