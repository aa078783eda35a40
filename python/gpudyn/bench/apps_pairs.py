"""The second real program of `gpudyn bench apps` (issue 40, item 4b): the
fixed-radius neighbour pairs of a particle system (the neighbour list of a
molecular-dynamics or SPH step), in Python with Numba kernels.  Its output size
is known only after the search, and the worst case a user can bound without
counting is many times the real output.

Particles: N (2^21; --quick 2^16) uniform in a cube of C^3 cells of side r = 1,
C = round((N / DENSITY)^(1/3)), so a cell holds DENSITY = 4 particles on average
and a particle has ~17 neighbours (~8 pairs i < j).  Coordinates are multiples
of 2^-10, so differences, their squares and the squared distances are exact in
float32 and the host reference decides every pair exactly as the kernels do
(|p_i - p_j|^2 < r^2).  The particles are sorted by cell (CuPy argsort), every
cell's range found with searchsorted; pair (i, j), i < j in that order, is the
int64 code i << 32 | j.

Every variant runs one kernel shape, a thread per particle i visiting the 27
cells around its own and every j > i there (neighbour_loop, one device function);
they differ only in what they do with a pair:
  gpudyn          gdn.push_back(ref, code) into a GGArray(int64) with default
                  options, kept across the runs (clear() between them: a
                  simulation rebuilds its list every step); timed: clear +
                  view_arg + kernel + len(array) (the host learns the count);
  gpudyn_local    the same array; each thread keeps its pairs in a local
                  array of LOCAL (16) and appends them with one gdn.extend when
                  it is full and at the end (one reservation per full batch);
  gpudyn_fresh    gpudyn into a GGArray created for each run (and closed
                  after the timing);
  worst           a buffer of the bound a user can compute without counting,
                  N x 27 x the most particles in a cell, allocated before the
                  timing, and one int64 counter taken with a warp-aggregated
                  atomicAdd; timed: zero the counter + kernel + the counter to the host;
  two_pass        count kernel (pairs per particle), cupy.cumsum, the total to
                  the host, an exact output from CuPy's pool (memory kept between
                  runs), write kernel at each particle's offset.
Timing: CUDA events around each run, one warm-up, median of RUNS runs.
Validation, outside the timing, of the last run of every variant: the number
of pairs, the sum of the codes and the xor of a 64-bit mix of each code equal
the host reference's (scipy.spatial.cKDTree.query_pairs at r, kept where the
squared distance is below r^2; without SciPy, the exact neighbour sets of 2000
particles drawn at random, by NumPy brute force, are compared with each
variant's output).
Memory each variant holds: gpudyn: the array's allocated_bytes + 1 KiB per
LFVector (a bound on the bookkeeping); worst: its buffer; two_pass: counts,
offsets and the exact output.
"""

from __future__ import annotations

import time

import numpy as np

try:
    from numba import cuda
except ImportError:  # run() is only called when numba-cuda is there
    cuda = None

# The BFS's block, bookkeeping bound and goals (issue 40's, for both programs).
from .apps import (
    BLOCK,
    BOOKKEEPING_BOUND,
    DEFAULT_LFVECTORS,
    MEMORY_GOAL,
    SPEED_TWO_PASS_GOAL,
    SPEED_WORST_GOAL,
    aggregated_push,
)

N, QUICK_N = 1 << 21, 1 << 16
DENSITY = 4.0  # mean particles per cell of side r
FRACTION_BITS = 10  # coordinates are multiples of 2^-10 (exact float32 distances)
SEED = 0x9A125
RUNS, QUICK_RUNS = 7, 3
SAMPLE = 2000  # particles checked by brute force when SciPy is missing
LOCAL = 16  # gpudyn_local: pairs a thread keeps before one extend (a power of two)
MASK64 = (1 << 64) - 1


