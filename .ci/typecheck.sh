#!/usr/bin/env bash
# CI: the Python package's annotations, checked by mypy (its settings: [tool.mypy] in
# pyproject.toml; python/gpudyn without the benchmark drivers).  Runs from the checkout's
# sources, no build needed; a few seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
"$py" -m pip install -q --disable-pip-version-check "mypy>=1.10,<3" numpy
"$py" -m mypy --config-file pyproject.toml
