#!/usr/bin/env bash
# The runner hack/test.sh gives cargo for the test binaries: each libtest binary reports the
# time of every test (`test NAME ... ok <1.234s>`), so the run can close with its slowest
# tests. `--report-time` is an unstable libtest option; RUSTC_BOOTSTRAP unlocks it in the test
# process only (the build does not see it, so nothing is rebuilt). The divan bench runs as is.
# MINICVO_TEST_THREADS, when set, is the integration tests' (`it`) --test-threads;
# MINICVO_TEST_BESIDE (below) runs some of them in a process of their own.
set -euo pipefail
bin=$1
shift
# The tests run minicvo as a child; a runner variable left in their environment would make
# them run it through this script too.
for v in $(compgen -v | grep -E '^CARGO_TARGET_.*_RUNNER$' || true); do unset "$v"; done
extra=()
case ${bin##*/} in
  load_plan-*) exec "$bin" "$@" ;;
  it-*)
    [[ -n ${MINICVO_TEST_THREADS:-} ]] && extra=(--test-threads "$MINICVO_TEST_THREADS")
    # MINICVO_TEST_BESIDE=FILTER: when the run names no tests, the tests matching FILTER run in
    # a second process beside the others, from the start (libtest starts tests in name order,
    # so long ones late in it would otherwise end the run alone). Their output follows the
    # others'; the exit code is the first failure's.
    if [[ -n ${MINICVO_TEST_BESIDE:-} ]] && (($# == 0)); then
      beside=$(mktemp)
      RUSTC_BOOTSTRAP=1 "$bin" -Zunstable-options --report-time "$MINICVO_TEST_BESIDE" >"$beside" 2>&1 &
      pid=$!
      rc=0
      RUSTC_BOOTSTRAP=1 "$bin" -Zunstable-options --report-time "${extra[@]}" --skip "$MINICVO_TEST_BESIDE" || rc=$?
      brc=0
      wait "$pid" || brc=$?
      echo "the tests matching $MINICVO_TEST_BESIDE, run beside the others:"
      cat "$beside"
      rm -f "$beside"
      ((rc == 0)) && rc=$brc
      exit "$rc"
    fi
    ;;
esac
RUSTC_BOOTSTRAP=1 exec "$bin" -Zunstable-options --report-time "${extra[@]}" "$@"
