// Static array (GGArray paper §III-A1): capacity fixed at creation, elements
// contiguous; insertion beyond capacity fails whole and sets the status word.
//
//   __global__ void k(gpudyn_static_array_view_t view, ...) {
//       __shared__ gpudyn::push_storage<gpudyn::insert_algo::warp_scan> temp;
//       gpudyn::static_array_ref<int> a{view};
//       bool ok = a.push_back(temp, x < 90, x);   // every thread of the block
//   }
// Compiles under nvcc and NVRTC.
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
struct static_array_ref : dev::contiguous_array_ref<T> {
    __host__ __device__ explicit static_array_ref(const gpudyn_static_array_view_t& v) { this->bind(v, GPUDYN_STATIC_ARRAY_VIEW_VERSION); }
};

}  // namespace v0
}  // namespace gpudyn
