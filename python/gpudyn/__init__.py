"""gpudyn: dynamic memory inside CUDA kernels.

A growable GPU array (GGArray) and in-kernel allocators (device heap, warp
heap, random-walk page heap) behind a stable C ABI (libgpudyn.so, loaded here
through cffi) and header-only device code (see :func:`get_include`).  Every
structure gives kernels its view by value through ``view_arg()`` (CuPy
``RawKernel`` and Numba ``@cuda.jit`` alike, see gpudyn.numba), reports
``stats()``, and frees its memory with ``close()`` (or a ``with`` block).
"""

from __future__ import annotations

import os as _os
from typing import Any as _Any

from . import _deprecated
from ._ffi import library_path
from ._version import __version__
from .buffer import DeviceBuffer
from .errors import (
    CudaError,
    GpudynError,
    InternalError,
    InvalidArgumentError,
    LibraryNotFoundError,
    LibraryVersionError,
    NoDeviceError,
    NotSupportedError,
    OutOfMemoryError,
)

# Structures.
from .ggarray import GGArray, StaticArray, VmmArray
from .heap import Heap
from .info import cuda_versions, device_count, device_info, trim
from .nvrtc import nvrtc_options
from .rw_heap import RWHeap
from .warp_heap import WarpHeap


def get_include() -> str:
    """Folder holding the headers (``#include <gpudyn/ggarray.cuh>``).  For CuPy
    ``RawModule``/NVRTC pass ``options=tuple(gpudyn.nvrtc_options())``, which adds
    this folder and the CUDA/CCCL include folders NVRTC needs."""
    from ._ffi import include_dirs

    for d in include_dirs():
        if _os.path.isfile(_os.path.join(d, "gpudyn", "gpudyn.h")):
            return d
    raise LibraryNotFoundError("gpudyn: the device headers are not installed")


__all__ = [
    "__version__",
    "library_path",
    "get_include",
    "nvrtc_options",
    "DeviceBuffer",
    "device_info",
    "device_count",
    "cuda_versions",
    "trim",
    "GGArray",
    "StaticArray",
    "VmmArray",
    "Heap",
    "RWHeap",
    "WarpHeap",
    "GpudynError",
    "InvalidArgumentError",
    "OutOfMemoryError",
    "NoDeviceError",
    "CudaError",
    "NotSupportedError",
    "InternalError",
    "LibraryNotFoundError",
    "LibraryVersionError",
]


def _ffi_attr(name: str) -> _Any:
    from . import _ffi

    return getattr(_ffi, name)


def _theory() -> _Any:
    import importlib

    return importlib.import_module("gpudyn.bench.theory")  # ImportError: installed without the benchmarks


# Deprecated names (one release): plumbing that left the namespace, and PageHeap.
__getattr__ = _deprecated.module_getattr(
    __name__,
    {
        "ffi": ("gpudyn._ffi.ffi (internal: the C ABI is libgpudyn.so's, see gpudyn.h)", lambda: _ffi_attr("ffi")),
        "lib": ("gpudyn._ffi.lib (internal: the C ABI is libgpudyn.so's, see gpudyn.h)", lambda: _ffi_attr("lib")),
        "check": ("the structures' methods, which raise gpudyn's exceptions themselves", lambda: _ffi_attr("check")),
        "theory": ("gpudyn.bench.theory (installed with the benchmarks)", _theory),
        "PageHeap": ("gpudyn.RWHeap", lambda: RWHeap),
    },
)
