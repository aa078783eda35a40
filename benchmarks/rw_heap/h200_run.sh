#!/usr/bin/env bash
# One device session for rw_heap: build, C tests, memcheck, quick + full benchmark
# (raw JSON), Python tests.  Logs and JSON go to $OUT.
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/rw_out}
mkdir -p "$OUT"
B=/tmp/rwb
[ -n "${SKIP_PIP:-}" ] || ( python3 -m pip install -q --no-index --find-links .whl --no-build-isolation cffi pycparser meson-python pyproject-metadata meson \
  && python3 -m pip install -q --no-build-isolation -Csetup-args=-Dgpu_archs=90 -Csetup-args=-Dgpu_ptx= . ) > "$OUT/pip.txt" 2>&1 &
PIP=$!
[ -z "${SKIP_PIP:-}" ] || PIP=
meson setup $B -Dgpu_archs=90 -Dgpu_ptx= > /dev/null && ninja -C $B > "$OUT/build.txt" 2>&1 || { tail -50 "$OUT/build.txt"; exit 1; }
echo "== C tests"
meson test -C $B rw_heap_args rw_heap_device --print-errorlogs 2>&1 | tail -40
$B/tests/c/test_rw_heap_device 2>&1 | grep -E "TAS|check|OK" | head -20
[ -n "${SKIP_QUICK:-}" ] || echo "== quick bench"
[ -n "${SKIP_QUICK:-}" ] || timeout 60 $B/benchmarks/rw_heap/gpudyn_bench_rw_heap --out "$OUT/quick.json" --quick 2>&1 | grep -v progress | tail -5; echo "rc=$?"
echo "== memcheck (C device test, 60 s cap)"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 $B/tests/c/test_rw_heap_device 2>&1 | tail -8
echo "== python tests"
[ -n "${SKIP_PIP:-}" ] || { wait $PIP; echo "pip rc=$?"; tail -3 "$OUT/pip.txt"; }
[ -n "${SKIP_PIP:-}" ] || (cd tests && timeout 60 python3 -m pytest -q -p no:cacheprovider python/test_rw_heap.py 2>&1 | tail -15)
echo "== full bench"
timeout ${FULL_S:-100} $B/benchmarks/rw_heap/gpudyn_bench_rw_heap --out "$OUT/full.json" 2> "$OUT/full_progress.txt"; echo "full rc=$?"
tail -3 "$OUT/full_progress.txt"
