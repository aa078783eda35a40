"""The guides' code runs: docs/guides/*.md show code only through MyST
{literalinclude} of files (docs/guides/samples/, examples/), never as inline blocks
that could rot.  On a GPU every Python sample runs to completion (each checks its own
results) and every CUDA sample is compiled and run; without one the Python samples'
gpudyn names are looked up and their Numba kernels compiled, and the CUDA samples are
compiled and linked against the installed library.  Relative links resolve."""

import os
import pathlib
import re
import subprocess
import sys

import _samples
import numpy as np
import pytest

GUIDES = pathlib.Path(_samples.ROOT) / "docs" / "guides"
SAMPLES = GUIDES / "samples"
PY_SAMPLES = sorted(SAMPLES.glob("*.py"))
CU_SAMPLES = sorted(SAMPLES.glob("*.cu"))
# Code in these languages comes from files that run (a {literalinclude}); commands and
# diagrams (sh, text, untyped blocks) may stay inline.
CODE = {"python", "py", "pycon", "c", "cpp", "c++", "cuda", "cu"}

# The Numba kernels of each Python sample with the types they are launched with:
# "GGArray:int64" is that structure's view_arg() type, else a Numba type ("int64[::1]").
KERNELS = {
    "numba_set_bits.py": {"set_bits": ("GGArray:int64", "int64")},
    "numba_produce_consume.py": {
        "produce": ("GGArray:int64", "int64"),
        "halve_evens": ("GGArray:int64", "GGArray:int64"),
    },
    "numba_span.py": {"fill": ("GGArray:int64", "int64"), "sum_by_spans": ("GGArray:int64", "int64[::1]")},
    "numba_heap.py": {"rows": ("Heap", "int64[::1]", "int64[::1]")},
}


def _guides():
    return sorted(p for p in GUIDES.glob("*.md"))


def _fences(text: str):
    """(language or directive, rest of the info line, body) of every fenced block."""
    return re.findall(r"^```(\S*)[ \t]*([^\n]*)\n(.*?)^```", text, re.DOTALL | re.MULTILINE)


def _prose(text: str) -> str:
    """The text without code: fenced blocks and inline code spans removed."""
    return re.sub(r"`[^`\n]*`", "", re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE))


def _includes():
    """(guide, target path, options) of every {literalinclude}."""
    out = []
    for guide in _guides():
        for info, argument, body in _fences(guide.read_text(encoding="utf-8")):
            if info != "{literalinclude}":
                continue
            options = dict(re.match(r":([\w-]+):\s*(.*)", line).groups() for line in body.splitlines() if line.strip())
            out.append((guide, (guide.parent / argument.strip()).resolve(), options))
    return out


def test_guides_exist():
    names = {p.name for p in _guides()}
    for page in (
        "choosing.md",
        "python.md",
        "numba.md",
        "cuda_cpp.md",
        "c.md",
        "streams.md",
        "lifetime.md",
        "errors.md",
        "memory.md",
        "architecture.md",
        "building.md",
    ):
        assert page in names


@pytest.mark.parametrize("guide", _guides(), ids=lambda p: p.name)
def test_guide_code_comes_from_files(guide):
    inline = [info for info, _, _ in _fences(guide.read_text(encoding="utf-8")) if info.lower() in CODE]
    assert not inline, f"{guide.name}: inline code blocks {inline}: put the code in samples/ and include it"


def test_every_include_exists_with_its_markers():
    assert _includes()
    for guide, target, options in _includes():
        assert target.is_file(), f"{guide.name} includes {target}, which does not exist"
        text = target.read_text(encoding="utf-8")
        for key in ("start-after", "end-before", "start-at", "end-at"):
            if key in options:
                marker = options[key].strip().strip('"')
                assert marker in text, f"{guide.name}: marker {marker!r} not in {target.name}"


def test_every_sample_is_shown():
    included = {target for _, target, _ in _includes()}
    orphans = [p.name for p in sorted(SAMPLES.iterdir()) if p.is_file() and p.resolve() not in included]
    assert not orphans, f"samples no guide includes: {orphans}"


@pytest.mark.parametrize("guide", _guides(), ids=lambda p: p.name)
def test_guide_links_resolve(guide):
    text = _prose(guide.read_text(encoding="utf-8"))
    # MyST's path: scheme links a file outside the site (a download): the file must exist too.
    targets = [t.removeprefix("path:") for t in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)]
    missing = [t for t in targets if "://" not in t and not (guide.parent / t).exists()]
    assert not missing, f"{guide.name} links to files that do not exist: {missing}"


# ---- Python samples -----------------------------------------------------------
@pytest.mark.parametrize("path", PY_SAMPLES, ids=lambda p: p.name)
def test_python_sample_names_exist(path):
    assert _samples.missing_gpudyn_names(path.read_text(encoding="utf-8")) == []


def _numba_type(spec: str):
    from numba.cuda import types

    if spec[:1].isupper():
        structure, _, dtype = spec.partition(":")
        return _samples.numba_ref_type(structure, np.dtype(dtype) if dtype else None)
    if spec.endswith("[::1]"):
        return getattr(types, spec[:-5])[::1]
    return getattr(types, spec)


def test_every_numba_sample_has_its_kernel_types():
    uses_numba = {p.name for p in PY_SAMPLES if "@cuda.jit" in p.read_text(encoding="utf-8")}  # launched ones
    assert uses_numba == set(KERNELS)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_numba_sample_kernels_compile(name):
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    ns = _samples.definitions((SAMPLES / name).read_text(encoding="utf-8"), str(SAMPLES / name))
    for kernel, specs in KERNELS[name].items():
        ptx = _samples.compile_kernel(ns[kernel], tuple(_numba_type(s) for s in specs))
        assert "gpudyn_numba_" in ptx, kernel


# Samples that need no GPU: they run everywhere (numba-cuda compiles without a device).
NO_GPU = {"numba_compile_ahead.py"}


@pytest.mark.parametrize("name", sorted(NO_GPU))
def test_python_sample_runs_without_a_gpu(name):
    pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    r = subprocess.run(
        [sys.executable, str(SAMPLES / name)], capture_output=True, text=True, timeout=300, cwd=SAMPLES, check=False
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1].startswith("ok"), r.stdout


@pytest.mark.gpu
@pytest.mark.parametrize("path", [p for p in PY_SAMPLES if p.name not in NO_GPU], ids=lambda p: p.name)
def test_python_sample_runs(path):
    if "numba" in path.read_text(encoding="utf-8"):
        pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
    r = subprocess.run(
        [sys.executable, str(path)], capture_output=True, text=True, timeout=300, cwd=os.path.dirname(path)
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1].startswith("ok"), r.stdout


# ---- CUDA C++ samples ----------------------------------------------------------
@pytest.mark.skipif(_samples.nvcc() is None, reason="no nvcc")
@pytest.mark.parametrize("path", CU_SAMPLES, ids=lambda p: p.name)
def test_cuda_sample_compiles_and_runs(path, tmp_path):
    exe = tmp_path / path.stem
    _samples.compile_cuda(path, exe)
    out = _samples.run_program(exe)
    if out is not None:
        assert " 0 wrong" in out, out
