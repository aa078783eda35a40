"""gpudyn under torch.distributed (issue 43): examples/distributed/.

Without a GPU (CI): the distributed BFS's partition, exchange and termination
logic with its NumPy backend over gloo, world sizes 2 and 3 (one process a
rank): every search's levels equal the host reference's and its parent tree
passes the Graph500 rules (the validation of the one-GPU BFS, gpudyn.bench.apps);
the variable-size exchange is exact, a rank with nothing to send included.
The GPU kernels of the BFS compile to PTX (numba.cuda.compile, no GPU), and the
GPU backends (their host code as it is, their kernels' Python bodies under a
small warp simulator) run the same searches, validated, with three ranks.

On a GPU (marked gpu): the guide's example and the BFS (gpudyn and two-pass
backends, NCCL) as a world of size 1, every search validated; with two or more
GPUs visible, both again under torchrun, one process a GPU.

Every process started here has NVLink multicast off (NCCL_NVLS_ENABLE=0 and the
like, bfs.MULTICAST_OFF): on the lent multi-GPU machines a program that uses it
can put the host's GPUs out of service.
"""

import json
import os
import pathlib
import socket
import subprocess
import sys
import textwrap
import types as pytypes

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (CI: pip install torch==2.13.0, a CPU build)")

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "distributed"
sys.path.insert(0, str(EXAMPLES))
import bfs

SANITIZER = os.environ.get("GPUDYN_SANITIZER")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(**extra) -> dict:
    env = dict(os.environ, **bfs.MULTICAST_OFF, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    env.update(extra)
    return env


def _spawn(script: str, world: int, timeout: int = 120) -> list:
    """Runs `script` (Python source) as ranks 0..world-1 of one gloo world;
    returns each rank's (returncode, stdout, stderr)."""
    port = str(_free_port())
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=str(EXAMPLES),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_env(RANK=str(r), WORLD_SIZE=str(world), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1", MASTER_PORT=port),
        )
        for r in range(world)
    ]
    out = []
    try:
        for p in procs:
            o, e = p.communicate(timeout=timeout)
            out.append((p.returncode, o, e))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return out


# ---- the partition ---------------------------------------------------------------------
@pytest.mark.parametrize("n, world", [(1024, 1), (1024, 2), (1024, 3), (1024, 7), (10, 3), (5, 5)])
def test_partition_owner_matches_the_ranges(n, world):
    part = bfs.Partition(n, world)
    v = np.arange(n)
    owners = part.owner(v)
    for r in range(world):
        assert np.all(owners[part.lo(r) : part.lo(r + 1)] == r)
    assert sum(part.size(r) for r in range(world)) == n and part.lo(world) == n


def test_size_matrix_splits():
    m = np.array([[3, 1, 0], [0, 0, 0], [2, 5, 4]])
    s, r = bfs.splits(m, 0)
    assert s.tolist() == [0, 1, 0] and r.tolist() == [0, 0, 2]
    s, r = bfs.splits(m, 1)
    assert s.tolist() == [0, 0, 0] and r.tolist() == [1, 0, 5]


