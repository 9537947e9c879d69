#!/usr/bin/env bash
# A Docker daemon for kind when none is running: Debian's dockerd (installed with apt-get when
# missing) with every piece of state under one directory, started and stopped by this script.
#
#   eval "$(hack/docker.sh start)"   a daemon that answers: the one DOCKER_HOST (or the default
#                                    socket) names when it answers, else our own; prints the
#                                    exports (DOCKER_HOST, PATH with the matching docker CLI,
#                                    MINICVO_DOCKER_OWN=1 when it is ours)
#   hack/docker.sh stop              stops our daemon: removes its containers and networks,
#                                    stops dockerd and its containerd, removes what Docker put
#                                    on the host (iptables chains and rules of its own, bridges,
#                                    the /lib/modules directory it made), then checks
#   hack/docker.sh check             exits 1, naming each, when anything of ours is left: a
#                                    process, a mount, a container's cgroup, a container network
#                                    bridge, an iptables chain, /lib/modules made by us
#
# The state directory is MINICVO_DOCKER_DIR (default /var/tmp/minicvo-docker): data-root (kept
# between runs: the node image stays loaded), exec-root, socket, pid file, logs. A start after a
# crashed run (a pid file whose daemon is gone) first cleans up what that run left.
#
# Settings, each for a reason on machines like ours (root in a container, cgroup v1, a bounding
# set without CAP_SYS_RESOURCE):
#   --default-runtime capfilter   hack/runc-capfilter: Docker 20.10 gives privileged containers
#                                 (kind's nodes) capabilities outside the bounding set, which
#                                 runc refuses ("unable to apply caps"); the wrapper drops them
#   --bridge none                 no docker0: kind makes its own network, the image builds here
#                                 need none
#   --default-address-pool        the kind network on 172.30.x.0/24 (MINICVO_DOCKER_POOL)
#   FORWARD policy                dockerd sets the host's FORWARD policy to DROP when it turns
#                                 ip_forward on; it is put back as soon as the daemon answers
# Needs root (dockerd, iptables).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
W=${MINICVO_DOCKER_DIR:-/var/tmp/minicvo-docker}
POOL=${MINICVO_DOCKER_POOL:-172.30.0.0/16}
NS=minicvo
SOCK=$W/run/docker.sock

say() { echo "docker.sh: $*" >&2; }
die() {
  say "$*"
  exit 1
}

ours() { DOCKER_HOST=unix://$SOCK "$W/path/docker" "$@"; }

# The pid of our dockerd when it runs, else nothing.
our_pid() {
  local pid
  pid=$(cat "$W/run/dockerd.pid" 2>/dev/null) || return 0
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == dockerd ]] && echo "$pid"
  return 0
}

