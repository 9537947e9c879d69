#!/usr/bin/env bash
# The e2e scenarios against a real cluster: creates a kind cluster, runs them, and deletes the
# cluster on any exit. See docs/e2e.md and docs/operator.md.
#
#   hack/kind-e2e.sh [upgrade]       the upgrade e2e: replays the machine-config story with the
#                                    bundled samples (payload/old -> payload/new must pass;
#                                    payload/old -> payload/new-buggy must be reported), with
#                                    the corpus (mco-4.13 -> mco-before-fix / mco-after-fix),
#                                    and upgrades the real release openshift-4.21 -> 4.22 (must
#                                    complete with no harm but the known dns-operator one,
#                                    docs/e2e.md "The real releases")
#   hack/kind-e2e.sh operator        `minicvo operator` in the cluster: loads the image into
#                                    kind, applies deploy/ with -k as deploy/README.md says,
#                                    waits for a leader, installs 4.13.0, updates to 4.14.0 by
#                                    patching spec.desiredUpdate, checks that exactly one
#                                    replica led, then deletes the leader and times the handover
#   hack/kind-e2e.sh real-pods       the real-pod scenarios shared with minicvo's CI (the plane
#                                    with a node runs the same script): builds the stand-in
#                                    operator and pause images (hack/tools/standin, Go and
#                                    crane, no Docker build), loads them into kind, and runs
#                                    hack/scenarios/real-pods.sh (stand-in Available through
#                                    `minicvo apply`; the machine-config story with real pods,
#                                    buggy denied and fixed clean)
#   hack/kind-e2e.sh docs            the kind walkthroughs of README.md and docs/e2e.md, run as
#                                    written, each on a cluster of its own (named minicvo)
#   hack/kind-e2e.sh all             upgrade, operator and real-pods on one cluster, then docs
#
# Everything it needs is built or started here when missing, with no internet: a Docker daemon
# (hack/docker.sh: the one that answers, else our own dockerd, stopped at the end), the node
# image (hack/build-kind-image.sh: minicvo.local/kind-node:v1.37.2, cached), kind and kubectl
# (the test plane's builds), and for the operator scenario the image deploy/ runs
# (hack/build-operator-image.sh: a static minicvo packed with crane, checked against
# deploy/Dockerfile). The upgrade scenarios need the corpus (../shared/payloads); a missing
# corpus fails the run. One run at a time: a second one while one runs is refused (exit 3).
# When the run started its own dockerd, it stops it at the end and fails if anything of it is
# left on the host (hack/docker.sh check).
#
# Environment:
#   KIND_E2E_KEEP=1        keep the cluster (prints how to delete it) and the Docker daemon
#   KIND_E2E_OUT=DIR       where timelines, traces, JUnit files and logs go (default target/kind-e2e)
#   KIND_E2E_IMAGE=IMAGE   node image for `kind create cluster --image` (default: the one
#                          hack/build-kind-image.sh builds; kindest/node:v1.37.2 on a connected
#                          machine works too)
#   KIND_E2E_ARGS="..."    extra flags for every `minicvo e2e upgrade` (e.g. --wait-available
#                          for payloads whose images really run)
#   KIND_E2E_OPERATOR_IMAGE=IMAGE
#                          operator scenario: use this image, already in the Docker daemon,
#                          instead of building minicvo:dev with hack/build-operator-image.sh
#                          (deploy/Dockerfile builds the same image where Docker Hub is reachable)
#   KIND_E2E_OPERATOR_TIMEOUT=SECONDS
#                          operator scenario: the longest wait for each step (default 300)
#   KIND_E2E_CORPUS=DIR    the corpus of real payloads (default ../shared/payloads)
#
# Exit code: 0 every scenario ended as expected; 1 one did not, or something of the run was
# left on the host; 2 a missing tool or setup error; 3 another run holds the lock. A scenario
# that fails while the Docker daemon no longer answers ends the run there (the rest would fail
# the same way, each after its own timeouts); when the daemon is our own, its exit ends the
# running scenario at once.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

say() { echo "kind-e2e: $*" >&2; }

