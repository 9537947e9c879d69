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
#
# A second plane, with a node (hack/testplane.sh start --nodes 1), runs the tests of real pods
# (tests/it/node_*.rs). It is built and started when there are no ARGS, when an argument names
# `node`, or when TESTPLANE_NODES=1; TESTPLANE_NODES=0 never starts it. Its tests see
# MINICVO_TEST_NODE_KUBECONFIG, TESTPLANE_NODE_DIR, TESTPLANE_REGISTRY and
# TESTPLANE_STANDIN_IMAGE. Its stop checks that no process, mount, bridge or network namespace
# is left behind; a leftover fails the run.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

phase() { echo "test.sh: $1 took $(($SECONDS - $2))s" >&2; }

NODES=${TESTPLANE_NODES:-}
if [[ -z $NODES ]]; then
  NODES=0
  if (($# == 0)); then NODES=1; fi
  for a in "$@"; do [[ $a == *node* ]] && NODES=1; done
fi

t=$SECONDS
if [[ -z ${TESTPLANE_BIN:-} ]]; then
  TESTPLANE_BIN=$(bash hack/build-testplane.sh | tail -n 1)
fi
export TESTPLANE_BIN
phase "build of the test plane" "$t"
if [[ $NODES == 1 ]]; then
  t=$SECONDS
  if [[ -z ${TESTPLANE_NODE_BIN:-} ]]; then
    TESTPLANE_NODE_BIN=$(bash hack/build-testplane.sh --nodes | tail -n 1)
  fi
  export TESTPLANE_NODE_BIN
  phase "build of the node tools" "$t"
fi

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
TESTPLANE_NODE_DIR=
SUMMARY=
cleanup() {
  local rc=$? t=$SECONDS
  if [[ -n $TESTPLANE_NODE_DIR ]]; then
    # A node that leaves anything behind fails the run.
    if ! bash hack/testplane.sh stop "$TESTPLANE_NODE_DIR"; then
      echo "test.sh: the plane with a node did not stop cleanly" >&2
      if ((rc == 0)); then rc=1; fi
    fi
    phase "stop of the plane with a node" "$t"
  fi
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
if [[ $NODES == 1 ]]; then
  t=$SECONDS
  node_env=$(TESTPLANE_WATCH_PID=$$ bash hack/testplane.sh start --nodes 1)
  # Its own names: KUBECONFIG and TESTPLANE_DIR stay the first plane's.
  TESTPLANE_NODE_DIR=$(bash -c "$node_env"'; echo "$TESTPLANE_DIR"')
  eval "$(grep -E '^export (TESTPLANE_REGISTRY|TESTPLANE_STANDIN_IMAGE)=' <<<"$node_env")"
  export TESTPLANE_NODE_DIR TESTPLANE_REGISTRY TESTPLANE_STANDIN_IMAGE
  export MINICVO_TEST_NODE_KUBECONFIG=$TESTPLANE_NODE_DIR/kubeconfig
  phase "start of the plane with a node" "$t"
fi

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