# ---- gloo: exchange and BFS logic, world sizes 2 and 3 --------------------------------------
WORKER = textwrap.dedent("""
    import json, sys
    import numpy as np
    import bfs

    comm, _ = bfs.init("cpu")
    torch, r, P = comm.torch, comm.rank, comm.world
    report = {"rank": r}

    # 1. Variable sizes: rank s sends count(s, d) items to rank d; rank 1 sends nothing at all.
    def count(s, d):
        return 0 if s == 1 else (3 * s + 5 * d + 1) % 7 + (100 if d == 0 else 0)
    row = torch.tensor([count(r, d) for d in range(P)], dtype=torch.int64)
    m = comm.sizes(row)
    assert m.tolist() == [[count(s, d) for d in range(P)] for s in range(P)], m
    items = [(s << 40) | (d << 20) | np.arange(count(s, d), dtype=np.int64) for s in range(P) for d in range(P)]
    mine = np.concatenate([items[r * P + d] for d in range(P) if d != r])
    recv = bfs.exchange(comm, m, torch.from_numpy(mine))
    want = np.concatenate([items[s * P + r] for s in range(P) if s != r])
    assert np.array_equal(recv.numpy(), want), (recv.numpy()[:20], want[:20])
    report["exchange"] = int(recv.numel())

    # Nothing crosses (only the diagonal): no collective, on every rank.
    m = comm.sizes(torch.tensor([5 if d == r else 0 for d in range(P)], dtype=torch.int64))
    assert bfs.exchange(comm, m, torch.zeros(0, dtype=torch.int64)) is None

    # 2. The BFS with the NumPy backend; rank 0 validates every search.
    part = bfs.Partition(1 << SCALE, P)
    graph = bfs.Graph(np, SCALE, part, r, KEYS)
    res = bfs.run_variant("cpu", graph, comm, part)
    report["checks"] = res["checks"]
    if r == 0:
        report.update(validated=res["validated"], errors=res["errors"], levels=res["levels"],
                      depth=[int(lv.max()) for lv in graph.ref_levels],
                      reached=[int((lv >= 0).sum()) for lv in graph.ref_levels])
        # The validation is not vacuous: a wrong level and a parent that is no neighbour are caught.
        backend = bfs.make_backend("cpu", graph, comm, part)
        root = int(graph.keys[0])
        bfs.search(backend, comm, part, root)
        parent, level = bfs.gather_result(comm, part, *backend.result())
        parent, level = parent.numpy().copy(), level.numpy().copy()
        assert not any(graph.validate(root, parent, level, 0).values())
        bad = level.copy()
        v = int(np.flatnonzero(level == 2)[0])
        bad[v] = 3
        report["caught_level"] = graph.validate(root, parent, bad, 0)
        bad = parent.copy()
        bad[v] = v
        report["caught_parent"] = graph.validate(root, bad, level, 0)
    else:
        backend = bfs.make_backend("cpu", graph, comm, part)
        bfs.search(backend, comm, part, int(graph.keys[0]))
        bfs.gather_result(comm, part, *backend.result())
    print("REPORT " + json.dumps(report))
    comm.dist.destroy_process_group()
""")


@pytest.mark.parametrize("world", [2, 3])
def test_gloo_exchange_and_bfs(world):
    scale, keys = 10, 4
    out = _spawn(f"SCALE, KEYS = {scale}, {keys}\n" + WORKER, world)
    reports = []
    for rank, (rc, o, e) in enumerate(out):
        assert rc == 0, f"rank {rank} exited {rc}:\n{o}\n{e[-4000:]}"
        reports.append(json.loads(next(line for line in o.splitlines() if line.startswith("REPORT "))[7:]))
    r0 = reports[0]
    assert r0["validated"], r0["errors"]
    assert all(d >= 3 for d in r0["depth"]) and all(n > 100 for n in r0["reached"]), r0
    assert len(r0["levels"]) == keys
    assert (
        any(r0["caught_level"].values())
        and r0["caught_parent"]["tree_edge_missing"] + r0["caught_parent"]["tree_level"] > 0
    ), r0
    # The search crossed ranks: items were sent, received, and some claims came from them.
    checks = [r["checks"] for r in reports]
    assert sum(c["items_sent"] for c in checks) == sum(c["items_received"] for c in checks) > 0
    assert sum(c["claimed_from_received"] for c in checks) > 0

    def count(s, d):  # the worker's sizes
        return 0 if s == 1 else (3 * s + 5 * d + 1) % 7 + (100 if d == 0 else 0)

    for r in reports:
        assert r["exchange"] == sum(count(s, r["rank"]) for s in range(world) if s != r["rank"]), r


