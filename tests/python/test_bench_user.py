"""`gpudyn bench user` (issue 10, item 4): GGArray and the static array from a user's
kernel against CUB, in one run.

Host tests: the module is registered; its targets, names and values come out of a
raw result shaped like the program's (a hand-made one, so the arithmetic is checked
against numbers written here); the program's argument handling, and its refusal to
run without a device.  GPU test: `gpudyn bench user --quick` runs clean, every
output verified, and the program's JSON has exactly the shape the host test feeds
the module (so the host test keeps testing what the program writes)."""

import json
import os
import subprocess
import sys

import pytest

PROGRAM = "gpudyn_bench_user"
MEAN_LABELS = ("mean 0.01", "mean 1", "mean 8")
KEPT_LABELS = ("1 % kept", "50 % kept", "99 % kept")
BYTES_NAME = "GGArray bytes held / output bytes (+ one first bucket per LFVector), "
# issue 40's floor targets: a GGArray kernel's time / the same kernel's into a preallocated buffer
FLOOR_VARIABLE_NAMES = [
    f"variable output {k}, {m}: GGArray {how} time / floor time"
    for m in MEAN_LABELS
    for k in ("loop", "bulk")
    for how in ("fresh", "reused")
]
FLOOR_COMPACTION_NAMES = [
    f"compaction {k}, {p}: GGArray reused time / floor time"
    for p in KEPT_LABELS
    for k in ("one_per_thread", "grid_stride")
]
TARGET_NAMES = (
    [f"GGArray fresh vs CUB two-pass, {m}" for m in MEAN_LABELS]
    + [f"GGArray reused vs CUB two-pass, {m}" for m in MEAN_LABELS]
    + [
        f"per-thread push_back(values, k) vs CUB two-pass, {m}, {how}"
        for m in ("mean 1", "mean 8")
        for how in ("fresh", "reused")
    ]
    + FLOOR_VARIABLE_NAMES
    + [BYTES_NAME + "variable output"]
    + [f"in-kernel push vs DeviceSelect::If, {k}" for k in KEPT_LABELS]
    + [f"if (x < t) a.push_back(x), one element a thread, vs DeviceSelect::If, {k}" for k in KEPT_LABELS]
    + FLOOR_COMPACTION_NAMES
    + [
        BYTES_NAME + "stream compaction",
        BYTES_NAME + "growth in the kernel",
        "every output verified (count, sum, xor of a 64-bit mix) (1 = yes)",
    ]
)
L, FIRST, ELEM = 512, 1024, 4
ALLOWANCE = L * FIRST * ELEM  # one first bucket per LFVector, in bytes


def _series(ms, held, steps=("clear", "kernel", "size"), **extra):
    s = {
        "ms": ms,
        "samples_ms": [ms, ms],
        "steps_ms": {k: ms / len(steps) for k in steps},
        "bytes_held": held,
        "verified": True,
    }
    s.update(extra)
    return s


def _gg(ms, held):
    return _series(ms, held, ("clear", "get_view", "kernel", "size"), budget_bytes=1 << 30, budget_raises=0)


def _fresh(ms, held):
    return _series(
        ms, held, ("create", "get_view", "kernel", "size"), budget_bytes=1 << 30, budget_raises=1, destroy_ms=3.0
    )


