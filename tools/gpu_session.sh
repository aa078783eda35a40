#!/usr/bin/env bash
# One GPU session in one command (what the lent-GPU runs use): install, every
# test, `gpudyn info`, the whole GPU suite under compute-sanitizer (tests/sanitize.sh:
# memcheck, racecheck, synccheck, initcheck; one summary line per tool), and
# optionally benchmarks.  Logs under $OUT (default ./gpu-session).
#   GPUDYN_BENCH="ggarray rw_heap"   benchmarks to run after the tests (none by default)
#   GPUDYN_SANITIZE_TOOLS            sanitizer tools (default: all four; "none" skips them)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-session}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0
step() { echo "=== $1"; shift; "$@" || { echo "=== FAILED: $*"; status=1; }; }

step "tests" bash tests/run.sh
step "info" python3 -m gpudyn info
# The tests step built and installed everything: --no-build.
if [ "${GPUDYN_SANITIZE_TOOLS:-}" != none ]; then
  # shellcheck disable=SC2086
  step "sanitizers" env GPUDYN_SANITIZE_LOGS="$OUT/sanitize" bash tests/sanitize.sh --no-build ${GPUDYN_SANITIZE_TOOLS:-}
fi
for b in ${GPUDYN_BENCH:-}; do
  step "bench $b" python3 -m gpudyn bench "$b" --out-dir "$OUT/results"
done
echo "=== gpu session: $([ $status = 0 ] && echo all steps passed || echo some steps FAILED)"
exit $status
