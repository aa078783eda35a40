// gpudyn.numba: the device functions Numba @cuda.jit kernels call.
//
// Each function is a thin extern "C" shim over one operation of a device
// header (no algorithm lives here): it wraps the view it is given in the
// structure's ref and calls the operation.  meson compiles this file with nvcc
// per architecture into PTX and LTO-IR (python/gpudyn/numba/shims/meson.build);
// gpudyn.numba declares each function with numba.cuda.declare_device(...,
// abi="c") and links the file into every kernel that calls one.
//
// Conventions (the C ABI Numba calls through):
//   * `view` points at a copy of the structure's gpudyn_*_view_t (the kernel
//     argument `obj.ref`, spilled to the caller's stack by gpudyn.numba);
//   * device addresses are unsigned long long (0 = null);
//   * results that are bool in the headers are int (1 / 0): the C ABI of bool
//     differs between compilers, an int is the same everywhere; every shim
//     returns a value (numba-cuda 0.30 lowers a declared void result as 64 bits);
//   * element values of the arrays travel as unsigned integers of the element's
//     size (gpudyn.numba reinterprets the bytes of floats, bools, complex and
//     signed values); push_back only stores the bytes, so one shim per element
//     size serves every dtype of that size.
#include "gpudyn/ggarray.cuh"
#include "gpudyn/heap.cuh"
#include "gpudyn/rw_heap.cuh"
#include "gpudyn/static_array.cuh"
#include "gpudyn/vmm_array.cuh"
#include "gpudyn/warp_heap.cuh"

#define GPUDYN_NUMBA_API extern "C" __device__

typedef unsigned long long gd_u64;

namespace {

template <class T>
__device__ __forceinline__ const T& view_as(const void* view) {
    return *static_cast<const T*>(view);
}
__device__ __forceinline__ void* as_pointer(gd_u64 address) { return reinterpret_cast<void*>(address); }
__device__ __forceinline__ gd_u64 as_address(const void* p) { return reinterpret_cast<gd_u64>(p); }

__device__ __forceinline__ gpudyn::heap_ref heap_of(const void* view) {
    return gpudyn::heap_ref{view_as<gpudyn::heap_view>(view)};
}
__device__ __forceinline__ gpudyn::rw_heap_ref page_heap_of(const void* view) {
    return gpudyn::rw_heap_ref{view_as<gpudyn::rw_heap_view>(view)};
}
__device__ __forceinline__ gpudyn::warp_heap_ref warp_heap_of(const void* view) {
    return gpudyn::warp_heap_ref{view_as<gpudyn_warp_heap_view_t>(view)};
}
// A lane's warp_heap handle from the header address gpudyn_numba_warp_heap_start
// returned and the mask of the collective (its members for this call).
__device__ __forceinline__ gpudyn::warp_heap warp_handle(const void* view, gd_u64 header, unsigned mask) {
    return gpudyn::warp_heap(warp_heap_of(view), static_cast<gpudyn::warp_heap_detail::header*>(as_pointer(header)),
                             mask);
}

// 16-byte elements (complex128): two words, 8-byte aligned like NumPy's complex128.
struct gd_u128 {
    gd_u64 lo, hi;
};

// Element i can be read: a GGArray's i below its ranged size (as of the last
// get_view; beyond it at() would follow buckets that do not hold it), a
// contiguous array's i inside its storage.  False for a refused view.
template <class T>
__device__ __forceinline__ bool readable(const gpudyn::ggarray_ref<T>& a, gd_u64 i) {
    return i < a.ranged_size();
}
template <class T>
__device__ __forceinline__ bool readable(const gpudyn::detail::contiguous_array_ref<T>& a, gd_u64 i) {
    return a.valid() && i < a.capacity();
}

} // namespace

