#!/usr/bin/env bash
# CI: builds the documentation site (docs/, Sphinx with MyST, autodoc and Breathe over
# Doxygen's XML) with warnings as errors into build/docs/html, then checks that every
# public Python name, device class and C function is in it
# (tests/python/test_docs_public_names.py).  Runs after tests/run.sh, which installs
# the gpudyn package that autodoc imports (no GPU needed).  Installs the pinned tools
# of docs/requirements.txt from PyPI and Doxygen with apt-get when missing.
# Variables: PYTHON (default python3), GPUDYN_WHEELS (offline wheels).
set -euo pipefail
source "$(dirname "$0")/../tools/caller_paths.sh"  # PYTHON, GPUDYN_WHEELS, pipopts
cd "$(dirname "$0")/.."
start=$(date +%s)
"$PYTHON" -m pip install "${pipopts[@]}" -r docs/requirements.txt
if ! command -v doxygen >/dev/null; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
  $sudo apt-get update -qq && $sudo apt-get install -y -qq doxygen >/dev/null
fi
"$PYTHON" -c 'import gpudyn' || { echo "docs: the gpudyn package is not installed (bash tools/install.sh)" >&2; exit 1; }
echo "== docs: sphinx-build (doxygen $(doxygen --version)), documenting $("$PYTHON" -c 'import gpudyn, os; print(os.path.dirname(gpudyn.__file__))')"
# docs/conf.py runs Doxygen (docs/Doxyfile) first; its warnings are Sphinx warnings.
# --keep-going writes the site even when a warning fails the build: the name check runs
# either way, and the script fails if either did.
rc=0
"$PYTHON" -m sphinx -W --keep-going -q -b html docs build/docs/html || rc=1
echo "== docs: every public name documented"
"$PYTHON" -m pytest -q -p no:cacheprovider tests/python/test_docs_public_names.py || rc=1
echo "docs: $( [ $rc = 0 ] && echo ok || echo FAILED ) in $(( $(date +%s) - start )) s: build/docs/html/index.html"
exit $rc
