"""`gpudyn bench`: the papers' experiments.  Each benchmark is a module here with a
`run(ctx)` function, named in BENCHMARKS with one line saying what it measures (see
CONTRIBUTING.md).  Installed only with the benchmark programs (meson option
`benchmarks`; `bash benchmarks/run.sh` from a checkout), never in a user wheel or conda
package; `theory` (the papers' models the drivers compare with) comes with them."""

from __future__ import annotations

import importlib

from ._common import run_benchmarks  # noqa: F401

# name -> what it measures (`gpudyn bench --help` lists these).
BENCHMARKS = {
    "apps": "real programs (Graph500 BFS, particle neighbour pairs): GGArray vs worst-case buffer and two-pass",
    "ggarray": "GGArray vs static and VMM arrays: memory, insertion and read/write (GGArray paper Figs. 3-6)",
    "heap": "device allocator (gpudyn::heap_ref) vs CUDA device malloc (Winter et al.'s matrix)",
    "numba": "a variable-output kernel in Numba with gpudyn.numba vs CUDA C++ and plain Numba",
    "rw_heap": "random-walk page heap (RW, RW-BM, CoRW) vs a queue, DO and CUDA malloc (Pham et al. Figs. 11-18)",
    "user": "GGArray and the static array from a user's kernel vs CUB (compaction, variable output)",
    "warp_heap": "warp heap (FDGMalloc Figs. 4-6) vs CUDA malloc",
}

# Short names the issues use (`gpudyn bench warp`); accepted, not listed.
ALIASES = {"warp": "warp_heap", "rw": "rw_heap", "gg": "ggarray"}


def resolve(name: str) -> str:
    return ALIASES.get(name, name)


def available() -> list[str]:
    """Every benchmark, in the order `gpudyn bench` runs them."""
    return sorted(BENCHMARKS)


def load(name: str):
    return importlib.import_module(f"{__name__}.{name}")
