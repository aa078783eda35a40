"""`gpudyn bench rw_heap`: Pham et al.'s Figs. 11-15, 17 and 18 and the issue's
targets, from gpudyn_bench_rw_heap (RW, RW-BM, CoRW, RW_malloc, a queue
baseline, the DO atomic counter and CUDA device malloc, all in the same run).

Fig. 13 has a free-percentage axis (rows `fig13_free`: RW_malloc on a heap
pre-filled to 100/50/10/1 % free); the hash join (Figs. 17, 18) fills pages as
the paper's Fig. 16 and every output is checked against a host reference.  The
tables give times against DO (the join's floor) and against the queue, not only
speedups over CUDA malloc."""

from __future__ import annotations

import math

from . import theory

# Targets of issue 4 on the H200.
CORW_MS_GOAL = 0.05  # ms, CoRW GETPAGE, 1M threads, T = 16M pages, 50% free
CORW_SPEEDUP_GOAL = 1000.0  # x over CUDA malloc of 16 B by the same threads
TAS_RATIO_GOAL = 25.0  # RW/RW-BM TAS at 0.5% free (Theorem 2's limit is 32)
MALLOC_MIXED_MS_GOAL = 1.1  # ms, RW_malloc 1M threads, mixed 16..4096 B
MALLOC_4096_MS_GOAL = 2.0  # ms, RW_malloc 1M threads x 4096 B
MALLOC_SPEEDUP_GOAL = 100.0  # x over CUDA malloc, same sizes and threads
THEORY_TOLERANCE = 0.15  # |TAS / Eq. 3 or 5 - 1|


def _pick(rows, **kw):
    return [r for r in rows if all(r.get(k) == v for k, v in kw.items())]


# Fig. 11's lines: the queue that builds its list is the queue's colour, dashed.
FIG11_COLORS = {"queue": "C0", "queue_build": "C0", "rw": "C1", "rw_bm": "C2", "corw": "C3"}


def _finite_ratio(a, b):
    """a / b, or None where either is infinite (or b is 0): strict JSON has no inf/NaN."""
    return a / b if math.isfinite(a) and math.isfinite(b) and b != 0 else None


def _nan(x):
    return float("nan") if x is None else x


