"""The `gpudyn bench` driver, end to end on the host: a stand-in benchmark program
(a Python script printing `progress i n label` lines on stderr and writing a JSON
file) run by a stand-in benchmark module, with a given device description, so no
GPU is needed.  Checks the progress display (terminal vs log), the results folder,
what every JSON records, and the metric notes."""

import datetime as dt
import io
import json
import os
import re
import shutil
import subprocess
import sys
import types

import gpudyn
import pytest
from gpudyn import bench
from gpudyn.bench import _common
from gpudyn.bench._common import METRICS, Context, git_commit, metric_notes, run_benchmarks

STEPS = ["warm-up", "heap converged N=16384 S=64", "heap divergent N=16384 S=64", "cuda_malloc N=16384 S=64"]
DEVICE = {"name": "NVIDIA H200", "runtime_version": 13000, "driver_version": 12080}
PLAIN = re.compile(r"^\[fake\] (\d+)/(\d+) (\d+\.\d)s (.*)$")

PROGRAM = """#!{python}
import json, sys
args = sys.argv[1:]
out = args[args.index("--out") + 1]
steps = {steps!r}
if "--fail" in args:
    print("fake: the device said no", file=sys.stderr)
    sys.exit(3)
print("fake: a line that is not progress", file=sys.stderr, flush=True)
for i, label in enumerate(steps, 1):
    print(f"progress {{i}} {{len(steps)}} {{label}}", file=sys.stderr, flush=True)
json.dump({{"args": args, "rows": [{{"ms": 0.5}}]}}, open(out, "w"))
"""


