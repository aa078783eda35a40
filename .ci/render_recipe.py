#!/usr/bin/env python3
"""CI: render recipe/meta.yaml offline (conda-build is not installable here) and check it.

Renders like conda-build: Jinja2 first (with stand-ins for compiler(), stdlib(),
pin_subpackage(), load_file_regex() and the variant variables), then ``# [selector]``
lines, then YAML. Done for the CUDA variants conda-forge builds (12.x and 13.x) and for
a non-CUDA one (which must be skipped). Checks the structure the packaging relies on and
writes the rendered 13.x recipe as JSON (``--json``) for .ci/packaging.sh, which runs the
outputs' build scripts and test commands from it. Exit status 1 with every problem listed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

import jinja2
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(ROOT, "recipe")
# CUDA packages an output may name in host: the -dev ones gpudyn needs, and the pin.
ALLOWED_CUDA_HOST = {"cuda-version", "cuda-cudart-dev", "cuda-cccl"}
CUDA_METAPACKAGES = {
    "cuda",
    "cuda-toolkit",
    "cuda-libraries",
    "cuda-libraries-dev",
    "cuda-runtime",
    "cudatoolkit",
    "cuda-compiler",
    "cuda-nvcc",
}


def header_version() -> str:
    text = open(os.path.join(ROOT, "include", "gpudyn", "gpudyn.h"), encoding="utf-8").read()
    return ".".join(
        re.search(r"#define GPUDYN_VERSION_%s (\d+)" % k, text).group(1) for k in ("MAJOR", "MINOR", "PATCH")
    )


class _Undefined:
    def __repr__(self) -> str:
        return "undefined"


UNDEFINED = _Undefined()


def render(variant: dict) -> dict | None:
    """The recipe as conda-build would see it for `variant` (None when skipped)."""
    src_dir = os.path.normpath(os.path.join(RECIPE, ".."))
    version_holder: dict = {}

    def compiler(lang: str) -> str:
        names = {"c": "gcc", "cxx": "gxx", "cuda": variant.get("cuda_compiler", "cuda-nvcc")}
        vers = {"c": "14", "cxx": "14", "cuda": variant.get("cuda_compiler_version", "None")}
        return f"{names[lang]}_linux-64 {vers[lang]}.*"

    def stdlib(lang: str) -> str:
        assert lang == "c"
        return "sysroot_linux-64 2.28.*"

    def pin_subpackage(name: str, max_pin: str | None = None, exact: bool = False) -> str:
        v = version_holder["version"]
        if exact:
            return f"{name} =={v}"
        parts = [int(x) for x in v.split(".")]
        n = len(max_pin.split(".")) if max_pin else 1
        upper = parts[:n]
        upper[-1] += 1
        return f"{name} >={v},<{'.'.join(map(str, upper))}.0a0"

    def load_file_regex(load_file: str, regex_pattern: str, from_recipe_dir: bool = False):
        base = RECIPE if from_recipe_dir else src_dir
        with open(os.path.join(base, load_file), encoding="utf-8") as f:
            m = re.search(regex_pattern, f.read())
        if m is None:
            raise ValueError(f"load_file_regex: {regex_pattern!r} not found in {load_file}")
        return m

    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template = env.from_string(open(os.path.join(RECIPE, "meta.yaml"), encoding="utf-8").read())
    ctx = dict(
        variant,
        compiler=compiler,
        stdlib=stdlib,
        pin_subpackage=pin_subpackage,
        load_file_regex=load_file_regex,
        PKG_HASH="h0123456",
        environ=os.environ,
    )
    # pin_subpackage needs the version the template computes: the header's (checked below)
    version_holder["version"] = header_version()
    text = template.render(**ctx)

    ns = {
        "linux": True,
        "linux64": True,
        "win": False,
        "osx": False,
        "unix": True,
        "x86_64": True,
        "undefined": UNDEFINED,
        "py": variant.get("py", 311),
    }
    ns.update(variant)
    ns.setdefault("cuda_compiler_version", UNDEFINED)
    lines = []
    for line in text.splitlines():
        sel = re.search(r"#\s*\[([^\[\]]+)\]\s*$", line)
        if sel:
            if not eval(sel.group(1), {"__builtins__": {}}, ns):  # noqa: S307 (conda-build does the same)
                continue
            line = line[: sel.start()].rstrip()
        lines.append(line)
    meta = yaml.safe_load("\n".join(lines))
    if meta.get("build", {}).get("skip"):
        return None
    return meta


def numba_extra_bounds() -> str:
    """pyproject.toml's [numba] extra's numba-cuda bounds, as '>=0.30,<0.31'."""
    text = open(os.path.join(ROOT, "pyproject.toml"), encoding="utf-8").read()
    m = re.search(r'^numba\s*=\s*\["numba-cuda(?:\[[^\]]*\])?([^"]*)"\]', text, re.M)
    if m is None:
        raise ValueError("pyproject.toml: no numba = [\"numba-cuda...\"] extra")
    return m.group(1).replace(" ", "")


def reqs(section: dict | None, key: str) -> list[str]:
    return [str(r) for r in ((section or {}).get(key) or [])]


def names(specs: list[str]) -> list[str]:
    return [s.split()[0] for s in specs]


def check(meta: dict, variant: dict) -> list[str]:
    errs: list[str] = []
    tag = f"[cuda {variant.get('cuda_compiler_version')}]"

    def need(cond: bool, msg: str) -> None:
        if not cond:
            errs.append(f"{tag} {msg}")

    version = header_version()
    need(
        str(meta["package"]["version"]) == version,
        f"package version {meta['package']['version']} is not the header's {version}",
    )
    need(os.path.isdir(os.path.normpath(os.path.join(RECIPE, meta["source"]["path"]))), "source path missing")
    outs = {o["name"]: o for o in meta.get("outputs", [])}
    need(sorted(outs) == ["gpudyn", "libgpudyn"], f"outputs are {sorted(outs)}, expected gpudyn and libgpudyn")
    if sorted(outs) != ["gpudyn", "libgpudyn"]:
        return errs
    cuda_pin = f"cuda-version {variant['cuda_compiler_version']}.*"
    for name, o in outs.items():
        script = o.get("script", "")
        need(bool(script) and os.path.isfile(os.path.join(RECIPE, script)), f"{name}: build script {script!r} missing")
        r = o.get("requirements", {})
        build, host, run = reqs(r, "build"), reqs(r, "host"), reqs(r, "run")
        need(
            any(s.startswith("cuda-nvcc_linux-64 " + variant["cuda_compiler_version"]) for s in build),
            f"{name}: build lacks {{{{ compiler('cuda') }}}}",
        )
        need(
            any(s.startswith("gcc_linux-64") for s in build) and any(s.startswith("sysroot_") for s in build),
            f"{name}: build lacks compiler('c') / stdlib('c')",
        )
        need(cuda_pin in host, f"{name}: host lacks '{cuda_pin}'")
        for n in names(host) + names(run):
            if n.startswith("cuda") or n.startswith("libcu"):
                need(n in ALLOWED_CUDA_HOST, f"{name}: CUDA package {n} is not one of the needed -dev packages")
            need(n not in CUDA_METAPACKAGES, f"{name}: names the CUDA metapackage {n}")
        need(
            not [n for n in names(run) if n.startswith("cuda") or n == "__cuda"],
            f"{name}: run requirements name CUDA packages (must install without a GPU)",
        )
        ignored = (o.get("build") or {}).get("ignore_run_exports_from") or []
        need(
            "cuda-cudart-dev" in ignored, f"{name}: cudart is static: ignore_run_exports_from must list cuda-cudart-dev"
        )
        t = o.get("test") or {}
        need(bool(t.get("commands")), f"{name}: no test commands")
    lib, py = outs["libgpudyn"], outs["gpudyn"]
    rex = reqs(lib.get("build"), "run_exports")
    need(any(s.startswith(f"libgpudyn >={version},<") for s in rex), "libgpudyn: run_exports must pin libgpudyn")
    lt = lib.get("test") or {}
    need("examples" in (lt.get("source_files") or []), "libgpudyn: test source_files must include examples")
    cmds = " ".join(lt.get("commands") or [])
    for what in ("pkg-config", "examples/pkgconfig", "examples/cmake", "ctest", "ldd"):
        need(what in cmds, f"libgpudyn: test commands do not use {what}")
    for what in ("cmake", "make", "pkg-config"):
        need(what in names(reqs(lt, "requires")), f"libgpudyn: test requires lacks {what}")
    pr = py.get("requirements", {})
    exact = f"libgpudyn =={version}"
    need(exact in reqs(pr, "host") and exact in reqs(pr, "run"), "gpudyn: host and run must pin libgpudyn exactly")
    for n in ("python", "cffi", "numpy"):
        need(n in names(reqs(pr, "run")), f"gpudyn: run lacks {n}")
    need("meson-python" in names(reqs(pr, "host")), "gpudyn: host lacks meson-python")
    # no benchmark programs in the package: nothing whose rpath meson-python would rewrite
    need(
        "patchelf" not in names(reqs(pr, "build")),
        "gpudyn: build lists patchelf, which only the benchmark programs needed (they are not in the package)",
    )
    # numba-cuda: optional, bounded as pyproject.toml's [numba] extra bounds it
    extra = numba_extra_bounds()
    constrained = [s for s in reqs(pr, "run_constrained") if s.split()[0] == "numba-cuda"]
    need(
        len(constrained) == 1 and constrained[0].split(None, 1)[-1].replace(" ", "") == extra,
        f"gpudyn: run_constrained must bound numba-cuda as pyproject.toml's numba extra does ({extra}), "
        f"found {constrained}",
    )
    script = open(os.path.join(RECIPE, py.get("script", "build_gpudyn.sh")), encoding="utf-8").read()
    need("-Dbundle_library=false" in script, "gpudyn: build script must pass -Dbundle_library=false")
    need("-Ccuda-suffix=false" in script, "gpudyn: build script must pass -Ccuda-suffix=false (pip name gpudyn)")
    need(
        "-Dbenchmarks=false" in script,
        "gpudyn: build script must pass -Dbenchmarks=false (no benchmarks in the package)",
    )
    pt = py.get("test") or {}
    need("gpudyn" in (pt.get("imports") or []), "gpudyn: test imports lack gpudyn")
    pcmds = " ".join(pt.get("commands") or [])
    need(
        "gpudyn info" in pcmds and "__version__" in pcmds and "library_path" in pcmds,
        "gpudyn: test commands must run `gpudyn info` and check the version and the library used",
    )
    need(
        "gpudyn = gpudyn.cli:main" in ((py.get("build") or {}).get("entry_points") or []),
        "gpudyn: entry point `gpudyn` missing",
    )
    return errs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="write the rendered CUDA 13 recipe here")
    args = ap.parse_args()
    errs: list[str] = []
    rendered = None
    for cuda in ("12.9", "13.0"):
        variant = {"cuda_compiler": "cuda-nvcc", "cuda_compiler_version": cuda, "py": 311}
        meta = render(variant)
        if meta is None:
            errs.append(f"[cuda {cuda}] recipe is skipped for a CUDA variant")
            continue
        errs += check(meta, variant)
        print(
            f"rendered for CUDA {cuda}: {meta['package']['name']} {meta['package']['version']}, outputs "
            + ", ".join(o["name"] for o in meta["outputs"])
        )
        rendered = meta
    if render({"cuda_compiler_version": "None", "py": 311}) is not None:
        errs.append("[no CUDA] the recipe must be skipped without a CUDA compiler")
    for script in ("build_libgpudyn.sh", "build_gpudyn.sh", "meson_cuda_archs.sh"):
        if os.system(f"bash -n {os.path.join(RECIPE, script)}") != 0:
            errs.append(f"{script}: bash syntax error")
    if args.json and rendered is not None:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rendered, f, indent=1)
    for e in errs:
        print("recipe: " + e, file=sys.stderr)
    print(f"recipe: {len(errs)} problem(s)")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
