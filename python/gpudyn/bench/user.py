"""`gpudyn bench user`: GGArray and the static array used from a user's own kernel
(per-thread `push_back` through the device API) against what that user would write
with CUB instead, side by side in one run (issue 10, item 4).

Runs gpudyn_bench_user (benchmarks/ggarray/user_bench.cu, whose header describes every
contender and what its timing covers) and computes from its raw JSON:
  - "GGArray fresh vs CUB two-pass, mean M": CUB two-pass ms / GGArray created fresh
    (create + get_view + kernel + size) ms, the fastest of the loop, bulk, block and
    warp kernels (block: the block-level push, every thread of the block calling;
    warp: the per-thread push_back(flags, values));
  - "GGArray reused vs CUB two-pass, mean M": the same for one array kept across runs
    (clear + get_view + kernel + size);
  - "in-kernel push vs DeviceSelect::If, P % kept": DeviceSelect::If ms / the fastest
    GGArray kernel (one element per thread, grid-stride, block-level push_back_chunk,
    warp tiles: push_back(flags, values) of 8 or 16 candidates a lane);
  - issue 40's natural forms: "per-thread push_back(values, k) vs CUB two-pass, mean M, fresh|reused"
    (CUB ms / the bulk kernel's ms, means 1 and 8) and "if (x < t) a.push_back(x), one element a
    thread, vs DeviceSelect::If, P % kept" (DeviceSelect::If ms / the reused GGArray's
    one_per_thread ms);
  - issue 40's floor (results that have the "floor" contender): "variable output K, mean M:
    GGArray fresh|reused time / floor time" (K: loop, bulk) and "compaction K, P % kept: GGArray
    reused time / floor time" (K: one_per_thread, grid_stride): a GGArray kernel's ms over the
    same kernel's with warp-aggregated atomics on L counters into a preallocated buffer (what a
    GGArray does minus growth), lower is better, goal 1.15;
  - "GGArray bytes held / output bytes (+ one first bucket per LFVector), SECTION": the
    worst over the section's GGArray runs of allocated bytes / (output bytes +
    LFVectors x first bucket x element size);
  - "every output verified (count, sum, xor of a 64-bit mix) (1 = yes)".
Per-contender times, their steps and the loop-vs-bulk split go into the results too.
"""

from __future__ import annotations

FRESH_GOAL = 1.0  # GGArray created fresh at least as fast as CUB's two-pass
REUSED_GOAL = 1.5  # a reused GGArray 1.5x faster than CUB's two-pass
SELECT_GOAL = 0.9  # in-kernel push at least 0.9x DeviceSelect::If's speed
BYTES_GOAL = 2.0  # bytes held at most twice the output (+ one first bucket per LFVector)
NATURAL_GOAL = 1.5  # issue 40: per-thread push_back(values, k) 1.5x CUB's two-pass, means 1 and 8
NATURAL_MEANS = (1.0, 8.0)
FLOOR_GOAL = 1.15  # issue 40: a form that cannot reach its target is within 1.15x of the floor
KERNELS = ("loop", "bulk", "block", "warp")  # variable output; older results lack "block" / "warp"
GG_COMPACTION = ("one_per_thread", "grid_stride", "chunk", "warp_tiles", "warp_tiles16")
STATIC_COMPACTION = ("one_per_thread", "grid_stride", "warp_tiles", "warp_tiles16")
FLOOR_VARIABLE = ("loop", "bulk")  # older results have no "floor" contender
FLOOR_COMPACTION = ("one_per_thread", "grid_stride")
SECTIONS = {"variable_output": "variable output", "compaction": "stream compaction", "growth": "growth in the kernel"}


def _fmt_mean(mean: float) -> str:
    return f"mean {mean:g}"


def _fmt_kept(percent: float) -> str:
    return f"{percent:g} % kept"


def _best(series: dict, kernels) -> tuple[str, float]:
    """(kernel, ms) of the fastest of `kernels` in `series` ({kernel: {"ms": ...}})."""
    name = min((k for k in kernels if k in series), key=lambda k: series[k]["ms"])
    return name, float(series[name]["ms"])