def _run_paper_figures(ctx):
    raw = ctx.run_program("gpudyn_bench_rw_heap")
    rows = raw["rows"]
    f11 = _pick(rows, figure="fig11")
    Tmax = max(r["T"] for r in f11 if "T" in r)
    Nmax = max(r["N"] for r in f11 if "T" in r and not r.get("near_a"))  # the grid, not the N ~ A points
    cm16 = {r["N"]: r["ms"] for r in _pick(rows, figure="fig11", allocator="cuda_malloc_16B")}

    # CoRW at the largest measured config (T = 16M, N = 1M in the full run), 50% free.
    corw = _pick(f11, allocator="corw", T=Tmax, free=0.5, N=Nmax)
    if corw:
        c = corw[0]
        ctx.target(f"CoRW GETPAGE time, N={Nmax}, T={Tmax}, 50% free", c["ms"], CORW_MS_GOAL, "ms", False)
        ctx.target(f"CoRW speedup over CUDA malloc 16 B, N={Nmax}", cm16[Nmax] / c["ms"], CORW_SPEEDUP_GOAL, "x", True)

    # Fig. 12: RW/RW-BM ratios, measured and from Eqs. 3/5 and 4/6.
    fig12 = []
    for r in _pick(f11, allocator="rw"):
        b = _pick(f11, allocator="rw_bm", T=r["T"], free=r["free"], N=r["N"])
        if not b:
            continue
        b = b[0]
        T, A, N = r["T"], r["A"], r["N"]
        fig12.append(
            {
                "T": T,
                "free": r["free"],
                "N": N,
                "near_a": r.get("near_a", 0),
                "tas_ratio": r["tas"] / b["tas"],
                "was_ratio": r["was"] / b["was"],
                "tas_ratio_theory": theory.rw_tas(T, A, N) / theory.rw_bm_tas(T, A, N),
                # Eqs. 4 and 6 are infinite at N = A: no ratio there (None, strict JSON)
                "was_ratio_theory": _finite_ratio(theory.rw_was_bound(T, A, N), theory.rw_bm_was_bound(T, A, N)),
                "rw_tas_rel_err": r["tas"] / theory.rw_tas(T, A, N) - 1,
                "rw_bm_tas_rel_err": b["tas"] / theory.rw_bm_tas(T, A, N) - 1,
            }
        )
    low = [x for x in fig12 if x["free"] == 0.005 and not x["near_a"]]
    if low:
        best = max(low, key=lambda x: x["N"])
        ctx.target(
            f"RW/RW-BM TAS ratio at 0.5% free (T={best['T']}, N={best['N']})",
            best["tas_ratio"],
            TAS_RATIO_GOAL,
            "x",
            True,
        )
    if fig12:
        worst = max(
            max(abs(x["rw_tas_rel_err"]), abs(x["rw_bm_tas_rel_err"]))
            for x in fig12
            if x["free"] >= 0.01 and not x["near_a"]
        )
        ctx.target("TAS vs Eq. 3 / Eq. 5, worst relative error at >= 1% free", worst, THEORY_TOLERANCE, "", False)

    f13 = _pick(rows, figure="fig13")
    N13 = max(r["N"] for r in f13)

    def ms13(alloc, scen):
        r = _pick(f13, allocator=alloc, scenario=scen, N=N13)
        return r[0]["ms"] if r else float("nan")

    ctx.target(
        f"RW_malloc mixed 16-4096 B, N={N13}", ms13("rw_malloc", "mixed_16_4096"), MALLOC_MIXED_MS_GOAL, "ms", False
    )
    ctx.target(f"RW_malloc 4096 B, N={N13}", ms13("rw_malloc", "4096"), MALLOC_4096_MS_GOAL, "ms", False)
    ctx.target(
        f"RW_malloc speedup over CUDA malloc, mixed 16-4096 B, N={N13}",
        ms13("cuda_malloc", "mixed_16_4096") / ms13("rw_malloc", "mixed_16_4096"),
        MALLOC_SPEEDUP_GOAL,
        "x",
        True,
    )
    ctx.target(
        f"RW_malloc speedup over CUDA malloc, 4096 B, N={N13}",
        ms13("cuda_malloc", "4096") / ms13("rw_malloc", "4096"),
        MALLOC_SPEEDUP_GOAL,
        "x",
        True,
    )

    join = _join_targets(ctx, rows)
    f13free = fig13_free_summary(rows)
    _fig13_free_targets(ctx, rows)

    plt = ctx.pyplot()
    if plt is not None:
        algos = ("queue", "queue_build", "rw", "rw_bm", "corw")
        frees = sorted({r["free"] for r in f11 if "free" in r}, reverse=True)
        for T in sorted({r["T"] for r in f11 if "T" in r}):
            fig, axes = plt.subplots(3, len(frees), figsize=(4 * len(frees), 9), squeeze=False)
            for j, fr in enumerate(frees):
                for a in algos:
                    pts = sorted(_pick(f11, allocator=a, T=T, free=fr), key=lambda r: r["N"])
                    for i, key in enumerate(("ms", "tas", "was")):
                        if not pts or (a == "queue_build" and key != "ms"):
                            continue  # nothing measured here; queue_build's steps are the queue's
                        axes[i][j].plot(
                            [p["N"] for p in pts],
                            [p[key] for p in pts],
                            marker="o",
                            label=a,
                            color=FIG11_COLORS[a],
                            ls="--" if a == "queue_build" else "-",
                        )
                free_pages = {r["A"] for r in _pick(f11, T=T, free=fr) if r["allocator"] in algos}
                for i in range(3):  # N = A: the right end of the N ~ A points
                    for A in free_pages:
                        axes[i][j].axvline(A, color="grey", ls=":", lw=0.8)
                if T == Tmax:
                    xs = sorted(cm16)
                    axes[0][j].plot(xs, [cm16[x] for x in xs], marker="x", ls="--", label="CUDA malloc 16 B")
                for i, lab in enumerate(("kernel time (ms)", "TAS", "WAS")):
                    axes[i][j].set(xscale="log", yscale="log", xlabel="threads N", ylabel=lab)
                axes[0][j].set_title(f"{fr * 100:g}% free, T={T}")
            axes[0][0].legend(fontsize=7)
            fig.tight_layout()
            ctx.caption(fig, "TAS", "WAS")
            fig.savefig(ctx.figure_path(f"rw_heap_fig11_T{T}.png"), dpi=100)
            plt.close(fig)

        fig, axes = plt.subplots(1, 2, figsize=(10, 4))
        for fr in sorted({x["free"] for x in fig12}, reverse=True):
            pts = sorted((x for x in fig12 if x["free"] == fr and x["T"] == 1 << 20), key=lambda x: x["N"])
            for ax, k in zip(axes, ("tas", "was")):
                line = ax.plot(
                    [p["N"] for p in pts], [p[f"{k}_ratio"] for p in pts], marker="o", label=f"{fr * 100:g}% free"
                )
                ax.plot(
                    [p["N"] for p in pts],
                    [_nan(p[f"{k}_ratio_theory"]) for p in pts],
                    ls="--",
                    color=line[0].get_color(),
                )
        for ax, k in zip(axes, ("TAS (theory: Eq. 3 / Eq. 5)", "WAS (theory: Eq. 4 / Eq. 6)")):
            ax.axhline(32, color="grey", lw=0.5)
            ax.set(xscale="log", xlabel="threads N", ylabel="RW / RW-BM", title=f"Fig. 12: {k}")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        ctx.caption(fig, "TAS", "WAS")
        fig.savefig(ctx.figure_path("rw_heap_fig12.png"), dpi=100)
        plt.close(fig)

        _plot_fig13(ctx, plt, f13, f13free)

        f15 = _pick(rows, figure="fig15")
        fig, ax = plt.subplots(figsize=(6, 4))
        for X in sorted({r["request"] for r in f15}):
            pts = sorted(_pick(f15, request=X), key=lambda r: r["page_size"])
            line = ax.plot(
                [p["page_size"] for p in pts], [p["utilisation"] for p in pts], marker="o", label=f"RW_malloc {X} B"
            )
            ax.axhline(pts[0]["pow2_class_utilisation"], ls="--", color=line[0].get_color(), lw=0.8)
        ax.set(
            xscale="log",
            xlabel="page size (B)",
            ylabel="utilisation at OOM",
            title="Fig. 15 (dashed: power-of-two size classes)",
        )
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(ctx.figure_path("rw_heap_fig15.png"), dpi=100)
        plt.close(fig)

        _plot_join(ctx, plt, rows)

    lines = ["| experiment | rw_heap (ms) | baseline (ms) |", "|---|---|---|"]
    if corw:
        lines.append(
            f"| CoRW GETPAGE N={Nmax} T={Tmax} 50% free | {corw[0]['ms']:.4g} | CUDA malloc 16 B: {cm16[Nmax]:.4g} |"
        )
    for s in ("16", "4096", "mixed_16_4096", "8192"):
        lines.append(
            f"| RW_malloc {s} N={N13} | {ms13('rw_malloc', s):.4g} | CUDA malloc: {ms13('cuda_malloc', s):.4g} |"
        )
    lines += _join_table_lines(rows)
    tables = ["\n".join(lines), fig13_free_markdown(f13free), join_markdown(rows)]
    return {
        "raw": raw,
        "fig12": fig12,
        "fig13_free": f13free,
        "join": join_summary(rows),
        "missing_join_outputs": join["missing"],
        "join_errors": join["errors"],
        "table": "\n\n".join(t for t in tables if t),
    }


# ---- Fig. 13's free-percentage axis (rows "fig13_free") ---------------------