SCENARIO=${1:-upgrade}
case $SCENARIO in
  upgrade | operator | real-pods | docs | all) ;;
  -h | --help)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
    exit 0
    ;;
  *)
    say "unknown scenario $SCENARIO; usage: hack/kind-e2e.sh [upgrade|operator|real-pods|docs|all]"
    exit 2
    ;;
esac

OUT=${KIND_E2E_OUT:-$ROOT/target/kind-e2e}
mkdir -p "$OUT"

# One run at a time: the own dockerd, the output directory and the images are shared.
LOCK=${MINICVO_DOCKER_DIR:-/var/tmp/minicvo-docker}.kind-e2e.lock
exec 9>>"$LOCK"
if ! flock -n 9; then
  say "another hack/kind-e2e.sh run ($(cat "$LOCK.pid" 2>/dev/null || echo 'pid unknown')) holds $LOCK; wait for it, or stop it"
  exit 3
fi
echo "pid $$" >"$LOCK.pid"

NAME=minicvo-e2e-$$

KC=$OUT/kubeconfig
read -r -a EXTRA <<<"${KIND_E2E_ARGS:-}"

SIM_PID=
REG_PID=
CREATED=
DOCKER_OWN=
# The simulated operators of one payload, in the background (the sample payloads' images never
# run, so their ClusterOperators report through `minicvo simulate`).
start_simulator() {
  "$BIN" simulate "$1" --release-version "$2" --kubeconfig "$KC" >"$OUT/operator.simulate-$2.log" 2>&1 &
  SIM_PID=$!
}
stop_simulator() {
  if [[ -n ${SIM_PID:-} ]]; then
    kill "$SIM_PID" 2>/dev/null || true
    wait "$SIM_PID" 2>/dev/null || true
    SIM_PID=
  fi
}

# When our own dockerd dies, the scenario that runs is ended at once (its minicvo would retry
# the vanished cluster until its timeouts): a watcher of the daemon's pid TERMs every process
# the run started; the scenario fails and stop_if_daemon_gone ends the run.
WATCH_PID=
STOPPING=
watch_daemon() {
  local pid main=$$
  pid=$(cat "${MINICVO_DOCKER_DIR:-/var/tmp/minicvo-docker}/run/dockerd.pid" 2>/dev/null) || return 0
  STOPPING=$(mktemp -u)
  (
    while kill -0 "$pid" 2>/dev/null && [[ ! -e $STOPPING ]]; do sleep 0.5; done
    [[ -e $STOPPING ]] && exit 0
    say "our dockerd (pid $pid) exited: ending the running scenario"
    # Every descendant of the run but this watcher.
    ps -eo pid=,ppid= | awk -v root="$main" -v me="$BASHPID" '
      { parent[$1] = $2 }
      END {
        for (p in parent) {
          q = p
          while (q in parent && q != root && q != me && q > 1) q = parent[q]
          if (q == root && p != me && p != root) print p
        }
      }' | xargs -r kill -TERM 2>/dev/null || true
  ) &
  WATCH_PID=$!
}

