# shellcheck shell=bash
# Sourced by hack/testplane.sh: the node of a plane started with `--nodes 1` (or
# TESTPLANE_NODES=1). See hack/TESTPLANE.md, "A plane with a node".
#
# Started after the control plane, in this order: the image registry (crane registry serve),
# the images (pause, standin-operator; no Docker, see build_images), containerd, the kubelet
# (node `localhost`), kube-scheduler. Ready means: the Node is Ready and has no taint.
#
# Host-wide state is named per plane so that two planes never share it: the CNI bridge
# (mcvo<6 hex>), its network (minicvo-<same>), the pod subnet (10.244.<random>.0/24), the
# kubelet's ports. What the tools put outside the plane's directory — the bridge, CNI's cache
# (/var/lib/cni/results), /var/log/containers links, the cgroups runc makes — is removed by
# node_teardown, which also runs on the leftovers of a crashed plane at the next start.

# The processes of the node, in start order (stop goes in reverse, after node_drain).
NODE_COMPONENTS=(registry containerd kubelet kube-scheduler)

# node_free_octet: a /24 in 10.244.0.0/16 that no interface of this machine uses.
node_free_octet() {
  local o used
  used=$(ip -4 -o addr show)
  for _ in $(seq 50); do
    o=$((RANDOM % 200 + 20))
    [[ $used == *" 10.244.$o."* ]] || { echo "$o"; return 0; }
  done
  return 1
}

# node_prepare DIR: names, ports and config files of the node, in DIR/node/.
node_prepare() {
  local w=$1 n=$1/node id octet
  mkdir -p "$n"/{cni/net.d,cni/ipam,pod-logs,kubelet,registry,containerd/certs.d}
  id=$(openssl rand -hex 3)
  octet=$(node_free_octet) || { say "no free 10.244.x.0/24 for the pod network"; return 1; }
  {
    echo "NODE_BRIDGE=mcvo$id"
    echo "NODE_NETWORK=minicvo-$id"
    echo "NODE_SUBNET=10.244.$octet.0/24"
    echo "NODE_REGISTRY_PORT=$(free_port)"
    echo "NODE_KUBELET_PORT=$(free_port)"
    echo "NODE_HEALTHZ_PORT=$(free_port)"
  } >"$n/env"
  # shellcheck source=/dev/null
  source "$n/env"
  local reg=127.0.0.1:$NODE_REGISTRY_PORT
  cat >"$n/cni/net.d/10-minicvo.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "$NODE_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$NODE_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{ "subnet": "$NODE_SUBNET" }]],
        "routes": [{ "dst": "0.0.0.0/0" }],
        "dataDir": "$n/cni/ipam"
      }
    }
  ]
}
EOF
  mkdir -p "$n/containerd/certs.d/$reg"
  cat >"$n/containerd/certs.d/$reg/hosts.toml" <<EOF
server = "http://$reg"

[host."http://$reg"]
  capabilities = ["pull", "resolve"]
EOF
  # restrict_oom_score_adj: these machines lack CAP_SYS_RESOURCE, and runc fails to raise its
  # oom_score_adj without it. netns_mounts_under_state_dir keeps the pods' network namespaces
  # under the plane's directory instead of /var/run/netns.
  cat >"$n/containerd/config.toml" <<EOF
version = 3
root = "$n/containerd/root"
state = "$n/containerd/state"
temp = "$n/containerd/tmp"

[grpc]
  address = "$n/containerd/containerd.sock"

[ttrpc]
  address = "$n/containerd/containerd.sock.ttrpc"

[plugins.'io.containerd.internal.v1.opt']
  path = "$n/containerd/opt"

[plugins.'io.containerd.nri.v1.nri']
  disable = true

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"

  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$reg/minicvo/pause:1"

  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "$n/containerd/certs.d"

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true

  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$NODE_BIN/cni"]
    conf_dir = "$n/cni/net.d"

  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"

    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$NODE_BIN/runc"
        Root = "$n/runc"
        SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
EOF
  # failCgroupV1: false — kubelet 1.37 refuses cgroup v1 hosts otherwise. Anonymous access
  # with AlwaysAllow lets the API server reach the kubelet for logs and exec (test only).
  cat >"$n/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $NODE_KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $NODE_HEALTHZ_PORT
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://$n/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failCgroupV1: false
failSwapOn: false
podLogsDir: $n/pod-logs
serializeImagePulls: false
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
clusterDomain: cluster.local
shutdownGracePeriod: 0s
EOF
  sed 's/^current-context: .*/current-context: admin/' "$w/kubeconfig" >"$n/kubelet.kubeconfig"
  cp "$n/kubelet.kubeconfig" "$n/scheduler.kubeconfig"
  chmod 600 "$n/kubelet.kubeconfig" "$n/scheduler.kubeconfig"
}

