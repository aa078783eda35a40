"""malloc and free inside a user's CuPy RawModule kernels, from a gpudyn.Heap.

Kernel 1: each thread mallocs a row of its own length (0 to 999 ints; threads
with length 0 return early, the others fill their row) and publishes the pointer.
Kernel 2, a later launch: each thread reads its row back, sums it and frees it.
The device header is compiled by NVRTC with gpudyn.nvrtc_options().

    python examples/heap/cupy_malloc.py [threads]

Needs a GPU and CuPy; checks every sum against NumPy and the heap's stats
(every row served, bytes held <= 1.3 x bytes allocated).
"""

import os
import sys

import gpudyn
import numpy as np

KERNELS = r"""
#include <gpudyn/heap.cuh>

__device__ unsigned row_length(unsigned i) { return (i * 2654435761u) % 1000u; }

extern "C" __global__ void build(gpudyn_heap_view_t view, unsigned n, unsigned long long* rows) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned len = row_length(i);
    if (len == 0) {                       // some threads leave early: malloc needs no full warp
        rows[i] = 0;
        return;
    }
    const gpudyn::heap_ref heap{view};
    unsigned* row = static_cast<unsigned*>(heap.malloc(len * sizeof(unsigned)));  // nullptr when full
    if (row)
        for (unsigned k = 0; k < len; ++k) row[k] = i + k;
    rows[i] = reinterpret_cast<unsigned long long>(row);
}

extern "C" __global__ void sum_and_free(gpudyn_heap_view_t view, unsigned n, const unsigned long long* rows,
                                        unsigned long long* sums, unsigned* bad_frees) {
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned* row = reinterpret_cast<const unsigned*>(rows[i]);
    unsigned long long s = 0;
    for (unsigned k = 0; row && k < row_length(i); ++k) s += row[k];
    sums[i] = s;
    if (!gpudyn::heap_ref{view}.free(const_cast<unsigned*>(row))) atomicAdd(bad_frees, 1u);  // free(nullptr) is fine
}
"""


def main(n: int = 100_000) -> int:
    try:
        import cupy as cp
    except ImportError:
        print("cupy_malloc.py: CuPy is not installed; nothing to do")
        return 0
    module = cp.RawModule(code=KERNELS, options=tuple(gpudyn.nvrtc_options()))
    build, sum_and_free = module.get_function("build"), module.get_function("sum_and_free")
    grid, block = ((n + 255) // 256,), (256,)

    with gpudyn.Heap(initial_bytes=512 << 20) as heap:
        view_arg = heap.view_arg()  # the gpudyn_heap_view_t, passed by value
        rows = cp.zeros(n, dtype=cp.uint64)
        build(grid, block, (view_arg, np.uint32(n), rows))
        lengths = (np.arange(n, dtype=np.uint64) * 2654435761 % (1 << 32)) % 1000
        live = heap.stats()
        print(
            f"{n} threads: {live['allocations']} rows, {live['bytes_allocated']} bytes allocated, "
            f"{live['bytes_held']} bytes held"
        )
        assert live["allocations"] == int((lengths > 0).sum()) and live["failed_allocations"] == 0
        # Slabs are attached only when a size class's slabs are (nearly) full.
        # (Not under compute-sanitizer: it serializes the warps, so the attach
        # throttle sees other timings; tests/sanitize.sh sets GPUDYN_SANITIZER.)
        if not os.environ.get("GPUDYN_SANITIZER"):
            assert live["bytes_held"] <= 1.3 * live["bytes_allocated"], "the heap holds too much for what is live"

        sums, bad = cp.zeros(n, dtype=cp.uint64), cp.zeros(1, dtype=cp.uint32)
        sum_and_free(grid, block, (view_arg, np.uint32(n), rows, sums, bad))
        i = np.arange(n, dtype=np.uint64)
        expected = lengths * i + lengths * (lengths - 1) // 2  # sum of i + k for k < length
        wrong = int((sums.get() != expected).sum())
        after = heap.stats()
        print(f"{wrong} wrong sums, {int(bad.get()[0])} bad frees, {after['allocations']} allocations left")
        ok = wrong == 0 and int(bad.get()[0]) == 0 and after["allocations"] == 0 and after["bad_frees"] == 0
    print("cupy_malloc.py:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000))
