"""The Heap's program in `gpudyn bench apps` (issue 42, item 4): every particle's
list of neighbours (all j != i within r: the neighbour list of a molecular-dynamics
or SPH step), built in one pass with the Heap's malloc from the kernel, against
the way it is built without a device allocator (count, scan, write).

The particles are apps_pairs's (same N, density, exact coordinates, the same
27-cell loop, neighbour_loop with every j != i); a particle has ~17 neighbours.
Variants (a thread per particle, one kernel shape):
  heap      each thread keeps its first LOCAL (32) neighbours in its own array
            and counts the rest; after the search it mallocs exactly the list's
            bytes on a gpudyn.Heap and copies them there (a longer list, rare at
            ~17 on average, searches again for the rest, straight to the Heap);
            malloc stays outside the search loop.  Compiled with
            max_registers=MAX_REGISTERS (64, about the count kernel's 55:
            the search keeps its occupancy, malloc spills a little); the
            list's address and length go to two n-element tables;
  heap_default_registers  the same kernel without the cap (~90 registers).  A run is one
            simulation step: a kernel frees the last step's lists, then the
            build kernel; the host waits for nothing (a failed malloc is
            counted in a device word, read after the timing);
  two_pass  count kernel (neighbours per particle), cupy.cumsum, the total to
            the host, an exact int32 output from CuPy's pool (kept between
            runs), write kernel at each particle's offset (a second search).
Timing: CUDA events around each run, one warm-up, median of RUNS runs.
Validation of the last run of each variant, outside the timing: the directed
pair codes i << 32 | j of every list (the Heap's gathered through gdn.array)
have the count, sum and xor-of-mix of the host reference (SciPy every pair both
ways, or the sampled NumPy neighbour sets), and the Heap recorded no failure.
Memory: heap: the Heap's mapped bytes (what it holds) plus the two tables, its
live bytes beside; two_pass: counts, offsets and the output.
"""

from __future__ import annotations

import numpy as np

try:
    from numba import cuda
except ImportError:  # run_lists() is only called when numba-cuda is there
    cuda = None

from .apps import BLOCK
from .apps_pairs import ParticleRun, neighbour_loop

LOCAL = 32  # neighbours a thread keeps in its own array
# The build kernel's register cap: malloc takes ~90 registers, the search loop
# ~55, so without a cap the whole kernel runs at the malloc's occupancy.
MAX_REGISTERS = 64
SPEED_GOAL = 1.2  # issue 42: the Heap program vs its two-pass


def kernels(gdn, max_registers=None):
    """{name: kernel}: free_lists, build_heap, gather (the Heap's lists to pair
    codes, for the check), count, write (the two-pass).  max_registers: the
    build kernel's register cap (None: the compiler's choice)."""
    i32, i64, u64 = np.int32, np.int64, np.uint64

    @cuda.jit(device=True)
    def emit_local(a, b, i, j, k, buf):
        if k < LOCAL:  # the first LOCAL in the thread's own array; the rest only counted
            buf[k] = j

    @cuda.jit(device=True)
    def emit_rest(addr, b, i, j, k, buf):
        if k >= LOCAL:  # the second search of a long list: the rest straight to the Heap
            gdn.array(addr, k + 1, np.int32)[k] = j

    local_loop, rest_loop = neighbour_loop(emit_local, half=False), neighbour_loop(emit_rest, half=False)

    @cuda.jit(**({"max_registers": max_registers} if max_registers else {}))  # (the simulator takes no cap)
    def build_heap(px, py, pz, start, end, c, n, heap, lists, counts, failed):
        i = cuda.grid(1)
        if i < n:
            buf = cuda.local.array(LOCAL, i32)
            k = local_loop(px, py, pz, start, end, c, i, heap, failed, buf)
            addr = u64(0)
            if k > 0:  # one malloc of exactly the list, outside the search loop
                addr = gdn.malloc(heap, k * 4)
                if addr == 0:
                    cuda.atomic.add(failed, 0, 1)
                    k = 0
                else:
                    dst = gdn.array(addr, k, np.int32)
                    for t in range(min(k, LOCAL)):
                        dst[t] = buf[t]
                    if k > LOCAL:  # rare (~17 neighbours on average): search again for the rest
                        rest_loop(px, py, pz, start, end, c, i, addr, failed, buf)
            lists[i] = addr
            counts[i] = k

    @cuda.jit
    def free_lists(n, heap, lists, failed):
        i = cuda.grid(1)
        if i < n and lists[i] != 0:
            if not gdn.free(heap, lists[i]):
                cuda.atomic.add(failed, 0, 1)
            lists[i] = 0

    @cuda.jit
    def gather(n, lists, counts, offsets, out):
        i = cuda.grid(1)
        if i < n and counts[i] > 0:
            src = gdn.array(lists[i], counts[i], np.int32)
            for t in range(counts[i]):
                out[offsets[i] + t] = (i64(i) << 32) | i64(src[t])

    @cuda.jit(device=True)
    def emit_none(a, b, i, j, k, buf):
        pass

    @cuda.jit(device=True)
    def emit_at(out_, offsets, i, j, k, buf):
        out_[offsets[i] + k] = j

    count_loop, write_loop = neighbour_loop(emit_none, half=False), neighbour_loop(emit_at, half=False)

    @cuda.jit
    def count(px, py, pz, start, end, c, n, counts):
        i = cuda.grid(1)
        if i < n:
            buf = cuda.local.array(1, i64)
            counts[i] = count_loop(px, py, pz, start, end, c, i, counts, counts, buf)

    @cuda.jit
    def write(px, py, pz, start, end, c, n, out_, offsets):
        i = cuda.grid(1)
        if i < n:
            buf = cuda.local.array(1, i64)
            write_loop(px, py, pz, start, end, c, i, out_, offsets, buf)

    return {"build_heap": build_heap, "free_lists": free_lists, "gather": gather, "count": count, "write": write}


