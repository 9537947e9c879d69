#!/usr/bin/env bash
# Release images, side by side: `minicvo plan IMAGE` (first pull: empty cache; then cached)
# against `crane export IMAGE - | tar -x` + `minicvo plan DIR`, on an openshift-multi-sized
# release image in a local crane registry. Rounds alternate the order; medians reported.
# Never a test, never part of hack/test.sh. Figures go to BENCHMARKS.md.
#
# Environment:
#   ROUNDS=5        rounds
#   FILLER_MIB=64   size of a non-payload base layer (random bytes under usr/), as a real
#                   release image has a base OS below release-manifests/
#   MINICVO=...     the binary (default: target/release/minicvo, built with cargo)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
ROUNDS=${ROUNDS:-5}
FILLER_MIB=${FILLER_MIB:-64}
CORPUS=$ROOT/../shared/payloads/openshift-multi
BIN=$(bash hack/build-testplane.sh | tail -n 1)
if [[ -z ${MINICVO:-} ]]; then
  cargo build --release --quiet
  MINICVO=$ROOT/target/release/minicvo
fi
work=$(mktemp -d)
reg_pid=
cleanup() { [[ -n $reg_pid ]] && kill "$reg_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

"$BIN/crane" registry serve --address 127.0.0.1:0 2>"$work/reg.log" &
reg_pid=$!
until grep -q "serving on port" "$work/reg.log" 2>/dev/null; do sleep 0.1; done
port=$(grep -o "serving on port [0-9]*" "$work/reg.log" | awk '{print $4}')
image=127.0.0.1:$port/release:multi

mkdir -p "$work/filler/usr/lib"
head -c $((FILLER_MIB << 20)) /dev/urandom >"$work/filler/usr/lib/base.bin"
tar -C "$work/filler" -czf "$work/base.tgz" usr
tar -C "$CORPUS" -czf "$work/payload.tgz" release-manifests
"$BIN/crane" append -f "$work/base.tgz" -t "$image" >/dev/null 2>&1
"$BIN/crane" append -b "$image" -f "$work/payload.tgz" -t "$image" >/dev/null 2>&1
echo "bench: image $image: $(du -h "$work/base.tgz" | cut -f1) base + $(du -h "$work/payload.tgz" | cut -f1) payload layer" >&2

export XDG_CACHE_HOME=$work/cache
now() { date +%s%N; }
ms() { echo $(( ($2 - $1) / 1000000 )); }
first=() cached=() crane=()
for ((r = 0; r < ROUNDS; r++)); do
  run_first() {
    rm -rf "$XDG_CACHE_HOME"
    local t0; t0=$(now)
    "$MINICVO" -q plan -o json "$image" >/dev/null
    first+=("$(ms "$t0" "$(now)")")
    t0=$(now)
    "$MINICVO" -q plan -o json "$image" >/dev/null
    cached+=("$(ms "$t0" "$(now)")")
  }
  run_crane() {
    rm -rf "$work/x" && mkdir "$work/x"
    local t0; t0=$(now)
    "$BIN/crane" export "$image" - | tar -x -C "$work/x"
    "$MINICVO" -q plan -o json "$work/x" >/dev/null
    crane+=("$(ms "$t0" "$(now)")")
  }
  if ((r % 2)); then run_crane; run_first; else run_first; run_crane; fi
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
mf=$(median "${first[@]}") mc=$(median "${cached[@]}") mx=$(median "${crane[@]}")
cat <<EOT
| run ($ROUNDS rounds, median) | minicvo plan IMAGE | crane export \| tar -x + minicvo plan DIR | ratio |
|---|---|---|---|
| first pull + plan | ${mf} ms | ${mx} ms | $(awk "BEGIN {printf \"%.1fx\", $mx / $mf}") |
| cached plan | ${mc} ms | ${mx} ms | $(awk "BEGIN {printf \"%.1fx\", $mx / $mc}") |

first: ${first[*]} ms; cached: ${cached[*]} ms; crane: ${crane[*]} ms
EOT
