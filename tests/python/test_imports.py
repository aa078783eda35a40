"""Import structure: every module of the package imports first in a fresh
interpreter, the structure modules import in every order, ``import gpudyn``
imports no Numba, and no core module imports gpudyn.numba (each structure
declares what it offers kernels; gpudyn.numba reads the declarations)."""

import ast
import importlib.util
import itertools
import os
import subprocess
import sys

import gpudyn
import pytest

PACKAGE_DIR = os.path.dirname(gpudyn.__file__)
STRUCTURE_MODULES = ["gpudyn.ggarray", "gpudyn.heap", "gpudyn.rw_heap", "gpudyn.warp_heap"]
CORE_MODULES = [
    "gpudyn",
    "gpudyn._view",
    "gpudyn._handle",
    "gpudyn._deprecated",
    "gpudyn._typing",
    "gpudyn.buffer",
    "gpudyn.errors",
    "gpudyn.info",
    "gpudyn.nvrtc",
    "gpudyn.cli",
] + STRUCTURE_MODULES
HAVE_NUMBA = importlib.util.find_spec("numba") is not None and importlib.util.find_spec("numba.cuda") is not None
NUMBA_MODULES = ["gpudyn.numba", "gpudyn.numba._refs", "gpudyn.numba._device", "gpudyn.numba._link"]

CHILD = """
import sys
for name in sys.argv[1:]:
    __import__(name)
import gpudyn
for cls in (gpudyn.GGArray, gpudyn.StaticArray, gpudyn.VmmArray, gpudyn.Heap, gpudyn.RWHeap, gpudyn.WarpHeap):
    assert cls._kernel_view.view_type.startswith("gpudyn_"), cls
numba = sorted(m for m in sys.modules if m == "numba" or m.startswith("numba."))
print("numba" if numba else "no numba")
"""


def _run_all(orders):
    """Each order of imports in its own fresh interpreter (all at once): {order: stdout}."""
    procs = {
        order: subprocess.Popen(
            [sys.executable, "-c", CHILD, *order], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for order in orders
    }
    out = {}
    for order, p in procs.items():
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, f"importing {' then '.join(order)} failed:\n{stderr}"
        out[order] = stdout.strip()
    return out


def test_structure_modules_import_in_every_order():
    orders = list(itertools.permutations(STRUCTURE_MODULES))
    assert all(v == "no numba" for v in _run_all(orders).values())


def test_every_module_imports_first_and_core_modules_import_no_numba():
    orders = [(m,) for m in CORE_MODULES] + ([(m,) for m in NUMBA_MODULES] if HAVE_NUMBA else [])
    out = _run_all(orders)
    for m in CORE_MODULES:
        assert out[(m,)] == "no numba", f"importing {m} imported numba"
    for m in NUMBA_MODULES if HAVE_NUMBA else ():
        assert out[(m,)] == "numba"


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba-cuda is not installed")
def test_gpudyn_numba_before_and_after_the_structures():
    orders = [
        ("gpudyn.numba", "gpudyn.ggarray"),
        ("gpudyn.warp_heap", "gpudyn.numba", "gpudyn.rw_heap"),
        ("gpudyn.numba._refs", "gpudyn"),
    ]
    assert all(v == "numba" for v in _run_all(orders).values())


def test_no_core_module_imports_numba():
    """Source check: outside gpudyn/numba (and the benchmark drivers) no module imports
    numba or gpudyn.numba, at its top or inside a function."""
    offenders = []
    for root, dirs, files in os.walk(PACKAGE_DIR):
        rel = os.path.relpath(root, PACKAGE_DIR)
        if rel.split(os.sep)[0] in ("numba", "bench", "include", "bin", "__pycache__"):
            dirs[:] = []
            continue
        for f in files:
            if not f.endswith(".py"):
                continue
            tree = ast.parse(open(os.path.join(root, f), encoding="utf-8").read())
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [("." * node.level) + (node.module or "")]
                    names += [names[0] + "." + a.name if node.level and not node.module else "" for a in node.names]
                for n in names:
                    if (
                        n == "numba"
                        or n.startswith("numba.")
                        or n in (".numba", "gpudyn.numba", "..numba")
                        or n.startswith((".numba.", "gpudyn.numba."))
                        or n.endswith(".numba")
                    ):
                        offenders.append(f"{os.path.join(rel, f)}:{node.lineno}: {n}")
    assert not offenders, offenders
