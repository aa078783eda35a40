"""`gpudyn bench ggarray`: runs gpudyn_bench_ggarray, computes the issue's
targets (last doubling) and draws Figs. 3, 4, 5 and 6.

The static baseline is the fastest of the static array's allocations the program
measures (cudaMalloc, the library's cudaMallocAsync, one cuMemCreate mapping):
chosen on the `baselines` section's median read/write when present, else on Fig.
5's last doubling.  The JSON says which one and how each baseline is allocated.
Every row of the table has the bytes its structure holds beside its time."""

from __future__ import annotations

from . import theory

# Fig. 5's static rows, one per allocation (older results have one "static").
STATIC_ROWS = ("static_cudaMalloc", "static_cudaMallocAsync", "static_cuMemCreate")
FIG4_LABELS = {
    "atomic": "atomic (gpudyn: one atomicAdd per block part)",
    "warp_scan": "warp scan",
    "tensor_scan": "tensor-core scan",
    "per_element_atomic": "per-element atomicAdd (paper)",
    "per_element_atomic_as_compiled": "paper's atomicAdd as nvcc compiles it (warp-aggregated)",
    "plain_write": "plain write (4 B stores)",
    "plain_write_vec4": "plain write (16 B stores)",
}
TABLE_COLUMNS = ["section", "structure", "elements", "operation", "ms", "bytes_held"]


def static_baseline(raw: dict) -> dict:
    """The static row the targets compare with: {'row', 'allocation', 'chosen_by',
    'rw_ms' (each candidate's)}.  The fastest read/write of the static rows."""
    f5 = raw.get("fig5", {})
    cands = [s for s in STATIC_ROWS if s in f5]
    if not cands:
        row = "static" if "static" in f5 else None
        return {
            "row": row,
            "allocation": f5.get(row, {}).get("allocation", "cudaMallocAsync (older result)"),
            "chosen_by": "the only static row",
            "rw_ms": {row: f5[row]["rw_ms"][-1]} if row else {},
        }
    b = raw.get("baselines")
    med = {r["name"]: r["rw_ms"] for r in (b or {}).get("rows", []) if r["name"] in cands}
    if med:
        chosen_by = "fastest median read/write in the baselines section (allocations alternated)"
    else:
        med = {s: f5[s]["rw_ms"][-1] for s in cands}
        chosen_by = "fastest read/write at Fig. 5's last doubling"
    row = min(med, key=med.get)
    return {"row": row, "allocation": f5[row].get("allocation", row), "chosen_by": chosen_by, "rw_ms": med}


def fig6_rows(f6: dict) -> list[dict]:
    """Fig. 6 as one dict per (final size, work passes); older results (one size,
    arrays over the work) are converted."""
    if "rows" in f6:
        return list(f6["rows"])
    rows = []
    for i, w in enumerate(f6["work_passes"]):
        r = {"final_size": f6["final_size"], "work_passes": w}
        for k in (
            "ggarray_ms",
            "vmm_ms",
            "ggarray_inplace_ms",
            "speedup_ggarray_over_vmm",
            "speedup_ggarray_inplace_over_vmm",
        ):
            if k in f6:
                r[k] = f6[k][i]
        rows.append(r)
    return rows


def fig3_series(raw: dict) -> dict:
    """Fig. 3: the paper's model over σ, and bytes held against elements: the model
    beside each Fig. 5 structure's bytes measured after each doubling."""
    out = {"sigma_model": theory.fig3()}
    f5 = raw.get("fig5")
    if not f5:
        return out
    sizes = [int(n) for n in raw["sizes"]]
    lfvs = sorted({int(v.get("num_lfvectors", s[len("ggarray") :])) for s, v in f5.items() if s.startswith("ggarray")})
    out["model"] = theory.memory_vs_elements(sizes, sizes[-1], num_lfvectors=lfvs or (512,))
    out["measured"] = {
        s: {"elements": v.get("elements", sizes), "bytes_held": v["bytes_held"]}
        for s, v in f5.items()
        if "bytes_held" in v
    }
    return out


def _ggarray_bound_ratio(f5: dict) -> tuple[float, str] | None:
    """Worst, over the GGArray rows and doublings, of bytes held / (2 x element bytes
    + the first buckets + one mapping unit): the paper's 'at most 2x' with its allowances."""
    worst = None
    for s, v in f5.items():
        if not s.startswith("ggarray") or "bytes_held" not in v:
            continue
        L, first = int(v.get("num_lfvectors", s[len("ggarray") :])), int(v.get("first_bucket_elements", 1024))
        for n, b in zip(v["elements"], v["bytes_held"]):
            bound = theory.ggarray_bytes_bound(int(n), 4, L, first) + theory.MAPPING_GRANULARITY
            r = b / bound
            if worst is None or r > worst[0]:
                worst = (r, f"{s} at {int(n)} elements")
    return worst


