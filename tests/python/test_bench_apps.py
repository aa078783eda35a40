"""`gpudyn bench apps` (issue 40, item 4a): BFS on a Graph500 Kronecker graph.

Host tests: the module is registered; the generator, the CSR, the search keys,
the host references (SciPy and NumPy) and the validation (each Graph500 rule
caught when broken) on small graphs with NumPy; the targets from hand-made
results; every Numba kernel compiles to PTX without a GPU; the buffer variants'
drivers and kernels (thread per vertex, plain atomic; two-pass) run under
Numba's simulator and give valid searches; the C++ program's argument handling.
GPU test: `gpudyn bench apps --quick` runs, every search validated, every
target computed."""

import json
import os
import subprocess
import sys
import textwrap
import types as pytypes

import numpy as np
import pytest

PROGRAM = "gpudyn_bench_apps"
TARGET_NAMES = [
    f"BFS gpudyn vs {what}, {lang}, {m} per vertex"
    for lang in ("Numba", "C++")
    for m in ("thread", "warp")
    for what in ("preallocated worst-case buffer (warp-aggregated atomic counter)", "two-pass (count, scan, write)")
]
TARGET_NAMES = (
    TARGET_NAMES[:4]
    + ["BFS device memory gpudyn / two-pass, Numba (lower is better)"]
    + TARGET_NAMES[4:]
    + [
        "BFS device memory gpudyn / two-pass, C++ (lower is better)",
        "every BFS validated (levels equal the reference, Graph500 rules) (1 = yes)",
    ]
)
PAIRS_TARGET_NAMES = [
    "neighbour pairs gpudyn (push_back per pair) vs two-pass (count, scan, write), Numba",
    "neighbour pairs gpudyn (extend by 16 pairs a thread) vs two-pass (count, scan, write), Numba",
    "neighbour pairs gpudyn (its faster form) vs worst-case buffer (warp-aggregated atomic counter), Numba",
    "neighbour pairs gpudyn (push_back per pair) vs two-pass, Numba, array made per run",
    "neighbour pairs device memory gpudyn / two-pass (lower is better)",
    "every neighbour-pair output validated (1 = yes)",
]
LISTS_TARGET_NAMES = [
    "neighbour lists with the Heap (malloc per list in the kernel, max_registers=64) vs two-pass (count, scan, write), Numba",
    "neighbour lists with the Heap (malloc per list in the kernel, no register cap) vs two-pass (count, scan, write), Numba",
    "every neighbour-list output validated (1 = yes)",
]


def _apps():
    from gpudyn.bench import apps

    return apps


def _graph(scale=8):
    apps = _apps()
    src, dst = apps.kronecker_edges(np, scale)
    row, col, keys = apps.build_csr(np, src, dst, 1 << scale)
    return src, dst, row, col, keys


def test_apps_benchmark_is_registered():
    from gpudyn.bench import available, load

    assert "apps" in available()
    assert callable(load("apps").run)


def test_kronecker_edges_follow_graph500():
    apps = _apps()
    src, dst = apps.kronecker_edges(np, 10)
    assert src.size == dst.size == 16 << 10 and src.dtype == np.int32
    assert src.min() >= 0 and max(src.max(), dst.max()) < 1 << 10
    a, b = apps.kronecker_edges(np, 10)
    assert np.array_equal(a, src) and np.array_equal(b, dst)  # seeded
    deg = np.bincount(np.concatenate([src, dst]), minlength=1 << 10)
    assert deg.max() > 20 * deg.mean()  # the skew of the initiator
    # An initiator almost all A puts almost every edge on one vertex (the one label 0 got).
    x, y = apps.kronecker_edges(np, 8, initiator=(0.999, 0.0005, 0.0004, 0.0001))
    assert np.bincount(np.concatenate([x, y])).max() > 0.9 * 2 * x.size
    assert (src == dst).any()  # self-loops stay in the edge list


