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
# The kind scenarios (hack/kind-e2e.sh all, then hack/kind-faults.sh) run beside the Rust tests
# when there are no ARGS, or alone with `hack/test.sh --kind`; TESTPLANE_KIND=0 never runs them.
# In the background, niced (the tests come first), the kind job prepares their binaries, root
# file system and minicvo's static build, then runs the scenarios and the faults; its output is
# printed after the tests, and a failed scenario fails the run.
#
# A second plane, with a node (hack/testplane.sh start --nodes 1), runs the tests of real pods
# (tests/it/node_*.rs). It is built and started when there are no ARGS, when an argument names
# `node`, or when TESTPLANE_NODES=1; TESTPLANE_NODES=0 never starts it. Its tests see
# MINICVO_TEST_NODE_KUBECONFIG, TESTPLANE_NODE_DIR, TESTPLANE_REGISTRY and
# TESTPLANE_STANDIN_IMAGE. Its stop checks that no process, mount, bridge or network namespace
# is left behind; a leftover fails the run.
#
# A third plane, without a node, is the second plane of the fixed-names pool: the tests that
# install payloads with fixed object names run one at a time per plane, so two of them run at
# once (tests/it/support/locks.rs). Its tests see MINICVO_TEST_SECOND_KUBECONFIG; it is started
# when there are no ARGS or when TESTPLANE_SECOND=1 (TESTPLANE_SECOND=0 never starts it).
# After the tests, the run lists its 20 slowest tests and how long each lock was held.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

phase() { echo "test.sh: $1 took $(($SECONDS - $2))s" >&2; }

KIND_ONLY=0
if [[ ${1:-} == --kind ]]; then
  KIND_ONLY=1
  shift
