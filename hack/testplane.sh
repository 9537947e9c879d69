#!/usr/bin/env bash
# The test control plane: etcd, kube-apiserver and kube-controller-manager on 127.0.0.1, built by
# hack/build-testplane.sh. See hack/TESTPLANE.md.
#
#   eval "$(hack/testplane.sh start)"   start a plane in a fresh temp dir; prints the exports
#   hack/testplane.sh start --nodes 1   the same plus a node: containerd, a kubelet, kube-scheduler,
#                                       an image registry (hack/testplane-node.sh); needs root
#   hack/testplane.sh env  [DIR]        print the exports again (DIR defaults to $TESTPLANE_DIR)
#   hack/testplane.sh stop [DIR]        stop the processes this script started, remove DIR
#
# Environment:
#   TESTPLANE_BIN            bin dir with etcd, kube-apiserver, kube-controller-manager
#                            (default: the output of hack/build-testplane.sh)
#   TESTPLANE_NODES          0 or 1: the number of nodes when start has no --nodes (default 0)
#   TESTPLANE_NODE_BIN       bin dir of the node tools (default: the output of
#                            hack/build-testplane.sh --nodes)
#   TESTPLANE_START_TIMEOUT  seconds to wait for the plane to be ready (default 120)
#   TESTPLANE_WATCH_PID      if set, a watchdog stops the plane when this process exits
#   TESTPLANE_KEEP_FAILED=1  keep the work dir after a failed start (for debugging)
#
# Data on stdout (only the export lines), progress and logs on stderr.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SELF=$ROOT/hack/testplane.sh
# The processes we start, in start order; stop goes in reverse.
COMPONENTS=(etcd kube-apiserver kube-controller-manager)
# The plane's node, when asked for (NODE_COMPONENTS are appended to COMPONENTS).
NODES=0
# shellcheck source=hack/testplane-node.sh
source "$ROOT/hack/testplane-node.sh"