def mix64(x):
    """splitmix64's finalizer over uint64 (NumPy or CuPy arrays)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def digest(xp, codes) -> tuple[int, int, int]:
    """(count, sum mod 2^64, xor of mix64) of int64 pair codes (NumPy)."""
    u = codes.astype(xp.uint64, copy=False)
    if u.size == 0:
        return 0, 0, 0
    s = int(u.sum(dtype=xp.uint64)) & MASK64
    x = int(np.bitwise_xor.reduce(mix64(u)))
    return int(u.size), s, x


def particles(cp, n: int, seed: int = SEED):
    """Positions sorted by cell (float32, 3 arrays), per-cell start/end (int32), C."""
    c = max(3, int(round((n / DENSITY) ** (1.0 / 3.0))))
    rng = cp.random.default_rng(seed)
    scale = 1 << FRACTION_BITS
    q = rng.integers(0, c * scale, size=(3, n), dtype=cp.int64)
    cell = ((q[0] // scale) * c + q[1] // scale) * c + q[2] // scale
    order = cp.argsort(cell)
    q, cell = q[:, order], cell[order]
    ids = cp.arange(c * c * c, dtype=cell.dtype)
    start = cp.searchsorted(cell, ids, side="left").astype(cp.int32)
    end = cp.searchsorted(cell, ids, side="right").astype(cp.int32)
    pos = (q.astype(cp.float64) / scale).astype(cp.float32)
    return pos[0].copy(), pos[1].copy(), pos[2].copy(), start, end, c, q


def neighbour_loop(emit, half: bool = True):
    """Device function loop(px, py, pz, start, end, c, i, a, b, buf) -> count: the
    particles j within r of particle i (j > i when `half`, else every j != i),
    visiting the 27 cells around i's; emit(a, b, i, j, k, buf) for the k-th.
    buf: the thread's own local array, for the emitter."""
    i32, i64 = np.int32, np.int64
    r2 = np.float32(1.0)

    @cuda.jit(device=True)
    def loop(px, py, pz, start, end, c, i, a, b, buf):
        x, y, z = px[i], py[i], pz[i]
        cx, cy, cz = i32(x), i32(y), i32(z)
        k = i64(0)
        for dx in range(-1, 2):
            ax = cx + dx
            if ax < 0 or ax >= c:
                continue
            for dy in range(-1, 2):
                ay = cy + dy
                if ay < 0 or ay >= c:
                    continue
                for dz in range(-1, 2):
                    az = cz + dz
                    if az < 0 or az >= c:
                        continue
                    cell = (ax * c + ay) * c + az
                    j = max(i32(start[cell]), i32(i + 1)) if half else i32(start[cell])
                    stop = end[cell]
                    while j < stop:
                        ex, ey, ez = px[j] - x, py[j] - y, pz[j] - z
                        if ex * ex + ey * ey + ez * ez < r2 and (half or j != i):
                            emit(a, b, i, j, k, buf)
                            k += 1
                        j += 1
        return k

    return loop


def kernels(gdn):
    """{name: kernel}: pairs_<gpudyn|gpudyn_local|worst>, count, write: one loop
    (neighbour_loop, j > i) with five sinks; a pair is the code i << 32 | j."""
    i64 = np.int64

    @cuda.jit(device=True)
    def code(i, j):
        return (i64(i) << 32) | i64(j)

    @cuda.jit(device=True)
    def emit_gpudyn(ref, failed, i, j, k, buf):
        if not gdn.push_back(ref, code(i, j)):
            cuda.atomic.add(failed, 0, 1)

    @cuda.jit(device=True)
    def emit_gpudyn_local(ref, failed, i, j, k, buf):
        # LOCAL pairs kept in the thread's own array, then one extend of all of them.
        buf[k & (LOCAL - 1)] = code(i, j)
        if (k & (LOCAL - 1)) == LOCAL - 1 and not gdn.extend(ref, buf, LOCAL):
            cuda.atomic.add(failed, 0, 1)

    @cuda.jit(device=True)
    def finish_none(a, b, k, buf):
        pass

    @cuda.jit(device=True)
    def finish_gpudyn_local(ref, failed, k, buf):
        left = k & (LOCAL - 1)
        if left != 0 and not gdn.extend(ref, buf, left):
            cuda.atomic.add(failed, 0, 1)

    push_worst = aggregated_push(i64)

    @cuda.jit(device=True)
    def emit_worst(out_, counter, i, j, k, buf):
        push_worst(out_, counter, code(i, j))

    @cuda.jit(device=True)
    def emit_none(a, b, i, j, k, buf):
        pass

    @cuda.jit(device=True)
    def emit_at(out_, offsets, i, j, k, buf):
        out_[offsets[i] + k] = code(i, j)

    def pairs_kernel(emit, finish=finish_none, local=1):
        loop = neighbour_loop(emit)

        @cuda.jit
        def pairs(px, py, pz, start, end, c, n, a, b):
            i = cuda.grid(1)
            if i < n:
                buf = cuda.local.array(local, i64)
                finish(a, b, loop(px, py, pz, start, end, c, i, a, b, buf), buf)

        return pairs

    out = {
        "pairs_gpudyn": pairs_kernel(emit_gpudyn),
        "pairs_gpudyn_local": pairs_kernel(emit_gpudyn_local, finish_gpudyn_local, LOCAL),
        "pairs_worst": pairs_kernel(emit_worst),
    }
    count_loop, write_loop = neighbour_loop(emit_none), neighbour_loop(emit_at)

    @cuda.jit
    def count(px, py, pz, start, end, c, n, counts, unused):
        i = cuda.grid(1)
        if i < n:
            buf = cuda.local.array(1, i64)
            counts[i] = count_loop(px, py, pz, start, end, c, i, unused, unused, buf)

    @cuda.jit
    def write(px, py, pz, start, end, c, n, out_, offsets):
        i = cuda.grid(1)
        if i < n:
            buf = cuda.local.array(1, i64)
            write_loop(px, py, pz, start, end, c, i, out_, offsets, buf)

    out["count"], out["write"] = count, write
    return out


