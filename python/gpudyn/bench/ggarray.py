"""`gpudyn bench ggarray`: runs gpudyn_bench_ggarray, computes the issue's
targets (last doubling) and draws Fig. 4, Fig. 5 and Fig. 6."""
from __future__ import annotations


def run(ctx) -> dict:
    raw = ctx.run_program("gpudyn_bench_ggarray")
    f5 = raw["fig5"]
    last = lambda s, k: f5[s][k][-1]  # noqa: E731
    ctx.target("GGArray512 insert / static insert", last("ggarray512", "insert_ms") / last("static", "insert_ms"),
               1.3, "ratio", False)
    ctx.target("GGArray512 read/write (spans) / static read/write",
               last("ggarray512", "rw_ms") / last("static", "rw_ms"), 1.2, "ratio", False)
    gl = raw.get("grow_last")  # median of repeated last doublings, both timed alike
    grow_ratio = (gl["ggarray512_median_ms"][0] / gl["vmm_median_ms"][0] if gl
                  else last("ggarray512", "grow_ms") / last("vmm", "grow_ms"))
    ctx.target("GGArray512 grow / VMM grow (last doubling, median)", grow_ratio, 1.0, "ratio", False)
    fl = raw["flatten"]
    ctx.target("flatten bandwidth / cudaMemcpy D2D bandwidth", fl["memcpy_ms"] / fl["flatten_ms"], 0.8, "fraction",
               True)
    f4 = raw["fig4_insert_ms"]
    # The faster plain write (4-byte or 16-byte stores) is the baseline.
    best_write = min(f4["plain_write"][-1], f4.get("plain_write_vec4", f4["plain_write"])[-1])
    ctx.target("static warp-scan insert bandwidth / plain write bandwidth", best_write / f4["warp_scan"][-1],
               0.6, "fraction", True)
    ctx.target("read/write did all 30 passes on every structure (1 = yes)",
               float(all(f5[s]["rw_all_passes_verified"] for s in f5)), 1.0, "bool", True)
    plt = ctx.pyplot()
    if plt is not None:
        sizes = raw["sizes"]
        fig, ax = plt.subplots(1, 3, figsize=(15, 4))
        for k in ("atomic", "warp_scan", "tensor_scan", "plain_write", "plain_write_vec4"):
            if k in f4:
                ax[0].loglog(sizes, f4[k], marker="o", label=k)
        ax[0].set(title="Fig. 4: insertion on the static array", xlabel="elements inserted (last doubling)", ylabel="ms")
        lf = raw["fig4_lfvectors"]
        ax[1].semilogx(lf["lfvectors"], lf["grow_insert_ms"], marker="o", base=2)
        ax[1].set(title="Fig. 4: grow+insert vs LFVectors", xlabel="LFVectors", ylabel="ms")
        ax[2].loglog(lf["lfvectors"], lf["rw_b_ms"], marker="o", base=2, label="rw_b (spans)")
        ax[2].loglog(lf["lfvectors"], lf["rw_g_ms"], marker="o", base=2, label="rw_g (at)")
        ax[2].set(title="Fig. 4: read/write vs LFVectors", xlabel="LFVectors", ylabel="ms")
        for a in ax:
            a.legend() if a.get_legend_handles_labels()[0] else None
        fig.tight_layout()
        fig.savefig(ctx.figure_path("ggarray_fig4.png"), dpi=110)
        fig, ax = plt.subplots(1, 3, figsize=(15, 4))
        for i, key in enumerate(("grow_ms", "insert_ms", "rw_ms")):
            for s in f5:
                ax[i].loglog(sizes, [max(v, 1e-4) for v in f5[s][key]], marker="o", label=s)
            ax[i].set(title=f"Fig. 5: {key}", xlabel="size after doubling", ylabel="ms")
            ax[i].legend()
        fig.tight_layout()
        fig.savefig(ctx.figure_path("ggarray_fig5.png"), dpi=110)
        f6 = raw["fig6"]
        fig, ax = plt.subplots(figsize=(5, 4))
        ax.semilogx(f6["work_passes"], f6["speedup_ggarray_over_vmm"], marker="o", label="GGArray, flattened (paper)")
        if "speedup_ggarray_inplace_over_vmm" in f6:
            ax.semilogx(f6["work_passes"], f6["speedup_ggarray_inplace_over_vmm"], marker="o", label="GGArray in place (spans)")
        ax.legend()
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set(title="Fig. 6: two-phase speedup GGArray/VMM", xlabel="work passes", ylabel="speedup")
        fig.tight_layout()
        fig.savefig(ctx.figure_path("ggarray_fig6.png"), dpi=110)
    table2 = {s: {"grow_ms": last(s, "grow_ms"), "insert_ms": last(s, "insert_ms"), "rw_ms": last(s, "rw_ms")}
              for s in f5}
    return {"raw": raw, "table2_last_doubling_ms": table2}
