"""`gpudyn bench warp_heap` (issue 14, item 1): the paper's configuration beside the
default, Fig. 4 flatness over every S, bytes held beside every time.

Host tests: the driver's targets, Fig. 4 flatness figures, table and plots come out
of a hand-made raw result shaped like the program's (numbers written here, so the
arithmetic is checked); a run of one section (--only) and failed self-checks are
reported, not crashed on.  GPU test: the program's --quick --only fig4 JSON has the
fields the host tests feed the driver, and its bytes-held self-checks pass."""

import json
import os
import subprocess

import pytest

PROGRAM = "gpudyn_bench_warp_heap"
SB = 32768
ALLOCS = ("warp_heap", "warp_heap_cuda_malloc", "warp_heap_no_superblocks", "warp_heap_page_heap", "cuda_malloc")
FIG4_S = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)
# Fig. 4 ns per allocation, by allocator: the default is flat to 1 KiB (1.5x), then grows;
# the paper's configuration grows from 128 B and passes CUDA malloc from 2048 B on.
FIG4_NS = {
    "warp_heap": (30, 30, 31, 33, 38, 42, 45, 75, 110, 190, 400, 800, 900),
    "warp_heap_cuda_malloc": (60, 60, 61, 85, 150, 320, 800, 2400, 8000, 29000, 60000, 120000, 5000),
    "warp_heap_no_superblocks": (630, 880, 470, 490, 505, 590, 820, 480, 515, 540, 600, 700, 800),
    "warp_heap_page_heap": (32, 32, 32, 35, 43, 54, 81, 148, 270, 510, 1000, 2000, 3000),
    "cuda_malloc": (1900, 1900, 1900, 3000, 7400, 23000, 195000, 1900, 3000, 7100, 9000, 9500, 9800),
}
MEASURE = {
    "warp_heap": "backing",
    "warp_heap_page_heap": "backing",
    "warp_heap_cuda_malloc": "reserved",
    "warp_heap_no_superblocks": "reserved",
    "cuda_malloc": "requested",
}