def reference(q_host: np.ndarray, sample_rows: np.ndarray | None = None, directed: bool = False):
    """Host reference from the integer coordinates (sorted order): the digest of
    every pair i < j (SciPy; both (i, j) and (j, i) when `directed`), or {i: sorted
    partner codes} for the sample (NumPy; partners j > i, or every j != i when
    `directed`)."""
    scale2 = (1 << FRACTION_BITS) ** 2
    pts = q_host.T.astype(np.float64) / (1 << FRACTION_BITS)
    if sample_rows is None:
        from scipy.spatial import cKDTree

        pairs = cKDTree(pts).query_pairs(1.0, output_type="ndarray")
        d = q_host[:, pairs[:, 0]] - q_host[:, pairs[:, 1]]
        keep = (d * d).sum(axis=0) < scale2
        pairs = np.sort(pairs[keep], axis=1).astype(np.int64)
        codes = (pairs[:, 0] << 32) | pairs[:, 1]
        if directed:
            codes = np.concatenate([codes, (pairs[:, 1] << 32) | pairs[:, 0]])
        return digest(np, codes)
    out = {}
    for i in sample_rows:
        d = q_host - q_host[:, i : i + 1]
        near = np.nonzero((d * d).sum(axis=0) < scale2)[0]
        near = near[near != i] if directed else near[near > i]
        out[int(i)] = np.sort((np.int64(i) << 32) | near.astype(np.int64))
    return out


def _has_scipy() -> bool:
    try:
        import scipy.spatial  # noqa: F401
    except ImportError:
        return False
    return True


def _check(cp, codes, ref, sample) -> str:
    """'' when the variant's output matches the reference, else why not."""
    if sample is None:
        got = digest(np, cp.asnumpy(codes))
        return "" if got == ref else f"count/sum/xor {got} != reference {ref}"
    c = cp.sort(codes)
    firsts = c >> 32
    for i, want in ref.items():
        lo, hi = (int(v) for v in cp.searchsorted(firsts, cp.asarray([i, i + 1])))
        got = cp.asnumpy(c[lo:hi])
        if not np.array_equal(got, want):
            return f"particle {i}: {got.size} partners, reference {want.size}"
    return ""


