"""CuPy RawModule examples: each structure has one (a user's own kernel calling
the structure's device header), and the kernels of those that keep them in a
module-level string compile with NVRTC and exactly gpudyn.nvrtc_options(),
without a GPU.  Running them on a GPU, results checked, is test_examples.py
(every examples/*/*.py runs there)."""

import importlib.util
import pathlib
import re

import gpudyn
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*/*.py"))
STRUCTURES = ("ggarray", "heap", "rw_heap", "warp_heap")


def _rawmodule_sources() -> dict:
    """{example: its text plus the text of the .cu files it names} for the CuPy RawModule examples."""
    out = {}
    for path in EXAMPLES:
        text = path.read_text(encoding="utf-8")
        if "RawModule" not in text:
            continue
        for cu in set(re.findall(r"(\w+\.cu)\b", text)):  # kernels kept in a .cu file of examples/
            for f in (ROOT / "examples").glob(f"*/{cu}"):
                text += f.read_text(encoding="utf-8")
        out[path] = text
    return out


@pytest.mark.parametrize("structure", STRUCTURES)
def test_every_structure_has_a_cupy_rawmodule_example(structure):
    users = [p for p, text in _rawmodule_sources().items() if f"#include <gpudyn/{structure}.cuh>" in text]
    assert users, f"no examples/*/*.py compiles a CuPy RawModule kernel with <gpudyn/{structure}.cuh>"


def _kernel_strings():
    """(example, source) for each import-safe example (main guarded) with a module-level KERNEL(S) string."""
    for path in EXAMPLES:
        text = path.read_text(encoding="utf-8")
        if "RawModule" in text and "__main__" in text and re.search(r"^KERNELS? = r\"\"\"", text, re.M):
            spec = importlib.util.spec_from_file_location(f"example_{path.parent.name}_{path.stem}", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            yield path, getattr(module, "KERNELS", None) or module.KERNEL


@pytest.fixture(scope="module")
def nvrtc():
    spec = importlib.util.spec_from_file_location("nvrtc_check", ROOT / ".ci" / "nvrtc_check.py")
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    try:
        return check.Nvrtc(check.find_nvrtc())
    except (SystemExit, OSError, ImportError) as e:
        pytest.skip(f"NVRTC is not available here ({e}); pip install nvidia-cuda-nvrtc")


@pytest.mark.parametrize(
    "path,source",
    list(_kernel_strings()),
    ids=lambda x: f"{x.parent.name}/{x.name}" if isinstance(x, pathlib.Path) else "",
)
def test_example_kernels_compile_with_nvrtc(nvrtc, path, source):
    ok, log, ptx_size = nvrtc.compile(source, path.name + ".cu", gpudyn.nvrtc_options(arch="90"))
    assert ok and ptx_size > 0, log


def test_a_broken_kernel_does_not_compile(nvrtc):
    ok, log, _ = nvrtc.compile(
        '#include <gpudyn/rw_heap.cuh>\nextern "C" __global__ void k() { undefined(); }',
        "broken.cu",
        gpudyn.nvrtc_options(arch="90"),
    )
    assert not ok and "undefined" in log


# The C view type of each structure, taken by value and wrapped in its device
# handle: what the headers' own comments show, under NVRTC as under nvcc.
_C_VIEW_KERNELS = {
    "heap": (
        "gpudyn_heap_view_t",
        "gpudyn::heap_ref h{v}; out[0] = reinterpret_cast<unsigned long long>(h.malloc(8));",
    ),
    "rw_heap": ("gpudyn_rw_heap_view_t", "gpudyn::rw_heap_ref h{v}; out[0] = h.page_count();"),
    "warp_heap": ("gpudyn_warp_heap_view_t", "gpudyn::warp_heap_ref h{v}; out[0] = h.valid();"),
    "ggarray": ("gpudyn_ggarray_view_t", "gpudyn::ggarray_ref<unsigned> a{v}; out[0] = a.push_back(1u);"),
}


@pytest.mark.parametrize("structure", sorted(_C_VIEW_KERNELS))
def test_the_c_view_type_compiles_with_nvrtc(nvrtc, structure):
    view_type, body = _C_VIEW_KERNELS[structure]
    source = (
        f"#include <gpudyn/{structure}.cuh>\n"
        f'extern "C" __global__ void k({view_type} v, unsigned long long* out) {{ {body} }}\n'
    )
    ok, log, ptx_size = nvrtc.compile(source, f"{structure}_c_view.cu", gpudyn.nvrtc_options(arch="90"))
    assert ok and ptx_size > 0, log
