#!/usr/bin/env bash
# One GPU session in one command (what the lent-GPU runs use): install, every
# test, `gpudyn info`, the C GPU tests under compute-sanitizer memcheck, and
# optionally benchmarks.  Logs under $OUT (default ./gpu-session).
#   GPUDYN_BENCH="ggarray rw_heap"   benchmarks to run after the tests (none by default)
#   GPUDYN_SANITIZER_TESTS           C tests run under memcheck (default below)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-session}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0
step() { echo "=== $1"; shift; "$@" || { echo "=== FAILED: $*"; status=1; }; }

step "tests" bash tests/run.sh
step "info" python3 -m gpudyn info
# memcheck on the C GPU tests that stay small (the GGArray growth test walks 1e9
# elements and takes too long under the tool; its OOM test covers the same code).
tests=${GPUDYN_SANITIZER_TESTS:-"core_device rw_heap_device warp_heap_device ggarray_oom example_rw_heap_pages example_warp_heap_kernel"}
export GPUDYN_SANITIZER=memcheck  # tests read it (see tests/run.sh)
for t in $tests; do
  step "memcheck $t" timeout "${GPUDYN_SANITIZER_TIMEOUT:-150}" python3 -m mesonbuild.mesonmain test -C build/c --no-rebuild --print-errorlogs \
    --wrapper "compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1 --print-limit 20" "$t"
done
unset GPUDYN_SANITIZER
for b in ${GPUDYN_BENCH:-}; do
  step "bench $b" python3 -m gpudyn bench "$b" --out-dir "$OUT/results"
done
echo "=== gpu session: $([ $status = 0 ] && echo all steps passed || echo some steps FAILED)"
exit $status
