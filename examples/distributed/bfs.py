"""Distributed breadth-first search on torch.distributed: one process a GPU,
each rank expanding its part of the frontier with gpudyn (issue 43).

    python examples/distributed/bfs.py [--scale 16] [--keys 4] [--out FILE.json]
    torchrun --nproc_per_node=2 examples/distributed/bfs.py --scale 24 --out bfs.json

Without torchrun's variables the program is a world of size 1 (one process).
Graph: Graph500's Kronecker graph and CSR (gpudyn.bench.apps: the generator,
the CSR builder, the search keys, the host reference levels and the Graph500
validation are the one-GPU BFS's, imported, not copied), built the same way
by every rank from the same seed (CuPy on a GPU, NumPy with ``--backend cpu``).

Partition (1-D, as the Graph500 reference's distributed codes do): rank r owns
the vertices [r*n/P, (r+1)*n/P) (integer division) and the CSR rows of those
vertices; its column entries keep global vertex ids.

Search (level-synchronous, top-down).  Per level each rank:
  1. expands its frontier (a backend's kernel): a frontier vertex u claims an
     unvisited neighbour v with a compare-and-swap on parent[v] (-1 -> u).  For
     v it owns that is the BFS claim (level[v] = depth + 1, v joins the next
     frontier); for v another rank owns, parent[v] is only this rank's "sent"
     mark, so v goes to its owner at most once per search from each rank, as
     the item (v << 32) | u;
  2. exchanges sizes: its row of the P x P size matrix (items for each other
     rank, and on the diagonal the vertices it put in its own next frontier)
     is all-gathered; the host reads the matrix -- the one host wait of a level
     -- and stops when it is all zero (nothing sent and no next frontier
     anywhere: the search is over).  One all-gather of P^2 integers gives every
     rank its send and receive sizes and the termination test at once (an
     all_to_all_single of the counts gives the sizes but not the test);
  3. exchanges the items with all_to_all_single (split sizes from the matrix);
  4. claims the items it received (the owner's compare-and-swap on parent[v],
     parent = u, level = depth + 1); the claimed vertices join its next frontier.

Backends (the per-rank expansion; the driver above is the same for all):
  gpudyn    (bfs_gpu.py) the frontier and one array per destination rank are
            GGArrays; the expansion kernel pushes each claimed vertex into its
            destination's array (gdn.push_back), the next level reads the
            frontier in place (gdn.at), the send buffer is the arrays
            flattened into one torch tensor (flatten(out=...), no host wait);
  two_pass  (bfs_gpu.py) the same kernels' work with a count pass (claims,
            counts per destination and frontier vertex), a scan (torch.cumsum),
            and a write pass into the send buffer and the next frontier;
  cpu       (bfs_cpu.py) NumPy on the host, over gloo: the driver's logic
            without a GPU (tests/python/test_distributed.py).
Every search is validated on rank 0 (parent and level gathered there) against
the host reference levels and the Graph500 rules, as the one-GPU BFS is.
Timing: CUDA events around each search (on the host clock for cpu), the
largest over ranks; TEPS: input edges in the searched component / time, the
harmonic mean over keys (as `gpudyn bench apps`).  ``--out`` writes the JSON.

NVLink multicast stays off (NCCL_NVLS_ENABLE=0 and the like, set here when
the environment does not say): on the lent multi-GPU machines a program that
uses it can put the host's GPUs out of service.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

import numpy as np

#: Environment that keeps NVLink multicast off in NCCL, PyTorch and NVSHMEM.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
DEFAULT_SCALE, DEFAULT_KEYS = 16, 4  # a quick run; issue 43's targets: --scale 24
BACKENDS = ("gpudyn", "two_pass", "cpu")
SPEEDUP_GOAL = 1.2  # issue 43: gpudyn vs two-pass per destination, same GPUs


# ---- the partition ------------------------------------------------------------------
class Partition:
    """1-D vertex partition: rank r owns [lo(r), lo(r + 1)), lo(r) = r * n // world."""

    def __init__(self, n: int, world: int):
        if world > n:
            raise ValueError(f"bfs: {world} ranks for {n} vertices: every rank needs a vertex")
        self.n, self.world = n, world

    def lo(self, r: int) -> int:
        return r * self.n // self.world

    def size(self, r: int) -> int:
        return self.lo(r + 1) - self.lo(r)

    def owner(self, v):
        """The rank owning v (NumPy arrays or ints): the largest r with lo(r) <= v,
        i.e. r * n < (v + 1) * world."""
        return ((np.asarray(v, dtype=np.int64) + 1) * self.world - 1) // self.n


