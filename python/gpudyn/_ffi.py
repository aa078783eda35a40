"""Loads libgpudyn through cffi in ABI mode.

The declarations handed to cffi are read from the installed C headers
(``gpudyn.h`` and the per-structure headers it includes), never kept by hand:
preprocessor lines and the ``GPUDYN_API`` token are dropped, the rest is cdef'd
verbatim.
"""

from __future__ import annotations

import ctypes.util
import os
import re
import sys

import cffi
import numpy as np

from . import errors
from ._version import __version__

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_LIB_NAME = "libgpudyn.so"


def include_dirs() -> list[str]:
    """Folders that may hold ``gpudyn/gpudyn.h``, most specific first."""
    dirs = [os.path.join(_PKG_DIR, "include")]
    # A source checkout (python/gpudyn next to include/) and a conda/system prefix.
    dirs.append(os.path.normpath(os.path.join(_PKG_DIR, "..", "..", "include")))
    dirs.append(os.path.join(sys.prefix, "include"))
    return dirs


def header_path() -> str:
    for d in include_dirs():
        p = os.path.join(d, "gpudyn", "gpudyn.h")
        if os.path.isfile(p):
            return p
    raise errors.LibraryNotFoundError(
        "gpudyn: the C header gpudyn/gpudyn.h was not found; looked in: " + ", ".join(include_dirs())
    )


_INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"(gpudyn/[A-Za-z0-9_]+\.h)"')


def cdef_source(path: str | None = None) -> str:
    """The declarations of ``gpudyn.h`` and every structure header it includes,
    in include order, then ``experimental.h``, with preprocessor lines, C++ guards
    and GPUDYN_API removed."""
    path = path or header_path()
    root = os.path.dirname(os.path.dirname(path))
    out: list[str] = []
    seen: set[str] = set()

    def emit(file: str) -> None:
        if file in seen:
            return
        seen.add(file)
        skip_depth = 0  # inside '#ifdef __cplusplus' ... '#endif'
        depth = 0
        with open(file, encoding="utf-8") as f:
            lines = f.read().splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            stripped = line.strip()
            if stripped.startswith("#"):
                # join continuation lines of a directive
                while lines[i].rstrip().endswith("\\") and i + 1 < len(lines):
                    i += 1
                m = _INCLUDE_RE.match(line)
                if m and skip_depth == 0:
                    emit(os.path.join(root, m.group(1)))
                directive = stripped[1:].strip()
                if directive.startswith(("if", "ifdef", "ifndef")):
                    depth += 1
                    if skip_depth == 0 and re.match(r"ifdef\s+__cplusplus\b", directive):
                        skip_depth = depth
                elif directive.startswith("endif"):
                    if skip_depth == depth:
                        skip_depth = 0
                    depth -= 1
                i += 1
                continue
            if skip_depth == 0:
                out.append(line.replace("GPUDYN_API", ""))
            i += 1

    emit(path)
    # The experimental surface (benchmark instrumentation, no stability promise)
    # is not included by gpudyn.h; the package, built with the same library, uses it.
    experimental = os.path.join(os.path.dirname(path), "experimental.h")
    if os.path.isfile(experimental):
        emit(experimental)
    return "\n".join(out)


def library_candidates() -> list[str]:
    env = os.environ.get("GPUDYN_LIBRARY")
    if env:
        return [env]
    cands = [os.path.join(_PKG_DIR, _LIB_NAME)]
    # conda / system installs: the libgpudyn package provides lib/libgpudyn.so
    cands.append(os.path.join(sys.prefix, "lib", _LIB_NAME))
    found = ctypes.util.find_library("gpudyn")
    if found:
        cands.append(found)
    return cands