def fig13_free_summary(rows):
    """One entry per measured fig13_free point (skipped points left out), with
    CUDA malloc's fresh-heap time at the same size and N from the fig13 rows
    where it was measured (CUDA malloc has no pre-filled counterpart), and the
    bytes the heap holds for the work over the bytes requested."""
    cm = {(r["scenario"], r["N"]): r["ms"] for r in _pick(rows, figure="fig13", allocator="cuda_malloc")}
    out = []
    for r in _pick(rows, figure="fig13_free"):
        if r.get("skipped") or "ms" not in r:
            continue
        c = cm.get((r["size"], r["N"]))
        req = r.get("bytes_requested") or 0
        out.append(
            {
                "size": r["size"],
                "N": r["N"],
                "free_pct": r["free_pct"],
                "free_pct_measured": r.get("free_pct_measured"),
                "ms": r["ms"],
                "failed": r.get("failed", 0),
                "bytes_requested": req,
                "bytes_held": r.get("bytes_held"),
                "held_over_requested": r["bytes_held"] / req if req and r.get("bytes_held") is not None else None,
                "cuda_malloc_ms": c,
                "speedup_over_cuda_malloc": c / r["ms"] if c is not None and r["ms"] > 0 else None,
                "verified": bool(r.get("verified", False)),
            }
        )
    out.sort(key=lambda x: (_size_order(x["size"]), x["N"], -x["free_pct"]))
    return out


def _size_order(size):
    return (1, 0) if not str(size).isdigit() else (0, int(size))


def _fig13_free_targets(ctx, rows):
    pts = [r for r in _pick(rows, figure="fig13_free") if not r.get("skipped")]
    if not pts:
        return
    bad = sum(not r.get("verified", False) for r in pts)
    ctx.target(
        "RW_malloc on pre-filled heaps (demand <= free/2): points with a failure or a bad pointer",
        bad,
        0,
        "points",
        False,
    )


def fig13_free_markdown(summary):
    if not summary:
        return ""
    lines = [
        "Fig. 13, free-percentage axis: RW_malloc on a heap pre-filled (whole bitmap words) to each free share; "
        "CUDA malloc on a fresh heap (fig13 rows) where measured.",
        "| size | N | free % (measured) | RW_malloc ms | failed | bytes held / requested | CUDA malloc ms "
        "| speedup over CUDA malloc | checked |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for x in summary:
        fm = x["free_pct_measured"]
        lines.append(
            f"| {x['size']} | {x['N']} | {x['free_pct']:g} ({_f(fm, '.3g')}) | {x['ms']:.4g} | {x['failed']} | "
            f"{_f(x['held_over_requested'], '.3g')} | {_f(x['cuda_malloc_ms'])} | "
            f"{_f(x['speedup_over_cuda_malloc'])} | {'yes' if x['verified'] else 'NO'} |"
        )
    return "\n".join(lines)


def _plot_fig13(ctx, plt, f13, f13free):
    """rw_heap_fig13.png: top, one panel per size, RW_malloc time vs threads with a
    line per free percentage and CUDA malloc (fresh heap) dashed; bottom, the
    fig13 scenarios on a fresh heap, RW_malloc beside CUDA malloc."""
    sizes = sorted({x["size"] for x in f13free}, key=_size_order)
    ncols = max(len(sizes), 1)
    fig = plt.figure(figsize=(4 * ncols, 8 if f13 else 4))
    grid = fig.add_gridspec(2 if f13 else 1, ncols)
    cm = {}
    for r in _pick(f13, allocator="cuda_malloc"):
        cm.setdefault(r["scenario"], {})[r["N"]] = r["ms"]
    for j, size in enumerate(sizes):
        ax = fig.add_subplot(grid[0, j])
        for pct in sorted({x["free_pct"] for x in f13free if x["size"] == size}, reverse=True):
            pts = sorted((x for x in f13free if x["size"] == size and x["free_pct"] == pct), key=lambda x: x["N"])
            ax.plot([p["N"] for p in pts], [p["ms"] for p in pts], marker="o", label=f"RW_malloc {pct:g}% free")
        if size in cm:
            xs = sorted(cm[size])
            ax.plot(xs, [cm[size][x] for x in xs], marker="x", ls="--", color="k", label="CUDA malloc (fresh heap)")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="threads N",
            ylabel="kernel time (ms)",
            title=f"Fig. 13: {size} B" if str(size).isdigit() else f"Fig. 13: {size.replace('_', ' ')} B",
        )
        ax.legend(fontsize=6)
    if f13:
        ax = fig.add_subplot(grid[1, :])
        N13 = max(r["N"] for r in f13)
        scen = list(dict.fromkeys(r["scenario"] for r in f13))
        for k, alloc in enumerate(("rw_malloc", "cuda_malloc")):
            ms = []
            for sc in scen:
                r = _pick(f13, allocator=alloc, scenario=sc, N=N13)
                ms.append(r[0]["ms"] if r else float("nan"))
            ax.bar([x + 0.4 * k for x in range(len(scen))], ms, width=0.4, label=alloc)
        ax.set_xticks([x + 0.2 for x in range(len(scen))], scen, rotation=30, fontsize=7)
        ax.set(yscale="log", ylabel="kernel time (ms)", title=f"Figs. 13/14 on a fresh heap: N = {N13} threads")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(ctx.figure_path("rw_heap_fig13.png"), dpi=100)
    plt.close(fig)


# ---- the hash join (Figs. 17, 18) -------------------------------------------
JOIN_ORDER = ("DO", "RW", "RW-BM", "CoRW", "cuda_malloc")
JOIN_AXIS = {"fig17": "tuples", "fig18": "page_size"}


