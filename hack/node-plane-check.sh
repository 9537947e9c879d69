#!/usr/bin/env bash
# A standalone check of the plane with a node (hack/TESTPLANE.md, "A plane with a node"):
# starts one, runs a Deployment of the pause image on the pod network and a stand-in operator
# (hack/tools/standin) that reports its ClusterOperator as its own ServiceAccount, reads its
# logs through the API server, stops the plane and checks nothing is left. Prints the timings.
#
#   hack/node-plane-check.sh            needs root; builds the tools when the cache is cold
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

say() { echo "node-plane-check: $*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# until_true SECONDS WHAT CMD...: poll CMD every 0.2 s until it succeeds, or fail at the deadline.
until_true() {
  local limit=$1 what=$2 t0=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS - t0 >= limit)); then
      say "timed out after ${limit}s waiting for $what"
      return 1
    fi
    sleep 0.2
  done
}

if [[ -z ${TESTPLANE_BIN:-} || -z ${TESTPLANE_NODE_BIN:-} ]]; then
  out=$(bash hack/build-testplane.sh --nodes | tail -n 2)
  TESTPLANE_BIN=${TESTPLANE_BIN:-$(head -n 1 <<<"$out")}
  TESTPLANE_NODE_BIN=$(tail -n 1 <<<"$out")
  export TESTPLANE_BIN TESTPLANE_NODE_BIN
fi
k() { "$TESTPLANE_BIN/kubectl" "$@"; }

t=$(now)
eval "$(bash hack/testplane.sh start --nodes 1)"
say "plane with a node started in $(since "$t") s"
trap 'bash hack/testplane.sh stop "$TESTPLANE_DIR"' EXIT

ns=node-check
k create namespace "$ns" >/dev/null
until_true 30 "serviceaccount $ns/default" k -n "$ns" get serviceaccount default

# Pods on the CNI bridge network.
t=$(now)
k -n "$ns" create deployment pause --image "$TESTPLANE_REGISTRY/minicvo/pause:1" --replicas 2 >/dev/null
k -n "$ns" wait --for=condition=Available deployment/pause --timeout=60s >/dev/null
say "deployment of 2 pause pods Available in $(since "$t") s"
ips=$(k -n "$ns" get pods -l app=pause -o jsonpath='{.items[*].status.podIP}')
subnet=$(sed -n 's/^NODE_SUBNET=//p' "$TESTPLANE_DIR/node/env")
for ip in $ips; do
  [[ $ip == "${subnet%.0/24}".* ]] || { say "pod IP $ip is not in the pod network $subnet"; exit 1; }
done
say "pod IPs $ips (network $subnet)"

# The stand-in operator: its ServiceAccount may hold a lease and write its ClusterOperator.
k apply -f payload/old/release-manifests/0000_00_cluster-version-operator_01_clusteroperators.crd.yaml >/dev/null
k wait --for=condition=Established crd/clusteroperators.config.openshift.io --timeout=60s >/dev/null
server=$(k config view --minify -o jsonpath='{.clusters[0].cluster.server}')
port=${server##*:}
k apply -f - >/dev/null <<EOF
apiVersion: config.openshift.io/v1
kind: ClusterOperator
metadata:
  name: node-check
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: standin
  namespace: $ns
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: node-check-standin
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
  name: node-check-standin
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: node-check-standin}
subjects:
- {kind: ServiceAccount, name: standin, namespace: $ns}
EOF
t=$(now)
k apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata:
  name: standin
  namespace: $ns
spec:
  replicas: 1
  selector: {matchLabels: {app: standin}}
  template:
    metadata: {labels: {app: standin}}
    spec:
      serviceAccountName: standin
      hostNetwork: true
      containers:
      - name: operator
        image: $TESTPLANE_STANDIN_IMAGE
        env:
        - {name: STANDIN_CLUSTEROPERATOR, value: node-check}
        - {name: RELEASE_VERSION, value: 1.2.3}
        - {name: KUBERNETES_SERVICE_HOST, value: 127.0.0.1}
        - {name: KUBERNETES_SERVICE_PORT, value: "$port"}
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
EOF
reported() {
  [[ $(k get clusteroperator node-check -o jsonpath='{.status.versions[?(@.name=="operator")].version}') == 1.2.3 ]]
}
until_true 60 "clusteroperator node-check at 1.2.3 (written by the stand-in pod)" reported
say "stand-in pod reported its ClusterOperator in $(since "$t") s"
log=$(k -n "$ns" logs deployment/standin)
[[ $log == *"acquired lease"* ]] || { say "no lease in the stand-in's log: $log"; exit 1; }

t=$(now)
trap - EXIT
bash hack/testplane.sh stop "$TESTPLANE_DIR"
say "stopped (nothing left behind) in $(since "$t") s"
