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

from ..info import fmt_cuda_version  # 13000 -> '13.0'

_PROGRESS_RE = re.compile(r"^progress\s+(\d+)\s+(\d+)\s*(.*)$")

# Default results folder, under the current directory: a run never overwrites the
# committed benchmarks/results/<gpu>/ unless --out-dir names it (.gitignore lists it).
DEFAULT_OUT_ROOT = "gpudyn-results"

# The papers' metrics, one sentence each: printed under every table that shows one,
# stored in the JSON ("metrics") and put under the figures that plot one.
METRICS = {
    "TAS": "TAS (thread average steps): the mean number of steps a thread takes to find a free page "
    "(pages visited for RW, bitmap words visited for RW-BM, CRW and CoRW, its position for the queue).",
    "WAS": "WAS (warp average steps): the mean over warps of the largest step count among a warp's 32 lanes, "
    "since a warp waits for its slowest lane.",
    "DO": "DO (direct output): the hash-join baseline that takes its output space from one global atomic "
    "counter over memory reserved in advance, with no search and no reuse: the floor the page "
    "allocators are measured against.",
}


def metric_notes(text: str) -> dict:
    """{metric: definition} for each of METRICS named (as a whole word) in `text`."""
    return {k: v for k, v in METRICS.items() if re.search(rf"(?<![\w-]){re.escape(k)}(?![\w-])", text)}


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
        self.metrics_shown: list[str] = []  # metrics named in figures (their notes go in the JSON)

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
            bar_open = False  # a terminal bar is on the current line
            for line in proc.stderr:
                m = _PROGRESS_RE.match(line.strip())
                if m:
                    done, total, label = int(m.group(1)), int(m.group(2)), m.group(3)
                    bar_open = self._show_progress(done, total, label, time.time() - t0)
                else:
                    if bar_open:
                        sys.stderr.write("\n")
                        bar_open = False
                    tail.append(line)
                    sys.stderr.write(line)
            rc = proc.wait()
            if bar_open:
                sys.stderr.write("\n")
            sys.stderr.flush()
            if rc != 0:
                raise RuntimeError(f"gpudyn bench: {shlex.join(cmd)} exited with {rc}: {''.join(tail[-20:])}")
            with open(out, encoding="utf-8") as f:
                return json.load(f)

    def _show_progress(self, done: int, total: int, label: str, elapsed: float) -> bool:
        """One progress step: a bar redrawn in place ('\\r') on a terminal, else one plain
        line per step so that logs stay readable.  Returns whether a bar is left open."""
        stream = sys.stderr
        if _isatty(stream):
            width = 30
            filled = width * done // max(total, 1)
            bar = "#" * filled + "-" * (width - filled)
            stream.write(f"\r[{self.name}] [{bar}] {done}/{total} {elapsed:6.1f}s {label[:40]:<40}")
            stream.flush()
            return True
        stream.write(f"[{self.name}] {done}/{total} {elapsed:.1f}s {label}".rstrip() + "\n")
        stream.flush()
        return False

    def target(self, name: str, value: float, goal: float, unit: str, higher_is_better: bool) -> dict:
        """Records a target {'name','value','goal','unit','met'} computed from this run."""
        met = bool(value >= goal) if higher_is_better else bool(value <= goal)
        t = {
            "name": name,
            "value": float(value),
            "goal": float(goal),
            "unit": unit,
            "met": met,
            "comparison": ">=" if higher_is_better else "<=",
        }
        self.targets.append(t)
        return t

    def figure_path(self, filename: str) -> str:
        os.makedirs(self.out_dir, exist_ok=True)
        p = os.path.join(self.out_dir, filename)
        self.plots.append(os.path.basename(p))
        return p

    def caption(self, fig, *metrics: str) -> None:
        """Puts the one-sentence definition of each of `metrics` (keys of METRICS) under
        `fig`, growing the figure so the axes keep their size; call it before savefig."""
        unknown = [m for m in metrics if m not in METRICS]
        if unknown:
            raise ValueError(f"caption: argument 'metrics' has {unknown}, expected names in {sorted(METRICS)}")
        import textwrap

        w, h = fig.get_size_inches()
        chars = max(40, int(w * 18))  # about 18 characters of 7-point text per inch
        lines = [ln for m in metrics for ln in textwrap.wrap(METRICS[m], chars)]
        extra = 0.14 * len(lines) + 0.1
        fig.set_size_inches(w, h + extra)
        for ax in fig.axes:  # keep every axes where it was, above the new strip
            p = ax.get_position()
            ax.set_position([p.x0, (p.y0 * h + extra) / (h + extra), p.width, p.height * h / (h + extra)])
        fig.text(0.01, 0.05 / (h + extra), "\n".join(lines), fontsize=7, va="bottom", ha="left")
        self.metrics_shown.extend(metrics)

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


