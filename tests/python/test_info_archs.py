"""Which GPUs a build runs on (gpudyn.info: build_archs, arch_fit, built_for, runs_on;
`gpudyn info`), on the host.  The library decides the same way when a structure is
created on a device it has no code for (NOT_SUPPORTED; tests/c/test_core_archs_host.cu);
that failure itself needs such a GPU."""

import subprocess
import sys

import gpudyn
import pytest
from gpudyn import info

DEFAULT = ["75", "80", "86", "89", "90"]  # meson.options' gpu_archs


@pytest.mark.parametrize(
    "cc,sass,ptx,fit",
    [
        ((9, 0), DEFAULT, "90", "sass"),
        ((7, 5), DEFAULT, "90", "sass"),
        ((8, 7), DEFAULT, "90", "sass"),  # Orin runs sm_86's code
        ((10, 0), DEFAULT, "90", "ptx"),  # B200: JIT from PTX 9.0
        ((12, 0), DEFAULT, "90", "ptx"),
        ((10, 0), DEFAULT, "", "none"),
        ((7, 0), DEFAULT, "90", "none"),  # older than every architecture
        ((9, 0), ["80"], "", "none"),  # another major's SASS never runs
        ((8, 0), ["86"], "", "none"),  # nor a later minor's
        ((9, 0), ["80"], "80", "ptx"),
        ((9, 0), ["90a"], "", "sass"),  # arch-specific: that compute capability only
        ((10, 3), ["100a"], "", "none"),
        ((9, 0), [], "", "none"),
    ],
)
def test_arch_fit(cc, sass, ptx, fit):
    assert info.arch_fit(cc, sass, ptx) == fit


def test_built_for_and_runs_on_lines():
    assert info.built_for(DEFAULT, "90") == (
        "built for compute capability 7.5, 8.0, 8.6, 8.9, 9.0 (SASS) and "
        "newer GPUs through PTX 9.0 (JIT-compiled by the driver)"
    )
    assert info.built_for(["90"], "") == "built for compute capability 9.0 (SASS) only (no PTX)"
    assert info.runs_on((9, 0), DEFAULT, "90") == "gpudyn: runs (SASS)"
    assert "PTX" in info.runs_on((10, 0), DEFAULT, "90")
    assert "NOT SUPPORTED" in info.runs_on((9, 0), ["80"], "") and "-Dgpu_archs=90" in info.runs_on((9, 0), ["80"], "")
    assert "7.5 or newer" in info.runs_on((7, 0), DEFAULT, "90")


def test_the_library_reports_what_the_package_recorded():
    """gpudyn_get_build_archs (the loaded library's own strings) agrees with the package's
    record of its build (_version, written by the same meson run)."""
    from gpudyn import _version

    b = info.build_archs()
    assert b["sass"] == [a for a in _version.GPU_ARCHS.replace(",", " ").split()], (b, _version.GPU_ARCHS)
    assert b["ptx"] == _version.GPU_PTX.strip(), (b, _version.GPU_PTX)


def test_the_installed_build_records_its_architectures():
    b = info.build_archs()
    assert b["sass"] and all(a[:2].isdigit() for a in b["sass"]), b
    line = info.built_for()
    for a in b["sass"]:
        assert f"{a[:-1]}.{a[-1]}" in line, (a, line)
    r = subprocess.run([sys.executable, "-m", "gpudyn", "info"], capture_output=True, text=True)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("gpudyn " + gpudyn.__version__) and lines[2] == line, r.stdout
