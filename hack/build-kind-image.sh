#!/usr/bin/env bash
# Builds the kind node image minicvo.local/kind-node:v1.37.2 with no internet: a node that
# `kind create cluster --image minicvo.local/kind-node:v1.37.2` starts with no config, on
# machines like ours (cgroup v1, no CAP_SYS_RESOURCE) as on any other. The last line printed is
# the image name. Needs a Docker daemon (DOCKER_HOST; hack/docker.sh start gives one), except
# with --prepare, which builds the binaries and the root file system only (hack/test.sh runs
# that while the Rust tests run).
#
# What goes in, following kind's node image contract (kind v0.33.0: images/base and
# pkg/build/nodeimage), none of it from Docker Hub or registry.k8s.io:
#   - a Debian bookworm root file system made with mmdebstrap from the Debian mirror (the
#     packages of kind's base image: systemd, iptables, conntrack, mount tools, ...)
#   - kind's base files from the kind module (entrypoint, systemd units, sysctls, /kind/bin)
#   - containerd, its shim, runc and the CNI plugins of the node plane; ctr, crictl, kubeadm,
#     kubelet, kubectl; /kind/version
#   - containerd's config: kind's, with restrict_oom_score_adj = true (runc cannot lower
#     oom_score_adj without CAP_SYS_RESOURCE), the pause image kubeadm lists as sandbox image,
#     and no fuse-overlayfs snapshotter (not built)
#   - the kubelet flag --fail-cgroupv1=false in /etc/default/kubelet (kubelet 1.37 refuses
#     cgroup v1 otherwise)
#   - every image kubeadm lists for v1.37.2 (`kubeadm config images list`), under those exact
#     names, plus kind's local-path provisioner and helper and our pod network
#     (hack/kind/default-cni.yaml, in place of kindnet), packed with crane and preloaded into
#     the node's containerd as kind does (pinned, not unpacked)
#
# The binaries come from hack/build-testplane.sh --nodes (plane and node tools) and
# hack/build-kind-tools.sh (kind, kubeadm, kube-proxy, ctr, crictl, etcd 3.7.0, CoreDNS,
# local-path-provisioner), each cached by its own key. The image is cached too: its key covers
# every input (binary cache keys, the root file system's package list, the files under
# hack/kind/, this script); a daemon that has the image with that key, or a saved image under
# $CACHE/kind-node-<key>/, makes a second build a cache hit.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
K8S_VERSION=v1.37.2
IMAGE=minicvo.local/kind-node:$K8S_VERSION
export GOTOOLCHAIN=${GOTOOLCHAIN:-local} GOFLAGS=${GOFLAGS:--modcacherw}
CACHE=${TESTPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/minicvo-testplane}
say() { echo "build-kind: $*" >&2; }
die() {
  say "$*"
  exit 1
}

PREPARE=0
case ${1:-} in
  --prepare) PREPARE=1 ;;
  "") ;;
  *) die "usage: hack/build-kind-image.sh [--prepare]   (--prepare: the binaries and the root file system only, no Docker needed)" ;;
esac
if ((!PREPARE)); then
  command -v docker >/dev/null || die "docker is not installed; hack/docker.sh start installs and starts one"
  docker info >/dev/null 2>&1 || die "no Docker daemon answers (DOCKER_HOST=${DOCKER_HOST:-unset}); hint: eval \"\$(hack/docker.sh start)\""
fi

t0=$SECONDS
bins=$(bash hack/build-testplane.sh --nodes | tail -n 2)
PLANE_BIN=$(sed -n 1p <<<"$bins")
NODE_BIN=$(sed -n 2p <<<"$bins")
# shellcheck source=hack/build-kind-tools.sh
source hack/build-kind-tools.sh
KIND_BIN=$(kind_tools | tail -n 1)
KIND_SRC=$(kind_source)
CRANE=$PLANE_BIN/crane