def join_summary(rows):
    """Every fig17/fig18 row with its time against DO at the same point
    (`ms_over_do`: probe time / DO's, below 1 faster than DO; `speedup_over_do`:
    DO's total / this total, the paper's Fig. 18 speedup with DO for the
    unavailable Ouroboros), against CUDA malloc where it ran, and the bytes held
    over the output bytes (how full the pages are)."""
    out = []
    for figure, axis in JOIN_AXIS.items():
        f = _pick(rows, figure=figure)
        do = {r[axis]: r for r in f if r["allocator"] == "DO"}
        cm = {r[axis]: r for r in f if r["allocator"] == "cuda_malloc"}
        for r in f:
            d, c = do.get(r[axis]), cm.get(r[axis])
            total = r.get("total_ms", r["ms"])
            out.append(
                {
                    "figure": figure,
                    "allocator": r["allocator"],
                    "tuples": r.get("tuples"),
                    "page_size": r.get("page_size"),
                    "ms": r["ms"],
                    "total_ms": total,
                    "ms_over_do": r["ms"] / d["ms"] if d and d["ms"] > 0 else None,
                    "speedup_over_do": d.get("total_ms", d["ms"]) / total if d and total > 0 else None,
                    "speedup_over_cuda_malloc": c.get("total_ms", c["ms"]) / total if c and total > 0 else None,
                    "pages_used": r.get("pages_used"),
                    "bytes_held": r.get("bytes_held"),
                    "output_bytes": r.get("output_bytes"),
                    "held_over_output": r["bytes_held"] / r["output_bytes"]
                    if r.get("output_bytes") and r.get("bytes_held") is not None
                    else None,
                    "verified": bool(r.get("verified", False)),
                }
            )
    out.sort(key=lambda x: (x["figure"], x[JOIN_AXIS[x["figure"]]] or 0, _join_rank(x["allocator"])))
    return out


def _join_rank(a):
    return JOIN_ORDER.index(a) if a in JOIN_ORDER else len(JOIN_ORDER)


def _join_targets(ctx, rows):
    """The CoRW / DO probe time at the largest Fig. 17 size, and that every join
    output matched the host's reference.  Returns {'missing', 'errors'}."""
    join_rows = _pick(rows, figure="fig17") + _pick(rows, figure="fig18")
    f17 = _pick(rows, figure="fig17")
    if f17:
        nbig = max(r["tuples"] for r in f17)
        do, co = _pick(f17, allocator="DO", tuples=nbig), _pick(f17, allocator="CoRW", tuples=nbig)
        if do and co:
            ctx.target(
                f"Hash-join probe, CoRW time / DO time, {nbig} tuples", co[0]["ms"] / do[0]["ms"], 1.0, "ratio", False
            )
    bad = [r for r in join_rows if not r.get("verified", False)]
    if join_rows:
        ctx.target(
            "Hash-join runs whose output differs from the host reference (fig17, fig18)", len(bad), 0, "runs", False
        )
    return {
        "missing": sum(r.get("missing", 0) for r in join_rows),
        "errors": sum(r.get("missing", 0) + r.get("invalid", 0) + r.get("duplicate", 0) for r in join_rows),
    }


def _join_table_lines(rows):
    """Lines of the main table: the join at the largest Fig. 17 size, each page
    source against DO."""
    f17 = _pick(rows, figure="fig17")
    if not f17:
        return []
    nbig = max(r["tuples"] for r in f17)
    do = _pick(f17, allocator="DO", tuples=nbig)
    if not do:
        return []
    d = do[0]["ms"]
    return [
        f"| hash-join probe {nbig} tuples, {r['allocator']} | {r['ms']:.4g} | DO: {d:.4g} "
        f"({r['ms'] / d:.3g}x DO's time) |"
        for r in sorted(_pick(f17, tuples=nbig), key=lambda r: _join_rank(r["allocator"]))
        if r["allocator"] != "DO"
    ]


def join_markdown(rows):
    summ = join_summary(rows)
    if not summ:
        return ""
    parts = []
    for figure, axis in JOIN_AXIS.items():
        pts = [x for x in summ if x["figure"] == figure]
        if not pts:
            continue
        title = (
            "Fig. 17: hash join (build + probe; no partition stage), 64 B pages, each thread filling its pages"
            if figure == "fig17"
            else "Fig. 18: hash join under page sizes; the paper's baseline (Ouroboros) is not available here, "
            "so speedups are over DO (and CUDA malloc is not run at this size)"
        )
        lines = [
            title,
            f"| {axis} | allocator | probe ms | total ms | probe / DO | total speedup over DO | "
            "pages | bytes held / output | checked |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for x in pts:
            lines.append(
                f"| {x[axis]} | {x['allocator']} | {x['ms']:.4g} | {x['total_ms']:.4g} | "
                f"{_f(x['ms_over_do'], '.3g')} | {_f(x['speedup_over_do'], '.3g')} | {x['pages_used']} | "
                f"{_f(x['held_over_output'], '.3g')} | {'yes' if x['verified'] else 'NO'} |"
            )
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _plot_join(ctx, plt, rows):
    """rw_heap_fig17.png (x: tuples) and rw_heap_fig18.png (x: page size): total
    time, the time against DO, and the bytes held with the output's bytes."""
    summ = join_summary(rows)
    for figure, axis in JOIN_AXIS.items():
        pts_all = [x for x in summ if x["figure"] == figure]
        if not pts_all:
            continue
        fig, axes = plt.subplots(1, 3, figsize=(15, 4))
        allocs = sorted({x["allocator"] for x in pts_all}, key=_join_rank)
        for a in allocs:
            pts = sorted((x for x in pts_all if x["allocator"] == a), key=lambda x: x[axis])
            xs = [p[axis] for p in pts]
            axes[0].plot(xs, [p["total_ms"] for p in pts], marker="o", label=a)
            axes[1].plot(xs, [_nan(p["speedup_over_do"]) for p in pts], marker="o", label=a)
            axes[2].plot(xs, [_nan(p["bytes_held"]) for p in pts], marker="o", label=a)
        out = sorted({(x[axis], x["output_bytes"]) for x in pts_all if x["output_bytes"]})
        if out:
            axes[2].plot([o[0] for o in out], [o[1] for o in out], ls="--", color="k", label="output bytes")
        xlabel = "tuples" if axis == "tuples" else "page size (B)"
        what = (
            "Fig. 17: hash join, 64 B pages"
            if figure == "fig17"
            else f"Fig. 18: hash join, {pts_all[0]['tuples']} tuples"
        )
        axes[0].set(xscale="log", yscale="log", xlabel=xlabel, ylabel="build + probe time (ms)", title=what)
        axes[1].axhline(1.0, color="grey", lw=0.5)
        axes[1].set(
            xscale="log", xlabel=xlabel, ylabel="speedup over DO (total time)", title="baseline: DO (no Ouroboros here)"
        )
        held_known = any(x["bytes_held"] for x in pts_all)
        axes[2].set(
            xscale="log",
            yscale="log" if held_known else "linear",
            xlabel=xlabel,
            ylabel="bytes held (pages used x page size)",
            title="memory the output holds",
        )
        for ax in axes:
            ax.legend(fontsize=7)
        fig.tight_layout()
        ctx.caption(fig, "DO")
        fig.savefig(ctx.figure_path(f"rw_heap_{figure}.png"), dpi=100)
        plt.close(fig)


# ---- issue 14, item 1: the random-walk evaluation in the regimes the paper argues from ----
# Rows of gpudyn_bench_rw_heap used here: fig11 (now with "near_a" points at N = 0.9,
# 0.99, 1.0 x A, "queue_build", bytes held and a "verified" flag), crw (CRW with
# per_thread = R on clustered or random free pages), churn (free while allocating).
NEAR_A_ALLOCATORS = ("rw", "rw_bm", "corw", "queue", "queue_build")
RIVALS = ("rw_bm", "corw")  # what the queue is measured against: the paper's bitmap walks
QUEUE_WORKLOADS = {
    "queue": "GETPAGE, queue list built before the timing (the paper's queue)",
    "queue_build": "GETPAGE, queue list built from the bitmap inside the timing",
    "churn": "churn: each thread frees its page and gets another, 8 rounds in one kernel",
}
CRW_ALLOCATORS = ("crw", "rw_bm", "corw")
CRW_COLORS = {"crw": "C4", "rw_bm": FIG11_COLORS["rw_bm"], "corw": FIG11_COLORS["corw"]}
MIB = float(1 << 20)


def pearson(xs, ys):
    """Pearson's r of two equal-length sequences; None with fewer than 3 points or
    when either has no spread (r is undefined there)."""
    xs, ys = [float(x) for x in xs], [float(y) for y in ys]
    if len(xs) != len(ys):
        raise ValueError(f"pearson: {len(xs)} x values, {len(ys)} y values")
    n = len(xs)
    if n < 3:
        return None
    mx, my = math.fsum(xs) / n, math.fsum(ys) / n
    sxy = math.fsum((x - mx) * (y - my) for x, y in zip(xs, ys))
    sxx = math.fsum((x - mx) ** 2 for x in xs)
    syy = math.fsum((y - my) ** 2 for y in ys)
    if sxx <= 0 or syy <= 0:
        return None
    return max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy)))


