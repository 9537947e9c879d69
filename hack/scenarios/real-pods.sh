#!/usr/bin/env bash
# The real-pod scenarios, one definition for every cluster with a kubelet: the plane with a node
# (tests/it/node_scenarios.rs) and kind (hack/kind-e2e.sh real-pods). See docs/e2e.md, "Real
# pods", and hack/TESTPLANE.md, "A plane with a node".
#
#   hack/scenarios/real-pods.sh [SCENARIO...]     default: standin-apply mco-buggy mco-fixed
#
#   standin-apply  `minicvo apply --wait-available` of a payload whose only operator is the
#                  stand-in: exit 0 (its ClusterOperator wait is ended by the running pod,
#                  which reports the version as its own ServiceAccount), and the Deployment
#                  is Available when it returns
#   mco-buggy      `minicvo e2e upgrade --wait-available --real-pods --simulate
#                  machine-config=never` of payload/old -> payload/new-buggy, the
#                  machine-config-operator Deployment on the stand-in image and every other
#                  Deployment on the pause image: exit 1, the story finding, and a `refused
#                  denied:` harm of ServiceAccount openshift-machine-config-operator/default
#                  caused by the delete of its ClusterRoleBinding
#   mco-fixed      the same to payload/new: exit 0, live-pods-keep-access watched real pods, no
#                  harm
#
# Environment (what differs between clusters is a parameter here):
#   KUBECONFIG              the cluster (required)
#   MINICVO                 the minicvo binary (required)
#   STANDIN_IMAGE           the stand-in operator image (hack/tools/standin/operator) (required)
#   PAUSE_IMAGE             an image that only waits (hack/tools/standin/pause) (required)
#   REAL_PODS_API=HOST:PORT the API server as a pod on the host network reaches it. Set it where
#                           the cluster has no service proxy (the plane with a node): the stand-in
#                           pods then run with hostNetwork: true and KUBERNETES_SERVICE_HOST/PORT
#                           set to it. Unset (kind): the pods use the kubernetes Service.
#   REAL_PODS_CRDS=payload|cluster
#                           payload (default, kind): the payloads keep their own CRDs.
#                           cluster: the payloads' CRDs are dropped, the cluster already serves
#                           the real ones (the node tests install them first).
#   REAL_PODS_PULL_POLICY   imagePullPolicy of the substituted containers (default
#                           IfNotPresent: images loaded into kind's node, or a registry)
#   REAL_PODS_OUT=DIR       results: JSON reports, timelines, logs (default: a temporary dir,
#                           kept and printed on failure)
#   REAL_PODS_WAIT_TIMEOUT  --wait-timeout of every run (default 90s)
#
# Exit code: 0 every scenario ended as expected, 1 otherwise, 2 a usage or setup error. Needs
# python3 with PyYAML (the payload copies) and kubectl (the Available check).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

say() { echo "real-pods: $*" >&2; }
fail_setup() { say "$*"; exit 2; }

for v in KUBECONFIG MINICVO STANDIN_IMAGE PAUSE_IMAGE; do
  [[ -n ${!v:-} ]] || fail_setup "$v is not set; see the header of ${BASH_SOURCE[0]}"
done
[[ -x $MINICVO ]] || fail_setup "MINICVO=$MINICVO is not an executable"
command -v python3 >/dev/null || fail_setup "python3 is not installed"
python3 -c 'import yaml' 2>/dev/null || fail_setup "python3 has no yaml module; hint: apt-get install python3-yaml"
KUBECTL=${KUBECTL:-kubectl}
command -v "$KUBECTL" >/dev/null || fail_setup "kubectl is not installed (set KUBECTL)"
CRDS=${REAL_PODS_CRDS:-payload}
[[ $CRDS == payload || $CRDS == cluster ]] || fail_setup "REAL_PODS_CRDS must be payload or cluster, not $CRDS"
WAIT=${REAL_PODS_WAIT_TIMEOUT:-90s}
export STANDIN_IMAGE PAUSE_IMAGE REAL_PODS_API="${REAL_PODS_API:-}" PULL=${REAL_PODS_PULL_POLICY:-IfNotPresent}