def test_csr_is_undirected_without_loops_or_duplicates():
    src, dst, row, col, keys = _graph(9)
    n = row.size - 1
    assert row[0] == 0 and row[-1] == col.size == keys.size
    u = np.repeat(np.arange(n), np.diff(row))
    assert not (u == col).any()
    pairs = set(zip(u.tolist(), col.tolist()))
    assert len(pairs) == col.size  # no duplicates
    assert all((v, w) in pairs for w, v in pairs)  # both directions
    want = {(int(a), int(b)) for a, b in zip(src, dst) if a != b} | {
        (int(b), int(a)) for a, b in zip(src, dst) if a != b
    }
    assert pairs == want
    for v in range(n):  # rows sorted (the validation's lookup)
        assert np.all(np.diff(col[row[v] : row[v + 1]]) > 0)
    assert np.array_equal(keys, (u.astype(np.int64) << 32) | col)


def test_search_keys():
    apps = _apps()
    _, _, row, _, _ = _graph(9)
    k = apps.search_keys(row)
    assert k.size == 64 and len(set(k.tolist())) == 64 and (np.diff(row)[k] >= 1).all()
    assert np.array_equal(k, apps.search_keys(row))


def test_levels_from_predecessors():
    apps = _apps()
    pred = np.arange(-1, 299)
    pred[0] = -9999
    assert np.array_equal(apps.levels_from_predecessors(pred, 0), np.arange(300))
    pred = np.full(10, 3)
    pred[3] = -9999
    pred[8:] = -9999
    assert apps.levels_from_predecessors(pred, 3).tolist() == [1, 1, 1, 0, 1, 1, 1, 1, -1, -1]


def test_references_agree_and_validate():
    pytest.importorskip("scipy")
    apps = _apps()
    src, dst, row, col, keys = _graph(10)
    sg = apps.scipy_graph(row, col)
    for root in apps.search_keys(row)[:4]:
        ref = apps.reference_levels(row, col, int(root), sg)
        parent, level = apps.bfs_vectorized(np, row, col, int(root))
        assert np.array_equal(ref, level)
        assert ref.max() >= 2 and (ref == -1).any()  # a few levels, and vertices out of the component
        assert not any(apps.validate(np, keys, src, dst, int(root), parent, level, ref).values())
        assert apps.component_edges(np, src, ref) == int((ref[src] >= 0).sum())


def test_validation_catches_each_rule():
    apps = _apps()
    src, dst, row, col, keys = _graph(9)
    root = int(apps.search_keys(row)[0])
    parent, level = apps.bfs_vectorized(np, row, col, root)
    ref = level.copy()

    def err(p, lv):
        return apps.validate(np, keys, src, dst, root, p, lv, ref)

    deep = int(np.flatnonzero(level == 2)[0])
    p = parent.copy()
    p[deep] = root  # not an edge (level 2: no edge to the root)
    e = err(p, level)
    assert e["tree_edge_missing"] == 1 and e["tree_level"] == 1
    lv = level.copy()
    lv[deep] = 3
    e = err(parent, lv)
    assert e["levels_differ"] == 1 and e["tree_level"] >= 1 and e["edge_span"] >= 1
    p = parent.copy()
    p[root] = int(col[row[root]])
    assert err(p, level)["root"] == 1
    unreached = int(np.flatnonzero(level == -1)[0])
    p = parent.copy()
    p[unreached] = root
    assert err(p, level)["parent_out_of_range"] == 1
    lv = level.copy()
    lv[deep] = -1  # reached set differs
    p = parent.copy()
    p[deep] = -1
    e = err(p, lv)
    assert e["levels_differ"] == 1 and e["edge_span"] >= 1


def _series(ms, held, **extra):
    return {
        "ms": [ms, ms],
        "median_ms": ms,
        "harmonic_mean_teps": 1e9,
        "held_bytes": held,
        "validated": True,
        "host_reads_per_search": 2.0,
        "levels_per_search": 6.0,
        **extra,
    }


