"""Moved: the papers' models are gpudyn.bench.theory, installed with the benchmarks
(docs/guides/packaging.md).  This stand-in keeps `from . import theory` in
gpudyn/__init__.py working until that line goes; it is then deleted."""
try:
    from .bench.theory import *  # noqa: F401,F403
except ImportError:  # an install without the benchmarks: nothing to re-export
    pass
