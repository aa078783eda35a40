"""`gpudyn bench numba`: a user's variable-output kernel written in Numba with
gpudyn.numba, against the same kernel in CUDA C++ and against the Numba way
without gpudyn (issue 12, item 4).

The kernel (issue 10's): M threads, thread t emits k(t) int32 values
t * 16 + j (j < k(t)), k(t) from a hash of t (murmur3's fmix32):
  mean 0.01  Bernoulli: k = 1 when fmix32(t) < 0.01 * 2^32, else 0;
  mean 1     uniform on {0, 1, 2}: k = fmix32(t) % 3;
  mean 8     uniform on {0 .. 16}: k = fmix32(t) % 17.
The GGArray kernel is written two ways a user would (KERNELS):
  push_back     gdn.push_back(out, value) for every value;
  extend        the thread's values into a local array, one gdn.extend(out, vals, k)
                (one reservation for the lanes' runs together).
Series, per mean and kernel, in one run on one GGArray(int32) reserved once:
  numba_ms      the Numba kernel into the cleared array (CUDA events around the
                launch, launched behind a short busy kernel so the host's launch
                time is not counted);
  cpp_ms        the same kernel in CUDA C++ (ggarray_ref<int>::push_back; a CuPy
                RawModule compiled by NVRTC with gpudyn.nvrtc_options()), timed alike;
  numba_e2e_ms  what a user's loop costs: clear() + launch with arr.view_arg() + len(arr)
                (host wall clock, ends with the count on the host);
and once per mean:
  two_pass_ms   the Numba way without gpudyn: count kernel, cupy.cumsum, total to
                the host, cupy.empty(total), write kernel (host wall clock).
A row's numba_ms / cpp_ms / numba_e2e_ms are the push_back kernel's; the
extend kernel's carry the suffix _extend.  Every variant's output is verified
(count, sum and sum of squares of the values, mod 2^64) against the host's
closed form.  Targets, at every mean: Numba time <= 1.25 x C++ time for the
push_back kernel (the kernel of the issue: gdn.push_back, the one device call
every array has; the extend kernel's ratio is in the rows and in the target's
"where", not a target), and the faster kernel's numba_e2e_ms < two_pass_ms.
Needs numba-cuda and CuPy (without them the run records why it was skipped).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

MEANS = (0.01, 1.0, 8.0)
MODES = {0.01: 0, 1.0: 1, 8.0: 2}
THREADS = 100_000_000
QUICK_THREADS = 1_000_000
REPEATS, QUICK_REPEATS = 10, 3
BLOCK = 256
MAX_K = 16  # values per thread at most (mean 8: 0 .. 16)
KERNELS = ("push_back", "extend")  # the two ways the GGArray kernel is written
BERNOULLI_THRESHOLD = 42949673  # round(0.01 * 2^32): k = 1 below it
RATIO_GOAL = 1.25  # Numba kernel time / CUDA C++ kernel time, at most
SPEEDUP_GOAL = 1.0  # two-pass time / GGArray time, at least (faster)
SPIN_NS = 2_000_000  # busy kernel ahead of a timed launch: hides the host's launch time

CPP_SOURCE = r"""
#include <gpudyn/ggarray.cuh>