cleanup() {
  local rc=$?
  if [[ -n $WATCH_PID ]]; then
    touch "$STOPPING"
    kill "$WATCH_PID" 2>/dev/null || true
  fi
  stop_simulator
  if [[ -n ${REG_PID:-} ]]; then kill "$REG_PID" 2>/dev/null || true; wait "$REG_PID" 2>/dev/null || true; fi
  if [[ -n $CREATED ]]; then
    if ! timeout 20 docker info >/dev/null 2>&1; then
      say "the Docker daemon (${DOCKER_HOST:-default socket}) does not answer any more; it stopped during the run"
      [[ -n $DOCKER_OWN ]] && say "its log: ${MINICVO_DOCKER_DIR:-/var/tmp/minicvo-docker}/logs/dockerd.log"
      ((rc == 0)) && rc=1
    elif [[ ${KIND_E2E_KEEP:-} == 1 ]]; then
      say "kept cluster $NAME (kubeconfig $KC); delete it with: kind delete cluster --name $NAME"
    else
      kind delete cluster --name "$NAME" --kubeconfig "$KC" >&2 || say "could not delete cluster $NAME; run: kind delete cluster --name $NAME"
    fi
  fi
  if [[ -n ${DOCS_CLUSTER:-} ]] && timeout 20 docker info >/dev/null 2>&1; then
    kind delete cluster --name "$DOCS_CLUSTER" --kubeconfig "$DOCS_KUBECONFIG" >&2 || true
  fi
  if [[ -n $DOCKER_OWN && ${KIND_E2E_KEEP:-} != 1 ]]; then
    if bash hack/docker.sh stop; then
      say "stopped our dockerd; nothing of the run is left on the host"
    else
      say "something of the run is left on the host (above)"
      ((rc == 0)) && rc=1
    fi
  elif [[ -z $DOCKER_OWN ]] && kind get clusters 2>/dev/null | grep -qx "$NAME" && [[ ${KIND_E2E_KEEP:-} != 1 ]]; then
    say "cluster $NAME is still there"
    ((rc == 0)) && rc=1
  fi
  rm -f "$LOCK.pid"
  [[ -n $STOPPING ]] && rm -f "$STOPPING"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

CORPUS=${KIND_E2E_CORPUS:-$ROOT/../shared/payloads}
if [[ $SCENARIO == upgrade || $SCENARIO == all ]]; then
  for d in mco-4.13 mco-after-fix mco-before-fix openshift-4.21 openshift-4.22; do
    [[ -d $CORPUS/$d ]] || { say "the upgrade scenarios need the corpus: no $CORPUS/$d (set KIND_E2E_CORPUS to ../shared/payloads)"; exit 2; }
  done
fi

# shellcheck source=hack/lib/crane-registry.sh
source hack/lib/crane-registry.sh

# Tools: ours where the machine has none (the test plane's kubectl and crane, the kind CLI of
# hack/tools/kind), built or taken from their caches.
command -v python3 >/dev/null || { say "python3 is not installed (used to read the JSON results)"; exit 2; }
python3 -c 'import yaml' 2>/dev/null || { say "python3 has no yaml module (the real-pod payload copies); hint: apt-get install python3-yaml"; exit 2; }
command -v go >/dev/null || { say "go is not installed (it builds kind, the node image's programs and the stand-in images)"; exit 2; }
t=$SECONDS
PLANE_BIN=$(bash hack/build-testplane.sh | tail -n 1) || { say "building the test plane's tools failed"; exit 2; }
K8S_VERSION=v1.37.2
CACHE=${TESTPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/minicvo-testplane}
export GOTOOLCHAIN=${GOTOOLCHAIN:-local}
# shellcheck source=hack/build-kind-tools.sh
source hack/build-kind-tools.sh
KIND_BIN=$(kind_tools | tail -n 1) || { say "building kind failed"; exit 2; }
mkdir -p "$OUT/path"
command -v kubectl >/dev/null || ln -sf "$PLANE_BIN/kubectl" "$OUT/path/kubectl"
command -v kind >/dev/null || ln -sf "$KIND_BIN/kind" "$OUT/path/kind"
export PATH=$PATH:$OUT/path
CRANE=${KIND_E2E_CRANE:-$PLANE_BIN/crane}
say "tools ready in $((SECONDS - t))s (kind: $(command -v kind), kubectl: $(command -v kubectl))"

# A Docker daemon: the one that answers, else our own (stopped again at the end).
if ! { command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1; }; then
  t=$SECONDS
  env=$(bash hack/docker.sh start) || { say "no Docker daemon answers and starting one failed (see above)"; exit 2; }
  eval "$env"
  [[ ${MINICVO_DOCKER_OWN:-} == 1 ]] && DOCKER_OWN=1
  say "started our own dockerd in $((SECONDS - t))s (DOCKER_HOST=$DOCKER_HOST)"
  [[ -n $DOCKER_OWN ]] && watch_daemon
fi

# The node image, and for the operator scenario the operator image (its static binary is the
# one the host runs too), before a cluster exists: a failed build costs no cluster.
NODE_IMAGE=${KIND_E2E_IMAGE:-}
if [[ -z $NODE_IMAGE ]]; then
  t=$SECONDS
  NODE_IMAGE=$(bash hack/build-kind-image.sh | tail -n 1) || { say "building the node image failed (above)"; exit 1; }
  say "node image $NODE_IMAGE ready in $((SECONDS - t))s"
fi
OP_IMAGE=${KIND_E2E_OPERATOR_IMAGE:-minicvo:dev}
OP_ARCHIVE=
t=$SECONDS
# One build of minicvo: the static binary the operator image holds is the one the host runs.
# The image is packed only for the scenario that runs it.
if [[ $SCENARIO == operator || $SCENARIO == all ]] && [[ -z ${KIND_E2E_OPERATOR_IMAGE:-} ]]; then
  BIN=$(bash hack/build-operator-image.sh "$OUT/operator-image" | tail -n 1) || { say "building minicvo and the operator image failed (above)"; exit 1; }
  OP_ARCHIVE=$OUT/operator-image/minicvo-operator.tar
  say "minicvo and the operator image $OP_IMAGE built in $((SECONDS - t))s"
else
  BIN=$(bash hack/build-operator-image.sh --binary | tail -n 1) || { say "building minicvo failed (above)"; exit 1; }
  say "minicvo built in $((SECONDS - t))s"
fi

# The real-pod images, before a cluster exists: the stand-in operator and pause programs of
# hack/tools/standin, each alone in an image built as the plane with a node builds it (a tar
# layer on an empty base, `crane append`, `crane mutate --entrypoint`), through a throwaway
# crane registry, saved as a tarball tagged minicvo.local/NAME:1 for `kind load image-archive`.
STANDIN_IMAGE=minicvo.local/standin-operator:1
PAUSE_IMAGE=minicvo.local/pause:1
build_standin_images() {
  local img=$OUT/images prog pkg ref
  rm -rf "$img"
  mkdir -p "$img/registry"
  start_crane_registry "$CRANE" "$img/registry" || return 1
  for prog in pause standin-operator; do
    pkg=./${prog#standin-}
    say "building image minicvo.local/$prog:1 (hack/tools/standin/$pkg)"
    mkdir -p "$img/$prog"
    (cd hack/tools/standin && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$img/$prog/$prog" "$pkg") >&2 || return 1
    tar -C "$img/$prog" --owner=0 --group=0 --numeric-owner -cf "$img/$prog.layer.tar" "$prog"
    ref=$REG/minicvo/$prog:1
    "$CRANE" append --insecure -f "$img/$prog.layer.tar" -t "$ref" >/dev/null 2>>"$img/crane.log" || return 1
    "$CRANE" mutate --insecure --entrypoint "/$prog" --set-platform linux/amd64 "$ref" \
      -t "minicvo.local/$prog:1" -o "$img/$prog.tar" >/dev/null 2>>"$img/crane.log" || return 1
  done
  kill "$REG_PID" 2>/dev/null || true
  wait "$REG_PID" 2>/dev/null || true
  REG_PID=
}
if [[ $SCENARIO == real-pods || $SCENARIO == all ]]; then
  build_standin_images || { say "building the stand-in images failed"; exit 1; }
fi

say "creating kind cluster $NAME (node image $NODE_IMAGE)"
t=$SECONDS
CREATED=1
if ! kind create cluster --name "$NAME" --kubeconfig "$KC" --image "$NODE_IMAGE" --wait 180s 2>&1 | tee "$OUT/kind-create.log" >&2; then
  step=$(grep -a '✗' "$OUT/kind-create.log" | tail -n 1 | sed 's/^ *✗ *//' || true)
  err=$(grep -a '^ERROR' "$OUT/kind-create.log" | tail -n 1 || true)
  kind export logs "$OUT/kind-logs" --name "$NAME" >/dev/null 2>&1 || true
  say "kind create cluster failed at step \"${step:-unknown}\": ${err:-see $OUT/kind-create.log}"
  say "its output: $OUT/kind-create.log; the node's logs: $OUT/kind-logs (when kind could export them)"
  exit 1
fi
say "cluster $NAME ready in $((SECONDS - t))s"

failures=0

# run_e2e NAME EXPECT ARGS...: one upgrade e2e; EXPECT is "pass" (exit 0, no harm, no lease gap),
# "finding" (exit 1 with the run completed, a delete-before-workload-update finding and a
# live-pods-keep-access harm) or "known-harm:TEXT" (both runs completed with no failed or unrun
# task and no lease gap; exit 0, or exit 1 whose only harms contain TEXT). A result without its
# checks, runs or lease gaps is never as expected.
run_e2e() {
  local name=$1 expect=$2 rc=0 vrc=0 line
  shift 2
  say "scenario $name (expect: $expect)"
  "$BIN" e2e upgrade "$@" --kubeconfig "$KC" --clean --cleanup --no-progress -o json \
    --timeline "$OUT/$name.timeline.json" --trace "$OUT/$name.trace.json" \
    --junit "$OUT/$name.junit.xml" "${EXTRA[@]}" >"$OUT/$name.json" || rc=$?
  local verdict
  verdict=$(python3 - "$OUT/$name.json" "$expect" "$rc" <<'EOF'
import json, sys
path, expect, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    r = json.load(open(path))
except Exception as e:
    print(f"no result ({e}); exit code {rc}")
    sys.exit(1)
missing = [k for k in ("ok", "completed", "checks", "runs", "leaseGaps") if k not in r]
names = [c.get("name") for c in r.get("checks", [])]
missing += [c for c in ("delete-before-workload-update", "live-pods-keep-access") if c not in names]
phases = [run.get("phase") for run in r.get("runs", [])]
missing += [f"run {p}" for p in ("install", "upgrade") if p not in phases]
if missing:
    print("result lacks: " + ", ".join(missing))
    print("NOT as expected")
    sys.exit(1)
story = [c for c in r["checks"] if c["name"] == "delete-before-workload-update"]
findings = story[0]["findings"]
live = [c for c in r["checks"] if c["name"] == "live-pods-keep-access"]
harms = live[0]["findings"]
gaps = r["leaseGaps"]
runs_ok = all(run["ok"] for run in r["runs"])
if expect == "pass":
    ok = rc == 0 and r["ok"] and runs_ok and not harms and not gaps
elif expect.startswith("known-harm:"):
    known = expect.split(":", 1)[1]
    ok = (rc in (0, 1) and r["completed"] and runs_ok and not gaps
          and all(known in str(h) for h in harms) and (rc == 0) == (not harms))
else:
    # Both twins must see it: the plan positions and the live pods' harm.
    ok = rc == 1 and r["completed"] and len(findings) > 0 and len(harms) > 0
for f in findings:
    print("finding:", f)
for h in harms:
    print("harm:", h)
for g in gaps:
    print(f'lease gap: {g["workload"]} {g["seconds"]:.2f}s')
for run in r["runs"]:
    print(f'{run["phase"]}: {"ok" if run["ok"] else "FAILED"} in {run["seconds"]:.2f}s, {run["requests"]} requests')
    if run.get("failure"):
        print(run["failure"])
print("as expected" if ok else "NOT as expected")
sys.exit(0 if ok else 1)
EOF
  ) || vrc=1
  while IFS= read -r line; do say "$name: $line"; done <<<"$verdict"
  if ((vrc)); then
    failures=$((failures + 1))
    stop_if_daemon_gone
  fi
}

# A scenario failed: when our Docker daemon is the cause, every later one would fail the same
# way, each after its own timeouts, so the run ends here (the cleanup says why).
stop_if_daemon_gone() {
  if ! timeout 10 docker info >/dev/null 2>&1; then
    say "the Docker daemon does not answer: the remaining scenarios are not run"
    exit 1
  fi
}

run_upgrade_scenarios() {
  run_e2e sample-fixed pass --from payload/old --to payload/new
  run_e2e sample-buggy finding --from payload/old --to payload/new-buggy

  corpus=(--from "$CORPUS/mco-4.13" --from-version 4.13.0 --to-version 4.14.0
    --stub-missing-crds --create-missing-namespaces)
  run_e2e mco-after-fix pass "${corpus[@]}" --to "$CORPUS/mco-after-fix"
  run_e2e mco-before-fix finding "${corpus[@]}" --to "$CORPUS/mco-before-fix"
  # Two consecutive real releases: kind serves no OpenShift API, so the payloads bring their
  # own CRDs (kinds they lack get a stand-in); the CVO's Deployment needs an image. The one
  # harm the simulated pods report is known and harmless (docs/e2e.md, "The real releases").
  run_e2e openshift-4.21-to-4.22 "known-harm:create on networks.config.openshift.io" \
    --from "$CORPUS/openshift-4.21" --to "$CORPUS/openshift-4.22" \
    --release-image quay.io/openshift-release-dev/ocp-release:4.22.0-x86_64 \
    --stub-missing-crds --create-missing-namespaces
}

# ---- the operator scenario -------------------------------------------------------------------

OP_NS=openshift-cluster-version
OP_TIMEOUT=${KIND_E2E_OPERATOR_TIMEOUT:-300}
k() { kubectl --kubeconfig "$KC" "$@"; }

# wait_until SECONDS WHAT COMMAND...: runs COMMAND every 2 s until it succeeds; fails after SECONDS.
wait_until() {
  local limit=$1 what=$2 start=$SECONDS
  shift 2
  until "$@"; do
    if ((SECONDS - start >= limit)); then
      say "operator: timed out after ${limit}s waiting for $what"
      return 1
    fi
    sleep 2
  done
}

lease_holder() { k -n "$OP_NS" get lease version -o jsonpath='{.spec.holderIdentity}' 2>/dev/null; }

# Every poll records the Lease holder: one line per sample, for the one-leader check.
HOLDERS=$OUT/operator.holders
sample_holder() {
  local h
  h=$(lease_holder) || h=
  echo "${h:-<none>}" >>"$HOLDERS"
  [[ -n $h ]]
}

# history_top VERSION: ClusterVersion's newest history entry is VERSION, Completed.
history_top() {
  sample_holder || true
  [[ $(k get clusterversion version -o jsonpath='{.status.history[0].version} {.status.history[0].state}' 2>/dev/null) == "$1 Completed" ]]
}

crd_established() {
  [[ $(k get crd clusteroperators.config.openshift.io -o jsonpath='{.status.conditions[?(@.type=="Established")].status}' 2>/dev/null) == True ]]
}

# new_holder OLD: a replica other than OLD holds the Lease.
new_holder() {
  local h
  h=$(lease_holder) || return 1
  [[ -n $h && $h != "$1" ]]
}

operator_diagnostics() {
  local f=$OUT/operator.diagnostics.txt
  {
    echo "## pods"; k -n "$OP_NS" get pods -o wide
    echo "## lease"; k -n "$OP_NS" get lease version -o yaml
    echo "## clusterversion"; k get clusterversion version -o yaml
    echo "## clusteroperators"; k get clusteroperators -o yaml
    echo "## events"; k -n "$OP_NS" get events --sort-by=.lastTimestamp
    for p in $(k -n "$OP_NS" get pods -l app.kubernetes.io/name=minicvo -o name); do
      echo "## logs $p"; k -n "$OP_NS" logs "$p" --all-containers --tail=200
    done
  } >"$f" 2>&1 || true
  say "operator: diagnostics in $f"
}

run_operator() {
  local image=$OP_IMAGE holder old t0 took pods
  : >"$HOLDERS"
  say "operator: loading $image into $NAME"
  if [[ -n $OP_ARCHIVE ]]; then
    kind load image-archive "$OP_ARCHIVE" --name "$NAME" >&2 || return 1
  else
    kind load docker-image "$image" --name "$NAME" >&2 || return 1
  fi

  if [[ $image == minicvo:dev ]]; then
    k apply -k deploy/ >&2 || return 1
    # -f must give exactly the objects -k applied: kubectl diff exits 0 when nothing differs.
    k diff -f deploy/ >&2 || { say "operator: kubectl diff -f deploy/ differs from what apply -k applied"; return 1; }
    say "operator: apply -k deploy/ and apply -f deploy/ give the same objects"
  else
    k kustomize deploy/ | sed "s#image: minicvo:dev#image: $image#" | k apply -f - >&2 || return 1
  fi
  k -n "$OP_NS" rollout status deployment/minicvo --timeout="${OP_TIMEOUT}s" >&2 || return 1
  wait_until "$OP_TIMEOUT" "a leader on Lease $OP_NS/version" sample_holder || return 1
  holder=$(lease_holder)
  pods=$(k -n "$OP_NS" get pods -l app.kubernetes.io/name=minicvo -o jsonpath='{.items[*].metadata.name}')
  [[ " $pods " == *" $holder "* ]] || { say "operator: the Lease holder $holder is none of the pods ($pods)"; return 1; }
  say "operator: $holder leads ($pods running)"

  # The install of 4.13.0 (--release in deploy/40-deployment.yaml), finished by the simulated
  # operators of payload/old once the payload's ClusterOperator CRD is served.
  wait_until "$OP_TIMEOUT" "the ClusterOperator CRD of the payload" crd_established || return 1
  start_simulator payload/old 4.13.0
  wait_until "$OP_TIMEOUT" "history 4.13.0 Completed" history_top 4.13.0 || return 1
  stop_simulator
  say "operator: installed 4.13.0"

  # The update, as a cluster admin starts it.
  start_simulator payload/new 4.14.0
  t0=$SECONDS
  k patch clusterversion version --type merge -p '{"spec":{"desiredUpdate":{"version":"4.14.0"}}}' >&2 || return 1
  wait_until "$OP_TIMEOUT" "history 4.14.0 Completed" history_top 4.14.0 || return 1
  stop_simulator
  [[ $(k get clusterversion version -o jsonpath='{.status.history[1].version} {.status.history[1].state}') == "4.13.0 Completed" ]] \
    || { say "operator: history has no 4.13.0 Completed below 4.14.0"; return 1; }
  say "operator: updated to 4.14.0 in $((SECONDS - t0))s after the patch; history 4.14.0 Completed above 4.13.0 Completed"

  # Exactly one leader: one holder in every sample, and every Event about ClusterVersion
  # reported by it.
  local distinct reporters
  distinct=$(sort -u "$HOLDERS" | grep -vx '<none>' || true)
  if [[ $(grep -c . <<<"$distinct") -ne 1 ]]; then
    say "operator: the Lease changed hands during install and update: $(tr '\n' ' ' <<<"$distinct")"
    return 1
  fi
  reporters=$(k -n "$OP_NS" get events --field-selector involvedObject.kind=ClusterVersion \
    -o jsonpath='{range .items[*]}{.reportingInstance}{"\n"}{end}' | sort -u | grep . || true)
  if [[ -z $reporters ]]; then
    say "operator: no Event about ClusterVersion was recorded"
    return 1
  fi
  if [[ $reporters != "$holder" ]]; then
    say "operator: Events about ClusterVersion come from $(tr '\n' ' ' <<<"$reporters"), not only the leader $holder"
    return 1
  fi
  say "operator: exactly one leader ($holder) in $(wc -l <"$HOLDERS") samples; every ClusterVersion Event is its"

  # Handover: a deleted leader gets SIGTERM and releases the Lease, so another replica takes it
  # well before the 90 s lease duration would let it (at its next retry, at most 30 s later).
  old=$holder
  t0=$SECONDS
  k -n "$OP_NS" delete pod "$old" --wait=false >&2 || return 1
  wait_until 60 "another replica to take the Lease from $old" new_holder "$old" || return 1
  took=$((SECONDS - t0))
  holder=$(lease_holder)
  if ((took >= 55)); then
    say "operator: $holder took over ${took}s after $old was deleted: the Lease was not released on SIGTERM"
    return 1
  fi
  k -n "$OP_NS" rollout status deployment/minicvo --timeout="${OP_TIMEOUT}s" >&2 || return 1
  say "operator: $old deleted, $holder leads ${took}s later (released on SIGTERM; expiry would take 60-120 s)"
}

# The operator leaves with its namespace and RBAC (deploy/), so that it reconciles nothing under
# the scenarios that follow on the same cluster.
remove_operator() {
  local t=$SECONDS
  k delete -k deploy/ --ignore-not-found --wait=true --timeout=180s >/dev/null 2>&1 ||
    say "operator: kubectl delete -k deploy/ did not finish"
  say "operator: removed deploy/ in $((SECONDS - t))s"
}

# ---- the real-pod scenarios -----------------------------------------------------------------

# The same script as minicvo's CI runs on the plane with a node (tests/it/node_mco_story.rs,
# tests/it/node_standin.rs). kind has a service proxy, so the stand-in pods reach the API
# server through the kubernetes Service (REAL_PODS_API unset, no hostNetwork), and serves no
# OpenShift CRDs, so the payloads keep their own (REAL_PODS_CRDS=payload). The images are
# loaded into the node, never pulled (imagePullPolicy IfNotPresent, a non-latest tag).
run_real_pods() {
  local prog
  for prog in pause standin-operator; do
    say "real-pods: loading minicvo.local/$prog:1 into $NAME"
    kind load image-archive "$OUT/images/$prog.tar" --name "$NAME" >&2 || return 1
  done
  KUBECONFIG=$KC MINICVO=$BIN STANDIN_IMAGE=$STANDIN_IMAGE PAUSE_IMAGE=$PAUSE_IMAGE \
    REAL_PODS_CRDS=payload REAL_PODS_PULL_POLICY=IfNotPresent REAL_PODS_OUT=$OUT/real-pods \
    bash hack/scenarios/real-pods.sh
}

# ---- the documentation, word for word --------------------------------------------------------

# The blocks between the kind-walkthrough markers of README.md and docs/e2e.md, each run as
# written (bash -e) with minicvo on PATH and KUBECONFIG a file of its own; the cluster they make
# (minicvo) is deleted when one fails.
DOCS_CLUSTER=
DOCS_KUBECONFIG=
run_walkthrough() { # run_walkthrough FILE
  local doc=$1 name script rc=0 t=$SECONDS
  name=$(basename "$doc" .md)
  script=$OUT/walkthrough-$name.sh
  python3 - "$doc" "$script" <<'EOF' || return 1
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"<!-- kind-walkthrough:start -->\n```sh\n(.*?)```\n<!-- kind-walkthrough:end -->", text, re.S)
if not m:
    sys.exit(f"{sys.argv[1]} has no kind-walkthrough block")
open(sys.argv[2], "w").write("set -euo pipefail\n" + m.group(1))
EOF
  mkdir -p "$OUT/docs-path"
  ln -sf "$BIN" "$OUT/docs-path/minicvo"
  DOCS_CLUSTER=minicvo
  DOCS_KUBECONFIG=$OUT/walkthrough-$name.kubeconfig
  say "docs: running the kind walkthrough of $doc ($(grep -cv '^#\|^set ' "$script") commands)"
  PATH=$OUT/docs-path:$PATH KUBECONFIG=$OUT/walkthrough-$name.kubeconfig bash "$script" >"$OUT/walkthrough-$name.log" 2>&1 || rc=$?
  if ((rc != 0)); then
    say "docs: the walkthrough of $doc failed with exit code $rc; its output ends:"
    tail -n 15 "$OUT/walkthrough-$name.log" | sed 's/^/    /' >&2
    kind delete cluster --name minicvo --kubeconfig "$DOCS_KUBECONFIG" >/dev/null 2>&1 || true
    DOCS_CLUSTER=
    return 1
  fi
  DOCS_CLUSTER=
  say "docs: every command of $doc's walkthrough succeeded in $((SECONDS - t))s (output in $OUT/walkthrough-$name.log)"
}
run_docs() {
  local ok=0
  run_walkthrough README.md || ok=1
  run_walkthrough docs/e2e.md || ok=1
  return "$ok"
}

# timed NAME COMMAND...: runs COMMAND, counts a failure, says how long it took.
timed() {
  local name=$1 t=$SECONDS
  shift
  if ! "$@"; then
    failures=$((failures + 1))
    say "$name took $((SECONDS - t))s"
    stop_if_daemon_gone
    return
  fi
  say "$name took $((SECONDS - t))s"
}
operator_scenario() { run_operator || { stop_simulator; operator_diagnostics; return 1; }; }

case $SCENARIO in
  upgrade) timed "upgrade scenarios" run_upgrade_scenarios ;;
  real-pods) timed "real-pods" run_real_pods ;;
  operator) timed "operator" operator_scenario ;;
  docs) timed "docs" run_docs ;;
  all)
    timed "upgrade scenarios" run_upgrade_scenarios
    timed "operator" operator_scenario
    remove_operator
    timed "real-pods" run_real_pods
    timed "docs" run_docs
    ;;
esac

say "results in $OUT"
if ((failures > 0)); then
  say "$failures scenario(s) did not end as expected"
  exit 1
fi
say "every scenario ended as expected"
