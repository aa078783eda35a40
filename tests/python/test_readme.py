"""The README's code is tested: its three quickstarts (Python with Numba, CUDA C++, C)
run on a GPU; without one the C and CUDA C++ programs are compiled and linked against
the installed library (and run, to fail with the no-device status), and the Python one
is parsed, its gpudyn names looked up and its Numba kernels compiled.  Shell blocks
(```sh) are commands, not tests.  The README stays a guide: at most 220 lines, no
commit hashes, every relative link pointing at a file of the tree."""

import os
import re
import shutil

import _samples
import numpy as np
import pytest

README = os.path.join(_samples.ROOT, "README.md")
TESTED = ("python", "cpp", "c")
EXEMPT = ("sh",)


def _text() -> str:
    return open(README, encoding="utf-8").read()


def _blocks(lang: str) -> list:
    return re.findall(rf"^```{lang}\n(.*?)^```", _text(), re.DOTALL | re.MULTILINE)


def _block(lang: str) -> str:
    blocks = _blocks(lang)
    assert len(blocks) == 1, f"README should have one {lang} quickstart, has {len(blocks)}"
    return blocks[0]


def test_every_code_block_is_a_quickstart_or_a_command():
    fences = re.findall(r"^```(\S*)$", _text(), re.MULTILINE)
    opening = fences[0::2]
    assert len(fences) % 2 == 0, "unclosed code block"
    assert sorted(opening) == sorted(TESTED + EXEMPT * opening.count("sh")), opening


def test_readme_is_a_guide():
    text = _text()
    assert len(text.splitlines()) <= 220
    hashes = [w for w in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search(r"[a-f]", w) and re.search(r"\d", w)]
    assert not hashes, f"commit hashes in the README: {hashes}"


def test_readme_links_resolve():
    missing = []
    prose = re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```", "", _text(), flags=re.DOTALL | re.MULTILINE))
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", prose):
        if "://" in target:
            continue
        if not os.path.exists(os.path.join(_samples.ROOT, target)):
            missing.append(target)
    assert not missing, f"README links to files that do not exist: {missing}"


# ---- C ----------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_readme_c_quickstart(tmp_path):
    src = tmp_path / "quickstart.c"
    src.write_text(_block("c"))
    _samples.compile_c(src, tmp_path / "quickstart")
    out = _samples.run_program(tmp_path / "quickstart")
    if out is not None:
        assert out.strip() == f"2000 elements, sum {2 * sum(range(1000))}"


# ---- CUDA C++ ---------------------------------------------------------------
@pytest.mark.skipif(_samples.nvcc() is None, reason="no nvcc")
def test_readme_cuda_cpp_quickstart(tmp_path):
    src = tmp_path / "quickstart.cu"
    src.write_text(_block("cpp"))
    _samples.compile_cuda(src, tmp_path / "quickstart")
    out = _samples.run_program(tmp_path / "quickstart")
    if out is not None:
        kept = np.arange(0, 1 << 20, 7, dtype=np.int64)
        assert out.strip() == f"{len(kept)} elements, sum {int(kept.sum())}"


# ---- Python with Numba ------------------------------------------------------
def test_readme_python_quickstart_names_exist():
    assert _samples.missing_gpudyn_names(_block("python")) == []


def test_readme_python_quickstart_kernels_compile():
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    from numba.cuda import types

    ns = _samples.definitions(_block("python"), "README.md python quickstart")
    ref = _samples.numba_ref_type("GGArray", np.int64)
    for kernel, sig in ((ns["emit"], (ref, types.int64)), (ns["total"], (ref, types.int64[::1]))):
        ptx = _samples.compile_kernel(kernel, sig)
        assert "gpudyn_numba_ggarray_" in ptx


@pytest.mark.gpu
def test_readme_python_quickstart_runs():
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    exec(compile(_block("python"), "README.md python quickstart", "exec"), {"__name__": "readme"})
