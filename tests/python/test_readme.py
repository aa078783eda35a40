"""The README's examples are tests: its C program compiles against the installed
library and runs; every ```python block runs on a GPU (fragments that cannot run
alone are fenced as ```py)."""
import os
import re
import shutil
import subprocess

import pytest

import gpudyn

README = os.path.join(os.path.dirname(__file__), "..", "..", "README.md")


def _blocks(lang: str) -> list:
    text = open(README, encoding="utf-8").read()
    blocks = re.findall(rf"```{lang}\n(.*?)```", text, re.S)
    assert blocks, f"README has no {lang} example"
    return blocks


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_readme_c_example_compiles_and_runs(tmp_path):
    src = tmp_path / "readme.c"
    src.write_text(_blocks("c")[0])
    exe = tmp_path / "readme"
    libdir = os.path.dirname(gpudyn.library_path)
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", str(src), "-I", gpudyn.get_include(),
                    gpudyn.library_path, f"-Wl,-rpath,{libdir}", "-o", str(exe)], check=True)
    r = subprocess.run([str(exe)], capture_output=True, text=True)
    try:
        name = gpudyn.device_info()["name"]
    except gpudyn.NoDeviceError:
        assert r.returncode == 1 and r.stdout.startswith("GPUDYN_ERROR_NO_DEVICE: "), r.stdout
    else:
        assert r.returncode == 0 and r.stdout.strip() == name


@pytest.mark.gpu
@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_readme_python_examples_run(index):
    exec(compile(_blocks("python")[index], f"README.md python block {index}", "exec"), {})
