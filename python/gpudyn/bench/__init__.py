"""`gpudyn bench`: the papers' experiments.  Each module here (not starting
with '_') is one benchmark with a `run(ctx)` function; see CONTRIBUTING.md."""
from __future__ import annotations

import importlib
import os
import pkgutil

from ._common import run_benchmarks  # noqa: F401


# Short names used by the issues and the README (`gpudyn bench warp`).
ALIASES = {"warp": "warp_heap", "rw": "rw_heap", "gg": "ggarray"}


def resolve(name: str) -> str:
    return ALIASES.get(name, name)


def available() -> list[str]:
    here = os.path.dirname(__file__)
    return sorted(m.name for m in pkgutil.iter_modules([here]) if not m.name.startswith("_"))


def load(name: str):
    return importlib.import_module(f"{__name__}.{name}")
