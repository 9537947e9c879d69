#!/usr/bin/env bash
# Builds the test control plane (kube-apiserver, kube-controller-manager, kubectl, etcd) from
# the Go modules under hack/tools/ into a cache directory keyed by the module files and the Go
# version. A warm cache makes this a no-op. The last line printed is the bin directory.
# The registry tools of the release-image tests (crane, the distribution registry, htpasswd)
# come from hack/tools/registry and are built into the same bin directory, checked by their
# own key (bin/.registry-key), so they never invalidate the plane binaries. So are the reference
# programs gotemplate (hack/tools/gotemplate, Go's text/template as the CVO renders manifests;
# tests/it/template_go.rs) and cvodecode (hack/tools/cvodecode, library-go's manifest decoder;
# tests/it/load_decoder_differential.rs), each with its own key (bin/.<name>-key).
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

# Builds the reference program hack/tools/$2 into $1 unless its .$2-key matches: gotemplate
# (Go's text/template, standard library only: seconds) and cvodecode (library-go's manifest
# decoder, from the Go module proxy: about a minute cold).
go_tool() {
  local dir=$1 name=$2 gkey
  gkey=$({
    find "$ROOT/hack/tools/$name" -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) -print0 | sort -z | xargs -0 cat
    go version
  } | sha256sum | cut -c1-16)
  if [[ -x $dir/$name && $(cat "$dir/.$name-key" 2>/dev/null) == "$gkey" ]]; then
    return 0
  fi
  echo "build-testplane: building $name (hack/tools/$name)" >&2
  (cd "$ROOT/hack/tools/$name" && go build -trimpath -o "$dir/$name.new" .) >&2
  mv "$dir/$name.new" "$dir/$name"
  echo "$gkey" >"$dir/.$name-key"
}
go_tools() {
  go_tool "$1" gotemplate
  go_tool "$1" cvodecode
}

source "$ROOT/hack/build-node-tools.sh"

if ((ready)); then
  registry_tools "$bin"
  go_tools "$bin"
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
go_tools "$tmp"
echo "build-testplane: built in $((SECONDS - start))s" >&2
rm -rf "$bin"
mv "$tmp" "$bin"
echo "$bin"
if ((NODES)); then node_tools; fi
