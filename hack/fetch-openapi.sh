#!/usr/bin/env bash
# Stores the built-in kinds' schemas of a Kubernetes version for `minicvo lint`'s offline
# schema validation: reads /openapi/v3 and discovery from a running API server and writes
# schemas/kube-<major.minor>.json.gz, one JSON document:
#
#   {"version": "v1.37.2",
#    "kinds": [{"group": "apps", "version": "v1", "kind": "Deployment", "namespaced": true,
#               "schema": "io.k8s.api.apps.v1.Deployment"}, ...],
#    "schemas": {"io.k8s.api.apps.v1.Deployment": {...}, ...}}
#
# Usage: hack/fetch-openapi.sh [KUBECONFIG]
#   Without an argument it starts a test control plane (hack/testplane.sh), reads it, and stops
#   it. With one, it reads the cluster of that kubeconfig (any conformant API server of the
#   version to add). Needs kubectl (the test plane's, else on PATH), jq and gzip.
# See docs/analysis.md, "Adding a Kubernetes version".
set -euo pipefail
STARTED=
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

say() { echo "fetch-openapi: $*" >&2; }

if [[ $# -ge 1 ]]; then
  export KUBECONFIG=$1
  KUBECTL=${KUBECTL:-kubectl}
else
  BIN=${TESTPLANE_BIN:-$(bash hack/build-testplane.sh | tail -n1)}
  KUBECTL=$BIN/kubectl
  eval "$(TESTPLANE_BIN=$BIN bash hack/testplane.sh start)"
  export KUBECONFIG
  STARTED=$TESTPLANE_DIR
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"; if [[ -n "${STARTED:-}" ]]; then bash hack/testplane.sh stop "$STARTED"; fi' EXIT

VERSION=$("$KUBECTL" get --raw /version | jq -r .gitVersion)
MINOR=$(sed -E 's/^v([0-9]+\.[0-9]+).*/\1/' <<<"$VERSION")
say "API server $VERSION"

# Every group-version the server documents: api/v1 and apis/<group>/<version>.
mapfile -t GVS < <("$KUBECTL" get --raw /openapi/v3 | jq -r '.paths | keys[]' |
  grep -E '^(api/v1|apis/[^/]+/[^/]+)$')
i=0
for gv in "${GVS[@]}"; do
  "$KUBECTL" get --raw "/openapi/v3/$gv" >"$WORK/openapi-$i.json"
  "$KUBECTL" get --raw "/$gv" >"$WORK/discovery-$i.json"
  i=$((i + 1))
done
say "${#GVS[@]} group-versions"

# Kinds: discovery gives scope; the schema is the one whose x-kubernetes-group-version-kind
# names the kind. Subresources (name with a slash) are left out.
jq -n --arg version "$VERSION" '
  [inputs] as $docs
  | ($docs | map(select(has("components"))) | map(.components.schemas) | add) as $schemas
  | ($docs | map(select(has("resources")))) as $lists
  | [ $lists[] | .groupVersion as $gv
      | .resources[] | select(.name | contains("/") | not)
      | {gv: $gv, kind: .kind, namespaced: .namespaced} ] as $res
  | [ $schemas | to_entries[] | .key as $name
      | (.value["x-kubernetes-group-version-kind"] // [])[] | {name: $name, g: .group, v: .version, k: .kind} ] as $gvks
  | {version: $version,
     kinds: [ $res[] as $r
              | ($r.gv | if contains("/") then split("/") else ["", .] end) as [$g, $v]
              | ($gvks | map(select(.g == $g and .v == $v and .k == $r.kind)) | first) as $s
              | select($s != null)
              | {group: $g, version: $v, kind: $r.kind, namespaced: $r.namespaced, schema: $s.name} ]
            | unique_by([.group, .version, .kind]),
     schemas: ($schemas | to_entries | sort_by(.key) | from_entries
              | walk(if type == "object" and (.description | type) == "string" then del(.description) else . end))}
' "$WORK"/openapi-*.json "$WORK"/discovery-*.json >"$WORK/kube.json"

mkdir -p schemas
OUTFILE=schemas/kube-$MINOR.json.gz
gzip -9 -n -c "$WORK/kube.json" >"$OUTFILE"
say "wrote $OUTFILE ($(jq '.kinds | length' "$WORK/kube.json") kinds, $(jq '.schemas | length' "$WORK/kube.json") schemas, $(stat -c %s "$OUTFILE") bytes)"
