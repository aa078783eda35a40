"""Exceptions raised for gpudyn statuses (one class per gpudyn_status_t)."""

from __future__ import annotations


class GpudynError(RuntimeError):
    """Base class: every failure reported by libgpudyn.  ``status`` holds the
    gpudyn_status_t value, ``status_name`` its name."""

    status = -1
    status_name = "GPUDYN_STATUS_UNKNOWN"

    def __init__(self, message: str, status: int | None = None, status_name: str | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        if status_name is not None:
            self.status_name = status_name


class InvalidArgumentError(GpudynError, ValueError):
    status, status_name = 1, "GPUDYN_ERROR_INVALID_ARGUMENT"


class OutOfMemoryError(GpudynError, MemoryError):
    status, status_name = 2, "GPUDYN_ERROR_OUT_OF_MEMORY"


class NoDeviceError(GpudynError):
    status, status_name = 3, "GPUDYN_ERROR_NO_DEVICE"


class CudaError(GpudynError):
    status, status_name = 4, "GPUDYN_ERROR_CUDA"


class NotSupportedError(GpudynError):
    status, status_name = 5, "GPUDYN_ERROR_NOT_SUPPORTED"


class InternalError(GpudynError):
    status, status_name = 6, "GPUDYN_ERROR_INTERNAL"


class LibraryNotFoundError(GpudynError, ImportError):
    """libgpudyn.so (or its header) could not be found or loaded."""


class LibraryVersionError(GpudynError, ImportError):
    """The loaded libgpudyn.so is not the version this package was built with."""


_BY_STATUS = {
    cls.status: cls
    for cls in (InvalidArgumentError, OutOfMemoryError, NoDeviceError, CudaError, NotSupportedError, InternalError)
}


def error_for_status(status: int, status_name: str, message: str) -> GpudynError:
    cls = _BY_STATUS.get(status, GpudynError)
    return cls(message or status_name, status, status_name)
