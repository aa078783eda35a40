"""Deprecated spellings: each old name warns once per call site with
:class:`DeprecationWarning`, names its replacement, and still works for one
release (CHANGELOG.md, "Deprecated").  Every alias in the package is made here."""

from __future__ import annotations

import os
import sys
import types
import warnings
from typing import Any, Callable

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _stacklevel() -> int:
    """The stack level of the first frame outside the gpudyn package (the
    caller that used the old name), for warnings.warn."""
    level = 1
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
        frame = frame.f_back
        level += 1
    return level


def warn(old: str, new: str) -> None:
    """Warns that `old` is deprecated in favour of `new` (both as the user writes them)."""
    warnings.warn(
        f"gpudyn: {old} is deprecated and goes in the next release; use {new}",
        DeprecationWarning,
        stacklevel=_stacklevel(),
    )


def _owner(owner: str | None, obj: Any) -> str:
    return owner if owner is not None else type(obj).__name__


def method(
    owner: str | None, old: str, new: str, result: Callable[[Any], Any] | None = None, hint: str = ""
) -> Callable[..., Any]:
    """A method `old` of class `owner` (None: the object's class) that warns
    and calls method `new` with the same arguments; `result` converts what
    `new` returns to what `old` returned (None: unchanged); `hint` follows the
    replacement in the warning."""

    def alias(self: Any, *args: Any, **kwargs: Any) -> Any:
        name = _owner(owner, self)
        warn(f"{name}.{old}()", f"{name}.{new}(){hint}")
        value = getattr(self, new)(*args, **kwargs)
        return value if result is None else result(value)

    alias.__name__ = alias.__qualname__ = old
    alias.__doc__ = f"Deprecated: use :meth:`{new}` (this alias goes in the next release)."
    return alias


def attribute(owner: str | None, old: str, new: str, get: Callable[[Any], Any]) -> property:
    """A read-only property `old` of class `owner` (None: the object's class)
    that warns and returns ``get(self)``; `new` is the replacement as the user
    writes it (e.g. ``view_arg()``)."""

    def fget(self: Any) -> Any:
        name = _owner(owner, self)
        warn(f"{name}.{old}", f"{name}.{new}")
        return get(self)

    fget.__name__ = old
    return property(fget, doc=f"Deprecated: use ``{new}`` (this alias goes in the next release).")


def module_getattr(module: str, aliases: dict[str, tuple[str, Callable[[], Any]]]) -> Callable[[str], Any]:
    """A module ``__getattr__`` serving deprecated names: ``aliases[name]`` is
    (the replacement as the user writes it, a function returning the value)."""

    def __getattr__(name: str) -> Any:
        entry = aliases.get(name)
        if entry is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new, value = entry
        warn(f"{module}.{name}", new)
        return value()

    return __getattr__
