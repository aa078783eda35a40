"""`gpudyn bench rw_heap`, the random-walk evaluation of issue 14 item 1, on the host.

Fig. 10 from theory (Eqs. 3 and 9) against values computed by hand; the driver's
new computations (Pearson's r of TAS/WAS against time, where the queue wins and
loses, the N ~ A table, CRW in its regime, the verified target) on a hand-made
raw result shaped like gpudyn_bench_rw_heap's rows, so the arithmetic is checked
against numbers written here; and the figures drawn from it."""

import json
import math

import pytest
from gpudyn.bench import rw_heap, theory
from gpudyn.bench._common import Context

PROGRAM = "gpudyn_bench_rw_heap"
T1, T16 = 1 << 20, 1 << 24


# ---- Fig. 10 and Eq. 9 (hand-computed) ---------------------------------------
def test_fig10_values_at_half_a_percent_free():
    # T = 2^20, 0.5 % free: A = round(5242.88) = 5243; N = 1000.
    # Eq. 3: (T/N) ln(A / (A - N)) = 1048.576 x ln(5243 / 4243) = 1048.576 x 0.2116234 = 221.903
    # Eq. 8: p = (M - 1) / (A + M - 1); Eq. 9: 1 + p x Eq. 3.
    #   CRW1, M = round(0.01 A) = 52:   p = 51 / 5294   = 0.0096335 -> 3.13771
    #   CRW2, M = round(0.5 A) = 2622:  p = 2621 / 7864 = 0.3332910 -> 74.9583
    #   CRW3, M = A = 5243:             p = 5242 / 10485 = 0.4999523 -> 111.941
    f10 = theory.fig10()
    assert f10["T"] == 1 << 20 and f10["m_fractions"] == [0.01, 0.5, 1.0]
    panel = next(p for p in f10["panels"] if p["free"] == 0.005)
    assert panel["A"] == 5243
    i = panel["N"].index(1000)
    assert panel["rw"][i] == pytest.approx(221.903, rel=1e-5)
    assert panel["crw"]["0.01"][i] == pytest.approx(3.13771, rel=1e-5)
    assert panel["crw"]["0.5"][i] == pytest.approx(74.9583, rel=1e-5)
    assert panel["crw"]["1.0"][i] == pytest.approx(111.941, rel=1e-5)
    # The paper: "even under M = A and 0.5 % free, RW is about twice" CRW.
    assert panel["rw"][i] / panel["crw"]["1.0"][i] == pytest.approx(2.0, rel=0.02)
    # Every panel keeps N below A (Eq. 3's logarithm), CRW never above RW + 1.
    for p in f10["panels"]:
        assert p["N"] and max(p["N"]) < p["A"] and p["N"] == sorted(p["N"])
        for m in ("0.01", "0.5", "1.0"):
            assert all(c <= r + 1 for c, r in zip(p["crw"][m], p["rw"]))
    # Against the free fraction at N = 1000: 0.5 % is the first point, with the values above.
    bf = f10["by_free"]
    assert bf["N"] == 1000 and bf["free"][0] == pytest.approx(0.005)
    assert bf["rw"][0] == pytest.approx(221.903, rel=1e-5)
    assert bf["rw"] == sorted(bf["rw"], reverse=True)  # fewer steps as more pages are free
    json.dumps(f10, allow_nan=False)


def test_crw_with_the_bitmap_walk():
    # T = 100, A = 50, N = 10, w = 1: Eq. 5 is (1/10) sum_{j<10} 100 / (50 - j) = T/N (H_50 - H_40)
    u = 10 * (theory.harmonic(50) - theory.harmonic(40))
    assert theory.rw_bm_tas(100, 50, 10, w=1) == pytest.approx(u)
    # M = 50 clusters: p = 49 / 99.  Eq. 9 with U in place of Eq. 3:
    assert theory.crw_bm_tas(100, 50, 10, 50, w=1) == pytest.approx(1 + 49 / 99 * u)
    # R = 4 requests per thread: the first walks, the other 3 follow Eq. 9.
    assert theory.crw_bm_tas(100, 50, 10, 50, w=1, per_thread=4) == pytest.approx((u + 3 * (1 + 49 / 99 * u)) / 4)
    assert theory.crw_bm_tas(100, 50, 10, 1, w=1) == 1.0  # one cluster: never walks again
    with pytest.raises(ValueError, match="per_thread"):
        theory.crw_bm_tas(100, 50, 10, 5, per_thread=0)