# ---- the communicator -----------------------------------------------------------------
class Comm:
    """The collectives the search uses, over torch.distributed's default group."""

    def __init__(self, device):
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.device = torch, dist, device
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.host_waits = 0  # reads of the size matrix (sizes())
        # torch >= 2.13 names it all_gather_single (all_gather_into_tensor is deprecated there).
        self._all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def all_gather(self, row):
        """The rows of every rank (a 1-D tensor each, same length) stacked: [world, len]."""
        out = self.torch.empty(self.world * row.numel(), dtype=row.dtype, device=row.device)
        self._all_gather(out, row.contiguous())
        return out.view(self.world, row.numel())

    def sizes(self, row) -> np.ndarray:
        """Every rank's size row, to the host: the one host wait of a level."""
        self.host_waits += 1
        return self.all_gather(row).cpu().numpy()

    def all_to_all(self, send, send_splits, recv_splits):
        """Variable-size exchange: send[...] split by send_splits to the ranks in order;
        returns what the ranks sent here, in rank order (recv_splits long)."""
        recv = self.torch.empty(int(sum(recv_splits)), dtype=send.dtype, device=send.device)
        self.dist.all_to_all_single(recv, send, [int(x) for x in recv_splits], [int(x) for x in send_splits])
        return recv

    def max(self, x: float) -> float:
        t = self.torch.tensor([x], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t.item())

    def barrier(self) -> None:
        t = self.torch.zeros(1, device=self.device)
        self.dist.all_reduce(t)
        t.item()


def splits(m: np.ndarray, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """(send splits, receive splits) of `rank` from the size matrix (the diagonal is not sent)."""
    send, recv = m[rank].copy(), m[:, rank].copy()
    send[rank] = recv[rank] = 0
    return send, recv


def exchange(comm: Comm, m: np.ndarray, send):
    """The items of one level: `send` (this rank's items, destination after
    destination, m[rank] of them for each other rank) to their ranks.  Returns what
    the other ranks sent here (in rank order), or None when the matrix says that
    nothing crosses: the same on every rank, so all call the collective or none."""
    if m.sum() == np.trace(m):
        return None
    send_splits, recv_splits = splits(m, comm.rank)
    return comm.all_to_all(send, send_splits, recv_splits)


def search(backend, comm: Comm, part: Partition, root: int) -> int:
    """One BFS from `root`; returns the number of levels that claimed a vertex
    somewhere (the levels expanded but the last)."""
    backend.start(root if int(part.owner(root)) == comm.rank else None)
    depth = 0
    while True:
        row = backend.expand(depth)  # claims; the size row stays on the device
        m = comm.sizes(row)  # the one host wait of the level
        if not m.any():  # nothing sent, no next frontier anywhere
            return depth
        send = backend.pack(m)  # the send buffer (and the local next frontier)
        backend.claim(exchange(comm, m, send), depth)
        depth += 1


# ---- graph, keys, references ------------------------------------------------------------
class Graph:
    """This rank's rows of the Graph500 graph (and on rank 0 what validation needs)."""

    def __init__(self, xp, scale: int, part: Partition, rank: int, keys: int):
        from gpudyn.bench import apps

        self.apps, self.xp, self.scale, self.part, self.rank = apps, xp, scale, part, rank
        n = 1 << scale
        t0 = time.time()
        src, dst = apps.kronecker_edges(xp, scale)
        row, col, ekeys = apps.build_csr(xp, src, dst, n)
        lo, hi = part.lo(rank), part.lo(rank + 1)
        a, b = int(row[lo]), int(row[hi])
        self.row = row[lo : hi + 1] - a  # local rows, global column ids
        self.col = col[a:b].copy()
        row_h = _host(xp, row)
        self.keys = apps.search_keys(row_h)[:keys]
        self.input_edges, self.csr_entries = int(src.size), int(col.size)
        self.generate_seconds = time.time() - t0
        self.ref_levels, self.component_edges = [], []
        if rank == 0:  # validation: the edge list, the CSR keys, references
            self.src, self.dst, self.ekeys = src, dst, ekeys
            col_h = _host(xp, col)
            t0 = time.time()
            sg = apps.scipy_graph(row_h, col_h)
            self.ref_levels = [apps.reference_levels(row_h, col_h, int(k), sg) for k in self.keys]
            self.reference_seconds = time.time() - t0
            self.reference = (
                "scipy.sparse.csgraph.breadth_first_order" if sg is not None else "numpy level-synchronous BFS"
            )
            self.ref_dev = [xp.asarray(lv) for lv in self.ref_levels]
            self.component_edges = [apps.component_edges(xp, src, r) for r in self.ref_dev]
        del src, dst, row, col, ekeys

    def validate(self, root: int, parent, level, i: int) -> dict:
        """Rank 0: the Graph500 error counts of search i (all 0: valid)."""
        return self.apps.validate(self.xp, self.ekeys, self.src, self.dst, int(root), parent, level, self.ref_dev[i])


def _host(xp, a) -> np.ndarray:
    return a if xp is np else xp.asnumpy(a)


def gather_result(comm: Comm, part: Partition, parent, level):
    """Rank 0: (parent, level) of every vertex, from each rank's owned slices
    (padded to the largest slice for the all-gather).  Other ranks: (None, None)."""
    torch = comm.torch
    width = max(part.size(r) for r in range(comm.world))
    both = torch.full((2, width), -1, dtype=torch.int32, device=parent.device)
    both[0, : parent.numel()] = parent
    both[1, : level.numel()] = level
    allv = comm.all_gather(both.view(-1)).view(comm.world, 2, width)
    if comm.rank != 0:
        return None, None
    p = torch.cat([allv[r, 0, : part.size(r)] for r in range(comm.world)])
    lv = torch.cat([allv[r, 1, : part.size(r)] for r in range(comm.world)])
    return p, lv


# ---- one run ----------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init(backend_kind: str):
    """torch.distributed up (a world of size 1 without torchrun's variables), this
    rank's device chosen; returns (Comm, local rank)."""
    for k, v in MULTICAST_OFF.items():
        os.environ.setdefault(k, v)
    if "RANK" not in os.environ:
        os.environ.update(
            RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port())
        )
    import torch
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if backend_kind == "cpu":
        if not dist.is_initialized():
            dist.init_process_group("gloo")
        return Comm(torch.device("cpu")), local
    torch.cuda.set_device(local)
    from numba import cuda

    cuda.select_device(local)
    try:
        import cupy

        cupy.cuda.Device(local).use()
    except ImportError:
        pass
    if not dist.is_initialized():
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    return Comm(torch.device("cuda", local)), local


