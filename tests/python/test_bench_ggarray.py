"""`gpudyn bench ggarray` (issue 14, item 1): the driver on the host, fed a raw
result shaped like gpudyn_bench_ggarray's JSON (hand-made, so the arithmetic is
checked against numbers written here): the static baseline is the fastest
allocation, targets and their values, Fig. 6 rows (new and older layout), Fig. 3
model beside measured bytes, bytes held in every table row, the four figures.
GPU test: `gpudyn bench ggarray --quick` runs clean with every check passed."""

import copy
import json
import os
import subprocess
import sys

import pytest

PROGRAM = "gpudyn_bench_ggarray"
SIZES = [1e6 * 2**s for s in range(11)]
FINAL = int(SIZES[-1])
ALGOS = ("atomic", "warp_scan", "tensor_scan", "per_element_atomic", "per_element_atomic_as_compiled")
TARGET_NAMES = [
    "GGArray512 insert / static insert",
    "GGArray512 read/write (spans) / static read/write",
    "static baseline read/write / VMM read/write (same kernel)",
    "GGArray512 grow / VMM grow (last doubling, median)",
    "flatten bandwidth / cudaMemcpy D2D bandwidth",
    "static warp-scan insert bandwidth / plain write bandwidth",
    "read/write did all 30 passes on every structure (1 = yes)",
    "GGArray bytes held / (2 x element bytes + first buckets + 2 MiB), worst doubling",
    "Fig. 4: every inserted element present exactly once, host check (1 = yes)",
    "baselines: every allocation's read/write verified (1 = yes)",
    "Fig. 6: every run's values verified (1 = yes)",
    "Fig. 6: GGArray (flattened) / VMM speedup, largest size and work",
]


def _theory():
    from gpudyn.bench import theory

    return theory


def _fig5_row(rw_last, insert_last, held, allocation, grow=0.0, **extra):
    n = len(SIZES)
    row = {
        "grow_ms": [grow] * n,
        "insert_ms": [0.01] * (n - 1) + [insert_last],
        "rw_ms": [1.0] * (n - 1) + [rw_last],
        "rw_final_samples_ms": [rw_last] * 3,
        "allocated_bytes": held[-1],
        "bytes_held": held,
        "elements": [int(s) for s in SIZES],
        "element_bytes": FINAL * 4,
        "allocation": allocation,
        "rw_all_passes_verified": True,
    }
    row.update(extra)
    return row