SCENARIOS=("$@")
((${#SCENARIOS[@]})) || SCENARIOS=(standin-apply mco-buggy mco-fixed)
for s in "${SCENARIOS[@]}"; do
  case $s in standin-apply | mco-buggy | mco-fixed) ;; *) fail_setup "unknown scenario $s" ;; esac
done

OUT=${REAL_PODS_OUT:-}
[[ -n $OUT ]] || OUT=$(mktemp -d "${TMPDIR:-/tmp}/minicvo-real-pods.XXXXXX")
mkdir -p "$OUT"
k() { "$KUBECTL" --kubeconfig "$KUBECONFIG" "$@"; }

# for_real_pods NAME: a copy of payload/NAME in $OUT/payloads/NAME: the machine-config-operator
# Deployment on the stand-in image (its ClusterOperator `machine-config`, a 3 s lease), every
# other Deployment on the pause image without args, a 10 s grace period; CRDs per REAL_PODS_CRDS.
for_real_pods() {
  local name=$1 src=$ROOT/payload/$1/release-manifests dst=$OUT/payloads/$1/release-manifests
  rm -rf "$OUT/payloads/$name"
  mkdir -p "$dst"
  python3 - "$src" "$dst" "$CRDS" <<'PY'
import json, os, shutil, sys, yaml
src, dst, crds = sys.argv[1:4]
api = os.environ["REAL_PODS_API"]
for f in sorted(os.listdir(src)):
    if f.endswith(".crd.yaml") and crds == "cluster":
        continue
    if not f.endswith("_deployment.yaml"):
        shutil.copy(os.path.join(src, f), os.path.join(dst, f))
        continue
    # PyYAML reads YAML 1.1, as kubectl does: defaultMode 0644 is octal.
    d = yaml.safe_load(open(os.path.join(src, f)))
    mco = d["metadata"]["name"] == "machine-config-operator"
    spec = d["spec"]["template"]["spec"]
    spec["terminationGracePeriodSeconds"] = 10
    for c in spec["containers"]:
        c["imagePullPolicy"] = os.environ["PULL"]
        if not mco:
            c["image"] = os.environ["PAUSE_IMAGE"]
            c.pop("args", None)
            continue
        c["image"] = os.environ["STANDIN_IMAGE"]
        env = c.setdefault("env", [])
        env += [{"name": "STANDIN_CLUSTEROPERATOR", "value": "machine-config"},
                {"name": "STANDIN_LEASE_DURATION", "value": "3"},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
        if api:
            host, port = api.rsplit(":", 1)
            spec["hostNetwork"] = True
            env += [{"name": "KUBERNETES_SERVICE_HOST", "value": host},
                    {"name": "KUBERNETES_SERVICE_PORT", "value": port}]
    with open(os.path.join(dst, f), "w") as out:
        json.dump(d, out, indent=2)
PY
}

failures=0
failed() { say "$1: NOT as expected: $2"; failures=$((failures + 1)); }

# ---- standin-apply ---------------------------------------------------------------------------
STANDIN_NS=minicvo-real-pods-standin
standin_payload() {
  local dst=$OUT/payloads/standin/release-manifests ns=$STANDIN_NS inc='include.release.openshift.io/self-managed-high-availability: "true"'
  rm -rf "$OUT/payloads/standin"
  mkdir -p "$dst"
  echo '{"kind": "cincinnati-metadata-v0", "version": "1.0.0"}' >"$dst/release-metadata"
  if [[ $CRDS == payload ]]; then
    cp "$ROOT"/payload/old/release-manifests/*clusteroperators.crd.yaml "$dst/"
  fi
  local host_network='' api_env=''
  if [[ -n $REAL_PODS_API ]]; then
    host_network='      hostNetwork: true'
    api_env="        - {name: KUBERNETES_SERVICE_HOST, value: \"${REAL_PODS_API%:*}\"}
        - {name: KUBERNETES_SERVICE_PORT, value: \"${REAL_PODS_API##*:}\"}"
  fi
  cat >"$dst/0000_50_${ns}_00_namespace.yaml" <<Y
apiVersion: v1
kind: Namespace
metadata:
  name: $ns
  annotations:
    $inc
Y
  cat >"$dst/0000_50_${ns}_03_rbac.yaml" <<Y
apiVersion: v1
kind: ServiceAccount
metadata:
  name: operator
  namespace: $ns
  annotations:
    $inc
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: $ns
  annotations:
    $inc
rules:
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update"]
- apiGroups: ["config.openshift.io"]
  resources: ["clusteroperators", "clusteroperators/status"]
  verbs: ["get", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: $ns
  annotations:
    $inc
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: $ns
subjects:
- kind: ServiceAccount
  name: operator
  namespace: $ns
Y
  cat >"$dst/0000_50_${ns}_04_deployment.yaml" <<Y
apiVersion: apps/v1
kind: Deployment
metadata:
  name: operator
  namespace: $ns
  annotations:
    $inc
spec:
  replicas: 1
  selector:
    matchLabels:
      app: operator
  template:
    metadata:
      labels:
        app: operator
    spec:
      serviceAccountName: operator
$host_network
      terminationGracePeriodSeconds: 5
      containers:
      - name: operator
        image: $STANDIN_IMAGE
        imagePullPolicy: $PULL
        env:
        - {name: STANDIN_CLUSTEROPERATOR, value: "$ns"}
        - {name: RELEASE_VERSION, value: "1.0.0"}
        - {name: STANDIN_LEASE_DURATION, value: "3"}
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
$api_env
Y
  cat >"$dst/0000_50_${ns}_06_clusteroperator.yaml" <<Y
apiVersion: config.openshift.io/v1
kind: ClusterOperator
metadata:
  name: $ns
  annotations:
    $inc
spec: {}
status:
  versions:
  - name: operator
    version: "1.0.0"
Y
}

standin_cleanup() {
  k delete namespace "$STANDIN_NS" --ignore-not-found --wait=false >/dev/null 2>&1 || true
  k delete clusteroperator "$STANDIN_NS" --ignore-not-found >/dev/null 2>&1 || true
  k delete clusterrolebinding,clusterrole "$STANDIN_NS" --ignore-not-found >/dev/null 2>&1 || true
}

run_standin_apply() {
  local rc=0 co
  say "standin-apply: minicvo apply of the stand-in operator (expect: exit 0, Available)"
  standin_cleanup
  # A namespace still terminating from an earlier run would refuse the new objects.
  k wait --for=delete "namespace/$STANDIN_NS" --timeout=60s >/dev/null 2>&1 || true
  standin_payload
  "$MINICVO" apply --no-progress -o json --no-cluster-version --wait-timeout "$WAIT" --wait-available \
    --kubeconfig "$KUBECONFIG" "$OUT/payloads/standin" >"$OUT/standin-apply.json" 2>"$OUT/standin-apply.log" || rc=$?
  if ((rc != 0)); then
    failed standin-apply "minicvo apply exited $rc (log $OUT/standin-apply.log)"
    k -n "$STANDIN_NS" get pods -o wide >&2 || true
    return
  fi
  # --wait-available returned only once the Deployment was rolled out: no wait here.
  local waited available
  waited=$(python3 -c 'import json, sys; a = json.load(open(sys.argv[1]))["available"]; print(a["workloads"], len(a["notAvailable"]))' "$OUT/standin-apply.json")
  available=$(k -n "$STANDIN_NS" get deployment operator -o jsonpath='{.status.availableReplicas}/{.status.updatedReplicas}')
  if [[ $waited != "1 0" || $available != 1/1 ]]; then
    failed standin-apply "after apply --wait-available: waited for '$waited' (workloads, not available), Deployment $STANDIN_NS/operator available/updated '$available'"
    return
  fi
  co=$(k get clusteroperator "$STANDIN_NS" -o jsonpath='{.status.versions[0].version}')
  if [[ $co != 1.0.0 ]]; then
    failed standin-apply "ClusterOperator $STANDIN_NS reports version '$co', not 1.0.0"
    return
  fi
  # The version came from the pod, written as its ServiceAccount (the stand-in's field manager).
  local writers pods restarts log
  writers=$(k get clusteroperator "$STANDIN_NS" --show-managed-fields \
    -o jsonpath='{range .metadata.managedFields[?(@.subresource=="status")]}{.manager}{"\n"}{end}')
  if ! grep -q '^minicvo-standin-operator' <<<"$writers"; then
    failed standin-apply "the status was not written by the stand-in (writers: $(tr '\n' ' ' <<<"$writers"))"
    return
  fi
  # One pod, never restarted, which took its lease before it reported.
  pods=$(k -n "$STANDIN_NS" get pods -l app=operator -o jsonpath='{.items[*].metadata.name}')
  if [[ $(wc -w <<<"$pods") -ne 1 ]]; then
    failed standin-apply "not exactly one operator pod: '$pods'"
    return
  fi
  restarts=$(k -n "$STANDIN_NS" get pod "$pods" -o jsonpath='{.status.containerStatuses[*].restartCount}')
  if [[ $restarts != 0 ]]; then
    failed standin-apply "pod $pods restarted ($restarts)"
    return
  fi
  log=$(k -n "$STANDIN_NS" logs "$pods")
  if ! grep -q 'acquired lease' <<<"$log" ||
    ! sed -n '/acquired lease/,$p' <<<"$log" | grep -q "reported clusteroperator $STANDIN_NS at version 1.0.0"; then
    failed standin-apply "the pod's log has no lease taken before its report: $log"
    return
  fi
  say "standin-apply: as expected (exit 0; Deployment Available when apply --wait-available returned; pod $pods, never restarted, took its lease and reported 1.0.0 as its ServiceAccount)"
  standin_cleanup
}

# ---- the machine-config story ----------------------------------------------------------------
# run_mco NAME TO EXPECT: EXPECT is "denied" (exit 1, the story finding, a refused `denied:`
# harm of the old pod's ServiceAccount caused by the binding's delete) or "clean" (exit 0, real
# pods watched, no harm).
run_mco() {
  local name=$1 to=$2 expect=$3 rc=0 verdict line
  say "$name: e2e upgrade old -> $to with real pods (expect: $expect)"
  for_real_pods old
  for_real_pods "$to"
  "$MINICVO" e2e upgrade --from "$OUT/payloads/old" --to "$OUT/payloads/$to" \
    --wait-available --real-pods --simulate machine-config=never --clean --wait-timeout "$WAIT" \
    --kubeconfig "$KUBECONFIG" --no-progress -o json --timeline "$OUT/$name.timeline.json" \
    >"$OUT/$name.json" 2>"$OUT/$name.log" || rc=$?
  verdict=$(python3 - "$OUT/$name.json" "$OUT/$name.timeline.json" "$expect" "$rc" <<'PY'
import json, sys
path, timeline, expect, rc = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
try:
    r = json.load(open(path))
    events = json.load(open(timeline))["events"]
except Exception as e:
    print(f"no result ({e}); exit code {rc}")
    sys.exit(1)
check = lambda n: next((c for c in r["checks"] if c["name"] == n), None)
story = check("delete-before-workload-update") or {"findings": []}
live = check("live-pods-keep-access")
harms = [e for e in events if e.get("action") == "harm"]
binding = "default-account-openshift-machine-config-operator"
sa = "openshift-machine-config-operator/default"
problems = []
if live is None:
    problems.append("live-pods-keep-access did not run")
if expect == "denied":
    if rc != 1: problems.append(f"exit code {rc}, not 1")
    if not r.get("completed"): problems.append("the run did not complete")
    if not any(f"ClusterRoleBinding {binding} was deleted" in f for f in story["findings"]):
        problems.append("no story finding about the binding's delete")
    if live is not None and not live["findings"]:
        problems.append("live-pods-keep-access has no finding")
    denial = [h for h in harms if h.get("serviceAccount") == sa and h.get("name") == "machine-config-operator"
              and str(h.get("what", "")).startswith("denied:")
              and str(h.get("cause", "")).startswith("delete ClusterRoleBinding")
              and str(h.get("cause", "")).endswith(binding)]
    if not denial: problems.append(f"no refused 'denied:' harm of {sa} caused by the delete of {binding}")
    for h in denial[:1]:
        print(f"denied: {h['pod']} ({h['serviceAccount']}): {h['what']}; cause: {h['cause']}")
else:
    if rc != 0: problems.append(f"exit code {rc}, not 0")
    if not r.get("ok"): problems.append("the report is not ok")
    if harms: problems.append(f"{len(harms)} harm(s): {harms[0].get('what')}")
    if live is not None and not any("real pods watched" in n for n in live.get("notes", [])):
        problems.append(f"live-pods-keep-access watched no real pods: {live.get('notes')}")
for run in r.get("runs", []):
    print(f'{run["phase"]}: {"ok" if run["ok"] else "FAILED"} in {run["seconds"]:.2f}s')
print("as expected" if not problems else "NOT as expected: " + "; ".join(problems))
sys.exit(1 if problems else 0)
PY
  ) || failures=$((failures + 1))
  while IFS= read -r line; do say "$name: $line"; done <<<"$verdict"
}

for s in "${SCENARIOS[@]}"; do
  case $s in
    standin-apply) run_standin_apply ;;
    mco-buggy) run_mco mco-buggy new-buggy denied ;;
    mco-fixed) run_mco mco-fixed new clean ;;
  esac
done

say "results in $OUT"
if ((failures > 0)); then
  say "$failures scenario(s) did not end as expected"
  exit 1
fi
say "every scenario ended as expected"
