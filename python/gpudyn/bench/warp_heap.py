"""`gpudyn bench warp_heap`: FDGMalloc's Figs. 4-6 and the issue's targets,
from gpudyn_bench_warp_heap (warp heap on its default arena backing, on CUDA
malloc as in the paper, without superblocks, on the random-walk page heap, and
CUDA malloc itself, all measured in the same run).  The targets are those of
the default warp heap (arena); the paper's configuration is shown beside it in
every figure and table, with the bytes each configuration holds for the job."""

from __future__ import annotations

from collections import defaultdict

DEFAULT = "warp_heap"
PAPER = "warp_heap_cuda_malloc"
BASELINE = "cuda_malloc"
ALLOCATORS = (DEFAULT, PAPER, "warp_heap_no_superblocks", "warp_heap_page_heap", BASELINE)
LABELS = {
    DEFAULT: "warp heap, arena (default)",
    PAPER: "warp heap on CUDA malloc (paper)",
    "warp_heap_no_superblocks": "warp heap, no superblocks (CUDA malloc)",
    "warp_heap_page_heap": "warp heap on page heap",
    BASELINE: "CUDA malloc",
}
# One colour per configuration in every figure (matplotlib's cycle, by position).
COLORS = {a: f"C{i}" for i, a in enumerate(ALLOCATORS)}
# Targets of issue 5 on the H200.
SPEEDUP_GOAL = 100.0  # x over CUDA malloc, 65,536 threads x 16 x 16 B
TARGET_MS_GOAL = 0.1  # ms for those 1M allocations (Gallatin: 0.106 ms on the H200)
FLATNESS_GOAL = 2.0  # max/min time per allocation over S <= superblock / 32
# What a row's held_bytes is (the program's held_measure).
HELD_MEASURES = {
    "backing": "arena slots / page-heap pages the job took (blocks past the arena's 32-slot runs, which "
    "come from CUDA malloc, at their requested size)",
    "reserved": "bytes the warp heap asked of CUDA malloc (a lower bound: CUDA's own overhead is unknown)",
    "requested": "X x N x S with S rounded to 16 B (a lower bound: CUDA has no query for its device heap)",
}


def fmt_bytes(n) -> str:
    """1536 -> '1.5 KiB'; None -> 'n/a'."""
    if n is None:
        return "n/a"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.4g} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.4g} GiB"


def flatness(rows: list[dict], superblock_bytes: int, goal: float = FLATNESS_GOAL) -> dict:
    """Fig. 4 flatness of one configuration (rows of one allocator, any order):
    max/min time per allocation over S <= superblock/32 (the target's range) and
    over every S measured, and the largest S up to which the ratio from the
    smallest S stays within `goal` ('flat up to')."""
    pts = sorted((r for r in rows if r.get("ns_per_alloc") is not None), key=lambda r: r["s"])
    if not pts:
        return {"ratio_packed": None, "ratio_all": None, "flat_up_to": None, "s_min": None, "s_max": None}
    packed = [r["ns_per_alloc"] for r in pts if r["s"] * 32 <= superblock_bytes]
    every = [r["ns_per_alloc"] for r in pts]
    flat_up_to, lo, hi = None, float("inf"), 0.0
    for r in pts:
        lo, hi = min(lo, r["ns_per_alloc"]), max(hi, r["ns_per_alloc"])
        if hi > goal * lo:
            break
        flat_up_to = r["s"]
    return {
        "ratio_packed": max(packed) / min(packed) if packed else None,
        "ratio_all": max(every) / min(every),
        "flat_up_to": flat_up_to,
        "s_min": pts[0]["s"],
        "s_max": pts[-1]["s"],
    }


def slower_than_baseline_at(rows: list[dict], baseline: list[dict]) -> list[tuple[int, int]]:
    """The S where a configuration is slower than the baseline, as (first, last)
    runs of consecutive S measured by both: where it loses, and where it wins again."""
    base = {r["s"]: r["ms"] for r in baseline}
    runs: list[tuple[int, int]] = []
    open_run = False
    for s, ms in sorted((r["s"], r["ms"]) for r in rows if r["s"] in base):
        if ms > base[s]:
            runs[-1:] = [(runs[-1][0], s)] if open_run else runs[-1:] + [(s, s)]
            open_run = True
        else:
            open_run = False
    return runs