def _raw():
    """A raw result shaped like gpudyn_bench_ggarray's full run."""
    th = _theory()
    mod = th.memory_vs_elements(SIZES, FINAL, num_lfvectors=(32, 512))
    fig5 = {
        "static_cudaMallocAsync": _fig5_row(69.0, 0.55, [FINAL * 4] * 11, "cudaMallocAsync (...)"),
        "static_cudaMalloc": _fig5_row(63.0, 0.52, [FINAL * 4] * 11, "cudaMalloc"),
        "static_cuMemCreate": _fig5_row(62.0, 0.50, [th.vmm_bytes(FINAL)] * 11, "one cuMemCreate ..."),
        "vmm": _fig5_row(62.4, 0.51, mod["vmm"], "cuMemCreate + cuMemMap per reserve", grow=0.9),
        "ggarray32": _fig5_row(
            61.9, 0.69, mod["ggarray32"], "GGArray buckets", grow=0.3, num_lfvectors=32, first_bucket_elements=1024
        ),
        "ggarray512": _fig5_row(
            62.4, 0.57, mod["ggarray512"], "GGArray buckets", grow=0.16, num_lfvectors=512, first_bucket_elements=1024
        ),
    }
    f4 = {a: [0.01] * 10 + [ms] for a, ms in zip(ALGOS, (2.1, 0.5, 0.77, 300.0, 9.0))}
    f4.update({"plain_write": [0.01] * 10 + [0.56], "plain_write_vec4": [0.01] * 10 + [0.48]})
    once = {
        a: {"ok": True, "elements": FINAL, "size_counter": FINAL, "out_of_range": 0, "duplicates": 0, "missing": 0}
        for a in ALGOS
    }
    rows6 = []
    for n in (125_000_000, 250_000_000, 500_000_000, 1_000_000_000):
        for w in (1, 10, 100, 1000):
            g, v, i = 1.4 + w * n / 5e8, 0.95 + w * n / 5e8, 1.2 + w * n / 4.4e8
            rows6.append(
                {
                    "final_size": n,
                    "work_passes": w,
                    "repeats": 1 if w * n * 8 > 2e12 else 3,
                    "ggarray_ms": g,
                    "ggarray_samples_ms": [g],
                    "ggarray_bytes_held": 3 * 4 * n,
                    "vmm_ms": v,
                    "vmm_samples_ms": [v],
                    "vmm_bytes_held": 4 * n,
                    "ggarray_inplace_ms": i,
                    "ggarray_inplace_samples_ms": [i],
                    "ggarray_inplace_bytes_held": 2 * 4 * n,
                    "ggarray_bucket_bytes": 2 * 4 * n,
                    "flat_bytes": 4 * n,
                    "speedup_ggarray_over_vmm": v / g,
                    "speedup_ggarray_inplace_over_vmm": v / i,
                    "verified": True,
                }
            )
    base_rows = [
        {
            "name": name,
            "allocation": name,
            "shift_bytes": shift,
            "address_mod_2MiB": mod2,
            "bytes_held": FINAL * 4,
            "rw_ms": ms,
            "rw_samples_ms": [ms] * 5,
            "verified": True,
        }
        for name, shift, mod2, ms in (
            ("static_cudaMallocAsync", 0, 1024, 69.0),
            ("static_cudaMalloc", 0, 0, 62.5),
            ("static_cudaMalloc_shifted", 1024, 1024, 68.8),
            ("static_cuMemCreate", 0, 0, 62.1),
            ("vmm", 0, 0, 62.3),
        )
    ]
    return {
        "quick": False,
        "rw_passes": 30,
        "sizes": SIZES,
        "fig4_insert_ms": f4,
        "fig4_insert_repeats": {a: [5] * 11 for a in ALGOS},
        "fig4_notes": {"allocation": "cudaMalloc"},
        "fig4_bytes_held": {"static": FINAL * 4, "plain_write": (FINAL // 2 + 1_000_000) * 4},
        "fig4_verified": dict(once, all=True, check="host", verify_seconds=3.0),
        "fig4_seconds": 9.0,
        "grow_last": {
            "vmm_ms": [0.12] * 11,
            "ggarray512_ms": [0.11] * 11,
            "vmm_median_ms": [0.12],
            "ggarray512_median_ms": [0.11],
            "vmm_bytes_held": th.vmm_bytes(FINAL),
            "ggarray512_bytes_held": mod["ggarray512"][-1],
        },
        "fig5": fig5,
        "baselines": {"elements": FINAL, "repeats": 5, "async_offset_in_2MiB": 1024, "rows": base_rows},
        "fig4_lfvectors": {
            "lfvectors": [32, 512, 2048],
            "grow_insert_ms": [0.87, 0.74, 0.74],
            "rw_b_ms": [64.0, 62.9, 68.4],
            "rw_g_ms": [251.0, 248.0, 248.0],
            "bytes_held": [mod["ggarray32"][-1], mod["ggarray512"][-1], mod["ggarray512"][-1]],
        },
        "flatten": {
            "elements": FINAL // 2,
            "flatten_ms": 1.17,
            "memcpy_ms": 1.05,
            "flatten_bytes_held": 6 * FINAL,
            "ggarray_bucket_bytes": 4 * FINAL,
            "memcpy_bytes_held": 4 * FINAL,
        },
        "fig6": {
            "final_sizes": [125_000_000, 250_000_000, 500_000_000, 1_000_000_000],
            "work_passes": [1, 10, 100, 1000],
            "insert_doublings": 5,
            "repeats": 3,
            "single_run_above_work_bytes": 2e12,
            "verified": True,
            "seconds": 40.0,
            "rows": rows6,
        },
        "seconds": 70.0,
    }


def _run_module(tmp_path, raw, plots=False):
    from gpudyn.bench import ggarray
    from gpudyn.bench._common import Context

    ctx = Context("ggarray", str(tmp_path), False, {"name": "test GPU"})
    ctx.run_program = lambda program, args=None: raw if program == PROGRAM else pytest.fail(program)
    if not plots:
        ctx.pyplot = lambda: None
    return ctx, ggarray.run(ctx)


def test_targets_and_baseline_from_a_raw_result(tmp_path):
    ctx, result = _run_module(tmp_path, _raw())
    json.dumps(result, allow_nan=False)
    assert [t["name"] for t in ctx.targets] == TARGET_NAMES
    t = {x["name"]: x for x in ctx.targets}
    base = result["static_baseline"]
    # baselines section: cuMemCreate 62.1 is the fastest static allocation (the shifted one is diagnostic only)
    assert base["row"] == "static_cuMemCreate" and "baselines section" in base["chosen_by"]
    assert set(base["rw_ms"]) == {"static_cudaMalloc", "static_cudaMallocAsync", "static_cuMemCreate"}
    assert t["GGArray512 insert / static insert"]["value"] == pytest.approx(0.57 / 0.50)
    assert t["GGArray512 read/write (spans) / static read/write"]["value"] == pytest.approx(62.4 / 62.0)
    assert t["static baseline read/write / VMM read/write (same kernel)"]["value"] == pytest.approx(62.0 / 62.4)
    assert t["GGArray512 grow / VMM grow (last doubling, median)"]["value"] == pytest.approx(0.11 / 0.12)
    assert t["static warp-scan insert bandwidth / plain write bandwidth"]["value"] == pytest.approx(0.48 / 0.5)
    gb = t["GGArray bytes held / (2 x element bytes + first buckets + 2 MiB), worst doubling"]
    assert 0 < gb["value"] <= 1.0 and gb["met"] and gb["where"].startswith("ggarray")
    for name in TARGET_NAMES[8:11]:
        assert t[name]["value"] == 1.0 and t[name]["met"], name
    top = t["Fig. 6: GGArray (flattened) / VMM speedup, largest size and work"]
    assert top["where"] == "1000000000 elements, 1000 passes"
    assert top["value"] == pytest.approx((0.95 + 2000) / (1.4 + 2000))
    # Table II keeps the old "static" name for the baseline, with the row it is
    table2 = result["table2_last_doubling_ms"]
    assert table2["static"]["row"] == "static_cuMemCreate" and table2["static"]["rw_ms"] == 62.0
    assert table2["ggarray512"]["bytes_held"] == _raw()["fig5"]["ggarray512"]["bytes_held"][-1]


def test_baseline_without_the_baselines_section_is_the_fastest_fig5_static(tmp_path):
    raw = _raw()
    del raw["baselines"]
    ctx, result = _run_module(tmp_path, raw)
    assert result["static_baseline"]["row"] == "static_cuMemCreate"  # 62.0 < 63.0 < 69.0
    assert "Fig. 5" in result["static_baseline"]["chosen_by"]
    raw["fig5"]["static_cudaMalloc"]["rw_ms"][-1] = 61.0
    _, result = _run_module(tmp_path, raw)
    assert result["static_baseline"] == {
        "row": "static_cudaMalloc",
        "allocation": "cudaMalloc",
        "chosen_by": "fastest read/write at Fig. 5's last doubling",
        "rw_ms": {"static_cudaMalloc": 61.0, "static_cudaMallocAsync": 69.0, "static_cuMemCreate": 62.0},
    }
    assert "baselines: every allocation's read/write verified (1 = yes)" not in [x["name"] for x in ctx.targets]


def test_an_older_result_with_one_static_row_still_runs(tmp_path):
    raw = _raw()
    f5 = raw["fig5"]
    f5["static"] = f5.pop("static_cudaMallocAsync")
    for k in ("static_cudaMalloc", "static_cuMemCreate"):
        del f5[k]
    for v in f5.values():
        for k in ("bytes_held", "elements", "allocation", "rw_final_samples_ms"):
            v.pop(k, None)
    del raw["baselines"], raw["fig4_verified"]
    raw["fig6"] = {
        "final_size": 134217728,
        "work_passes": [1, 10],
        "ggarray_ms": [1.4, 4.2],
        "vmm_ms": [0.9, 3.7],
        "ggarray_inplace_ms": [1.2, 4.1],
        "speedup_ggarray_over_vmm": [0.64, 0.88],
        "speedup_ggarray_inplace_over_vmm": [0.75, 0.9],
    }
    ctx, result = _run_module(tmp_path, raw)
    assert result["static_baseline"]["row"] == "static"
    t = {x["name"]: x for x in ctx.targets}
    assert t["GGArray512 read/write (spans) / static read/write"]["value"] == pytest.approx(62.4 / 69.0)
    assert t["Fig. 6: GGArray (flattened) / VMM speedup, largest size and work"]["value"] == pytest.approx(0.88)
    assert "Fig. 6: every run's values verified (1 = yes)" not in t
    assert "static" in result["table2_last_doubling_ms"]


def test_fig6_rows_convert_the_older_layout():
    from gpudyn.bench.ggarray import fig6_rows

    old = {
        "final_size": 8,
        "work_passes": [1, 10],
        "ggarray_ms": [2.0, 3.0],
        "vmm_ms": [1.0, 3.0],
        "speedup_ggarray_over_vmm": [0.5, 1.0],
    }
    assert fig6_rows(old) == [
        {"final_size": 8, "work_passes": 1, "ggarray_ms": 2.0, "vmm_ms": 1.0, "speedup_ggarray_over_vmm": 0.5},
        {"final_size": 8, "work_passes": 10, "ggarray_ms": 3.0, "vmm_ms": 3.0, "speedup_ggarray_over_vmm": 1.0},
    ]
    new = {"rows": [{"final_size": 8, "work_passes": 1}]}
    assert fig6_rows(new) == new["rows"]


def test_failed_checks_miss_their_targets_and_say_where(tmp_path):
    raw = _raw()
    raw["fig4_verified"]["per_element_atomic"].update(ok=False, duplicates=3, missing=3)
    raw["fig4_verified"]["all"] = False
    raw["fig6"]["rows"][5]["verified"] = False
    raw["baselines"]["rows"][2]["verified"] = False
    ctx, _ = _run_module(tmp_path, raw)
    t = {x["name"]: x for x in ctx.targets}
    f4 = t["Fig. 4: every inserted element present exactly once, host check (1 = yes)"]
    assert f4["value"] == 0.0 and not f4["met"] and f4["where"] == "failed: per_element_atomic"
    f6 = t["Fig. 6: every run's values verified (1 = yes)"]
    assert not f6["met"] and f6["where"] == "failed: 250000000 x 10"
    b = t["baselines: every allocation's read/write verified (1 = yes)"]
    assert not b["met"] and b["where"] == "failed: static_cudaMalloc_shifted"


def test_fig3_puts_the_model_beside_the_measured_bytes():
    from gpudyn.bench.ggarray import fig3_series

    th = _theory()
    f3 = fig3_series(_raw())
    assert f3["sigma_model"]["sigma"][0] == 0.0 and len(f3["sigma_model"]["static_elements"]) == 21
    mod = f3["model"]
    assert mod["elements"] == [int(s) for s in SIZES]
    assert set(mod) == {"elements", "element_bytes", "static", "vmm", "ggarray32", "ggarray512"}
    assert mod["static"] == [FINAL * 4] * 11
    # the model reproduces what the H200 measured at 1.024e9 int32 (results at cc821fc)
    assert mod["vmm"][-1] == 4097835008 and mod["ggarray32"][-1] == 4294967296 and mod["ggarray512"][-1] == 4292870144
    assert f3["measured"]["ggarray512"]["bytes_held"] == mod["ggarray512"]
    assert th.vmm_bytes(1) == 2 << 20 and th.ggarray_pool_bytes(1, num_lfvectors=512) == 2 << 20


def test_every_table_row_has_bytes_held(tmp_path):
    _, result = _run_module(tmp_path, _raw())
    rows = result["rows"]
    sections = {r["section"] for r in rows}
    assert sections == {"table2", "fig4", "baselines", "flatten", "fig6"}
    assert all(isinstance(r["bytes_held"], int) and r["bytes_held"] > 0 for r in rows), rows
    assert len([r for r in rows if r["section"] == "table2"]) == 6 * 3
    assert len([r for r in rows if r["section"] == "fig4"]) == 7
    assert {r["elements"] for r in rows if r["section"] == "fig6"} == {1_000_000_000}
    assert any(r["structure"] == "static_cuMemCreate (baseline)" for r in rows)
    assert "| section | structure |" in result["table"] and "None" not in result["table"]


def test_figures_from_a_raw_result(tmp_path):
    pytest.importorskip("matplotlib")
    ctx, _ = _run_module(tmp_path, _raw(), plots=True)
    assert sorted(ctx.plots) == ["ggarray_fig3.png", "ggarray_fig4.png", "ggarray_fig5.png", "ggarray_fig6.png"]
    for name in ctx.plots:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_section_alone_still_runs(tmp_path):
    """`--only fig6` output: the other sections missing."""
    raw = _raw()
    only = {k: raw[k] for k in ("quick", "rw_passes", "sizes", "fig6", "seconds")}
    ctx, result = _run_module(tmp_path, copy.deepcopy(only))
    assert [t["name"] for t in ctx.targets] == TARGET_NAMES[-2:]
    assert {r["section"] for r in result["rows"]} == {"fig6"}


def _program():
    from gpudyn.bench._common import Context

    try:
        return Context("ggarray", ".", False, {}).find_program(PROGRAM)
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


def test_program_arguments(tmp_path):
    prog = _program()
    r = subprocess.run([prog], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--out FILE.json is required" in r.stderr
    r = subprocess.run(
        [prog, "--out", str(tmp_path / "x.json"), "--only", "nothing"], capture_output=True, text=True, timeout=60
    )
    if "no such section" not in r.stderr:
        pytest.skip("the installed program predates --only checking")
    assert r.returncode == 2 and "--only nothing: no such section" in r.stderr
    assert not (tmp_path / "x.json").exists()


@pytest.mark.gpu
def test_bench_ggarray_quick_is_clean(tmp_path):
    """`gpudyn bench ggarray --quick`: every check passes, every target is computed,
    and the program's JSON has the keys _raw() gives the host tests."""
    _program()
    if os.environ.get("GPUDYN_SANITIZER"):
        pytest.skip("a benchmark under compute-sanitizer measures nothing (GPUDYN_SANITIZER is set)")
    r = subprocess.run(
        [sys.executable, "-m", "gpudyn", "bench", "ggarray", "--quick", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((tmp_path / "ggarray.json").read_text())
    raw = result["raw"]
    assert [t["name"] for t in result["targets"]] == TARGET_NAMES
    t = {x["name"]: x for x in result["targets"]}
    for name in TARGET_NAMES[8:11] + ["read/write did all 30 passes on every structure (1 = yes)"]:
        assert t[name]["met"], (name, t[name])
    want = _raw()
    assert set(raw) == set(want)
    assert set(raw["fig5"]) == set(want["fig5"])
    for s in raw["fig5"]:
        assert set(raw["fig5"][s]) >= set(want["fig5"]["static_cudaMalloc"]) - {"num_lfvectors"}
    assert set(raw["fig4_insert_ms"]) == set(want["fig4_insert_ms"])
    assert set(raw["fig6"]["rows"][0]) == set(want["fig6"]["rows"][0])
    assert set(raw["baselines"]["rows"][0]) == set(want["baselines"]["rows"][0])
    assert all(r["bytes_held"] > 0 for r in result["rows"])
    assert sorted(result["plots"]) == ["ggarray_fig3.png", "ggarray_fig4.png", "ggarray_fig5.png", "ggarray_fig6.png"]
