"""Lifetime of a C handle owned by a Python object (every structure class)."""
from __future__ import annotations

from ._ffi import check, ffi


class OwnedHandle:
    """Owns one gpudyn handle: destroyed once, by :meth:`close` (or leaving a
    ``with`` block) or, failing that, by the garbage collector."""

    _handle = None

    def _own(self, handle, destroy) -> None:
        self._destroy = destroy
        self._handle = ffi.gc(handle, destroy)

    def _h(self):
        """The handle; ValueError once closed."""
        if self._handle is None:
            raise ValueError(f"gpudyn: this {type(self).__name__} is closed")
        return self._handle

    def close(self) -> None:
        """Frees the object's device memory now."""
        if self._handle is not None:
            h, self._handle = self._handle, None
            ffi.gc(h, None)  # detach the finalizer in place: destroyed once, here
            check(self._destroy(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