__device__ __forceinline__ unsigned fmix32(unsigned h) {
    h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;
    return h;
}
__device__ __forceinline__ unsigned count_of(unsigned t, unsigned mode) {
    const unsigned h = fmix32(t);
    return mode == 0 ? (h < %(threshold)du ? 1u : 0u) : mode == 1 ? h %% 3u : h %% 17u;
}
extern "C" __global__ void emit(gpudyn_ggarray_view_t view, unsigned n, unsigned mode, unsigned long long* failed) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const gpudyn::ggarray_ref<int> out{view};
    const unsigned k = count_of(t, mode);
    for (unsigned j = 0; j < k; ++j)
        if (!out.push_back(int(t * 16u + j))) atomicAdd(failed, 1ull);
}
extern "C" __global__ void emit_extend(gpudyn_ggarray_view_t view, unsigned n, unsigned mode,
                                       unsigned long long* failed) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const gpudyn::ggarray_ref<int> out{view};
    const unsigned k = count_of(t, mode);
    int vals[%(max_k)d];
    for (unsigned j = 0; j < k; ++j) vals[j] = int(t * 16u + j);
    if (!out.push_back(vals, k)) atomicAdd(failed, (unsigned long long)k);
}
""" % {"threshold": BERNOULLI_THRESHOLD, "max_k": MAX_K}


def _fmix32_host(t: np.ndarray) -> np.ndarray:
    m = np.uint64(0xFFFFFFFF)
    h = t.astype(np.uint64)
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & m
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & m
    h ^= h >> np.uint64(16)
    return h


def _counts_host(t: np.ndarray, mode: int) -> np.ndarray:
    h = _fmix32_host(t)
    if mode == 0:
        return (h < np.uint64(BERNOULLI_THRESHOLD)).astype(np.uint64)
    return h % np.uint64(3 if mode == 1 else 17)


def expected(n: int, mode: int) -> dict:
    """Count, sum and sum of squares (mod 2^64) of every value the kernel emits."""
    count = total = squares = np.uint64(0)
    with np.errstate(over="ignore"):
        for lo in range(0, n, 1 << 24):
            t = np.arange(lo, min(n, lo + (1 << 24)), dtype=np.uint64)
            k = _counts_host(t, mode)
            s1 = k * (k - np.uint64(1)) // np.uint64(2)  # sum of j < k
            s2 = (k - np.uint64(1)) * k * (np.uint64(2) * k - np.uint64(1)) // np.uint64(6)  # sum of j^2
            base = np.uint64(16) * t
            count += k.sum(dtype=np.uint64)
            total += (base * k + s1).sum(dtype=np.uint64)
            squares += (base * base * k + np.uint64(2) * base * s1 + s2).sum(dtype=np.uint64)
    return {"count": int(count), "sum": int(total), "sum_squares": int(squares)}


def _summary(cp, values) -> dict:
    v = cp.asarray(values).astype(cp.uint64)
    return {"count": int(v.size), "sum": int(v.sum(dtype=cp.uint64)), "sum_squares": int((v * v).sum(dtype=cp.uint64))}


def _kernels():
    """The Numba kernels (compiled on first launch)."""
    from numba import cuda

    import gpudyn.numba as gdn

    @cuda.jit(device=True)
    def count_of(t, mode):
        m = np.uint64(0xFFFFFFFF)
        h = np.uint64(t)
        h ^= h >> np.uint64(16)
        h = (h * np.uint64(0x85EBCA6B)) & m
        h ^= h >> np.uint64(13)
        h = (h * np.uint64(0xC2B2AE35)) & m
        h ^= h >> np.uint64(16)
        if mode == 0:
            return np.int64(1) if h < np.uint64(BERNOULLI_THRESHOLD) else np.int64(0)
        return np.int64(h % np.uint64(3 if mode == 1 else 17))

    @cuda.jit
    def emit(out, n, mode, failed):
        t = cuda.grid(1)
        if t >= n:
            return
        for j in range(count_of(t, mode)):
            if not gdn.push_back(out, t * 16 + j):
                cuda.atomic.add(failed, 0, 1)

    @cuda.jit
    def emit_extend(out, n, mode, failed):
        t = cuda.grid(1)
        if t >= n:
            return
        k = count_of(t, mode)
        vals = cuda.local.array(MAX_K, np.int32)
        for j in range(k):
            vals[j] = t * 16 + j
        if not gdn.extend(out, vals, k):
            cuda.atomic.add(failed, 0, k)

    @cuda.jit
    def count_pass(counts, n, mode):
        t = cuda.grid(1)
        if t < n:
            counts[t] = count_of(t, mode)

    @cuda.jit
    def write_pass(out, ends, n, mode):
        t = cuda.grid(1)
        if t < n:
            k = count_of(t, mode)
            base = ends[t] - k
            for j in range(k):
                out[base + j] = t * 16 + j

    @cuda.jit
    def spin(ns):
        if cuda.grid(1) == 0:
            waited = 0
            while waited < ns:
                cuda.nanosleep(1000)
                waited += 1000

    return {"push_back": emit, "extend": emit_extend}, count_pass, write_pass, spin


def _event_ms(cp, spin, launch) -> float:
    """GPU time of `launch()` between two events, queued behind a busy kernel."""
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    spin[1, 1](SPIN_NS)
    start.record()
    launch()
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop)


def _wall_ms(cp, work) -> float:
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    work()
    cp.cuda.Device().synchronize()
    return (time.perf_counter() - t0) * 1e3


def _median(xs) -> float:
    return float(np.median(np.asarray(xs, dtype=np.float64)))


def _skip(reason: str) -> dict:
    print(f"[numba] skipped: {reason}", file=sys.stderr)
    return {"skipped": reason, "table": f"skipped: {reason}"}


def run(ctx) -> dict:
    try:
        import cupy as cp
        from numba import cuda  # noqa: F401

        import gpudyn.numba as gdn
    except ImportError as e:
        return _skip(f"needs numba-cuda and CuPy ({e})")
    import gpudyn

    from ._common import markdown_table

    n = QUICK_THREADS if ctx.quick else THREADS
    repeats = QUICK_REPEATS if ctx.quick else REPEATS
    grid = (n + BLOCK - 1) // BLOCK
    emit, count_pass, write_pass, spin = _kernels()
    module = cp.RawModule(code=CPP_SOURCE, options=tuple(gpudyn.nvrtc_options()))
    cpp = {"push_back": module.get_function("emit"), "extend": module.get_function("emit_extend")}
    rows, checks = [], []
    steps, done, t0 = len(MEANS) * (3 * len(KERNELS) + 1), 0, time.time()

    def progress(label: str) -> None:
        nonlocal done
        done += 1
        ctx._show_progress(done, steps, label, time.time() - t0)

    for mean in MEANS:
        mode = MODES[mean]
        want = expected(n, mode)
        label = f"mean {mean:g}"
        series, results = {}, {}
        with gpudyn.GGArray(np.int32) as arr:
            # Buckets for the output mapped up front (1.25x: LFVectors fill unevenly).
            arr.reserve(int(want["count"] * 1.25) + 1024 * 512)
            ref = view_arg = arr.view_arg()
            failed = cuda.to_device(np.zeros(1, np.uint64))
            cpp_failed = cp.zeros(1, dtype=cp.uint64)
            for kernel in KERNELS:
                nb, cc = emit[kernel], cpp[kernel]

                def numba_launch():
                    nb[grid, BLOCK](ref, n, mode, failed)

                def cpp_launch():
                    cc((grid,), (BLOCK,), (view_arg, np.uint32(n), np.uint32(mode), cpp_failed))

                def e2e():
                    arr.clear()
                    nb[grid, BLOCK](arr.view_arg(), n, mode, failed)
                    return len(arr)

                for name, launch in ((f"numba_{kernel}", numba_launch), (f"cpp_{kernel}", cpp_launch)):
                    series[name] = []
                    for r in range(repeats + 1):  # the first run warms up (and compiles)
                        arr.clear()
                        ms = _event_ms(cp, spin, launch)
                        if r:
                            series[name].append(ms)
                    results[name] = _summary(cp, arr.flatten())
                    progress(f"{label}: {name.replace('_', ' ', 1)} kernel")
                name = f"numba_e2e_{kernel}"
                series[name] = []
                for r in range(repeats + 1):
                    ms = _wall_ms(cp, e2e)
                    if r:
                        series[name].append(ms)
                results[name] = _summary(cp, arr.flatten())
                progress(f"{label}: numba {kernel} end to end")
            held = arr.stats()["allocated_bytes"]
            failures = int(failed.copy_to_host()[0]) + int(cpp_failed.get()[0])

        counts = cp.empty(n, dtype=cp.int32)
        two_pass_out = {}

        def two_pass():
            count_pass[grid, BLOCK](counts, n, mode)
            ends = cp.cumsum(counts, dtype=cp.int64)
            total = int(ends[-1])  # to the host, to size the output
            out = cp.empty(total, dtype=cp.int32)
            write_pass[grid, BLOCK](out, ends, n, mode)
            two_pass_out["out"] = out

        two = []
        for r in range(repeats + 1):
            ms = _wall_ms(cp, two_pass)
            if r:
                two.append(ms)
        results["two_pass"] = _summary(cp, two_pass_out.pop("out"))
        two_pass_bytes = n * (4 + 8) + results["two_pass"]["count"] * 4
        counts = None  # frees the count buffer before the next point
        progress(f"{label}: two-pass")

        ok = {k: v == want for k, v in results.items()}
        checks.append(
            {"mean": mean, "expected": want, **{f"{k}_ok": v for k, v in ok.items()}, "push_failures": failures}
        )
        rows.append(_row(mean, want["count"], series, two, held, two_pass_bytes, all(ok.values()) and failures == 0))

    for r in rows:
        m = f"mean {r['mean']:g}"
        t = ctx.target(
            f"Numba GGArray push kernel time / the same kernel in CUDA C++, {m}",
            r[_key("numba_over_cpp", "push_back")],
            RATIO_GOAL,
            "x",
            higher_is_better=False,
        )
        t["where"] = "push_back kernel; " + ", ".join(
            f"{k} kernel {r[_key('numba_over_cpp', k)]:.3g} (not a target)" for k in KERNELS if k != "push_back"
        )
        t = ctx.target(
            f"Numba GGArray (clear + kernel + size) vs Numba two-pass (count, cupy.cumsum, allocate, write), {m}",
            r["speedup_vs_two_pass"],
            SPEEDUP_GOAL,
            "x",
            higher_is_better=True,
        )
        t["where"] = f"{r['e2e_kernel']} kernel: {r['best_e2e_ms']:.4g} ms vs {r['two_pass_ms']:.4g} ms"
        ctx.target(
            f"Numba outputs verified (count, sum, sum of squares), {m}",
            float(r["verified"]),
            1.0,
            "bool",
            higher_is_better=True,
        )
    _plot(ctx, rows, n)
    columns = [
        "mean",
        "values",
        "numba_ms",
        "cpp_ms",
        "numba_over_cpp",
        "numba_e2e_ms",
        "numba_ms_extend",
        "cpp_ms_extend",
        "numba_over_cpp_extend",
        "numba_e2e_ms_extend",
        "two_pass_ms",
        "e2e_kernel",
        "speedup_vs_two_pass",
        "verified",
    ]
    return {
        "threads": n,
        "repeats": repeats,
        "block": BLOCK,
        "link_file": os.path.basename(gdn.link_file()),
        "numba_cuda": _version("numba-cuda"),
        "cupy": _version("cupy") or getattr(cp, "__version__", None),
        "rows": rows,
        "checks": checks,
        "table": markdown_table(rows, columns),
    }


def _key(name: str, kernel: str) -> str:
    """A row's key for `kernel`: the push_back kernel's plain, the others' suffixed."""
    return name if kernel == KERNELS[0] else f"{name}_{kernel}"


