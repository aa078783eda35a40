#!/usr/bin/env bash
# CI: the formatters and the linter, as configured in the repository: ruff (ruff.toml:
# lint, then `ruff format --check`) over the Python, and clang-format (.clang-format)
# over every tracked C, C++ and CUDA file.  Nothing is rewritten here; to fix what it
# reports, run `ruff check --fix . && ruff format .` and `clang-format -i FILE...`
# (or this script with --fix).  Pinned tools from PyPI; PYTHON, GPUDYN_WHEELS as in
# tools/install.sh.
set -euo pipefail
source "$(dirname "$0")/../tools/caller_paths.sh"  # PYTHON, GPUDYN_WHEELS, pipopts
cd "$(dirname "$0")/.."
start=$(date +%s)
"$PYTHON" -m pip install "${pipopts[@]}" "ruff==0.17.6" "clang-format==23.1.5"
bindir=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))')
ruff=("$PYTHON" -m ruff)
clang_format="$bindir/clang-format"
[ -x "$clang_format" ] || clang_format=clang-format

if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t cfiles < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' '*.cu' '*.cuh')
else  # a source tree without git (an unpacked archive)
  mapfile -t cfiles < <(find include lib tests benchmarks examples python docs \( -name '*.c' -o -name '*.h' -o \
    -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \) -not -path '*/build/*' | sort)
fi
rc=0
if [ "${1:-}" = "--fix" ]; then
  "${ruff[@]}" check --fix -q . || rc=1
  "${ruff[@]}" format -q . || rc=1
  "$clang_format" -i "${cfiles[@]}" || rc=1
else
  echo "== lint: ruff check"
  "${ruff[@]}" check -q . || rc=1
  echo "== lint: ruff format --check"
  "${ruff[@]}" format --check -q . || rc=1
  echo "== lint: clang-format ($("$clang_format" --version | sed 's/.*version //'), ${#cfiles[@]} files)"
  "$clang_format" --dry-run -Werror "${cfiles[@]}" || rc=1
fi
echo "lint: $( [ $rc = 0 ] && echo ok || echo FAILED ) in $(( $(date +%s) - start )) s"
exit $rc
