"""Lifetime of a C handle owned by a Python object (every structure class)."""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import threading
from collections.abc import Iterator
from typing import Any, TypeVar

from ._ffi import check, ffi
from .errors import InvalidArgumentError

# ---- destroys refused in a finalizer, retried --------------------------------------
# A backing (a Heap under a GGArray, an RWHeap under a WarpHeap) refuses its destroy
# while a user is alive.  When both die in one reference cycle the collector may
# finalize the backing first; its (destroy, handle) is kept here and retried after
# every later successful destroy, until it succeeds (a failed destroy leaves the
# handle valid for another destroy, gpudyn.h).  Only the holder of _retry_lock pops.
_deferred: collections.deque = collections.deque()
_retry_lock = threading.Lock()
_retry_requested = False


def _retry_deferred() -> None:
    """Retries the deferred destroys (after a destroy succeeded).  A thread that
    finds another one retrying, or a finalizer run by the collector inside a
    retry, leaves a request that the retrying thread serves."""
    global _retry_requested
    _retry_requested = True
    while _retry_requested:
        if not _retry_lock.acquire(blocking=False):
            return  # the holder sees the request
        try:
            while _retry_requested:
                _retry_requested = False
                for _ in range(len(_deferred)):
                    destroy, h = _deferred.popleft()
                    if destroy(h) == 0:
                        _retry_requested = True  # one user fewer: try the others again
                    else:
                        _deferred.append((destroy, h))
        finally:
            _retry_lock.release()


def _finalizer(destroy: Any) -> Any:
    """The garbage collector's destroy of a handle: a refused destroy is deferred."""

    def finalize(h: Any, destroy: Any = destroy, deferred: Any = _deferred, retry: Any = _retry_deferred) -> None:
        if destroy(h) != 0:
            deferred.append((destroy, h))
            return
        try:
            retry()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    return finalize


# ---- calls in flight ---------------------------------------------------------------
# Methods that must not wait for close() (or that run before the handle exists).
_UNGUARDED = frozenset(
    {
        "__init__",
        "__new__",
        "__init_subclass__",
        "__del__",
        "__repr__",
        "__enter__",
        "__exit__",
        "close",
        "_own",
        "_h",
        "_enter",
        "_leave",
        "_using",
    }
)


def _guarded(fn: Any) -> Any:
    """`fn` as a call in flight on its object: close() waits for it to return."""

    @functools.wraps(fn)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        entered = self._enter()
        try:
            return fn(self, *args, **kwargs)
        finally:
            if entered:
                self._leave()

    return call


_Self = TypeVar("_Self", bound="OwnedHandle")


class OwnedHandle:
    """Owns one gpudyn handle: destroyed once, by :meth:`close` (or leaving a
    ``with`` block) or, failing that, by the garbage collector.

    Every method a subclass defines (properties included, not those named in
    _UNGUARDED) is a call in flight while it runs: :meth:`close` on another
    thread waits for the calls in flight to return before it destroys the
    handle, and calls starting meanwhile wait for the close (then raise
    ValueError from :meth:`_h` once it succeeded).  Nested calls on one thread
    count once."""

    _handle: Any = None
    #: The CUDA device the structure belongs to, set at creation (None: never created).
    device: Any = None
    stream: Any  # the stream the structure's calls run on, set at creation (a subclass documents it)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if name in _UNGUARDED:
                continue
            if isinstance(value, property):
                setattr(
                    cls,
                    name,
                    property(
                        *(f and _guarded(f) for f in (value.fget, value.fset, value.fdel)),  # type: ignore[call-arg]
                        value.__doc__,
                    ),
                )
            elif inspect.isfunction(value):
                setattr(cls, name, _guarded(value))

    def _own(self, handle: Any, destroy: Any) -> None:
        self._destroy = destroy
        self._calls = 0  # calls in flight (outermost ones; nested calls count in _tls.depth)
        self._closer: int | None = None  # the thread inside close(), or None
        self._tls = threading.local()
        self._cond = threading.Condition(threading.Lock())
        self._handle = ffi.gc(handle, _finalizer(destroy))

    def _enter(self) -> bool:
        """Starts a call in flight; False (nothing to leave) before the handle exists."""
        tls = self.__dict__.get("_tls")
        if tls is None:
            return False
        depth = getattr(tls, "depth", 0)
        if not depth:
            with self._cond:
                while self._closer is not None:  # a close is destroying the handle: wait for it
                    self._cond.wait()
                self._calls += 1
        tls.depth = depth + 1
        return True

    def _leave(self) -> None:
        tls = self._tls
        tls.depth -= 1
        if not tls.depth:
            with self._cond:
                self._calls -= 1
                if not self._calls:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def _using(self) -> Iterator[Any]:
        """The handle, as a call in flight for the block (another object's
        create that passes this one's handle to the library: a close on
        another thread waits until the create returned, then sees its user)."""
        entered = self._enter()
        try:
            yield self._h()
        finally:
            if entered:
                self._leave()

    def _h(self) -> Any:
        """The handle; ValueError once closed."""
        if self._handle is None:
            raise InvalidArgumentError(f"gpudyn: this {type(self).__name__} is closed")
        return self._handle

    def close(self) -> None:
        """Frees the object's device memory now, once the calls other threads
        are making on it have returned.  If the library refuses or fails the
        destroy, the exception is raised and the object stays open (handle and
        finalizer kept), so nothing leaks and close() can be retried."""
        if self._handle is None:
            return
        if getattr(self._tls, "depth", 0):
            raise RuntimeError(f"gpudyn: {type(self).__name__}.close() called from inside a call on it")
        cond = self._cond
        with cond:
            while self._closer is not None:  # two threads closing at once destroy once
                cond.wait()
            if self._handle is None:
                return
            self._closer = threading.get_ident()
            try:
                while self._calls:
                    cond.wait()
            except BaseException:
                self._closer = None
                cond.notify_all()
                raise
        try:
            h = self._handle
            check(self._destroy(h))
            # Destroyed: detach the finalizer in place so it never runs a second time.
            self._handle = None
            ffi.gc(h, None)
        finally:
            with cond:
                self._closer = None
                cond.notify_all()
        _retry_deferred()

    def __enter__(self: _Self) -> _Self:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc is None:
            self.close()
            return
        # The block raised: its exception goes on.  A close that fails too (refused:
        # something still uses this object) leaves it open and owned (a later close(),
        # or the garbage collector, frees it); its error is a note on the block's.
        try:
            self.close()
        except Exception as close_exc:
            if hasattr(exc, "add_note"):  # Python >= 3.11
                exc.add_note(
                    f"gpudyn: leaving the with block, {type(self).__name__}.close() failed too "
                    f"(it stays open): {type(close_exc).__name__}: {close_exc}"
                )