# node_image DIR NAME PROGRAM: push an image holding only the static PROGRAM (at /PROGRAM, the
# entrypoint) to the plane's registry as minicvo/NAME:1. Built from an empty base with crane,
# so no Docker and no public registry.
node_image() {
  local n=$1/node name=$2 prog=$3 ref layer
  ref=127.0.0.1:$NODE_REGISTRY_PORT/minicvo/$name:1
  layer=$n/image-$name
  mkdir -p "$layer"
  install -m 0755 "$NODE_BIN/$prog" "$layer/$prog"
  tar -C "$layer" --owner=0 --group=0 --numeric-owner -cf "$layer.tar" "$prog"
  "$BIN/crane" append --insecure -f "$layer.tar" -t "$ref" >/dev/null 2>>"$n/images.log" || return 1
  "$BIN/crane" mutate --insecure --entrypoint "/$prog" --set-platform linux/amd64 "$ref" \
    >/dev/null 2>>"$n/images.log" || return 1
  rm -rf "$layer" "$layer.tar"
}

# node_api DIR PATH: GET PATH from the API server as admin (JSON on stdout).
node_api() {
  local w=$1
  curl -fsS --cacert "$w/pki/ca.crt" -H "Authorization: Bearer $(<"$w/admin.token")" \
    "$(sed -n 's/^ *server: //p' "$w/kubeconfig")$2"
}

# node_ready DIR: the Node is Ready and carries no taint.
node_ready() {
  node_api "$1" /api/v1/nodes/localhost |
    jq -e '(.status.conditions[] | select(.type == "Ready") | .status == "True") and ((.spec.taints // []) | length == 0)'
}

# node_start DIR DEADLINE: everything of the node; the control plane is already running.
node_start() {
  local w=$1 deadline=$2 n=$1/node
  node_prepare "$w" || return 1
  launch_program "$w" registry "$BIN/crane" registry serve --address "127.0.0.1:$NODE_REGISTRY_PORT" --disk "$n/registry"
  wait_for "$w" "$deadline" "the image registry" curl -fsS "http://127.0.0.1:$NODE_REGISTRY_PORT/v2/" || return 1
  node_image "$w" pause pause || { say "building the pause image failed (see $n/images.log)"; return 1; }
  node_image "$w" standin-operator standin-operator ||
    { say "building the standin-operator image failed (see $n/images.log)"; return 1; }

  PATH=$NODE_BIN:$PATH launch_program "$w" containerd "$NODE_BIN/containerd" --config "$n/containerd/config.toml"
  wait_for "$w" "$deadline" "containerd's socket" test -S "$n/containerd/containerd.sock" || return 1

  launch_program "$w" kubelet "$NODE_BIN/kubelet" --config "$n/kubelet/config.yaml" \
    --kubeconfig "$n/kubelet.kubeconfig" --root-dir "$n/kubelet" --cert-dir "$n/kubelet/pki" \
    --hostname-override localhost
  launch_program "$w" kube-scheduler "$NODE_BIN/kube-scheduler" --kubeconfig "$n/scheduler.kubeconfig" \
    --leader-elect=false --secure-port=0 --profiling=false
  wait_for "$w" "$deadline" "node localhost Ready and untainted" node_ready "$w" || return 1
}

# node_print_env DIR: the node's exports.
node_print_env() {
  local n=$1/node
  [[ -f $n/env ]] || return 0
  # shellcheck source=/dev/null
  source "$n/env"
  printf 'export TESTPLANE_REGISTRY=%q\n' "127.0.0.1:$NODE_REGISTRY_PORT"
  printf 'export TESTPLANE_STANDIN_IMAGE=%q\n' "127.0.0.1:$NODE_REGISTRY_PORT/minicvo/standin-operator:1"
}