# ---- the GPU kernels compile without a GPU ------------------------------------------------
def test_bfs_kernels_compile(monkeypatch):
    """Every kernel of bfs_gpu.py compiles to PTX for sm_90 (or the first built
    architecture), for world sizes 1 and 3; the gpudyn ones call the GGArray shims."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    import gpudyn
    import gpudyn.numba as gdn
    from numba import cuda
    from numba.cuda import dispatcher, types

    archs = gdn.build_info()["archs"]
    arch = "90" if "90" in archs else archs[0]
    cc = divmod(int(arch.rstrip("af")), 10)
    monkeypatch.setattr(dispatcher, "get_current_device", lambda: pytypes.SimpleNamespace(compute_capability=cc))
    import bfs_gpu as g

    if hasattr(gdn, "ref_type"):
        ref = gdn.ref_type(gpudyn.GGArray, np.int64)
    else:  # the gpudyn.numba before view_arg() (kernel refs through .ref)
        from gpudyn.numba import _refs
        from numba.cuda.typing.typeof import typeof

        kinds = {c.__name__: k for c, k in _refs._kinds()}
        rc = _refs.ref_class(kinds["GGArray"], np.int64)
        ref = typeof(rc(*(s(0) for s in rc._gpudyn_scalars)))
    a32, a64 = types.Array(types.int32, 1, "C"), types.Array(types.int64, 1, "C")
    i32, i64 = types.int32, types.int64
    for world in (1, 3):
        outs = types.UniTuple(ref, world)
        sigs = {
            "seed_gpudyn": (ref, i32),
            "expand_gpudyn": (ref, outs, a64, a32, a32, a32, i64, i64, i32, i32, i32, a32),
            "sizes_gpudyn": (outs, i32, a64),
            "claim_gpudyn": (a64, i64, ref, a32, a32, i64, i32, a32),
            "count_two_pass": (a32, i64, a64, a32, a32, a32, i64, i64, i32, i32, i32, a32),
            "write_two_pass": (a32, i64, a64, a32, a64, a32, a32, i64, i64, i32, i32, i64, i64, a64, a32),
            "claim_two_pass": (a64, i64, a32, i64, a32, a32, i64, i32),
        }
        for name, sig in sigs.items():
            ptx, _ = cuda.compile(getattr(g, name).py_func, sig, device=False, output="ptx", cc=cc, abi="numba")
            assert ("gpudyn_numba_ggarray_" in ptx) == name.endswith("gpudyn"), name


# ---- the GPU backends' kernels and host code, without a GPU ----------------------------------
class WarpSim:
    """The parts of numba.cuda that bfs_gpu.py's kernels use, run in Python.  A
    launch runs the kernel's Python body (py_func), block after block: a kernel
    with warp collectives on one Python thread per CUDA thread (shfl_down_sync and
    ballot_sync meet at a barrier of the warp's 32 threads, syncthreads at one of
    the block's); one without them runs its threads one after another, one valid
    schedule of its atomics (its only syncthreads publishes thread 0's shared
    value to the later threads).  Atomics under a lock.  Enough to run the real
    kernels' logic (claims, counts, offsets, pushes) on a small graph; nothing
    about speed or memory ordering."""

    WARP = 32

    def __init__(self):
        import threading

        self._threading = threading
        self._tl = threading.local()
        self._lock = threading.Lock()
        self.local = pytypes.SimpleNamespace(array=lambda n, dtype: np.zeros(n, dtype))
        self.shared = pytypes.SimpleNamespace(array=self._shared)
        self.atomic = pytypes.SimpleNamespace(cas=self._cas, add=self._add)

    # per thread
    @property
    def laneid(self):
        return self._tl.tid % self.WARP

    @property
    def threadIdx(self):  # noqa: N802 (numba's name)
        return pytypes.SimpleNamespace(x=self._tl.tid)

    def grid(self, ndim):
        return self._tl.bid * self._tl.bdim + self._tl.tid

    def gridsize(self, ndim):
        return self._tl.gdim * self._tl.bdim

    def syncthreads(self):
        if self._tl.block.barrier is not None:
            self._tl.block.barrier.wait()

    def _shared(self, n, dtype):
        blk, k = self._tl.block, self._tl.shared_calls
        self._tl.shared_calls += 1
        with blk.lock:
            while len(blk.shared) <= k:
                blk.shared.append(np.zeros(n, dtype))
            return blk.shared[k]

    def _cas(self, arr, i, old, new):
        with self._lock:
            cur = arr[i]
            if cur == old:
                arr[i] = new
            return cur

    def _add(self, arr, i, v):
        with self._lock:
            cur = arr[i]
            arr[i] += v
            return cur

    def _exchange(self, value):
        w = self._tl.warp
        w.slots[self.laneid] = value
        w.barrier.wait()
        got = list(w.slots)
        w.barrier.wait()
        return got

    def shfl_down_sync(self, mask, value, offset):
        assert mask == 0xFFFFFFFF
        got, lane = self._exchange(value), self.laneid
        return got[lane + offset] if lane + offset < self.WARP else value

    def ballot_sync(self, mask, pred):
        assert mask == 0xFFFFFFFF
        return sum(1 << i for i, p in enumerate(self._exchange(bool(pred))) if p)

    def lanemask_lt(self):
        return (1 << self.laneid) - 1

    @staticmethod
    def popc(x):
        return bin(int(x) & 0xFFFFFFFF).count("1")

    # host side
    @staticmethod
    def external_stream(handle):
        return None

    @staticmethod
    def as_cuda_array(t):
        return t.numpy()  # a torch CPU tensor's memory, shared

    def launch(self, fn, grid, block, args, lockstep):
        threading, errors = self._threading, []
        if not lockstep:
            tl = self._tl
            for bid in range(grid):
                blk = pytypes.SimpleNamespace(barrier=None, lock=threading.Lock(), shared=[])
                for tid in range(block):
                    tl.tid, tl.bid, tl.bdim, tl.gdim, tl.block, tl.warp, tl.shared_calls = (
                        tid,
                        bid,
                        block,
                        grid,
                        blk,
                        None,
                        0,
                    )
                    fn(*args)
            return
        for bid in range(grid):
            blk = pytypes.SimpleNamespace(barrier=threading.Barrier(block), lock=threading.Lock(), shared=[])
            warps = [
                pytypes.SimpleNamespace(barrier=threading.Barrier(min(self.WARP, block - w)), slots=[None] * self.WARP)
                for w in range(0, block, self.WARP)
            ]

            def body(tid, bid=bid, blk=blk, warps=warps):
                tl = self._tl
                tl.tid, tl.bid, tl.bdim, tl.gdim, tl.block = tid, bid, block, grid, blk
                tl.warp, tl.shared_calls = warps[tid // self.WARP], 0
                try:
                    fn(*args)
                except Exception as e:  # re-raised below; free the others waiting at a barrier
                    errors.append(e)
                    blk.barrier.abort()
                    for w in warps:
                        w.barrier.abort()

            threads = [threading.Thread(target=body, args=(t,)) for t in range(block)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
            if errors:
                raise (real or errors)[0]


class SimGGArray:
    """A GGArray as the simulated kernels see it (a list; push_back, at, size)."""

    def __init__(self, dtype, stream=None):
        import threading

        self.items, self.lock, self.dtype = [], threading.Lock(), dtype

    def push(self, v):
        with self.lock:
            self.items.append(int(v))
        return True

    def view_arg(self):
        return self

    def clear(self):
        self.items = []

    def flatten(self, out, stream=None):
        n = len(self.items)
        assert out.numel() >= n, (out.numel(), n)
        out[:n] = torch.tensor(self.items, dtype=out.dtype)
        return out

    def check(self):
        pass

    def close(self):
        pass


def simulate_gpu_backends(bfs_gpu, block=64):
    """Points bfs_gpu's kernels, Numba, gpudyn and torch.cuda at the simulator (a
    world on the CPU, gloo): the backends' host code runs as it is."""
    sim = WarpSim()
    gdn = pytypes.SimpleNamespace(
        push_back=lambda a, v: a.push(v),
        at=lambda a, i: a.items[i],
        size=lambda a: len(a.items),
        ranged_size=lambda a: len(a.items),
        ref_type=None,
    )
    names = [
        "seed_gpudyn",
        "expand_gpudyn",
        "sizes_gpudyn",
        "claim_gpudyn",
        "count_two_pass",
        "write_two_pass",
        "claim_two_pass",
    ]
    lockstep = {"count_two_pass", "write_two_pass"}  # the kernels with warp collectives
    env = dict(vars(bfs_gpu), cuda=sim, gdn=gdn, owner=bfs_gpu.owner.py_func, _ranged_size=gdn.ranged_size)

    class Kernel:
        def __init__(self, f, lockstep):
            self.f = pytypes.FunctionType(f.py_func.__code__, env, f.py_func.__name__)
            self.lockstep = lockstep

        def __getitem__(self, config):
            return lambda *args: sim.launch(self.f, config[0], config[1], args, self.lockstep)

    for name in names:
        setattr(bfs_gpu, name, Kernel(getattr(bfs_gpu, name), name in lockstep))
    bfs_gpu.cuda, bfs_gpu.gdn = sim, gdn
    bfs_gpu.gpudyn = pytypes.SimpleNamespace(GGArray=SimGGArray)
    bfs_gpu.BLOCK, bfs_gpu.BLOCKS_PER_SM = block, 1
    torch.cuda.current_stream = lambda *a, **k: pytypes.SimpleNamespace(cuda_stream=0)
    torch.cuda.get_device_properties = lambda *a, **k: pytypes.SimpleNamespace(multi_processor_count=1)