def fmt_runs(runs) -> str:
    """[(2048, 32768), (16, 16)] -> '2048-32768 B, 16 B'; [] -> 'never'."""
    if not runs:
        return "never"
    return ", ".join(f"{a} B" if a == b else f"{a}-{b} B" for a, b in runs)


def why_default_differs(tgt: dict, fig4_slower_from: list, arena_bytes) -> str:
    """The table's one sentence on why the default is not the paper's configuration."""
    numbers = ""
    if DEFAULT in tgt and PAPER in tgt:
        numbers = f" (here {tgt[PAPER]['ms']:.4g} ms for this job against {tgt[DEFAULT]['ms']:.4g} ms"
        if fig4_slower_from:
            numbers += f", and slower than plain CUDA malloc in Fig. 4 at S = {fmt_runs(fig4_slower_from)}"
        numbers += ")"
    pool = f" ({fmt_bytes(arena_bytes)} in this run, 512 MiB by default)" if arena_bytes else ""
    return (
        "Why the default differs from the paper: the paper takes every superblock from CUDA device malloc, "
        f"which serializes the warps' concurrent requests{numbers}, so the default takes superblocks from a "
        "pool allocated once at create, one atomic on a bitmap word each, at the price of reserving that "
        f"pool up front{pool}."
    )


def held_ratio(r: dict):
    return (
        r["held_bytes"] / r["requested_bytes"] if r.get("requested_bytes") and r.get("held_bytes") is not None else None
    )