# ---- the Debian root file system ----------------------------------------------------------
SUITE=bookworm
PKGS=systemd,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,e2fsprogs,bash,ca-certificates,curl,jq,procps,socat,ebtables,findutils,less
ROOTFS_REV=1
rkey=$(echo "$SUITE $PKGS $ROOTFS_REV" | sha256sum | cut -c1-16)
ROOTFS=$CACHE/kind-rootfs-$rkey/rootfs.tar
if [[ ! -f $ROOTFS ]]; then
  if ! command -v mmdebstrap >/dev/null; then
    ((EUID == 0)) || die "mmdebstrap is not installed; hint: apt-get install mmdebstrap (as root)"
    say "installing mmdebstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mmdebstrap >&2 ||
      { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mmdebstrap >&2; }
  fi
  say "building the Debian $SUITE root file system (mmdebstrap, about 2 min)"
  s=$SECONDS
  mkdir -p "${ROOTFS%/*}"
  mmdebstrap --variant=minbase --mode=root --include="$PKGS" --aptopt='Acquire::Retries "3"' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    "$SUITE" "${ROOTFS%.tar}.partial.tar" \
    "deb http://deb.debian.org/debian $SUITE main" \
    "deb http://deb.debian.org/debian $SUITE-updates main" \
    "deb http://deb.debian.org/debian-security $SUITE-security main" >&2
  mv "${ROOTFS%.tar}.partial.tar" "$ROOTFS"
  say "root file system built in $((SECONDS - s))s"
fi

if ((PREPARE)); then
  say "binaries and root file system ready in $((SECONDS - t0))s"
  exit 0
fi

