"""Argument checks shared by every class: each runs before any device call and
raises InvalidArgumentError (a ValueError) or TypeError naming the argument and
what is accepted (never a bare cffi OverflowError, never a silent truncation)."""

from __future__ import annotations

import math
import numbers
from typing import Any

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
        raise TypeError(
            f"gpudyn: {where} argument '{name}' is a {type(value).__name__} ({value!r}), expected {accepted}"
        )
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


def element_count(values) -> int | None:
    """The number of entries of host input ``values`` in constant time: a NumPy
    array's size (whatever its strides: a broadcast view of 2**40 entries counts
    2**40), a list's or tuple's length, a range's length (however large), 1 for a
    scalar; None for anything else (device arrays are counted from their
    ``__cuda_array_interface__``, see buffer.as_device_array)."""
    if isinstance(values, np.ndarray):
        return int(values.size)
    if isinstance(values, range):  # len() overflows beyond sys.maxsize: counted here
        step = values.step
        span = values.stop - values.start if step > 0 else values.start - values.stop
        return max(0, (span + abs(step) - 1) // abs(step))
    if isinstance(values, (list, tuple)):
        return len(values)
    if np.isscalar(values):
        return 1
    return None


def _each_element_once(arr: np.ndarray) -> np.ndarray:
    """``arr`` with its zero-stride (broadcast) axes cut to length 1: the same
    elements, each read once, so the min and max of a broadcast view take the
    time of its data, not of its shape."""
    if arr.ndim == 0 or 0 not in arr.strides:
        return arr
    return arr[tuple(slice(0, 1) if s == 0 else slice(None) for s in arr.strides)]


def host_integers(where: str, name: str, values, dtype) -> np.ndarray | None:
    """A list/tuple/range/scalar/NumPy array of integers as a 1-D contiguous
    NumPy array of ``dtype`` (negative or too large entries refused, no
    wrap-around); None when ``values`` is not host data (a device array).
    The range is checked before the copy, over each stored element once (a
    broadcast view's one element, not its 2**40 entries); bound the count first
    (buffer.check_count, buffer.host_input): the copy takes every entry."""
    if isinstance(values, (list, tuple, range)) or np.isscalar(values):
        given: Any = values
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
            if all(
                isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in items
            ):
                ints = [int(v) for v in items]
                hi_ok = np.iinfo(dtype).max
                lo, hi = min(ints), max(ints)
                if lo < 0 or hi > hi_ok:
                    raise InvalidArgumentError(
                        f"gpudyn: {where} argument '{name}' holds {lo if lo < 0 else hi}, "
                        f"expected 0 <= value <= {hi_ok}"
                    )
                return np.array(ints, dtype=dtype)
    if not isinstance(values, np.ndarray):
        return None
    if values.size == 0:
        return np.zeros(0, dtype=dtype)
    if values.dtype.kind not in "iu":
        raise TypeError(f"gpudyn: {where} argument '{name}' has dtype {values.dtype}, expected integers")
    info = np.iinfo(dtype)
    once = _each_element_once(values)  # the range checked before the copy, each element once
    lo, hi = int(once.min()), int(once.max())
    if lo < 0 or hi > info.max:
        bad = lo if lo < 0 else hi
        raise InvalidArgumentError(f"gpudyn: {where} argument '{name}' holds {bad}, expected 0 <= value <= {info.max}")
    return np.ascontiguousarray(values, dtype=dtype).reshape(-1)


#: Device addresses (pointers, warp headers) are 64 bits: uint64, or int64 (the same bits).
ADDRESS_DTYPES = (np.dtype(np.uint64), np.dtype(np.int64))


def address_dtype(where: str, name: str, dt, hint: str = "") -> None:
    """TypeError unless ``dt`` is a dtype of 64-bit addresses (:data:`ADDRESS_DTYPES`):
    a narrower integer would hold truncated addresses, a wider or other kind none.
    ``hint`` ends the message for narrower integers (e.g. where page ids go instead)."""
    dt = np.dtype(dt)
    if dt not in ADDRESS_DTYPES:
        narrow = dt.kind in "iu" and dt.itemsize < 8
        why = f"; a narrower integer cannot hold a device address{hint}" if narrow else ""
        raise TypeError(
            f"gpudyn: {where} argument '{name}' has dtype {dt}, expected 64-bit addresses (uint64 or int64){why}"
        )


def host_addresses(where: str, name: str, values, hint: str = "") -> np.ndarray | None:
    """:func:`host_integers` for device addresses: NumPy arrays and NumPy scalars
    must have a 64-bit integer dtype (:func:`address_dtype`: an int32 array would
    hold truncated addresses), Python ints any value in [0, 2**64 - 1]; negative
    entries are refused.  Returns uint64, or None for device arrays (whose dtype
    the caller checks with :func:`address_dtype`)."""
    if isinstance(values, (np.ndarray, np.generic)) and values.dtype.kind in "iu":
        address_dtype(where, name, values.dtype, hint)
    return host_integers(where, name, values, np.uint64)