@pytest.fixture
def fake_bench(tmp_path, monkeypatch):
    """A stand-in program `gpudyn_bench_fake` (found through GPUDYN_BENCH_DIR) and a
    stand-in module `fake` whose run(ctx) calls it."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    prog = bindir / "gpudyn_bench_fake"
    prog.write_text(PROGRAM.format(python=sys.executable, steps=STEPS))
    prog.chmod(0o755)
    monkeypatch.setenv("GPUDYN_BENCH_DIR", str(bindir))

    def run(ctx):
        raw = ctx.run_program("gpudyn_bench_fake", ["--extra"])
        ctx.target("RW/RW-BM TAS ratio", 30.0, 25.0, "x", True)
        return {"raw": raw, "table": "| experiment | ms |\n|---|---|\n| probe, DO | 0.5 |"}

    module = types.SimpleNamespace(run=run)
    monkeypatch.setattr(bench, "load", lambda name: module if name == "fake" else pytest.fail(name))
    return module


def _run(argv=("gpudyn", "bench", "fake", "--quick"), out_dir=None):
    return run_benchmarks(["fake"], out_dir=out_dir, quick=True, argv=list(argv), device=dict(DEVICE))


def test_progress_is_one_plain_line_per_step_in_a_log(fake_bench, tmp_path, capsys):
    assert _run(out_dir=str(tmp_path / "res")) == 0
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    steps = [PLAIN.match(ln) for ln in lines if ln.startswith("[fake]")]
    assert all(steps), lines
    assert [(int(m.group(1)), int(m.group(2)), m.group(4)) for m in steps] == [
        (i, len(STEPS), label) for i, label in enumerate(STEPS, 1)
    ]
    assert "fake: a line that is not progress" in lines  # the program's other lines pass through


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bar_redraws_in_place_on_a_terminal(fake_bench, tmp_path, monkeypatch):
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    raw = Context("fake", str(tmp_path), True, dict(DEVICE)).run_program("gpudyn_bench_fake")
    out = term.getvalue()
    monkeypatch.undo()
    assert raw["rows"] == [{"ms": 0.5}] and "--quick" in raw["args"]
    assert out.count("\r") == len(STEPS)
    assert out.endswith("\n") and out.count("\n") == 2  # the other line, then the bar's end
    assert not any(PLAIN.match(ln) for ln in out.splitlines())
    assert f"{len(STEPS)}/{len(STEPS)}" in out.rsplit("\r", 1)[1]


def test_failing_program_is_reported_with_its_exit_code_and_output(fake_bench, tmp_path):
    ctx = Context("fake", str(tmp_path), False, dict(DEVICE))
    with pytest.raises(RuntimeError, match=r"exited with 3: fake: the device said no"):
        ctx.run_program("gpudyn_bench_fake", ["--fail"])


def test_default_results_folder_is_under_the_current_directory(fake_bench, tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    _run()
    out = capsys.readouterr().out
    where = work / "gpudyn-results" / "h200"
    assert sorted(os.listdir(work)) == ["gpudyn-results"]  # nothing else, no benchmarks/results
    assert os.listdir(where) == ["fake.json"]
    assert f"wrote fake.json to {where}" in out
    assert out.rstrip().splitlines()[-1].startswith(f"results: {where} (the default folder")


def test_out_dir_is_used_as_given(fake_bench, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _run(out_dir="chosen/h200")
    out = capsys.readouterr().out
    assert (tmp_path / "chosen" / "h200" / "fake.json").is_file()
    assert not (tmp_path / "gpudyn-results").exists()
    assert out.rstrip().splitlines()[-1] == f"results: {tmp_path / 'chosen' / 'h200'}"


def test_json_records_version_commit_command_cuda_device_date(fake_bench, tmp_path, capsys):
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    _run(argv=("gpudyn", "bench", "fake", "--quick", "--out-dir", "a dir"), out_dir=str(tmp_path))
    rec = json.loads((tmp_path / "fake.json").read_text())
    assert rec["benchmark"] == "fake"
    assert rec["gpudyn_version"] == gpudyn.__version__
    assert "git_commit" in rec  # a commit or null: see the git tests below
    assert rec["command"] == "gpudyn bench fake --quick --out-dir 'a dir'"
    assert rec["cuda_runtime"] == "13.0" and rec["cuda_driver"] == "12.8"
    assert rec["device"] == "NVIDIA H200" and rec["device_info"]["name"] == "NVIDIA H200"
    date = dt.datetime.fromisoformat(rec["date"])
    assert before <= date <= dt.datetime.now(dt.timezone.utc)
    assert rec["quick"] is True
    assert rec["raw"]["args"][-1] == "--extra"
    assert [t["name"] for t in rec["targets"]] == ["RW/RW-BM TAS ratio"] and rec["targets"][0]["met"] is True


def test_metrics_in_a_table_are_explained_under_it(fake_bench, tmp_path, capsys):
    _run(out_dir=str(tmp_path))
    out = capsys.readouterr().out
    rec = json.loads((tmp_path / "fake.json").read_text())
    # TAS is in the targets table, DO in the results table, WAS in neither.
    assert rec["metrics"] == {"TAS": METRICS["TAS"], "DO": METRICS["DO"]}
    table_end = out.index("| probe, DO | 0.5 |")
    assert table_end < out.index(METRICS["TAS"]) and table_end < out.index(METRICS["DO"])
    assert METRICS["WAS"] not in out


def test_metric_notes_match_whole_words_only():
    assert list(metric_notes("RW/RW-BM TAS ratio; WAS (Eq. 4)")) == ["TAS", "WAS"]
    assert metric_notes("TASK DONE, was DOne, X-DO, TAS_x") == {}
    for name, text in METRICS.items():  # each is one sentence that names its metric
        assert text.startswith(name + " (") and text.endswith(".") and text.count(". ") == 0


def test_caption_rejects_unknown_metric_by_argument_name():
    ctx = Context("x", ".", True, {})
    with pytest.raises(ValueError, match="'metrics'"):
        ctx.caption(None, "TAS", "FOO")
    assert ctx.metrics_shown == []


def test_caption_puts_definitions_under_the_figure(tmp_path):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.set_ylabel("TAS")
    fig.tight_layout()
    box = ax.get_window_extent()
    ctx = Context("x", str(tmp_path), True, {})
    ctx.caption(fig, "TAS", "WAS")
    assert ctx.metrics_shown == ["TAS", "WAS"]
    text = " ".join(t.get_text().replace("\n", " ") for t in fig.texts)
    assert "thread average steps" in text and "warp average steps" in text
    new = ax.get_window_extent()
    assert new.height == pytest.approx(box.height) and new.width == pytest.approx(box.width)
    assert fig.texts[0].get_window_extent(fig.canvas.get_renderer()).y1 < new.y0  # below the axes
    plt.close(fig)


def test_results_notes_explain_every_metric():
    notes = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "results", "h200", "NOTES.md")
    text = open(notes, encoding="utf-8").read()
    for name in METRICS:
        assert f"**{name}**" in text, name


def test_bench_help_names_the_default_folder():
    r = subprocess.run([sys.executable, "-m", "gpudyn", "bench", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "gpudyn-results/<gpu>" in r.stdout and "--out-dir" in r.stdout


def test_bench_help_lists_every_benchmark_with_its_line():
    r = subprocess.run([sys.executable, "-m", "gpudyn", "bench", "--help"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    listed = r.stdout[r.stdout.index("benchmarks:") :].splitlines()[1:]
    assert [line.split()[0] for line in listed] == bench.available()
    for line in listed:
        name = line.split()[0]
        assert line.split(None, 1)[1] == bench.BENCHMARKS[name]
    for short, full in bench.ALIASES.items():  # accepted, not listed
        assert f"{short}={full}" not in r.stdout and not any(line.split()[0] == short for line in listed)


def test_every_benchmark_module_is_listed():
    # a module with run(ctx) is a benchmark; theory (the papers' models) and _common are not
    here = os.path.dirname(bench.__file__)
    modules = sorted(f[:-3] for f in os.listdir(here) if f.endswith(".py") and not f.startswith("_"))
    runners = [m for m in modules if re.search(r"^def run\(ctx", open(os.path.join(here, m + ".py")).read(), re.M)]
    assert runners == bench.available() and "theory" in modules and "theory" not in runners
    for line in bench.BENCHMARKS.values():
        assert "\n" not in line and len(line) <= 100


_NO_BENCH = """
import importlib.abc, sys
class NoBench(importlib.abc.MetaPathFinder):  # as in an install without the benchmarks
    def find_spec(self, name, path, target=None):
        if name == "gpudyn.bench":
            raise ModuleNotFoundError("No module named 'gpudyn.bench'", name=name)
