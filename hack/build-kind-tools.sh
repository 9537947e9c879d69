# shellcheck shell=bash
# Sourced by hack/build-kind-image.sh: builds what a kind node needs beyond the test plane's and
# the node plane's binaries into $CACHE/kind-<key>/bin and prints that directory. Needs ROOT,
# CACHE and K8S_VERSION. Every module is under hack/tools/kind/; their versions are the ones
# kubeadm v1.37.2 lists (etcd 3.7.0, CoreDNS v1.14.6) or the node plane's (containerd).
#
#   kind                             sigs.k8s.io/kind (the CLI, and its node base files)
#   kubeadm, kube-proxy              hack/tools/kind/kube (the node plane's kube module + tools)
#   ctr                              hack/tools/kind/containerd (`kind load` imports with it)
#   crictl                           hack/tools/kind/crictl (kubeadm's preflight needs it)
#   etcd, coredns                    hack/tools/kind/{etcd,coredns}: the images kubeadm runs
#                                    (CoreDNS with the plugins a kind Corefile uses only)
#   local-path-provisioner           hack/tools/kind/lpp: kind's default StorageClass
#
# The Kubernetes packages are built with the node plane's flags, so the Go build cache the
# plane and node builds left makes kubeadm and kube-proxy mostly a link.

# The build flags below are part of the key: change KIND_BUILD_REV when they change.
KIND_BUILD_REV=1

kind_tools_key() {
  {
    cat "$ROOT"/hack/tools/kind/*/go.{mod,sum} 2>/dev/null
    go version
    echo "$K8S_VERSION $KIND_BUILD_REV"
  } | sha256sum | cut -c1-16
}

# kind_build OUT MODULE_DIR PACKAGE [go build flags...]: one binary, skipped when present.
kind_build() {
  local out=$1 mod=$2 pkg=$3 s=$SECONDS
  shift 3
  [[ -x $out ]] && return 0
  echo "build-kind: building $(basename "$out") ($pkg)" >&2
  (cd "$ROOT/hack/tools/kind/$mod" && CGO_ENABLED=0 go build -trimpath "$@" -o "$out.new" "$pkg") >&2
  mv "$out.new" "$out"
  echo "build-kind: $(basename "$out") took $((SECONDS - s))s" >&2
}

kind_tools() {
  local key kbin tmp start minor ld p t ready=1
  key=$(kind_tools_key)
  kbin=$CACHE/kind-$key/bin
  local tools=(kind kubeadm kube-proxy ctr crictl etcd coredns local-path-provisioner)
  for t in "${tools[@]}"; do [[ -x $kbin/$t ]] || ready=0; done
  if ((ready)); then
    echo "build-kind: kind tools cache hit ($kbin)" >&2
    echo "$kbin"
    return 0
  fi
  tmp=$CACHE/kind-$key/bin.partial
  mkdir -p "$tmp"
  echo "build-kind: building the kind tools into $CACHE/kind-$key (cold: about 12 min on 2 cores)" >&2
  start=$SECONDS
  minor=${K8S_VERSION#v1.}
  minor=${minor%%.*}
  ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  kind_build "$tmp/kind" kind sigs.k8s.io/kind -ldflags "-s -w"
  kind_build "$tmp/kubeadm" kube k8s.io/kubernetes/cmd/kubeadm -pgo=off -ldflags "$ld"
  kind_build "$tmp/kube-proxy" kube k8s.io/kubernetes/cmd/kube-proxy -pgo=off -ldflags "$ld"
  kind_build "$tmp/ctr" containerd github.com/containerd/containerd/v2/cmd/ctr -tags urfave_cli_no_docs -ldflags "-s -w"
  kind_build "$tmp/crictl" crictl sigs.k8s.io/cri-tools/cmd/crictl \
    -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=v1.37.0"
  kind_build "$tmp/etcd" etcd go.etcd.io/etcd/server/v3 -ldflags "-s -w"
  kind_build "$tmp/local-path-provisioner" lpp github.com/rancher/local-path-provisioner -ldflags "-s -w"
  kind_build "$tmp/coredns" coredns . -ldflags "-s -w"
  "$tmp/kind" version >&2
  "$tmp/kubeadm" version -o short >&2
  "$tmp/etcd" --version | sed -n 1p >&2
  echo "build-kind: kind tools built in $((SECONDS - start))s" >&2
  rm -rf "$kbin"
  mv "$tmp" "$kbin"
  echo "$kbin"
}

# The source of the kind module (its images/base/files and default storage manifest), from the
# module cache.
kind_source() {
  (cd "$ROOT/hack/tools/kind/kind" && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
}
