#!/usr/bin/env bash
# Installs gpudyn and runs every test: the C ABI tests (meson test) and the
# Python tests (pytest).  GPU tests run when a CUDA device is present and are
# skipped with a reason otherwise.
#   --build-only    install and build only (tests/sanitize.sh uses it)
#   GPUDYN_SANITIZER="memcheck racecheck ..."  instead of the plain run, the GPU tests
#                   (C and Python) under those compute-sanitizer tools: the same as
#                   `bash tests/sanitize.sh TOOL...` (GPU machines)
#   see tools/install.sh for PYTHON, GPUDYN_ARCHS, GPUDYN_WHEELS
set -euo pipefail
source "$(dirname "$0")/../tools/caller_paths.sh"
cd "$(dirname "$0")/.."
bash tools/install.sh
archs=$(bash tools/archs.sh)

echo "== C ABI tests (meson test)"
meson=("$PYTHON" -m mesonbuild.mesonmain)
if [ ! -f build/c/build.ninja ]; then
  "${meson[@]}" setup build/c -Dgpu_archs="$archs" -Dgpu_ptx= -Dbenchmarks=false
else
  "${meson[@]}" configure build/c -Dgpu_archs="$archs" -Dgpu_ptx= -Dbenchmarks=false
fi
if [ "${1:-}" = "--build-only" ]; then
  "${meson[@]}" compile -C build/c
  exit
fi
if [ -n "${GPUDYN_SANITIZER:-}" ]; then
  # One code path for sanitized runs: tests/sanitize.sh (it exports GPUDYN_SANITIZER per tool).
  tools=${GPUDYN_SANITIZER//,/ }
  unset GPUDYN_SANITIZER
  # shellcheck disable=SC2086
  "${meson[@]}" compile -C build/c
  exec bash tests/sanitize.sh --no-build $tools
fi
# A failure here still lets the Python tests run; the script fails at the end.
c_status=0
"${meson[@]}" test -C build/c --print-errorlogs --num-processes 1 || c_status=$?

echo "== Python tests (pytest)"
cd tests  # import the installed package, not the source tree
"$PYTHON" -m pytest -q -rs -p no:cacheprovider python
if [ "$c_status" != 0 ]; then
  echo "C ABI tests FAILED (meson test exit $c_status)" >&2
  exit "$c_status"
fi