def _allowance(section: dict) -> int:
    """Bytes of one first bucket per LFVector (the target's allowance above the output)."""
    return int(section["num_lfvectors"]) * int(section["first_bucket_elements"]) * int(section["element_bytes"])


class _Worst:
    """Largest bytes-held ratio seen in a section, and where."""

    def __init__(self):
        self.value, self.where = None, None

    def add(self, held: int, output_bytes: int, allowance: int, where: str) -> None:
        r = held / max(1, output_bytes + allowance)
        if self.value is None or r > self.value:
            self.value, self.where = r, where


def summarize(ctx, raw: dict) -> dict:
    """Targets (recorded on ctx), table rows and the loop/bulk split from the raw JSON."""
    rows: list[dict] = []
    split: list[dict] = []

    vo = raw.get("variable_output")
    if vo:
        worst = _Worst()
        fresh, reused, natural, floor = [], [], [], []
        allowance = _allowance(vo)
        for case in vo["means"]:
            label = _fmt_mean(case["mean"])
            c = case["contenders"]
            cub = float(c["cub_two_pass"]["ms"])
            rows.append(_row("variable output", label, "cub_two_pass", "", c["cub_two_pass"], cub))
            for contender in ("static_worst_case", "ggarray_fresh", "ggarray_reused", "floor"):
                if contender not in c:
                    continue
                for k in KERNELS:
                    if k in c[contender]:
                        rows.append(_row("variable output", label, contender, k, c[contender][k], cub))
                split.append(
                    {
                        "section": "variable output",
                        "case": label,
                        "contender": contender,
                        "loop_ms": c[contender]["loop"]["ms"],
                        "bulk_ms": c[contender]["bulk"]["ms"],
                        "loop_over_bulk": c[contender]["loop"]["ms"] / c[contender]["bulk"]["ms"],
                    }
                )
                if contender.startswith("ggarray"):
                    for k in KERNELS:
                        if k in c[contender]:
                            worst.add(
                                c[contender][k]["bytes_held"],
                                case["output_bytes"],
                                allowance,
                                f"{label}, {contender} {k}",
                            )
            fresh.append((f"GGArray fresh vs CUB two-pass, {label}", cub, c["ggarray_fresh"], KERNELS, FRESH_GOAL))
            reused.append((f"GGArray reused vs CUB two-pass, {label}", cub, c["ggarray_reused"], KERNELS, REUSED_GOAL))
            if float(case["mean"]) in NATURAL_MEANS:
                for how in ("fresh", "reused"):
                    natural.append(
                        (
                            f"per-thread push_back(values, k) vs CUB two-pass, {label}, {how}",
                            cub,
                            c[f"ggarray_{how}"],
                            ("bulk",),
                            NATURAL_GOAL,
                        )
                    )
            for k in FLOOR_VARIABLE:
                for how in ("fresh", "reused"):
                    if k in c.get("floor", {}) and k in c[f"ggarray_{how}"]:
                        floor.append(
                            (
                                f"variable output {k}, {label}: GGArray {how} time / floor time",
                                c[f"ggarray_{how}"][k],
                                c["floor"][k],
                                k,
                            )
                        )
        for args in fresh + reused + natural:  # the fresh targets, the reused ones, then issue 40's forms
            _speed_target(ctx, *args)
        for args in floor:
            _floor_target(ctx, *args)
        _bytes_target(ctx, worst, "variable_output")

    cp = raw.get("compaction")
    if cp:
        worst = _Worst()
        allowance = _allowance(cp)
        best, natural, floor = [], [], []
        for case in cp["selectivities"]:
            label = _fmt_kept(case["kept_percent"])
            c = case["contenders"]
            sel = float(c["select_if"]["ms"])
            rows.append(_row("stream compaction", label, "select_if", "", c["select_if"], sel))
            for k in (k for k in GG_COMPACTION if k in c["ggarray"]):  # (older results: no warp_tiles)
                rows.append(_row("stream compaction", label, "ggarray", k, c["ggarray"][k], sel))
                worst.add(c["ggarray"][k]["bytes_held"], case["output_bytes"], allowance, f"{label}, ggarray {k}")
            for k in (k for k in STATIC_COMPACTION if k in c["static"]):
                rows.append(_row("stream compaction", label, "static", k, c["static"][k], sel))
            for k in (k for k in FLOOR_COMPACTION if k in c.get("floor", {})):
                rows.append(_row("stream compaction", label, "floor", k, c["floor"][k], sel))
                floor.append(
                    (f"compaction {k}, {label}: GGArray reused time / floor time", c["ggarray"][k], c["floor"][k], k)
                )
            best.append((f"in-kernel push vs DeviceSelect::If, {label}", sel, c["ggarray"], GG_COMPACTION, SELECT_GOAL))
            natural.append(
                (
                    f"if (x < t) a.push_back(x), one element a thread, vs DeviceSelect::If, {label}",
                    sel,
                    c["ggarray"],
                    ("one_per_thread",),
                    SELECT_GOAL,
                )
            )
        for args in best + natural:  # the fastest kernel at each selectivity, then the natural one
            _speed_target(ctx, *args)
        for args in floor:
            _floor_target(ctx, *args)
        _bytes_target(ctx, worst, "compaction")

    gr = raw.get("growth")
    if gr:
        worst = _Worst()
        out_bytes = int(gr["final_size"]) * int(gr["element_bytes"])
        allowance = _allowance(gr)
        vmm_last = gr["contenders"]["vmm_reserved"]["ms"][-1]
        for name, s in gr["contenders"].items():
            rows.append(
                {
                    "section": "growth in the kernel",
                    "case": f"last doubling, to {int(gr['final_size']):,}",
                    "contender": name,
                    "kernel": "push_back",
                    "ms": s["ms"][-1],
                    "baseline_over_ms": vmm_last / s["ms"][-1] if s["ms"][-1] else None,
                    "all_doublings_ms": sum(s["ms"]),
                    "bytes_held": s["bytes_held"],
                    "verified": s["verified"],
                    **({"budget_bytes": s["budget_bytes"]} if "budget_bytes" in s else {}),
                }
            )
            if name.startswith("ggarray"):
                worst.add(s["bytes_held"], out_bytes, allowance, name)
        _bytes_target(ctx, worst, "growth")

    t = ctx.target(
        "every output verified (count, sum, xor of a 64-bit mix) (1 = yes)",
        float(bool(raw.get("verified")) and not raw.get("failures")),
        1.0,
        "bool",
        True,
    )
    if raw.get("failures"):
        t["where"] = "; ".join(raw["failures"])[:2000]
    return {"rows": rows, "loop_vs_bulk": split}


