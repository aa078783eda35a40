"""`gpudyn bench heap` (issue 42, item 3): the targets a user compares.

Host tests: the driver's targets from a hand-made raw result shaped like
gpudyn_bench_heap's (numbers written here, so the arithmetic is checked): the
converged matrix at 64K and 1M threads against the fastest peers' times, the worst
divergent malloc and free at 1M, the usable fraction at 4 KiB and mixed sizes,
held / live after churn, the largest allocation after free-all (reported as not
measured when the program wrote no rows for it), and no "divergent / converged"
or "1000x CUDA malloc" target left."""

import pytest

SIZES = ("16", "256", "4096", "mixed")
NS = (65536, 1048576)


def _raw(free_all=True, conv64=0.007, div=0.4):
    rows = []
    for n in NS:
        for s in SIZES:
            for mode in ("converged", "divergent"):
                heap_ms = (conv64 if n == 65536 else 0.07) if mode == "converged" else div
                if n == 1048576 and mode == "converged" and s == "mixed":
                    heap_ms = 0.3  # above its goal of 0.28
                rows.append(
                    dict(
                        kind="matrix",
                        allocator="heap",
                        mode=mode,
                        n=n,
                        s=s,
                        alloc_ms=heap_ms,
                        free_ms=0.02,
                        alloc_free_ms=heap_ms + 0.02,
                        bytes_live=n * 16,
                        bytes_held=n * 20,
                    )
                )
                rows.append(
                    dict(
                        kind="matrix",
                        allocator="cuda_malloc",
                        mode=mode,
                        n=n,
                        s=s,
                        alloc_ms=10 * heap_ms,
                        free_ms=1.0,
                        alloc_free_ms=11 * heap_ms,
                    )
                )
    for op in ("empty", "bump"):
        for mode in ("converged", "divergent"):
            rows.append(dict(kind="floor", op=op, mode=mode, n=1048576, alloc_ms=0.01 if op == "empty" else 0.05))
    for s, frac in (("4096", 0.99), ("mixed", 0.93)):
        rows.append(dict(kind="exhaustion", s=s, usable_fraction=frac, heap_bytes_mapped=1 << 30))
    rows.append(dict(kind="churn", n=1048576, s="mixed", rounds=10, held_over_live=1.1))
    rows.append(dict(kind="largest", bytes=16 << 30, heap_bytes_mapped=16 << 30))
    if free_all:
        rows.append(dict(kind="free_all", n=1048576, s="16", largest_bytes=15 << 20, fresh_largest_bytes=16 << 20))
    return {"rows": rows}


def _targets(tmp_path, raw, monkeypatch):
    pytest.importorskip("numpy")
    from gpudyn.bench import heap
    from gpudyn.bench._common import Context

    ctx = Context("heap", str(tmp_path), False, {"name": "test GPU"})
    ctx.run_program = lambda program, args=None: raw
    monkeypatch.setattr(heap, "_plots", lambda *a, **k: None)  # no matplotlib needed
    heap.run(ctx)
    return {t["name"]: t for t in ctx.targets}


def test_targets_are_the_users_comparisons(tmp_path, monkeypatch):
    t = _targets(tmp_path, _raw(), monkeypatch)
    assert not any("divergent / converged" in k for k in t)
    assert "heap speedup over CUDA malloc, worst point of the matrix" not in t
    conv = [k for k in t if k.startswith("heap malloc 64K") and k.endswith("converged (ms)")]
    assert len(conv) == 4 and all(t[k]["met"] for k in conv)  # 0.007 ms <= 0.008 / 0.009 / 0.009 / 0.023
    assert t["heap malloc 1M x 4096 B converged (ms)"]["met"]  # 0.07 <= 0.08
    m = t["heap malloc 1M x mixed 16-4096 B converged (ms)"]
    assert m["value"] == pytest.approx(0.3) and not m["met"]  # goal 0.28
    d = t["heap malloc 1M threads divergent, worst S (ms)"]
    assert d["value"] == pytest.approx(0.4) and d["met"] and d["floor_divergent_ms"] == pytest.approx(0.05)
    assert t["heap free 1M threads converged, worst S (ms)"]["met"]  # 0.02 <= 0.025
    assert t["heap usable fraction at exhaustion, 4096 B"]["met"]  # 0.99 >= 0.98
    assert not t["heap usable fraction at exhaustion, mixed 16-4096 B"]["met"]  # 0.93 < 0.95
    assert t["heap bytes held / bytes live after churn, worst S"]["met"]  # 1.1 <= 1.2
    f = t["heap largest allocation after free-all of small blocks / a fresh heap's"]
    assert f["value"] == pytest.approx(15 / 16) and f["met"]
    s = t["heap speedup over CUDA malloc, worst measured point of the matrix"]
    assert s["value"] == pytest.approx(10.0) and s["met"]


def test_missing_measurements_are_not_met(tmp_path, monkeypatch):
    t = _targets(tmp_path, _raw(free_all=False, conv64=0.02, div=0.6), monkeypatch)
    f = t["heap largest allocation after free-all of small blocks / a fresh heap's"]
    assert f["value"] == -1.0 and not f["met"] and "not measured" in f["where"]
    assert not t["heap malloc 64K x 16 B converged (ms)"]["met"]  # 0.02 > 0.008
    assert not t["heap malloc 1M threads divergent, worst S (ms)"]["met"]  # 0.6 > 0.45