SIM_WORKER = textwrap.dedent("""
    import json, sys
    import numpy as np
    sys.path.insert(0, TESTS)
    import bfs, bfs_gpu
    import test_distributed
    test_distributed.simulate_gpu_backends(bfs_gpu)

    comm, _ = bfs.init("cpu")
    part = bfs.Partition(1 << SCALE, comm.world)
    graph = bfs.Graph(np, SCALE, part, comm.rank, KEYS)
    report = {}
    for kind in ("gpudyn", "two_pass"):
        res = bfs.run_variant(kind, graph, comm, part)
        report[kind] = {k: res.get(k) for k in ("validated", "errors", "levels", "host_waits_per_search")}
    print("REPORT " + json.dumps(report))
    comm.dist.destroy_process_group()
""")


def test_gpu_backends_under_a_warp_simulator():
    """bfs_gpu.py's two backends -- their host code as it is, their Numba kernels'
    Python bodies under WarpSim, gloo between the ranks -- on a scale-7 graph: every
    search validated on rank 0, one host wait a level.  Three ranks: destinations
    below, at and above a rank (every offset case of the two-pass write kernel)."""
    world = 3
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    script = f"SCALE, KEYS, TESTS = 7, 1, {str(pathlib.Path(__file__).parent)!r}\n" + SIM_WORKER
    out = _spawn(script, world, timeout=300)
    for rank, (rc, o, e) in enumerate(out):
        assert rc == 0, f"rank {rank} exited {rc}:\n{o}\n{e[-4000:]}"
    report = json.loads(next(line for line in out[0][1].splitlines() if line.startswith("REPORT "))[7:])
    for kind, r in report.items():
        assert r["validated"], (kind, r["errors"])
        assert r["host_waits_per_search"] == [d + 1 for d in r["levels"]], (kind, r)


