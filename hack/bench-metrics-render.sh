#!/usr/bin/env bash
# Render time of the operator's /metrics text, side by side: src/operator/metrics.rs (and
# metrics/encode.rs, if any) of a BEFORE git ref against the working tree's, built together in a
# scratch crate (release) with a registry of 4 cluster_version series, 50 ClusterOperators of 4
# conditions and 3 histograms. Never a test.
#
#   hack/bench-metrics-render.sh BEFORE_REF      e.g. 3a8991c (the hand-written renderer)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REF=${1:?usage: hack/bench-metrics-render.sh BEFORE_REF}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/src/old" "$W/src/new"
cat >"$W/Cargo.toml" <<'TOML'
[package]
name = "metrics-render"
version = "0.1.0"
edition = "2024"
[dependencies]
serde_json = { version = "1.0", features = ["preserve_order"] }
prometheus-client = "0.26"
TOML
# Each side as a module: its unit tests left out, its submodule (if any) beside it.
side() { # side NAME SOURCE_OF_METRICS_RS SOURCE_OF_ENCODE_RS_OR_EMPTY
  sed 's/^#\[cfg(test)\]//; s/^mod tests;//; s/^mod encode;/#[path = "'"$1"'\/encode.rs"]\nmod encode;/' \
    <"$2" >"$W/src/$1.rs"
  if [[ -n $3 ]]; then cp "$3" "$W/src/$1/encode.rs"; fi
}
git show "$REF:src/operator/metrics.rs" >"$W/old-metrics.rs"
old_encode=
if git cat-file -e "$REF:src/operator/metrics/encode.rs" 2>/dev/null; then
  git show "$REF:src/operator/metrics/encode.rs" >"$W/old-encode.rs"
  old_encode=$W/old-encode.rs
fi
side old "$W/old-metrics.rs" "$old_encode"
new_encode=
[[ -f src/operator/metrics/encode.rs ]] && new_encode=src/operator/metrics/encode.rs
side new src/operator/metrics.rs "$new_encode"
cp hack/tools/metrics-render/main.rs "$W/src/main.rs"
(cd "$W" && CARGO_TARGET_DIR="$W/target" cargo run --quiet --release)