def _row(section: str, case: str, contender: str, kernel: str, s: dict, baseline_ms: float) -> dict:
    r = {
        "section": section,
        "case": case,
        "contender": contender,
        "kernel": kernel,
        "ms": s["ms"],
        "baseline_over_ms": baseline_ms / s["ms"] if s["ms"] else None,
        "steps_ms": ", ".join(f"{k} {v:.3g}" for k, v in s.get("steps_ms", {}).items()),
        "bytes_held": s["bytes_held"],
        "verified": s["verified"],
    }
    if "budget_bytes" in s:
        r["budget_bytes"] = s["budget_bytes"]
    return r


def _speed_target(ctx, name: str, baseline_ms: float, series: dict, kernels, goal: float) -> None:
    """Target `name`: baseline ms / the fastest of `kernels` in `series` (higher is better)."""
    k, ms = _best(series, kernels)
    t = ctx.target(name, baseline_ms / ms, goal, "x", True)
    t["where"] = f"{k} kernel: {ms:.4g} ms vs {baseline_ms:.4g} ms"


def _floor_target(ctx, name: str, gg: dict, floor: dict, kernel: str) -> None:
    """Target `name`: a GGArray kernel's ms / the floor's ms for the same kernel (lower is better)."""
    t = ctx.target(name, float(gg["ms"]) / float(floor["ms"]), FLOOR_GOAL, "ratio", False)
    t["where"] = f"{kernel} kernel: GGArray {float(gg['ms']):.4g} ms vs floor {float(floor['ms']):.4g} ms"