def _row(figure, a, threads, n, s, ms, held_factor=2.0, block=256):
    req = threads * n * ((s + 15) // 16 * 16)
    return {
        "figure": figure,
        "allocator": a,
        "threads": threads,
        "n": n,
        "s": s,
        "block": block,
        "ms": ms,
        "ns_per_alloc": ms * 1e6 / (threads * n),
        "failed": 0,
        "requested_bytes": req,
        "reserved_bytes": 0 if a == "cuda_malloc" else int(req * held_factor),
        "backing_taken_bytes": int(req * held_factor) if MEASURE[a] == "backing" else None,
        "held_bytes": req if a == "cuda_malloc" else int(req * held_factor),
        "held_measure": MEASURE[a],
    }


def _raw(sections=("target", "fig4", "fig5", "fig6")):
    rows = []
    if "target" in sections:
        for a, ms in zip(ALLOCS, (0.064, 10.96, 39.6, 0.062, 363.1)):
            rows.append(_row("target", a, 65536, 16, 16, ms, held_factor=1.5))
    if "fig4" in sections:
        for a in ALLOCS:
            for s, ns in zip(FIG4_S, FIG4_NS[a]):
                rows.append(_row("fig4", a, 64, 16, s, ns * 64 * 16 / 1e6, block=64))
    if "fig5" in sections:
        for a, base in (
            ("warp_heap", 0.01),
            ("warp_heap_cuda_malloc", 0.5),
            ("warp_heap_no_superblocks", 2.0),
            ("cuda_malloc", 8.0),
        ):
            for x in (1, 64, 4096):
                for n, s in ((16, 16), (64, 64)):
                    rows.append(_row("fig5", a, x, n, s, base * x * n / 1000))
    if "fig6" in sections:
        for a, base in (("warp_heap", 0.02), ("warp_heap_cuda_malloc", 1.0)):
            for g in (1, 8, 64):
                rows.append(_row("fig6", a, g * 1024, 16, 16, base * g, block=1024))
    return {
        "superblock_bytes": SB,
        "min_block_bytes": 16,
        "list_capacity": 126,
        "arena_bytes": 8 << 30,
        "arena_header_slots": 20480,
        "max_superblock_run": 8,
        "page_size": 36864,
        "page_count": 65536,
        "device_heap_bytes": 6 << 30,
        "repeats": 5,
        "baseline_cap_allocs": 1 << 21,
        "baseline_slow_ms": 400,
        "quick": False,
        "only": None,
        "verified": True,
        "failures": [],
        "wall_seconds": 80.0,
        "rows": rows,
    }


def _run_module(tmp_path, raw, plots=False):
    from gpudyn.bench import warp_heap
    from gpudyn.bench._common import Context

    ctx = Context("warp_heap", str(tmp_path), False, {"name": "test GPU"})
    ctx.run_program = lambda program, args=None: raw if program == PROGRAM else pytest.fail(program)
    if not plots:
        ctx.pyplot = lambda: None
    return ctx, warp_heap.run(ctx)


def test_targets_are_unchanged_and_computed_from_the_default(tmp_path):
    ctx, result = _run_module(tmp_path, _raw())
    json.dumps(result, allow_nan=False)
    t = {x["name"]: x for x in ctx.targets}
    assert list(t) == [
        "1M x 16 B: speedup over CUDA malloc",
        "1M x 16 B: warp heap time",
        "Fig. 4: time per allocation max/min over S <= 1024 B",
    ]
    assert t["1M x 16 B: speedup over CUDA malloc"]["value"] == pytest.approx(363.1 / 0.064)
    assert t["1M x 16 B: warp heap time"]["value"] == pytest.approx(0.064)
    assert t["Fig. 4: time per allocation max/min over S <= 1024 B"]["value"] == pytest.approx(45 / 30)


def test_fig4_flatness_over_every_s_is_information_per_configuration(tmp_path):
    _, result = _run_module(tmp_path, _raw())
    flat = result["fig4_flatness"]
    assert set(flat) == set(ALLOCS)
    d = flat["warp_heap"]
    assert d["ratio_packed"] == pytest.approx(45 / 30)
    assert d["ratio_all"] == pytest.approx(900 / 30)
    assert d["flat_up_to"] == 1024  # 75 ns at 2048 B is 2.5x the 30 ns minimum
    assert d["s_min"] == 16 and d["s_max"] == 65536
    p = flat["warp_heap_cuda_malloc"]
    assert p["ratio_all"] == pytest.approx(120000 / 60)
    assert p["flat_up_to"] == 128  # 150 ns at 256 B > 2 x 60
    # Slower than CUDA malloc from 2048 B to 32 KiB, faster again on the large path (64 KiB).
    assert p["slower_than_cuda_malloc_at"] == [(2048, 32768)]
    assert flat["warp_heap_no_superblocks"]["slower_than_cuda_malloc_at"] == []
    assert d["slower_than_cuda_malloc_at"] == [] and flat["cuda_malloc"]["slower_than_cuda_malloc_at"] == []
    assert d["held_over_requested_min_s"] == pytest.approx(2.0)


def test_slower_than_baseline_at_gives_runs_of_consecutive_s():
    from gpudyn.bench.warp_heap import fmt_runs, slower_than_baseline_at

    base = [{"s": s, "ms": 1.0} for s in (16, 32, 64, 128, 256)]
    rows = [
        {"s": 16, "ms": 2.0},
        {"s": 32, "ms": 0.5},
        {"s": 64, "ms": 1.5},
        {"s": 128, "ms": 3.0},
        {"s": 256, "ms": 0.9},
        {"s": 512, "ms": 9.0},
    ]  # 512: no baseline there
    assert slower_than_baseline_at(rows, base) == [(16, 16), (64, 128)]
    assert fmt_runs(slower_than_baseline_at(rows, base)) == "16 B, 64-128 B"
    assert slower_than_baseline_at([dict(r, ms=0.1) for r in rows], base) == []
    assert fmt_runs([]) == "never"


def test_flatness_of_no_rows_is_empty():
    from gpudyn.bench.warp_heap import flatness

    assert flatness([], SB)["ratio_all"] is None


def test_table_shows_the_paper_configuration_bytes_held_and_why_the_default_differs(tmp_path):
    _, result = _run_module(tmp_path, _raw())
    table = result["table"]
    lines = table.splitlines()
    head = lines[0]
    assert "time / default's" in head and "speedup over CUDA malloc" in head and "bytes held" in head
    assert "held / requested" in head
    paper = next(ln for ln in lines if ln.startswith("| warp heap on CUDA malloc (paper) | 10.96 "))
    assert f"| {10.96 / 0.064:.4g} | {363.1 / 10.96:.4g} |" in paper and "| reserved |" in paper
    default = next(ln for ln in lines if ln.startswith("| warp heap, arena (default) |"))
    assert f"| 1 | {363.1 / 0.064:.4g} |" in default and "| 1.5 |" in default and "| backing |" in default
    assert "| 24 MiB |" in default  # 65,536 x 16 x 16 B x 1.5 held
    why = [ln for ln in lines if ln.startswith("Why the default differs from the paper")]
    assert len(why) == 1 and why[0].replace("Fig. ", "Fig ").count(". ") == 0  # one sentence
    assert "10.96 ms" in why[0] and "0.064 ms" in why[0] and "8 GiB" in why[0]
    assert "slower than plain CUDA malloc in Fig. 4 at S = 2048-32768 B" in why[0]
    # The Fig. 4 flatness table: every configuration, both ratios, where it stops being flat.
    flat_line = next(ln for ln in lines if ln.startswith("| warp heap, arena (default) | 1.5 | 30 | 1024 B |"))
    assert flat_line
    assert any(ln.startswith("| CUDA malloc |") and "| - |" in ln for ln in lines)
    assert any(
        ln.startswith("| warp heap on CUDA malloc (paper) | 13.3 | 2000 | 128 B | 2048-32768 B |") for ln in lines
    )
    assert any(ln.startswith("Bytes held, 'requested'") for ln in lines)
    assert lines[-1].startswith("Self-checks (") and lines[-1].endswith(": all passed.")
    assert result["verified"] is True and result["failures"] == []


def test_one_section_alone_gives_what_it_can(tmp_path):
    ctx, result = _run_module(tmp_path, _raw(sections=("fig4",)))
    assert [x["name"] for x in ctx.targets] == ["Fig. 4: time per allocation max/min over S <= 1024 B"]
    assert "Why the default differs from the paper" in result["table"]
    ctx, result = _run_module(tmp_path, _raw(sections=("fig6",)))
    assert ctx.targets == [] and result["fig4_flatness"] == {}


def test_rows_without_bytes_held_still_run(tmp_path):
    raw = _raw()
    for r in raw["rows"]:
        for k in ("requested_bytes", "reserved_bytes", "backing_taken_bytes", "held_bytes", "held_measure"):
            r.pop(k)
    del raw["verified"], raw["failures"]
    _, result = _run_module(tmp_path, raw)
    assert "| n/a | n/a | n/a |" in result["table"]


def test_failed_self_checks_are_reported(tmp_path):
    raw = _raw()
    raw["verified"] = False
    raw["failures"] = ["fig4 X=64 N=16 S=16 warp_heap: held 1 bytes < requested 16384"]
    _, result = _run_module(tmp_path, raw)
    assert result["verified"] is False
    assert "given back): 1 failed: fig4 X=64" in result["table"].splitlines()[-1]


def test_figures_from_a_raw_result(tmp_path):
    pytest.importorskip("matplotlib")
    ctx, _ = _run_module(tmp_path, _raw(), plots=True)
    assert ctx.plots == [
        "warp_heap_fig4.png",
        "warp_heap_fig4_flatness.png",
        "warp_heap_fig5.png",
        "warp_heap_fig6.png",
    ]
    for name in ctx.plots:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _program():
    from gpudyn.bench._common import Context

    try:
        return Context("warp_heap", ".", False, {}).find_program(PROGRAM)
    except FileNotFoundError:
        return None


def test_program_refuses_unknown_sections():
    prog = _program()
    if prog is None:
        pytest.skip(f"{PROGRAM} is not built")
    p = subprocess.run([prog, "--out", os.devnull, "--only", "fig7"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--only" in p.stderr


@pytest.mark.gpu
def test_program_json_has_what_the_driver_reads(tmp_path):
    prog = _program()
    if prog is None:
        pytest.skip(f"{PROGRAM} is not built")
    out = tmp_path / "raw.json"
    subprocess.run([prog, "--out", str(out), "--quick", "--only", "fig4"], check=True, timeout=300)
    raw = json.loads(out.read_text())
    assert raw["verified"] is True, raw["failures"]
    assert raw["only"] == "fig4" and raw["quick"] is True
    want = set(_raw()["rows"][0])
    for r in raw["rows"]:
        assert set(r) == want, r
        assert r["failed"] == 0 and r["held_bytes"] >= r["requested_bytes"] > 0
    assert {r["allocator"] for r in raw["rows"]} == set(ALLOCS)
    assert max(r["s"] for r in raw["rows"]) > raw["superblock_bytes"]  # past the superblock