def _results(gg_ms=1.0, worst_ms=1.2, two_ms=1.5, gg_held=40 << 20, two_held=16 << 20):
    r = {}
    for m in ("thread", "warp"):
        r[f"gpudyn_{m}"] = _series(gg_ms, gg_held, mapping=m)
        r[f"worst_{m}"] = _series(worst_ms, 32 << 20, mapping=m)
        r[f"worst_plain_{m}"] = _series(worst_ms * 1.1, 32 << 20, mapping=m)
        r[f"two_pass_{m}"] = _series(two_ms, two_held, mapping=m)
    return r


def test_targets_from_results(tmp_path):
    from gpudyn.bench._common import Context

    apps = _apps()
    ctx = Context("apps", str(tmp_path), True, {"name": "test GPU"})
    py, cpp = _results(), _results(gg_ms=2.0, two_ms=2.4, gg_held=48 << 20)
    cpp["gpudyn_warp"]["held_bytes"] = 80 << 20
    apps.summarize(ctx, py, cpp, [])
    t = {x["name"]: x for x in ctx.targets}
    assert [x["name"] for x in ctx.targets] == TARGET_NAMES
    w = "preallocated worst-case buffer (warp-aggregated atomic counter)"
    assert t[f"BFS gpudyn vs {w}, Numba, thread per vertex"]["value"] == pytest.approx(1.2)
    assert t[f"BFS gpudyn vs {w}, Numba, thread per vertex"]["met"] is True
    assert t["BFS gpudyn vs two-pass (count, scan, write), Numba, warp per vertex"]["value"] == pytest.approx(1.5)
    assert t[f"BFS gpudyn vs {w}, C++, warp per vertex"]["met"] is False  # 1.2 / 2.0
    assert t["BFS gpudyn vs two-pass (count, scan, write), C++, thread per vertex"]["met"] is False  # 1.2 < 1.3
    mem = t["BFS device memory gpudyn / two-pass, Numba (lower is better)"]
    assert mem["value"] == pytest.approx(2.5) and mem["met"] is False and mem["comparison"] == "<="
    mem = t["BFS device memory gpudyn / two-pass, C++ (lower is better)"]
    assert mem["value"] == pytest.approx(5.0) and "warp" in mem["where"]
    assert t[TARGET_NAMES[-1]]["value"] == 1.0
    rows = apps.table_rows(py, cpp)
    assert len(rows) == 16 and all(r["validated"] for r in rows)
    json.dumps(ctx.targets, allow_nan=False)


def test_targets_when_variants_are_missing(tmp_path):
    from gpudyn.bench._common import Context

    apps = _apps()
    ctx = Context("apps", str(tmp_path), True, {"name": "test GPU"})
    py = _results()
    for m in ("thread", "warp"):
        py[f"gpudyn_{m}"] = {"skipped": "no at()", "validated": False}
    apps.summarize(ctx, py, {}, ["gpudyn_thread: no at()", "cpp: exited with 1"])
    t = {x["name"]: x for x in ctx.targets}
    assert [x["name"] for x in ctx.targets] == TARGET_NAMES
    assert all(not x["met"] for x in ctx.targets)
    assert "no at()" in t[TARGET_NAMES[0]]["where"] and "cpp: exited" in t[TARGET_NAMES[-1]]["where"]
    json.dumps(ctx.targets, allow_nan=False)
    assert apps.table_rows(py, {})[0]["validated"] is False


def test_graph_file_layout(tmp_path):
    apps = _apps()
    _, _, row, col, _ = _graph(6)
    keys = np.array([3, 5], dtype=np.int32)
    levels = [np.arange(row.size - 1, dtype=np.int32), np.full(row.size - 1, -1, np.int32)]
    path = tmp_path / "g.bin"
    apps.write_graph_file(str(path), row, col, keys, levels)
    b = path.read_bytes()
    n, nnz, k = np.frombuffer(b[8:32], dtype="<u8")
    assert b[:8] == apps.GRAPH_MAGIC and (n, nnz, k) == (row.size - 1, col.size, 2)
    assert len(b) == 32 + 8 * (n + 1) + 4 * nnz + 4 * k + 4 * k * n


