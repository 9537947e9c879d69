#!/usr/bin/env bash
# What `minicvo apply` leaves on a cluster bootstrapped as an OpenShift install is, compared
# between two minicvo builds (and, with CVO_DUMP, with a dump of the real CVO's run of the same
# payload), and how long the apply takes.
#
# The payload is openshift-multi shaped as a release image holds it: the CVO's own files
# (`*_cluster-version-operator_*`) in manifests/, the rest in release-manifests/, version
# 4.99.0. Each run gets a fresh private test plane bootstrapped as a real cluster is before the
# CVO runs (the real ClusterVersion, ClusterOperator, FeatureGate, APIServer, Proxy and
# Infrastructure CRDs, Namespace openshift-cluster-version, ClusterVersion `version` with a
# cluster id, FeatureGate `cluster` listing 4.99.0 with no gate enabled) plus what other
# operators create (16 namespaces, a permissive StorageVersionMigration CRD); `minicvo
# simulate` reports the ClusterOperators while `minicvo apply` runs. Every listable object is
# dumped and the dumps are compared with hack/strategy-diff.py.
#
#   BEFORE=<git ref> hack/end-state.sh [OUTDIR]
#
# Environment: BEFORE (a git ref, built with cargo --release in target/bench-before), AFTER
# (a minicvo binary, default target/release/minicvo, built), ROUNDS (apply runs per build,
# alternating, default 3; the dumps of the last round are compared), CVO_OUT (the output
# directory of ../shared/research/realcvo/run-cvo.sh run on OUTDIR/payload with its
# multi-extra bootstrap: the real CVO's end state, compared with AFTER's and BEFORE's on the
# payload's manifest objects, hack/cvo-dump.py).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${1:-$(mktemp -d /tmp/minicvo-end-state.XXXXXX)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
ROUNDS=${ROUNDS:-3}
CORPUS=$ROOT/../shared/payloads/openshift-multi/release-manifests
[[ -d $CORPUS ]] || { echo "end-state: $CORPUS is missing (../shared/payloads)" >&2; exit 1; }
export TESTPLANE_BIN=${TESTPLANE_BIN:-$(bash hack/build-testplane.sh | tail -n 1)}
K=$TESTPLANE_BIN/kubectl
say() { echo "end-state: $*" >&2; }

AFTER=${AFTER:-}
if [[ -z $AFTER ]]; then
  cargo build --release --quiet --bin minicvo
  AFTER=${CARGO_TARGET_DIR:-$ROOT/target}/release/minicvo
fi
BUILDS=(after)
declare -A BIN=([after]=$AFTER)
if [[ -n ${BEFORE:-} ]]; then
  wt=$ROOT/target/bench-before
  say "building minicvo at $BEFORE in $wt"
  [[ -d $wt ]] || git worktree add --detach "$wt" "$BEFORE" >&2
  git -C "$wt" checkout -q --detach "$BEFORE"
  ln -sfn "$ROOT/../shared" "$ROOT/target/shared"
  (cd "$wt" && CARGO_TARGET_DIR=$ROOT/target/bench-before-target cargo build --release --quiet --bin minicvo) >&2
  BIN[before]=$ROOT/target/bench-before-target/release/minicvo
  BUILDS=(before after)
fi

