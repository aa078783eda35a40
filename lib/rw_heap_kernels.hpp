// Launchers of the random-walk page heap's bulk kernels (lib/rw_heap_kernels.cu),
// called by the C ABI in lib/rw_heap.cu.  Each returns the launch's CUDA error.
#pragma once

#include <gpudyn/gpudyn.h>
#include <gpudyn/rw_heap.h>

#include <cuda_runtime.h>

namespace gpudyn::rw_heap_impl {

// Threads per block of the bulk kernels: 8 warps, several resident blocks per SM
// hide the latency of the random reads (the walks are latency bound).
constexpr unsigned kBlock = 256;
// Slots of the per-call scratch counters.
enum Scratch { kStepsSum, kWarpMaxSum, kWarpRounds, kMaxSteps, kFailedHere, kOversize, kScratchCount };
// Slots of gpudyn_rw_heap_view_t::counters (failed requests, bad frees, spare).
constexpr unsigned kCounterCount = 4;

cudaError_t launch_set_tail(const gpudyn_rw_heap_view_t& v, cudaStream_t s);
cudaError_t launch_occupy(const gpudyn_rw_heap_view_t& v, unsigned long long used, unsigned long long seed,
                          cudaStream_t s);
cudaError_t launch_count_free(const gpudyn_rw_heap_view_t& v, unsigned long long* out, cudaStream_t s);
cudaError_t launch_get_pages(const gpudyn_rw_heap_view_t& v, gpudyn_rw_heap_algorithm_t algorithm, unsigned* pages,
                             unsigned long long n, unsigned per_thread, unsigned long long seed, bool stats,
                             unsigned long long* scratch, cudaStream_t s);
cudaError_t launch_free_pages(const gpudyn_rw_heap_view_t& v, const unsigned* pages, unsigned long long n,
                              cudaStream_t s);
cudaError_t launch_malloc(const gpudyn_rw_heap_view_t& v, const unsigned long long* sizes, unsigned long long* ptrs,
                          unsigned long long n, unsigned long long seed, unsigned long long* scratch, cudaStream_t s);
cudaError_t launch_free(const gpudyn_rw_heap_view_t& v, const unsigned long long* ptrs, unsigned long long n,
                        cudaStream_t s);

}  // namespace gpudyn::rw_heap_impl
