"""Which compiled shim file Numba links, and the declarations of the shims.

meson installs, next to this module, per architecture ``arch`` of the build
(``shims.json`` lists them and the CUDA version of the nvcc that built them):

* ``gpudyn_numba_sm<arch>.ltoir``: LTO-IR.  nvJitLink links it with
  link-time optimization, so the shims inline into the user's kernel.  Only an
  nvJitLink of the same CUDA major version, at least as new, reads it (an
  older one reads neither file: importing is fine, compiling a kernel says so).
* ``gpudyn_numba_sm<arch>.ptx``: relocatable PTX, for any linker numba-cuda
  uses (nvJitLink, or the driver's when nvJitLink is absent); calls stay calls.

``GPUDYN_NUMBA_LINK=ltoir|ptx`` forces one; by default LTO-IR when numba-cuda
links with such an nvJitLink, else PTX.  The architecture is the highest one
built that the current device runs (the highest built without a device).
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

_DIR = os.path.dirname(os.path.abspath(__file__))
MODES = ("ltoir", "ptx")


@functools.cache
def build_info() -> dict:
    """``{"archs": [...], "cuda_version": "13.0.88"}`` of the installed shims."""
    path = os.path.join(_DIR, "shims.json")
    try:
        with open(path, encoding="utf-8") as f:
            info = json.load(f)
    except FileNotFoundError:
        raise ImportError(
            f"gpudyn.numba: {path} is missing: this gpudyn was installed without its Numba device "
            "code (it is built by meson with nvcc when the package is installed)"
        ) from None
    info["archs"] = [str(a) for a in info["archs"]]
    return info


def _major_minor(version: str) -> tuple:
    parts = (version.split(".") + ["0"])[:2]
    return int(parts[0]), int(parts[1])


def shim_path(arch: str, mode: str) -> str:
    """Path of the shim file for `arch` ("90") in `mode` ("ltoir" or "ptx")."""
    if mode not in MODES:
        raise ValueError(f"gpudyn.numba: link mode {mode!r}; expected one of {MODES}")
    path = os.path.join(_DIR, f"gpudyn_numba_sm{arch}.{mode}")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"gpudyn.numba: {path} is missing (built architectures: {', '.join(build_info()['archs'])})"
        )
    return path


def pick_arch(cc: tuple[int, int] | None) -> str:
    """The highest built architecture that a device of compute capability `cc`
    ((major, minor), or None: no device) runs; arch-specific builds ("90a")
    only on exactly their device."""
    archs = build_info()["archs"]
    if cc is None:
        return max(archs, key=lambda a: (int(a.rstrip("af")), a))
    want = cc[0] * 10 + cc[1]
    fits = [a for a in archs if int(a.rstrip("af")) <= want and (a.isdigit() or int(a.rstrip("af")) == want)]
    if not fits:
        raise RuntimeError(
            f"gpudyn.numba: the device (sm_{want}) is older than every architecture gpudyn was "
            f"built for ({', '.join(archs)}); rebuild with -Dgpu_archs={want}"
        )
    return max(fits, key=lambda a: (int(a.rstrip("af")), a))


def nvjitlink_version() -> tuple[int, int] | None:
    """(major, minor) of the nvJitLink numba-cuda links with, or None when it
    has none (it then uses the driver's linker)."""
    try:
        from cuda.bindings import nvjitlink

        return tuple(nvjitlink.version())[:2]
    except Exception:  # not installed, or the library cannot be loaded
        return None


def pick_mode() -> str:
    mode = os.environ.get("GPUDYN_NUMBA_LINK", "").strip().lower()
    if mode:
        if mode not in MODES:
            raise ValueError(f"gpudyn.numba: GPUDYN_NUMBA_LINK={mode!r}; expected one of {MODES}")
        return mode
    built = _major_minor(build_info()["cuda_version"])
    have = nvjitlink_version()
    if have is None:
        return "ptx"
    if have < built:
        # That nvJitLink reads neither our LTO-IR nor our PTX (a newer PTX ISA).
        raise RuntimeError(
            f"gpudyn.numba: numba-cuda links with nvJitLink {have[0]}.{have[1]}, older than the CUDA "
            f"{built[0]}.{built[1]} that built gpudyn's device code (it reads neither gpudyn's LTO-IR nor its "
            f"PTX); install nvJitLink {built[0]}.x: pip install 'nvidia-nvjitlink=={built[0]}.*'"
        )
    return "ltoir" if have[0] == built[0] else "ptx"


def _current_cc():
    try:
        from numba import cuda

        if cuda.is_available():
            return tuple(cuda.get_current_device().compute_capability)
    except Exception:  # no driver, no device
        pass
    return None


@functools.cache
def link_file() -> str:
    """The file every kernel calling a gpudyn.numba function links (chosen once)."""
    return shim_path(pick_arch(_current_cc()), pick_mode())


_declared: dict = {}


def extern(name: str, restype: Any, argtypes: Any) -> Any:
    """The numba-cuda declaration of shim `name` (declared on first use, so
    importing gpudyn.numba neither touches the device nor reads the files)."""
    fn = _declared.get(name)
    if fn is None:
        from numba import cuda

        fn = cuda.declare_device(name, restype(*argtypes), link=[link_file()], abi="c")
        _declared[name] = fn
    return fn
