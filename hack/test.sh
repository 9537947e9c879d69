#!/usr/bin/env bash
# The project's test command. Builds the test control plane if needed (hack/build-testplane.sh),
# starts it (hack/testplane.sh), runs the Rust test suite against it and stops the plane on any
# exit. The exit code is the tests' exit code.
#
#   hack/test.sh                      cargo test --all-targets, then cargo test --doc
#   hack/test.sh ARGS...              cargo test ARGS... (e.g. --test cluster_smoke, or a filter)
#
# The tests see MINICVO_TEST_KUBECONFIG and KUBECONFIG (admin context current, `alice` context
# unprivileged) and TESTPLANE_BIN (kubectl and friends). A missing plane is a failure, never a skip.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

phase() { echo "test.sh: $1 took $(($SECONDS - $2))s" >&2; }

t=$SECONDS
if [[ -z ${TESTPLANE_BIN:-} ]]; then
  TESTPLANE_BIN=$(bash hack/build-testplane.sh | tail -n 1)
fi
export TESTPLANE_BIN
phase "build of the test plane" "$t"

# Compile before starting the plane: a build error needs no cluster, and the plane does not idle.
t=$SECONDS
if (($# == 0)); then
  cargo test --all-targets --no-run
else
  cargo test --no-run "$@"
fi
phase "compile of the tests" "$t"

t=$SECONDS
TESTPLANE_DIR=
SUMMARY=
cleanup() {
  local rc=$?
  if [[ -n $TESTPLANE_DIR ]]; then bash hack/testplane.sh stop "$TESTPLANE_DIR" || true; fi
  # The closing line: every test of every binary, summed.
  if [[ -n $SUMMARY ]]; then echo "tests: $SUMMARY"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
env_lines=$(TESTPLANE_WATCH_PID=$$ bash hack/testplane.sh start)
eval "$env_lines"
export TESTPLANE_DIR KUBECONFIG MINICVO_TEST_KUBECONFIG
phase "start of the test plane" "$t"

t=$SECONDS
rc=0
LOG=$(mktemp)
# cargo's own output goes through unchanged; its "test result" lines are summed at the end, so
# the last line of the run counts every test of every binary (the doc-tests run last and have
# none, which would otherwise be the closing line).
run_cargo() { cargo test "$@" 2>&1 | tee -a "$LOG"; }
if (($# == 0)); then
  run_cargo --all-targets || rc=$?
  if ((rc == 0)); then run_cargo --doc || rc=$?; fi
else
  run_cargo "$@" || rc=$?
fi
phase "tests (exit code $rc)" "$t"
SUMMARY=$(awk '/^test result:/ {
    for (i = 1; i <= NF; i++) {
      if ($(i + 1) ~ /^passed/) p += $i
      if ($(i + 1) ~ /^failed/) f += $i
    }
  } END { printf "%d passed, %d failed", p, f }' "$LOG")
rm -f "$LOG"
exit "$rc"
