#!/usr/bin/env bash
# conda-build script of the libgpudyn output (run in $SRC_DIR): the shared library,
# headers, pkg-config file and CMake package, installed into $PREFIX.
set -euxo pipefail
source "$RECIPE_DIR/meson_cuda_archs.sh"
builddir=_build_libgpudyn
# conda-forge's MESON_ARGS (when set) first; the options that matter here after it.
# shellcheck disable=SC2086
meson setup --reconfigure "$builddir" ${MESON_ARGS:-} \
  --prefix="$PREFIX" --libdir=lib --buildtype=release \
  "${gpudyn_meson_arch_args[@]}" \
  -Dpython_package=false -Dtests=false -Dexamples=false -Dbenchmarks=false
meson compile -C "$builddir" -j "${CPU_COUNT:-2}"
meson install -C "$builddir" --no-rebuild
