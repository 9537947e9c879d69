#!/usr/bin/env bash
# Figures of the plane with a node (BENCHMARKS.md §6, docs/e2e.md): its start, the first pod,
# and the machine-config story (`e2e upgrade --clean --cleanup` of the samples) with simulated
# pods vs real pods, side by side, the order alternating from round to round. Needs root.
#
#   ROUNDS=3 hack/bench-nodes.sh       MINICVO=path (default target/debug/minicvo, built; the
#                                      figures of docs/e2e.md are of a debug build too)
#
# Real pods: the samples with the machine-config-operator Deployment on the stand-in operator
# image and every other Deployment on the pause image, run with `--wait-available
# --real-pods --simulate machine-config=never` (as tests/it/node_mco_story.rs does).
# Raw results go to target/bench/nodes-<timestamp>/.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ROUNDS=${ROUNDS:-3}
say() { echo "bench-nodes: $*" >&2; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

if [[ -z ${MINICVO:-} ]]; then
  nice -n 10 cargo build --quiet
  MINICVO=$ROOT/target/debug/minicvo
fi
out=$(bash hack/build-testplane.sh --nodes | tail -n 2)
TESTPLANE_BIN=$(head -n 1 <<<"$out")
TESTPLANE_NODE_BIN=$(tail -n 1 <<<"$out")
export TESTPLANE_BIN TESTPLANE_NODE_BIN
OUT=$ROOT/target/bench/nodes-$(date -u +%Y%m%dT%H%M%S)
mkdir -p "$OUT"
say "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); results in $OUT"

t=$(now)
eval "$(bash hack/testplane.sh start --nodes 1)"
echo "start $(since "$t")" >>"$OUT/raw"
trap 'bash hack/testplane.sh stop "$TESTPLANE_DIR"' EXIT
k() { "$TESTPLANE_BIN/kubectl" "$@"; }

k create namespace first-pod >/dev/null
until k -n first-pod get serviceaccount default >/dev/null 2>&1; do sleep 0.1; done
t=$(now)
k -n first-pod create deployment p --image "$TESTPLANE_REGISTRY/minicvo/pause:1" >/dev/null
k -n first-pod wait --for=condition=Available deployment/p --timeout=60s >/dev/null
echo "first-pod $(since "$t")" >>"$OUT/raw"
k delete namespace first-pod --wait=false >/dev/null

# The samples for real pods, next to the originals.
port=${KUBECONFIG:+$(sed -n 's/^ *server: https:\/\/127.0.0.1://p' "$KUBECONFIG")}
python3 - "$OUT/real" "$TESTPLANE_REGISTRY/minicvo/pause:1" "$TESTPLANE_STANDIN_IMAGE" "$port" <<'EOF'
import json, os, re, sys, yaml
dst_root, pause, standin, port = sys.argv[1:]
for name in ["old", "new", "new-buggy"]:
    src = f"payload/{name}/release-manifests"
    dst = f"{dst_root}/{name}/release-manifests"
    os.makedirs(dst)
    for f in sorted(os.listdir(src)):
        text = open(f"{src}/{f}").read()
        if f.endswith("_deployment.yaml"):
            d = yaml.safe_load(re.sub(r"(defaultMode: )0([0-7]+)", lambda m: m[1] + str(int(m[2], 8)), text))
            mco = d["metadata"]["name"] == "machine-config-operator"
            spec = d["spec"]["template"]["spec"]
            spec["terminationGracePeriodSeconds"] = 10
            if mco:
                spec["hostNetwork"] = True
            for c in spec["containers"]:
                if not mco:
                    c["image"] = pause
                    c.pop("args", None)
                    continue
                c["image"] = standin
                c["env"] += [{"name": k, "value": v} for k, v in [
                    ("STANDIN_CLUSTEROPERATOR", "machine-config"), ("STANDIN_LEASE_DURATION", "3"),
                    ("KUBERNETES_SERVICE_HOST", "127.0.0.1"), ("KUBERNETES_SERVICE_PORT", port)]]
                c["env"].append({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
            text = json.dumps(d, indent=1)
        open(f"{dst}/{f}", "w").write(text)
EOF

# run KIND NEW ROUND: one e2e; appends "KIND NEW wall install upgrade exit" to raw.
run() {
  local kind=$1 new=$2 r=$3 t code=0 args
  if [[ $kind == simulated ]]; then
    args=(--from payload/old --to "payload/$new")
  else
    args=(--from "$OUT/real/old" --to "$OUT/real/$new" --wait-available --real-pods --simulate machine-config=never)
  fi
  t=$(now)
  "$MINICVO" e2e upgrade "${args[@]}" --clean --cleanup --kubeconfig "$KUBECONFIG" \
    >"$OUT/$kind-$new-$r.txt" 2>"$OUT/$kind-$new-$r.log" || code=$?
  local wall install upgrade
  wall=$(since "$t")
  install=$(sed -n 's/^install  [A-Za-z]* in \([0-9.]*\)s.*/\1/p' "$OUT/$kind-$new-$r.txt")
  upgrade=$(sed -n 's/^upgrade  [A-Za-z]* in \([0-9.]*\)s.*/\1/p' "$OUT/$kind-$new-$r.txt")
  local gap
  gap=$(sed -n 's/^lease gap: no pod of Deployment openshift-machine-config-operator\/machine-config-operator could lead for \([0-9.]*\)s.*/\1/p;T;q' "$OUT/$kind-$new-$r.txt")
  echo "$kind $new $wall ${install:-?} ${upgrade:-?} $code ${gap:--}" >>"$OUT/raw"
  say "round $r: $kind $new: ${wall}s (install ${install:-?}s, upgrade ${upgrade:-?}s, exit $code)"
}

for ((r = 1; r <= ROUNDS; r++)); do
  for new in new new-buggy; do
    if ((r % 2)); then
      run simulated "$new" "$r"
      run real "$new" "$r"
    else
      run real "$new" "$r"
      run simulated "$new" "$r"
    fi
  done
done

trap - EXIT
t=$(now)
bash hack/testplane.sh stop "$TESTPLANE_DIR"
echo "stop $(since "$t")" >>"$OUT/raw"
say "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"

# Medians.
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "plane start with a node: $(awk '$1 == "start" { print $2 }' "$OUT/raw") s"
echo "first pod Available: $(awk '$1 == "first-pod" { print $2 }' "$OUT/raw") s"
echo "stop (with the leftover check): $(awk '$1 == "stop" { print $2 }' "$OUT/raw") s"
# A run without a gap counts as none (not 0): the median of the runs that had one.
median_or_none() {
  local v
  v=$(cat)
  if [[ -z $v ]]; then echo none; else echo "$(median <<<"$v") s"; fi
}
printf '| %s | %s | %s | %s | %s | %s | %s |\n' scenario pods "wall (median)" "install" "upgrade" "exit codes" \
  "operator lease gap (median)"
for new in new new-buggy; do
  for kind in simulated real; do
    rows=$(awk -v k="$kind" -v n="$new" '$1 == k && $2 == n' "$OUT/raw")
    printf '| old → %s | %s | %s s | %s s | %s s | %s | %s |\n' "$new" "$kind" \
      "$(awk '{ print $3 }' <<<"$rows" | median)" "$(awk '{ print $4 }' <<<"$rows" | median)" \
      "$(awk '{ print $5 }' <<<"$rows" | median)" "$(awk '{ print $6 }' <<<"$rows" | sort -u | paste -sd,)" \
      "$(awk '$7 != "-" { print $7 }' <<<"$rows" | median_or_none)"
  done
done
