#!/usr/bin/env bash
# What made benchmarks/results/h200/warp_heap.json: builds the library, the
# warp heap's C tests and benchmark (sm_90), runs the C tests, the benchmark
# (full sweep), the Python tests and a compute-sanitizer memcheck pass, with
# logs and results under $OUT (or ./warp_heap_out).
set -o pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-$PWD/warp_heap_out}
mkdir -p "$OUT/res"
log="$OUT/log.txt"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --find-links .whl --no-build-isolation cffi pycparser meson 2>&1 | tail -2
fi
bd=build-warp-heap
{ { [ -f $bd/build.ninja ] || python3 -m mesonbuild.mesonmain setup $bd -Dgpu_archs=90 -Dgpu_ptx= -Dexamples=false >/dev/null; } &&
  ninja -C $bd tests/c/test_warp_heap_device tests/c/test_warp_heap_debug tests/c/test_warp_heap_args benchmarks/warp_heap/gpudyn_bench_warp_heap; } 2>&1 | tail -5 | tee "$log" || exit 1
echo "== C tests" | tee -a "$log"
./$bd/tests/c/test_warp_heap_args 2>&1 | tee -a "$log"
timeout 120 ./$bd/tests/c/test_warp_heap_device 2>&1 | tee -a "$log"
timeout 30 ./$bd/tests/c/test_warp_heap_debug 2>&1 | tee -a "$log"
# Python package from the tree, the library from the build.
pp=/tmp/gpudyn_pp && rm -rf $pp && mkdir -p $pp && cp -r python/gpudyn $pp/ && cp -r include $pp/gpudyn/include
sed 's/@VERSION@/'"$(python3 tools/read_version.py include/gpudyn/gpudyn.h)"'/' python/gpudyn/_version.py.in > $pp/gpudyn/_version.py
export PYTHONPATH=$pp GPUDYN_LIBRARY=$PWD/$bd/libgpudyn.so GPUDYN_BENCH_DIR=$PWD/$bd/benchmarks/warp_heap
echo "== benchmark" | tee -a "$log"
[ -n "${WH_SKIP_BENCH:-}" ] || timeout ${WH_BENCH_TIMEOUT:-200} python3 -m gpudyn bench warp_heap ${WH_BENCH_ARGS:-} --out-dir "$OUT/res" 2>&1 | tr '\r' '\n' | grep -v '^\[warp_heap\] \[' | tee -a "$log"
echo "== Python tests" | tee -a "$log"
(cd /tmp && timeout 90 python3 -m pytest -q -rs -p no:cacheprovider "$OLDPWD/tests/python/test_warp_heap.py" 2>&1 | tail -8) | tee -a "$log"
echo "== example" | tee -a "$log"
(cd /tmp && timeout 60 python3 "$OLDPWD/examples/warp_heap/ragged.py" 2>&1 | tail -6) | tee -a "$log"
echo "== memcheck" | tee -a "$log"
for t in ${WH_MEMCHECK:-arena:keep cuda_malloc:keep arena:batch arena:large page_heap:small}; do
  timeout 45 compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 5 \
    ./$bd/tests/c/test_warp_heap_device $t > "$OUT/mc_${t/:/_}.txt" 2>&1
  echo "memcheck $t: rc=$? $(grep -c 'Invalid\|Error' "$OUT/mc_${t/:/_}.txt") error lines" | tee -a "$log"
done
head -c 6000 "$OUT"/mc_*.txt > "$OUT/memcheck.txt"; rm -f "$OUT"/mc_*.txt