# node_drain DIR: stop scheduling and delete every pod bound to the node while the kubelet still
# runs, so it stops their containers; wait (bounded) until the API server has none left.
node_drain() {
  local w=$1 n=$1/node server deadline left
  [[ -f $w/kube-apiserver.pid ]] && is_ours "$w" "$(<"$w/kube-apiserver.pid")" || return 0
  [[ -f $w/kubelet.pid ]] && is_ours "$w" "$(<"$w/kubelet.pid")" || return 0
  stop_component "$w" kube-scheduler
  server=$(sed -n 's/^ *server: //p' "$w/kubeconfig")
  local auth=(--cacert "$w/pki/ca.crt" -H "Authorization: Bearer $(<"$w/admin.token")")
  # Controllers would replace the pods: stop the controller manager first.
  stop_component "$w" kube-controller-manager
  # Pods are deleted one by one: the API has no cluster-wide delete of a collection.
  local pod
  while read -r pod; do
    [[ -n $pod ]] || continue
    curl -fsS "${auth[@]}" -X DELETE -H 'Content-Type: application/json' \
      -d '{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":1}' \
      "$server/api/v1/namespaces/${pod%/*}/pods/${pod#*/}" >/dev/null 2>&1 || true
  done < <(node_api "$w" "/api/v1/pods?fieldSelector=spec.nodeName%3Dlocalhost" 2>/dev/null |
    jq -r '.items[] | .metadata.namespace + "/" + .metadata.name')
  deadline=$((SECONDS + 30))
  while :; do
    left=$(node_api "$w" "/api/v1/pods?fieldSelector=spec.nodeName%3Dlocalhost" 2>/dev/null | jq '.items | length') || left=unknown
    [[ $left == 0 ]] && break
    if ((SECONDS >= deadline)); then
      say "node: $left pod(s) still bound after 30 s, stopping the kubelet anyway"
      break
    fi
    sleep 0.2
  done
}

# node_kill_containers DIR: kill and delete every container runc still knows (a crashed
# containerd or shim leaves them running), recording their pids for node_check.
node_kill_containers() {
  local n=$1/node root id pid
  for root in "$n"/runc/*/; do
    [[ -d $root ]] || continue
    while read -r id pid _; do
      [[ -n $id && $id != ID ]] || continue
      [[ $pid =~ ^[0-9]+$ && $pid != 0 ]] && echo "$pid" >>"$n/container.pids"
      "$NODE_BIN/runc" --root "$root" kill --all "$id" KILL >/dev/null 2>&1 || true
      "$NODE_BIN/runc" --root "$root" delete --force "$id" >/dev/null 2>&1 || true
    done < <("$NODE_BIN/runc" --root "$root" list 2>/dev/null)
  done
}

# node_kill_strays DIR: any process whose command line names DIR (a shim, a kubelet of a
# crashed run): TERM, then KILL.
node_kill_strays() {
  local w=$1 p pids=()
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    ((p == $$ || p == ${WATCHDOG_SELF:-0})) && continue
    is_ours "$w" "$p" && [[ $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) != *"testplane.sh"* ]] && pids+=("$p")
  done
  ((${#pids[@]})) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  local i
  for ((i = 0; i < 50; i++)); do
    local alive=0
    for p in "${pids[@]}"; do is_ours "$w" "$p" && alive=1; done
    ((alive)) || return 0
    sleep 0.1
  done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

# node_unmount DIR: every mount under DIR, deepest first (lazily when busy).
node_unmount() {
  local w=$1 m
  for _ in 1 2 3; do
    mapfile -t mounts < <(awk -v d="$w/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r)
    ((${#mounts[@]})) || return 0
    for m in "${mounts[@]}"; do
      m=$(printf '%b' "$m") # mountinfo escapes spaces as \040
      umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    done
  done
}

# node_host_cleanup DIR: the host-wide state named in DIR/node/env.
node_host_cleanup() {
  local w=$1 n=$1/node
  [[ -f $n/env ]] || return 0
  (
    # shellcheck source=/dev/null
    source "$n/env"
    local sb
  for sb in /var/lib/cni/results/"$NODE_NETWORK"-* "$n"/containerd/{root,state}/io.containerd.grpc.v1.cri/sandboxes/*; do
    [[ -e $sb ]] || continue
    [[ $sb == /var/lib/cni/* ]] || sb=/var/lib/cni/results/cni-loopback-${sb##*/}-lo
    if [[ -e $sb ]]; then
      say "left behind: CNI cache $sb"
      bad=1
    fi
  done
  if ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then ip link delete "$NODE_BRIDGE" 2>/dev/null || true; fi
    rm -f /var/lib/cni/results/"$NODE_NETWORK"-* 2>/dev/null || true
    # containerd's loopback network caches one result per pod sandbox.
    local sb
    for sb in "$n"/containerd/{root,state}/io.containerd.grpc.v1.cri/sandboxes/*; do
      [[ -e $sb ]] && rm -f "/var/lib/cni/results/cni-loopback-${sb##*/}-lo"
    done
    if [[ -d /var/log/containers ]]; then
      find /var/log/containers -maxdepth 1 -lname "$n/*" -delete 2>/dev/null || true
    fi
    # runc's cgroups (cgroupfs driver, no QoS tree): /k8s.io/<container id> in each hierarchy.
    if [[ -f $n/container.ids ]]; then
      local id c
      while read -r id; do
        for c in /sys/fs/cgroup/*/k8s.io/"$id"; do [[ -d $c ]] && rmdir "$c" 2>/dev/null || true; done
      done <"$n/container.ids"
    fi
  )
}

# node_teardown DIR: everything of the node after its processes: containers, strays, mounts,
# host state. Safe to run twice and on a crashed plane's directory.
node_teardown() {
  local w=$1 n=$1/node
  [[ -d $n ]] || return 0
  if [[ -n ${NODE_BIN:-} && -x $NODE_BIN/runc ]]; then
    local c
    for c in "$n"/runc/*/*/; do
      [[ -d $c ]] && basename "$c" >>"$n/container.ids"
    done
    node_kill_containers "$w"
  fi
  node_kill_strays "$w"
  node_unmount "$w"
  node_host_cleanup "$w"
}

