"""The rw_heap benchmark driver's computations on synthetic rows (no GPU): Fig. 13's
free-percentage axis beside CUDA malloc, the hash join against DO (Figs. 17, 18)
with the bytes it holds, the queue comparison of Fig. 11, the targets that say
whether every output was checked, and the figures they draw."""

import os

import pytest
from gpudyn.bench import rw_heap
from gpudyn.bench._common import Context

DEVICE = {"name": "NVIDIA H200", "runtime_version": 13000, "driver_version": 12080}


def _f13_free(size, N, pct, ms, *, held=None, req=None, verified=True, skipped=False):
    r = {
        "figure": "fig13_free",
        "allocator": "rw_malloc",
        "size": size,
        "N": N,
        "free_pct": pct,
        "free_pct_measured": pct * 0.999,
        "pages_needed": 100,
        "pages_free": 1000,
    }
    if skipped:
        r["skipped"] = True
        return r
    r.update(
        {
            "ms": ms,
            "failed": 0 if verified else 3,
            "bytes_requested": req or N * 16,
            "bytes_held": held if held is not None else N * 16,
            "pool_bytes": 1 << 34,
            "verified": verified,
        }
    )
    return r


def _join(figure, alloc, ms, *, tuples=4194304, page_size=64, build=0.5, pages=1000, verified=True, missing=0):
    return {
        "figure": figure,
        "allocator": alloc,
        "tuples": tuples,
        "page_size": page_size,
        "pages_total": 1 << 27,
        "ms": ms,
        "build_ms": build,
        "total_ms": ms + build,
        "matches": 800,
        "output_tuples": 800 - missing,
        "pages_used": pages,
        "bytes_held": pages * page_size,
        "output_bytes": 6400,
        "pool_bytes": 1 << 33,
        "failed": 0,
        "invalid": 0,
        "duplicate": 0,
        "missing": missing,
        "wrong_count_runs": 0,
        "pages_leaked": 0,
        "verified": verified,
    }


FIG13 = [
    {"figure": "fig13", "allocator": "rw_malloc", "scenario": "16", "N": 65536, "ms": 0.007, "failed": 0},
    {"figure": "fig13", "allocator": "cuda_malloc", "scenario": "16", "N": 65536, "ms": 7.0, "failed": 0},
    {"figure": "fig13", "allocator": "rw_malloc", "scenario": "4096", "N": 65536, "ms": 0.07, "failed": 0},
    {"figure": "fig13", "allocator": "cuda_malloc", "scenario": "4096", "N": 65536, "ms": 14.0, "failed": 0},
]


def test_fig13_free_summary_puts_cuda_malloc_beside_and_drops_skipped_points():
    rows = FIG13 + [
        _f13_free("16", 65536, 100, 0.007, held=65536 * 32, req=65536 * 16),
        _f13_free("16", 65536, 1, 0.014),
        _f13_free("4096", 65536, 1, None, skipped=True),
        _f13_free("4096", 65536, 50, 0.1),
        _f13_free("mixed_16_4096", 16384, 10, 0.05),
    ]
    s = rw_heap.fig13_free_summary(rows)
    assert [(x["size"], x["N"], x["free_pct"]) for x in s] == [
        ("16", 65536, 100),
        ("16", 65536, 1),
        ("4096", 65536, 50),
        ("mixed_16_4096", 16384, 10),
    ]
    first = s[0]
    assert first["cuda_malloc_ms"] == 7.0
    assert first["speedup_over_cuda_malloc"] == pytest.approx(1000.0)
    assert first["held_over_requested"] == pytest.approx(2.0)
    assert s[2]["speedup_over_cuda_malloc"] == pytest.approx(140.0)
    # No CUDA malloc row at that size and N: None (strict JSON), not an error.
    assert s[3]["cuda_malloc_ms"] is None and s[3]["speedup_over_cuda_malloc"] is None
    md = rw_heap.fig13_free_markdown(s)
    assert "| 16 | 65536 | 100 (99.9) |" in md and md.count("\n") == 2 + len(s)
    assert rw_heap.fig13_free_markdown([]) == ""