# ---- the cache key of the image ----------------------------------------------------------
key=$({
  echo "$PLANE_BIN $NODE_BIN $KIND_BIN $rkey $K8S_VERSION"
  cat "${BASH_SOURCE[0]}" hack/kind/*
} | sha256sum | cut -c1-16)
have=$(docker image inspect "$IMAGE" --format '{{index .Config.Labels "minicvo.kind-node.key"}}' 2>/dev/null || true)
if [[ $have == "$key" ]]; then
  say "node image cache hit ($IMAGE, key $key)"
  echo "$IMAGE"
  exit 0
fi
SAVED=$CACHE/kind-node-$key/node.tar
if [[ -f $SAVED ]]; then
  say "node image cache hit ($SAVED); loading it"
  docker load -i "$SAVED" >&2
  echo "$IMAGE"
  exit 0
fi
say "building $IMAGE (key $key)"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/minicvo-kind-image.XXXXXX")
REG_PID=
BUILD_CTR=
cleanup() {
  local rc=$?
  if ((rc != 0)) && [[ -s $WORK/crane.log ]]; then
    say "crane's log ends:"
    tail -n 5 "$WORK/crane.log" >&2
  fi
  [[ -n $REG_PID ]] && { kill "$REG_PID" 2>/dev/null || true; wait "$REG_PID" 2>/dev/null || true; }
  [[ -n $BUILD_CTR ]] && { docker rm -f "$BUILD_CTR" >/dev/null 2>&1 || true; }
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT

# ---- the images the node preloads, packed with crane ------------------------------------
s=$SECONDS
# shellcheck source=hack/lib/crane-registry.sh
source hack/lib/crane-registry.sh
start_crane_registry "$CRANE" "$WORK/registry"
mkdir -p "$WORK/images" "$WORK/layers"
"$CRANE" append --insecure -f "$ROOTFS" -t "$REG/base/debian:$SUITE" >/dev/null 2>>"$WORK/crane.log"

# layer NAME SRC:DEST...: a tar of each SRC at DEST (mode 0755) plus /tmp, owned by root.
layer() {
  local name=$1 d=$WORK/layers/$1 m
  shift
  mkdir -p "$d/tmp"
  chmod 1777 "$d/tmp"
  for m in "$@"; do install -D -m 0755 "${m%%:*}" "$d/${m#*:}"; done
  tar -C "$d" --owner=0 --group=0 --numeric-owner --sort=name --mtime=@0 -cf "$d.tar" .
}
# pack NAME REF ENTRYPOINT [debian]: NAME's layer as image REF (on the Debian root file system
# with "debian"), saved to $WORK/images/NAME.tar.
pack() {
  local name=$1 ref=$2 ep=$3 base=()
  [[ ${4:-} == debian ]] && base=(-b "$REG/base/debian:$SUITE")
  "$CRANE" append --insecure "${base[@]}" -f "$WORK/layers/$name.tar" -t "$REG/build/$name:1" >/dev/null 2>>"$WORK/crane.log"
  "$CRANE" mutate --insecure --entrypoint "$ep" \
    --env PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
    --set-platform linux/amd64 "$REG/build/$name:1" -t "$ref" -o "$WORK/images/$name.tar" >/dev/null 2>>"$WORK/crane.log"
}
# The exact names kubeadm pulls.
declare -A WANT
while read -r ref; do
  n=${ref##*/}
  WANT[${n%%:*}]=$ref
done < <("$KIND_BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null)
for n in kube-apiserver kube-controller-manager kube-scheduler kube-proxy pause etcd coredns; do
  [[ -n ${WANT[$n]:-} ]] || die "kubeadm config images list names no $n image"
done
layer kube-apiserver "$PLANE_BIN/kube-apiserver:usr/local/bin/kube-apiserver"
pack kube-apiserver "${WANT[kube-apiserver]}" /usr/local/bin/kube-apiserver
layer kube-controller-manager "$PLANE_BIN/kube-controller-manager:usr/local/bin/kube-controller-manager"
pack kube-controller-manager "${WANT[kube-controller-manager]}" /usr/local/bin/kube-controller-manager
layer kube-scheduler "$NODE_BIN/kube-scheduler:usr/local/bin/kube-scheduler"
pack kube-scheduler "${WANT[kube-scheduler]}" /usr/local/bin/kube-scheduler
# kube-proxy runs iptables-restore, nft and conntrack: on Debian.
layer kube-proxy "$KIND_BIN/kube-proxy:usr/local/bin/kube-proxy"
pack kube-proxy "${WANT[kube-proxy]}" /usr/local/bin/kube-proxy debian
layer etcd "$KIND_BIN/etcd:usr/local/bin/etcd"
pack etcd "${WANT[etcd]}" /usr/local/bin/etcd
layer coredns "$KIND_BIN/coredns:coredns"
pack coredns "${WANT[coredns]}" /coredns
layer pause "$NODE_BIN/pause:pause"
pack pause "${WANT[pause]}" /pause
# kind's default StorageClass: the provisioner and the helper its pods run (sh, mkdir, rm).
read -r LPP_IMAGE LPP_HELPER < <(python3 - "$KIND_SRC/pkg/build/nodeimage/const_storage.go" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
print(re.search(r'storageProvisionerImage = "([^"]+)"', src).group(1),
      re.search(r'storageHelperImage = "([^"]+)"', src).group(1))
PY
)
layer local-path-provisioner "$KIND_BIN/local-path-provisioner:usr/local/bin/local-path-provisioner"
pack local-path-provisioner "$LPP_IMAGE" /usr/local/bin/local-path-provisioner
layer local-path-helper
pack local-path-helper "$LPP_HELPER" /bin/sh debian
# The pod network's image: Debian (bash, curl, jq, ip) and its program.
layer kind-cni "hack/kind/cni-run.sh:etc/minicvo-kind-cni/run.sh"
pack kind-cni minicvo.local/kind-cni:1 /bin/bash debian
kill "$REG_PID" 2>/dev/null || true
wait "$REG_PID" 2>/dev/null || true
REG_PID=
say "images packed in $((SECONDS - s))s: $(ls "$WORK/images" | tr '\n' ' ')"

# ---- the node's files ---------------------------------------------------------------------
s=$SECONDS
CTX=$WORK/ctx
F=$CTX/files
mkdir -p "$F"
cp -r "$KIND_SRC/images/base/files/." "$F/"
chmod -R u+w "$F"
rm -f "$F/etc/systemd/system/containerd-fuse-overlayfs.service"
# containerd: kind's config with three settings changed (see the top of this file).
python3 - "$F/etc/containerd/config.toml" "${WANT[pause]}" <<'PY'
import re, sys
path, pause = sys.argv[1], sys.argv[2]
text = open(path).read()
text, n1 = re.subn(r'\[proxy_plugins\]\n(?:.*\n)*?(?=\n\[|\Z)', '', text, count=1)
text = re.sub(r'\[proxy_plugins\."fuse-overlayfs"\]\n(?:[ \t]+.*\n)*', '', text)
text, n2 = re.subn(r'restrict_oom_score_adj = false', 'restrict_oom_score_adj = true', text)
text, n3 = re.subn(r'sandbox_image = "[^"]*"', 'sandbox_image = "%s"' % pause, text)
if "fuse-overlayfs" in text or n2 != 1 or n3 != 1:
    sys.exit("kind's containerd config changed shape; update hack/build-kind-image.sh")
open(path, "w").write("# kind's containerd config, changed by minicvo's hack/build-kind-image.sh\n" + text)
PY
grep -q -- '--fail-cgroupv1' "$F/etc/default/kubelet" ||
  sed -i '1s/$/ --fail-cgroupv1=false/' "$F/etc/default/kubelet"
grep -q 'KUBELET_EXTRA_ARGS=.*--fail-cgroupv1=false' "$F/etc/default/kubelet" ||
  die "could not set --fail-cgroupv1=false in kind's /etc/default/kubelet"
mkdir -p "$F/kind/manifests" "$F/usr/local/bin" "$F/usr/local/sbin" "$F/opt/cni/bin" "$F/usr/bin"
cp hack/kind/default-cni.yaml "$F/kind/manifests/default-cni.yaml"
python3 - "$KIND_SRC/pkg/build/nodeimage/const_storage.go" "$F/kind/manifests/default-storage.yaml" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
consts = dict(re.findall(r'const (\w+) = "([^"]+)"', src))
body = re.search(r'const defaultStorageManifest = `(.*)\n`\n', src, re.S).group(1) + "\n"
body = re.sub(r'` \+ (\w+) \+ `', lambda m: consts[m.group(1)], body)
open(sys.argv[2], "w").write(body.lstrip("\n"))
PY
printf '%s' "$K8S_VERSION" >"$F/kind/version"
cp "$NODE_BIN/containerd" "$NODE_BIN/containerd-shim-runc-v2" "$KIND_BIN/ctr" "$KIND_BIN/crictl" "$F/usr/local/bin/"
cp "$NODE_BIN/runc" "$F/usr/local/sbin/runc"
cp "$NODE_BIN"/cni/* "$F/opt/cni/bin/"
cp "$KIND_BIN/kubeadm" "$NODE_BIN/kubelet" "$PLANE_BIN/kubectl" "$F/usr/bin/"
find "$F" -type d -exec chmod 0755 {} +
find "$F" -type f -exec chmod 0644 {} +
chmod 0755 "$F"/usr/local/bin/* "$F"/usr/local/sbin/* "$F"/kind/bin/* "$F"/opt/cni/bin/* "$F"/usr/bin/*

# ---- the node image: base, files, kind's setup, preloaded images -----------------------------
BASE=minicvo.local/kind-base:$SUITE-$rkey
docker image inspect "$BASE" >/dev/null 2>&1 || docker import "$ROOTFS" "$BASE" >/dev/null
cat >"$CTX/Dockerfile" <<EOF
FROM $BASE
COPY files/ /
RUN find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete \\
 && rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \\
      /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \\
      /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/* \\
 && echo ReadKMsg=no >> /etc/systemd/journald.conf \\
 && ln -sf /usr/lib/systemd/systemd /sbin/init \\
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \\
 && systemctl mask systemd-binfmt.service \\
 && mkdir -p /etc/kubernetes/manifests /etc/cni/net.d \\
 && ctr oci spec | jq '.hooks.createContainer += [{"path": "/kind/bin/mount-product-files.sh"}] | del(.process.rlimits)' \\
      > /etc/containerd/cri-base.json \\
 && kubeadm version -o short && kubelet --version && containerd --version
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
EOF
DOCKER_BUILDKIT=0 docker build --network none -q -t "$IMAGE-files" "$CTX" >/dev/null
BUILD_CTR=minicvo-kind-image-$$
docker run -d --name "$BUILD_CTR" --network none --entrypoint sleep --security-opt seccomp=unconfined \
  "$IMAGE-files" infinity >/dev/null
docker exec "$BUILD_CTR" bash -c 'containerd >/tmp/containerd.log 2>&1 &'
docker exec "$BUILD_CTR" bash -c 'for _ in $(seq 100); do ctr version >/dev/null 2>&1 && exit 0; sleep 0.1; done; cat /tmp/containerd.log; exit 1' >&2
for t in "$WORK"/images/*.tar; do
  docker exec -i "$BUILD_CTR" ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned \
    --all-platforms --no-unpack --digests - <"$t" >/dev/null
done
docker exec "$BUILD_CTR" ctr --namespace=k8s.io images list -q | grep -v -e '^sha256:' -e '^import-' | sed 's/^/build-kind: preloaded /' >&2
docker exec "$BUILD_CTR" bash -c 'kill $(pidof containerd); for _ in $(seq 100); do pidof containerd >/dev/null || break; sleep 0.1; done; rm -rf /tmp/* /run/containerd'
docker commit \
  --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
  --change 'ENV HTTP_PROXY="" HTTPS_PROXY="" NO_PROXY=""' \
  --change "LABEL minicvo.kind-node.key=$key" \
  "$BUILD_CTR" "$IMAGE" >/dev/null
docker rm -f "$BUILD_CTR" >/dev/null
BUILD_CTR=
docker rmi "$IMAGE-files" >/dev/null 2>&1 || true
say "node image built in $((SECONDS - s))s; saving it to $SAVED"
mkdir -p "${SAVED%/*}"
docker save -o "$SAVED.partial" "$IMAGE"
mv "$SAVED.partial" "$SAVED"
# Older saved images are of other keys: keep only this one.
for d in "$CACHE"/kind-node-*; do [[ $d == "${SAVED%/*}" ]] || rm -rf "$d"; done
say "$IMAGE ready in $((SECONDS - t0))s"
echo "$IMAGE"