# Processes of ours: the ones whose command line names our state directory (dockerd, its
# containerd, the shims), docker-proxy for our containers (its command line names their
# address), and the processes of our containers (cgroupfs: /sys/fs/cgroup/<controller>/docker/<id>).
our_processes() {
  local p cmd id f prefix=${POOL%%.0.0/*}.
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    if [[ $cmd == *"$W/"* || ($cmd == *docker-proxy* && $cmd == *"-container-ip $prefix"*) ]]; then
      echo "${p#/proc/} $cmd"
    fi
  done
  # A container's processes live in its cgroup and the cgroups below it (kind's nodes run
  # systemd, which moves everything into sub-cgroups).
  for id in $(ls "$W/data/containers" 2>/dev/null); do
    for base in /sys/fs/cgroup/pids/docker/"$id" /sys/fs/cgroup/systemd/docker/"$id" /sys/fs/cgroup/docker/"$id"; do
      [[ -d $base ]] || continue
      find "$base" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r p; do
        [[ -n $p ]] && echo "$p (in container ${id:0:12}) $(tr '\0' ' ' 2>/dev/null <"/proc/$p/cmdline" | cut -c1-80)"
      done
      break
    done
  done | sort -u -n
  return 0
}

# The cgroups of our containers, in every hierarchy (a killed daemon leaves them).
our_cgroups() {
  local id
  for id in $(ls "$W/data/containers" 2>/dev/null); do
    find /sys/fs/cgroup/*/docker/"$id" /sys/fs/cgroup/docker/"$id" -depth -type d 2>/dev/null
  done
  return 0
}

our_mounts() { awk -v w="$W/" 'index($2, w) == 1 {print $2}' /proc/self/mounts | sort -r; }

# Bridges of our networks: Docker names them br-<network id>; ours are the ones whose address
# is in our pool.
our_bridges() {
  local prefix=${POOL%%.0.0/*}
  ip -o -4 addr show 2>/dev/null | awk -v p="$prefix." '$2 ~ /^br-/ && index($4, p) == 1 {print $2}' | sort -u
}

ipt() { iptables-nft "$@"; }

iptables_leftovers() {
  local t
  for t in filter nat; do
    ipt -t "$t" -S 2>/dev/null | grep -E 'DOCKER|'"${POOL%%.0.0/*}"'\.' | sed "s/^/$t: /" || true
  done
}

check() {
  local left=0 x
  while read -r x; do [[ -n $x ]] && { say "left: process $x"; left=1; }; done < <(our_processes)
  while read -r x; do [[ -n $x ]] && { say "left: mount $x"; left=1; }; done < <(our_mounts)
  while read -r x; do [[ -n $x ]] && { say "left: cgroup $x"; left=1; }; done < <(our_cgroups)
  while read -r x; do [[ -n $x ]] && { say "left: bridge $x"; left=1; }; done < <(our_bridges)
  while read -r x; do [[ -n $x ]] && { say "left: iptables $x"; left=1; }; done < <(iptables_leftovers)
  if [[ -f $W/run/lib-modules-made && -d /usr/lib/modules ]]; then
    say "left: /lib/modules (made for kind's volume mount)"
    left=1
  fi
  return "$left"
}

# Deletes every copy of one iptables rule.
del_rule() { while ipt "$@" 2>/dev/null; do :; done; }

# Removes what Docker put on the host: its rules and chains, bridges of our pool, the empty
# /lib/modules it made. Run with no daemon of ours up.
host_cleanup() {
  local br c r
  for br in $(our_bridges); do
    del_rule -t filter -D FORWARD -o "$br" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    del_rule -t filter -D FORWARD -o "$br" -j DOCKER
    del_rule -t filter -D FORWARD -i "$br" ! -o "$br" -j ACCEPT
    del_rule -t filter -D FORWARD -i "$br" -o "$br" -j ACCEPT
    ip link del "$br" 2>/dev/null || true
  done
  # Rules that mention our pool (MASQUERADE, isolation) wherever they are.
  for c in nat filter; do
    { ipt -t "$c" -S 2>/dev/null | grep -E "${POOL%%.0.0/*}\." | grep '^-A ' || true; } | while read -r r; do
      eval "ipt -t $c ${r/#-A/-D}" 2>/dev/null || true
    done
  done
  # The chains are shared by every dockerd of the host; another daemon's (none when we run our
  # own: start refuses then) would keep them referenced and they would stay.
  if [[ -z $(pgrep -x dockerd || true) ]]; then
    del_rule -t filter -D FORWARD -j DOCKER-USER
    del_rule -t filter -D FORWARD -j DOCKER-ISOLATION-STAGE-1
    for c in DOCKER DOCKER-ISOLATION-STAGE-1 DOCKER-ISOLATION-STAGE-2 DOCKER-USER; do
      ipt -t filter -F "$c" 2>/dev/null || true
      ipt -t filter -X "$c" 2>/dev/null || true
    done
    del_rule -t nat -D PREROUTING -m addrtype --dst-type LOCAL -j DOCKER
    del_rule -t nat -D OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER
    ipt -t nat -F DOCKER 2>/dev/null || true
    ipt -t nat -X DOCKER 2>/dev/null || true
  fi
  if [[ -f $W/run/forward-policy ]]; then
    ipt -t filter -P FORWARD "$(cat "$W/run/forward-policy")" 2>/dev/null || true
  fi
  if [[ -f $W/run/lib-modules-made ]]; then
    rmdir /usr/lib/modules 2>/dev/null || true
    [[ -d /usr/lib/modules ]] || rm -f "$W/run/lib-modules-made"
  fi
}

# Stops our daemon and everything it started; then cleans the host.
stop() {
  local pid m p
  pid=$(our_pid)
  if [[ -n $pid ]]; then
    local ids nets
    ids=$(ours ps -aq 2>/dev/null || true)
    [[ -n $ids ]] && { ours rm -f $ids >/dev/null 2>&1 || true; }
    nets=$(ours network ls -q --filter type=custom 2>/dev/null || true)
    [[ -n $nets ]] && { ours network rm $nets >/dev/null 2>&1 || true; }
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && { say "dockerd $pid did not stop in 20 s; SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; }
  fi
  # containerd and shims of ours (a crashed daemon leaves them): TERM, then KILL.
  for sig in TERM KILL; do
    while read -r p _; do [[ -n $p ]] && kill "-$sig" "$p" 2>/dev/null || true; done < <(our_processes)
    for _ in $(seq 50); do [[ -z $(our_processes) ]] && break; sleep 0.1; done
  done
  while read -r m; do [[ -n $m ]] && { umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; }; done < <(our_mounts)
  while read -r c; do [[ -n $c ]] && rmdir "$c" 2>/dev/null; done < <(our_cgroups)
  host_cleanup
  rm -f "$W/run/dockerd.pid" "$SOCK" "$W/run/forward-policy"
  check
}

ensure_installed() {
  if [[ -x $(command -v dockerd || echo /nonexistent) && -x /usr/bin/docker && -x /usr/sbin/runc ]]; then return 0; fi
  ((EUID == 0)) || die "dockerd is not installed; hint: apt-get install docker.io (as root)"
  command -v apt-get >/dev/null || die "dockerd is not installed and there is no apt-get to install docker.io"
  say "installing Debian's docker.io (dockerd, containerd, runc)"
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io iptables jq >&2; then
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io iptables jq >&2
  fi
}

start() {
  # A daemon that answers already (the user's, or a connected machine's): use it.
  if [[ -z ${MINICVO_DOCKER_FORCE_OWN:-} ]] && command -v docker >/dev/null &&
    [[ ${DOCKER_HOST:-} != "unix://$SOCK" ]] && timeout 10 docker info >/dev/null 2>&1; then
    say "using the Docker daemon that answers (${DOCKER_HOST:-the default socket})"
    return 0
  fi
  ((EUID == 0)) || die "no Docker daemon answers and starting one needs root"
  ensure_installed
  mkdir -p "$W/run" "$W/data" "$W/exec" "$W/logs" "$W/bin" "$W/path"
  ln -sf /usr/bin/docker "$W/path/docker"
  install -m 0755 "$ROOT/hack/runc-capfilter" "$W/bin/runc-capfilter"
  if [[ -n $(our_pid) ]] && ours info >/dev/null 2>&1; then
    say "our dockerd already runs (pid $(our_pid)); using it"
  else
    if [[ -f $W/run/dockerd.pid || -n $(our_processes) || -n $(our_mounts) ]]; then
      say "cleaning up what a previous run left (its dockerd is gone)"
      stop >/dev/null 2>&1 || true
    fi
    if pgrep -x dockerd >/dev/null; then
      die "another dockerd runs on this host (pid $(pgrep -x dockerd | tr '\n' ' ')) but does not answer on ${DOCKER_HOST:-the default socket}; set DOCKER_HOST to its socket, or stop it"
    fi
    ipt -t filter -S FORWARD 2>/dev/null | awk '$1 == "-P" {print $3}' >"$W/run/forward-policy"
    [[ -s $W/run/forward-policy ]] || rm -f "$W/run/forward-policy"
    [[ -d /usr/lib/modules ]] || touch "$W/run/lib-modules-made"
    setsid dockerd 9>&- \
      --data-root "$W/data" \
      --exec-root "$W/exec" \
      --pidfile "$W/run/dockerd.pid" \
      -H "unix://$SOCK" \
      --containerd-namespace "$NS" --containerd-plugins-namespace "$NS-plugins" \
      --oom-score-adjust=0 \
      --add-runtime "capfilter=$W/bin/runc-capfilter" --default-runtime capfilter \
      --storage-driver overlay2 \
      --bridge none \
      --default-address-pool "base=$POOL,size=24" \
      >"$W/logs/dockerd.log" 2>&1 </dev/null &
    local ok=0
    for _ in $(seq 150); do
      if ours info >/dev/null 2>&1; then
        ok=1
        break
      fi
      sleep 0.2
    done
    if [[ -f $W/run/forward-policy ]]; then ipt -t filter -P FORWARD "$(cat "$W/run/forward-policy")"; fi
    if ((!ok)); then
      say "dockerd did not answer within 30 s; its log ($W/logs/dockerd.log) ends:"
      tail -n 20 "$W/logs/dockerd.log" >&2 || true
      stop >/dev/null 2>&1 || true
      exit 1
    fi
    say "dockerd $(our_pid) answers on $SOCK (state in $W)"
  fi
  printf 'export DOCKER_HOST=%q\n' "unix://$SOCK"
  printf 'export PATH=%q\n' "$W/path:$PATH"
  printf 'export MINICVO_DOCKER_OWN=1\n'
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  check) check ;;
  *)
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