# node_check DIR: nothing of the node is left; prints what is and returns 1 otherwise.
node_check() {
  local w=$1 n=$1/node bad=0 p
  [[ -f $n/env ]] || return 0
  # shellcheck source=/dev/null
  source "$n/env"
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    ((p == $$ || p == ${WATCHDOG_SELF:-0})) && continue
    if is_ours "$w" "$p" && [[ $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null) != *"testplane.sh"* ]]; then
      say "left behind: process $p: $(tr '\0' ' ' <"/proc/$p/cmdline")"
      bad=1
    fi
  done
  if [[ -f $n/container.pids ]]; then
    while read -r p; do
      if [[ -d /proc/$p ]] && ! grep -qs '^State:.*Z' "/proc/$p/status"; then
        say "left behind: container process $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null))"
        bad=1
      fi
    done <"$n/container.pids"
  fi
  if awk -v d="$w/" 'index($5, d) == 1 { found = 1; print "testplane: left behind: mount " $5 > "/dev/stderr" } END { exit !found }' /proc/self/mountinfo; then
    bad=1
  fi
  local sb
  for sb in /var/lib/cni/results/"$NODE_NETWORK"-* "$n"/containerd/{root,state}/io.containerd.grpc.v1.cri/sandboxes/*; do
    [[ -e $sb ]] || continue
    [[ $sb == /var/lib/cni/* ]] || sb=/var/lib/cni/results/cni-loopback-${sb##*/}-lo
    if [[ -e $sb ]]; then
      say "left behind: CNI cache $sb"
      bad=1
    fi
  done
  if ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
    say "left behind: bridge $NODE_BRIDGE"
    bad=1
  fi
  if compgen -G "$n/containerd/state/io.containerd.grpc.v1.cri/netns/*" >/dev/null && awk -v d="$n/containerd/state/io.containerd.grpc.v1.cri/netns/" 'index($5, d) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
    say "left behind: network namespaces under $n/containerd/state/io.containerd.grpc.v1.cri/netns"
    bad=1
  fi
  return $bad
}

# node_clean_stale: the node leftovers of planes whose processes are all gone (a crash, a
# SIGKILLed test run). A plane with any live process is left alone.
node_clean_stale() {
  local d c alive
  for d in "${TMPDIR:-/tmp}"/minicvo-testplane.*/; do
    d=${d%/}
    [[ -f $d/node/env && -f $d/tokens.csv ]] || continue
    alive=0
    for c in "${COMPONENTS[@]}" "${NODE_COMPONENTS[@]}" watchdog; do
      [[ -f $d/$c.pid ]] && is_ours "$d" "$(<"$d/$c.pid")" && alive=1
    done
    ((alive)) && continue
    say "cleaning the leftovers of a stopped plane with a node: $d"
    node_teardown "$d"
    if node_check "$d"; then rm -rf "$d"; fi
  done
}
