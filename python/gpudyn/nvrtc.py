"""Options for compiling gpudyn's device headers at run time with NVRTC (CuPy, cuda-python).

The device headers (``#include <gpudyn/warp_heap.cuh>`` ...) are header-only and compile
under NVRTC, which has no host standard headers: they use ``<cuda/std/...>`` from CCCL
instead. So an NVRTC compile needs three include folders: gpudyn's own
(:func:`gpudyn.get_include`), CCCL's (CUDA 13 keeps it in ``<cuda>/include/cccl``; CUDA 12
in ``<cuda>/include``; pip's ``nvidia-cuda-cccl`` in ``nvidia/cu13/include/cccl``) and the
toolkit's ``include`` folder when there is one. The device headers also see the C ABI's
declarations (the view structs live in the C headers), which are host functions: NVRTC
rejects unannotated functions unless ``-default-device`` makes them device declarations
(never defined, never called). :func:`nvrtc_options` returns all of this, plus the C++
standard the headers need::

    import cupy, gpudyn
    module = cupy.RawModule(code=source, options=tuple(gpudyn.nvrtc_options()))

    # cuda-python / ctypes NVRTC: the same list, each entry encoded
    opts = [o.encode() for o in gpudyn.nvrtc_options(arch="90")]

CI compiles every device header with NVRTC using exactly this list.
"""

from __future__ import annotations

import os
import shutil
import sys

from .errors import InvalidArgumentError

#: The C++ standard the device headers are written against (same as the meson build).
CXX_STANDARD = "c++17"

# Platform folder of a conda or toolkit "targets" tree (conda-forge puts CUDA headers
# in <prefix>/targets/<this>/include).
_TARGETS = {"x86_64": "x86_64-linux", "aarch64": "sbsa-linux", "ppc64le": "ppc64le-linux"}


# Where a toolkit is looked for last.
_DEFAULT_ROOTS = ("/usr/local/cuda",)


def _is_cccl_dir(d: str) -> bool:
    return os.path.isfile(os.path.join(d, "cuda", "std", "cstdint"))


def cuda_roots() -> list[str]:
    """CUDA toolkit folders that may hold ``include/``, most specific first:
    ``$CUDA_PATH``, ``$CUDA_HOME``, the conda environment's ``targets/<platform>``,
    the folder above the ``nvcc`` on ``PATH``, ``/usr/local/cuda``. Only existing folders."""
    cands = [os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME")]
    machine = os.uname().machine if hasattr(os, "uname") else ""
    if machine in _TARGETS:
        cands.append(os.path.join(sys.prefix, "targets", _TARGETS[machine]))
    nvcc = shutil.which("nvcc")
    if nvcc:
        cands.append(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))))
    cands.extend(_DEFAULT_ROOTS)
    out: list[str] = []
    for c in cands:
        if c and os.path.isdir(os.path.join(c, "include")) and os.path.realpath(c) not in map(os.path.realpath, out):
            out.append(c)
    return out


def _pip_cccl_dirs() -> list[str]:
    """CCCL from pip: ``nvidia-cuda-cccl`` (CUDA 13: nvidia/cu13/include/cccl) or
    ``nvidia-cuda-cccl-cu12`` (nvidia/cuda_cccl/include)."""
    try:
        import nvidia  # namespace package of NVIDIA's pip wheels
    except ImportError:
        return []
    out = []
    for base in getattr(nvidia, "__path__", []):
        for sub in (("cu13", "include", "cccl"), ("cuda_cccl", "include"), ("cu12", "include")):
            d = os.path.join(base, *sub)
            if _is_cccl_dir(d):
                out.append(d)
    return out


