/// @file
/// What the counters of every array mean (the static and VMM arrays, each
/// LFVector of a GGArray), written once for the device refs, the library's
/// bulk kernels and its host code.
///
/// A reservation takes [base, base + n) of a counter with one atomicAdd; a
/// range that cannot be stored fails whole, records its start in `failed_at`
/// (atomicMin; kNoFailure when none failed) and sets a status bit.  Every range
/// handed out after a failing one starts above it and fails too, and every
/// range below the lowest failed start was stored, so the elements held are
/// exactly [0, min(counter, failed_at)).  The host folds the counter back to
/// that size before it lifts the failure (see ggarray.cuh and
/// contiguous_array.cuh for when).
/// Compiles under nvcc and NVRTC (no host headers).
#pragma once

namespace gpudyn {
inline namespace v0 {
namespace detail {

/// Status bits; values equal gpudyn_array_status_bits_t in ggarray.h.
constexpr unsigned kArrayAllocationFailed = 1u;
constexpr unsigned kArrayCapacityExceeded = 2u;
constexpr unsigned kArrayWrongElementSize = 4u;
constexpr unsigned kArrayDestinationTooSmall = 8u; ///< set by flatten_async's kernel, not by a push

/// A ref bound with an element type of another size: every operation through it
/// is refused, and the host learns why from this bit.  A plain read first, so a
/// grid of misused calls costs one atomic per array, not one per call.
__device__ __forceinline__ void report_wrong_element_size(unsigned* status) {
    if (!(*static_cast<volatile unsigned*>(status) & kArrayWrongElementSize)) atomicOr(status, kArrayWrongElementSize);
}

/// failed_at when no reservation failed (the host writes it with a 0xff memset).
constexpr unsigned long long kNoFailure = ~0ull;

/// The size rule: elements held by a counter whose lowest failed start is failed_at.
__host__ __device__ constexpr unsigned long long held_elements(unsigned long long counter,
                                                               unsigned long long failed_at) {
    return counter < failed_at ? counter : failed_at;
}

/// The same, read now from device memory that other threads update (volatile
/// loads: through L2, never a stale L1 line; the counter first).
__device__ __forceinline__ unsigned long long held_elements(unsigned long long* counter,
                                                            unsigned long long* failed_at) {
    const unsigned long long c = *static_cast<volatile unsigned long long*>(counter);
    const unsigned long long f = *static_cast<volatile unsigned long long*>(failed_at);
    return held_elements(c, f);
}

} // namespace detail
} // namespace v0
} // namespace gpudyn
