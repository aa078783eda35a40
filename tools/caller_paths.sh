# Sourced by the scripts that install with pip (tools/install.sh, tests/run.sh and
# .ci/*.sh) before they cd to the repository root: PYTHON (default python3) and
# GPUDYN_WHEELS, when given relative to the caller's folder, become absolute paths so
# they stay valid after the cd; pipopts holds their pip options (offline with
# GPUDYN_WHEELS).
PYTHON=${PYTHON:-python3}
case "$PYTHON" in */*) PYTHON="$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")" ;; esac
if [ -n "${GPUDYN_WHEELS:-}" ]; then GPUDYN_WHEELS="$(cd "$GPUDYN_WHEELS" && pwd)"; export GPUDYN_WHEELS; fi
pipopts=(-q --disable-pip-version-check)
if [ -n "${GPUDYN_WHEELS:-}" ]; then pipopts+=(--no-index --find-links "$GPUDYN_WHEELS"); fi