def _isatty(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        return str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for r in rows:
        lines.append("| " + " | ".join(fmt(r.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def gpudyn_checkout(cwd: str | None = None) -> str | None:
    """Top folder of the gpudyn git checkout holding `cwd` (default: the current
    directory), or None (not a checkout, not gpudyn's, or no git)."""
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=cwd, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    top_dir = top.stdout.strip()
    if top.returncode != 0 or not top_dir:
        return None
    # Another project's checkout says nothing about the gpudyn that ran.
    if not (
        os.path.isfile(os.path.join(top_dir, "include", "gpudyn", "gpudyn.h"))
        and os.path.isfile(os.path.join(top_dir, "python", "gpudyn", "__init__.py"))
    ):
        return None
    return top_dir


def git_commit(cwd: str | None = None) -> str | None:
    """`git rev-parse HEAD` of the gpudyn checkout holding `cwd`, with '-dirty' when
    tracked files differ from it; outside a checkout the commit the package records
    (`gpudyn._version.__git_commit__`), or None.  GPUDYN_GIT_COMMIT, when set, wins:
    a run from a copy of the tree whose .git is not that tree's (a remote GPU
    machine given the working tree) names the commit it was copied from."""
    if os.environ.get("GPUDYN_GIT_COMMIT"):
        return os.environ["GPUDYN_GIT_COMMIT"]
    top = gpudyn_checkout(cwd)
    if top is not None:
        try:
            head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=top, capture_output=True, text=True, timeout=10)
            status = subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=top,
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError):
            head = status = None
        if head is not None and head.returncode == 0 and head.stdout.strip():
            dirty = status.returncode != 0 or bool(status.stdout.strip())
            return head.stdout.strip() + ("-dirty" if dirty else "")
    from .. import _version

    return getattr(_version, "__git_commit__", None)


def describe_device(device: int = 0) -> dict:
    """device_info(device) plus the CUDA runtime and driver versions (kept from the
    device info, or None, when cuda_versions() fails)."""
    from ..info import cuda_versions, device_info

    dev = dict(device_info(device))
    try:
        v = cuda_versions()
        dev["runtime_version"], dev["driver_version"] = v["runtime"], v["driver"]
    except Exception:  # versions are a record, never a reason to stop a run
        dev.setdefault("runtime_version", None)
        dev.setdefault("driver_version", None)
    return dev


def provenance(argv: list[str] | None, device: dict, commit: str | None) -> dict:
    """What every results JSON records about the run: version, commit, command, CUDA, device, date."""
    from .. import __version__

    command = "gpudyn " + shlex.join(argv[1:]) if argv else "gpudyn bench"
    rt, drv = device.get("runtime_version"), device.get("driver_version")
    return {
        "gpudyn_version": __version__,
        "git_commit": commit,
        "command": command,
        "cuda_runtime": fmt_cuda_version(rt) if rt is not None else None,
        "cuda_driver": fmt_cuda_version(drv) if drv is not None else None,
        "device": device.get("name"),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def run_benchmarks(
    names: list[str], out_dir: str | None, quick: bool, argv: list[str], device: dict | None = None
) -> int:
    """Runs `names`, writing <name>.json and the plots to `out_dir` (default
    ./gpudyn-results/<gpu>/); `device` (describe_device() when None) is what the
    JSONs record about the GPU."""
    from . import load

    dev = describe_device(0) if device is None else dict(device)
    default_dir = out_dir is None
    out_dir = os.path.join(DEFAULT_OUT_ROOT, gpu_slug(dev["name"])) if default_dir else out_dir
    os.makedirs(out_dir, exist_ok=True)
    where = os.path.abspath(out_dir)
    # Taken before the first result is written: writing into a checkout dirties it.
    commit = git_commit()
    failed = 0
    for name in names:
        ctx = Context(name, out_dir, quick, dev)
        print(f"== gpudyn bench {name} on {dev['name']}{' (quick)' if quick else ''}", flush=True)
        t0 = time.time()
        results = dict(load(name).run(ctx) or {})
        record = {
            "benchmark": name,
            **provenance(argv, dev, commit),
            "device_info": dev,
            "quick": quick,
            "seconds": round(time.time() - t0, 1),
        }
        targets_table = markdown_table(ctx.targets, ["name", "value", "comparison", "goal", "unit", "met"])
        table = results.get("table") or ""
        notes = metric_notes("\n".join([targets_table, table] + ctx.metrics_shown))
        record.update(results)
        record.update({"targets": ctx.targets, "plots": ctx.plots, "metrics": notes})
        path = os.path.join(out_dir, f"{name}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
        print(f"\n### {name}: targets ({dev['name']})\n")
        print(targets_table)
        if table:
            print("\n" + table)
        if notes:
            print("\nmetrics:\n" + "\n".join(f"- {v}" for v in notes.values()))
        print(
            f"\nwrote {name}.json" + (f" and {len(ctx.plots)} plot(s)" if ctx.plots else "") + f" to {where}",
            flush=True,
        )
        failed += sum(not t["met"] for t in ctx.targets)
    # Missed targets are results, not errors: the exit code says only that the run completed.
    if failed:
        print(f"\n{failed} target(s) missed; see the tables above", flush=True)
    print(
        f"\nresults: {where}" + (" (the default folder; --out-dir DIR picks another)" if default_dir else ""),
        flush=True,
    )
    return 0