def tas_time_correlation(f11):
    """Per allocator of the Fig. 11 rows: Pearson's r between measured TAS (and WAS)
    and kernel time, on the values and on their logarithms (time spans decades
    with N, so the log form weighs every point alike)."""
    out = {}
    for a in sorted({r["allocator"] for r in f11 if "tas" in r and "was" in r and "ms" in r}):
        pts = [r for r in f11 if r["allocator"] == a and "tas" in r and "was" in r and "ms" in r]
        pos = [r for r in pts if r["tas"] > 0 and r["was"] > 0 and r["ms"] > 0]
        out[a] = {
            "points": len(pts),
            "tas_r": pearson([r["tas"] for r in pts], [r["ms"] for r in pts]),
            "was_r": pearson([r["was"] for r in pts], [r["ms"] for r in pts]),
            "tas_r_log": pearson([math.log(r["tas"]) for r in pos], [math.log(r["ms"]) for r in pos]),
            "was_r_log": pearson([math.log(r["was"]) for r in pos], [math.log(r["ms"]) for r in pos]),
        }
    return out


def queue_comparison(rows):
    """Every point where a queue variant and the bitmap walks did the same work:
    queue_speedup = (the faster of RW-BM and CoRW) ms / queue ms, > 1 where the
    queue wins.  Bytes held beside each."""
    cases = []
    f11 = _pick(rows, figure="fig11")
    churn = _pick(rows, figure="churn")
    sources = [("queue", f11, "queue"), ("queue_build", f11, "queue_build"), ("churn", churn, "queue")]
    for workload, table, variant in sources:
        for q in _pick(table, allocator=variant):
            key = {"T": q["T"], "free": q["free"], "N": q["N"]}
            rivals = {a: r[0] for a in RIVALS for r in [_pick(table, allocator=a, **key)] if r}
            if not rivals or q["ms"] <= 0:
                continue
            best = min(rivals, key=lambda a: rivals[a]["ms"])
            speedup = rivals[best]["ms"] / q["ms"]
            cases.append(
                {
                    "workload": workload,
                    **key,
                    "near_a": q.get("near_a", 0),
                    "queue_ms": q["ms"],
                    "rival": best,
                    "rival_ms": rivals[best]["ms"],
                    "queue_speedup": speedup,
                    "queue_wins": speedup > 1.0,
                    "queue_bytes": q.get("bytes_held"),
                    "rival_bytes": rivals[best].get("bytes_held"),
                }
            )
    return cases


def _at(c):
    s = f"T={c['T']} {c['free'] * 100:g}% free N={c['N']}"
    return s + (f" ({c['near_a']:g} A)" if c.get("near_a") else "")


def queue_summary(cases):
    """Per workload, and per free fraction within it: points, queue wins, and the
    smallest and largest queue speedup with where they are (ordered as
    QUEUE_WORKLOADS, then free fraction descending; 'all' first)."""
    out = []
    for w in QUEUE_WORKLOADS:
        ws = [c for c in cases if c["workload"] == w]
        groups = [("all", ws)] + [
            (fr, [c for c in ws if c["free"] == fr]) for fr in sorted({c["free"] for c in ws}, reverse=True)
        ]
        for fr, cs in groups:
            if not cs:
                continue
            lo = min(cs, key=lambda c: c["queue_speedup"])
            hi = max(cs, key=lambda c: c["queue_speedup"])
            out.append(
                {
                    "workload": w,
                    "free": fr,
                    "points": len(cs),
                    "queue_wins": sum(c["queue_wins"] for c in cs),
                    "min_speedup": lo["queue_speedup"],
                    "min_at": _at(lo),
                    "max_speedup": hi["queue_speedup"],
                    "max_at": _at(hi),
                }
            )
    return out


