/// @file
/// Static array (GGArray paper §III-A1): capacity fixed at creation, elements
/// contiguous; a push beyond capacity fails whole and sets the status word.
///
/// @code{.cpp}
/// __global__ void k(gpudyn_static_array_view_t view, const int* in, unsigned n) {
///     const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
///     if (i >= n) return;
///     const gpudyn::static_array_ref<int> a{view};
///     if (in[i] < 90) a.push_back(in[i]);   // any thread; false when full
/// }
/// @endcode
///
/// Device API (see detail/contiguous_array.cuh): per-thread push_back(x) and
/// push_back(values, n) (warp-aggregated), block-level push_back(storage, ...)
/// and push_back_chunk(storage, ...), size(), capacity(), at(i), data(),
/// span(lo, hi, &n), for_each_span.  Compiles under nvcc and NVRTC.
#pragma once

#if defined(__CUDACC_RTC__)
#include <cuda/std/cstdint>
#include <cuda/std/cstddef>
#endif
#include "gpudyn/ggarray.h"
#include "gpudyn/detail/contiguous_array.cuh"

namespace gpudyn {
inline namespace v0 {

template <class T>
class static_array_ref : public detail::contiguous_array_ref<T> {
public:
    __host__ __device__ explicit static_array_ref(const gpudyn_static_array_view_t& v) {
        this->bind(v, GPUDYN_STATIC_ARRAY_VIEW_VERSION);
    }
};

} // namespace v0
} // namespace gpudyn
