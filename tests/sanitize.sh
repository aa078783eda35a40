#!/usr/bin/env bash
# The whole GPU test suite under compute-sanitizer, one tool after another:
#   bash tests/sanitize.sh [--no-build] [TOOL...]   (default: memcheck racecheck synccheck initcheck)
# For each tool: every C test of meson's `gpu` suite (examples included), then the
# Python GPU tests (pytest -m gpu) in one process.  Each run is
#   compute-sanitizer --tool TOOL --report-api-errors no --error-exitcode 1 ...
# (API errors are not reported: tests provoke them on purpose), with
# GPUDYN_SANITIZER=TOOL exported: tests read it and shrink their largest sizes,
# since the tools slow kernels 10-100x (each test says what it leaves out), and
# GPUDYN_ARENA_PREMAP (1 GiB unless set: see docs/guides/memory.md).
# Prints one line per tool, e.g.
#   sanitizer memcheck: 12 runs, 0 errors, 0 hazards, 0 failed, 0 skipped
# counting the tool's "ERROR SUMMARY: N errors" and racecheck's "RACECHECK SUMMARY:
# N hazards" lines, then an overall line; exits 1 when any tool reported an error
# or hazard or any run failed (also a timeout), 77 when there is no GPU or no
# compute-sanitizer (CI never calls it).  Logs: $GPUDYN_SANITIZE_LOGS
# (default build/sanitize/TOOL.log).
#   --no-build                  the package and build/c are current (tests/run.sh passes it)
#   GPUDYN_SANITIZE_TIMEOUT     seconds per run (default 600)
#   GPUDYN_SANITIZE_PYTEST      extra pytest arguments (e.g. "-k rw_heap")
#   GPUDYN_SANITIZE_ONLY        an extended regex: only runs whose name matches
#                               (C test names as meson lists them; "pytest" for the
#                               Python run), e.g. "rw_heap|pytest"
#   PYTHON, GPUDYN_ARCHS, GPUDYN_WHEELS as for tests/run.sh
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-python3}
build=1
if [ "${1:-}" = "--no-build" ]; then build=0; shift; fi
tools=("$@")
[ ${#tools[@]} -gt 0 ] || tools=(memcheck racecheck synccheck initcheck)
for t in "${tools[@]}"; do
  case "$t" in memcheck|racecheck|synccheck|initcheck) ;;
    *) echo "sanitize: unknown tool '$t' (expected memcheck, racecheck, synccheck or initcheck)" >&2; exit 2 ;;
  esac
done
export PATH="$PATH:/usr/local/cuda/bin"
if ! command -v compute-sanitizer > /dev/null; then
  echo "sanitize: compute-sanitizer not found (CUDA toolkit bin/ not on PATH); nothing run" >&2
  exit 77
fi
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L 2> /dev/null | grep -q '^GPU '; then
  echo "sanitize: the sanitizer tools need a CUDA device and there is none; nothing run" >&2
  exit 77
fi

if [ "$build" = 1 ]; then
  bash tests/run.sh --build-only || { echo "sanitize: build failed" >&2; exit 1; }
fi
logs=${GPUDYN_SANITIZE_LOGS:-$ROOT/build/sanitize}
mkdir -p "$logs"
limit=${GPUDYN_SANITIZE_TIMEOUT:-600}

# The gpu suite's tests as "name<TAB>command...": from meson's introspection, so a
# new test (or example) is sanitized without being listed here.
mapfile -t c_tests < <("$PYTHON" - <<'EOF'
import json, shlex, subprocess, sys
tests = json.loads(subprocess.run([sys.executable, "-m", "mesonbuild.mesonmain", "introspect", "build/c", "--tests"],
                                  check=True, capture_output=True, text=True).stdout)
for t in tests:
    if "gpu" in t["suite"] or any(s.endswith(":gpu") for s in t["suite"]):
        print(t["name"] + "\t" + " ".join(shlex.quote(c) for c in t["cmd"]))
EOF
)
if [ ${#c_tests[@]} -eq 0 ]; then echo "sanitize: no gpu-suite tests found in build/c" >&2; exit 1; fi

overall_fail=0
summaries=()
for tool in "${tools[@]}"; do
  log=$logs/$tool.log
  : > "$log"
  export GPUDYN_SANITIZER=$tool
  # The tools learn of device memory at launches: growth arenas map their first
  # GiB before each launch instead of while kernels run (docs/guides/memory.md).
  export GPUDYN_ARENA_PREMAP=${GPUDYN_ARENA_PREMAP:-1073741824}
  san=(compute-sanitizer --tool "$tool" --report-api-errors no --error-exitcode 1 --print-limit 20)
  runs=0 failed=0 skipped=0 failed_names=()
  start=$(date +%s)
  # run NAME COMMAND...: one sanitized run, its output appended to the tool's log.
  run() {
    local name=$1; shift
    if [ -n "${GPUDYN_SANITIZE_ONLY:-}" ] && ! [[ $name =~ $GPUDYN_SANITIZE_ONLY ]]; then return 0; fi
    local t0 rc; t0=$(date +%s)
    echo "##### $tool $name" >> "$log"
    timeout "$limit" "${san[@]}" "$@" >> "$log" 2>&1
    rc=$?
    runs=$((runs + 1))
    local what="ok"
    case $rc in
      0) ;;
      77) skipped=$((skipped + 1)); what="skipped" ;;
      124|137) failed=$((failed + 1)); failed_names+=("$name(timeout)"); what="TIMEOUT after ${limit}s" ;;
      *) failed=$((failed + 1)); failed_names+=("$name"); what="FAILED (exit $rc)" ;;
    esac
    printf '  %-10s %-32s %4ss  %s\n' "$tool" "$name" $(( $(date +%s) - t0 )) "$what"
  }
  echo "== sanitizer $tool (log: $log)"
  for entry in "${c_tests[@]}"; do
    name=${entry%%$'\t'*}
    eval "cmd=(${entry#*$'\t'})"
    run "$name" "${cmd[@]}"
  done
  # The Python GPU tests in one process (the suite's conftest sizes CUDA's
  # device-malloc heap before any test), from tests/ as tests/run.sh runs them so
  # the installed package is imported.
  cd "$ROOT/tests"
  # shellcheck disable=SC2086
  run "pytest -m gpu" "$PYTHON" -m pytest -q -rs -m gpu -p no:cacheprovider ${GPUDYN_SANITIZE_PYTEST:-} python
  cd "$ROOT"
  errors=$(grep -aoE 'ERROR SUMMARY: [0-9]+ error' "$log" | awk '{s += $3} END {print s + 0}')
  hazards=$(grep -aoE 'RACECHECK SUMMARY: [0-9]+ hazard' "$log" | awk '{s += $3} END {print s + 0}')
  line="sanitizer $tool: $runs runs, $errors errors, $hazards hazards, $failed failed, $skipped skipped ($(( $(date +%s) - start )) s)"
  [ $failed -gt 0 ] && line+=" [failed: ${failed_names[*]}]"
  echo "$line"
  summaries+=("$line")
  if [ "$errors" != 0 ] || [ "$hazards" != 0 ] || [ $failed != 0 ]; then overall_fail=1; fi
done
unset GPUDYN_SANITIZER

echo "== sanitizer summary"
printf '%s\n' "${summaries[@]}"
if [ $overall_fail = 0 ]; then
  echo "sanitizer: all clean (${tools[*]})"
else
  echo "sanitizer: FOUND PROBLEMS (logs in $logs)"
fi
exit $overall_fail
