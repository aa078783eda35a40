"""`gpudyn bench rw_heap`: Pham et al.'s Figs. 11-15, 17 and 18 and the issue's
targets, from gpudyn_bench_rw_heap (RW, RW-BM, CoRW, RW_malloc, a queue
baseline, the DO atomic counter and CUDA device malloc, all in the same run).

Fig. 13 has a free-percentage axis (rows `fig13_free`: RW_malloc on a heap
pre-filled to 100/50/10/1 % free); the hash join (Figs. 17, 18) fills pages as
the paper's Fig. 16 and every output is checked against a host reference.  The
tables give times against DO (the join's floor) and against the queue, not only
speedups over CUDA malloc."""
from __future__ import annotations

from collections import defaultdict

from .. import theory

# Targets of issue 4 on the H200.
CORW_MS_GOAL = 0.05            # ms, CoRW GETPAGE, 1M threads, T = 16M pages, 50% free
CORW_SPEEDUP_GOAL = 1000.0     # x over CUDA malloc of 16 B by the same threads
TAS_RATIO_GOAL = 25.0          # RW/RW-BM TAS at 0.5% free (Theorem 2's limit is 32)
MALLOC_MIXED_MS_GOAL = 1.1     # ms, RW_malloc 1M threads, mixed 16..4096 B
MALLOC_4096_MS_GOAL = 2.0      # ms, RW_malloc 1M threads x 4096 B
MALLOC_SPEEDUP_GOAL = 100.0    # x over CUDA malloc, same sizes and threads
THEORY_TOLERANCE = 0.15        # |TAS / Eq. 3 or 5 - 1|


def _pick(rows, **kw):
    return [r for r in rows if all(r.get(k) == v for k, v in kw.items())]