class ParticleRun:
    """What the two particle programs (pairs, apps_lists's neighbour lists) share:
    the particles and the kernels' geometry arguments (kargs: px, py, pz, start,
    end, c, n), the host reference (every pair i < j, or both ways when
    `directed`), CUDA-event timing, and each variant's record, validated."""

    def __init__(self, ctx, cp, label: str, progress, directed: bool = False):
        self.cp, self.label, self.progress = cp, label, progress
        self.n = n = QUICK_N if ctx.quick else N
        self.runs = QUICK_RUNS if ctx.quick else RUNS
        self.t_all = time.time()
        px, py, pz, self.start, self.end, self.c, q = particles(cp, n)
        self.grid = (n + BLOCK - 1) // BLOCK
        geo = (px, py, pz, self.start, self.end, np.int32(self.c), np.int32(n))
        self.kargs = [cuda.as_cuda_array(a, sync=False) for a in geo[:5]] + list(geo[5:])
        t0 = time.time()
        q_host = cp.asnumpy(q)
        if _has_scipy():
            self.sample, self.ref = None, reference(q_host, directed=directed)
            self.ref_kind = "scipy cKDTree, every pair" + (" both ways" if directed else "")
        else:
            rng = np.random.default_rng(SEED)
            self.sample = np.sort(rng.choice(n, size=min(SAMPLE, n), replace=False))
            self.ref = reference(q_host, self.sample, directed=directed)
            self.ref_kind = f"NumPy brute force, {self.sample.size} particles"
        self.ref_seconds = time.time() - t0
        self.start_ev, self.stop_ev = cp.cuda.Event(), cp.cuda.Event()
        self.results: dict[str, dict] = {}
        self.failures: list[str] = []

    def timed(self, step) -> list[float]:
        """ms of each of `runs` calls of step() after one warm-up (CUDA events)."""
        ms = []
        for r in range(self.runs + 1):
            self.start_ev.record()
            step()
            self.stop_ev.record()
            self.stop_ev.synchronize()
            if r:
                ms.append(self.cp.cuda.get_elapsed_time(self.start_ev, self.stop_ev))
        return ms

    def record(self, name, ms, codes, held, **extra) -> None:
        """A variant's timings, memory and validation (its pair codes against the reference)."""
        why = _check(self.cp, codes, self.ref, self.sample)
        if why:
            self.failures.append(f"{name}: {why}")
        self.results[name] = dict(
            ms=ms,
            median_ms=float(np.median(ms)),
            pairs=int(codes.size),
            held_bytes=int(held),
            validated=not why,
            **extra,
        )
        self.progress(f"{self.label} {name}")

    def finish(self, ctx, what: str, **extra) -> dict:
        """The 'every <what> output validated' target, then the program's JSON part."""
        t = ctx.target(f"every {what} output validated (1 = yes)", float(not self.failures), 1.0, "bool", True)
        if self.failures:
            t["where"] = "; ".join(self.failures)[:2000]
        return {
            "particles": self.n,
            "cells_per_side": self.c,
            **extra,
            "reference": self.ref_kind,
            "reference_seconds": self.ref_seconds,
            "runs": self.runs,
            "block": BLOCK,
            "variants": self.results,
            "failures": self.failures,
            "validated": not self.failures,
            "run_seconds": time.time() - self.t_all,
        }


