"""Shared driver of the benchmarks: runs a benchmark program with a progress
display, collects its JSON, evaluates targets, writes results and plots."""
from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

_PROGRESS_RE = re.compile(r"^progress\s+(\d+)\s+(\d+)\s*(.*)$")


def gpu_slug(name: str) -> str:
    """'NVIDIA H200' -> 'h200' (the results folder of that GPU)."""
    s = name.lower().replace("nvidia", "").strip()
    s = re.sub(r"[^a-z0-9]+", "-", s).strip("-")
    return s.split("-")[0] if s.startswith(("h100", "h200", "a100", "b200")) else s


def bench_program_dirs() -> list[str]:
    dirs = []
    if os.environ.get("GPUDYN_BENCH_DIR"):
        dirs.append(os.environ["GPUDYN_BENCH_DIR"])
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    dirs.append(os.path.join(pkg, "bin"))
    return dirs


class Context:
    """What a benchmark module's run(ctx) gets."""

    def __init__(self, name: str, out_dir: str, quick: bool, device: dict):
        self.name = name
        self.out_dir = out_dir
        self.quick = quick
        self.device = device
        self.targets: list[dict] = []
        self.plots: list[str] = []

    def find_program(self, program: str) -> str:
        for d in bench_program_dirs():
            p = os.path.join(d, program)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
        raise FileNotFoundError(f"gpudyn bench: program {program} not found in {bench_program_dirs()}")

    def run_program(self, program: str, args: list[str] | None = None) -> dict:
        """Runs a benchmark program, showing its progress lines; returns its JSON."""
        path = self.find_program(program)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "raw.json")
            cmd = [path, "--out", out] + (["--quick"] if self.quick else []) + list(args or [])
            t0 = time.time()
            proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, bufsize=1)
            tail: list[str] = []
            for line in proc.stderr:
                m = _PROGRESS_RE.match(line.strip())
                if m:
                    done, total, label = int(m.group(1)), int(m.group(2)), m.group(3)
                    self._show_progress(done, total, label, time.time() - t0)
                else:
                    tail.append(line)
                    sys.stderr.write(line)
            rc = proc.wait()
            sys.stderr.write("\n")
            if rc != 0:
                raise RuntimeError(f"gpudyn bench: {shlex.join(cmd)} exited with {rc}: {''.join(tail[-20:])}")
            with open(out, encoding="utf-8") as f:
                return json.load(f)

    def _show_progress(self, done: int, total: int, label: str, elapsed: float) -> None:
        width = 30
        filled = width * done // max(total, 1)
        bar = "#" * filled + "-" * (width - filled)
        sys.stderr.write(f"\r[{self.name}] [{bar}] {done}/{total} {elapsed:6.1f}s {label[:40]:<40}")
        sys.stderr.flush()

    def target(self, name: str, value: float, goal: float, unit: str, higher_is_better: bool) -> dict:
        """Records a target {'name','value','goal','unit','met'} computed from this run."""
        met = bool(value >= goal) if higher_is_better else bool(value <= goal)
        t = {"name": name, "value": float(value), "goal": float(goal), "unit": unit, "met": met,
             "comparison": ">=" if higher_is_better else "<="}
        self.targets.append(t)
        return t

    def figure_path(self, filename: str) -> str:
        os.makedirs(self.out_dir, exist_ok=True)
        p = os.path.join(self.out_dir, filename)
        self.plots.append(os.path.basename(p))
        return p

    def pyplot(self):
        """matplotlib.pyplot with a non-interactive backend, or None if missing."""
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            return plt
        except ImportError:
            print(f"[{self.name}] matplotlib is not installed: no plots", file=sys.stderr)
            return None


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def run_benchmarks(names: list[str], out_dir: str | None, quick: bool, argv: list[str]) -> int:
    from ..info import cuda_versions, device_info
    from . import load

    dev = device_info(0)
    dev.update(cuda_versions())
    out_dir = out_dir or os.path.join("benchmarks", "results", gpu_slug(dev["name"]))
    os.makedirs(out_dir, exist_ok=True)
    command = "gpudyn " + " ".join(shlex.quote(a) for a in argv[1:]) if argv else "gpudyn bench"
    failed = 0
    for name in names:
        ctx = Context(name, out_dir, quick, dev)
        print(f"== gpudyn bench {name} on {dev['name']}{' (quick)' if quick else ''}", flush=True)
        t0 = time.time()
        results = load(name).run(ctx)
        results = dict(results or {})
        results.update({
            "benchmark": name,
            "device": dev["name"],
            "device_info": dev,
            "command": command,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "quick": quick,
            "seconds": round(time.time() - t0, 1),
            "targets": ctx.targets,
            "plots": ctx.plots,
        })
        path = os.path.join(out_dir, f"{name}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)
        print(f"\n### {name}: targets ({dev['name']})\n")
        print(markdown_table(ctx.targets, ["name", "value", "comparison", "goal", "unit", "met"]))
        if results.get("table"):
            print("\n" + results["table"])
        print(f"\nwrote {path}" + (f" and {len(ctx.plots)} plot(s)" if ctx.plots else ""), flush=True)
        failed += sum(not t["met"] for t in ctx.targets)
    # Missed targets are results, not errors: the exit code says only that the run completed.
    if failed:
        print(f"\n{failed} target(s) missed; see the tables above", flush=True)
    return 0