def make_backend(kind: str, graph: Graph, comm: Comm, part: Partition):
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    if kind == "cpu":
        import bfs_cpu

        return bfs_cpu.CpuBackend(graph, comm, part)
    import bfs_gpu

    cls = {"gpudyn": bfs_gpu.GpudynBackend, "two_pass": bfs_gpu.TwoPassBackend}[kind]
    return cls(graph, comm, part)


def _median(xs) -> float:
    return float(np.median(np.asarray(xs, dtype=np.float64))) if len(xs) else 0.0


def _harmonic(xs) -> float:
    xs = [x for x in xs if x > 0]
    return float(len(xs) / sum(1.0 / x for x in xs)) if xs else 0.0


def run_variant(kind: str, graph: Graph, comm: Comm, part: Partition) -> dict:
    """Warm-up search, then one timed and validated search per key."""
    torch = comm.torch
    backend = make_backend(kind, graph, comm, part)
    gpu = comm.device.type == "cuda"
    search(backend, comm, part, int(graph.keys[0]))  # warm-up: compiles and loads every kernel
    ms, levels, waits, errors = [], [], [], []
    for i, root in enumerate(graph.keys):
        comm.barrier()
        comm.host_waits = 0
        if gpu:
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            t0 = 0.0
        else:
            t0 = time.perf_counter()
        depth = search(backend, comm, part, int(root))
        if gpu:
            stop.record()
            stop.synchronize()
            t = start.elapsed_time(stop)
        else:
            t = (time.perf_counter() - t0) * 1e3
        waits.append(comm.host_waits)  # before anything outside the search reads
        ms.append(comm.max(t))
        levels.append(depth)
        parent, level = gather_result(comm, part, *backend.result())
        if comm.rank == 0:
            xp = graph.xp
            if xp is not np:
                parent, level = xp.from_dlpack(parent), xp.from_dlpack(level)
            else:
                parent, level = parent.numpy(), level.numpy()
            err = graph.validate(int(root), parent, level, i)
            if any(err.values()):
                errors.append({"key": int(root), **err})
    backend.close()
    # Host waits in a search: one size matrix a level, the last one empty (the stop).
    out = {
        "backend": kind,
        "ms": ms,
        "median_ms": _median(ms),
        "levels": levels,
        "host_waits_per_search": waits,
        "checks": getattr(backend, "checks", {}),
    }
    if any(w != d + 1 for w, d in zip(waits, levels)):
        errors.append({"host_waits": waits, "levels": levels})
    if comm.rank == 0:
        out["teps"] = [e / (t * 1e-3) for e, t in zip(graph.component_edges, ms)]
        out["harmonic_mean_teps"] = _harmonic(out["teps"])
        out["validated"] = not errors
        out["errors"] = errors[:8]
    return out


