"""gpudyn: dynamic memory inside CUDA kernels.

A growable GPU array (GGArray) and in-kernel allocators (warp heap, random-walk
page heap) behind a stable C ABI (libgpudyn.so, loaded here through cffi) and
header-only device code (see :func:`get_include`).
"""
from __future__ import annotations

import os as _os

from ._version import __version__
from .errors import (CudaError, GpudynError, InternalError, InvalidArgumentError, LibraryNotFoundError,
                     LibraryVersionError, NoDeviceError, NotSupportedError, OutOfMemoryError)
from ._ffi import check, ffi, lib, library_path
from .buffer import DeviceBuffer
from .info import cuda_versions, device_count, device_info, trim


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
    "__version__", "check", "ffi", "lib", "library_path", "get_include", "DeviceBuffer",
    "device_info", "device_count", "cuda_versions", "trim",
    "GpudynError", "InvalidArgumentError", "OutOfMemoryError", "NoDeviceError", "CudaError",
    "NotSupportedError", "InternalError", "LibraryNotFoundError", "LibraryVersionError",
]

# Structures (each module adds its names to __all__ here).
from .warp_heap import WarpHeap  # noqa: E402
__all__ += ["WarpHeap"]
from .ggarray import GGArray, StaticArray, VmmArray  # noqa: E402
__all__ += ["GGArray", "StaticArray", "VmmArray"]
from .rw_heap import PageHeap  # noqa: E402
from . import theory  # noqa: E402,F401
from .nvrtc import nvrtc_options  # noqa: E402
__all__ += ["PageHeap", "theory", "nvrtc_options"]
from .heap import Heap  # noqa: E402
__all__ += ["Heap"]
