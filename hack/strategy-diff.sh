#!/usr/bin/env bash
# Where the two apply strategies leave a cluster in a different state: runs
# `minicvo e2e upgrade` of a payload (default: openshift-multi 4.16.0 -> 4.17.0) once with
# `--apply-strategy cvo` and once with `--apply-strategy server-side`, each on its own private
# test plane, dumps every listable object of both, normalises server-owned fields and prints
# the objects that differ, with the differing field paths (hack/strategy-diff.py).
#
#   hack/strategy-diff.sh [OUTDIR]
#
# Environment: MINICVO (binary, default target/debug/minicvo, built if missing), FROM, TO
# (payload dirs, default ../shared/payloads/openshift-multi for both), FROM_VERSION,
# TO_VERSION (default 4.16.0, 4.17.0). The dumps stay in OUTDIR (default a temp dir).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${1:-$(mktemp -d /tmp/minicvo-strategy-diff.XXXXXX)}
mkdir -p "$OUT"
MINICVO=${MINICVO:-$ROOT/target/debug/minicvo}
[[ -x $MINICVO ]] || cargo build --quiet
FROM=${FROM:-$ROOT/../shared/payloads/openshift-multi}
TO=${TO:-$FROM}
FROM_VERSION=${FROM_VERSION:-4.16.0}
TO_VERSION=${TO_VERSION:-4.17.0}
export TESTPLANE_BIN=${TESTPLANE_BIN:-$(bash hack/build-testplane.sh | tail -n 1)}
KUBECTL=$TESTPLANE_BIN/kubectl

cleanup() {
  for f in "$OUT"/*.plane; do
    [[ -f $f ]] && bash hack/testplane.sh stop "$(cat "$f")" >/dev/null 2>&1 || true
  done
}
trap cleanup EXIT

run() {
  local strategy=$1 rc=0
  (
    eval "$(bash hack/testplane.sh start)"
    echo "$TESTPLANE_DIR" >"$OUT/$strategy.plane"
    export KUBECONFIG
    "$MINICVO" e2e upgrade --apply-strategy "$strategy" --from "$FROM" --to "$TO" \
      --from-version "$FROM_VERSION" --to-version "$TO_VERSION" \
      --stub-missing-crds --create-missing-namespaces --wait-timeout 120s \
      >"$OUT/$strategy.e2e.txt" 2>"$OUT/$strategy.e2e.log"
    tail -n 3 "$OUT/$strategy.e2e.txt" | sed "s/^/$strategy: /" >&2
    # Every listable kind, in one JSON list per kind.
    "$KUBECTL" api-resources --verbs=list -o name | sort | while read -r r; do
      "$KUBECTL" get "$r" -A -o json 2>/dev/null || true
    done >"$OUT/$strategy.json"
  ) || rc=$?
  if [[ -f $OUT/$strategy.plane ]]; then
    bash hack/testplane.sh stop "$(cat "$OUT/$strategy.plane")" >/dev/null 2>&1 || true
    rm -f "$OUT/$strategy.plane"
  fi
  return "$rc"
}

run cvo
run server-side
echo "dumps in $OUT" >&2
python3 hack/strategy-diff.py "$OUT/cvo.json" "$OUT/server-side.json"