sys.meta_path.insert(0, NoBench())
from gpudyn import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def test_bench_without_the_benchmarks_says_how_to_get_them():
    r = subprocess.run([sys.executable, "-c", _NO_BENCH, "bench", "heap"], capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "bash benchmarks/run.sh" in err[0] and "no benchmarks" in err[0], err
    r = subprocess.run([sys.executable, "-c", _NO_BENCH, "bench", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "bash benchmarks/run.sh" in r.stdout, (r.stdout, r.stderr)
    r = subprocess.run([sys.executable, "-c", _NO_BENCH, "info"], capture_output=True, text=True)
    assert r.stdout.startswith("gpudyn "), (r.stdout, r.stderr)  # info needs no bench


# ---- the git commit ---------------------------------------------------------------
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="no git")


def _git(cwd, *args):
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def _checkout(path, gpudyn_tree=True):
    path.mkdir()
    _git(path, "init", "-q")
    files = ["include/gpudyn/gpudyn.h", "python/gpudyn/__init__.py"] if gpudyn_tree else ["README"]
    for f in files:
        (path / f).parent.mkdir(parents=True, exist_ok=True)
        (path / f).write_text("x\n")
    _git(path, "add", ".")
    _git(path, "commit", "-q", "-m", "one")
    return path


@needs_git
def test_git_commit_of_a_checkout_marks_changes(tmp_path):
    repo = _checkout(tmp_path / "gpudyn")
    head = _git(repo, "rev-parse", "HEAD")
    assert git_commit(str(repo)) == head
    assert git_commit(str(repo / "python")) == head  # from a subfolder too
    (repo / "new_file").write_text("untracked\n")
    assert git_commit(str(repo)) == head  # untracked files leave it clean (as git describe --dirty)
    (repo / "python" / "gpudyn" / "__init__.py").write_text("changed\n")
    assert git_commit(str(repo)) == head + "-dirty"


@needs_git
def test_git_commit_named_by_the_environment_wins(tmp_path, monkeypatch):
    repo = _checkout(tmp_path / "gpudyn")
    head = _git(repo, "rev-parse", "HEAD")
    monkeypatch.setenv("GPUDYN_GIT_COMMIT", "0123abcd")
    assert git_commit(str(repo)) == "0123abcd" != head
    monkeypatch.delenv("GPUDYN_GIT_COMMIT")
    assert git_commit(str(repo)) == head


@needs_git
def test_git_commit_outside_a_gpudyn_checkout_is_the_package_record(tmp_path):
    from gpudyn import _version

    recorded = getattr(_version, "__git_commit__", None)
    other = _checkout(tmp_path / "other", gpudyn_tree=False)
    assert git_commit(str(other)) == recorded
    plain = tmp_path / "plain"
    plain.mkdir()
    assert git_commit(str(plain)) == recorded


@needs_git
def test_run_records_the_commit_before_writing_into_the_checkout(fake_bench, tmp_path, monkeypatch, capsys):
    repo = _checkout(tmp_path / "gpudyn")
    results = repo / "benchmarks" / "results" / "h200"
    results.mkdir(parents=True)
    (results / "fake.json").write_text("{}\n")  # a committed result
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "results")
    monkeypatch.chdir(repo)
    _run(out_dir="benchmarks/results/h200")
    rec = json.loads((results / "fake.json").read_text())
    assert rec["git_commit"] == _git(repo, "rev-parse", "HEAD")  # not '-dirty': taken before the write
    assert git_commit(str(repo)).endswith("-dirty")


def test_describe_device_keeps_device_versions_when_cuda_versions_fails(monkeypatch):
    import gpudyn.info as info

    def boom():
        raise gpudyn.CudaError("no driver")

    monkeypatch.setattr(
        info, "device_info", lambda d=0: {"name": "GPU", "runtime_version": 13000, "driver_version": 13010}
    )
    monkeypatch.setattr(info, "cuda_versions", boom)
    dev = _common.describe_device(0)
    assert (dev["runtime_version"], dev["driver_version"]) == (13000, 13010)
    monkeypatch.setattr(info, "cuda_versions", lambda: {"runtime": 13000, "driver": 0})
    assert _common.describe_device(0)["driver_version"] == 0