def compile_arch():
    import gpudyn.numba as gdn

    archs = gdn.build_info()["archs"]
    arch = "90" if "90" in archs else archs[0]
    return divmod(int(arch.rstrip("af")), 10)


def test_numba_kernels_compile(monkeypatch):
    """Every kernel of the bench compiles to PTX without a GPU; the gpudyn ones call
    the GGArray shims (with gdn.at when it exists, else a stand-in over gdn.size)."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    import gpudyn
    import gpudyn.numba as gdn
    from numba import cuda
    from numba.cuda import dispatcher, types

    apps = _apps()
    cc = compile_arch()
    monkeypatch.setattr(dispatcher, "get_current_device", lambda: pytypes.SimpleNamespace(compute_capability=cc))
    if hasattr(gdn, "at"):
        lib = gdn
    else:

        @cuda.jit(device=True)
        def at(ref, i):
            return gdn.size(ref) + i

        lib = pytypes.SimpleNamespace(size=gdn.size, push_back=gdn.push_back, at=at)
    ks = apps.kernels(lib)
    ref = gdn.ref_type(gpudyn.GGArray, np.int32)
    a32, a64 = types.Array(types.int32, 1, "C"), types.Array(types.int64, 1, "C")
    assert len(ks) == 10
    for name, k in ks.items():
        if name.startswith("expand"):
            sig = ((ref, a32, ref, a32) if "gpudyn" in name else (a32,) * 4) + (
                a64,
                a32,
                a32,
                a32,
                types.int32,
                a32,
                a32,
            )
        elif name.startswith("count"):
            sig = (a32, types.int64, a64, a32, a32, a32, types.int32, a32)
        else:
            sig = (a32, types.int64, a32, a32, a64, a32, a32, a32)
        ptx, _ = cuda.compile(k.py_func, sig, device=False, output="ptx", cc=cc, abi="numba")
        calls = "gpudyn_numba_ggarray_push_back_u32" in ptx
        assert calls == ("gpudyn" in name), name
    seed = apps._seed_kernel()
    ptx, _ = cuda.compile(seed.py_func, (ref, types.int32), device=False, output="ptx", cc=cc, abi="numba")
    assert "gpudyn_numba_ggarray_push_back_u32" in ptx


SIM_SCRIPT = textwrap.dedent("""
    import numpy as np
    from gpudyn.bench import apps
    src, dst = apps.kronecker_edges(np, 6)
    row, col, keys = apps.build_csr(np, src, dst, 64)
    env = apps.Env(np, 1, sim=True)
    ks = apps.kernels(None)
    g = apps._Graph(env, row, col)
    for v in (apps.WorstCase(g, ks, "thread", True, check_every=2), apps.TwoPass(g, ks, "thread")):
        for root in apps.search_keys(row)[:2]:
            v.search(int(root))
            ref = apps.reference_levels(row, col, int(root))
            err = apps.validate(np, keys, src, dst, int(root), g.parent, g.level, ref)
            assert not any(err.values()), (type(v).__name__, err)
            assert ref.max() >= 2
        print(type(v).__name__, "ok", v.levels, v.host_reads, v.held_bytes())
""")


def _simulate(script: str):
    """Runs `script` in a fresh interpreter under Numba's CUDA simulator; it must succeed."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    return r


