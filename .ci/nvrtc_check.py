#!/usr/bin/env python3
"""CI: compile every device header of the installed gpudyn with NVRTC (no GPU needed).

Each header under ``<gpudyn.get_include()>/gpudyn`` ending in ``.cuh`` (including
``detail/``) is compiled alone, as ``#include <gpudyn/NAME.cuh>`` plus an empty kernel,
with exactly ``gpudyn.nvrtc_options()`` (NVRTC's default architecture) and
``gpudyn.nvrtc_options(arch=...)`` for each ``--arch``. NVRTC comes from pip
(``nvidia-cuda-nvrtc``), loaded through ctypes; ``NVRTC_LIBRARY`` overrides the path.
An empty kernel must compile and a deliberately broken source must fail, so the check cannot pass vacuously.
Exit status 1 when any compile fails.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import shutil
import sys


def find_nvrtc() -> str:
    if os.environ.get("NVRTC_LIBRARY"):
        return os.environ["NVRTC_LIBRARY"]
    candidates = []
    try:
        import nvidia  # namespace package of the nvidia-cuda-nvrtc wheel

        for base in nvidia.__path__:
            for pattern in ("cu13/lib/libnvrtc.so.*", "cuda_nvrtc/lib/libnvrtc.so.*"):
                candidates += sorted(glob.glob(os.path.join(base, pattern)))
    except ImportError:  # no wheel: the toolkit's own library below
        pass
    nvcc = shutil.which("nvcc")
    for root in ([os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))] if nvcc else []) + ["/usr/local/cuda"]:
        for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
            candidates += sorted(glob.glob(os.path.join(root, sub, "libnvrtc.so.*")))
    for p in candidates:
        if "alt" not in os.path.basename(p) and "builtins" not in os.path.basename(p):
            return p
    raise SystemExit(
        "nvrtc_check: libnvrtc not found (pip install nvidia-cuda-nvrtc, put the CUDA toolkit's nvcc "
        "on PATH, or set NVRTC_LIBRARY)"
    )


class Nvrtc:
    def __init__(self, path: str):
        # libnvrtc dlopens its builtins library by name: load the one beside it first.
        for b in sorted(glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.*"))):
            if ".alt." not in b:
                ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
        self.lib = ctypes.CDLL(path)
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._check(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)))
        self.version = (major.value, minor.value)

    def _check(self, rc: int) -> None:
        if rc != 0:
            raise RuntimeError(self.lib.nvrtcGetErrorString(rc).decode())

    def compile(self, source: str, name: str, options: list[str]) -> tuple[bool, str, int]:
        """(success, log, PTX size)."""
        prog = ctypes.c_void_p()
        self._check(self.lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None))
        try:
            opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            rc = self.lib.nvrtcCompileProgram(prog, len(options), opts)
            size = ctypes.c_size_t()
            self._check(self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)))
            buf = ctypes.create_string_buffer(size.value)
            self._check(self.lib.nvrtcGetProgramLog(prog, buf))
            log = buf.value.decode(errors="replace")
            ptx_size = 0
            if rc == 0:
                psize = ctypes.c_size_t()
                self._check(self.lib.nvrtcGetPTXSize(prog, ctypes.byref(psize)))
                ptx_size = psize.value
            return rc == 0, log, ptx_size
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))


def probe_source(header: str) -> str:
    return f"#include <{header}>\nextern \"C\" __global__ void gpudyn_nvrtc_probe(int* p) {{ if (p) *p = 1; }}\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append", default=[], help="also compile for compute_ARCH (repeatable)")
    ap.add_argument(
        "--source",
        action="append",
        default=[],
        help="also compile this kernel source file (examples' NVRTC kernels; repeatable)",
    )
    args = ap.parse_args()

    import gpudyn
    from gpudyn.nvrtc import nvrtc_options

    nv = Nvrtc(find_nvrtc())
    root = gpudyn.get_include()
    headers = sorted(
        os.path.relpath(p, root).replace(os.sep, "/")
        for p in glob.glob(os.path.join(root, "gpudyn", "**", "*.cuh"), recursive=True)
    )
    if not headers:
        print(f"nvrtc_check: no device headers under {root}/gpudyn", file=sys.stderr)
        return 1
    option_sets = [nvrtc_options()] + [nvrtc_options(arch=a) for a in args.arch]
    print(f"NVRTC {nv.version[0]}.{nv.version[1]}; headers from {root}")
    for opts in option_sets:
        print("  options: " + " ".join(opts))

    ok, log, _ = nv.compile("extern \"C\" __global__ void k(int* p) { *p = 1; }\n", "positive.cu", option_sets[0])
    if not ok:
        print("nvrtc_check: NVRTC cannot compile an empty kernel:\n" + log, file=sys.stderr)
        return 1
    ok, log, _ = nv.compile(probe_source("gpudyn/does_not_exist.cuh"), "negative.cu", option_sets[0])
    if ok:
        print("nvrtc_check: a source including a missing header compiled: the check is broken", file=sys.stderr)
        return 1

    failures = 0
    for h in headers:
        for opts in option_sets:
            ok, log, ptx = nv.compile(probe_source(h), h.replace("/", "_") + ".cu", opts)
            arch = next((o.split("=")[1] for o in opts if o.startswith("--gpu-architecture=")), "default arch")
            if ok and ptx > 0:
                print(f"  ok    {h} ({arch})")
            else:
                failures += 1
                print(
                    f"  FAIL  {h} ({arch})\n" + "\n".join("        " + line for line in log.strip().splitlines()[:40])
                )
    for path in args.source:
        for opts in option_sets:
            ok, log, ptx = nv.compile(open(path, encoding="utf-8").read(), os.path.basename(path), opts)
            arch = next((o.split("=")[1] for o in opts if o.startswith("--gpu-architecture=")), "default arch")
            if ok and ptx > 0:
                print(f"  ok    {path} ({arch})")
            else:
                failures += 1
                print(
                    f"  FAIL  {path} ({arch})\n"
                    + "\n".join("        " + line for line in log.strip().splitlines()[:40])
                )
    print(f"NVRTC: {len(headers)} device headers and {len(args.source)} source(s), {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
