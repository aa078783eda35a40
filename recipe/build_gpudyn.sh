#!/usr/bin/env bash
# conda-build script of the gpudyn output (run in $SRC_DIR): the Python package and
# gpudyn.numba's device code, no benchmarks (-Dbenchmarks=false: they run from a
# checkout, bash benchmarks/run.sh), built against the libgpudyn already in $PREFIX
# (found through pkg-config), which the package loads from there: no bundled copy.
set -euxo pipefail
source "$RECIPE_DIR/meson_cuda_archs.sh"
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
# -Ccuda-suffix=false: the pip name stays gpudyn (wheels are gpudyn-cu13; conda names
# CUDA variants by build string), see tools/build_backend/gpudyn_build.py.
setup_args=(-Csetup-args=-Dbundle_library=false -Csetup-args=-Dbenchmarks=false -Ccuda-suffix=false)
for a in "${gpudyn_meson_arch_args[@]}"; do setup_args+=("-Csetup-args=$a"); done
"$PYTHON" -m pip install . -v --no-deps --no-build-isolation --no-index \
  "${setup_args[@]}" -Cbuild-dir=_build_gpudyn
