"""Lifetime of a C handle owned by a Python object (every structure class)."""
from __future__ import annotations

import threading

from ._ffi import check, ffi


class OwnedHandle:
    """Owns one gpudyn handle: destroyed once, by :meth:`close` (or leaving a
    ``with`` block) or, failing that, by the garbage collector."""

    _handle = None

    def _own(self, handle, destroy) -> None:
        self._destroy = destroy
        self._close_lock = threading.Lock()  # two threads closing at once destroy once
        self._handle = ffi.gc(handle, destroy)

    def _h(self):
        """The handle; ValueError once closed."""
        if self._handle is None:
            raise ValueError(f"gpudyn: this {type(self).__name__} is closed")
        return self._handle

    def close(self) -> None:
        """Frees the object's device memory now.  If the library refuses or fails
        the destroy, the exception is raised and the object stays open (handle
        and finalizer kept), so nothing leaks and close() can be retried."""
        if self._handle is None:
            return
        with self._close_lock:
            h = self._handle
            if h is not None:
                check(self._destroy(h))
                # Destroyed: detach the finalizer in place so it never runs a second time.
                self._handle = None
                ffi.gc(h, None)

    @property
    def ref(self):
        """This structure as an argument of a Numba ``@cuda.jit`` kernel: its view,
        taken now, for gpudyn.numba's device functions (needs numba-cuda, see
        gpudyn.numba)."""
        from .numba import ref
        return ref(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
