#!/usr/bin/env bash
# What produced benchmarks/results/h200/ggarray.json: build, GPU tests of the
# arrays, the full benchmark, the Python tests, a compute-sanitizer pass.
# Usage (repo root, on the GPU machine): OUT=dir bash benchmarks/ggarray/device_run.sh
set -o pipefail
OUT=${OUT:-/tmp/gg_out}; mkdir -p "$OUT/res"
export PYTHONUNBUFFERED=1
{
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
meson setup build-dev -Dgpu_archs=90 -Dgpu_ptx= >/dev/null && ninja -C build-dev >/dev/null 2>"$OUT/build_err.txt" || { tail -50 "$OUT/build_err.txt"; exit 1; }
echo "== C tests"
for t in ggarray_args ggarray_oom ggarray_device; do
  timeout 120 ./build-dev/tests/c/test_$t; echo "test_$t rc=$?"
done
export GPUDYN_BENCH_DIR=$PWD/build-dev/benchmarks/ggarray
python3 -m pip install -q --no-index --find-links .whl --no-build-isolation cffi pycparser >/dev/null 2>&1
# the package from the source tree over the library just built (no second build by pip)
rm -rf /tmp/pyg && mkdir -p /tmp/pyg && cp -r python/gpudyn /tmp/pyg/ && cp -r include /tmp/pyg/gpudyn/include
sed "s/@VERSION@/$(meson introspect build-dev --projectinfo | python3 -c 'import json,sys;print(json.load(sys.stdin)["version"])')/" python/gpudyn/_version.py.in > /tmp/pyg/gpudyn/_version.py
export PYTHONPATH=/tmp/pyg GPUDYN_LIBRARY=$PWD/build-dev/libgpudyn.so
echo "== python tests"
( cd /tmp && timeout 100 python3 -m pytest -q -x $OLDPWD/tests/python/test_ggarray.py 2>&1 | tail -15 ) || true
echo "== memcheck (small)"
GPUDYN_TEST_SMALL=1 timeout 60 compute-sanitizer --tool memcheck --leak-check no --report-api-errors no ./build-dev/tests/c/test_ggarray_oom 2>&1 | tail -8
echo "== benchmark"
( cd /tmp && timeout ${BENCH_TIMEOUT:-240} python3 -m gpudyn bench ggarray ${BENCH_ARGS:-} --out-dir "$OUT/res" ) ; echo "bench rc=$?"
} 2>&1 | tee "$OUT/log.txt"
