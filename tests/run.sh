#!/usr/bin/env bash
# Installs gpudyn and runs every test: the C ABI tests (meson test) and the
# Python tests (pytest).  GPU tests run when a CUDA device is present and are
# skipped with a reason otherwise.
#   GPUDYN_SANITIZER=memcheck|racecheck|synccheck|initcheck  run the C GPU tests
#                   under compute-sanitizer (GPU machines); tests read the variable and
#                   shrink their largest sizes, since the tools slow kernels 10-100x
#   GPUDYN_SANITIZER_PYTHON=1  also run the Python GPU tests under the sanitizer
#   see tools/install.sh for PYTHON, GPUDYN_ARCHS, GPUDYN_WHEELS
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
bash tools/install.sh
archs=$(bash tools/archs.sh)

echo "== C ABI tests (meson test)"
meson=("$PYTHON" -m mesonbuild.mesonmain)
if [ ! -f build/c/build.ninja ]; then
  "${meson[@]}" setup build/c -Dgpu_archs="$archs" -Dgpu_ptx= -Dbenchmarks=false
else
  "${meson[@]}" configure build/c -Dgpu_archs="$archs" -Dgpu_ptx= -Dbenchmarks=false
fi
wrapper=()
if [ -n "${GPUDYN_SANITIZER:-}" ]; then
  # API errors are not reported: tests provoke them on purpose (out-of-memory, a heap limit set too late).
  wrapper=(--wrapper "compute-sanitizer --tool ${GPUDYN_SANITIZER} --report-api-errors no --error-exitcode 1 --print-limit 20")
fi
# A failure here still lets the Python tests run; the script fails at the end.
c_status=0
"${meson[@]}" test -C build/c --print-errorlogs --num-processes 1 "${wrapper[@]}" || c_status=$?

echo "== Python tests (pytest)"
cd tests  # import the installed package, not the source tree
if [ -z "${GPUDYN_SANITIZER:-}" ]; then
  "$PYTHON" -m pytest -q -rs -p no:cacheprovider python
elif [ "${GPUDYN_SANITIZER_PYTHON:-0}" = 1 ]; then
  compute-sanitizer --tool "$GPUDYN_SANITIZER" --report-api-errors no --error-exitcode 1 --print-limit 20 \
    "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider python
else
  echo "(Python tests skipped under the sanitizer; GPUDYN_SANITIZER_PYTHON=1 runs them)"
fi
if [ "$c_status" != 0 ]; then
  echo "C ABI tests FAILED (meson test exit $c_status)" >&2
  exit "$c_status"
fi
