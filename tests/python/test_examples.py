"""Every Python example under examples/ runs to completion on a GPU (each one
checks its own results against NumPy and exits non-zero on a mismatch)."""

import pathlib
import subprocess
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).resolve().parents[2] / "examples").glob("*/*.py"))


def test_examples_exist():
    assert EXAMPLES, "no Python examples found"


@pytest.mark.gpu
@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_example_runs(path):
    pytest.importorskip("cupy")
    r = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{path.name} failed:\n{r.stdout}\n{r.stderr}"
    print(r.stdout)
