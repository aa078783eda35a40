"""benchmarks/results/SUMMARY.md is what tools/gen_summary.py makes of the committed
JSONs: refreshing a result without regenerating the summary fails here (and so in CI,
which runs tests/run.sh)."""

import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "gen_summary.py"
SUMMARY = ROOT / "benchmarks" / "results" / "SUMMARY.md"


def _load_tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_summary", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_summary_is_current():
    r = subprocess.run([sys.executable, str(TOOL), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, "SUMMARY.md is stale: run python3 tools/gen_summary.py\n" + r.stdout[-4000:]


def test_summary_lists_every_target_of_every_json():
    text = SUMMARY.read_text(encoding="utf-8")
    total = 0
    for path in sorted((ROOT / "benchmarks" / "results").glob("*/*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if "targets" not in data:
            assert f"`{path.parent.name}/{path.name}`" in text  # named as a file without targets
            continue
        assert f"### {path.parent.name}/{path.name}:" in text
        assert f"commit `{data['git_commit']}`" in text and data["date"] in text
        for t in data["targets"]:
            assert t["name"].replace("|", "\\|") in text, t["name"]
        total += len(data["targets"])
    assert total and f"of {total} targets met." in text


def test_render_of_a_results_tree(tmp_path):
    gpu = tmp_path / "a100"
    gpu.mkdir()
    (gpu / "x.json").write_text(
        json.dumps(
            {
                "device": "GPU A",
                "git_commit": "abc1234",
                "date": "2026-01-01T00:00:00+00:00",
                "gpudyn_version": "0.1.0",
                "targets": [
                    {
                        "name": "speed | ratio",
                        "value": 1.23456,
                        "goal": 1.0,
                        "unit": "x",
                        "met": True,
                        "comparison": ">=",
                    },
                    {
                        "name": "time",
                        "value": 0.5,
                        "goal": 0.25,
                        "unit": "ms",
                        "met": False,
                        "comparison": "<=",
                        "where": "1M threads",
                    },
                ],
            }
        )
    )
    (gpu / "probe.json").write_text(json.dumps({"bytes": 1}))
    text = _load_tool().render(str(tmp_path))
    assert "1 of 2 targets met." in text
    assert "### a100/x.json: 1 of 2 met" in text and "GPU A, commit `abc1234`, 2026-01-01" in text
    assert "| speed \\| ratio | 1.235x | ≥ 1x | yes |" in text
    assert "| time (1M threads) | 0.5 ms | ≤ 0.25 ms | **no** |" in text
    assert "Files without targets: `a100/probe.json`." in text
