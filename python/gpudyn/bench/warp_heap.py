"""`gpudyn bench warp_heap`: FDGMalloc's Figs. 4-6 and the issue's targets,
from gpudyn_bench_warp_heap (warp heap on its default arena backing, on CUDA
malloc as in the paper, without superblocks, on the random-walk page heap, and
CUDA malloc itself, all measured in the same run).  The targets are those of
the default warp heap (arena)."""
from __future__ import annotations

from collections import defaultdict

ALLOCATORS = ("warp_heap", "warp_heap_cuda_malloc", "warp_heap_no_superblocks", "warp_heap_page_heap",
              "cuda_malloc")
LABELS = {"warp_heap": "warp heap, arena (default)", "warp_heap_cuda_malloc": "warp heap on CUDA malloc (paper)",
          "warp_heap_no_superblocks": "warp heap, no superblocks (CUDA malloc)",
          "warp_heap_page_heap": "warp heap on page heap", "cuda_malloc": "CUDA malloc"}
# Targets of issue 5 on the H200.
SPEEDUP_GOAL = 100.0          # x over CUDA malloc, 65,536 threads x 16 x 16 B
TARGET_MS_GOAL = 0.1          # ms for those 1M allocations (Gallatin: 0.106 ms on the H200)
FLATNESS_GOAL = 2.0           # max/min time per allocation over S <= superblock / 32


def run(ctx):
    raw = ctx.run_program("gpudyn_bench_warp_heap")
    rows = raw["rows"]
    by = defaultdict(list)
    for r in rows:
        by[(r["figure"], r["allocator"])].append(r)

    tgt = {r["allocator"]: r for r in rows if r["figure"] == "target"}
    wh, cm = tgt["warp_heap"], tgt["cuda_malloc"]
    ctx.target("1M x 16 B: speedup over CUDA malloc", cm["ms"] / wh["ms"], SPEEDUP_GOAL, "x", True)
    ctx.target("1M x 16 B: warp heap time", wh["ms"], TARGET_MS_GOAL, "ms", False)
    sb = raw["superblock_bytes"]
    flat = [r["ns_per_alloc"] for r in by[("fig4", "warp_heap")] if r["s"] * 32 <= sb]
    ctx.target(f"Fig. 4: time per allocation max/min over S <= {sb // 32} B", max(flat) / min(flat),
               FLATNESS_GOAL, "ratio", False)
    failed = sum(r["failed"] for r in rows)

    plt = ctx.pyplot()
    if plt is not None:
        fig, ax = plt.subplots(figsize=(6, 4))
        for a in ALLOCATORS:
            pts = sorted(by[("fig4", a)], key=lambda r: r["s"])
            if not pts:
                continue
            ax.plot([r["s"] for r in pts], [r["ms"] for r in pts], marker="o", label=LABELS[a])
        ax.set(xscale="log", yscale="log", xlabel="allocation size S (bytes)", ylabel="kernel time (ms)",
               title="Fig. 4: 64 threads x 16 allocations x S")
        ax.legend()
        fig.tight_layout()
        fig.savefig(ctx.figure_path("warp_heap_fig4.png"), dpi=120)
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(6, 4))
        for a in ALLOCATORS:
            mean = defaultdict(list)
            for r in by[("fig5", a)]:
                mean[r["threads"]].append(r["ns_per_alloc"])
            xs = sorted(mean)
            if not xs:
                continue
            ax.plot(xs, [sum(mean[x]) / len(mean[x]) for x in xs], marker="o", label=LABELS[a])
        ax.set(xscale="log", yscale="log", xlabel="threads X", ylabel="mean time per allocation (ns)",
               title="Fig. 5: mean over N, S (measured configurations)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(ctx.figure_path("warp_heap_fig5.png"), dpi=120)
        plt.close(fig)

        fig, ax = plt.subplots(figsize=(6, 4))
        for a, style in (("warp_heap", "-"), ("warp_heap_cuda_malloc", "--")):
            for n in sorted({r["n"] for r in by[("fig6", a)]}):
                pts = sorted((r for r in by[("fig6", a)] if r["n"] == n), key=lambda r: r["threads"])
                ax.plot([r["threads"] // 1024 for r in pts], [r["ms"] for r in pts], style, marker="o",
                        label=f"{'arena' if a == 'warp_heap' else 'CUDA malloc'}, N = {n}")
        ax.set(xscale="log", yscale="log", xlabel="blocks of 1024 threads", ylabel="kernel time (ms)",
               title="Fig. 6: warp heap scalability, 16 B")
        ax.legend()
        fig.tight_layout()
        fig.savefig(ctx.figure_path("warp_heap_fig6.png"), dpi=120)
        plt.close(fig)

    lines = ["| allocator | ms (65,536 x 16 x 16 B) | ns/alloc |", "|---|---|---|"]
    for a in ALLOCATORS:
        if a in tgt:
            lines.append(f"| {a} | {tgt[a]['ms']:.4g} | {tgt[a]['ns_per_alloc']:.4g} |")
    return {"raw": raw, "failed_allocations": failed, "table": "\n".join(lines)}