# The release-shaped payload.
PAYLOAD=$OUT/payload
rm -rf "$PAYLOAD"
mkdir -p "$PAYLOAD/manifests" "$PAYLOAD/release-manifests"
for f in "$CORPUS"/*.yaml; do
  case $(basename "$f") in
    *_cluster-version-operator_*) cp "$f" "$PAYLOAD/manifests/" ;;
    *) cp "$f" "$PAYLOAD/release-manifests/" ;;
  esac
done
echo '{"kind":"cincinnati-metadata-v0","version":"4.99.0"}' >"$PAYLOAD/release-manifests/release-metadata"
echo '{"kind":"ImageStream","apiVersion":"image.openshift.io/v1","metadata":{"name":"4.99.0"},"spec":{"tags":[]}}' \
  >"$PAYLOAD/release-manifests/image-references"

# The release image `{{.ReleaseImage}}` renders to (the CVO's Deployment runs it).
IMAGE=example.invalid/ocp-release@sha256:$(printf '4.99.0' | sha256sum | cut -c1-64)

bootstrap() {
  local crd
  for crd in 0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml \
    0000_00_cluster-version-operator_01_clusteroperators.crd.yaml \
    0000_10_config-operator_01_featuregates.crd.yaml \
    0000_10_config-operator_01_apiservers-Default.crd.yaml \
    0000_03_config-operator_01_proxies.crd.yaml \
    0000_10_config-operator_01_infrastructures-Default.crd.yaml; do
    $K apply --server-side -f "$CORPUS/$crd" >/dev/null
  done
  $K wait --for=condition=Established --timeout=60s crd --all >/dev/null
  $K create -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: openshift-cluster-version}
---
apiVersion: config.openshift.io/v1
kind: ClusterVersion
metadata: {name: version}
spec: {clusterID: $(python3 -c 'import uuid; print(uuid.uuid4())')}
---
apiVersion: config.openshift.io/v1
kind: FeatureGate
metadata: {name: cluster}
spec: {}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: storageversionmigrations.migration.k8s.io
  annotations: {api-approved.kubernetes.io: "https://github.com/kubernetes/enhancements/pull/747"}
spec:
  group: migration.k8s.io
  scope: Cluster
  names: {kind: StorageVersionMigration, plural: storageversionmigrations, singular: storageversionmigration, listKind: StorageVersionMigrationList}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
EOF
  $K patch featuregate cluster --subresource=status --type=merge \
    -p '{"status":{"featureGates":[{"version":"4.99.0","enabled":[],"disabled":[]}]}}' >/dev/null
  local ns
  for ns in openshift openshift-apiserver openshift-apiserver-operator openshift-authentication \
    openshift-authentication-operator openshift-console openshift-console-operator \
    openshift-image-registry openshift-ingress-operator openshift-kube-apiserver \
    openshift-kube-controller-manager openshift-kube-scheduler openshift-marketplace \
    openshift-oauth-apiserver openshift-service-ca openshift-service-ca-operator; do
    $K create namespace "$ns" >/dev/null
  done
  $K wait --for=condition=Established --timeout=60s crd --all >/dev/null
}

PLANE=""
cleanup() { [[ -n $PLANE ]] && bash hack/testplane.sh stop "$PLANE" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# one BUILD ROUND: a fresh plane, the bootstrap, simulate + apply (timed), the dump.
one() {
  local build=$1 round=$2 bin=${BIN[$1]} sim rc=0 t0 t1
  eval "$(bash hack/testplane.sh start)"
  PLANE=$TESTPLANE_DIR
  export KUBECONFIG
  bootstrap
  "$bin" simulate "$PAYLOAD" -q --release-image "$IMAGE" >"$OUT/$build.$round.simulate.log" 2>&1 &
  sim=$!
  t0=$(date +%s%N)
  "$bin" apply "$PAYLOAD" --no-progress --wait-timeout 5m -o json --release-image "$IMAGE" \
    >"$OUT/$build.$round.apply.json" 2>"$OUT/$build.$round.apply.log" || rc=$?
  t1=$(date +%s%N)
  kill "$sim" 2>/dev/null || true
  wait "$sim" 2>/dev/null || true
  local requests
  requests=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["requests"])' \
    "$OUT/$build.$round.apply.json" 2>/dev/null || echo "?")
  echo "$build $round $(((t1 - t0) / 1000000)) $requests $rc" >>"$OUT/times.txt"
  say "$build round $round: apply $(((t1 - t0) / 1000000)) ms, $requests requests, exit $rc"
  $K api-resources --verbs=list -o name | sort | while read -r r; do
    $K get "$r" -A -o json 2>/dev/null || true
  done >"$OUT/$build.json"
  bash hack/testplane.sh stop "$PLANE" >/dev/null 2>&1 || true
  PLANE=""
}

: >"$OUT/times.txt"
for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then order=("${BUILDS[@]}"); else order=($(printf '%s\n' "${BUILDS[@]}" | tac)); fi
  for b in "${order[@]}"; do one "$b" "$r"; done
done

python3 - "$OUT/times.txt" <<'EOF'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
by = {}
for b, r, ms, req, rc in rows:
    by.setdefault(b, []).append((int(ms), req, rc))
for b, runs in by.items():
    ms = [m for m, _, _ in runs]
    print(f"{b}: apply median {statistics.median(ms):.0f} ms over {len(ms)} runs ({', '.join(map(str, ms))}), "
          f"requests {', '.join(q for _, q, _ in runs)}, exit codes {', '.join(c for _, _, c in runs)}")
EOF
if [[ -f $OUT/before.json ]]; then
  echo "== objects that differ, before ($BEFORE) vs after"
  python3 hack/strategy-diff.py "$OUT/before.json" "$OUT/after.json" before after || true
fi
if [[ -n ${CVO_OUT:-} ]]; then
  for b in "${BUILDS[@]}"; do
    echo "== manifest objects that differ, the real CVO vs $b"
    python3 hack/cvo-dump.py "$CVO_OUT" "$OUT/$b.json" "$OUT/cvo.list.json" "$OUT/$b.list.json"
    python3 hack/strategy-diff.py "$OUT/cvo.list.json" "$OUT/$b.list.json" cvo "$b" || true
  done
fi
say "dumps and logs in $OUT"