def test_buffer_variants_under_the_simulator():
    """The worst-case buffer (per-thread atomic) and the two-pass, thread per vertex,
    driver and kernels as on the GPU, under NUMBA_ENABLE_CUDASIM (it has no warp
    intrinsics: the warp-level kernels run on the GPU test only)."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    r = _simulate(SIM_SCRIPT)
    lines = r.stdout.split("\n")
    assert lines[0].startswith("WorstCase ok") and lines[1].startswith("TwoPass ok")
    assert lines[0].split()[3] == "4"  # 2 searches, each stopping at its second check of the counter
    # The worst-case buffers: n int32 each and two counters; the two-pass: its largest level.
    assert int(lines[0].split()[4]) == 2 * 64 * 4 + 8 and int(lines[1].split()[4]) > 0


def _program():
    from gpudyn.bench._common import Context

    try:
        return Context("apps", ".", False, {}).find_program(PROGRAM)
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


def _has_device() -> bool:
    try:
        import gpudyn

        return gpudyn.device_count() > 0
    except Exception:  # NoDeviceError, or no driver at all
        return False


def test_program_arguments(tmp_path):
    prog = _program()
    r = subprocess.run([prog], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--out FILE.json is required" in r.stderr
    out = str(tmp_path / "x.json")
    r = subprocess.run([prog, "--out", out], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--graph GRAPH.bin is required" in r.stderr
    r = subprocess.run(
        [prog, "--out", out, "--graph", "g", "--check-every", "0"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "argument '--check-every' is '0'" in r.stderr
    (tmp_path / "bad.bin").write_bytes(b"not a graph")
    r = subprocess.run(
        [prog, "--out", out, "--graph", str(tmp_path / "bad.bin")], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "not a readable graph file" in r.stderr
    assert not (tmp_path / "x.json").exists()


def test_program_without_a_device_says_so(tmp_path):
    if _has_device():
        pytest.skip("a CUDA device is present: the program would run")
    apps = _apps()
    _, _, row, col, _ = _graph(6)
    path = str(tmp_path / "g.bin")
    apps.write_graph_file(path, row, col, np.array([1], np.int32), [np.zeros(row.size - 1, np.int32)])
    r = subprocess.run(
        [_program(), "--out", str(tmp_path / "x.json"), "--graph", path], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 77, r.stderr
    assert "no CUDA device" in r.stderr and not (tmp_path / "x.json").exists()


@pytest.mark.gpu
def test_bench_apps_quick_is_clean(tmp_path):
    """`gpudyn bench apps --quick` (scale 16, 2 keys): every variant of both languages
    validated against the reference, every target computed."""
    pytest.importorskip("cupy")
    pytest.importorskip("numba.cuda")
    _program()
    if os.environ.get("GPUDYN_SANITIZER"):
        # Left out under compute-sanitizer: the run compiles ~10 kernels and searches a
        # 65k-vertex graph ~30 times; its timings mean nothing there.  The GGArray calls
        # it makes (push_back, size, at) run under the tools in the GGArray tests.
        pytest.skip("a benchmark under compute-sanitizer measures nothing (GPUDYN_SANITIZER is set)")
    r = subprocess.run(
        [sys.executable, "-m", "gpudyn", "bench", "apps", "--quick", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((tmp_path / "apps.json").read_text())
    assert result["failures"] == [] and result["validated"] is True, result["failures"]
    assert [t["name"] for t in result["targets"]] == TARGET_NAMES + PAIRS_TARGET_NAMES + LISTS_TARGET_NAMES
    assert result["targets"][len(TARGET_NAMES) - 1]["met"] is True and result["targets"][-1]["met"] is True
    pairs = result["pairs"]
    assert pairs["validated"] and pairs["pairs"] > 0 and pairs["bound_pairs"] > 10 * pairs["pairs"]
    for v in ("gpudyn", "gpudyn_local", "gpudyn_fresh", "worst", "two_pass"):
        s = pairs["variants"][v]
        assert s["validated"] and s["pairs"] == pairs["pairs"] and s["held_bytes"] > 0, (v, s)
    lists = result["lists"]
    assert lists["validated"] and lists["pairs"] == 2 * pairs["pairs"], lists["failures"]
    for v in ("heap", "heap_default_registers", "two_pass"):
        s = lists["variants"][v]
        assert s["validated"] and s["pairs"] == lists["pairs"] and s["held_bytes"] > 0, (v, s)
    for v in ("heap", "heap_default_registers"):
        heap = lists["variants"][v]
        assert heap["heap_live_bytes"] >= heap["list_bytes"] and heap["live_bytes_after_free"] == 0, heap
    assert lists["variants"]["heap"]["registers"] <= 64
    assert result["graph"]["scale"] == 16 and len(result["graph"]["keys"]) == 2
    for lang in ("python", "cpp"):
        for m in ("thread", "warp"):
            for v in ("gpudyn", "worst", "worst_plain", "two_pass"):
                s = result[lang][f"{v}_{m}"]
                assert s["validated"] and len(s["ms"]) == 2 and s["held_bytes"] > 0, (lang, v, m, s)
    assert result["python"]["cupy"]["validated"]
    import importlib.util

    if importlib.util.find_spec("matplotlib") is not None:
        assert result["plots"] == ["apps_bfs.png"] and (tmp_path / "apps_bfs.png").exists()


# ---- the second program: fixed-radius neighbour pairs (item 4b) ---------------------


def _pairs():
    from gpudyn.bench import apps_pairs

    return apps_pairs


def test_particles_are_sorted_by_cell_with_exact_coordinates():
    ap = _pairs()
    px, py, pz, start, end, c, q = ap.particles(np, 3000)
    assert c == round((3000 / ap.DENSITY) ** (1 / 3)) and start.size == end.size == c**3
    cell = ((q[0] >> ap.FRACTION_BITS) * c + (q[1] >> ap.FRACTION_BITS)) * c + (q[2] >> ap.FRACTION_BITS)
    assert np.all(np.diff(cell) >= 0)  # sorted by cell
    assert int((end - start).sum()) == 3000 and np.all(start[1:] == end[:-1])
    for k in np.nonzero(end > start)[0][:50]:
        assert np.all(cell[start[k] : end[k]] == k)
    assert np.array_equal(px.astype(np.float64) * (1 << ap.FRACTION_BITS), q[0])  # exact in float32


def _brute_digest(ap, q):
    """Every pair i < j with |q_i - q_j|^2 < (2^bits)^2, by a double loop over the integer coordinates."""
    n = q.shape[1]
    codes = []
    lim = (1 << ap.FRACTION_BITS) ** 2
    for i in range(n):
        d = q[:, i + 1 :] - q[:, i : i + 1]
        for j in np.nonzero((d * d).sum(axis=0) < lim)[0]:
            codes.append((i << 32) | (i + 1 + int(j)))
    return ap.digest(np, np.asarray(codes, dtype=np.int64)), len(codes)


def test_pairs_references_agree():
    """The sampled NumPy reference (every particle as the sample) and SciPy's (when
    there) give the pairs a plain double loop finds."""
    ap = _pairs()
    *_, q = ap.particles(np, 700)
    want, count = _brute_digest(ap, q)
    assert count > 700  # ~8 pairs a particle at density 4
    by_row = ap.reference(q, np.arange(700))
    codes = np.concatenate([by_row[i] for i in range(700)])
    assert ap.digest(np, codes) == want
    if ap._has_scipy():
        assert ap.reference(q) == want


# The particle programs' simulator scripts start alike: 300 particles, the
# kernels' geometry arguments, a count per particle.
PARTICLES_SIM_PRELUDE = textwrap.dedent("""
    import numpy as np
    from gpudyn.bench import apps_pairs as ap, apps_lists as al
    n = 300
    px, py, pz, start, end, c, q = ap.particles(np, n)
    counts = np.zeros(n, dtype=np.int64)
    args = (px, py, pz, start, end, np.int32(c), np.int32(n))