// ---- GGArray, StaticArray, VmmArray (ggarray.cuh, static_array.cuh, vmm_array.cuh) ----
// push_back(x): any thread, any divergence; the lanes that call together share
// one reservation.  extend(values, n): the calling lane's n values, one
// reservation for the lanes that call together (all or nothing per group).
// size(): the elements stored now.  at(i, out): element i into *out (1), or
// zero bytes (0) for an i that cannot be read (see readable).  span(lo, hi,
// &n): the address of the first span of [lo, hi) (see ggarray_ref::span), n
// its elements.  One set per array and element size (T and bits: any type of
// that size, the bytes are moved as they are).
#define GPUDYN_NUMBA_ARRAY(kind, Ref, View, bits, T)                                                              \
    GPUDYN_NUMBA_API int gpudyn_numba_##kind##_push_back_u##bits(const void* view, T x) {                         \
        return gpudyn::Ref<T>{view_as<View>(view)}.push_back(x) ? 1 : 0;                                          \
    }                                                                                                             \
    GPUDYN_NUMBA_API int gpudyn_numba_##kind##_extend_u##bits(const void* view, const void* values, unsigned n) { \
        return gpudyn::Ref<T>{view_as<View>(view)}.push_back(static_cast<const T*>(values), n) ? 1 : 0;           \
    }                                                                                                             \
    GPUDYN_NUMBA_ARRAY_READS(kind, Ref, View, bits, T)
#define GPUDYN_NUMBA_ARRAY_READS(kind, Ref, View, bits, T)                                                          \
    GPUDYN_NUMBA_API int gpudyn_numba_##kind##_at_u##bits(const void* view, gd_u64 i, void* out) {                  \
        const gpudyn::Ref<T> a{view_as<View>(view)};                                                                \
        const bool ok = readable(a, i);                                                                             \
        T x{};                                                                                                      \
        if (ok) x = a.at(i);                                                                                        \
        *static_cast<T*>(out) = x;                                                                                  \
        return ok ? 1 : 0;                                                                                          \
    }                                                                                                               \
    GPUDYN_NUMBA_API gd_u64 gpudyn_numba_##kind##_span_u##bits(const void* view, gd_u64 lo, gd_u64 hi, gd_u64* n) { \
        unsigned long long m = 0;                                                                                   \
        const gd_u64 p = as_address(gpudyn::Ref<T>{view_as<View>(view)}.span(lo, hi, &m));                          \
        *n = m;                                                                                                     \
        return p;                                                                                                   \
    }
#define GPUDYN_NUMBA_ARRAY_SIZES(kind, Ref, View)                                                                   \
    GPUDYN_NUMBA_ARRAY(kind, Ref, View, 8, unsigned char)                                                           \
    GPUDYN_NUMBA_ARRAY(kind, Ref, View, 16, unsigned short)                                                         \
    GPUDYN_NUMBA_ARRAY(kind, Ref, View, 32, unsigned)                                                               \
    GPUDYN_NUMBA_ARRAY(kind, Ref, View, 64, gd_u64)                                                                 \
    GPUDYN_NUMBA_API int gpudyn_numba_##kind##_push_back_u128(const void* view, gd_u64 lo, gd_u64 hi) {             \
        return gpudyn::Ref<gd_u128>{view_as<View>(view)}.push_back(gd_u128{lo, hi}) ? 1 : 0;                        \
    }                                                                                                               \
    GPUDYN_NUMBA_API int gpudyn_numba_##kind##_extend_u128(const void* view, const void* values, unsigned n) {      \
        return gpudyn::Ref<gd_u128>{view_as<View>(view)}.push_back(static_cast<const gd_u128*>(values), n) ? 1 : 0; \
    }                                                                                                               \
    GPUDYN_NUMBA_ARRAY_READS(kind, Ref, View, 128, gd_u128)                                                         \
    /* size() reads counters only: any element type of the right size serves; the view's */                         \
    /* element_size picks it so a valid view is never refused. */                                                   \
    GPUDYN_NUMBA_API gd_u64 gpudyn_numba_##kind##_size(const void* view) {                                          \
        const View& v = view_as<View>(view);                                                                        \
        switch (v.element_size) {                                                                                   \
            case 1: return gpudyn::Ref<unsigned char>{v}.size();                                                    \
            case 2: return gpudyn::Ref<unsigned short>{v}.size();                                                   \
            case 4: return gpudyn::Ref<unsigned>{v}.size();                                                         \
            case 8: return gpudyn::Ref<gd_u64>{v}.size();                                                           \
            default: return gpudyn::Ref<gd_u128>{v}.size();                                                         \
        }                                                                                                           \
    }