def run(ctx):
    raw = ctx.run_program("gpudyn_bench_rw_heap")
    rows = raw["rows"]
    f11 = _pick(rows, figure="fig11")
    Tmax = max(r["T"] for r in f11 if "T" in r)
    Nmax = max(r["N"] for r in f11 if "T" in r)
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
        fig12.append({"T": T, "free": r["free"], "N": N, "tas_ratio": r["tas"] / b["tas"],
                      "was_ratio": r["was"] / b["was"],
                      "tas_ratio_theory": theory.rw_tas(T, A, N) / theory.rw_bm_tas(T, A, N),
                      "was_ratio_theory": theory.rw_was_bound(T, A, N) / theory.rw_bm_was_bound(T, A, N),
                      "rw_tas_rel_err": r["tas"] / theory.rw_tas(T, A, N) - 1,
                      "rw_bm_tas_rel_err": b["tas"] / theory.rw_bm_tas(T, A, N) - 1})
    low = [x for x in fig12 if x["free"] == 0.005]
    if low:
        best = max(low, key=lambda x: x["N"])
        ctx.target(f"RW/RW-BM TAS ratio at 0.5% free (T={best['T']}, N={best['N']})", best["tas_ratio"],
                   TAS_RATIO_GOAL, "x", True)
    if fig12:
        worst = max(max(abs(x["rw_tas_rel_err"]), abs(x["rw_bm_tas_rel_err"])) for x in fig12 if x["free"] >= 0.01)
        ctx.target("TAS vs Eq. 3 / Eq. 5, worst relative error at >= 1% free", worst, THEORY_TOLERANCE, "", False)

    f13 = _pick(rows, figure="fig13")
    N13 = max(r["N"] for r in f13)
    def ms13(alloc, scen):
        r = _pick(f13, allocator=alloc, scenario=scen, N=N13)
        return r[0]["ms"] if r else float("nan")
    ctx.target(f"RW_malloc mixed 16-4096 B, N={N13}", ms13("rw_malloc", "mixed_16_4096"), MALLOC_MIXED_MS_GOAL, "ms", False)
    ctx.target(f"RW_malloc 4096 B, N={N13}", ms13("rw_malloc", "4096"), MALLOC_4096_MS_GOAL, "ms", False)
    ctx.target(f"RW_malloc speedup over CUDA malloc, mixed 16-4096 B, N={N13}",
               ms13("cuda_malloc", "mixed_16_4096") / ms13("rw_malloc", "mixed_16_4096"), MALLOC_SPEEDUP_GOAL, "x", True)
    ctx.target(f"RW_malloc speedup over CUDA malloc, 4096 B, N={N13}",
               ms13("cuda_malloc", "4096") / ms13("rw_malloc", "4096"), MALLOC_SPEEDUP_GOAL, "x", True)

    join = _join_targets(ctx, rows)
    f13free = fig13_free_summary(rows)
    _fig13_free_targets(ctx, rows)

    plt = ctx.pyplot()
    if plt is not None:
        algos = ("queue", "rw", "rw_bm", "corw")
        frees = sorted({r["free"] for r in f11 if "free" in r}, reverse=True)
        for T in sorted({r["T"] for r in f11 if "T" in r}):
            fig, axes = plt.subplots(3, len(frees), figsize=(4 * len(frees), 9), squeeze=False)
            for j, fr in enumerate(frees):
                for a in algos:
                    pts = sorted(_pick(f11, allocator=a, T=T, free=fr), key=lambda r: r["N"])
                    for i, key in enumerate(("ms", "tas", "was")):
                        axes[i][j].plot([p["N"] for p in pts], [p[key] for p in pts], marker="o", label=a)
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
                line = ax.plot([p["N"] for p in pts], [p[f"{k}_ratio"] for p in pts], marker="o", label=f"{fr * 100:g}% free")
                ax.plot([p["N"] for p in pts], [p[f"{k}_ratio_theory"] for p in pts], ls="--", color=line[0].get_color())
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
            line = ax.plot([p["page_size"] for p in pts], [p["utilisation"] for p in pts], marker="o", label=f"RW_malloc {X} B")
            ax.axhline(pts[0]["pow2_class_utilisation"], ls="--", color=line[0].get_color(), lw=0.8)
        ax.set(xscale="log", xlabel="page size (B)", ylabel="utilisation at OOM",
               title="Fig. 15 (dashed: power-of-two size classes)")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(ctx.figure_path("rw_heap_fig15.png"), dpi=100)
        plt.close(fig)

        _plot_join(ctx, plt, rows)

    lines = ["| experiment | rw_heap (ms) | baseline (ms) |", "|---|---|---|"]
    if corw:
        lines.append(f"| CoRW GETPAGE N={Nmax} T={Tmax} 50% free | {corw[0]['ms']:.4g} | CUDA malloc 16 B: {cm16[Nmax]:.4g} |")
    for s in ("16", "4096", "mixed_16_4096", "8192"):
        lines.append(f"| RW_malloc {s} N={N13} | {ms13('rw_malloc', s):.4g} | CUDA malloc: {ms13('cuda_malloc', s):.4g} |")
    lines += _join_table_lines(rows)
    tables = ["\n".join(lines), fig13_free_markdown(f13free), join_markdown(rows), queue_markdown(rows)]
    return {"raw": raw, "fig12": fig12, "fig13_free": f13free, "join": join_summary(rows),
            "queue_comparison": queue_comparison(rows), "missing_join_outputs": join["missing"],
            "join_errors": join["errors"], "table": "\n\n".join(t for t in tables if t)}


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
        out.append({"size": r["size"], "N": r["N"], "free_pct": r["free_pct"],
                    "free_pct_measured": r.get("free_pct_measured"), "ms": r["ms"], "failed": r.get("failed", 0),
                    "bytes_requested": req, "bytes_held": r.get("bytes_held"),
                    "held_over_requested": r["bytes_held"] / req if req and r.get("bytes_held") is not None
                    else float("nan"),
                    "cuda_malloc_ms": c if c is not None else float("nan"),
                    "speedup_over_cuda_malloc": c / r["ms"] if c is not None and r["ms"] > 0 else float("nan"),
                    "verified": bool(r.get("verified", False))})
    out.sort(key=lambda x: (_size_order(x["size"]), x["N"], -x["free_pct"]))
    return out


def _size_order(size):
    return (1, 0) if not str(size).isdigit() else (0, int(size))