def cccl_include_dirs() -> list[str]:
    """The first CCCL include folder found (a list of 0 or 1 entries): the toolkit's
    (:func:`cuda_roots`; ``include/cccl`` for CUDA 13, ``include`` for CUDA 12), else pip's
    ``nvidia-cuda-cccl``. Empty when there is none (CuPy then supplies its bundled CCCL)."""
    env = os.environ.get("GPUDYN_CCCL_INCLUDE")
    if env:
        return [env]
    for root in cuda_roots():
        for d in (os.path.join(root, "include", "cccl"), os.path.join(root, "include")):
            if _is_cccl_dir(d):
                return [d]
    return _pip_cccl_dirs()[:1]


def _is_toolkit_include(d: str) -> bool:
    return os.path.isfile(os.path.join(d, "cuda_runtime.h"))


def cuda_include_dirs() -> list[str]:
    """The toolkit's ``include`` folder (for ``<mma.h>`` and friends when NVRTC's built-in
    headers lack them): the first of :func:`cuda_roots` whose ``include`` holds
    ``cuda_runtime.h`` (an ``nvcc`` wrapper script in ``/usr/local/bin`` makes
    ``/usr/local`` a root, whose ``include`` is not CUDA's), or an empty list without a toolkit."""
    for root in cuda_roots():
        d = os.path.join(root, "include")
        if _is_toolkit_include(d):
            return [d]
    return []


def nvrtc_options(arch: str | int | None = None, *, std: str = CXX_STANDARD) -> list[str]:
    """The NVRTC options that compile gpudyn's device headers, as a list of strings.

    ``["--std=c++17", "-default-device", "-I<gpudyn include>", "-I<CCCL include>",
    "-I<CUDA include>"]``, plus
    ``"--gpu-architecture=compute_<arch>"`` when ``arch`` (``90``, ``"90"``, ``"sm_90"``,
    ``"compute_90"``, ``"90a"``; 75 or newer) is given; CuPy chooses the architecture
    itself, so leave it out there. ``std``: ``"c++17"`` or ``"c++20"`` (the headers need
    C++17; anything else is a ValueError). Folders are found by
    :func:`gpudyn.get_include`, :func:`cccl_include_dirs` (``GPUDYN_CCCL_INCLUDE`` overrides)
    and :func:`cuda_include_dirs`; the ones not found are left out. Pass the list unchanged:
    ``cupy.RawModule(code=src, options=tuple(gpudyn.nvrtc_options()))``.
    """
    from . import get_include

    if std not in _STANDARDS:
        raise InvalidArgumentError(f"gpudyn: std={std!r}: gpudyn's device headers need one of {', '.join(_STANDARDS)}")
    opts = [f"--std={std}", "-default-device", "-I" + get_include()]
    seen = set()
    for d in cccl_include_dirs() + cuda_include_dirs():
        if d not in seen:
            seen.add(d)
            opts.append("-I" + d)
    if arch is not None:
        opts.append(f"--gpu-architecture=compute_{_arch_number(arch)}")
    return opts


_STANDARDS = ("c++17", "c++20")


def _arch_number(arch) -> str:
    """``90`` / ``"90"`` / ``"sm_90"`` / ``"compute_90a"`` -> ``"90"`` / ``"90a"``; a
    ValueError for anything else or below 75 (CUDA 13's oldest architecture)."""
    if isinstance(arch, bool) or not isinstance(arch, (int, str)):
        raise TypeError(f"gpudyn: arch must be an int or a str like '90' or 'sm_90', not {type(arch).__name__}")
    text = str(arch).strip().lower()
    for prefix in ("sm_", "compute_"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    digits = text.rstrip("af")
    if not digits.isdigit() or len(text) - len(digits) > 1 or int(digits) < 75:
        raise InvalidArgumentError(
            f"gpudyn: arch={arch!r} is not a CUDA architecture gpudyn supports "
            "(75 or newer, e.g. 90, '90', 'sm_90', 'compute_90a')"
        )
    return text


__all__ = ["nvrtc_options", "cccl_include_dirs", "cuda_include_dirs", "cuda_roots", "CXX_STANDARD"]