def run(ctx):
    raw = ctx.run_program("gpudyn_bench_warp_heap")
    rows = raw["rows"]
    by = defaultdict(list)
    for r in rows:
        by[(r["figure"], r["allocator"])].append(r)
    sb = raw["superblock_bytes"]

    tgt = {r["allocator"]: r for r in rows if r["figure"] == "target"}
    if DEFAULT in tgt and BASELINE in tgt:  # absent when the program ran one other section (--only)
        wh, cm = tgt[DEFAULT], tgt[BASELINE]
        ctx.target("1M x 16 B: speedup over CUDA malloc", cm["ms"] / wh["ms"], SPEEDUP_GOAL, "x", True)
        ctx.target("1M x 16 B: warp heap time", wh["ms"], TARGET_MS_GOAL, "ms", False)
    flat = {a: flatness(by[("fig4", a)], sb) for a in ALLOCATORS if by[("fig4", a)]}
    for a, f in flat.items():
        f["slower_than_cuda_malloc_at"] = (
            slower_than_baseline_at(by[("fig4", a)], by[("fig4", BASELINE)]) if a != BASELINE else []
        )
        pts = sorted(by[("fig4", a)], key=lambda r: r["s"])
        f["held_over_requested_min_s"] = held_ratio(pts[0])
        f["held_over_requested_max_s"] = held_ratio(pts[-1])
    if DEFAULT in flat and flat[DEFAULT]["ratio_packed"] is not None:
        ctx.target(
            f"Fig. 4: time per allocation max/min over S <= {sb // 32} B",
            flat[DEFAULT]["ratio_packed"],
            FLATNESS_GOAL,
            "ratio",
            False,
        )
    failed = sum(r["failed"] for r in rows)

    plt = ctx.pyplot()
    if plt is not None:
        _plot(ctx, plt, by, sb)

    lines = [
        "| allocator | ms (65,536 x 16 x 16 B) | ns/alloc | time / default's | speedup over CUDA malloc | "
        "bytes held | held / requested | held is |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for a in ALLOCATORS:
        if a in tgt:
            r = tgt[a]
            vs_default = f"{r['ms'] / tgt[DEFAULT]['ms']:.4g}" if DEFAULT in tgt else "n/a"
            vs_base = f"{tgt[BASELINE]['ms'] / r['ms']:.4g}" if BASELINE in tgt else "n/a"
            ratio = held_ratio(r)
            lines.append(
                f"| {LABELS[a]} | {r['ms']:.4g} | {r['ns_per_alloc']:.4g} | {vs_default} | {vs_base} | "
                f"{fmt_bytes(r.get('held_bytes'))} | {'n/a' if ratio is None else f'{ratio:.3g}'} | "
                f"{r.get('held_measure', 'n/a')} |"
            )
    paper_from = flat.get(PAPER, {}).get("slower_than_cuda_malloc_at")
    lines += ["", why_default_differs(tgt, paper_from, raw.get("arena_bytes"))]
    if flat:
        lines += [
            "",
            f"Fig. 4 (64 threads x 16 x S, S = {min(f['s_min'] for f in flat.values())} .. "
            f"{max(f['s_max'] for f in flat.values())} B; superblock {sb} B): time per allocation "
            "max/min, information beside the target (which is the default's over S <= "
            f"{sb // 32} B)",
            "",
            f"| allocator | max/min, S <= {sb // 32} B | max/min, every S | flat (<= {FLATNESS_GOAL:g}x) up to S "
            "| slower than CUDA malloc at S | held / requested at smallest, largest S |",
            "|---|---|---|---|---|---|",
        ]
        for a in ALLOCATORS:
            if a not in flat:
                continue
            f = flat[a]

            def g(v, unit=""):
                if v is None:
                    return "n/a"
                if isinstance(v, float):
                    return f"{v:.0f}{unit}" if v >= 1000 else f"{v:.3g}{unit}"
                return f"{v}{unit}"

            lines.append(
                f"| {LABELS[a]} | {g(f['ratio_packed'])} | {g(f['ratio_all'])} | {g(f['flat_up_to'], ' B')} | "
                f"{'-' if a == BASELINE else fmt_runs(f['slower_than_cuda_malloc_at'])} | "
                f"{g(f['held_over_requested_min_s'])}, {g(f['held_over_requested_max_s'])} |"
            )
    measures = sorted({r.get("held_measure") for r in rows if r.get("held_measure") in HELD_MEASURES})
    if measures:
        lines += [
            "",
            "Bytes held: what the allocator holds with the whole job's allocations live at once "
            "(the warp heap measured by a run that keeps its warp headers; a pool allocated up front, "
            "the arena's or the page heap's, is not counted beyond the slots or pages taken).",
        ]
        lines += [f"Bytes held, '{m}': {HELD_MEASURES[m]}." for m in measures]
    verified = raw.get("verified", True)
    problems = raw.get("failures", [])
    lines += [
        "",
        "Self-checks (every allocation served, bytes held consistent with the request and all "
        "given back): " + ("all passed." if verified else f"{len(problems)} failed: " + "; ".join(problems[:5])),
    ]
    return {
        "raw": raw,
        "failed_allocations": failed,
        "fig4_flatness": flat,
        "verified": verified,
        "failures": problems,
        "table": "\n".join(lines),
    }


def _plot(ctx, plt, by, sb):
    # Fig. 4: time (the paper's plot) and bytes held, against S.
    fig, (ax, axm) = plt.subplots(1, 2, figsize=(12, 4.5))
    for a in ALLOCATORS:
        pts = sorted(by[("fig4", a)], key=lambda r: r["s"])
        if not pts:
            continue
        ax.plot([r["s"] for r in pts], [r["ms"] for r in pts], marker="o", ms=3, color=COLORS[a], label=LABELS[a])
        held = [(r["s"], r["held_bytes"]) for r in pts if r.get("held_bytes")]
        if held:
            axm.plot([s for s, _ in held], [b for _, b in held], marker="o", ms=3, color=COLORS[a], label=LABELS[a])
    for a_ in (ax, axm):
        a_.axvline(sb // 32, color="grey", lw=0.6, ls=":")
        a_.axvline(sb, color="grey", lw=0.6, ls="--")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="allocation size S (bytes)",
        ylabel="kernel time (ms)",
        title="Fig. 4: 64 threads x 16 allocations x S",
    )
    axm.set(
        xscale="log",
        yscale="log",
        xlabel="allocation size S (bytes)",
        ylabel="bytes held at the job's end",
        title="bytes held (dotted: S x 32 = superblock; dashed: S = superblock)",
    )
    ax.legend(fontsize=7)
    axm.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(ctx.figure_path("warp_heap_fig4.png"), dpi=120)
    plt.close(fig)

    # Fig. 4 flatness: time per allocation relative to each configuration's own smallest-S time.
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for a in ALLOCATORS:
        pts = sorted(by[("fig4", a)], key=lambda r: r["s"])
        if not pts:
            continue
        base = pts[0]["ns_per_alloc"]
        ax.plot(
            [r["s"] for r in pts],
            [r["ns_per_alloc"] / base for r in pts],
            marker="o",
            ms=3,
            color=COLORS[a],
            label=LABELS[a],
        )
    ax.axhline(FLATNESS_GOAL, color="red", lw=0.8, ls="--", label=f"{FLATNESS_GOAL:g}x (flat)")
    ax.axvline(sb // 32, color="grey", lw=0.6, ls=":")
    ax.axvline(sb, color="grey", lw=0.6, ls="--")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="allocation size S (bytes)",
        ylabel="time per allocation / at the smallest S",
        title="Fig. 4 flatness over every S (dotted: S x 32 = superblock; dashed: S = superblock)",
    )
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(ctx.figure_path("warp_heap_fig4_flatness.png"), dpi=120)
    plt.close(fig)

    # Fig. 5: absolute and relative to the paper's configuration (the paper's right plot is
    # relative to FDGMalloc), mean over the N, S measured at each X.
    fig, (ax, axr) = plt.subplots(1, 2, figsize=(12, 4.5))
    paper = {(r["threads"], r["n"], r["s"]): r["ns_per_alloc"] for r in by[("fig5", PAPER)]}
    for a in ALLOCATORS:
        mean, rel = defaultdict(list), defaultdict(list)
        for r in by[("fig5", a)]:
            mean[r["threads"]].append(r["ns_per_alloc"])
            p = paper.get((r["threads"], r["n"], r["s"]))
            if p:
                rel[r["threads"]].append(r["ns_per_alloc"] / p)
        xs = sorted(mean)
        if not xs:
            continue
        ax.plot(xs, [sum(mean[x]) / len(mean[x]) for x in xs], marker="o", color=COLORS[a], label=LABELS[a])
        xr = sorted(rel)
        if xr:
            axr.plot(xr, [sum(rel[x]) / len(rel[x]) for x in xr], marker="o", color=COLORS[a], label=LABELS[a])
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="threads X",
        ylabel="mean time per allocation (ns)",
        title="Fig. 5: mean over N, S (measured configurations)",
    )
    axr.set(
        xscale="log",
        yscale="log",
        xlabel="threads X",
        ylabel="time / paper configuration's",
        title="Fig. 5, relative to the paper's configuration (same X, N, S)",
    )
    ax.legend(fontsize=7)
    axr.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(ctx.figure_path("warp_heap_fig5.png"), dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    for a, style in ((DEFAULT, "-"), (PAPER, "--")):
        for n, marker in zip(sorted({r["n"] for r in by[("fig6", a)]}), "osD^v"):
            pts = sorted((r for r in by[("fig6", a)] if r["n"] == n), key=lambda r: r["threads"])
            ax.plot(
                [r["threads"] // 1024 for r in pts],
                [r["ms"] for r in pts],
                style,
                marker=marker,
                color=COLORS[a],
                label=f"{'arena (default)' if a == DEFAULT else 'CUDA malloc (paper)'}, N = {n}",
            )
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="blocks of 1024 threads",
        ylabel="kernel time (ms)",
        title="Fig. 6: warp heap scalability, 16 B",
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(ctx.figure_path("warp_heap_fig6.png"), dpi=120)
    plt.close(fig)
