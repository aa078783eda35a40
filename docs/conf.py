"""Sphinx configuration of gpudyn's documentation site.

Build it (what CI runs, .ci/docs.sh):

    sphinx-build -W --keep-going -b html docs build/docs/html

This file runs Doxygen first (docs/Doxyfile: XML of include/gpudyn/*.h and *.cuh into
build/docs/doxygen/xml, which Breathe renders on the C and device API pages) and turns
each Doxygen warning into a Sphinx warning, so -W fails on those too.  The Python API
is documented by autodoc from the installed ``gpudyn`` package (tools/install.sh puts it
there; importing it needs no GPU).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from sphinx.util import logging

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOXYGEN_OUT = os.path.join(ROOT, "build", "docs", "doxygen")
logger = logging.getLogger("gpudyn.docs")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_ext"))


def _version() -> str:
    with open(os.path.join(ROOT, "include", "gpudyn", "gpudyn.h"), encoding="utf-8") as f:
        text = f.read()
    parts = [re.search(rf"#define GPUDYN_VERSION_{k} (\d+)", text).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


project = "gpudyn"
author = "the gpudyn authors"
copyright = "the gpudyn authors"
release = version = _version()

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "breathe",
    "gpudyn_headers",
    "gpudyn_autodoc",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "Doxyfile"]
# Explicit targets only: a heading's anchor is made for links into the notes and guides.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]
nitpicky = False

html_theme = "alabaster"
html_title = f"gpudyn {release}"
html_theme_options = {"description": "Dynamic memory inside CUDA kernels", "fixed_sidebar": True}
html_static_path: list[str] = []

# ---- Python API (autodoc) ---------------------------------------------------
autodoc_default_options = {
    "members": True,
    "undoc-members": True,
    "show-inheritance": True,
    # A structure's public methods may come from a private base class (gpudyn._handle).
    "inherited-members": "BaseException",
}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
# (preserve_defaults fails on some signatures in Sphinx 8.2: "pop from empty list")
autodoc_preserve_defaults = False
autodoc_inherit_docstrings = True
# The docstrings use NumPy sections (Parameters); a Google-style reading would take
# "A CUDA stream: None, ..." in an attribute comment for a type.
napoleon_google_docstring = False
napoleon_numpy_docstring = True

# ---- C ABI and device API (Doxygen XML through Breathe) ----------------------
breathe_projects = {"gpudyn": os.path.join(DOXYGEN_OUT, "xml")}
breathe_default_project = "gpudyn"
# The C headers are C (Sphinx's C domain), the device headers CUDA C++.
breathe_domain_by_extension = {"h": "c", "cuh": "cpp"}
breathe_default_members = ("members",)
breathe_show_include = True
breathe_separate_member_pages = False
# CUDA's qualifiers are blanked by Doxygen (docs/Doxyfile PREDEFINED); these are the
# attribute-like keywords that may remain in a declaration.
cpp_id_attributes = ["__device__", "__host__", "__global__", "__forceinline__", "__noinline__"]
c_id_attributes = ["GPUDYN_API"]


def _run_doxygen(app) -> None:
    doxygen = shutil.which("doxygen")
    if doxygen is None:
        raise RuntimeError("gpudyn docs: doxygen is not installed (apt-get install doxygen; .ci/docs.sh does it)")
    shutil.rmtree(DOXYGEN_OUT, ignore_errors=True)  # no XML of a header since removed
    os.makedirs(DOXYGEN_OUT)
    subprocess.run([doxygen, os.path.join("docs", "Doxyfile")], cwd=ROOT, check=True)
    log = os.path.join(DOXYGEN_OUT, "warnings.log")
    if os.path.exists(log):
        with open(log, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    logger.warning("doxygen: %s", line.strip())


def _fresh_environment(app, config) -> None:
    # Doxygen's XML is rewritten on every build (_run_doxygen), with ids that change
    # when a header does: a saved environment would point Breathe at files gone.
    pickle = os.path.join(app.doctreedir, "environment.pickle")
    if os.path.exists(pickle):
        os.remove(pickle)


def setup(app):
    app.connect("config-inited", _fresh_environment)
    app.connect("builder-inited", _run_doxygen)
    return {"parallel_read_safe": True}