def run_lists(ctx, cp, gdn, progress=lambda label: None) -> dict:
    """Runs both variants, records their timings, memory and validation, and the
    targets of the Heap's program."""
    import gpudyn

    pr = ParticleRun(ctx, cp, "lists", progress, directed=True)
    n, grid, kargs, results, failures = pr.n, pr.grid, pr.kargs, pr.results, pr.failures
    timed, record = pr.timed, pr.record
    ks = kernels(gdn, MAX_REGISTERS)

    # The Heap: lists freed and built again each run (a simulation step); nothing read by the host.
    lists = cp.zeros(n, dtype=cp.uint64)
    counts = cp.zeros(n, dtype=cp.int64)
    failed = cp.zeros(1, dtype=cp.int64)
    kl, kc, kf = (cuda.as_cuda_array(a, sync=False) for a in (lists, counts, failed))
    for name, build in (("heap", ks["build_heap"]), ("heap_default_registers", kernels(gdn, None)["build_heap"])):
        failed.fill(0)
        with gpudyn.Heap() as heap:
            ref_arg = heap.view_arg()

            def heap_step(build=build, ref_arg=ref_arg):
                ks["free_lists"][grid, BLOCK](np.int32(n), ref_arg, kl, kf)
                build[grid, BLOCK](*kargs, ref_arg, kl, kc, kf)

            ms = timed(heap_step)
            st = heap.stats()
            incl = cp.cumsum(counts)
            codes = cp.empty(int(incl[-1]) if n else 0, dtype=cp.int64)
            ks["gather"][grid, BLOCK](np.int32(n), kl, kc, cuda.as_cuda_array(incl - counts, sync=False), codes)
            nfailed = int(failed[0])
            record(
                name,
                ms,
                codes,
                st["bytes_mapped"] + lists.nbytes + counts.nbytes,
                registers=max(build.get_regs_per_thread().values()),
                max_registers=MAX_REGISTERS if name == "heap" else None,
                heap_mapped_bytes=int(st["bytes_mapped"]),
                heap_live_bytes=int(st["bytes_allocated"]),
                heap_held_bytes=int(st["bytes_held"]),
                list_bytes=int(codes.size) * 4,
                failed_allocations=int(st["failed_allocations"]),
                device_failures=nfailed,
            )
            if nfailed or st["failed_allocations"]:
                failures.append(f"{name}: {nfailed} failed mallocs/frees, stats {st['failed_allocations']}")
                results[name]["validated"] = False
            ks["free_lists"][grid, BLOCK](np.int32(n), ref_arg, kl, kf)
            cp.cuda.runtime.deviceSynchronize()
            left = heap.stats()["bytes_allocated"]
            if left:
                failures.append(f"{name}: {left} bytes still allocated after every list was freed")
            results[name]["live_bytes_after_free"] = int(left)
            del codes

    # Two-pass: count, scan, exact output, write.
    kcounts = cuda.as_cuda_array(counts, sync=False)
    holder = [None, 0]

    def two_pass_step():
        ks["count"][grid, BLOCK](*kargs, kcounts)
        incl = cp.cumsum(counts)
        total = int(incl[-1])
        offsets = incl - counts
        out = cp.empty(total, dtype=cp.int32)
        ks["write"][grid, BLOCK](*kargs, cuda.as_cuda_array(out, sync=False), cuda.as_cuda_array(offsets, sync=False))
        holder[0], holder[1] = out, counts.nbytes + incl.nbytes + offsets.nbytes + out.nbytes

    ms = timed(two_pass_step)
    owner = cp.repeat(cp.arange(n, dtype=cp.int64), counts)  # the last run's counts
    record("two_pass", ms, (owner << 32) | holder[0].astype(cp.int64), holder[1])
    holder[0] = None

    hp, tp = results["heap"], results["two_pass"]
    for name, what in (("heap", f"max_registers={MAX_REGISTERS}"), ("heap_default_registers", "no register cap")):
        h = results[name]
        t = ctx.target(
            f"neighbour lists with the Heap (malloc per list in the kernel, {what}) vs two-pass (count, scan, write), Numba",
            tp["median_ms"] / h["median_ms"],
            SPEED_GOAL,
            "x",
            True,
        )
        t["where"] = f"{h['median_ms']:.4g} ms ({h['registers']} registers) vs {tp['median_ms']:.4g} ms"
    return pr.finish(ctx, "neighbour-list", pairs=hp["pairs"], local=LOCAL, max_registers=MAX_REGISTERS)
