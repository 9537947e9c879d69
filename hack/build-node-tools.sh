# shellcheck shell=bash
# Sourced by hack/build-testplane.sh (--nodes): builds the node tools into
# $CACHE/node-<key>/bin and prints that directory. Needs ROOT, CACHE and K8S_VERSION.
#
#   kubelet, kube-scheduler          hack/tools/node/kube (k8s.io/kubernetes, tool lines)
#   containerd, containerd-shim-runc-v2
#                                    hack/tools/node/containerd
#   runc                             hack/tools/node/runc (cgo, libseccomp)
#   bridge, host-local, loopback, portmap
#                                    hack/tools/node/cni (the CNI plugins, in bin/cni/)
#   pause, standin-operator          hack/tools/standin (our own, static)

# The build flags below are part of the key: change NODE_BUILD_REV when they change.
NODE_BUILD_REV=1

node_key() {
  {
    cat "$ROOT"/hack/tools/node/*/go.{mod,sum} 2>/dev/null
    find "$ROOT/hack/tools/standin" -type f \( -name '*.go' -o -name go.mod \) | LC_ALL=C sort | xargs cat
    go version
    echo "$K8S_VERSION $NODE_BUILD_REV"
  } | sha256sum | cut -c1-16
}

# runc links libseccomp through cgo. Install the Debian packages when missing, as a fresh
# machine or CI has them not.
ensure_seccomp() {
  if command -v gcc >/dev/null && command -v pkg-config >/dev/null && pkg-config --exists libseccomp; then
    return 0
  fi
  local pkgs=(libseccomp-dev pkg-config gcc libc6-dev)
  if ((EUID != 0)); then
    echo "build-testplane: runc needs ${pkgs[*]} (apt-get install, as root); hint: run as root or install them" >&2
    return 1
  fi
  command -v apt-get >/dev/null || {
    echo "build-testplane: runc needs libseccomp (headers), pkg-config and gcc; no apt-get here to install them" >&2
    return 1
  }
  echo "build-testplane: installing ${pkgs[*]} (for runc)" >&2
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >&2; then
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >&2
  fi
}

# node_build DIR OUT MODULE_DIR PACKAGE [go build flags...]: one binary, skipped when present.
node_build() {
  local out=$1 mod=$2 pkg=$3
  shift 3
  [[ -x $out ]] && return 0
  echo "build-testplane: building $(basename "$out") ($pkg)" >&2
  (cd "$ROOT/hack/tools/$mod" && go build -trimpath "$@" -o "$out.new" "$pkg") >&2
  mv "$out.new" "$out"
}

node_tools() {
  local key nbin tmp start minor ld p
  key=$(node_key)
  nbin=$CACHE/node-$key/bin
  local tools=(kubelet kube-scheduler containerd containerd-shim-runc-v2 runc pause standin-operator
    cni/bridge cni/host-local cni/loopback cni/portmap)
  local ready=1 t
  for t in "${tools[@]}"; do [[ -x $nbin/$t ]] || ready=0; done
  if ((ready)); then
    echo "build-testplane: node tools cache hit ($nbin)" >&2
    echo "$nbin"
    return 0
  fi
  tmp=$CACHE/node-$key/bin.partial
  mkdir -p "$tmp/cni"
  echo "build-testplane: building the node tools into $CACHE/node-$key (cold: about 10 min on 2 cores)" >&2
  start=$SECONDS
  ensure_seccomp
  # runc is the only cgo binary; the rest are static.
  CGO_ENABLED=1 node_build "$tmp/runc" node/runc github.com/opencontainers/runc \
    -tags "seccomp urfave_cli_no_docs" -ldflags "-s -w"
  (
    export CGO_ENABLED=0
    node_build "$tmp/containerd" node/containerd github.com/containerd/containerd/v2/cmd/containerd \
      -tags urfave_cli_no_docs -ldflags "-s -w"
    node_build "$tmp/containerd-shim-runc-v2" node/containerd \
      github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 -tags "urfave_cli_no_docs no_grpc" -ldflags "-s -w"
    for p in main/bridge ipam/host-local main/loopback meta/portmap; do
      node_build "$tmp/cni/${p#*/}" node/cni "github.com/containernetworking/plugins/plugins/$p" -ldflags "-s -w"
    done
    node_build "$tmp/pause" standin ./pause -ldflags "-s -w"
    node_build "$tmp/standin-operator" standin ./operator -ldflags "-s -w"
    minor=${K8S_VERSION#v1.}
    minor=${minor%%.*}
    ld="-s -w"
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    done
    node_build "$tmp/kube-scheduler" node/kube k8s.io/kubernetes/cmd/kube-scheduler -pgo=off -ldflags "$ld"
    node_build "$tmp/kubelet" node/kube k8s.io/kubernetes/cmd/kubelet -pgo=off -ldflags "$ld"
  )
  "$tmp/kubelet" --version >&2
  "$tmp/containerd" --version >&2
  # Not `| head -n 1`: under pipefail, runc dying of SIGPIPE would fail the build (exit 141).
  "$tmp/runc" --version | sed -n 1p >&2
  echo "build-testplane: node tools built in $((SECONDS - start))s" >&2
  rm -rf "$nbin"
  mv "$tmp" "$nbin"
  echo "$nbin"
}