def _fig13_free_targets(ctx, rows):
    pts = [r for r in _pick(rows, figure="fig13_free") if not r.get("skipped")]
    if not pts:
        return
    bad = sum(not r.get("verified", False) for r in pts)
    ctx.target("RW_malloc on pre-filled heaps (demand <= free/2): points with a failure or a bad pointer",
               bad, 0, "points", False)


def fig13_free_markdown(summary):
    if not summary:
        return ""
    lines = ["Fig. 13, free-percentage axis: RW_malloc on a heap pre-filled (whole bitmap words) to each free share; "
             "CUDA malloc on a fresh heap (fig13 rows) where measured.",
             "| size | N | free % (measured) | RW_malloc ms | failed | bytes held / requested | CUDA malloc ms "
             "| speedup over CUDA malloc | checked |", "|---|---|---|---|---|---|---|---|---|"]
    for x in summary:
        fm = x["free_pct_measured"]
        lines.append(f"| {x['size']} | {x['N']} | {x['free_pct']:g} ({fm:.3g}) | {x['ms']:.4g} | {x['failed']} | "
                     f"{x['held_over_requested']:.3g} | {x['cuda_malloc_ms']:.4g} | "
                     f"{x['speedup_over_cuda_malloc']:.4g} | {'yes' if x['verified'] else 'NO'} |")
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
        ax.set(xscale="log", yscale="log", xlabel="threads N", ylabel="kernel time (ms)",
               title=f"Fig. 13: {size} B" if str(size).isdigit() else f"Fig. 13: {size.replace('_', ' ')} B")
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
            out.append({
                "figure": figure, "allocator": r["allocator"], "tuples": r.get("tuples"),
                "page_size": r.get("page_size"), "ms": r["ms"], "total_ms": total,
                "ms_over_do": r["ms"] / d["ms"] if d and d["ms"] > 0 else float("nan"),
                "speedup_over_do": d.get("total_ms", d["ms"]) / total if d and total > 0 else float("nan"),
                "speedup_over_cuda_malloc": c.get("total_ms", c["ms"]) / total if c and total > 0 else float("nan"),
                "pages_used": r.get("pages_used"), "bytes_held": r.get("bytes_held"),
                "output_bytes": r.get("output_bytes"),
                "held_over_output": r["bytes_held"] / r["output_bytes"] if r.get("output_bytes") and
                r.get("bytes_held") is not None else float("nan"),
                "verified": bool(r.get("verified", False))})
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
            ctx.target(f"Hash-join probe, CoRW time / DO time, {nbig} tuples", co[0]["ms"] / do[0]["ms"], 1.0,
                       "ratio", False)
    bad = [r for r in join_rows if not r.get("verified", False)]
    if join_rows:
        ctx.target("Hash-join runs whose output differs from the host reference (fig17, fig18)", len(bad), 0,
                   "runs", False)
    return {"missing": sum(r.get("missing", 0) for r in join_rows),
            "errors": sum(r.get("missing", 0) + r.get("invalid", 0) + r.get("duplicate", 0) for r in join_rows)}


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
    return [f"| hash-join probe {nbig} tuples, {r['allocator']} | {r['ms']:.4g} | DO: {d:.4g} "
            f"({r['ms'] / d:.3g}x DO's time) |"
            for r in sorted(_pick(f17, tuples=nbig), key=lambda r: _join_rank(r["allocator"]))
            if r["allocator"] != "DO"]