def _raw():
    """A raw result shaped like gpudyn_bench_user's (see user_bench.cu's JSON)."""
    means = []
    # (mean, max_k, output bytes, cub ms, fresh loop/bulk/block, reused loop/bulk/block, floor loop/bulk)
    for mean, max_k, out, cub, fr, ru, fl in (
        (0.01, 1, 4_000_000, 0.8, (2.0, 1.6, 3.0), (0.5, 0.4, 0.6), (0.4, 0.35)),
        (1.0, 2, 400_000_000, 1.4, (1.0, 1.2, 2.0), (0.7, 0.9, 0.8), (0.6, 0.6)),
        (8.0, 16, 3_200_000_000, 7.5, (9.0, 7.0, 8.0), (4.0, 5.0, 3.0), (3.6, 4.0)),
    ):
        means.append(
            {
                "mean": mean,
                "max_k": max_k,
                "expected": {"count": out // 4, "sum": 2**63 + 5, "xor": 77},
                "output_bytes": out,
                "contenders": {
                    "cub_two_pass": _series(cub, out + 500_000_000, ("count", "scan", "total_to_host", "write")),
                    "static_worst_case": {
                        "loop": _series(1.0, 400_000_000 * max_k),
                        "bulk": _series(0.9, 400_000_000 * max_k),
                        "block": _series(0.8, 400_000_000 * max_k),
                        "warp": _series(0.85, 400_000_000 * max_k),
                    },
                    # the warp kernel is never the fastest here: the targets below name the others
                    "ggarray_fresh": {
                        "loop": _fresh(fr[0], out + ALLOWANCE),
                        "bulk": _fresh(fr[1], out),
                        "block": _fresh(fr[2], out),
                        "warp": _fresh(max(fr) + 1.0, out),
                    },
                    "ggarray_reused": {
                        "loop": _gg(ru[0], out),
                        "bulk": _gg(ru[1], out),
                        "block": _gg(ru[2], out),
                        "warp": _gg(max(ru) + 1.0, out),
                    },
                    # the floor's worst-case buffer holds far more than any GGArray: not a GGArray, not counted
                    "floor": {
                        "loop": _series(fl[0], 100 * (out + ALLOWANCE)),
                        "bulk": _series(fl[1], 100 * (out + ALLOWANCE)),
                    },
                },
            }
        )
    # mean 1, fresh bulk holds the most relative to its output: 3 x (output + allowance)
    means[1]["contenders"]["ggarray_fresh"]["bulk"]["bytes_held"] = 3 * (400_000_000 + ALLOWANCE)
    sel = []
    # (kept %, DeviceSelect::If ms, GGArray one_per_thread/grid_stride/chunk ms, floor one_per_thread/grid_stride ms)
    for kept, sel_ms, gg, fl in (
        (1.0, 1.8, (2.0, 2.5, 4.0), (1.9, 1.8)),
        (50.0, 2.2, (3.0, 2.0, 4.5), (2.5, 1.9)),
        (99.0, 2.8, (3.5, 3.0, 2.8), (3.0, 2.9)),
    ):
        out = int(1e9 * kept / 100) * 4
        sel.append(
            {
                "kept_percent": kept,
                "threshold": int(kept / 100 * 2**31),
                "expected": {"count": out // 4, "sum": 1, "xor": 2},
                "output_bytes": out,
                "contenders": {
                    "select_if": _series(sel_ms, 4_000_000_000 + 1000, ("select", "num_to_host")),
                    "ggarray": {
                        k: dict(_gg(ms, int(1.5 * out)), kernel=k)
                        for k, ms in zip(
                            ("one_per_thread", "grid_stride", "chunk", "warp_tiles", "warp_tiles16"), gg + (9.0, 9.5)
                        )
                    },
                    "static": {
                        k: dict(_series(ms, 4_000_000_000), kernel=k)
                        for k, ms in (
                            ("one_per_thread", 2.1),
                            ("grid_stride", 2.0),
                            ("warp_tiles", 2.4),
                            ("warp_tiles16", 2.3),
                        )
                    },
                    "floor": {
                        k: dict(_series(ms, 100 * out), kernel=k)
                        for k, ms in zip(("one_per_thread", "grid_stride"), fl)
                    },
                },
            }
        )
    sizes = [1e6 * 2**s for s in range(8)]
    growth = {"ms": [0.1 * (s + 1) for s in range(8)], "setup_ms": 2.0, "bytes_held": 600_000_000, "verified": True}
    return {
        "quick": False,
        "repeats": 7,
        "warmups": 1,
        "sms": 132,
        "budget_start_bytes": 0,
        "cub_pool": "default pool",
        "variable_output": {
            "threads": 100_000_000,
            "block": 256,
            "num_lfvectors": L,
            "first_bucket_elements": FIRST,
            "element_bytes": ELEM,
            "means": means,
        },
        "variable_output_seconds": 20.0,
        "compaction": {
            "n": 1_000_000_000,
            "block": 256,
            "chunk_elements": 16384,
            "chunk_items": 8,
            "grid_stride_blocks_ggarray": 1056,
            "grid_stride_blocks_static": 2112,
            "grid_stride_blocks_floor": 1056,
            "chunk_blocks": 1056,
            "warp_tiles_blocks_ggarray": 1056,
            "warp_tiles_blocks_static": 1584,
            "warp_tiles16_blocks_ggarray": 1056,
            "warp_tiles16_blocks_static": 1584,
            "num_lfvectors": L,
            "first_bucket_elements": FIRST,
            "element_bytes": ELEM,
            "selectivities": sel,
        },
        "compaction_seconds": 15.0,
        "growth": {
            "sizes": sizes,
            "final_size": 128_000_000,
            "element_bytes": ELEM,
            "repeats": 5,
            "num_lfvectors": L,
            "first_bucket_elements": FIRST,
            "expected": {"count": 128_000_000, "sum": 3, "xor": 4},
            "contenders": {
                "ggarray_in_kernel": dict(growth, budget_bytes=1 << 31, budget_raises=1),
                "ggarray_reserved": dict(growth, bytes_held=1_000_000_000, budget_bytes=1 << 30, budget_raises=0),
                "vmm_reserved": dict(growth, bytes_held=512_000_000),
            },
        },
        "growth_seconds": 5.0,
        "verified": True,
        "failures": [],
        "seconds": 40.0,
    }


def _run_module(tmp_path, raw):
    from gpudyn.bench import user
    from gpudyn.bench._common import Context

    ctx = Context("user", str(tmp_path), False, {"name": "test GPU"})
    ctx.run_program = lambda program, args=None: raw if program == PROGRAM else pytest.fail(program)
    ctx.pyplot = lambda: None
    return ctx, user.run(ctx)


def test_user_benchmark_is_registered():
    from gpudyn.bench import available, load

    assert "user" in available()  # `gpudyn bench` runs it, `gpudyn bench user` alone
    assert callable(load("user").run)


def test_targets_from_a_raw_result(tmp_path):
    ctx, result = _run_module(tmp_path, _raw())
    json.dumps(result, allow_nan=False)  # the result file stays strict JSON
    t = {x["name"]: x for x in ctx.targets}
    assert [x["name"] for x in ctx.targets] == TARGET_NAMES
    # fresh: CUB ms / the fastest of loop, bulk and block
    assert t["GGArray fresh vs CUB two-pass, mean 0.01"]["value"] == pytest.approx(0.8 / 1.6)
    assert t["GGArray fresh vs CUB two-pass, mean 0.01"]["where"].startswith("bulk kernel")
    assert t["GGArray fresh vs CUB two-pass, mean 1"]["value"] == pytest.approx(1.4 / 1.0)
    assert (
        t["GGArray fresh vs CUB two-pass, mean 1"]["met"] is True
        and t["GGArray fresh vs CUB two-pass, mean 1"]["goal"] == 1.0
    )
    assert t["GGArray fresh vs CUB two-pass, mean 8"]["met"] is True  # 7.5 / 7.0
    assert t["GGArray reused vs CUB two-pass, mean 0.01"]["value"] == pytest.approx(2.0)  # 0.8 / 0.4
    assert t["GGArray reused vs CUB two-pass, mean 1"]["value"] == pytest.approx(2.0)  # 1.4 / 0.7, loop
    assert t["GGArray reused vs CUB two-pass, mean 1"]["where"].startswith("loop kernel")
    assert (
        t["GGArray reused vs CUB two-pass, mean 8"]["met"] is True
        and t["GGArray reused vs CUB two-pass, mean 8"]["goal"] == 1.5
    )
    # the block-level kernel counts like the others: the fastest at mean 8, reused
    assert t["GGArray reused vs CUB two-pass, mean 8"]["value"] == pytest.approx(7.5 / 3.0)
    assert t["GGArray reused vs CUB two-pass, mean 8"]["where"].startswith("block kernel")
    # compaction: DeviceSelect::If ms / the fastest GGArray kernel, whichever it is
    assert t["in-kernel push vs DeviceSelect::If, 1 % kept"]["value"] == pytest.approx(1.8 / 2.0)
    assert t["in-kernel push vs DeviceSelect::If, 1 % kept"]["where"].startswith("one_per_thread")
    assert t["in-kernel push vs DeviceSelect::If, 1 % kept"]["met"] is True  # 0.9 >= 0.9
    assert t["in-kernel push vs DeviceSelect::If, 50 % kept"]["value"] == pytest.approx(2.2 / 2.0)
    assert t["in-kernel push vs DeviceSelect::If, 50 % kept"]["where"].startswith("grid_stride")
    assert t["in-kernel push vs DeviceSelect::If, 99 % kept"]["value"] == pytest.approx(1.0)
    assert t["in-kernel push vs DeviceSelect::If, 99 % kept"]["where"].startswith("chunk")
    # issue 40's natural forms: the named kernel, not the fastest one
    nat = "per-thread push_back(values, k) vs CUB two-pass, "
    assert t[nat + "mean 1, fresh"]["value"] == pytest.approx(1.4 / 1.2) and t[nat + "mean 1, fresh"]["met"] is False
    assert t[nat + "mean 1, reused"]["value"] == pytest.approx(1.4 / 0.9) and t[nat + "mean 1, reused"]["met"] is True
    assert t[nat + "mean 8, fresh"]["value"] == pytest.approx(7.5 / 7.0) and t[nat + "mean 8, fresh"]["goal"] == 1.5
    assert t[nat + "mean 8, reused"]["value"] == pytest.approx(1.5) and t[nat + "mean 8, reused"]["met"] is True
    assert t[nat + "mean 8, reused"]["where"].startswith("bulk kernel")
    one = "if (x < t) a.push_back(x), one element a thread, vs DeviceSelect::If, "
    assert t[one + "1 % kept"]["value"] == pytest.approx(0.9) and t[one + "1 % kept"]["met"] is True
    assert t[one + "50 % kept"]["value"] == pytest.approx(2.2 / 3.0) and t[one + "50 % kept"]["met"] is False
    assert t[one + "99 % kept"]["value"] == pytest.approx(2.8 / 3.5)
    assert t[one + "99 % kept"]["where"].startswith("one_per_thread")
    # the floor: GGArray ms / the same kernel's floor ms, lower is better, goal 1.15
    fv = t["variable output loop, mean 1: GGArray reused time / floor time"]
    assert fv["value"] == pytest.approx(0.7 / 0.6) and fv["met"] is False  # 1.167 > 1.15
    assert fv["goal"] == 1.15 and fv["comparison"] == "<=" and "floor 0.6 ms" in fv["where"]
    assert t["variable output loop, mean 8: GGArray reused time / floor time"]["met"] is True  # 4.0 / 3.6
    assert t["variable output bulk, mean 0.01: GGArray fresh time / floor time"]["value"] == pytest.approx(1.6 / 0.35)
    fc = t["compaction one_per_thread, 1 % kept: GGArray reused time / floor time"]
    assert fc["value"] == pytest.approx(2.0 / 1.9) and fc["met"] is True
    fg = t["compaction grid_stride, 99 % kept: GGArray reused time / floor time"]
    assert fg["value"] == pytest.approx(3.0 / 2.9) and fg["where"].startswith("grid_stride kernel")
    assert t["compaction grid_stride, 1 % kept: GGArray reused time / floor time"]["met"] is False  # 2.5 / 1.8
    # bytes: worst over the section's GGArray runs (static and CUB do not count)
    vb = t[BYTES_NAME + "variable output"]
    assert vb["value"] == pytest.approx(3.0) and vb["met"] is False and vb["comparison"] == "<="
    assert vb["where"] == "worst: mean 1, ggarray_fresh bulk"
    cb = t[BYTES_NAME + "stream compaction"]
    out99 = 990_000_000 * 4  # 1.5 x the output at every selectivity: the largest output is the worst
    assert cb["value"] == pytest.approx(1.5 * out99 / (out99 + ALLOWANCE)) and cb["met"] is True
    assert cb["where"] == "worst: 99 % kept, ggarray one_per_thread"
    gb = t[BYTES_NAME + "growth in the kernel"]
    assert gb["value"] == pytest.approx(1_000_000_000 / (512_000_000 + ALLOWANCE)) and gb["met"] is True
    assert gb["where"] == "worst: ggarray_reserved"  # the VMM array is not a GGArray
    assert t["every output verified (count, sum, xor of a 64-bit mix) (1 = yes)"]["value"] == 1.0
    # per-contender times and the loop/bulk split for the lead
    rows = result["rows"]
    # CUB + 3 contenders x 4 kernels + the floor's loop and bulk
    assert len([r for r in rows if r["section"] == "variable output"]) == 3 * 15
    # DeviceSelect + 5 + 4 kernels + the floor's one_per_thread and grid_stride
    assert len([r for r in rows if r["section"] == "stream compaction"]) == 3 * 12
    floor50 = next(
        r for r in rows if r["case"] == "50 % kept" and r["contender"] == "floor" and r["kernel"] == "grid_stride"
    )
    assert floor50["ms"] == 1.9 and floor50["baseline_over_ms"] == pytest.approx(2.2 / 1.9)
    assert len([r for r in rows if r["section"] == "growth in the kernel"]) == 3
    fresh8 = next(
        r for r in rows if r["case"] == "mean 8" and r["contender"] == "ggarray_fresh" and r["kernel"] == "loop"
    )
    assert fresh8["ms"] == 9.0 and fresh8["baseline_over_ms"] == pytest.approx(7.5 / 9.0)
    assert "create 2.25" in fresh8["steps_ms"]
    split = {(s["case"], s["contender"]): s for s in result["loop_vs_bulk"]}
    assert split[("mean 8", "ggarray_reused")]["loop_over_bulk"] == pytest.approx(0.8)
    assert split[("mean 8", "floor")]["loop_over_bulk"] == pytest.approx(3.6 / 4.0)
    assert result["raw"]["verified"] is True and "| section |" in result["table"]


def test_results_without_the_block_kernel(tmp_path):
    """Results written before the block-level and warp kernels and the floor existed still give
    every other target (the floor's are left out)."""
    raw = _raw()
    for case in raw["variable_output"]["means"]:
        for contender in ("static_worst_case", "ggarray_fresh", "ggarray_reused"):
            del case["contenders"][contender]["block"]
            del case["contenders"][contender]["warp"]
        del case["contenders"]["floor"]
    for case in raw["compaction"]["selectivities"]:
        del case["contenders"]["ggarray"]["warp_tiles16"]
        del case["contenders"]["static"]["warp_tiles16"]
        del case["contenders"]["floor"]
    ctx, result = _run_module(tmp_path, raw)
    t = {x["name"]: x for x in ctx.targets}
    floor = set(FLOOR_VARIABLE_NAMES + FLOOR_COMPACTION_NAMES)
    assert [x["name"] for x in ctx.targets] == [n for n in TARGET_NAMES if n not in floor]
    assert not any(r["contender"] == "floor" for r in result["rows"])
    assert t["GGArray reused vs CUB two-pass, mean 8"]["value"] == pytest.approx(7.5 / 4.0)  # loop
    assert len([r for r in result["rows"] if r["section"] == "variable output"]) == 3 * 7


def test_figures_from_a_raw_result(tmp_path):
    pytest.importorskip("matplotlib")
    from gpudyn.bench import user
    from gpudyn.bench._common import Context

    ctx = Context("user", str(tmp_path), False, {"name": "test GPU"})
    ctx.run_program = lambda program, args=None: _raw()
    user.run(ctx)
    assert ctx.plots == ["user_variable_output.png", "user_compaction.png", "user_growth.png"]
    for name in ctx.plots:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_failures_miss_the_verified_target(tmp_path):
    raw = _raw()
    raw["verified"] = False
    raw["failures"] = ["mean 8 bulk ggarray_fresh: size 5, status 1"]
    ctx, _ = _run_module(tmp_path, raw)
    t = {x["name"]: x for x in ctx.targets}["every output verified (count, sum, xor of a 64-bit mix) (1 = yes)"]
    assert t["value"] == 0.0 and t["met"] is False and "mean 8 bulk ggarray_fresh" in t["where"]


def _program():
    from gpudyn.bench._common import Context

    try:
        return Context("user", ".", False, {}).find_program(PROGRAM)
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
    r = subprocess.run(
        [prog, "--out", str(tmp_path / "x.json"), "--only", "nothing"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "argument '--only' is 'nothing'" in r.stderr
    r = subprocess.run(
        [prog, "--out", str(tmp_path / "x.json"), "--budget-mib", "lots"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "argument '--budget-mib' is 'lots'" in r.stderr
    assert not (tmp_path / "x.json").exists()


def test_program_without_a_device_says_so(tmp_path):
    if _has_device():
        pytest.skip("a CUDA device is present: the program would run")
    r = subprocess.run(
        [_program(), "--out", str(tmp_path / "x.json"), "--quick"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 77, r.stderr
    assert "no CUDA device" in r.stderr and "nothing was measured" in r.stderr
    assert not (tmp_path / "x.json").exists()


def _shape(x):
    """The keys of every dict, recursively (list items: the shape of the first)."""
    if isinstance(x, dict):
        return {k: _shape(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_shape(x[0])] if x and isinstance(x[0], (dict, list)) else []
    return None


@pytest.mark.gpu
def test_bench_user_quick_is_clean(tmp_path):
    """`gpudyn bench user --quick`: every output of every contender verified, every
    target computed, and the raw JSON shaped as _raw() (what the host test feeds the module)."""
    _program()
    if os.environ.get("GPUDYN_SANITIZER"):
        # Left out under compute-sanitizer: the quick run launches ~500 kernels over 1e6-1e7
        # elements (minutes under racecheck) and its timings mean nothing there; the device
        # code it calls (per-thread and chunk pushes, growth) runs under the tools in the
        # GGArray tests.
        pytest.skip("a benchmark under compute-sanitizer measures nothing (GPUDYN_SANITIZER is set)")
    r = subprocess.run(
        [sys.executable, "-m", "gpudyn", "bench", "user", "--quick", "--out-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((tmp_path / "user.json").read_text())
    raw = result["raw"]
    assert raw["verified"] is True and raw["failures"] == [], raw["failures"]
    assert [t["name"] for t in result["targets"]] == TARGET_NAMES
    assert all(row["verified"] for row in result["rows"])
    assert _shape(raw) == _shape(_raw())
    for case in raw["variable_output"]["means"]:
        fresh = case["contenders"]["ggarray_fresh"]["loop"]
        assert fresh["bytes_held"] > 0 and fresh["budget_bytes"] > 0 and fresh["ms"] > 0
