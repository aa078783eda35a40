"""Helpers for the tests that run the documentation's code (test_readme.py,
test_guide_samples.py): compile C and CUDA programs against the installed library,
and check Python samples without a GPU (the gpudyn names they use exist, and their
Numba kernels compile)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess

import gpudyn

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The lowest compute capability gpudyn supports: a program compiled for it without a GPU
# shows that it compiles for every default architecture's device code paths.
COMPILE_ONLY_ARCH = "sm_75"


def has_gpu() -> bool:
    try:
        return gpudyn.device_count() > 0
    except gpudyn.GpudynError:
        return False


def nvcc() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.path.exists(os.path.join(home, "bin", "nvcc")):
            return os.path.join(home, "bin", "nvcc")
    return None


def _link_args(rpath: list[str]) -> list[str]:
    """Include folder, the library itself and an rpath to it (the wheel has no pkg-config file)."""
    libdir = os.path.dirname(gpudyn.library_path)
    return ["-I", gpudyn.get_include(), gpudyn.library_path, *rpath[:-1], rpath[-1] + libdir]


def compile_c(src, exe) -> None:
    subprocess.run(
        ["cc", "-std=c99", "-Wall", "-Werror", str(src), *_link_args(["-Wl,-rpath,"]), "-o", str(exe)],
        check=True,
        capture_output=True,
        text=True,
    )


def compile_cuda(src, exe) -> None:
    """nvcc for this machine's GPU (-arch=native), or for the lowest supported one without a GPU."""
    arch = "-arch=native" if has_gpu() else f"-arch={COMPILE_ONLY_ARCH}"
    r = subprocess.run(
        [
            nvcc(),
            "-std=c++17",
            arch,
            "--Werror=all-warnings",
            str(src),
            *_link_args(["-Xlinker", "-rpath,"]),
            "-o",
            str(exe),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def run_program(exe, no_device_ok: bool = True) -> str:
    """Runs a compiled sample: on a GPU it must succeed (its stdout is returned); without one
    it must fail with the library's no-device status (None is returned)."""
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300)
    if has_gpu():
        assert r.returncode == 0, r.stdout + r.stderr
        return r.stdout
    assert no_device_ok and r.returncode != 0 and r.stdout.startswith("GPUDYN_ERROR_NO_DEVICE: "), r.stdout + r.stderr
    return None


def _module_aliases(tree: ast.AST) -> dict:
    """Local name -> module path for `import gpudyn[.x] [as y]` in the sample."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "gpudyn" or a.name.startswith("gpudyn."):
                    names[a.asname or a.name.split(".")[0]] = a.name if a.asname else "gpudyn"
    return names


def _class_made_by(call, aliases: dict):
    """The gpudyn class `gpudyn.X(...)` or `gpudyn.X.from_numpy(...)` makes, else None."""
    import importlib

    if not isinstance(call, ast.Call):
        return None
    f = call.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Attribute):
        f = f.value  # gpudyn.X.from_numpy(...): an X
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in aliases:
        found = getattr(importlib.import_module(aliases[f.value.id]), f.attr, None)
        return found if isinstance(found, type) else None
    return None


def _uses(nodes, name: str):
    """Attribute names taken of `name` inside `nodes`."""
    for top in nodes:
        for node in ast.walk(top):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name:
                yield node.attr


def _missing_methods(tree: ast.AST, aliases: dict) -> list[str]:
    """`v.attr` that class X lacks, for `with gpudyn.X(...) as v:` (inside the block) and
    `v = gpudyn.X(...)` (in the statements after it, in the same body)."""
    missing = []
    for node in ast.walk(tree):
        scopes = []
        if isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if isinstance(item.optional_vars, ast.Name):
                    scopes.append((item.optional_vars.id, _class_made_by(item.context_expr, aliases), node.body))
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list):
                continue
            for i, stmt in enumerate(body):
                if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                    scopes.append((stmt.targets[0].id, _class_made_by(stmt.value, aliases), body[i + 1 :]))
        for name, cls, nodes in scopes:
            if cls is not None:
                missing += [f"{cls.__name__}.{attr}" for attr in _uses(nodes, name) if not hasattr(cls, attr)]
    return missing


def missing_gpudyn_names(source: str) -> list[str]:
    """`gpudyn.X` / `gdn.X` (any alias of a gpudyn module), `from gpudyn... import X`
    and `v.method` of objects made by `gpudyn.X(...)` in `source` that the installed
    package does not have (what a rename breaks, found without a GPU)."""
    import importlib

    tree = ast.parse(source)
    aliases = _module_aliases(tree)
    missing = _missing_methods(tree, aliases)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            module = importlib.import_module(aliases[node.value.id])
            if not hasattr(module, node.attr):
                missing.append(f"{aliases[node.value.id]}.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "gpudyn":
            module = importlib.import_module(node.module)
            missing += [f"{node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)]
    return missing


def definitions(source: str, filename: str) -> dict:
    """The sample's imports and function definitions, run without the rest (no device work):
    its namespace, where each @cuda.jit kernel is a dispatcher."""
    tree = ast.parse(source)
    tree.body = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef))]
    namespace = {"__name__": "sample"}
    exec(compile(tree, filename, "exec"), namespace)
    return namespace


def numba_ref_type(structure: str, dtype=None):
    """The Numba type of a structure's kernel argument (`view_arg()`), made without a GPU."""
    import gpudyn.numba as gdn
    from numba.cuda.typing.typeof import typeof

    public = getattr(gdn, "ref_type", None)
    if public is not None:
        return public(getattr(gpudyn, structure), *(() if dtype is None else (dtype,)))
    from gpudyn.numba import _refs  # before the public ahead-of-time API

    kinds = {cls.__name__: kind for cls, kind in _refs._kinds()}
    cls = _refs.ref_class(kinds[structure], dtype)
    return typeof(cls(*(s(0) for s in cls._gpudyn_scalars)))


def compile_kernel(dispatcher, signature) -> str:
    """PTX of a @cuda.jit kernel for `signature`, compiled without a GPU."""
    import gpudyn.numba as gdn
    from numba import cuda

    archs = gdn.build_info()["archs"]
    arch = "90" if "90" in archs else archs[0]
    ptx, _ = cuda.compile(
        dispatcher.py_func, signature, device=False, output="ptx", cc=divmod(int(arch.rstrip("af")), 10), abi="numba"
    )
    return ptx