def join_markdown(rows):
    summ = join_summary(rows)
    if not summ:
        return ""
    parts = []
    for figure, axis in JOIN_AXIS.items():
        pts = [x for x in summ if x["figure"] == figure]
        if not pts:
            continue
        title = ("Fig. 17: hash join (build + probe; no partition stage), 64 B pages, each thread filling its pages"
                 if figure == "fig17" else
                 "Fig. 18: hash join under page sizes; the paper's baseline (Ouroboros) is not available here, "
                 "so speedups are over DO (and CUDA malloc is not run at this size)")
        lines = [title, f"| {axis} | allocator | probe ms | total ms | probe / DO | total speedup over DO | "
                        "pages | bytes held / output | checked |", "|---|---|---|---|---|---|---|---|---|"]
        for x in pts:
            lines.append(f"| {x[axis]} | {x['allocator']} | {x['ms']:.4g} | {x['total_ms']:.4g} | "
                         f"{x['ms_over_do']:.3g} | {x['speedup_over_do']:.3g} | {x['pages_used']} | "
                         f"{x['held_over_output']:.3g} | {'yes' if x['verified'] else 'NO'} |")
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
            axes[1].plot(xs, [p["speedup_over_do"] for p in pts], marker="o", label=a)
            axes[2].plot(xs, [p["bytes_held"] for p in pts], marker="o", label=a)
        out = sorted({(x[axis], x["output_bytes"]) for x in pts_all if x["output_bytes"]})
        if out:
            axes[2].plot([o[0] for o in out], [o[1] for o in out], ls="--", color="k", label="output bytes")
        xlabel = "tuples" if axis == "tuples" else "page size (B)"
        what = ("Fig. 17: hash join, 64 B pages" if figure == "fig17" else
                f"Fig. 18: hash join, {pts_all[0]['tuples']} tuples")
        axes[0].set(xscale="log", yscale="log", xlabel=xlabel, ylabel="build + probe time (ms)", title=what)
        axes[1].axhline(1.0, color="grey", lw=0.5)
        axes[1].set(xscale="log", xlabel=xlabel, ylabel="speedup over DO (total time)",
                    title="baseline: DO (no Ouroboros here)")
        axes[2].set(xscale="log", yscale="log", xlabel=xlabel, ylabel="bytes held (pages used x page size)",
                    title="memory the output holds")
        for ax in axes:
            ax.legend(fontsize=7)
        fig.tight_layout()
        ctx.caption(fig, "DO")
        fig.savefig(ctx.figure_path(f"rw_heap_{figure}.png"), dpi=100)
        plt.close(fig)


# ---- GETPAGE against the queue (Fig. 11 rows) -------------------------------

def queue_comparison(rows):
    """Each Fig. 11 point with a queue baseline (any allocator named queue*):
    each walk's time over the queue's (above 1: the queue is faster) and
    whether the queue beats every walk measured there."""
    f11 = _pick(rows, figure="fig11")
    walks = ("rw", "rw_bm", "corw", "crw")
    out = []
    for q in f11:
        if not str(q.get("allocator", "")).startswith("queue") or "T" not in q or not q.get("ms"):
            continue
        at = {r["allocator"]: r["ms"] for r in f11 if r.get("T") == q["T"] and r.get("free") == q["free"]
              and r.get("N") == q["N"] and r.get("allocator") in walks and "ms" in r}
        if not at:
            continue
        x = {"queue": q["allocator"], "T": q["T"], "free": q["free"], "N": q["N"], "queue_ms": q["ms"]}
        x.update({f"{a}_over_queue": ms / q["ms"] for a, ms in at.items()})
        x["queue_faster_than_all"] = min(at.values()) > q["ms"]
        out.append(x)
    return out


def queue_markdown(rows):
    qc = queue_comparison(rows)
    if not qc:
        return ""
    lines = []
    for qname in sorted({x["queue"] for x in qc}):
        pts = [x for x in qc if x["queue"] == qname]
        wins = sum(x["queue_faster_than_all"] for x in pts)
        lines.append(f"GETPAGE against the {qname} baseline: the queue is faster than every walk at {wins} of "
                     f"{len(pts)} Fig. 11 points (ratios: walk time / queue time, above 1 the queue wins).")
        lines += ["| T | free | N | queue ms | RW / queue | RW-BM / queue | CoRW / queue |", "|---|---|---|---|---|---|---|"]
        for x in sorted(pts, key=lambda x: (x["T"], -x["free"], x["N"])):
            cells = " | ".join(f"{x[k]:.3g}" if k in x else "" for k in ("rw_over_queue", "rw_bm_over_queue",
                                                                            "corw_over_queue"))
            lines.append(f"| {x['T']} | {x['free'] * 100:g}% | {x['N']} | {x['queue_ms']:.4g} | {cells} |")
    return "\n".join(lines)