def _load():
    ffi = cffi.FFI()
    ffi.cdef(cdef_source())
    tried = []
    for cand in library_candidates():
        if os.path.sep in cand and not os.path.exists(cand):
            tried.append(cand + " (missing)")
            continue
        try:
            lib = ffi.dlopen(cand)
        except OSError as exc:
            tried.append(f"{cand} ({exc})")
            continue
        break
    else:
        raise errors.LibraryNotFoundError(
            "gpudyn: could not load the gpudyn shared library; tried: "
            + "; ".join(tried)
            + ". Reinstall the package or set GPUDYN_LIBRARY to the library's path."
        )
    got = int(lib.gpudyn_get_version())
    want = version_number(__version__)
    if got != want:
        raise errors.LibraryVersionError(
            f"gpudyn: the loaded library {cand} is version {got // 10000}.{got // 100 % 100}.{got % 100}, "
            f"but the Python package is {__version__}"
        )
    return ffi, lib, cand


def version_number(version: str) -> int:
    major, minor, patch = (int(x) for x in version.split(".")[:3])
    return major * 10000 + minor * 100 + patch


ffi, lib, library_path = _load()


def last_error_message() -> str:
    return ffi.string(lib.gpudyn_last_error_message()).decode("utf-8", "replace")


def check(status: int) -> None:
    """Raises the exception matching a gpudyn_status_t, with the library's message."""
    if status == 0:
        return
    raise errors.error_for_status(
        int(status), ffi.string(lib.gpudyn_status_string(status)).decode(), last_error_message()
    )


def stream_value(stream) -> int:
    """The integer cudaStream_t of a stream given as None (the legacy default
    stream, 0), an int handle, an object with ``__cuda_stream__`` (the
    cuda.core protocol: returns ``(version, handle)``), a PyTorch stream
    (``.cuda_stream``), a CuPy stream (``.ptr``) or a Numba / cuda.core stream
    (``.handle``).  The values 1 and 2 are CUDA's cudaStreamLegacy and
    cudaStreamPerThread.  TypeError for anything else."""
    if stream is None:
        return 0
    if isinstance(stream, (bool, np.bool_)):
        raise TypeError(f"gpudyn: cannot use {stream!r} as a CUDA stream")
    if isinstance(stream, (int, np.integer)):  # a handle kept in a NumPy array reads as np.uint64
        value = int(stream)
    elif hasattr(stream, "__cuda_stream__"):
        proto = stream.__cuda_stream__
        got = proto() if callable(proto) else proto
        if not (isinstance(got, tuple) and len(got) == 2):
            raise TypeError(f"gpudyn: {type(stream).__name__}.__cuda_stream__ gave {got!r}, expected (version, handle)")
        value = _handle_int(got[1], stream)
    elif hasattr(stream, "cuda_stream"):
        value = _handle_int(stream.cuda_stream, stream)
    elif hasattr(stream, "ptr"):
        value = _handle_int(stream.ptr, stream)
    elif hasattr(stream, "handle"):
        value = _handle_int(stream.handle, stream)
    else:
        raise TypeError(
            f"gpudyn: cannot use {type(stream).__name__} as a CUDA stream (expected None, an int "
            "handle, or a stream with __cuda_stream__, .cuda_stream, .ptr or .handle)"
        )
    if not 0 <= value < (1 << 64):
        raise errors.InvalidArgumentError(f"gpudyn: stream handle {value} is not a pointer value")
    return value


def _handle_int(h, stream) -> int:
    # ctypes c_void_p (Numba) has .value (None for NULL); cuda.bindings handles convert with int().
    h = getattr(h, "value", h)
    if h is None:
        return 0
    try:
        return int(h)
    except (TypeError, ValueError):
        raise TypeError(f"gpudyn: cannot read a CUDA stream handle from {type(stream).__name__}") from None


def stream_handle(stream) -> object:
    """A gpudyn_stream_t for any stream :func:`stream_value` accepts."""
    return ffi.cast("gpudyn_stream_t", stream_value(stream))


def wait_for(stream, producer: int) -> None:
    """Later work on ``stream`` (a gpudyn_stream_t) waits for the work queued so
    far on the stream handle ``producer`` (an int: 0/1 legacy default, 2 per-thread)."""
    ours = int(ffi.cast("uintptr_t", stream))
    if (producer or 1) != (ours or 1):  # 0 and 1 both name the legacy default stream
        check(lib.gpudyn_stream_wait(stream, ffi.cast("gpudyn_stream_t", producer)))
