"""Ragged array with the warp heap: every item produces a variable-length
output (here: the divisors of i), sized by a first pass, stored in blocks from
gpudyn.WarpHeap.alloc, filled by a second kernel, read back as a list of arrays.

    python examples/warp_heap/ragged.py [items]

Needs a GPU and CuPy (without either it says so on stderr and exits 77,
"skipped"); prints a few rows and checks all against NumPy.
"""

import sys

import gpudyn
import numpy as np


def main(items: int = 10_000) -> int:
    try:
        import cupy as cp
    except ImportError:
        print("ragged.py: CuPy is not installed; skipped", file=sys.stderr)
        return 77
    try:
        gpudyn.device_count()
    except gpudyn.NoDeviceError as e:
        print(f"ragged.py: no CUDA device ({e}); skipped", file=sys.stderr)
        return 77
    src = r'''
    extern "C" __global__ void count(int n, unsigned long long* sizes) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n) return;
        unsigned long long c = 0;
        for (int d = 1; d <= i + 1; ++d) c += (i + 1) % d == 0;
        sizes[i] = c * sizeof(int);
    }
    extern "C" __global__ void fill(int n, int* const* rows) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= n) return;
        int k = 0;
        for (int d = 1; d <= i + 1; ++d) if ((i + 1) % d == 0) rows[i][k++] = d;
    }'''
    mod = cp.RawModule(code=src)
    grid, block = ((items + 255) // 256,), (256,)
    sizes = cp.empty(items, dtype=cp.uint64)
    mod.get_function("count")(grid, block, (np.int32(items), sizes))
    with gpudyn.WarpHeap() as heap:  # arena backing: one pool, no CUDA device heap needed
        rows = cp.asarray(heap.malloc(sizes))  # one 16-byte aligned block per item, valid until clear()
        mod.get_function("fill")(grid, block, (np.int32(items), rows))
        ptrs, lens = rows.get(), (sizes.get() // 4).astype(np.int64)
        # Read back (a real program would keep working on the device).
        flat = []
        for p, n in zip(ptrs, lens):
            buf = cp.ndarray(
                (int(n),),
                dtype=cp.int32,
                memptr=cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(int(p), int(n) * 4, heap), 0),
            )
            flat.append(buf.get())
        print("stats:", heap.stats())
    for i in (0, 11, 35, items - 1):
        print(f"divisors of {i + 1}: {flat[i].tolist()}")
    bad = sum(
        not np.array_equal(flat[i], [d for d in range(1, i + 2) if (i + 1) % d == 0])
        for i in range(0, items, max(1, items // 500))
    )
    print("ragged.py:", "ok" if bad == 0 else f"{bad} wrong rows")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10_000))