def run_pairs(ctx, cp, gdn, progress=lambda label: None) -> dict:
    """Runs the four variants, records their timings, memory and validation, and
    the targets of the second application."""
    import gpudyn

    pr = ParticleRun(ctx, cp, "pairs", progress)
    n, runs, grid, kargs, results, failures = pr.n, pr.runs, pr.grid, pr.kargs, pr.results, pr.failures
    timed, record, start_ev, stop_ev = pr.timed, pr.record, pr.start_ev, pr.stop_ev
    ks = kernels(gdn)
    most = int(cp.max(pr.end - pr.start))
    bound = n * 27 * most  # pairs a user can bound without counting

    failed = cp.zeros(1, dtype=cp.int64)
    kfailed = cuda.as_cuda_array(failed, sync=False)

    # gpudyn, one array kept across the runs: push_back per pair, then each thread
    # keeping LOCAL pairs in its own array and extending by all of them.
    arr = gpudyn.GGArray(np.int64)
    size = [0]
    for name in ("gpudyn", "gpudyn_local"):

        def gg_step(a=arr, kernel=ks[f"pairs_{name}"]):
            a.clear()
            kernel[grid, BLOCK](*kargs, a.view_arg(), kfailed)
            size[0] = len(a)

        ms = timed(gg_step)
        alloc = arr.stats()["allocated_bytes"]
        extra = {"push_failures": int(failed[0])} if name == "gpudyn" else {}
        record(
            name,
            ms,
            cp.asarray(arr.flatten()),
            alloc + BOOKKEEPING_BOUND * DEFAULT_LFVECTORS,
            allocated_bytes=int(alloc),
            **extra,
        )
    arr.close()

    # gpudyn, an array made per run (closed after the run's timing).
    fresh_ms, last = [], [None]
    for r in range(runs + 1):
        if last[0] is not None:
            last[0].close()
        start_ev.record()
        a = gpudyn.GGArray(np.int64)
        ks["pairs_gpudyn"][grid, BLOCK](*kargs, a.view_arg(), kfailed)
        size[0] = len(a)
        stop_ev.record()
        stop_ev.synchronize()
        last[0] = a
        if r:
            fresh_ms.append(cp.cuda.get_elapsed_time(start_ev, stop_ev))
    alloc = last[0].stats()["allocated_bytes"]
    record(
        "gpudyn_fresh",
        fresh_ms,
        cp.asarray(last[0].flatten()),
        alloc + BOOKKEEPING_BOUND * DEFAULT_LFVECTORS,
        allocated_bytes=int(alloc),
    )
    last[0].close()
    if int(failed[0]):
        failures.append(f"gpudyn: {int(failed[0])} pushes refused")

    # The worst-case buffer (when the device can hold it).
    free_b = int(cp.cuda.runtime.memGetInfo()[0])
    if bound * 8 < free_b // 2:
        buf = cp.empty(bound, dtype=cp.int64)
        counter = cp.zeros(1, dtype=cp.int64)
        kb, kc = cuda.as_cuda_array(buf, sync=False), cuda.as_cuda_array(counter, sync=False)
        got = [0]

        def worst_step():
            counter.fill(0)
            ks["pairs_worst"][grid, BLOCK](*kargs, kb, kc)
            got[0] = int(counter[0])

        ms = timed(worst_step)
        record("worst", ms, buf[: got[0]], buf.nbytes + counter.nbytes, bound_pairs=int(bound))
        del buf
    else:
        results["worst"] = {"skipped": f"the bound ({bound} pairs, {bound * 8} bytes) exceeds half the free memory"}

    # Two-pass: count, scan, exact output, write.
    counts = cp.empty(n, dtype=cp.int64)
    kcounts = cuda.as_cuda_array(counts, sync=False)
    holder = [None, 0]

    def two_pass_step():
        ks["count"][grid, BLOCK](*kargs, kcounts, kfailed)  # the last argument is not used
        incl = cp.cumsum(counts)
        total = int(incl[-1])
        offsets = incl - counts
        out = cp.empty(total, dtype=cp.int64)
        ks["write"][grid, BLOCK](*kargs, cuda.as_cuda_array(out, sync=False), cuda.as_cuda_array(offsets, sync=False))
        holder[0], holder[1] = out, counts.nbytes + incl.nbytes + offsets.nbytes + out.nbytes

    ms = timed(two_pass_step)
    record("two_pass", ms, holder[0], holder[1])
    holder[0] = None

    tp, wc = results["two_pass"], results.get("worst", {})
    best = min(("gpudyn", "gpudyn_local"), key=lambda k: results[k]["median_ms"])
    gg = results[best]
    for form, what in (("gpudyn", "push_back per pair"), ("gpudyn_local", f"extend by {LOCAL} pairs a thread")):
        g = results[form]
        v = tp["median_ms"] / g["median_ms"]
        t = ctx.target(
            f"neighbour pairs gpudyn ({what}) vs two-pass (count, scan, write), Numba",
            v,
            SPEED_TWO_PASS_GOAL,
            "x",
            True,
        )
        t["where"] = f"{g['median_ms']:.4g} ms vs {tp['median_ms']:.4g} ms"
    v = wc["median_ms"] / gg["median_ms"] if "median_ms" in wc else 0.0
    t = ctx.target(
        "neighbour pairs gpudyn (its faster form) vs worst-case buffer (warp-aggregated atomic counter), Numba",
        v,
        SPEED_WORST_GOAL,
        "x",
        True,
    )
    t["where"] = (
        f"{best}: {gg['median_ms']:.4g} ms vs {wc['median_ms']:.4g} ms"
        if v
        else "not measured: " + wc.get("skipped", "")
    )
    v = tp["median_ms"] / results["gpudyn_fresh"]["median_ms"]
    t = ctx.target(
        "neighbour pairs gpudyn (push_back per pair) vs two-pass, Numba, array made per run", v, 1.0, "x", True
    )
    t["where"] = f"{results['gpudyn_fresh']['median_ms']:.4g} ms vs {tp['median_ms']:.4g} ms"
    t = ctx.target(
        "neighbour pairs device memory gpudyn / two-pass (lower is better)",
        gg["held_bytes"] / max(1, tp["held_bytes"]),
        MEMORY_GOAL,
        "ratio",
        False,
    )
    t["where"] = f"{gg['held_bytes'] / 2**20:.1f} MiB vs {tp['held_bytes'] / 2**20:.1f} MiB"
    return pr.finish(
        ctx,
        "neighbour-pair",
        density=DENSITY,
        most_in_a_cell=most,
        bound_pairs=int(bound),
        pairs=gg["pairs"],
        local=LOCAL,
    )
