#!/usr/bin/env bash
# The upgrade e2e against a real cluster: creates a kind cluster, replays the machine-config
# story with the bundled samples (payload/old -> payload/new must pass; payload/old ->
# payload/new-buggy must be reported), optionally the real corpus, and deletes the cluster on
# any exit. See docs/e2e.md.
#
#   hack/kind-e2e.sh                 both sample scenarios
#   KIND_E2E_CORPUS=DIR hack/kind-e2e.sh   also mco-4.13 -> mco-before-fix / mco-after-fix from DIR
#                                    (default ../shared/payloads when it exists)
#
# Environment:
#   KIND_E2E_KEEP=1        keep the cluster (prints how to delete it)
#   KIND_E2E_OUT=DIR       where timelines, traces and JUnit files go (default target/kind-e2e)
#   KIND_E2E_IMAGE=IMAGE   node image for `kind create cluster --image`
#   KIND_E2E_ARGS="..."    extra flags for every `minicvo e2e upgrade` (e.g. --wait-available
#                          for payloads whose images really run)
#
# Needs kind and a running Docker daemon; exits 2 with a message when either is missing. It
# cannot run in minicvo's CI, which has no Docker: CI runs the same harness against the test
# control plane (hack/test.sh, tests/e2e_upgrade.rs) instead.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

say() { echo "kind-e2e: $*" >&2; }

if ! command -v kind >/dev/null; then
  say "kind is not installed; hint: https://kind.sigs.k8s.io/docs/user/quick-start/#installation"
  say "(this script cannot run in minicvo's CI, which has no Docker; hack/test.sh runs the same e2e tests on the test control plane)"
  exit 2
fi
if ! command -v docker >/dev/null; then
  say "docker is not installed; kind runs its nodes as Docker containers"
  exit 2
fi
if ! docker info >/dev/null 2>&1; then
  why=$(docker info 2>&1 | grep -m1 -iE 'cannot|error' || true)
  say "the Docker daemon is not reachable: ${why:-docker info failed}"
  say "hint: start Docker, or check DOCKER_HOST and your permissions on the socket"
  exit 2
fi
command -v python3 >/dev/null || { say "python3 is not installed (used to read the JSON results)"; exit 2; }

NAME=minicvo-e2e-$$
OUT=${KIND_E2E_OUT:-$ROOT/target/kind-e2e}
mkdir -p "$OUT"
KC=$OUT/kubeconfig
read -r -a EXTRA <<<"${KIND_E2E_ARGS:-}"

cleanup() {
  local rc=$?
  if [[ ${KIND_E2E_KEEP:-} == 1 ]]; then
    say "kept cluster $NAME (kubeconfig $KC); delete it with: kind delete cluster --name $NAME"
  else
    kind delete cluster --name "$NAME" >&2 || say "could not delete cluster $NAME; run: kind delete cluster --name $NAME"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "building minicvo"
cargo build --release --quiet
BIN=$ROOT/target/release/minicvo

say "creating kind cluster $NAME"
create=(kind create cluster --name "$NAME" --kubeconfig "$KC" --wait 180s)
[[ -n ${KIND_E2E_IMAGE:-} ]] && create+=(--image "$KIND_E2E_IMAGE")
"${create[@]}" >&2

failures=0

# run_e2e NAME EXPECT ARGS...: one upgrade e2e; EXPECT is "pass" (exit 0, no harm, no lease gap)
# or "finding" (exit 1 with the run completed, a delete-before-workload-update finding and a
# live-pods-keep-access harm).
run_e2e() {
  local name=$1 expect=$2 rc=0
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
story = [c for c in r["checks"] if c["name"] == "delete-before-workload-update"]
findings = story[0]["findings"] if story else []
live = [c for c in r["checks"] if c["name"] == "live-pods-keep-access"]
harms = live[0]["findings"] if live else []
gaps = r.get("leaseGaps", [])
if expect == "pass":
    ok = rc == 0 and r["ok"] and not harms and not gaps
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
  ) || { failures=$((failures + 1)); }
  echo "$verdict" | sed "s/^/kind-e2e: $name: /" >&2
}

run_e2e sample-fixed pass --from payload/old --to payload/new
run_e2e sample-buggy finding --from payload/old --to payload/new-buggy

CORPUS=${KIND_E2E_CORPUS:-$ROOT/../shared/payloads}
if [[ -d $CORPUS/mco-4.13 ]]; then
  corpus=(--from "$CORPUS/mco-4.13" --from-version 4.13.0 --to-version 4.14.0
    --stub-missing-crds --create-missing-namespaces)
  run_e2e mco-after-fix pass "${corpus[@]}" --to "$CORPUS/mco-after-fix"
  run_e2e mco-before-fix finding "${corpus[@]}" --to "$CORPUS/mco-before-fix"
else
  say "no corpus at $CORPUS; skipping the mco scenarios (set KIND_E2E_CORPUS)"
fi

say "results in $OUT"
if ((failures > 0)); then
  say "$failures scenario(s) did not end as expected"
  exit 1
fi
say "every scenario ended as expected"
