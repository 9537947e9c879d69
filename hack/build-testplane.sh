#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver, kube-controller-manager, kubectl, etcd) from
# the Go modules under hack/tools/ into a cache directory keyed by the module files and the Go
# version. A warm cache makes this a no-op. The last line printed is the bin directory.
# The registry tools of the release-image tests (crane, the distribution registry, htpasswd)
# come from hack/tools/registry and are built into the same bin directory, checked by their
# own key (bin/.registry-key), so they never invalidate the plane binaries. So is gotemplate
# (hack/tools/gotemplate, Go's text/template as the CVO renders manifests; bin/.gotemplate-key),
# which tests/it/template_go.rs compares minicvo's renderer with.
#
#   hack/build-testplane.sh            the plane; last line: its bin dir
#   hack/build-testplane.sh --nodes    also the node tools; the last two lines: the plane's bin
#                                      dir, then the node bin dir
#
# The node tools (hack/tools/node/*, hack/tools/standin) are kubelet and kube-scheduler,
# containerd and its runc shim, runc, the CNI plugins (bridge, host-local, loopback, portmap)
# and the stand-in programs (pause, standin-operator). They go into their own cache directory
# (node-<key>/bin), keyed by their own module files, so neither build invalidates the other.
# runc needs cgo and libseccomp: when the library is missing the script installs
# libseccomp-dev (and gcc, pkg-config) with apt-get, as root.
set -euo pipefail
NODES=0
case ${1:-} in
--nodes) NODES=1 ;;
"") ;;
*)
  echo "usage: hack/build-testplane.sh [--nodes]" >&2
  exit 2
  ;;
esac
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
K8S_VERSION=v1.37.2 # must match hack/tools/testplane/go.mod
export GOTOOLCHAIN=${GOTOOLCHAIN:-local} CGO_ENABLED=0 GOFLAGS=${GOFLAGS:--modcacherw}
CACHE=${TESTPLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/minicvo-testplane}

command -v go >/dev/null || { echo "build-testplane: go is not installed" >&2; exit 1; }
key=$({
  cat "$ROOT"/hack/tools/testplane/go.{mod,sum} "$ROOT"/hack/tools/etcd/go.{mod,sum}
  go version
  echo "$K8S_VERSION"
} | sha256sum | cut -c1-16)
bin=$CACHE/$key/bin
tools=(kube-apiserver kube-controller-manager kubectl etcd)
ready=1
for t in "${tools[@]}"; do [[ -x $bin/$t ]] || ready=0; done
# Builds crane, registry and htpasswd into $1 unless its .registry-key matches.
registry_tools() {
  local dir=$1 rkey
  rkey=$({
    cat "$ROOT"/hack/tools/registry/go.{mod,sum} "$ROOT"/hack/tools/registry/htpasswd/main.go
    go version
  } | sha256sum | cut -c1-16)
  if [[ -x $dir/crane && -x $dir/registry && -x $dir/htpasswd && $(cat "$dir/.registry-key" 2>/dev/null) == "$rkey" ]]; then
    return 0
  fi
  echo "build-testplane: building crane, registry and htpasswd (hack/tools/registry)" >&2
  (cd "$ROOT/hack/tools/registry" &&
    go build -trimpath -ldflags "-s -w" -o "$dir/crane.new" github.com/google/go-containerregistry/cmd/crane &&
    go build -trimpath -ldflags "-s -w" -o "$dir/registry.new" github.com/distribution/distribution/v3/cmd/registry &&
    go build -trimpath -ldflags "-s -w" -o "$dir/htpasswd.new" ./htpasswd) >&2
  for t in crane registry htpasswd; do mv "$dir/$t.new" "$dir/$t"; done
  echo "$rkey" >"$dir/.registry-key"
}

# Builds gotemplate into $1 unless its .gotemplate-key matches (standard library only: seconds).
gotemplate_tool() {
  local dir=$1 gkey
  gkey=$({
    cat "$ROOT"/hack/tools/gotemplate/go.mod "$ROOT"/hack/tools/gotemplate/*.go "$ROOT"/hack/tools/gotemplate/payload/*.go
    go version
  } | sha256sum | cut -c1-16)
  if [[ -x $dir/gotemplate && $(cat "$dir/.gotemplate-key" 2>/dev/null) == "$gkey" ]]; then
    return 0
  fi
  echo "build-testplane: building gotemplate (hack/tools/gotemplate)" >&2
  (cd "$ROOT/hack/tools/gotemplate" && go build -trimpath -o "$dir/gotemplate.new" .) >&2
  mv "$dir/gotemplate.new" "$dir/gotemplate"
  echo "$gkey" >"$dir/.gotemplate-key"
}

source "$ROOT/hack/build-node-tools.sh"

if ((ready)); then
  registry_tools "$bin"
  gotemplate_tool "$bin"
  echo "build-testplane: cache hit ($bin)" >&2
  echo "$bin"
  if ((NODES)); then node_tools; fi
  exit 0
fi

tmp=$CACHE/$key/bin.partial
mkdir -p "$tmp"
echo "build-testplane: cache miss, building into $CACHE/$key (cold: about 10 min on 2 cores)" >&2
minor=${K8S_VERSION#v1.}
minor=${minor%%.*}
ld="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
done
start=$SECONDS
for t in kube-apiserver kube-controller-manager kubectl; do
  [[ -x $tmp/$t ]] && continue
  echo "build-testplane: building $t" >&2
  (cd "$ROOT/hack/tools/testplane" && go build -trimpath -pgo=off -ldflags "$ld" \
    -o "$tmp/$t.new" "k8s.io/kubernetes/cmd/$t") >&2
  mv "$tmp/$t.new" "$tmp/$t"
done
if [[ ! -x $tmp/etcd ]]; then
  echo "build-testplane: building etcd" >&2
  (cd "$ROOT/hack/tools/etcd" && go build -trimpath -ldflags "-s -w" \
    -o "$tmp/etcd.new" go.etcd.io/etcd/server/v3) >&2
  mv "$tmp/etcd.new" "$tmp/etcd"
fi
"$tmp/kube-apiserver" --version >&2
"$tmp/etcd" --version >&2
registry_tools "$tmp"
gotemplate_tool "$tmp"
echo "build-testplane: built in $((SECONDS - start))s" >&2
rm -rf "$bin"
mv "$tmp" "$bin"
echo "$bin"
if ((NODES)); then node_tools; fi