# ---- GPU: world size 1, then torchrun on 2+ GPUs -------------------------------------------
def _run(cmd, timeout=600):
    r = subprocess.run(cmd, cwd=str(ROOT), env=_env(), capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} exited {r.returncode}:\n{r.stdout}\n{r.stderr[-6000:]}"
    print(r.stdout)
    return r


# Under compute-sanitizer (10-100x slower kernels) the BFS shrinks to scale 10 and one key.
BFS_SMALL = ["--scale", "10", "--keys", "1"] if SANITIZER else ["--scale", "14", "--keys", "2"]


def _check_bfs_json(path, world):
    doc = json.loads(pathlib.Path(path).read_text())
    assert doc["world_size"] == world and doc["gpu"], doc
    for name in ("gpudyn", "two_pass"):
        v = doc["variants"][name]
        assert v["validated"], (name, v["errors"])
        assert v["checks"].get("push_failures", 0) == 0, v["checks"]
        assert v["median_ms"] > 0 and v["harmonic_mean_teps"] > 0
    assert doc["environment"]["NCCL_NVLS_ENABLE"] == "0"
    return doc


@pytest.mark.gpu
def test_push_allgather_world_1():
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    r = _run([sys.executable, str(EXAMPLES / "push_allgather.py")])
    assert "push_allgather.py: ok" in r.stdout


@pytest.mark.gpu
def test_bfs_world_1(tmp_path):
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    pytest.importorskip("cupy", reason="CuPy is not installed (the graph generator runs on it)")
    out = tmp_path / "bfs.json"
    _run([sys.executable, str(EXAMPLES / "bfs.py"), *BFS_SMALL, "--out", str(out)])
    _check_bfs_json(out, 1)


def _gpus() -> int:
    try:
        return torch.cuda.device_count()
    except Exception:  # a CPU build of torch: no GPU
        return 0


@pytest.mark.gpu
@pytest.mark.skipif(_gpus() < 2, reason=f"needs 2 or more GPUs (this machine shows {_gpus()})")
@pytest.mark.skipif(bool(SANITIZER), reason="left out under compute-sanitizer (NCCL across processes)")
def test_torchrun_multi_gpu(tmp_path):
    pytest.importorskip("cupy", reason="CuPy is not installed (the graph generator runs on it)")
    n = _gpus()
    torchrun = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={n}", f"--master_port={_free_port()}"]
    r = _run(torchrun + [str(EXAMPLES / "push_allgather.py")])
    assert "push_allgather.py: ok" in r.stdout
    out = tmp_path / "bfs.json"
    _run(torchrun + [str(EXAMPLES / "bfs.py"), "--scale", "16", "--keys", "2", "--out", str(out)])
    _check_bfs_json(out, n)
