#!/usr/bin/env bash
# One device session for rw_heap (repository root, GPUDYN_WHEELS=.whl on offline
# machines): installs the package (tools/install.sh) while the C tests and the
# example build; runs the C tests, the example, compute-sanitizer memcheck on the
# C device test (racecheck on the example), the Python tests against the
# installed package, the full `gpudyn bench rw_heap` (JSON + PNGs) and ncu on the
# hash-join probe at 10M tuples.  Everything is logged to $OUT/log.txt; the
# results go to $OUT/res (JSON + 7 PNGs), so $OUT holds 9 files.
#   SKIP_BENCH=1  no full benchmark     SKIP_NCU=1  no profile
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/rw_out}
mkdir -p "$OUT" /tmp/rwlogs
exec > >(tee "$OUT/log.txt") 2>&1
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
nvidia-smi -L
pipopts=(-q --disable-pip-version-check)
[ -n "${GPUDYN_WHEELS:-}" ] && pipopts+=(--no-index --find-links "$GPUDYN_WHEELS")
python3 -m pip install "${pipopts[@]}" 'meson>=1.10' ninja 2>&1 | tail -2
stamp "package install (background)"
(bash tools/install.sh > /tmp/rwlogs/install.txt 2>&1; echo "install rc=$?" >> /tmp/rwlogs/install.txt) &
INSTALL=$!
stamp "C build (rw_heap tests + example)"
python3 -m mesonbuild.mesonmain setup build/c -Dgpu_archs=90 -Dgpu_ptx= -Dbenchmarks=false > /tmp/rwlogs/setup.txt 2>&1 \
  || tail -20 /tmp/rwlogs/setup.txt
ninja -C build/c tests/c/test_rw_heap_args tests/c/test_rw_heap_device examples/example_rw_heap_pages \
  > /tmp/rwlogs/build.txt 2>&1 || tail -40 /tmp/rwlogs/build.txt
stamp "C tests"
python3 -m mesonbuild.mesonmain test -C build/c --no-rebuild --print-errorlogs rw_heap_args rw_heap_device 2>&1 | tail -8
build/c/tests/c/test_rw_heap_device 2>&1 | grep -E "OK|TAS|fail" | head -20
stamp "example"
build/c/examples/example_rw_heap_pages; echo "example rc=$?"
stamp "sanitizers (background)"
( timeout 200 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 10 build/c/tests/c/test_rw_heap_device \
    > /tmp/rwlogs/memcheck.txt 2>&1; echo "memcheck rc=$?" >> /tmp/rwlogs/memcheck.txt
  timeout 90 compute-sanitizer --tool racecheck --error-exitcode 1 --print-limit 10 build/c/examples/example_rw_heap_pages \
    > /tmp/rwlogs/racecheck.txt 2>&1; echo "racecheck rc=$?" >> /tmp/rwlogs/racecheck.txt ) &
SAN=$!
wait $INSTALL
stamp "install done"; tail -5 /tmp/rwlogs/install.txt
stamp "Python tests"
(cd tests && timeout 150 python3 -m pytest -q -p no:cacheprovider -rs python/test_rw_heap.py 2>&1 | tail -30)
wait $SAN
stamp "memcheck"; grep -E "ERROR SUMMARY|rc=|OK" /tmp/rwlogs/memcheck.txt | tail -12
stamp "racecheck"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|rc=|OK|hazard" /tmp/rwlogs/racecheck.txt | tail -8
if [ -z "${SKIP_BENCH:-}" ]; then
  stamp "gpudyn bench rw_heap"
  python3 -m gpudyn bench rw_heap --out-dir "$OUT/res" 2>&1 | tail -60
  ls "$OUT/res"
fi
if [ -z "${SKIP_NCU:-}" ]; then
  stamp "ncu: hash-join probe, 10M tuples (DO vs CoRW)"
  B=$(python3 -c 'import gpudyn, os; print(os.path.join(os.path.dirname(gpudyn.__file__), "bin"))')/gpudyn_bench_rw_heap
  # The DO probe is join_fill_kernel<(join_src)0>, the CoRW probe join_fill_kernel<(join_src)3>
  # (the regex also takes ncu's shorter <0>); with --reps 1 each runs twice: -c 4 profiles
  # both launches of both.
  timeout 120 ncu --kernel-name-base demangled -k 'regex:join_fill_kernel<(\(join_src\))?(0|3)>' -c 4 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    "$B" --out /tmp/rwlogs/ncu.json --only fig17 --join-n 10000000 --reps 1 2>&1 | grep -vE "^==PROF==|progress"
fi
stamp "done"
