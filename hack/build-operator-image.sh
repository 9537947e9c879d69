#!/usr/bin/env bash
# The image deploy/ runs (minicvo:dev), without Docker Hub, gcr.io or a Docker build: a static
# minicvo (glibc, crt-static) packed with crane as deploy/Dockerfile describes it, then checked
# against that Dockerfile (entrypoint, command, user, paths) so the two cannot drift apart.
#
#   hack/build-operator-image.sh OUT_DIR     writes OUT_DIR/minicvo-operator.tar (a docker
#                                            archive tagged minicvo:dev, for `docker load` or
#                                            `kind load image-archive`); the last line printed
#                                            is the static binary, which the kind scenarios
#                                            also run on the host
#   hack/build-operator-image.sh --binary    only the static binary; the last line is its path
#
# The layout is deploy/Dockerfile's on distroless/static:nonroot: /minicvo; /payloads/4.13.0
# (payload/old) and /payloads/4.14.0 (payload/new); /etc/passwd and /etc/group with root and
# nonroot (65532); /home/nonroot as the working directory; /tmp; the CA bundle of this host at
# /etc/ssl/certs/ca-certificates.crt; user 65532:65532; ENTRYPOINT ["/minicvo"] and CMD
# ["operator", "--payloads=/payloads", "--release=4.13.0"]. The binary is static (glibc's
# getaddrinfo resolves through the dns and files sources built into glibc 2.36).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=${1:?usage: hack/build-operator-image.sh OUT_DIR|--binary}
say() { echo "build-operator-image: $*" >&2; }
die() {
  say "$*"
  exit 1
}
TAG=minicvo:dev
ENTRYPOINT='["/minicvo"]'
CMD='["operator","--payloads=/payloads","--release=4.13.0"]'
USER=65532:65532
WORKDIR=/home/nonroot

PLANE_BIN=$(bash hack/build-testplane.sh | tail -n 1)
CRANE=$PLANE_BIN/crane

# The static binary, in its own target directory: the host build keeps its flags.
s=$SECONDS
host=$(rustc -vV | sed -n 's/^host: //p')
# Without the release profile's line tables, stripped: less to compile, and a smaller image
# to load into every kind node (a panic still names its message and thread).
RUSTFLAGS="-C target-feature=+crt-static" CARGO_PROFILE_RELEASE_DEBUG=false \
  CARGO_PROFILE_RELEASE_STRIP=true cargo build --release --locked --bin minicvo \
  --target "$host" --target-dir target/static >&2
BIN=$ROOT/target/static/$host/release/minicvo
if readelf -lW "$BIN" | grep -q 'program interpreter'; then die "$BIN is not a static executable"; fi
say "static binary built in $((SECONDS - s))s ($(du -h "$BIN" | cut -f1))"
if [[ $OUT == --binary ]]; then
  echo "$BIN"
  exit 0
fi

mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/minicvo-operator-image.XXXXXX")
REG_PID=
cleanup() {
  local rc=$?
  [[ -n $REG_PID ]] && { kill "$REG_PID" 2>/dev/null || true; wait "$REG_PID" 2>/dev/null || true; }
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT

R=$WORK/root
mkdir -p "$R/payloads" "$R/etc/ssl/certs" "$R/tmp" "$R$WORKDIR"
objcopy --strip-debug "$BIN" "$R/minicvo"
cp -r payload/old "$R/payloads/4.13.0"
cp -r payload/new "$R/payloads/4.14.0"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$R/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' >"$R/etc/group"
[[ -f /etc/ssl/certs/ca-certificates.crt ]] && cp /etc/ssl/certs/ca-certificates.crt "$R/etc/ssl/certs/"
chmod 1777 "$R/tmp"
tar -C "$R" --owner=0 --group=0 --numeric-owner --sort=name --mtime=@0 -cf "$WORK/layer.tar" .
# The home directory belongs to nonroot, as in distroless.
python3 - "$WORK/layer.tar" <<'PY'
import io, sys, tarfile
src = sys.argv[1]
with tarfile.open(src) as t:
    members = [(m, t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()]
with tarfile.open(src, "w", format=tarfile.PAX_FORMAT) as t:
    for m, data in members:
        if m.name.lstrip("./").startswith("home/nonroot"):
            m.uid = m.gid = 65532
        t.addfile(m, None if data is None else io.BytesIO(data))
PY

# shellcheck source=hack/lib/crane-registry.sh
source hack/lib/crane-registry.sh
start_crane_registry "$CRANE" "$WORK/registry"
ref=$REG/minicvo:dev
"$CRANE" append --insecure -f "$WORK/layer.tar" -t "$ref" >/dev/null 2>"$WORK/crane.log" || { cat "$WORK/crane.log" >&2; exit 1; }
ep=$(python3 -c 'import json,sys; print(",".join(json.loads(sys.argv[1])))' "$ENTRYPOINT")
cmd=$(python3 -c 'import json,sys; print(",".join(json.loads(sys.argv[1])))' "$CMD")
"$CRANE" mutate --insecure --entrypoint "$ep" --cmd "$cmd" --user "$USER" --workdir "$WORKDIR" \
  --env PATH=/usr/local/bin:/usr/bin:/bin --set-platform linux/amd64 "$ref" \
  -t "$TAG" -o "$OUT/minicvo-operator.tar" >/dev/null 2>"$WORK/crane.log" || { cat "$WORK/crane.log" >&2; exit 1; }

# The same image as deploy/Dockerfile describes: its last stage's ENTRYPOINT, CMD and USER, and
# the paths it copies to, against the archive's config and files.
python3 - deploy/Dockerfile "$OUT/minicvo-operator.tar" <<'PY'
import json, shlex, sys, tarfile
dockerfile, archive = sys.argv[1], sys.argv[2]
lines, cur = [], ""
for raw in open(dockerfile):
    line = raw.rstrip("\n")
    if not cur and (not line.strip() or line.lstrip().startswith("#")):
        continue
    cur += line[:-1] + " " if line.endswith("\\") else line
    if not line.endswith("\\"):
        lines.append(cur.strip()); cur = ""
stage = []
for l in lines:
    if l.upper().startswith("FROM "):
        stage = []
    stage.append(l)
want = {"copies": []}
for l in stage:
    word, _, rest = l.partition(" ")
    word = word.upper()
    if word in ("ENTRYPOINT", "CMD"):
        want[word] = json.loads(rest)
    elif word == "USER":
        want["USER"] = rest.strip()
    elif word == "COPY":
        args = [a for a in shlex.split(rest) if not a.startswith("--")]
        want["copies"].append(args[-1])
with tarfile.open(archive) as t:
    manifest = json.load(t.extractfile("manifest.json"))[0]
    config = json.load(t.extractfile(manifest["Config"]))["config"]
    names = set()
    for layer in manifest["Layers"]:
        with tarfile.open(fileobj=t.extractfile(layer)) as lt:
            names.update("/" + m.name.lstrip("./") for m in lt.getmembers())
errors = []
for key, got in (("ENTRYPOINT", config.get("Entrypoint")), ("CMD", config.get("Cmd")), ("USER", config.get("User"))):
    if want.get(key) != got:
        errors.append(f"{key}: deploy/Dockerfile has {want.get(key)!r}, the image {got!r}")
for path in want["copies"]:
    if path.rstrip("/") not in names:
        errors.append(f"deploy/Dockerfile copies to {path}, the image has no such path")
for e in errors:
    print("build-operator-image: " + e, file=sys.stderr)
if errors:
    sys.exit(1)
print(f"build-operator-image: same as deploy/Dockerfile: ENTRYPOINT {want['ENTRYPOINT']}, CMD {want['CMD']}, "
      f"USER {want['USER']}, paths {', '.join(want['copies'])}", file=sys.stderr)
PY
say "image $TAG in $OUT/minicvo-operator.tar ($(du -h "$OUT/minicvo-operator.tar" | cut -f1))"
echo "$BIN"