say() { echo "testplane: $*" >&2; }
die() { say "$*"; exit 1; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# is_ours DIR PID: the pid is alive and is one of our processes (its command line names DIR), so a
# recycled pid is never signalled.
is_ours() {
  local cmd
  cmd=$(tr '\0' ' ' 2>/dev/null <"/proc/$2/cmdline") || return 1
  [[ $cmd == *"$1"* ]]
}

# wait_for DIR DEADLINE WHAT CMD...: poll CMD every 0.2 s until it succeeds; fail early when one of
# the started processes has died, and at DEADLINE (an absolute $SECONDS value).
wait_for() {
  local w=$1 deadline=$2 what=$3
  shift 3
  until "$@" >/dev/null 2>&1; do
    local c
    for c in "${COMPONENTS[@]}"; do
      [[ -f $w/$c.pid ]] || continue
      is_ours "$w" "$(<"$w/$c.pid")" || { say "$c exited while waiting for $what"; return 1; }
    done
    ((SECONDS < deadline)) || { say "timed out waiting for $what"; return 1; }
    sleep 0.2
  done
}

# launch DIR NAME ARGS...: start $BIN/NAME in the background, log to DIR/NAME.log, pid to DIR/NAME.pid.
launch() {
  local w=$1 name=$2
  shift 2
  launch_program "$w" "$name" "$BIN/$name" "$@"
}

# launch_program DIR NAME PROGRAM ARGS...: the same for any program; its command line must name
# DIR (see is_ours).
launch_program() {
  local w=$1 name=$2
  shift 2
  "$@" </dev/null >"$w/$name.log" 2>&1 &
  local pid=$! n
  echo "$pid" >"$w/$name.pid"
  # Until it execs the program, the child is a copy of this shell, whose command line does
  # not name DIR: wait for the exec (5 s at most), or is_ours would take a child that a busy
  # machine has not yet scheduled for one that died.
  for ((n = 0; n < 100; n++)); do
    is_ours "$w" "$pid" && return 0
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.05
  done
}

print_logs() {
  local w=$1 c
  for c in "${COMPONENTS[@]}"; do
    [[ -f $w/$c.log ]] || continue
    echo "----- last 40 lines of $w/$c.log -----" >&2
    tail -n 40 "$w/$c.log" >&2
  done
}

make_pki() {
  local p=$1/pki
  mkdir -p "$p"
  openssl req -x509 -newkey rsa:2048 -nodes -days 365 -subj /CN=testplane-ca \
    -keyout "$p/ca.key" -out "$p/ca.crt" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver \
    -keyout "$p/apiserver.key" -out "$p/apiserver.csr" 2>/dev/null
  printf '%s\n' 'basicConstraints=critical,CA:FALSE' 'keyUsage=critical,digitalSignature,keyEncipherment' \
    'extendedKeyUsage=serverAuth' \
    'subjectAltName=IP:127.0.0.1,DNS:localhost,IP:10.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc' \
    >"$p/san.ext"
  openssl x509 -req -in "$p/apiserver.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 365 \
    -extfile "$p/san.ext" -out "$p/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
  openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
}

# write_kubeconfig FILE SERVER CA_FILE ADMIN_TOKEN ALICE_TOKEN CURRENT_CONTEXT
write_kubeconfig() {
  local ca
  ca=$(base64 -w0 <"$3")
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: testplane
  cluster:
    server: $2
    certificate-authority-data: $ca
users:
- name: admin
  user:
    token: $4
- name: alice
  user:
    token: $5
contexts:
- name: admin
  context:
    cluster: testplane
    user: admin
- name: alice
  context:
    cluster: testplane
    user: alice
current-context: $6
EOF
  chmod 600 "$1"
}

# start_processes DIR: one attempt with fresh ports. Returns non-zero if a process dies or times out.
start_processes() {
  local w=$1 p=$1/pki ep pp ap deadline
  ep=$(free_port)
  pp=$(free_port)
  ap=$(free_port)
  deadline=$((SECONDS + ${TESTPLANE_START_TIMEOUT:-120}))
  rm -rf "$w/etcd" && mkdir -m 700 "$w/etcd"
  # Without a node no pod runs, so pods need no ServiceAccount token. With one, they do: the
  # admission plugin adds the projected token volume and root-ca-cert-publisher its CA.
  local admission=(--disable-admission-plugins=ServiceAccount)
  local controllers=namespace,garbagecollector,serviceaccount,serviceaccount-token,clusterrole-aggregation
  if ((NODES)); then
    admission=()
    controllers+=,root-ca-cert-publisher,deployment,replicaset,daemonset,job,nodelifecycle,podgc
  fi
  launch "$w" etcd --name testplane --data-dir "$w/etcd" \
    --listen-client-urls "http://127.0.0.1:$ep" --advertise-client-urls "http://127.0.0.1:$ep" \
    --listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
    --initial-cluster "testplane=http://127.0.0.1:$pp" --unsafe-no-fsync --log-level warn
  wait_for "$w" "$deadline" "etcd /health" curl -fsS "http://127.0.0.1:$ep/health" || return 1

  launch "$w" kube-apiserver \
    --etcd-servers="http://127.0.0.1:$ep" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$ap" \
    --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" \
    --token-auth-file="$w/tokens.csv" \
    --authorization-mode=RBAC \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$p/sa.pub" --service-account-signing-key-file="$p/sa.key" \
    --service-cluster-ip-range=10.0.0.0/24 \
    "${admission[@]}" \
    --endpoint-reconciler-type=none \
    --allow-privileged=true --profiling=false
  local server=https://127.0.0.1:$ap
  wait_for "$w" "$deadline" "kube-apiserver /readyz" \
    curl -fsS --cacert "$p/ca.crt" "$server/readyz" || return 1
  write_kubeconfig "$w/kubeconfig" "$server" "$p/ca.crt" "$(<"$w/admin.token")" "$(<"$w/alice.token")" admin
  # kube-controller-manager gets its own copy, so tests that edit $KUBECONFIG cannot disturb it.
  cp "$w/kubeconfig" "$w/controller-manager.kubeconfig"
  local admin=(curl -fsS --cacert "$p/ca.crt" -H "Authorization: Bearer $(<"$w/admin.token")")
  wait_for "$w" "$deadline" "namespace default" "${admin[@]}" "$server/api/v1/namespaces/default" || return 1

  # namespace: namespace deletion finishes; garbagecollector: ownerReferences cascade;
  # serviceaccount(-token): the `default` ServiceAccount and its tokens, as on a real cluster;
  # clusterrole-aggregation: the admin/edit/view ClusterRoles get their aggregated rules.
  launch "$w" kube-controller-manager \
    --kubeconfig="$w/controller-manager.kubeconfig" \
    --controllers="$controllers" \
    --service-account-private-key-file="$p/sa.key" --root-ca-file="$p/ca.crt" \
    --use-service-account-credentials=false --leader-elect=false --secure-port=0 --profiling=false
  # The `default` ServiceAccount appears once the controller manager is running its controllers.
  wait_for "$w" "$deadline" "serviceaccount default/default (kube-controller-manager)" \
    "${admin[@]}" "$server/api/v1/namespaces/default/serviceaccounts/default" || return 1
  if ((NODES)); then node_start "$w" "$deadline" || return 1; fi
}

start() {
  NODES=${TESTPLANE_NODES:-0}
  while (($#)); do
    case $1 in
    --nodes)
      NODES=${2:-}
      shift 2 || die "start: --nodes needs a number"
      ;;
    --nodes=*)
      NODES=${1#--nodes=}
      shift
      ;;
    *) die "start: unknown argument $1" ;;
    esac
  done
  [[ $NODES == 0 || $NODES == 1 ]] || die "start: --nodes must be 0 or 1 (one node per plane)"
  if ((NODES)); then
    ((EUID == 0)) || die "start: a plane with a node needs root (containerd, runc, mounts, the CNI bridge)"
    local c
    for c in jq ip umount; do command -v "$c" >/dev/null || die "$c is not installed (needed for the node)"; done
    if [[ -z ${TESTPLANE_BIN:-} || -z ${TESTPLANE_NODE_BIN:-} ]]; then
      local out
      out=$(bash "$ROOT/hack/build-testplane.sh" --nodes | tail -n 2)
      TESTPLANE_BIN=${TESTPLANE_BIN:-$(head -n 1 <<<"$out")}
      TESTPLANE_NODE_BIN=$(tail -n 1 <<<"$out")
    fi
    NODE_BIN=$TESTPLANE_NODE_BIN
    for c in containerd containerd-shim-runc-v2 runc kubelet kube-scheduler pause standin-operator cni/bridge; do
      [[ -x $NODE_BIN/$c ]] || die "$NODE_BIN/$c is missing; hint: run hack/build-testplane.sh --nodes or set TESTPLANE_NODE_BIN"
    done
    COMPONENTS+=("${NODE_COMPONENTS[@]}")
  fi
  if [[ -z ${TESTPLANE_BIN:-} ]]; then
    TESTPLANE_BIN=$(bash "$ROOT/hack/build-testplane.sh" | tail -n 1)
  fi
  BIN=$TESTPLANE_BIN
  local c
  for c in etcd kube-apiserver kube-controller-manager; do
    [[ -x $BIN/$c ]] || die "$BIN/$c is missing; hint: run hack/build-testplane.sh or set TESTPLANE_BIN"
  done
  command -v openssl >/dev/null || die "openssl is not installed"
  command -v curl >/dev/null || die "curl is not installed"
  command -v python3 >/dev/null || die "python3 is not installed (used to pick free ports)"

  if ((NODES)); then
    [[ -x $BIN/crane ]] || die "$BIN/crane is missing; hint: run hack/build-testplane.sh"
    node_clean_stale
  fi
  local t0=$SECONDS w
  w=$(mktemp -d "${TMPDIR:-/tmp}/minicvo-testplane.XXXXXX")
  # stop reads these to find the node's tools again.
  if ((NODES)); then printf '%s\n' "$NODE_BIN" >"$w/node-bin"; fi
  make_pki "$w"
  openssl rand -hex 24 >"$w/admin.token"
  openssl rand -hex 24 >"$w/alice.token"
  printf '%s,testplane-admin,uid-admin,"system:masters"\n%s,alice,uid-alice,"testers"\n' \
    "$(<"$w/admin.token")" "$(<"$w/alice.token")" >"$w/tokens.csv"
  chmod 600 "$w/tokens.csv" "$w/admin.token" "$w/alice.token"

  # A port taken between free_port and the bind makes a process exit; retry with new ports.
  local attempt ok=0
  for attempt in 1 2 3; do
    if start_processes "$w"; then
      ok=1
      break
    fi
    if grep -qs 'address already in use' "$w"/*.log && ((attempt < 3)); then
      say "port clash, retrying (attempt $((attempt + 1)))"
      kill_processes "$w"
      if ((NODES)); then
        node_teardown "$w"
        rm -rf "$w/node"
      fi
      continue
    fi
    break
  done
  if ((!ok)); then
    say "start-up failed"
    print_logs "$w"
    kill_processes "$w"
    if ((NODES)); then node_teardown "$w"; fi
    if [[ ${TESTPLANE_KEEP_FAILED:-} == 1 ]]; then
      say "kept the work dir $w (TESTPLANE_KEEP_FAILED=1)"
    else
      rm -rf "$w"
      say "removed the work dir $w; hint: TESTPLANE_KEEP_FAILED=1 keeps it"
    fi
    exit 1
  fi

  if [[ -n ${TESTPLANE_WATCH_PID:-} ]]; then
    # Watchdog: stop the plane when the process that asked for it is gone (e.g. a killed CI job).
    # Its command line names $w, like the other processes, so stop recognises it as ours.
    nohup bash "$SELF" __watch "$TESTPLANE_WATCH_PID" "$w" </dev/null >"$w/watchdog.log" 2>&1 &
    echo $! >"$w/watchdog.pid"
  fi
  say "ready in $((SECONDS - t0))s: $(sed -n 's/^ *server: //p' "$w/kubeconfig") (dir $w)"
  print_env "$w"
}

print_env() {
  local w=${1:-}
  [[ -n $w ]] || die "env: no directory given and TESTPLANE_DIR is not set"
  [[ -f $w/kubeconfig ]] || die "env: $w is not a running test plane (no kubeconfig)"
  printf 'export TESTPLANE_DIR=%q\n' "$w"
  printf 'export KUBECONFIG=%q\n' "$w/kubeconfig"
  printf 'export MINICVO_TEST_KUBECONFIG=%q\n' "$w/kubeconfig"
  node_print_env "$w"
}

# stop_component DIR NAME: SIGTERM one of our processes, wait (containerd 10 s, others 20 s),
# then SIGKILL. A pid that is no longer ours (exited, recycled) is left alone.
stop_component() {
  local w=$1 c=$2 pid n limit=100
  [[ -f $w/$c.pid ]] || return 0
  pid=$(<"$w/$c.pid")
  rm -f "$w/$c.pid"
  is_ours "$w" "$pid" || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  # A SIGTERMed containerd once kept its metadata DB open for 20 s and more.
  [[ $c == containerd ]] && limit=50
  for ((n = 0; n < limit; n++)); do
    is_ours "$w" "$pid" || return 0
    sleep 0.2
  done
  say "$c (pid $pid) did not stop, killing it"
  kill -KILL "$pid" 2>/dev/null || true
  for ((n = 0; n < 50; n++)); do
    is_ours "$w" "$pid" || return 0
    sleep 0.1
  done
}

# kill_processes DIR: stop our processes in reverse start order.
kill_processes() {
  local w=$1 i
  for ((i = ${#COMPONENTS[@]} - 1; i >= 0; i--)); do
    stop_component "$w" "${COMPONENTS[i]}"
  done
}

stop() {
  local w=${1:-}
  [[ -n $w ]] || die "stop: no directory given and TESTPLANE_DIR is not set"
  [[ -d $w ]] || { say "stop: $w does not exist, nothing to do"; return 0; }
  [[ -f $w/tokens.csv ]] || die "stop: $w does not look like a test plane directory, not touching it"
  if [[ -f $w/watchdog.pid ]]; then
    local wd
    wd=$(<"$w/watchdog.pid")
    rm -f "$w/watchdog.pid"
    if [[ $wd != "${WATCHDOG_SELF:-}" ]] && is_ours "$w" "$wd"; then kill -TERM "$wd" 2>/dev/null || true; fi
  fi
  local node=0
  if [[ -f $w/node-bin ]]; then
    node=1
    NODE_BIN=$(<"$w/node-bin")
    COMPONENTS+=("${NODE_COMPONENTS[@]}")
    # Pods first, while the kubelet can still stop them.
    node_drain "$w"
  fi
  kill_processes "$w"
  if ((node)); then
    node_teardown "$w"
    if ! node_check "$w"; then
      say "stop: the node left the above behind; kept $w"
      return 1
    fi
  fi
  rm -rf "$w"
  say "stopped, removed $w"
}

watch() {
  local parent=$1 w=$2
  while kill -0 "$parent" 2>/dev/null && [[ -d $w ]]; do sleep 2; done
  if [[ -d $w ]]; then
    WATCHDOG_SELF=$$ stop "$w"
  fi
}

case ${1:-} in
start)
  shift
  start "$@"
  ;;
stop) stop "${2:-${TESTPLANE_DIR:-}}" ;;
env) print_env "${2:-${TESTPLANE_DIR:-}}" ;;
__watch) watch "$2" "$3" ;;
*)
  echo "usage: hack/testplane.sh start [--nodes 0|1] | stop [DIR] | env [DIR]" >&2
  exit 2
  ;;
esac