def _row(
    mean: float, values: int, series: dict, two_pass: list, held: int, two_pass_bytes: int, verified: bool
) -> dict:
    """One mean's row from its series (keys numba_<kernel>, cpp_<kernel>, numba_e2e_<kernel>)."""
    row = {"mean": mean, "values": values}
    for k in KERNELS:
        numba, cpp, e2e = (_median(series[f"{s}_{k}"]) for s in ("numba", "cpp", "numba_e2e"))
        row.update(
            {
                _key("numba_ms", k): numba,
                _key("cpp_ms", k): cpp,
                _key("numba_e2e_ms", k): e2e,
                _key("numba_over_cpp", k): numba / cpp,
            }
        )
    row["e2e_kernel"] = min(KERNELS, key=lambda k: row[_key("numba_e2e_ms", k)])
    row["best_e2e_ms"] = row[_key("numba_e2e_ms", row["e2e_kernel"])]
    row["two_pass_ms"] = _median(two_pass)
    row["speedup_vs_two_pass"] = row["two_pass_ms"] / row["best_e2e_ms"]
    row.update(
        {
            "ggarray_bytes_held": held,
            "two_pass_bytes": two_pass_bytes,
            "verified": verified,
            "series_ms": {**series, "two_pass": two_pass},
        }
    )
    return row


def _version(dist: str):
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # not installed under that name
        return None


def _plot(ctx, rows, n: int) -> None:
    plt = ctx.pyplot()
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    names = [
        ("numba_ms", "Numba push_back (kernel)"),
        ("cpp_ms", "CUDA C++ push_back (kernel)"),
        ("numba_ms_extend", "Numba extend (kernel)"),
        ("cpp_ms_extend", "CUDA C++ extend (kernel)"),
        ("best_e2e_ms", "Numba + gpudyn, faster kernel (clear+kernel+size)"),
        ("two_pass_ms", "Numba two-pass"),
    ]
    width = 0.8 / len(names)
    x = np.arange(len(rows))
    for i, (key, label) in enumerate(names):
        ax.bar(x + (i - (len(names) - 1) / 2) * width, [r[key] for r in rows], width, label=label)
    ax.set_xticks(x, [f"mean {r['mean']:g}" for r in rows])
    ax.set_ylabel("ms (median)")
    ax.set_title(f"{n:,} threads emitting k(t) values, {ctx.device.get('name', 'GPU')}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(ctx.figure_path("numba_variable_output.png"), dpi=120)
    plt.close(fig)
