#!/usr/bin/env bash
# Every default CUDA architecture (meson.options' gpu_archs) compiles: the library,
# the benchmarks and gpudyn.numba's shims, to PTX.  The front end and NVVM are where an
# architecture without an intrinsic fails (sm_75 has no __reduce_*_sync); ptxas is left
# out to stay inside CI's time.  CI builds and tests its own architecture (GPUDYN_ARCHS)
# in full.
set -euo pipefail
cd "$(dirname "$0")/.."
archs=$(sed -n "/option('gpu_archs'/,/)/p" meson.options | grep -o "'[0-9]*'" | tr -d "'" | tr '\n' ' ')
skip=" $(echo "${GPUDYN_ARCHS:-}" | tr ',;' '  ') "
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for a in $archs; do
  case "$skip" in *" $a "*) continue ;; esac
  for f in lib/*.cu benchmarks/*/*.cu python/gpudyn/numba/shims/gpudyn_numba.cu; do echo "$a $f"; done
done | OUT="$out" xargs -P "$(nproc)" -L 1 bash -c '
  log="$OUT/$(basename "$1").$0.log"
  nvcc -std=c++17 --expt-relaxed-constexpr -DGPUDYN_BUILDING_LIBRARY -Iinclude -Ilib -arch=compute_$0 \
       -ptx "$1" -o "$OUT/$(basename "$1").$0.ptx" > "$log" 2>&1 ||
    { echo "archs: $1 does not compile for sm_$0:"; cat "$log"; exit 255; }'
echo "archs: every default architecture ($archs) compiles lib/, benchmarks/ and the Numba shims (PTX; sm_${GPUDYN_ARCHS:-none} built in full)"
