#!/usr/bin/env bash
# The main job: installs gpudyn, then runs the papers' benchmarks on the GPU
# (`gpudyn bench`), writing JSON + PNG to ./gpudyn-results/<gpu>/ (git ignores it).
# Extra arguments go to `gpudyn bench` (e.g. `ggarray --quick`).  To refresh the
# committed results, name their folder:
#   bash benchmarks/run.sh --out-dir benchmarks/results/h200
# Results and a relative --out-dir are taken from the folder it is run in.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON=${PYTHON:-python3}
bash "$root/tools/install.sh"  # run from here: it resolves relative PYTHON / GPUDYN_WHEELS itself
"$PYTHON" -m pip install -q --disable-pip-version-check ${GPUDYN_WHEELS:+--no-index --find-links "$GPUDYN_WHEELS"} matplotlib \
  || echo "matplotlib could not be installed: results without plots" >&2
"$PYTHON" -m gpudyn bench "$@"