def near_a_table(f11):
    """The N ~ A points of Fig. 11: per (T, free, N/A) each allocator's ms, TAS and
    WAS, and the bytes held by the heap and by the queue."""
    out = []
    keys = sorted({(r["T"], r["free"], r["near_a"]) for r in f11 if r.get("near_a")}, key=lambda k: (k[0], -k[1], k[2]))
    for T, fr, x in keys:
        e = {"T": T, "free": fr, "n_over_a": x}
        for a in NEAR_A_ALLOCATORS:
            r = _pick(f11, allocator=a, T=T, free=fr, near_a=x)
            if not r:
                continue
            r = r[0]
            e.update(
                {
                    "N": r["N"],
                    "A": r["A"],
                    f"{a}_ms": r["ms"],
                    f"{a}_tas": r.get("tas"),
                    f"{a}_was": r.get("was"),
                    f"{a}_bytes": r.get("bytes_held"),
                }
            )
        out.append(e)
    return out


def crw_table(rows):
    """Per (free, layout, cluster pages, pages per thread): CRW, RW-BM and CoRW side
    by side, RW-BM's time over CRW's, and Eq. 9's TAS with the bitmap walk at the
    measured clusters (theory.crw_bm_tas with per_thread)."""
    crw = _pick(rows, figure="crw")
    out = []
    keys = []
    for r in crw:
        k = (r["free"], r["layout"], r["cluster_pages"], r["per_thread"])
        if k not in keys:
            keys.append(k)
    for fr, layout, c, R in keys:
        pts = {r["allocator"]: r for r in _pick(crw, free=fr, layout=layout, cluster_pages=c, per_thread=R)}
        any_r = next(iter(pts.values()))
        e = {
            "free": fr,
            "layout": layout,
            "cluster_pages": c,
            "per_thread": R,
            "N": any_r["N"],
            "requests": any_r["requests"],
            "A": any_r["A"],
            "clusters": any_r["clusters"],
            "bytes_held": any_r.get("bytes_held"),
        }
        for a in CRW_ALLOCATORS:
            if a in pts:
                e.update(
                    {
                        f"{a}_ms": pts[a]["ms"],
                        f"{a}_tas": pts[a]["tas"],
                        f"{a}_was": pts[a]["was"],
                        f"{a}_adjacent": pts[a].get("adjacent_fraction"),
                    }
                )
        if "crw" in pts and "rw_bm" in pts and pts["crw"]["ms"] > 0:
            e["rw_bm_over_crw_ms"] = pts["rw_bm"]["ms"] / pts["crw"]["ms"]
        try:
            e["crw_tas_eq9_bm"] = theory.crw_bm_tas(
                any_r["T"], e["A"], e["requests"], max(1, e["clusters"]), per_thread=R
            )
        except ValueError:
            e["crw_tas_eq9_bm"] = None
        out.append(e)
    return out


def bytes_table(rows):
    """Device bytes each structure held for the GETPAGE work, per pool size T (the
    rows carry them; every row of one T and structure holds the same): the heap
    (pool, bitmap, all metadata), the queue's list, the churn queue's ring, and
    the CUDA device-malloc heap the program reserves."""
    out = []
    for T in sorted({r["T"] for r in rows if "T" in r and "bytes_held" in r}):
        e = {"T": T}
        for name, figure, alloc in (
            ("heap", None, "rw_bm"),
            ("queue", "fig11", "queue"),
            ("queue_build", "fig11", "queue_build"),
            ("ring", "churn", "queue"),
        ):
            r = [
                x
                for x in rows
                if x.get("T") == T
                and x.get("allocator") == alloc
                and "bytes_held" in x
                and (figure is None or x["figure"] == figure)
            ]
            if r:
                e.update(
                    {
                        f"{name}_bytes": r[0]["bytes_held"],
                        f"{name}_pool_bytes": r[0].get("pool_bytes"),
                        f"{name}_meta_bytes": r[0].get("meta_bytes"),
                    }
                )
                if name == "heap":
                    e["heap_bitmap_bytes"] = r[0].get("bitmap_bytes")
        out.append(e)
    cm = [r for r in rows if r.get("allocator") == "cuda_malloc_16B" and "bytes_held" in r]
    if cm:
        out.append({"T": None, "cuda_malloc_heap_bytes": cm[0]["bytes_held"]})
    return out


def verification(rows):
    """(rows checked, [what failed]) over the rows that carry a 'verified' flag."""
    checked = [r for r in rows if "verified" in r]
    bad = [
        f"{r['figure']} {r.get('allocator', '')} "
        + ", ".join(f"{k}={r[k]}" for k in ("T", "free", "N", "layout") if k in r)
        + f": {r.get('check', '?')}"
        for r in checked
        if not r["verified"]
    ]
    return len(checked), bad


def _f(x, spec=".4g"):
    if x is None:
        return "-"
    return format(x, ".0f") if spec == ".4g" and abs(x) >= 1e4 else format(x, spec)  # 12288, not 1.229e+04