GPUDYN_NUMBA_ARRAY_SIZES(ggarray, ggarray_ref, gpudyn_ggarray_view_t)
// The GGArray's ranged size (as of the last get_view): one load, for the
// loops of kernels that read the array; the element type does not matter.
GPUDYN_NUMBA_API gd_u64 gpudyn_numba_ggarray_ranged_size(const void* view) {
    const gpudyn_ggarray_view_t& v = view_as<gpudyn_ggarray_view_t>(view);
    switch (v.element_size) {
        case 1: return gpudyn::ggarray_ref<unsigned char>{v}.ranged_size();
        case 2: return gpudyn::ggarray_ref<unsigned short>{v}.ranged_size();
        case 4: return gpudyn::ggarray_ref<unsigned>{v}.ranged_size();
        case 8: return gpudyn::ggarray_ref<gd_u64>{v}.ranged_size();
        default: return gpudyn::ggarray_ref<gd_u128>{v}.ranged_size();
    }
}
GPUDYN_NUMBA_ARRAY_SIZES(static_array, static_array_ref, gpudyn_static_array_view_t)
GPUDYN_NUMBA_ARRAY_SIZES(vmm_array, vmm_array_ref, gpudyn_vmm_array_view_t)

// ---- Heap (heap.cuh): any thread, any divergence ------------------------------
GPUDYN_NUMBA_API gd_u64 gpudyn_numba_heap_malloc(const void* view, gd_u64 bytes) {
    return as_address(heap_of(view).malloc(bytes));
}
GPUDYN_NUMBA_API int gpudyn_numba_heap_free(const void* view, gd_u64 address) {
    return heap_of(view).free(as_pointer(address)) ? 1 : 0;
}

// ---- RWHeap (rw_heap.cuh) -----------------------------------------------------
// GETPAGE by RW-BM (the thread-level walk of the paper), random stream from the
// thread id and the clock as the heap's own calls draw it (detail::heap_rng).
GPUDYN_NUMBA_API unsigned gpudyn_numba_rw_heap_get_page(const void* view) {
    gpudyn::detail::counter_rng rng = gpudyn::detail::heap_rng();
    return page_heap_of(view).get_page<gpudyn::rw_algorithm::rw_bm>(rng);
}
GPUDYN_NUMBA_API int gpudyn_numba_rw_heap_free_page(const void* view, unsigned page) {
    return page_heap_of(view).free_page(page) ? 1 : 0;
}
GPUDYN_NUMBA_API gd_u64 gpudyn_numba_rw_heap_page_address(const void* view, unsigned page) {
    return as_address(page_heap_of(view).page_address(page));
}
// RW_malloc by the calling lane alone (a one-lane mask with local scratch, as the
// heap's medium runs call it): any thread, any divergence, no warp aggregation.
GPUDYN_NUMBA_API gd_u64 gpudyn_numba_rw_heap_malloc(const void* view, gd_u64 bytes) {
    gpudyn::rw_malloc_storage storage;
    gpudyn::detail::counter_rng rng = gpudyn::detail::heap_rng();
    return as_address(page_heap_of(view).malloc(1u << gpudyn::detail::lane_index(), bytes, storage, rng));
}
GPUDYN_NUMBA_API int gpudyn_numba_rw_heap_free(const void* view, gd_u64 address) {
    return page_heap_of(view).free(as_pointer(address)) ? 1 : 0;
}

// ---- WarpHeap (warp_heap.cuh): warp collectives, see warp_heap.cuh's contract --
// start: collective over `mask` (every lane of it calls, with the same mask);
// returns the warp's header address (the handle of the later calls), 0 when
// memory is exhausted.  A 0 handle passed on is the headers' misuse case: the
// call fails (NULL / false) and counts in stats.misuse, as in C++.
GPUDYN_NUMBA_API gd_u64 gpudyn_numba_warp_heap_start(const void* view, unsigned mask) {
    return as_address(warp_heap_of(view).start(mask).header_pointer());
}
// alloc / tidy_up: collective over `mask` = exactly the calling lanes, a subset
// of the lanes that started.
GPUDYN_NUMBA_API gd_u64 gpudyn_numba_warp_heap_alloc(const void* view, gd_u64 header, unsigned mask, gd_u64 bytes) {
    return as_address(warp_handle(view, header, mask).alloc(mask, bytes));
}
GPUDYN_NUMBA_API int gpudyn_numba_warp_heap_tidy_up(const void* view, gd_u64 header, unsigned mask) {
    warp_handle(view, header, mask).tidy_up(mask);
    return 1; // (numba-cuda's C ABI declares a void result as a 64-bit one: return an int)
}
// end: each started lane once, in any order; 1 on the lane that freed the header.
GPUDYN_NUMBA_API int gpudyn_numba_warp_heap_end(const void* view, gd_u64 header) {
    return warp_handle(view, header, 1u << gpudyn::detail::lane_index()).end() ? 1 : 0;
}