def _bytes_target(ctx, worst: _Worst, section: str) -> None:
    if worst.value is None:
        return
    t = ctx.target(
        f"GGArray bytes held / output bytes (+ one first bucket per LFVector), {SECTIONS[section]}",
        worst.value,
        BYTES_GOAL,
        "ratio",
        False,
    )
    t["where"] = f"worst: {worst.where}"


def run(ctx) -> dict:
    from ._common import markdown_table

    raw = ctx.run_program("gpudyn_bench_user")
    result = summarize(ctx, raw)
    _plot(ctx, raw, result["rows"])
    columns = ["section", "case", "contender", "kernel", "ms", "baseline_over_ms", "held_MiB", "budget_MiB", "steps_ms"]
    mib = lambda b: round(b / 2**20, 1) if b is not None else ""  # noqa: E731
    table = markdown_table(
        [dict(r, held_MiB=mib(r["bytes_held"]), budget_MiB=mib(r.get("budget_bytes"))) for r in result["rows"]], columns
    )
    table += (
        "\n\nbaseline_over_ms: the section's baseline time / this row's time (> 1: faster than the baseline): "
        "CUB two-pass, DeviceSelect::If, and for growth (ms of the last doubling, grow + insert) the VMM array "
        "reserved by the host.  floor: the same kernel with warp-aggregated atomics on as many counters as a "
        "GGArray has LFVectors, into a buffer preallocated for the worst case (a GGArray minus growth).  "
        "held_MiB: bytes held after the run (GGArray: its buckets; floor: its buffer and counters); "
        "budget_MiB: a GGArray's budget, mapped for its kernels' buckets"
    )
    return {"raw": raw, **result, "table": table}


def _plot(ctx, raw: dict, rows: list[dict]) -> None:
    plt = ctx.pyplot()
    if plt is None:
        return
    dev = ctx.device.get("name", "GPU") if isinstance(ctx.device, dict) else "GPU"
    vo, cp, gr = raw.get("variable_output"), raw.get("compaction"), raw.get("growth")
    if vo:
        _bars(
            ctx,
            plt,
            rows,
            "variable output",
            f"variable output, {int(vo['threads']):,} threads: user kernels vs CUB two-pass ({dev})",
            "user_variable_output.png",
        )
    if cp:
        _bars(
            ctx,
            plt,
            rows,
            "stream compaction",
            f"stream compaction of {int(cp['n']):,} int32: in-kernel push vs cub::DeviceSelect::If ({dev})",
            "user_compaction.png",
        )
    if gr:
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, s in gr["contenders"].items():
            ax.loglog(gr["sizes"], [max(v, 1e-4) for v in s["ms"]], marker="o", label=name)
        ax.set(title=f"growth + insertion per doubling ({dev})", xlabel="size after the doubling", ylabel="ms")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(ctx.figure_path("user_growth.png"), dpi=110)
        plt.close(fig)


def _bars(ctx, plt, rows: list[dict], section: str, title: str, filename: str) -> None:
    """One panel per case of `section`: a bar per contender (and kernel), ms; CUB first, in gray."""
    cases = list(dict.fromkeys(r["case"] for r in rows if r["section"] == section))
    fig, axes = plt.subplots(1, len(cases), figsize=(5 * len(cases), 4), squeeze=False)
    palette = {}
    for ax, case in zip(axes[0], cases):
        mine = [r for r in rows if r["section"] == section and r["case"] == case]
        colors = [palette.setdefault(r["contender"], "gray" if not r["kernel"] else f"C{len(palette)}") for r in mine]
        ax.barh(range(len(mine)), [r["ms"] for r in mine], color=colors)
        ax.set_yticks(range(len(mine)), [f"{r['contender']} {r['kernel']}".strip() for r in mine], fontsize=8)
        ax.invert_yaxis()
        ax.set(title=case, xlabel="ms (median)")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(ctx.figure_path(filename), dpi=110)
    plt.close(fig)