def _tables(near, crw, summary, corr, churn_rows, held=()):
    lines = []
    if held:
        lines += [
            "",
            "Bytes held for the GETPAGE work (MiB; meta = all but the pool):",
            "",
            "| T | heap: pool + meta (bitmap) | queue: pool + list | queue + build: + bitmap | "
            "churn ring: pool + ring |",
            "|---|---|---|---|---|",
        ]
        for e in held:
            if e["T"] is None:
                lines.append(
                    f"| CUDA device malloc | heap reserved by the program: "
                    f"{_f(_mib(e['cuda_malloc_heap_bytes']))} | | | |"
                )
                continue
            cell = lambda n: (
                "-"
                if f"{n}_bytes" not in e
                # noqa: E731
                else (
                    f"{_f(_mib(e[f'{n}_bytes']))} = {_f(_mib(e[f'{n}_pool_bytes']))} + {_f(_mib(e[f'{n}_meta_bytes']))}"
                )
            )
            heap = cell("heap") + (f" ({_f(_mib(e['heap_bitmap_bytes']))})" if "heap_bitmap_bytes" in e else "")
            lines.append(f"| {e['T']} | {heap} | {cell('queue')} | {cell('queue_build')} | {cell('ring')} |")
    if near:
        lines += [
            "",
            "N close to the free pages A (Fig. 11; kernel ms; bytes held by the heap / by the queue):",
            "",
            "| T | free | N/A | N | RW | RW-BM | CoRW | queue | queue + list build | heap MiB | queue MiB |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for e in near:
            lines.append(
                f"| {e['T']} | {e['free'] * 100:g}% | {e['n_over_a']:g} | {e.get('N', '-')} | "
                + " | ".join(_f(e.get(f"{a}_ms")) for a in NEAR_A_ALLOCATORS)
                + f" | {_f(_mib(e.get('rw_bytes')))} | {_f(_mib(e.get('queue_bytes')))} |"
            )
    if crw:
        lines += [
            "",
            "CRW in its regime: N threads x R pages each (ms; TAS and WAS per request; adjacent = share of "
            "a thread's pages right after its previous one; Eq. 9 with the bitmap walk):",
            "",
            "| free | free pages in | R | N | CRW ms | RW-BM ms | CoRW ms | RW-BM/CRW | CRW TAS | RW-BM TAS | "
            "CoRW TAS | CRW WAS | RW-BM WAS | CRW adjacent | Eq. 9 (BM) TAS |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for e in crw:
            where = f"clusters of {e['cluster_pages']}" if e["layout"] == "clusters" else "random pages"
            lines.append(
                f"| {e['free'] * 100:g}% | {where} | {e['per_thread']} | {e['N']} | "
                f"{_f(e.get('crw_ms'))} | {_f(e.get('rw_bm_ms'))} | {_f(e.get('corw_ms'))} | "
                f"{_f(e.get('rw_bm_over_crw_ms'), '.3g')} | {_f(e.get('crw_tas'))} | "
                f"{_f(e.get('rw_bm_tas'))} | "
                f"{_f(e.get('corw_tas'))} | {_f(e.get('crw_was'))} | {_f(e.get('rw_bm_was'))} | "
                f"{_f(e.get('crw_adjacent'), '.3f')} | {_f(e.get('crw_tas_eq9_bm'))} |"
            )
    if churn_rows:
        lines += [
            "",
            "Churn: N threads each free their page and get another, 8 rounds in one kernel (ms; bytes held):",
            "",
            "| T | free | N | queue | RW-BM | CoRW | RW-BM TAS | CoRW TAS | RW-BM WAS | CoRW WAS | "
            "heap MiB | queue MiB |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        keys = []
        for r in churn_rows:
            if (r["T"], r["free"], r["N"]) not in keys:
                keys.append((r["T"], r["free"], r["N"]))
        for T, fr, N in keys:
            p = {r["allocator"]: r for r in _pick(churn_rows, T=T, free=fr, N=N)}
            g = lambda a, k: p[a].get(k) if a in p else None  # noqa: E731
            lines.append(
                f"| {T} | {fr * 100:g}% | {N} | {_f(g('queue', 'ms'))} | {_f(g('rw_bm', 'ms'))} | "
                f"{_f(g('corw', 'ms'))} | {_f(g('rw_bm', 'tas'))} | {_f(g('corw', 'tas'))} | "
                f"{_f(g('rw_bm', 'was'))} | {_f(g('corw', 'was'))} | {_f(_mib(g('rw_bm', 'bytes_held')))} | "
                f"{_f(_mib(g('queue', 'bytes_held')))} |"
            )
    if summary:
        lines += [
            "",
            "Where the queue wins: queue speedup = (faster of RW-BM and CoRW) ms / queue ms; > 1: the queue is faster.",
            "",
            "| workload | free | points | queue wins | smallest speedup (where) | largest speedup (where) |",
            "|---|---|---|---|---|---|",
        ]
        for s in summary:
            fr = "all" if s["free"] == "all" else f"{s['free'] * 100:g}%"
            lines.append(
                f"| {QUEUE_WORKLOADS[s['workload']]} | {fr} | {s['points']} | {s['queue_wins']} | "
                f"{s['min_speedup']:.3g} ({s['min_at']}) | {s['max_speedup']:.3g} ({s['max_at']}) |"
            )
    if corr:
        lines += [
            "",
            "TAS and WAS against kernel time over the Fig. 11 rows (Pearson's r; log: of the logarithms):",
            "",
            "| allocator | points | r(TAS, ms) | r(WAS, ms) | r(log TAS, log ms) | r(log WAS, log ms) |",
            "|---|---|---|---|---|---|",
        ]
        for a, c in corr.items():
            lines.append(
                f"| {a} | {c['points']} | {_f(c['tas_r'], '.3f')} | {_f(c['was_r'], '.3f')} | "
                f"{_f(c['tas_r_log'], '.3f')} | {_f(c['was_r_log'], '.3f')} |"
            )
    return "\n".join(lines)


def _mib(b):
    return None if b is None else b / MIB


def _plot_fig10(ctx, plt, f10):
    panels = f10["panels"]
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(4 * (len(panels) + 1), 4), squeeze=False)
    labels = {m: f"CRW{i + 1} (M = {m:g}A)" for i, m in enumerate(f10["m_fractions"])}
    for ax, p in zip(axes[0], panels):
        ax.plot(p["N"], p["rw"], color="k", label="RW (Eq. 3)")
        for m in f10["m_fractions"]:
            ax.plot(p["N"], p["crw"][str(m)], ls="--", label=labels[m] + " (Eq. 9)")
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="threads N",
            ylabel="TAS (theory)",
            title=f"{p['free'] * 100:g}% free (A = {p['A']})",
        )
    bf, ax = f10["by_free"], axes[0][-1]
    ax.plot([f * 100 for f in bf["free"]], bf["rw"], color="k", label="RW (Eq. 3)")
    for m in f10["m_fractions"]:
        ax.plot([f * 100 for f in bf["free"]], bf["crw"][str(m)], ls="--", label=labels[m])
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="free pages (%)",
        ylabel="TAS (theory)",
        title=f"against free %, N = {bf['N']}",
    )
    axes[0][0].legend(fontsize=7)
    fig.suptitle(f"Fig. 10: TAS of RW and CRW from Eqs. 3 and 9, T = {f10['T']}", fontsize=9)
    fig.tight_layout()
    ctx.caption(fig, "TAS")
    fig.savefig(ctx.figure_path("rw_heap_fig10.png"), dpi=100)
    plt.close(fig)


