#!/usr/bin/env bash
# The runner hack/test.sh gives cargo for the test binaries: each libtest binary reports the
# time of every test (`test NAME ... ok <1.234s>`), so the run can close with its slowest
# tests. `--report-time` is an unstable libtest option; RUSTC_BOOTSTRAP unlocks it in the test
# process only (the build does not see it, so nothing is rebuilt). The divan bench runs as is.
# MINICVO_TEST_THREADS, when set, is the integration tests' (`it`) --test-threads.
set -euo pipefail
bin=$1
shift
# The tests run minicvo as a child; a runner variable left in their environment would make
# them run it through this script too.
for v in $(compgen -v | grep -E '^CARGO_TARGET_.*_RUNNER$' || true); do unset "$v"; done
extra=()
case ${bin##*/} in
  load_plan-*) exec "$bin" "$@" ;;
  it-*) [[ -n ${MINICVO_TEST_THREADS:-} ]] && extra=(--test-threads "$MINICVO_TEST_THREADS") ;;
esac
RUSTC_BOOTSTRAP=1 exec "$bin" -Zunstable-options --report-time "${extra[@]}" "$@"