def test_join_summary_measures_against_do_and_cuda_malloc():
    rows = [
        _join("fig17", "DO", 1.0, tuples=1 << 20, build=1.0, pages=100),
        _join("fig17", "CoRW", 0.5, tuples=1 << 20, build=1.0, pages=100),
        _join("fig17", "RW", 2.0, tuples=1 << 20, build=1.0, pages=100),
        _join("fig17", "cuda_malloc", 99.0, tuples=1 << 20, build=1.0, pages=100),
        _join("fig18", "DO", 2.0, page_size=2048, build=0.0, pages=50),
        _join("fig18", "RW-BM", 1.0, page_size=2048, build=0.0, pages=50),
        _join("fig18", "DO", 4.0, page_size=32, build=0.0, pages=400),
    ]
    s = rw_heap.join_summary(rows)
    by = {(x["figure"], x["allocator"], x["page_size"]): x for x in s}
    co = by[("fig17", "CoRW", 64)]
    assert co["ms_over_do"] == pytest.approx(0.5)
    assert co["speedup_over_do"] == pytest.approx(2.0 / 1.5)  # totals: build + probe
    assert co["speedup_over_cuda_malloc"] == pytest.approx(100.0 / 1.5)
    assert by[("fig17", "RW", 64)]["ms_over_do"] == pytest.approx(2.0)
    bm = by[("fig18", "RW-BM", 2048)]
    assert bm["speedup_over_do"] == pytest.approx(2.0)
    assert bm["speedup_over_cuda_malloc"] is None  # not run in fig18
    assert bm["held_over_output"] == pytest.approx(50 * 2048 / 6400)
    # Sorted by figure, axis, then DO, RW, RW-BM, CoRW, cuda_malloc.
    assert [x["allocator"] for x in s if x["figure"] == "fig17"] == ["DO", "RW", "CoRW", "cuda_malloc"]
    assert [x["page_size"] for x in s if x["figure"] == "fig18"] == [32, 2048, 2048]
    md = rw_heap.join_markdown(rows)
    assert "Ouroboros" in md and "not available" in md
    assert "| 2048 | RW-BM | 1 | 1 | 0.5 | 2 |" in md
    lines = rw_heap._join_table_lines(rows)
    assert lines[0].startswith("| hash-join probe 1048576 tuples, RW |") and "2x DO's time" in lines[0]
    assert len(lines) == 3  # every source but DO


def test_join_targets_count_runs_whose_output_is_wrong(tmp_path):
    ctx = Context("rw_heap", str(tmp_path), True, DEVICE)
    rows = [
        _join("fig17", "DO", 1.0, tuples=16384),
        _join("fig17", "CoRW", 0.9, tuples=16384),
        _join("fig18", "RW", 1.0, missing=2, verified=False),
    ]
    out = rw_heap._join_targets(ctx, rows)
    assert out == {"missing": 2, "errors": 2}
    t = {x["name"]: x for x in ctx.targets}
    assert t["Hash-join probe, CoRW time / DO time, 16384 tuples"]["value"] == pytest.approx(0.9)
    wrong = t["Hash-join runs whose output differs from the host reference (fig17, fig18)"]
    assert wrong["value"] == 1 and not wrong["met"]
    ctx2 = Context("rw_heap", str(tmp_path), True, DEVICE)
    assert rw_heap._join_targets(ctx2, []) == {"missing": 0, "errors": 0} and ctx2.targets == []


def test_fig13_free_target_counts_unverified_points(tmp_path):
    ctx = Context("rw_heap", str(tmp_path), True, DEVICE)
    rw_heap._fig13_free_targets(
        ctx,
        [
            _f13_free("16", 1024, 50, 0.01),
            _f13_free("256", 1024, 1, 0.02, verified=False),
            _f13_free("4096", 1024, 1, None, skipped=True),
        ],
    )
    (t,) = ctx.targets
    assert t["value"] == 1 and not t["met"]


def test_plots_draw_fig13_fig17_fig18(tmp_path):
    ctx = Context("rw_heap", str(tmp_path), True, DEVICE)
    plt = ctx.pyplot()
    if plt is None:
        pytest.skip("matplotlib is not installed")
    rows = FIG13 + [_f13_free("16", n, pct, 0.01 * pct) for n in (16384, 65536) for pct in (100, 1)]
    rows += [_join("fig17", a, ms, tuples=n) for n in (16384, 1 << 20) for a, ms in (("DO", 1.0), ("CoRW", 0.8))]
    rows += [_join("fig18", a, ms, page_size=s) for s in (32, 2048) for a, ms in (("DO", 1.0), ("RW", 1.2))]
    rw_heap._plot_fig13(ctx, plt, FIG13, rw_heap.fig13_free_summary(rows))
    rw_heap._plot_join(ctx, plt, rows)
    assert sorted(ctx.plots) == ["rw_heap_fig13.png", "rw_heap_fig17.png", "rw_heap_fig18.png"]
    assert all(os.path.getsize(tmp_path / p) > 1000 for p in ctx.plots)
    assert "DO" in ctx.metrics_shown
    # Without the fig13 rows (--only fig13_free) the free-% panels still draw.
    ctx2 = Context("rw_heap", str(tmp_path / "b"), True, DEVICE)
    rw_heap._plot_fig13(ctx2, plt, [], rw_heap.fig13_free_summary(rows))
    assert ctx2.plots == ["rw_heap_fig13.png"]
