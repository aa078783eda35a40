"""A user's own CuPy RawModule kernel appends to gpudyn arrays with the
per-thread push_back of the device headers: any thread, inside any branch,
after neighbours returned early; the lanes of a warp that push together share
one reservation.

  keep_small   each thread keeps its x if x < 90 (one value per thread);
  emit         thread i appends i % 5 values (several values per thread);
  a full StaticArray: the pushes that do not fit return false, the array's
               status says so and the next host call raises OutOfMemoryError.

Needs a GPU and CuPy (without either it says so on stderr and exits 77, "skipped").
    python examples/ggarray/cupy_push_back.py
"""

import pathlib
import sys

import gpudyn
import numpy as np

# The kernels: examples/python/ggarray_push_rtc.cu (CI compiles it with NVRTC).
KERNELS = (pathlib.Path(__file__).resolve().parents[1] / "python" / "ggarray_push_rtc.cu").read_text()


def main() -> int:
    try:
        import cupy as cp
    except ImportError:
        print("cupy_push_back.py: CuPy is not installed; skipped", file=sys.stderr)
        return 77
    try:
        gpudyn.device_count()
    except gpudyn.NoDeviceError as e:
        print(f"cupy_push_back.py: no CUDA device ({e}); skipped", file=sys.stderr)
        return 77
    mod = cp.RawModule(code=KERNELS, options=tuple(gpudyn.nvrtc_options()))
    x = cp.asarray(np.random.default_rng(0).integers(0, 100, 1 << 20).astype(np.int32))
    n = x.size
    grid, block = ((n + 255) // 256,), (256,)

    # One value per thread.  CuPy and the array both use the default stream here.
    g = gpudyn.GGArray(dtype=np.int32, num_lfvectors=64)
    mod.get_function("keep_small")(grid, block, (g.view_arg(), x, np.uint32(n)))
    g.check()  # raises OutOfMemoryError if a push failed
    expect = cp.asnumpy(x[x < 90])
    print(f"keep_small: kept {len(g)} of {n} (expected {expect.size})")
    assert len(g) == expect.size
    assert np.array_equal(np.sort(g.to_numpy()), np.sort(expect))

    # Several values per thread.
    e = gpudyn.GGArray(dtype=np.int32)
    mod.get_function("emit")(grid, block, (e.view_arg(), np.uint32(n)))
    i = np.arange(n, dtype=np.int32)
    want = np.repeat(i, i % 5)
    print(f"emit: {len(e)} values (expected {want.size})")
    assert np.array_equal(np.sort(e.to_numpy()), want)

    # A full array: what fits is stored once, the rest is refused and reported.
    s = gpudyn.StaticArray(1000, dtype=np.int32)
    ok = cp.zeros(n, dtype=cp.uint8)
    mod.get_function("fill")(grid, block, (s.view_arg(), x, np.uint32(n), ok))
    assert s.status == gpudyn.StaticArray.STATUS_CAPACITY_EXCEEDED
    try:
        len(s)
        raise AssertionError("a full StaticArray did not raise OutOfMemoryError")
    except gpudyn.OutOfMemoryError as err:
        print(f"full static array: {err}")
    stored = cp.asnumpy(x[ok.astype(bool)])
    print(f"full static array: {len(s)} stored, {stored.size} pushes returned true")
    assert len(s) == stored.size <= 1000
    assert np.array_equal(np.sort(s.to_numpy()), np.sort(stored))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