fi
KIND=${TESTPLANE_KIND:-}
if [[ -z $KIND ]]; then
  KIND=0
  if (($# == 0)); then KIND=1; fi
fi
if ((KIND_ONLY)); then KIND=1; fi
NODES=${TESTPLANE_NODES:-}
if [[ -z $NODES ]]; then
  NODES=0
  if (($# == 0)) && ((!KIND_ONLY)); then NODES=1; fi
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

# The kind job: the kind tools, the node's root file system and the static minicvo, then the
# scenarios, then the faults; all niced, so the Rust tests beside it come first. Its exit code
# is the first failure's. Touches $KIND_PREPARED once the preparation is done. (The planes'
# kubeconfigs are not its business: kind would write to $KUBECONFIG.)
KIND_NICE=${TESTPLANE_KIND_NICE:-10}
kind_job() {
  unset KUBECONFIG MINICVO_TEST_KUBECONFIG MINICVO_TEST_SECOND_KUBECONFIG MINICVO_TEST_NODE_KUBECONFIG
  local t=$SECONDS start=$SECONDS rc=0 frc=0 prep_log
  prep_log=$(mktemp)
  if ! (nice -n "$KIND_NICE" bash hack/build-kind-image.sh --prepare &&
    nice -n "$KIND_NICE" bash hack/build-operator-image.sh target/kind-e2e/operator-image) >"$prep_log" 2>&1; then
    echo "test.sh: preparing kind failed; its log ends:" >&2
    tail -n 40 "$prep_log" >&2
    rm -f "$prep_log"
    return 1
  fi
  grep -E '^build-(kind|operator-image):' "$prep_log" >&2 || true
  rm -f "$prep_log"
  phase "kind preparation" "$t"
  touch "$KIND_PREPARED"
  t=$SECONDS
  nice -n "$KIND_NICE" bash hack/kind-e2e.sh all || rc=$?
  phase "kind scenarios (exit code $rc)" "$t"
  t=$SECONDS
  nice -n "$KIND_NICE" bash hack/kind-faults.sh || frc=$?
  phase "kind faults (exit code $frc)" "$t"
  phase "the kind job" "$start"
  ((rc == 0)) && rc=$frc
  return "$rc"
}
kind_verdict() {
  case $1 in
    0) echo "kind: every scenario and fault as expected" ;;
    stopped) echo "kind: stopped before it ended (the run was interrupted)" ;;
    *) echo "kind: failed (exit code $1)" ;;
  esac
}
KIND_PREPARED=$(mktemp -u)
if ((KIND_ONLY)); then
  KIND_RC=0
  KIND_NICE=0 kind_job || KIND_RC=$?
  rm -f "$KIND_PREPARED"
  kind_verdict "$KIND_RC"
  exit "$KIND_RC"
fi
KIND_PID=
KIND_LOG=
KIND_RC=0
if [[ $KIND == 1 ]]; then
  KIND_LOG=$(mktemp)
  kind_job >"$KIND_LOG" 2>&1 &
  KIND_PID=$!
fi
# Waits for the kind job and prints its output. Sets KIND_RC.
finish_kind() {
  [[ -n $KIND_PID ]] || return 0
  local t=$SECONDS
  wait "$KIND_PID" || KIND_RC=$?
  KIND_PID=
  echo "test.sh: the kind job's output (it started with the run):" >&2
  cat "$KIND_LOG" >&2
  phase "waiting for the kind job after the tests" "$t"
}
# The processes below PID (children, grandchildren, ...).
descendants() {
  ps -eo pid=,ppid= | awk -v root="$1" '{ parent[$1] = $2 }
    END { for (p in parent) { q = p; while ((q in parent) && q != root && q > 1) q = parent[q]; if (q == root && p != root) print p } }'
}
# Ends a kind job that still runs (an interrupted or failed run): TERM to it and everything it
# started (a build of its preparation too); the kind scripts delete their clusters and stop
# their Docker daemon on TERM, which is waited for (up to 3 minutes).
stop_kind() {
  [[ -n $KIND_PID ]] || return 0
  local pids p i
  pids=$(descendants "$KIND_PID")
  # shellcheck disable=SC2086 # one pid per word
  kill -TERM "$KIND_PID" $pids 2>/dev/null || true
  wait "$KIND_PID" 2>/dev/null || true
  KIND_PID=
  KIND_RC=stopped
  for p in $pids; do
    for ((i = 0; i < 900; i++)); do
      kill -0 "$p" 2>/dev/null || break
      sleep 0.2
    done
  done
  if [[ -s ${KIND_LOG:-} ]]; then
    echo "test.sh: the kind job was stopped; its output until then:" >&2
    cat "$KIND_LOG" >&2
  fi
}
# Until the planes' cleanup takes over (a compile error ends the run before).
trap 'stop_kind; rm -f "$KIND_LOG" "$KIND_PREPARED"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

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
TESTPLANE_SECOND_DIR=
SECOND_START=
NODE_START=
SUMMARY=
# Stops both planes (once); returns 1 when the plane with a node left something behind.
stop_planes() {
  local t=$SECONDS ok=0
  if [[ -n $TESTPLANE_NODE_DIR ]]; then
    # A node that leaves anything behind fails the run.
    if ! bash hack/testplane.sh stop "$TESTPLANE_NODE_DIR"; then
      echo "test.sh: the plane with a node did not stop cleanly" >&2
      ok=1
    fi
    TESTPLANE_NODE_DIR=
    phase "stop of the plane with a node" "$t"
  fi
  if [[ -n $TESTPLANE_SECOND_DIR ]]; then bash hack/testplane.sh stop "$TESTPLANE_SECOND_DIR" || true; fi
  TESTPLANE_SECOND_DIR=
  if [[ -n $TESTPLANE_DIR ]]; then bash hack/testplane.sh stop "$TESTPLANE_DIR" || true; fi
  TESTPLANE_DIR=
  return "$ok"
}
cleanup() {
  local rc=$?
  collect_planes || true
  if ! stop_planes && ((rc == 0)); then rc=1; fi
  stop_kind
  [[ -n $KIND_LOG ]] && rm -f "$KIND_LOG"
  rm -f "$KIND_PREPARED"
  [[ -n ${MINICVO_TEST_LOCK_DIR:-} ]] && rm -rf "$MINICVO_TEST_LOCK_DIR"
  # The closing lines: every test of every binary, summed; the kind step.
  if [[ -n $SUMMARY ]]; then echo "tests: $SUMMARY"; fi
  if [[ $KIND == 1 && -n $SUMMARY ]]; then kind_verdict "$KIND_RC"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# The planes start at once: the second and the one with a node in the background, the first
# here. Their dirs are known once collected (collect_planes, also on an early exit).
SECOND=${TESTPLANE_SECOND:-}
if [[ -z $SECOND ]]; then SECOND=$( (($# == 0)) && echo 1 || echo 0); fi
if [[ $SECOND == 1 ]]; then
  SECOND_OUT=$(mktemp)
  TESTPLANE_WATCH_PID=$$ bash hack/testplane.sh start >"$SECOND_OUT" &
  SECOND_START=$!
fi
if [[ $NODES == 1 ]]; then
  NODE_OUT=$(mktemp)
  TESTPLANE_WATCH_PID=$$ bash hack/testplane.sh start --nodes 1 >"$NODE_OUT" &
  NODE_START=$!
fi
# take_started PID FILE: waits for a plane started in the background, sets STARTED_ENV to what
# its start printed and STARTED_DIR to its directory (its own names: KUBECONFIG and
# TESTPLANE_DIR stay the first plane's); returns the start's exit code.
take_started() {
  local rc=0
  wait "$1" || rc=$?
  STARTED_ENV=$(cat "$2")
  rm -f "$2"
  STARTED_DIR=$(bash -c "$STARTED_ENV"'; echo "${TESTPLANE_DIR:-}"')
  return "$rc"
}
# Waits for the planes started in the background and takes their dirs; 1 when one failed.
collect_planes() {
  local ok=0
  if [[ -n $SECOND_START ]]; then
    take_started "$SECOND_START" "$SECOND_OUT" || ok=1
    SECOND_START=
    TESTPLANE_SECOND_DIR=$STARTED_DIR
  fi
  if [[ -n $NODE_START ]]; then
    take_started "$NODE_START" "$NODE_OUT" || ok=1
    NODE_START=
    TESTPLANE_NODE_DIR=$STARTED_DIR
    eval "$(grep -E '^export (TESTPLANE_REGISTRY|TESTPLANE_STANDIN_IMAGE)=' <<<"$STARTED_ENV" || true)"
  fi
  return "$ok"
}
env_lines=$(TESTPLANE_WATCH_PID=$$ bash hack/testplane.sh start)
eval "$env_lines"
export TESTPLANE_DIR KUBECONFIG MINICVO_TEST_KUBECONFIG
phase "start of the test plane" "$t"
if ! collect_planes; then
  echo "test.sh: starting the second plane or the plane with a node failed (see above)" >&2
  exit 1
fi
if [[ $SECOND == 1 ]]; then
  export MINICVO_TEST_SECOND_KUBECONFIG=$TESTPLANE_SECOND_DIR/kubeconfig
fi
if [[ $NODES == 1 ]]; then
  export TESTPLANE_NODE_DIR TESTPLANE_REGISTRY TESTPLANE_STANDIN_IMAGE
  export MINICVO_TEST_NODE_KUBECONFIG=$TESTPLANE_NODE_DIR/kubeconfig
fi
phase "start of the planes" "$t"

t=$SECONDS
rc=0
LOG=$(mktemp)
# Every release of a test lock is logged here (tests/it/support/locks.rs); the lock files are
# made in a directory of the run's.
MINICVO_TEST_LOCK_LOG=$(mktemp)
MINICVO_TEST_LOCK_DIR=$(mktemp -d)
export MINICVO_TEST_LOCK_LOG MINICVO_TEST_LOCK_DIR
# cargo's own output goes through unchanged; its "test result" lines are summed at the end, so
# the last line of the run counts every test of every binary (the doc-tests run last and have
# none, which would otherwise be the closing line).
run_cargo() { cargo test "$@" 2>&1 | tee -a "$LOG"; }
# The test binaries report each test's time (hack/test-runner.sh); the doc-tests run without it.
HOST=$(rustc -vV | sed -n 's/^host: //p')
RUNNER_VAR=CARGO_TARGET_$(tr '[:lower:]-' '[:upper:]_' <<<"$HOST")_RUNNER
export "$RUNNER_VAR=$ROOT/hack/test-runner.sh"
# The integration tests' threads (libtest's default is one per core). Most tests wait on the
# API server: 3 cut a warm run's tests from 585 s to 407 s. With a build beside them (the kind
# preparation still building, as in a cold run) the real-pod stories lose the timing they
# assert on, so then 2.
if [[ -z ${MINICVO_TEST_THREADS:-} ]]; then
  MINICVO_TEST_THREADS=3
  if [[ -n $KIND_PID && ! -e $KIND_PREPARED ]]; then MINICVO_TEST_THREADS=2; fi
  echo "test.sh: $MINICVO_TEST_THREADS test threads" >&2
fi
export MINICVO_TEST_THREADS
# The reliability scenarios (about 200 s of test time on private planes of their own) run in a
# process of their own beside the other tests, from the start (hack/test-runner.sh): in name
# order they would start last and end the run alone.
export MINICVO_TEST_BESIDE=${MINICVO_TEST_BESIDE-reliability::}
if (($# == 0)); then
  run_cargo --all-targets || rc=$?
  unset "$RUNNER_VAR"
  if ((rc == 0)); then run_cargo --doc || rc=$?; fi
else
  run_cargo "$@" || rc=$?
fi
phase "tests (exit code $rc)" "$t"
# The slowest tests of the run, from the times the test binaries reported.
# (awk, not head: head would leave sort writing into a closed pipe, which pipefail makes fatal.)
SLOWEST=$(sed -nE 's/^test (.+) \.\.\. ([a-zA-Z]+) <([0-9.]+)s>$/\3 \1 (\2)/p' "$LOG" | sort -rn | awk 'NR <= 20')
if [[ -n $SLOWEST ]]; then
  echo "test.sh: the 20 slowest tests (seconds):" >&2
  awk '{ printf "  %8.2f  %s\n", $1, substr($0, index($0, " ") + 1) }' <<<"$SLOWEST" >&2
fi
# How long each lock was held (the tests that hold one run one after the other on its plane).
if [[ -s $MINICVO_TEST_LOCK_LOG ]]; then
  echo "test.sh: test locks (one holder at a time per plane):" >&2
  awk -F'\t' '{ k = $1 " on " $2; n[k]++; w[k] += $4; h[k] += $5 }
    END { for (k in n) printf "  %-62s %3d tests, held %6.1f s, waited for %6.1f s\n", k, n[k], h[k], w[k] }' \
    "$MINICVO_TEST_LOCK_LOG" | sort >&2
fi
rm -f "$MINICVO_TEST_LOCK_LOG"
rm -rf "$MINICVO_TEST_LOCK_DIR"
SUMMARY=$(awk '/^test result:/ {
    for (i = 1; i <= NF; i++) {
      if ($(i + 1) ~ /^passed/) p += $i
      if ($(i + 1) ~ /^failed/) f += $i
    }
  } END { printf "%d passed, %d failed", p, f }' "$LOG")
rm -f "$LOG"
if [[ $KIND == 1 ]]; then
  # The planes are done: their CPU and memory go to the kind job.
  if ! stop_planes && ((rc == 0)); then rc=1; fi
  finish_kind
  if ((rc == 0)); then rc=$KIND_RC; fi
fi
exit "$rc"