""")

PAIRS_SIM_SCRIPT = PARTICLES_SIM_PRELUDE + textwrap.dedent("""
    ks = ap.kernels(None)
    ks["count"][(n + 63) // 64, 64](*args, counts, np.zeros(1, dtype=np.int64))  # the last: not used
    incl = np.cumsum(counts)
    out = np.full(int(incl[-1]), -1, dtype=np.int64)
    ks["write"][(n + 63) // 64, 64](*args, out, incl - counts)
    ref = ap.reference(q, np.arange(n))
    want = np.concatenate([ref[i] for i in range(n)])
    assert np.array_equal(np.sort(out), np.sort(want)), (out.size, want.size)
    print("pairs ok", out.size)
""")


def test_pairs_two_pass_under_the_simulator():
    """The pair loop's count and write kernels (the two-pass) under Numba's simulator
    find exactly the reference's pairs, each once."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    r = _simulate(PAIRS_SIM_SCRIPT)
    assert r.stdout.startswith("pairs ok") and int(r.stdout.split()[2]) > 300


def test_pairs_kernels_compile(monkeypatch):
    """The pair kernels compile to PTX without a GPU; only the gpudyn one calls the
    GGArray's int64 push_back."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    import gpudyn
    import gpudyn.numba as gdn
    from numba import cuda
    from numba.cuda import dispatcher, types

    ap = _pairs()
    cc = compile_arch()
    monkeypatch.setattr(dispatcher, "get_current_device", lambda: pytypes.SimpleNamespace(compute_capability=cc))
    ks = ap.kernels(gdn)
    f32, i32, i64 = (types.Array(t, 1, "C") for t in (types.float32, types.int32, types.int64))
    geo = (f32, f32, f32, i32, i32, types.int32, types.int32)
    sigs = {
        "pairs_gpudyn": geo + (gdn.ref_type(gpudyn.GGArray, np.int64), i64),
        "pairs_gpudyn_local": geo + (gdn.ref_type(gpudyn.GGArray, np.int64), i64),
        "pairs_worst": geo + (i64, i64),
        "count": geo + (i64, i64),
        "write": geo + (i64, i64),
    }
    assert sorted(ks) == sorted(sigs)
    for name, sig in sigs.items():
        ptx, _ = cuda.compile(ks[name].py_func, sig, device=False, output="ptx", cc=cc, abi="numba")
        assert ("gpudyn_numba_ggarray_push_back" in ptx) == (name == "pairs_gpudyn"), name
        assert ("gpudyn_numba_ggarray_extend" in ptx) == (name == "pairs_gpudyn_local"), name


# ---- the Heap's program: neighbour lists (issue 42, item 4) ---------------------------


def test_directed_references_agree():
    """Directed (every j != i) sampled and SciPy references give a double loop's
    pairs in both directions."""
    ap = _pairs()
    *_, q = ap.particles(np, 500)
    half, count = _brute_digest(ap, q)
    by_row = ap.reference(q, np.arange(500), directed=True)
    codes = np.concatenate([by_row[i] for i in range(500)])
    assert codes.size == 2 * count
    firsts, seconds = codes >> 32, codes & 0xFFFFFFFF
    assert np.all(firsts != seconds)
    assert ap.digest(np, codes[seconds > firsts]) == half  # each pair once per direction
    assert ap.digest(np, (seconds << 32 | firsts)[firsts > seconds]) == half
    if ap._has_scipy():
        assert ap.reference(q, directed=True) == ap.digest(np, codes)


LISTS_SIM_SCRIPT = PARTICLES_SIM_PRELUDE + textwrap.dedent("""
    ks = al.kernels(None)
    ks["count"][(n + 63) // 64, 64](*args, counts)
    incl = np.cumsum(counts)
    out = np.full(int(incl[-1]), -1, dtype=np.int32)
    ks["write"][(n + 63) // 64, 64](*args, out, incl - counts)
    ref = ap.reference(q, np.arange(n), directed=True)
    for i in range(n):
        got = np.sort((np.int64(i) << 32) | out[incl[i] - counts[i] : incl[i]].astype(np.int64))
        assert np.array_equal(got, ref[i]), (i, got, ref[i])
    print("lists ok", out.size)
""")


def test_lists_two_pass_under_the_simulator():
    """The neighbour-list count and write kernels under Numba's simulator give each
    particle exactly its reference neighbours (every j != i)."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    r = _simulate(LISTS_SIM_SCRIPT)
    assert r.stdout.startswith("lists ok") and int(r.stdout.split()[2]) > 600


def test_lists_kernels_compile(monkeypatch):
    """The neighbour-list kernels compile to PTX without a GPU; the build kernel
    mallocs on the Heap (under the register cap), the free kernel frees, the
    two-pass calls neither."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    import gpudyn
    import gpudyn.numba as gdn
    from gpudyn.bench import apps_lists as al
    from numba import cuda
    from numba.cuda import dispatcher, types

    cc = compile_arch()
    monkeypatch.setattr(dispatcher, "get_current_device", lambda: pytypes.SimpleNamespace(compute_capability=cc))
    ks = al.kernels(gdn, al.MAX_REGISTERS)
    f32, i32, i64, u64 = (types.Array(t, 1, "C") for t in (types.float32, types.int32, types.int64, types.uint64))
    geo = (f32, f32, f32, i32, i32, types.int32, types.int32)
    heap = gdn.ref_type(gpudyn.Heap)
    sigs = {
        "build_heap": geo + (heap, u64, i64, i64),
        "free_lists": (types.int32, heap, u64, i64),
        "gather": (types.int32, u64, i64, i64, i64),
        "count": geo + (i64,),
        "write": geo + (i32, i64),
    }
    assert sorted(ks) == sorted(sigs)
    for name, sig in sigs.items():
        ptx, _ = cuda.compile(ks[name].py_func, sig, device=False, output="ptx", cc=cc, abi="numba")
        assert ("gpudyn_numba_heap_malloc" in ptx) == (name == "build_heap"), name
        assert ("gpudyn_numba_heap_free" in ptx) == (name == "free_lists"), name
    assert ks["build_heap"].targetoptions.get("max_registers") == al.MAX_REGISTERS == 64  # given to the linker
    assert al.kernels(gdn)["build_heap"].targetoptions.get("max_registers") is None


PARTICLE_RUN_SIM_SCRIPT = textwrap.dedent("""
    import types
    import numpy as np
    from gpudyn.bench import apps_pairs as ap

    class Event:
        def record(self): pass
        def synchronize(self): pass

    # NumPy standing in for CuPy (the simulator has no as_cuda_array: arrays pass as they are).
    cp = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    cp.asnumpy, cp.random = np.asarray, types.SimpleNamespace(default_rng=np.random.default_rng)
    cp.cuda = types.SimpleNamespace(Event=Event, get_elapsed_time=lambda a, b: 1.0)
    ap.cuda.as_cuda_array = lambda a, sync=False: a
    ap.QUICK_N = 400

    class Ctx:
        quick = True
        def target(self, name, value, goal, unit, higher):
            self.t = dict(name=name, value=value)
            return self.t

    for directed in (False, True):
        seen = []
        pr = ap.ParticleRun(Ctx(), cp, "x", seen.append, directed=directed)
        assert pr.n == 400 and len(pr.kargs) == 7 and pr.grid == (400 + ap.BLOCK - 1) // ap.BLOCK
        ms = pr.timed(lambda: None)
        assert ms == [1.0] * pr.runs
        q = ap.particles(np, 400)[6]
        by_row = ap.reference(q, np.arange(400), directed=directed)
        codes = np.concatenate([by_row[i] for i in range(400)])
        pr.record("right", ms, codes, 10)
        pr.record("one_short", ms, codes[1:], 10)
        ctx = Ctx()
        out = pr.finish(ctx, "thing", extra=1)
        assert out["variants"]["right"]["validated"] and not out["variants"]["one_short"]["validated"]
        assert out["failures"][0].startswith("one_short:") and out["validated"] is False
        assert ctx.t["name"] == "every thing output validated (1 = yes)" and ctx.t["value"] == 0.0
        assert ctx.t["where"].startswith("one_short:")
        assert list(out)[:3] == ["particles", "cells_per_side", "extra"] and seen == ["x right", "x one_short"]
        print("run ok", directed, out["variants"]["right"]["pairs"])
""")


def test_particle_run_validates_each_variant():
    """ParticleRun (both particle programs' driver): a variant with the reference's
    pairs (i < j, or both ways) validates, one pair short fails with its name, and
    the validated target says so."""
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    out = _simulate(PARTICLE_RUN_SIM_SCRIPT).stdout.split("\n")
    half, both = (int(line.split()[3]) for line in out[:2])
    assert out[0].startswith("run ok False") and out[1].startswith("run ok True") and both == 2 * half > 400
