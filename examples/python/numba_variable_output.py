"""Numba kernels with a variable amount of output per thread, through gpudyn.numba.

  1. thread t emits k(t) values (0..16, from a hash of t) into a GGArray with
     push_back, one value at a time, inside a loop whose trip count differs per lane;
  2. the same values with extend (a local array, one reservation per warp group);
  3. the output read zero-copy by CuPy (cupy.asarray of the flattened array);
  4. rows of k(t) floats malloc'ed from a gpudyn.Heap in one kernel, summed and
     freed in the next.

    python examples/python/numba_variable_output.py [threads]

Needs a GPU and numba-cuda (pip install 'gpudyn-cu13[numba]'); without either it
says so on stderr and exits 77 ("skipped").  CuPy is optional (part 3).  Every
result is checked against NumPy.
"""

import sys

import gpudyn
import numpy as np

MAX_K = 16


def count_host(t):
    """k(t): 0 .. MAX_K, from a multiplicative hash of t (the kernels' rule)."""
    return ((np.asarray(t, np.uint64) * np.uint64(2654435761)) % np.uint64(1 << 32) >> np.uint64(16)) % np.uint64(
        MAX_K + 1
    )


def main(n: int = 1_000_000) -> int:
    try:
        import gpudyn.numba as gdn
        from numba import cuda

        gpudyn.device_count()
    except (ImportError, gpudyn.NoDeviceError) as e:
        print(f"numba_variable_output.py: needs numba-cuda and a CUDA device ({e}); skipped", file=sys.stderr)
        return 77

    @cuda.jit(device=True)
    def count(t):  # k(t), as count_host
        return np.int64(
            ((np.uint64(t) * np.uint64(2654435761)) % np.uint64(1 << 32) >> np.uint64(16)) % np.uint64(MAX_K + 1)
        )

    @cuda.jit
    def emit(out, n, failed):
        t = cuda.grid(1)
        if t >= n:
            return
        for j in range(count(t)):
            if not gdn.push_back(out, t * MAX_K + j):
                cuda.atomic.add(failed, 0, 1)

    @cuda.jit
    def emit_extend(out, n, failed):
        t = cuda.grid(1)
        if t >= n:
            return
        values = cuda.local.array(MAX_K, np.int64)
        k = count(t)
        for j in range(k):
            values[j] = t * MAX_K + j
        if not gdn.extend(out, values, k):
            cuda.atomic.add(failed, 0, 1)

    @cuda.jit
    def make_rows(heap, n, rows):
        t = cuda.grid(1)
        if t >= n:
            return
        k = count(t)
        rows[t] = 0
        if k != 0:
            p = gdn.malloc(heap, k * 4)
            if p != 0:
                row = gdn.array(p, k, np.float32)
                for j in range(k):
                    row[j] = 0.5 * j
            rows[t] = p

    @cuda.jit
    def sum_rows(heap, n, rows, sums):
        t = cuda.grid(1)
        if t >= n:
            return
        s = 0.0
        if rows[t] != 0:
            row = gdn.array(rows[t], count(t), np.float32)
            for j in range(row.size):
                s += row[j]
        sums[t] = s
        gdn.free(heap, rows[t])

    t = np.arange(n, dtype=np.int64)
    k = count_host(t).astype(np.int64)
    first = np.cumsum(k) - k  # where thread t's values start in the host reference
    j = np.arange(int(k.sum())) - np.repeat(first, k)
    want = np.sort(np.repeat(t * MAX_K, k) + j)  # thread t: t * MAX_K + j for j < k(t)
    grid = (n + 255) // 256
    ok = True

    with gpudyn.GGArray(np.int64) as out:
        # Bucket rows mapped up front for every LFVector (blocks share them unevenly: 1.5x the mean).
        out.reserve(int(len(want) * 1.5) + 1024 * 512)
        failed = cuda.to_device(np.zeros(1, np.int64))
        emit[grid, 256](out.view_arg(), n, failed)
        got = np.sort(out.to_numpy())
        good = failed.copy_to_host()[0] == 0 and np.array_equal(got, want)
        print(
            f"1. push_back: {n} threads emitted {len(got)} values (expected {len(want)}): {'ok' if good else 'WRONG'}"
        )
        ok &= good

        out.clear()
        emit_extend[grid, 256](out.view_arg(), n, failed)
        good = failed.copy_to_host()[0] == 0 and np.array_equal(np.sort(out.to_numpy()), want)
        print(f"2. extend: {'ok' if good else 'WRONG'}")
        ok &= good

        try:
            import cupy as cp
        except ImportError:
            print("3. CuPy is not installed: zero-copy read skipped")
        else:
            flat = out.flatten()  # contiguous device copy; CuPy reads it in place
            total = int(cp.asarray(flat).sum())
            good = total == int(want.sum())
            print(f"3. CuPy zero-copy sum {total}: {'ok' if good else 'WRONG'}")
            ok &= good

    with gpudyn.Heap(initial_bytes=256 << 20) as heap:
        rows, sums = cuda.device_array(n, np.uint64), cuda.device_array(n, np.float64)
        make_rows[grid, 256](heap.view_arg(), n, rows)
        live = heap.stats()
        sum_rows[grid, 256](heap.view_arg(), n, rows, sums)
        want_sums = 0.5 * k * (k.astype(np.float64) - 1) / 2
        good = (
            live["allocations"] == int((k > 0).sum())
            and np.allclose(sums.copy_to_host(), want_sums)
            and heap.stats()["allocations"] == 0
        )
        print(
            f"4. heap rows: {live['allocations']} malloc'ed, {live['bytes_allocated']} bytes, summed and freed: "
            f"{'ok' if good else 'WRONG'}"
        )
        ok &= good
    print("numba_variable_output.py:", "ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000))
