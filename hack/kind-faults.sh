#!/usr/bin/env bash
# Faults of hack/kind-e2e.sh, each checked for a clear error and a clean host afterwards:
#
#   create-fails    kind create cluster fails (a node image that does not exist): exit 1, the
#                   message names kind's step and where its output is, no cluster, no daemon
#                   and nothing else of the run left (hack/docker.sh check)
#   second-run      a run while another holds the lock: refused at once with exit 3, naming the
#                   lock; the first run is not disturbed
#   daemon-dies     our dockerd is killed (SIGKILL) while a scenario runs on its cluster: the
#                   run fails, says the daemon stopped and where its log is, and its cleanup
#                   still leaves nothing on the host (the containers, shims, docker-proxy,
#                   mounts, bridge and iptables rules of the dead daemon included)
#
# Runs the scenarios with our own dockerd (hack/docker.sh), so it refuses to run when another
# Docker daemon answers (it would kill it). Exit code: 0 every fault behaved, 1 otherwise,
# 2 setup error. Results under target/kind-faults.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
say() { echo "kind-faults: $*" >&2; }
OUT=$ROOT/target/kind-faults
rm -rf "$OUT"
mkdir -p "$OUT"
W=${MINICVO_DOCKER_DIR:-/var/tmp/minicvo-docker}

if command -v docker >/dev/null && [[ ${DOCKER_HOST:-} != "unix://$W/run/docker.sock" ]] &&
  timeout 10 docker info >/dev/null 2>&1; then
  say "a Docker daemon answers (${DOCKER_HOST:-default socket}): these faults kill the daemon, so they run only with hack/docker.sh's own"
  exit 2
fi
unset DOCKER_HOST

failures=0
fail() {
  say "FAILED: $*"
  failures=$((failures + 1))
}
clean_host() { # clean_host CASE: nothing of ours left, no kind cluster of the run
  local what=$1
  if ! bash hack/docker.sh check 2>"$OUT/$what.check"; then
    fail "$what: left on the host: $(tr '\n' ' ' <"$OUT/$what.check")"
  fi
}

# ---- create-fails --------------------------------------------------------------------------
say "create-fails: a node image that does not exist"
rc=0
KIND_E2E_IMAGE=minicvo.local/no-such-node:v0 KIND_E2E_OUT=$OUT/create-fails \
  bash hack/kind-e2e.sh upgrade >"$OUT/create-fails.log" 2>&1 || rc=$?
if ((rc != 1)); then
  fail "create-fails: exit code $rc, not 1 (log $OUT/create-fails.log)"
elif ! grep -q 'kind create cluster failed at step "' "$OUT/create-fails.log"; then
  fail "create-fails: no message naming kind's step (log $OUT/create-fails.log)"
elif ! grep -q "its output: $OUT/create-fails/kind-create.log" "$OUT/create-fails.log"; then
  fail "create-fails: the message does not say where kind's output is"
else
  say "create-fails: $(grep -m1 'kind create cluster failed' "$OUT/create-fails.log" | sed 's/^kind-e2e: //')"
fi
clean_host create-fails

# ---- daemon-dies, with second-run while it runs --------------------------------------------
say "daemon-dies: kill our dockerd once the cluster is up"
KIND_E2E_OUT=$OUT/daemon-dies bash hack/kind-e2e.sh upgrade >"$OUT/daemon-dies.log" 2>&1 &
run=$!
up=0
for _ in $(seq 1800); do
  if grep -q 'kind-e2e: cluster minicvo-e2e-.* ready' "$OUT/daemon-dies.log"; then
    up=1
    break
  fi
  kill -0 "$run" 2>/dev/null || break
  sleep 0.2
done
if ((!up)); then
  wait "$run" || true
  fail "daemon-dies: the cluster never came up (log $OUT/daemon-dies.log)"
else
  say "second-run: a run while the first holds the lock"
  rc=0
  t=$SECONDS
  KIND_E2E_OUT=$OUT/second-run timeout 60 bash hack/kind-e2e.sh upgrade >"$OUT/second-run.log" 2>&1 || rc=$?
  if ((rc != 3)); then
    fail "second-run: exit code $rc, not 3 (log $OUT/second-run.log)"
  elif ! grep -q 'holds .*kind-e2e.lock' "$OUT/second-run.log"; then
    fail "second-run: the refusal does not name the lock (log $OUT/second-run.log)"
  else
    say "second-run: refused in $((SECONDS - t))s: $(grep -m1 'holds' "$OUT/second-run.log" | sed 's/^kind-e2e: //')"
  fi
  pid=$(cat "$W/run/dockerd.pid" 2>/dev/null || true)
  if [[ -z $pid ]]; then
    fail "daemon-dies: no pid file of our dockerd"
  else
    kill -KILL "$pid"
    say "daemon-dies: killed dockerd $pid"
  fi
  rc=0
  wait "$run" || rc=$?
  if ((rc == 0)); then
    fail "daemon-dies: the run passed with its daemon killed (log $OUT/daemon-dies.log)"
  elif ! grep -q 'does not answer any more; it stopped during the run' "$OUT/daemon-dies.log"; then
    fail "daemon-dies: the run does not say the daemon stopped (log $OUT/daemon-dies.log)"
  elif ! grep -q "its log: $W/logs/dockerd.log" "$OUT/daemon-dies.log"; then
    fail "daemon-dies: the run does not say where the daemon's log is"
  else
    say "daemon-dies: exit code $rc: $(grep -m1 'does not answer any more' "$OUT/daemon-dies.log" | sed 's/^kind-e2e: //')"
  fi
fi
clean_host daemon-dies

if ((failures > 0)); then
  say "$failures fault(s) did not behave; logs in $OUT"
  exit 1
fi
say "every fault behaved; logs in $OUT"