# ---- the driver's computations -----------------------------------------------
def test_pearson():
    assert rw_heap.pearson([1, 2, 3, 4], [2, 4, 6, 8]) == pytest.approx(1.0)
    assert rw_heap.pearson([1, 2, 3, 4], [8, 6, 4, 2]) == pytest.approx(-1.0)
    # x = 1, 2, 3; y = 1, 3, 2: sxy = 1, sxx = 2, syy = 2 -> 1 / 2
    assert rw_heap.pearson([1, 2, 3], [1, 3, 2]) == pytest.approx(0.5)
    assert rw_heap.pearson([1, 2], [1, 2]) is None  # too few points
    assert rw_heap.pearson([1, 1, 1], [1, 2, 3]) is None  # no spread
    with pytest.raises(ValueError):
        rw_heap.pearson([1, 2, 3], [1, 2])


def _bytes(T, queue=False):
    pool = T * 256
    meta = T * 4 + 8 if queue else T // 8 + T * 4 + T * 2 + 80
    return {"bytes_held": pool + meta, "pool_bytes": pool, "bitmap_bytes": 0 if queue else T // 8, "meta_bytes": meta}


def _f11(alloc, T, free, N, ms, tas, was, near=None, **extra):
    r = {
        "figure": "fig11",
        "allocator": alloc,
        "T": T,
        "A": int(round(free * T)),
        "free": free,
        "N": N,
        "ms": ms,
        "tas": tas,
        "was": was,
        "failed": 0,
        "verified": True,
        **_bytes(T, alloc.startswith("queue")),
        **extra,
    }
    if near is not None:
        r["near_a"] = near
    return r


# Fig. 11 points: (T, free, N) -> ms of rw, rw_bm, corw, queue, queue_build.
GRID = {
    (T1, 0.5, 1024): (0.010, 0.006, 0.007, 0.003, 0.012),
    (T1, 0.5, 65536): (0.020, 0.010, 0.008, 0.012, 0.020),
    (T1, 0.005, 1024): (0.300, 0.020, 0.015, 0.003, 0.011),
    (T16, 0.5, 65536): (0.012, 0.0066, 0.0067, 0.0077, 0.030),
}


def _raw(bad_check=False):
    rows = []
    for (T, free, N), ms in GRID.items():
        A = int(round(free * T))
        tas_rw, tas_bm = theory.rw_tas(T, A, N), theory.rw_bm_tas(T, A, N)
        for alloc, m, tas in zip(("rw", "rw_bm", "corw"), ms, (tas_rw, tas_bm, 1.2 * tas_bm)):
            rows.append(_f11(alloc, T, free, N, m, tas, 3 * tas))
        rows.append(_f11("queue", T, free, N, ms[3], (N + 1) / 2, N - 15))
        rows.append(_f11("queue_build", T, free, N, ms[4], (N + 1) / 2, N - 15, build_ms=ms[4] - ms[3]))
    # N ~ A at T = 1M, 0.5 % free (A = 5243): the walks slow down, the queue does not.
    for near, N, ms in ((0.9, 4719, (2.0, 0.05, 0.04, 0.004, 0.012)), (1.0, 5243, (9.0, 0.30, 0.20, 0.004, 0.012))):
        for alloc, m, tas in zip(("rw", "rw_bm", "corw", "queue", "queue_build"), ms, (900, 30, 20, N / 2, N / 2)):
            rows.append(_f11(alloc, T1, 0.005, N, m, tas, 4 * tas, near=near))
    rows += [
        {"figure": "fig11", "allocator": "cuda_malloc_16B", "N": N, "ms": 0.5 * N / 1024, "bytes_held": 12 << 30}
        for N in (1024, 65536)
    ]
    # CRW: 2 layouts x R = 8 at 50 % free; crw wins on clusters, ties at random.
    for layout, c, clusters, ms in (
        ("clusters", 100, 5243, (0.010, 0.020, 0.018)),
        ("random", 0, 262000, (0.021, 0.020, 0.018)),
    ):
        for alloc, m, tas in zip(("crw", "rw_bm", "corw"), ms, (1.02, 1.0, 1.01)):
            rows.append(
                {
                    "figure": "crw",
                    "allocator": alloc,
                    "layout": layout,
                    "cluster_pages": c,
                    "T": T1,
                    "A": 524288,
                    "clusters": clusters,
                    "free": 0.5,
                    "per_thread": 8,
                    "N": 32768,
                    "requests": 262144,
                    "ms": m,
                    "tas": tas,
                    "was": 2 * tas,
                    "failed": 0,
                    "adjacent_fraction": 0.95 if (alloc == "crw" and c) else 0.01,
                    "verified": True,
                    **_bytes(T1),
                }
            )
    # Churn: the queue wins at 1 % free, loses at 50 %.
    for free, N, ms in ((0.5, 65536, (0.40, 0.10, 0.08)), (0.01, 4096, (0.02, 0.06, 0.05))):
        for alloc, m in zip(("queue", "rw_bm", "corw"), ms):
            r = {
                "figure": "churn",
                "allocator": alloc,
                "T": T1,
                "A": int(round(free * T1)),
                "free": free,
                "N": N,
                "rounds": 8,
                "ms": m,
                "ms_per_round": m / 8,
                "verified": True,
                **_bytes(T1, alloc == "queue"),
            }
            if alloc != "queue":
                r.update({"tas": 1.5, "was": 3.0})
            rows.append(r)
    if bad_check:
        rows[-1].update({"verified": False, "check": "3 pages changed while owned; "})
    # The other figures, as the paper-figure part of the driver reads them.
    for s in ("16", "256", "4096", "8192", "mixed_16_4096"):
        rows += [
            {"figure": "fig13", "allocator": a, "scenario": s, "N": 65536, "ms": m, "failed": 0}
            for a, m in (("rw_malloc", 0.1), ("cuda_malloc", 10.0))
        ]
    rows += [
        {"figure": "fig15", "page_size": p, "request": 1050, "utilisation": 0.9, "pow2_class_utilisation": 0.51}
        for p in (128, 256)
    ]
    rows += [
        {"figure": "fig17", "allocator": a, "tuples": n, "ms": 1.0, "missing_outputs": 0}
        for a in ("DO", "RW", "RW-BM", "CoRW", "cuda_malloc")
        for n in (16384, 1048576)
    ]
    return {"program": PROGRAM, "quick": True, "gpu": "test GPU", "reps": 3, "rows": rows}


def _run(tmp_path, raw, plots=False):
    ctx = Context("rw_heap", str(tmp_path), True, {"name": "test GPU"})
    ctx.run_program = lambda program, args=None: raw if program == PROGRAM else pytest.fail(program)
    if not plots:
        ctx.pyplot = lambda: None
    return ctx, rw_heap.run(ctx)


def test_tas_time_correlation():
    rows = [
        _f11("rw", T1, 0.5, n, ms, tas, was)
        for n, ms, tas, was in ((1024, 0.1, 1.0, 2.0), (2048, 0.2, 2.0, 1.0), (4096, 0.4, 4.0, 3.0))
    ]
    c = rw_heap.tas_time_correlation(rows)["rw"]
    assert c["points"] == 3
    assert c["tas_r"] == pytest.approx(1.0)  # ms = 0.1 TAS
    assert c["tas_r_log"] == pytest.approx(1.0)
    # WAS 2, 1, 3 against ms 0.1, 0.2, 0.4: mx = 2, my = 0.7/3;
    # sxy = 0(-0.1333) + (-1)(-0.0333) + 1(0.1667) = 0.2, sxx = 2, syy = 0.0467 -> 0.2 / sqrt(0.0933) = 0.6547
    assert c["was_r"] == pytest.approx(0.2 / math.sqrt(2 * (0.1**2 + 0.2**2 + 0.4**2 - 0.49 / 3)), rel=1e-9)
    assert c["was_r"] == pytest.approx(0.6547, abs=1e-4)


def test_where_the_queue_wins():
    cases = rw_heap.queue_comparison(_raw()["rows"])
    by = {(c["workload"], c["T"], c["free"], c["N"]): c for c in cases}
    # (faster of RW-BM and CoRW) / queue
    c = by[("queue", T1, 0.5, 1024)]
    assert c["queue_speedup"] == pytest.approx(0.006 / 0.003) and c["queue_wins"] and c["rival"] == "rw_bm"
    c = by[("queue", T1, 0.5, 65536)]
    assert c["queue_speedup"] == pytest.approx(0.008 / 0.012) and not c["queue_wins"] and c["rival"] == "corw"
    assert by[("queue_build", T1, 0.005, 1024)]["queue_speedup"] == pytest.approx(0.015 / 0.011)
    assert by[("queue_build", T16, 0.5, 65536)]["queue_speedup"] == pytest.approx(0.0066 / 0.030)
    assert by[("queue", T1, 0.005, 5243)]["near_a"] == 1.0
    assert by[("queue", T1, 0.005, 5243)]["queue_speedup"] == pytest.approx(0.20 / 0.004)
    assert by[("churn", T1, 0.01, 4096)]["queue_speedup"] == pytest.approx(0.05 / 0.02)
    assert by[("churn", T1, 0.5, 65536)]["queue_speedup"] == pytest.approx(0.08 / 0.40)
    assert by[("churn", T1, 0.5, 65536)]["queue_bytes"] == T1 * 256 + T1 * 4 + 8
    assert len([c for c in cases if c["workload"] == "queue"]) == 6  # 4 grid + 2 near A
    summary = {(s["workload"], s["free"]): s for s in rw_heap.queue_summary(cases)}
    q = summary[("queue", "all")]
    # queue wins at (1M, 50 %, 1024), (1M, 0.5 %, 1024), both N ~ A points; loses at (1M, 50 %, 64K), (16M, 50 %, 64K)
    assert (q["points"], q["queue_wins"]) == (6, 4)
    assert q["max_speedup"] == pytest.approx(0.20 / 0.004) and q["max_at"] == f"T={T1} 0.5% free N=5243 (1 A)"
    assert q["min_speedup"] == pytest.approx(0.008 / 0.012) and q["min_at"] == f"T={T1} 50% free N=65536"
    assert (summary[("queue", 0.5)]["points"], summary[("queue", 0.5)]["queue_wins"]) == (3, 1)
    qb = summary[("queue_build", "all")]
    assert (qb["points"], qb["queue_wins"]) == (6, 3)  # 0.5 % free, 1024 and both N ~ A points
    assert (summary[("churn", "all")]["points"], summary[("churn", "all")]["queue_wins"]) == (2, 1)
    assert [s["workload"] for s in rw_heap.queue_summary(cases)][0] == "queue"


def test_driver_end_to_end(tmp_path):
    ctx, result = _run(tmp_path, _raw())
    json.dumps(result, allow_nan=False)  # strict JSON: no inf/NaN (Eq. 4 is infinite at N = A)
    t = {x["name"]: x for x in ctx.targets}
    # The paper's targets stay on the grid: N ~ A points do not become "the largest N".
    assert f"CoRW GETPAGE time, N=65536, T={T16}, 50% free" in t
    assert f"RW/RW-BM TAS ratio at 0.5% free (T={T1}, N=1024)" in t
    v = t["GETPAGE, CRW and churn outputs verified (1 = yes)"]
    assert v["value"] == 1.0 and v["met"] and v["where"] == f"{result['verified_rows']} rows checked"
    assert result["verified_rows"] == 4 * 5 + 2 * 5 + 6 + 6
    near = result["near_a"]
    assert [(e["T"], e["free"], e["n_over_a"], e["N"]) for e in near] == [
        (T1, 0.005, 0.9, 4719),
        (T1, 0.005, 1.0, 5243),
    ]
    assert (
        near[1]["rw_ms"] == 9.0
        and near[1]["queue_build_ms"] == 0.012
        and near[1]["rw_bytes"] == _bytes(T1)["bytes_held"]
    )
    fig12 = {(x["T"], x["free"], x["N"]): x for x in result["fig12"]}
    assert fig12[(T1, 0.005, 5243)]["near_a"] == 1.0 and fig12[(T1, 0.005, 5243)]["was_ratio_theory"] is None
    crw = {e["layout"]: e for e in result["crw"]}
    assert crw["clusters"]["rw_bm_over_crw_ms"] == pytest.approx(2.0)
    assert crw["clusters"]["crw_adjacent"] == 0.95
    assert crw["clusters"]["crw_tas_eq9_bm"] == pytest.approx(theory.crw_bm_tas(T1, 524288, 262144, 5243, per_thread=8))
    corr = result["tas_time_correlation"]
    assert set(corr) == {"rw", "rw_bm", "corw", "queue", "queue_build"}
    assert corr["queue"]["points"] == 6
    table = result["table"]
    for heading in (
        "N close to the free pages A",
        "CRW in its regime",
        "Churn:",
        "Where the queue wins",
        "TAS and WAS against kernel time",
        "| CoRW GETPAGE N=65536",
    ):
        assert heading in table, heading
    assert "| GETPAGE, queue list built before the timing (the paper's queue) | all | 6 | 4 |" in table


def test_a_failed_check_misses_the_verified_target(tmp_path):
    ctx, result = _run(tmp_path, _raw(bad_check=True))
    v = {x["name"]: x for x in ctx.targets}["GETPAGE, CRW and churn outputs verified (1 = yes)"]
    assert v["value"] == 0.0 and not v["met"]
    assert "1 failed: churn corw T=1048576, free=0.01, N=4096: 3 pages changed while owned" in v["where"]
    assert result["verification_failures"] == ["churn corw T=1048576, free=0.01, N=4096: 3 pages changed while owned; "]


def test_figures(tmp_path):
    pytest.importorskip("matplotlib")
    ctx, _ = _run(tmp_path, _raw(), plots=True)
    for name in (
        "rw_heap_fig10.png",
        "rw_heap_crw.png",
        "rw_heap_tas_time.png",
        "rw_heap_churn.png",
        "rw_heap_fig12.png",
        f"rw_heap_fig11_T{T1}.png",
    ):
        assert name in ctx.plots
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bytes_held_table(tmp_path):
    _, result = _run(tmp_path, _raw())
    held = {e["T"]: e for e in result["bytes_held"]}
    heap, queue = _bytes(T1), _bytes(T1, queue=True)
    assert held[T1]["heap_bytes"] == heap["bytes_held"] and held[T1]["heap_bitmap_bytes"] == T1 // 8
    assert held[T1]["queue_bytes"] == queue["bytes_held"] and held[T1]["ring_bytes"] == queue["bytes_held"]
    assert held[T16]["heap_pool_bytes"] == T16 * 256 and "ring_bytes" not in held[T16]  # no churn row at 16M
    assert held[None]["cuda_malloc_heap_bytes"] == 12 << 30
    assert "| CUDA device malloc | heap reserved by the program: 12288 |" in result["table"]
    # 16M pages: pool 4096 MiB; meta = bitmap 2 + records 64 + live bits 32 + 80 B = 98 MiB
    assert f"| {T16} | 4194 = 4096 + 98 (2) | 4160 = 4096 + 64 |" in result["table"]


# ---- GPU: the program's rows are what the host tests feed the driver ----------
def _program():
    try:
        return Context("rw_heap", ".", False, {}).find_program(PROGRAM)
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.mark.gpu
@pytest.mark.parametrize("section", ["fig11", "crw", "churn"])
def test_program_sections_quick_are_verified(tmp_path, section):
    """gpudyn_bench_rw_heap --quick --only SECTION: every checked row verified, each row
    carrying the keys the hand-made rows above carry, and the driver's part computed
    from the rows."""
    import os
    import subprocess

    prog = _program()
    if os.environ.get("GPUDYN_SANITIZER"):
        pytest.skip("a benchmark under compute-sanitizer measures nothing (GPUDYN_SANITIZER is set)")
    out = tmp_path / "raw.json"
    r = subprocess.run(
        [prog, "--out", str(out), "--quick", "--only", section], capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stderr[-4000:]
    rows = json.loads(out.read_text())["rows"]
    figure = {"fig11": "fig11", "crw": "crw", "churn": "churn"}[section]
    mine = [x for x in rows if x["figure"] == figure]
    assert mine and all(x["figure"] == figure for x in rows)
    bad = [x for x in mine if "verified" in x and not x["verified"]]
    assert not bad, bad[:3]
    expected = {}
    for x in _raw()["rows"]:
        if x["figure"] == figure:
            expected.setdefault(x["allocator"], set()).update(x)
    for x in mine:
        missing = expected[x["allocator"]] - set(x) - {"near_a", "build_ms"}
        assert not missing, (x, missing)
        if "ms" in x:
            assert x["ms"] > 0
        if figure != "fig11" or x["allocator"] != "cuda_malloc_16B":
            assert x["verified"] is True and x["bytes_held"] > x["pool_bytes"] > 0
    if section == "fig11":
        assert {x.get("near_a") for x in mine} >= {0.9, 0.99, 1.0}
        assert {x["allocator"] for x in mine} == {"rw", "rw_bm", "corw", "queue", "queue_build", "cuda_malloc_16B"}
    ctx = Context("rw_heap", str(tmp_path), True, {"name": "test GPU"})
    ctx.pyplot = lambda: None
    part = rw_heap.evaluation_part1(ctx, rows)
    json.dumps(part, allow_nan=False)
    assert part["verification_failures"] == [] and part["verified_rows"] == len([x for x in rows if "verified" in x])
