"""gpudyn.nvrtc: where the include folders of an NVRTC compile come from (host only)."""

import os

import pytest
from gpudyn import nvrtc


def _tree(root, files):
    for f in files:
        p = os.path.join(root, f)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        open(p, "w").close()


def _only(monkeypatch, tmp_path, roots_env, default_roots=()):
    """cuda_roots() sees exactly what the test builds: CUDA_PATH/CUDA_HOME as given, no
    conda tree, `default_roots` in place of /usr/local/cuda (PATH is set by the test)."""
    for k in ("CUDA_PATH", "CUDA_HOME", "GPUDYN_CCCL_INCLUDE"):
        monkeypatch.delenv(k, raising=False)
    for k, v in roots_env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(nvrtc.sys, "prefix", str(tmp_path / "no-conda"))
    monkeypatch.setattr(nvrtc, "_DEFAULT_ROOTS", tuple(str(r) for r in default_roots))


def test_an_nvcc_wrapper_does_not_make_its_folder_the_toolkit(tmp_path, monkeypatch):
    # /usr/local/bin/nvcc as a shell script that execs the real one: /usr/local is the
    # first root and has an include folder, but not CUDA's; the toolkit is found after it.
    wrapper_root, toolkit = tmp_path / "local", tmp_path / "cuda"
    _tree(wrapper_root, ["bin/nvcc", "include/zlib.h"])
    _tree(toolkit, ["include/cuda_runtime.h", "include/mma.h", "include/cccl/cuda/std/cstdint"])
    os.chmod(wrapper_root / "bin" / "nvcc", 0o755)
    _only(monkeypatch, tmp_path, {}, default_roots=[toolkit])
    monkeypatch.setenv("PATH", str(wrapper_root / "bin"))
    assert nvrtc.cuda_roots() == [str(wrapper_root), str(toolkit)]
    assert nvrtc.cuda_include_dirs() == [os.path.join(str(toolkit), "include")]
    assert nvrtc.cccl_include_dirs() == [os.path.join(str(toolkit), "include", "cccl")]


def test_a_root_without_cuda_headers_is_skipped(tmp_path, monkeypatch):
    # CUDA_PATH names a folder without CUDA headers: the next root with them serves.
    bogus, toolkit = tmp_path / "opt", tmp_path / "cuda"
    _tree(bogus, ["include/other.h"])
    _tree(toolkit, ["include/cuda_runtime.h"])
    _only(monkeypatch, tmp_path, {"CUDA_PATH": str(bogus), "CUDA_HOME": str(toolkit)})
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert nvrtc.cuda_roots()[:2] == [str(bogus), str(toolkit)]
    assert nvrtc.cuda_include_dirs() == [os.path.join(str(toolkit), "include")]
    opts = nvrtc.nvrtc_options()
    assert "-I" + os.path.join(str(toolkit), "include") in opts
    assert "-I" + os.path.join(str(bogus), "include") not in opts


def test_no_toolkit_no_cuda_include(tmp_path, monkeypatch):
    bogus = tmp_path / "opt"
    _tree(bogus, ["include/other.h"])
    _only(monkeypatch, tmp_path, {"CUDA_PATH": str(bogus)})
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert nvrtc.cuda_include_dirs() == []


@pytest.mark.parametrize(
    "arch,want",
    [
        (90, "compute_90"),
        ("90", "compute_90"),
        ("sm_90", "compute_90"),
        ("compute_90a", "compute_90a"),
        ("SM_75", "compute_75"),
        ("100f", "compute_100f"),
    ],
)
def test_arch_spellings_give_one_option(arch, want):
    opts = nvrtc.nvrtc_options(arch=arch)
    assert opts[-1] == f"--gpu-architecture={want}"
    assert sum(o.startswith("--gpu-architecture") for o in opts) == 1


@pytest.mark.parametrize("arch", ["sm_70", 70, "abc", "", "90ab", "sm_"])
def test_an_arch_gpudyn_cannot_use_is_refused(arch):
    with pytest.raises(ValueError, match="arch"):
        nvrtc.nvrtc_options(arch=arch)


@pytest.mark.parametrize("arch", [True, 9.0, [90]])
def test_an_arch_of_another_type_is_refused(arch):
    with pytest.raises(TypeError, match="arch"):
        nvrtc.nvrtc_options(arch=arch)


@pytest.mark.parametrize("std", ["c++14", "c++11", "c++03", "gnu++17", "17"])
def test_a_standard_the_headers_cannot_use_is_refused(std):
    with pytest.raises(ValueError, match="std"):
        nvrtc.nvrtc_options(std=std)


def test_cxx20_is_accepted():
    assert nvrtc.nvrtc_options(std="c++20")[0] == "--std=c++20"
