/// @file
/// VMM array (the GGArray paper's semi-static "memMap"): one virtual range whose
/// physical backing the host grows (cuMemCreate/cuMemMap) without copying; the
/// device address never changes.  In kernels it behaves as a static array of the
/// capacity mapped when the view was taken (same device API: static_array.cuh).
/// Compiles under nvcc and NVRTC.
#pragma once

#include "gpudyn/static_array.cuh"

namespace gpudyn {
inline namespace v0 {

template <class T>
class vmm_array_ref : public detail::contiguous_array_ref<T> {
public:
    __host__ __device__ explicit vmm_array_ref(const gpudyn_vmm_array_view_t& v) {
        this->bind(v, GPUDYN_VMM_ARRAY_VIEW_VERSION);
    }
};

} // namespace v0
} // namespace gpudyn