def table_rows(raw: dict, baseline: dict) -> list[dict]:
    """One row per time the program measured at its largest size, with the bytes the
    structure holds for it."""
    rows = []
    f5 = raw.get("fig5", {})
    for s, v in f5.items():
        n = int(v.get("elements", raw["sizes"])[-1])
        held = v["bytes_held"][-1] if "bytes_held" in v else v.get("allocated_bytes")
        name = s + (" (baseline)" if s == baseline.get("row") and s != "static" else "")
        for op in ("grow", "insert", "rw"):
            rows.append(
                {
                    "section": "table2",
                    "structure": name,
                    "elements": n,
                    "operation": op + " (last doubling)",
                    "ms": float(v[op + "_ms"][-1]),
                    "bytes_held": held,
                }
            )
    f4 = raw.get("fig4_insert_ms")
    if f4:
        held = raw.get("fig4_bytes_held", {})
        n = int(raw["sizes"][-1] // 2)
        for k, ms in f4.items():
            plain = k.startswith("plain")
            rows.append(
                {
                    "section": "fig4",
                    "structure": "plain buffer" if plain else "static_cudaMalloc",
                    "elements": n,
                    "operation": FIG4_LABELS.get(k, k),
                    "ms": float(ms[-1]),
                    "bytes_held": held.get("plain_write" if plain else "static"),
                }
            )
    for r in raw.get("baselines", {}).get("rows", []):
        rows.append(
            {
                "section": "baselines",
                "structure": r["name"],
                "elements": raw["baselines"]["elements"],
                "operation": "rw (median)",
                "ms": float(r["rw_ms"]),
                "bytes_held": r["bytes_held"],
            }
        )
    fl = raw.get("flatten")
    if fl:
        rows.append(
            {
                "section": "flatten",
                "structure": "ggarray512",
                "elements": fl["elements"],
                "operation": "flatten",
                "ms": float(fl["flatten_ms"]),
                "bytes_held": fl.get("flatten_bytes_held"),
            }
        )
        rows.append(
            {
                "section": "flatten",
                "structure": "cudaMemcpy D2D",
                "elements": fl["elements"],
                "operation": "copy",
                "ms": float(fl["memcpy_ms"]),
                "bytes_held": fl.get("memcpy_bytes_held"),
            }
        )
    f6 = raw.get("fig6")
    if f6:
        rows6 = fig6_rows(f6)
        top = max(r["final_size"] for r in rows6)
        for r in rows6:
            if r["final_size"] != top:
                continue
            for way in ("ggarray", "vmm", "ggarray_inplace"):
                if way + "_ms" in r:
                    rows.append(
                        {
                            "section": "fig6",
                            "structure": way,
                            "elements": r["final_size"],
                            "operation": f"two-phase, {int(r['work_passes'])} work passes",
                            "ms": float(r[way + "_ms"]),
                            "bytes_held": r.get(way + "_bytes_held"),
                        }
                    )
    return rows


def run(ctx) -> dict:
    from ._common import markdown_table

    raw = ctx.run_program("gpudyn_bench_ggarray")
    base = static_baseline(raw)
    f5 = raw.get("fig5")
    if f5 and base["row"]:
        last = lambda s, k: f5[s][k][-1]  # noqa: E731
        st = base["row"]
        ctx.target(
            "GGArray512 insert / static insert",
            last("ggarray512", "insert_ms") / last(st, "insert_ms"),
            1.3,
            "ratio",
            False,
        )
        ctx.target(
            "GGArray512 read/write (spans) / static read/write",
            last("ggarray512", "rw_ms") / last(st, "rw_ms"),
            1.2,
            "ratio",
            False,
        )
        # Like for like: the baseline runs the VMM array's kernel on the same bytes.
        if "vmm" in f5:
            ctx.target(
                "static baseline read/write / VMM read/write (same kernel)",
                last(st, "rw_ms") / last("vmm", "rw_ms"),
                1.05,
                "ratio",
                False,
            )
    gl = raw.get("grow_last")  # median of repeated last doublings, both timed alike
    if gl or f5:
        grow_ratio = (
            gl["ggarray512_median_ms"][0] / gl["vmm_median_ms"][0]
            if gl
            else f5["ggarray512"]["grow_ms"][-1] / f5["vmm"]["grow_ms"][-1]
        )
        ctx.target("GGArray512 grow / VMM grow (last doubling, median)", grow_ratio, 1.0, "ratio", False)
    fl = raw.get("flatten")
    if fl:
        ctx.target(
            "flatten bandwidth / cudaMemcpy D2D bandwidth", fl["memcpy_ms"] / fl["flatten_ms"], 0.8, "fraction", True
        )
    f4 = raw.get("fig4_insert_ms")
    if f4:
        # The faster plain write (4-byte or 16-byte stores) is the baseline.
        best_write = min(f4["plain_write"][-1], f4.get("plain_write_vec4", f4["plain_write"])[-1])
        ctx.target(
            "static warp-scan insert bandwidth / plain write bandwidth",
            best_write / f4["warp_scan"][-1],
            0.6,
            "fraction",
            True,
        )
    if f5:
        ctx.target(
            "read/write did all 30 passes on every structure (1 = yes)",
            float(all(f5[s]["rw_all_passes_verified"] for s in f5)),
            1.0,
            "bool",
            True,
        )
        worst = _ggarray_bound_ratio(f5)
        if worst:
            t = ctx.target(
                "GGArray bytes held / (2 x element bytes + first buckets + 2 MiB), worst doubling",
                worst[0],
                1.0,
                "ratio",
                False,
            )
            t["where"] = worst[1]
    if "fig4_verified" in raw:
        v = raw["fig4_verified"]
        t = ctx.target(
            "Fig. 4: every inserted element present exactly once, host check (1 = yes)",
            float(bool(v.get("all"))),
            1.0,
            "bool",
            True,
        )
        bad = [k for k, x in v.items() if isinstance(x, dict) and not x.get("ok")]
        if bad:
            t["where"] = "failed: " + ", ".join(bad)
    if "baselines" in raw:
        b = raw["baselines"]["rows"]
        t = ctx.target(
            "baselines: every allocation's read/write verified (1 = yes)",
            float(all(r["verified"] for r in b)),
            1.0,
            "bool",
            True,
        )
        bad = [r["name"] for r in b if not r["verified"]]
        if bad:
            t["where"] = "failed: " + ", ".join(bad)
    f6 = raw.get("fig6")
    rows6 = fig6_rows(f6) if f6 else []
    if rows6 and "verified" in rows6[0]:
        t = ctx.target(
            "Fig. 6: every run's values verified (1 = yes)", float(all(r["verified"] for r in rows6)), 1.0, "bool", True
        )
        bad = [f"{r['final_size']} x {r['work_passes']}" for r in rows6 if not r["verified"]]
        if bad:
            t["where"] = "failed: " + ", ".join(bad)
    if rows6:
        # The paper's claim: with enough work the GGArray's overhead disappears.
        top = max(rows6, key=lambda r: (r["final_size"], r["work_passes"]))
        t = ctx.target(
            "Fig. 6: GGArray (flattened) / VMM speedup, largest size and work",
            top["speedup_ggarray_over_vmm"],
            0.95,
            "ratio",
            True,
        )
        t["where"] = f"{top['final_size']} elements, {int(top['work_passes'])} passes"
    fig3 = fig3_series(raw)
    _draw(ctx, raw, fig3, rows6)
    result = {"raw": raw, "static_baseline": base, "fig3": fig3}
    if f5:
        table2 = {
            s: {
                "grow_ms": v["grow_ms"][-1],
                "insert_ms": v["insert_ms"][-1],
                "rw_ms": v["rw_ms"][-1],
                "bytes_held": v["bytes_held"][-1] if "bytes_held" in v else v.get("allocated_bytes"),
                "allocation": v.get("allocation"),
            }
            for s, v in f5.items()
        }
        if base["row"] and "static" not in table2:
            table2["static"] = dict(table2[base["row"]], row=base["row"])  # the baseline under its old name
        result["table2_last_doubling_ms"] = table2
    rows = table_rows(raw, base)
    result["rows"] = rows
    # An older result has no bytes for some rows: an empty cell, not "None".
    result["table"] = markdown_table([{k: ("" if v is None else v) for k, v in r.items()} for r in rows], TABLE_COLUMNS)
    return result


def _draw(ctx, raw: dict, fig3: dict, rows6: list[dict]) -> None:
    plt = ctx.pyplot()
    if plt is None:
        return
    sizes = raw["sizes"]
    f4 = raw.get("fig4_insert_ms")
    lf = raw.get("fig4_lfvectors")
    if f4 or lf:
        fig, ax = plt.subplots(1, 3, figsize=(15, 4.5))
        for k, v in (f4 or {}).items():
            style = "--" if k.startswith("plain") else ":" if k.startswith("per_element") else "-"
            ax[0].loglog(
                [s / 2 if i else s for i, s in enumerate(sizes)], v, style, marker="o", label=FIG4_LABELS.get(k, k)
            )
        ax[0].set(title="Fig. 4: insertion on the static array (cudaMalloc)", xlabel="elements inserted", ylabel="ms")
        if lf:
            ax[1].semilogx(lf["lfvectors"], lf["grow_insert_ms"], marker="o", base=2)
            ax[2].loglog(lf["lfvectors"], lf["rw_b_ms"], marker="o", base=2, label="rw_b (spans)")
            ax[2].loglog(lf["lfvectors"], lf["rw_g_ms"], marker="o", base=2, label="rw_g (at)")
        ax[1].set(title="Fig. 4: grow+insert vs LFVectors", xlabel="LFVectors", ylabel="ms")
        ax[2].set(title="Fig. 4: read/write vs LFVectors", xlabel="LFVectors", ylabel="ms")
        for a in ax:
            if a.get_legend_handles_labels()[0]:
                a.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(ctx.figure_path("ggarray_fig4.png"), dpi=110)
        plt.close(fig)
    f5 = raw.get("fig5")
    if f5:
        fig, ax = plt.subplots(1, 3, figsize=(15, 4))
        for i, key in enumerate(("grow_ms", "insert_ms", "rw_ms")):
            for s in f5:
                ax[i].loglog(sizes, [max(v, 1e-4) for v in f5[s][key]], marker="o", label=s)
            ax[i].set(title=f"Fig. 5: {key}", xlabel="size after doubling", ylabel="ms")
            ax[i].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(ctx.figure_path("ggarray_fig5.png"), dpi=110)
        plt.close(fig)
    _draw_fig3(ctx, plt, fig3)
    if rows6:
        fig, ax = plt.subplots(1, 2, figsize=(11, 4))
        finals = sorted({r["final_size"] for r in rows6})
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, n in enumerate(finals):
            pts = sorted((r for r in rows6 if r["final_size"] == n), key=lambda r: r["work_passes"])
            c = colors[i % len(colors)]
            w = [r["work_passes"] for r in pts]
            ax[0].semilogx(
                w,
                [r["speedup_ggarray_over_vmm"] for r in pts],
                "-",
                color=c,
                marker="o",
                label=f"{n:.3g}: flattened (paper)",
            )
            if "speedup_ggarray_inplace_over_vmm" in pts[0]:
                ax[0].semilogx(
                    w,
                    [r["speedup_ggarray_inplace_over_vmm"] for r in pts],
                    "--",
                    color=c,
                    marker="s",
                    label=f"{n:.3g}: in place (spans)",
                )
        ax[0].axhline(1.0, color="gray", lw=0.8)
        ax[0].set(title="Fig. 6: two-phase speedup over VMM", xlabel="work passes", ylabel="speedup")
        ax[0].legend(fontsize=7)
        if "vmm_bytes_held" in rows6[0]:
            ways = (("ggarray", "GGArray + flat buffer"), ("vmm", "VMM"), ("ggarray_inplace", "GGArray in place"))
            for way, label in ways:
                by = {}
                for r in rows6:
                    by[r["final_size"]] = r[way + "_bytes_held"]
                ax[1].loglog(finals, [by[n] for n in finals], marker="o", label=label)
            ax[1].loglog(finals, [4 * n for n in finals], ":", color="gray", label="element bytes")
            ax[1].set(title="Fig. 6: bytes held during the work", xlabel="final elements", ylabel="bytes")
            ax[1].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(ctx.figure_path("ggarray_fig6.png"), dpi=110)
        plt.close(fig)


def _draw_fig3(ctx, plt, fig3: dict) -> None:
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    m = fig3["sigma_model"]
    mb = lambda xs: [4 * x / 1e6 for x in xs]  # noqa: E731  int32 elements -> MB
    ax[0].plot(m["sigma"], mb(m["static_elements"]), marker="o", label="static / semi-static (≤ 1 % failures)")
    ax[0].plot(m["sigma"], mb(m["ggarray_elements"]), marker="o", label="GGArray512 (mean)")
    ax[0].plot(m["sigma"], mb(m["needed_elements"]), "--", color="gray", label="needed (mean)")
    ax[0].set(title="Fig. 3 (model): 1e6 + 1e6·F int32, F ~ lognormal(0, σ)", xlabel="σ", ylabel="MB")
    ax[0].legend(fontsize=7)
    if "model" in fig3:
        mod = fig3["model"]
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        xs = mod["elements"]
        ax[1].loglog(xs, mod["element_bytes"], ":", color="gray", label="element bytes")
        meas = fig3["measured"]
        keys = [k for k in mod if k not in ("elements", "element_bytes")]
        for i, k in enumerate(keys):
            c = colors[i % len(colors)]
            ax[1].loglog(xs, mod[k], "-", color=c, label=f"{k} model")
            for s, v in meas.items():
                if s == k or (k == "static" and s.startswith("static")):
                    ax[1].loglog(v["elements"], v["bytes_held"], "o", color=c, ms=4, mfc="none", label=f"{s} measured")
        ax[1].set(title="Fig. 3: bytes held vs elements (model and measured)", xlabel="elements", ylabel="bytes")
        ax[1].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(ctx.figure_path("ggarray_fig3.png"), dpi=110)
    plt.close(fig)
