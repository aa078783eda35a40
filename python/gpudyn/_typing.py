"""Names for the annotations of gpudyn's public API (what each call accepts)."""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import numpy.typing as npt

#: A CUDA stream: None (the legacy default stream), an int ``cudaStream_t``
#: handle, an object with ``__cuda_stream__``, or a CuPy / PyTorch / Numba /
#: cuda.core stream (gpudyn._ffi.stream_value says how each is read).
StreamLike = Any
#: Host or device data: a NumPy array, a sequence or scalar of numbers, or a
#: device array (``__cuda_array_interface__`` v3 or DLPack: CuPy, PyTorch,
#: Numba, :class:`gpudyn.DeviceBuffer`).
ArrayLike = Any
#: A device array written by a call (``out=``/``size=``): anything with
#: ``__cuda_array_interface__`` or DLPack of the expected dtype.
DeviceArrayLike = Any
#: A NumPy dtype or anything ``numpy.dtype()`` takes.
DTypeLike = npt.DTypeLike
#: A shape: an int or a sequence of ints.
ShapeLike = Union[int, "tuple[int, ...]", "list[int]", np.integer]

__all__ = ["StreamLike", "ArrayLike", "DeviceArrayLike", "DTypeLike", "ShapeLike"]
