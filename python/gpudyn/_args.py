"""Argument checks shared by every class: each runs before any device call and
raises InvalidArgumentError (a ValueError) or TypeError naming the argument and
what is accepted (never a bare cffi OverflowError, never a silent truncation)."""
from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import InvalidArgumentError

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1


def integer(where: str, name: str, value, lo: int = 0, hi: int = U64_MAX) -> int:
    """``value`` as an int in [lo, hi].  Accepts Python/NumPy integers and floats
    holding a whole number; refuses bool (TypeError: True is not a count),
    other types (TypeError), fractions and non-finite floats (ValueError) and
    values out of range (ValueError)."""
    accepted = f"an integer in [{lo}, {hi}]"
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"gpudyn: {where} argument '{name}' is {value!r}, expected {accepted} (not a bool)")
    if isinstance(value, (numbers.Integral, np.integer)):
        v = int(value)
    elif isinstance(value, (float, np.floating)):
        if not math.isfinite(value) or not float(value).is_integer():
            raise InvalidArgumentError(f"gpudyn: {where} argument '{name}' is {value!r}, expected {accepted}")
        v = int(value)
    elif hasattr(value, "__index__"):
        v = value.__index__()
    else:
        raise TypeError(f"gpudyn: {where} argument '{name}' is a {type(value).__name__} ({value!r}), "
                        f"expected {accepted}")
    if not lo <= v <= hi:
        raise InvalidArgumentError(f"gpudyn: {where} argument '{name}' is {v}, expected {accepted}")
    return v


def flag(where: str, name: str, value) -> bool:
    """A bool (or the integers 0 and 1)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (numbers.Integral, np.integer)) and int(value) in (0, 1):
        return bool(value)
    raise TypeError(f"gpudyn: {where} argument '{name}' is {value!r}, expected True or False")


def real(where: str, name: str, value, lo: float, hi: float) -> float:
    """A finite real number in [lo, hi] (bool refused)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.integer, np.floating)):
        raise TypeError(f"gpudyn: {where} argument '{name}' is {value!r}, expected a number in [{lo}, {hi}]")
    v = float(value)
    if not (math.isfinite(v) and lo <= v <= hi):
        raise InvalidArgumentError(f"gpudyn: {where} argument '{name}' is {value!r}, expected a number in [{lo}, {hi}]")
    return v


def choice(where: str, name: str, value, names: dict) -> int:
    """An enum given by one of its exact names (``names`` maps name -> value) or
    exactly one of its integer values (an IntEnum member is such an integer);
    bools, other strings and other numbers are refused."""
    accepted = ", ".join(f"{k!r} ({v})" for k, v in names.items())
    if isinstance(value, str):
        if value in names:
            return names[value]
        raise InvalidArgumentError(f"gpudyn: {where} argument '{name}' is {value!r}, expected one of {accepted}")
    if isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_)):
        if int(value) in names.values():
            return int(value)
        raise InvalidArgumentError(f"gpudyn: {where} argument '{name}' is {value!r}, expected one of {accepted}")
    raise TypeError(f"gpudyn: {where} argument '{name}' is {value!r}, expected one of {accepted}")


def host_integers(where: str, name: str, values, dtype) -> np.ndarray | None:
    """A list/tuple/range/scalar/NumPy array of integers as a 1-D contiguous
    NumPy array of ``dtype`` (negative or too large entries refused, no
    wrap-around); None when ``values`` is not host data (a device array)."""
    if isinstance(values, (list, tuple, range)) or np.isscalar(values):
        given = values
        if isinstance(values, (list, tuple)) and any(isinstance(v, (bool, np.bool_)) for v in values):
            # NumPy would read True as 1: a flag is not a size or an address
            raise TypeError(f"gpudyn: {where} argument '{name}' holds a bool, expected integers")
        try:
            values = np.asarray(values)
        except (OverflowError, ValueError) as exc:
            raise InvalidArgumentError(f"gpudyn: {where} argument '{name}': {exc}") from exc
        if values.dtype.kind in "fO" and values.size:
            # Python ints beyond int64 (2**64 - 1 next to 16) make NumPy choose float64 or
            # object: checked here as the ints they are, then converted to ``dtype``.
            items = [given] if values.ndim == 0 else list(given)
            if all(isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, (bool, np.bool_))
                   for v in items):
                ints = [int(v) for v in items]
                hi_ok = np.iinfo(dtype).max
                lo, hi = min(ints), max(ints)
                if lo < 0 or hi > hi_ok:
                    raise InvalidArgumentError(f"gpudyn: {where} argument '{name}' holds {lo if lo < 0 else hi}, "
                                               f"expected 0 <= value <= {hi_ok}")
                return np.array(ints, dtype=dtype)
    if not isinstance(values, np.ndarray):
        return None
    arr = values.reshape(-1)
    if arr.size == 0:
        return np.zeros(0, dtype=dtype)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"gpudyn: {where} argument '{name}' has dtype {arr.dtype}, expected integers")
    info = np.iinfo(dtype)
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi > info.max:
        bad = lo if lo < 0 else hi
        raise InvalidArgumentError(f"gpudyn: {where} argument '{name}' holds {bad}, expected 0 <= value <= {info.max}")
    return np.ascontiguousarray(arr, dtype=dtype)