def _plot_crw(ctx, plt, crw_rows):
    layouts = []
    for r in crw_rows:
        k = (r["layout"], r["cluster_pages"])
        if k not in layouts:
            layouts.append(k)
    fig, axes = plt.subplots(3, len(layouts), figsize=(4 * len(layouts), 9), squeeze=False)
    for j, (layout, c) in enumerate(layouts):
        for a in CRW_ALLOCATORS:
            for R, ls in zip(sorted({r["per_thread"] for r in crw_rows}), ("-", "--", ":")):
                pts = sorted(
                    _pick(crw_rows, allocator=a, layout=layout, cluster_pages=c, per_thread=R), key=lambda r: r["free"]
                )
                for i, key in enumerate(("ms", "tas", "was")):
                    if pts:
                        axes[i][j].plot(
                            [p["free"] * 100 for p in pts],
                            [p[key] for p in pts],
                            marker="o",
                            ls=ls,
                            color=CRW_COLORS[a],
                            label=f"{a} R={R}",
                        )
        for i, lab in enumerate(("kernel time (ms)", "TAS", "WAS")):
            axes[i][j].set(xscale="log", yscale="log", xlabel="free pages (%)", ylabel=lab)
        axes[0][j].set_title(f"free pages in clusters of {c}" if layout == "clusters" else "free pages at random")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("CRW in its regime: N threads x R pages each", fontsize=9)
    fig.tight_layout()
    ctx.caption(fig, "TAS", "WAS")
    fig.savefig(ctx.figure_path("rw_heap_crw.png"), dpi=100)
    plt.close(fig)


def _plot_tas_time(ctx, plt, f11, corr):
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    for a, c in corr.items():
        pts = [r for r in f11 if r["allocator"] == a and "tas" in r and "was" in r and r["ms"] > 0]
        for ax, key in zip(axes, ("tas", "was")):
            r = c[f"{key}_r"]
            ax.scatter(
                [p[key] for p in pts],
                [p["ms"] for p in pts],
                s=12,
                color=FIG11_COLORS.get(a),
                marker="x" if a == "queue_build" else "o",
                label=f"{a} (r = {_f(r, '.2f')}, log r = {_f(c[f'{key}_r_log'], '.2f')})",
            )
    for ax, key in zip(axes, ("TAS", "WAS")):
        ax.set(
            xscale="log",
            yscale="log",
            xlabel=f"measured {key}",
            ylabel="kernel time (ms)",
            title=f"Fig. 11 rows: {key} against time",
        )
        ax.legend(fontsize=6)
    fig.tight_layout()
    ctx.caption(fig, "TAS", "WAS")
    fig.savefig(ctx.figure_path("rw_heap_tas_time.png"), dpi=100)
    plt.close(fig)


def _plot_churn(ctx, plt, churn_rows):
    frees = sorted({r["free"] for r in churn_rows}, reverse=True)
    fig, axes = plt.subplots(1, len(frees), figsize=(4 * len(frees), 4), squeeze=False)
    for j, fr in enumerate(frees):
        for a in ("queue", "rw_bm", "corw"):
            for T, mk in zip(sorted({r["T"] for r in churn_rows}), ("o", "s", "^")):
                pts = sorted(_pick(churn_rows, allocator=a, free=fr, T=T), key=lambda r: r["N"])
                if pts:
                    axes[0][j].plot(
                        [p["N"] for p in pts],
                        [p["ms"] for p in pts],
                        marker=mk,
                        color=FIG11_COLORS[a],
                        label=f"{a} T={T}",
                    )
        axes[0][j].set(
            xscale="log",
            yscale="log",
            xlabel="threads N",
            ylabel="kernel time (ms), 8 rounds",
            title=f"churn, {fr * 100:g}% free",
        )
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(ctx.figure_path("rw_heap_churn.png"), dpi=100)
    plt.close(fig)


def evaluation_part1(ctx, rows):
    """Issue 14 item 1 from the program's rows: the N ~ A table, CRW in its regime,
    the fair queue comparison (where it wins and loses), the TAS/WAS-time
    correlation, Fig. 10 from theory, and a target that every checked output was
    right.  Returns the JSON additions and their table."""
    f11 = _pick(rows, figure="fig11")
    churn_rows = _pick(rows, figure="churn")
    near = near_a_table(f11)
    crw = crw_table(rows)
    cases = queue_comparison(rows)
    summary = queue_summary(cases)
    corr = tas_time_correlation([r for r in f11 if "T" in r])
    f10 = theory.fig10()
    held = bytes_table(rows)
    checked, bad = verification(rows)
    if checked:
        t = ctx.target("GETPAGE, CRW and churn outputs verified (1 = yes)", 0.0 if bad else 1.0, 1.0, "", True)
        t["where"] = f"{checked} rows checked" + (f"; {len(bad)} failed: " + "; ".join(bad[:5]) if bad else "")
    plt = ctx.pyplot()
    if plt is not None:
        _plot_fig10(ctx, plt, f10)
        if crw:
            _plot_crw(ctx, plt, _pick(rows, figure="crw"))
        if corr:
            _plot_tas_time(ctx, plt, [r for r in f11 if "T" in r], corr)
        if churn_rows:
            _plot_churn(ctx, plt, churn_rows)
    return {
        "fig10": f10,
        "near_a": near,
        "crw": crw,
        "queue_cases": cases,
        "queue_summary": summary,
        "tas_time_correlation": corr,
        "bytes_held": held,
        "verified_rows": checked,
        "verification_failures": bad,
        "table": _tables(near, crw, summary, corr, churn_rows, held),
    }


def run(ctx):
    result = _run_paper_figures(ctx)
    part = evaluation_part1(ctx, result["raw"]["rows"])
    table = part.pop("table")
    result.update(part)
    result["table"] = (result.get("table") or "") + ("\n" + table if table else "")
    return result