def git_commit() -> str:
    c = os.environ.get("GPUDYN_GIT_COMMIT")
    if c:
        return c
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        c = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        ).stdout.strip()
        return c + ("-dirty" if dirty and c else "") or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_info(comm: Comm) -> dict:
    torch = comm.torch
    import gpudyn

    info = {"torch": torch.__version__, "backend": comm.dist.get_backend(), "gpudyn_version": gpudyn.__version__}
    if comm.device.type == "cuda":
        p = torch.cuda.get_device_properties(comm.device)
        info.update(
            gpu=p.name,
            device=p.name,
            sms=p.multi_processor_count,
            memory_bytes=int(p.total_memory),
            cuda=torch.version.cuda,
        )
        v = torch.cuda.nccl.version()
        info["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    else:
        info["gpu"] = None
    return info


def parse(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", type=int, default=DEFAULT_SCALE, help="Graph500 SCALE (2^SCALE vertices)")
    p.add_argument("--keys", type=int, default=DEFAULT_KEYS, help="search keys (Graph500: 64)")
    p.add_argument(
        "--backend",
        action="append",
        choices=BACKENDS,
        help="gpudyn, two_pass (GPU, NCCL) or cpu (NumPy, gloo); repeat for several; default: gpudyn and two_pass",
    )
    p.add_argument("--out", help="write the results here as JSON (rank 0)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    kinds = args.backend or ["gpudyn", "two_pass"]
    if "cpu" in kinds and len(kinds) > 1:
        print("bfs.py: --backend cpu runs alone (gloo, host memory)", file=sys.stderr)
        return 2
    try:
        import torch  # noqa: F401  (present: the distributed backends need it)
    except ImportError as e:
        print(f"bfs.py: needs PyTorch ({e}); skipped", file=sys.stderr)
        return 77
    if kinds != ["cpu"]:
        try:
            import gpudyn
            import gpudyn.numba

            gpudyn.device_count()
        except Exception as e:  # ImportError, NoDeviceError
            print(f"bfs.py: the GPU backends need a CUDA device, numba-cuda and CuPy ({e}); skipped", file=sys.stderr)
            return 77
    comm, _ = init(kinds[0] if kinds == ["cpu"] else "nccl")
    t_all = time.time()
    xp = np
    if comm.device.type == "cuda":
        import cupy as xp
    part = Partition(1 << args.scale, comm.world)
    graph = Graph(xp, args.scale, part, comm.rank, args.keys)
    results = {k: run_variant(k, graph, comm, part) for k in kinds}
    ok = True
    if comm.rank == 0:
        doc = {
            "program": "examples/distributed/bfs.py",
            "command": " ".join([sys.executable] + sys.argv),
            "git_commit": git_commit(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "world_size": comm.world,
            **device_info(comm),
            "environment": {k: os.environ.get(k) for k in MULTICAST_OFF},
            "graph": {
                "scale": args.scale,
                "edge_factor": graph.apps.EDGE_FACTOR,
                "vertices": part.n,
                "input_edges": graph.input_edges,
                "csr_entries": graph.csr_entries,
                "keys": [int(k) for k in graph.keys],
                "component_edges": graph.component_edges,
                "reference": graph.reference,
                "generate_seconds": graph.generate_seconds,
                "reference_seconds": graph.reference_seconds,
                "partition": [[part.lo(r), part.lo(r + 1)] for r in range(comm.world)],
            },
            "variants": results,
        }
        if "gpudyn" in results and "two_pass" in results:
            g, t = results["gpudyn"]["median_ms"], results["two_pass"]["median_ms"]
            doc["targets"] = [
                {
                    "name": "distributed BFS, gpudyn vs two-pass per destination (time ratio)",
                    "value": t / g if g else 0.0,
                    "goal": SPEEDUP_GOAL,
                    "unit": "x",
                    "met": bool(g and t / g >= SPEEDUP_GOAL),
                }
            ]
        doc["targets"] = doc.get("targets", []) + [
            {
                "name": "every search validated (1 = yes)",
                "value": float(all(r["validated"] for r in results.values())),
                "goal": 1.0,
                "unit": "bool",
                "met": all(r["validated"] for r in results.values()),
            }
        ]
        doc["run_seconds"] = time.time() - t_all
        ok = all(r["validated"] for r in results.values())
        for k, r in results.items():
            print(
                f"bfs {k:9s} world {comm.world} scale {args.scale}: median {r['median_ms']:.3f} ms, "
                f"{r['harmonic_mean_teps'] / 1e9:.3f} GTEPS, levels {r['levels']}, "
                f"{'validated' if r['validated'] else 'INVALID ' + str(r['errors'][:2])}"
            )
        if args.out:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            with open(args.out, "w") as f:
                json.dump(doc, f, indent=1)
            print(f"bfs: wrote {args.out}")
    ok = comm.max(0.0 if ok else 1.0) == 0.0
    comm.dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
