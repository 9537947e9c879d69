#!/usr/bin/env bash
# Side-by-side benchmarks of minicvo against the CVO's own loader and against kubectl. Results
# are ratios measured in the same run, rounds alternating the order, medians reported; never a
# test, never part of hack/test.sh. See BENCHMARKS.md for figures and how to read them.
#
#   hack/bench.sh load     load + plan: minicvo vs the CVO's loader (hack/tools/cvoload) on
#                          ../shared/payloads/openshift-multi and synthetic payloads of 1k, 10k
#                          and 50k objects; time, peak RSS, allocation
#   hack/bench.sh divan    the divan benches (cargo bench --bench load_plan)
#   hack/bench.sh apply    apply on a fresh test control plane: minicvo (both apply strategies)
#                          vs kubectl apply --server-side, 1,000 objects; re-apply; each tool's
#                          wall time over the floor (kube-apiserver + etcd CPU s ÷ cores);
#                          ClusterOperator wait latency; memory of minicvo apply on
#                          openshift-multi (with stub CRDs)
#   hack/bench.sh e2e      `minicvo e2e upgrade` of openshift-multi on a fresh test control
#                          plane, ROUNDS times: where the wall time goes (requests, operator
#                          waits, idle between tasks) per phase and run-level
#   hack/bench.sh floor    openshift-multi's e2e install and upgrade, and a synthetic 10k
#                          payload's install, against their floors (examples/floor.rs: the
#                          same writes with nothing waiting but the server, and the plane's
#                          CPU) on one fresh test control plane, ROUNDS rounds; each phase
#                          also without the time only ClusterOperator waits were open (the
#                          operators' own time, which the floor lacks), and the openshift-multi
#                          case again with simulated pods that are ready at once (multi-instant;
#                          FLOOR_INSTANT=0 leaves it out); with
#                          BEFORE=<git ref> that commit's minicvo runs beside, order alternating
#                          (BEFORE_BIN=<path>: a minicvo already built; FLOOR_PROFILE=debug:
#                          debug builds instead of release; FLOOR_BUILD_DIR=<dir>: minicvo,
#                          examples/floor and examples/loadbench already built there, e.g.
#                          the static release build of the kind preparation)
#   hack/bench.sh operator `minicvo operator` on openshift-multi on a fresh test control plane:
#                          install, ROUNDS reconcile passes against ROUNDS one-shot
#                          `minicvo apply --mode reconciling` runs, idle memory, and the time
#                          from `kubectl patch` of spec.desiredUpdate to the first write
#   hack/bench.sh lint     minicvo lint --all-profiles of ../shared/payloads/openshift-multi with
#                          the offline schema validation and with --no-schema: wall time, peak
#                          RSS, ratio
#   hack/bench.sh all      all of the above
#
# Environment:
#   ROUNDS=5          rounds per comparison (each round runs both sides, order alternating)
#   WARM=5            loads per process for the warm (in-process) load figures
#   SIZES="1000 10000 50000"   synthetic payload sizes for `load`
#   BEFORE=<git ref>  also run the loadbench, `plan -o json` and `lint --previous` of this commit
#                     (built in target/bench-before) in `load`, for before/after ratios
#   APPLY_N=1000      objects for `apply`
#   LATENCY_MS="10"   for `apply`: also run the rounds through examples/delayproxy with this
#                     many ms of round-trip time added (a remote cluster); "" skips them
#   APPLY_EXTRAS=1    for `apply`: 0 skips the wait latency and openshift-multi memory runs
#   E2E_ARGS=""       for `e2e` and `floor`: more `e2e upgrade` flags (e.g. "--apply-strategy
#                     cvo", or "--pods *=start:0s,ready:0s" for simulated pods that start at once)
#   FLOOR_SYNTH=10000 for `floor`: the synthetic payload's size; "" runs openshift-multi only
#
# Output: a Markdown summary on stdout; every raw line in target/bench/<timestamp>/.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

ROUNDS=${ROUNDS:-5}
WARM=${WARM:-5}
SIZES=${SIZES:-"1000 10000 50000"}
APPLY_N=${APPLY_N:-1000}
LATENCY_MS=${LATENCY_MS-10}
CORPUS=$ROOT/../shared/payloads/openshift-multi
export GOTOOLCHAIN=local GOFLAGS=-modcacherw

say() { echo "bench: $*" >&2; }
die() { say "$*"; exit 1; }

LOAD_AT_START=$(cut -d' ' -f1-3 /proc/loadavg)
OUT=$ROOT/target/bench/$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
RAW=$OUT/raw.txt
WORK=$(mktemp -d)
cleanup_fns=()
cleanup() {
  local f
  for f in "${cleanup_fns[@]}"; do "$f" || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

machine() {
  echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ); commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo ' (with uncommitted changes in src/)')"
  echo "- machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo) RAM"
  echo "- load average at start: $LOAD_AT_START (other engineers' builds share the 2 cores)"
  if [[ ${1:-} != divan ]]; then echo "- rounds: $ROUNDS, alternating order; medians over rounds"; fi
}

# median: reads numbers on stdin, prints their median.
median() {
  sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "nan"} else if (NR%2) {print a[(NR+1)/2]} else {print (a[NR/2]+a[NR/2+1])/2}}'
}

# field LINE KEY: the value of KEY=... in a key=value line.
field() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p" | head -n1; }

# record CASE TOOL METRIC VALUE: one raw measurement.
record() { echo "$1 $2 $3 $4" >>"$RAW"; }

# med CASE TOOL METRIC: the median of the recorded values.
med() { awk -v c="$1" -v t="$2" -v m="$3" '$1==c && $2==t && $3==m {print $4}' "$RAW" | median; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0 && a != "nan" && b != "nan") printf "%.1fx", a / b; else print "n/a" }'; }

now_ms() { echo $(( ${EPOCHREALTIME/./} / 1000 )); }

# build_before CARGO_ARGS...: the release build of commit $BEFORE, in the worktree
# target/bench-before, into target/bench-before-target.
build_before() {
  local wt=$ROOT/target/bench-before
  say "building $* at $BEFORE in $wt"
  if [[ ! -d $wt ]]; then git worktree add --detach "$wt" "$BEFORE" >&2; fi
  git -C "$wt" checkout -q --detach "$BEFORE"
  ln -sfn "$ROOT/../shared" "$ROOT/target/shared"
  (cd "$wt" && CARGO_TARGET_DIR=$ROOT/target/bench-before-target cargo build --release "$@") >&2
}

build_load_tools() {
  say "building loadbench and minicvo (release)"
  cargo build --release --example loadbench --bin minicvo >&2
  say "building hack/tools/cvoload"
  (cd hack/tools/cvoload && go build -o "$WORK/cvoload" .) >&2
  LOADBENCH=$ROOT/target/release/examples/loadbench
  MINICVO=$ROOT/target/release/minicvo
  BEFORE_BENCH=
  if [[ -n ${BEFORE:-} ]]; then
    build_before --example loadbench --bin minicvo
    BEFORE_BENCH=$ROOT/target/bench-before-target/release/examples/loadbench
    BEFORE_MINICVO=$ROOT/target/bench-before-target/release/minicvo
  fi
}

# timed CASE TOOL KIND CMD...: run CMD under /usr/bin/time, record wall ms and peak RSS, and the
# summary line's figures.
timed() {
  local c=$1 t=$2 kind=$3
  shift 3
  local start end line
  # Read the clock in this shell (no `$(now_ms)` fork around the process) to 0.1 ms.
  start=$EPOCHREALTIME
  if [[ $t == cli || $t == beforecli ]]; then
    /usr/bin/time -f 'rss_kib=%M' -o "$WORK/time" "$@" >/dev/null 2>&1
    line=
  else
    line=$(/usr/bin/time -f 'rss_kib=%M' -o "$WORK/time" "$@" | tail -n1)
  fi
  end=$EPOCHREALTIME
  echo "$c $t $kind: $line $(cat "$WORK/time")" >>"$OUT/lines.txt"
  record "$c" "$t" "${kind}_process_ms" "$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", (e - s) * 1000 }')"
  record "$c" "$t" "${kind}_rss_kib" "$(sed -n 's/^rss_kib=//p' "$WORK/time")"
  case $line in
    summary*)
      record "$c" "$t" "${kind}_first_ms" "$(field "$line" first_ms)"
      record "$c" "$t" "${kind}_median_ms" "$(field "$line" median_ms)"
      local alloc
      alloc=$(field "$line" median_alloc_mib)
      if [[ -n $alloc ]]; then record "$c" "$t" "${kind}_alloc_mib" "$alloc"; fi
      ;;
  esac
}

# next_of DIR: a copy of payload DIR in which every third manifest file (in name order) ends
# with one more comment line, as if the next release had changed a third of the files: the
# `lint --previous` case where the two payloads share only some files.
next_of() {
  local p=$1 next
  next="$WORK/next-$(basename "$p")"
  if [[ ! -d $next ]]; then
    cp -r "$p" "$next"
    find "$next" -name '*.yaml' | LC_ALL=C sort | awk 'NR % 3 == 0' | while read -r f; do
      printf '\n# changed in the next release\n' >>"$f"
    done
  fi
  echo "$next"
}

load_round() {
  local c=$1 p=$2 r=$3
  local -a sides=(go rust)
  ((r % 2)) && sides=(rust go)
  local s
  for s in "${sides[@]}"; do
    case $s in
      go)
        timed "$c" cvo cold "$WORK/cvoload" -n 1 "$p"
        timed "$c" cvo warm "$WORK/cvoload" -n "$WARM" "$p"
        ;;
      rust)
        timed "$c" minicvo cold "$LOADBENCH" load -n 1 "$p"
        timed "$c" minicvo warm "$LOADBENCH" load -n "$WARM" "$p"
        timed "$c" cli cold "$MINICVO" plan -q -o json "$p"
        timed "$c" cli lint "$MINICVO" lint -q --previous "$p" "$p"
        timed "$c" cli lintnext "$MINICVO" lint -q --previous "$p" "$(next_of "$p")"
        if [[ -n $BEFORE_BENCH ]]; then
          timed "$c" before cold "$BEFORE_BENCH" load -n 1 "$p"
          timed "$c" before warm "$BEFORE_BENCH" load -n "$WARM" "$p"
          timed "$c" beforecli cold "$BEFORE_MINICVO" plan -q -o json "$p"
          timed "$c" beforecli lint "$BEFORE_MINICVO" lint -q --previous "$p" "$p"
          timed "$c" beforecli lintnext "$BEFORE_MINICVO" lint -q --previous "$p" "$(next_of "$p")"
        fi
        ;;
    esac
  done
}

# before_after WHAT BTOOL BMETRIC ATOOL AMETRIC RSSTOOL: a before/after table of one metric per
# case, with the peak RSS of the before tool and of RSSTOOL.
before_after() {
  local what=$1 bt=$2 bm=$3 at=$4 am=$5 rt=$6
  echo "| payload | before $what | after | speed-up | before peak RSS MiB | after peak RSS MiB |"
  echo "|---|---|---|---|---|---|"
  for cs in "${cases[@]}"; do
    local c=${cs%%:*} b a brss arss
    b=$(med "$c" "$bt" "$bm")
    a=$(med "$c" "$at" "$am")
    # The peak RSS of the same process kind (cold for the loadbench, lint for lint).
    local rk=cold_rss_kib
    [[ $bm == *_process_ms ]] && rk=${bm%_process_ms}_rss_kib
    brss=$(med "$c" "$bt" "$rk")
    arss=$(med "$c" "$rt" "$rk")
    printf '| %s | %s | %s | **%s** | %.0f | %.0f |\n' "$c" "$b" "$a" "$(ratio "$b" "$a")" \
      "$(awk -v k="$brss" 'BEGIN{print k/1024}')" "$(awk -v k="$arss" 'BEGIN{print k/1024}')"
  done
}

bench_load() {
  build_load_tools
  [[ -d $CORPUS ]] || die "corpus not found: $CORPUS"
  local -a cases=("openshift-multi:$CORPUS")
  local n
  for n in $SIZES; do
    say "generating a synthetic payload of $n objects"
    "$LOADBENCH" gen "$n" "$WORK/synth-$n" >&2
    cases+=("synthetic-$n:$WORK/synth-$n")
  done
  local r cs
  for ((r = 0; r < ROUNDS; r++)); do
    for cs in "${cases[@]}"; do
      say "load round $((r + 1))/$ROUNDS: ${cs%%:*}"
      load_round "${cs%%:*}" "${cs#*:}" "$r"
    done
  done

  echo "## Load + plan"
  echo
  machine
  echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- minicvo: \`loadbench load\` (load + plan, updating mode) and \`minicvo plan -q -o json\`; CVO: \`cvoload\` (LoadUpdate: YAMLOrJSONDecoder into Unstructured, load only, no graph)"
  echo
  echo "| payload | CVO warm ms | minicvo warm ms | ratio | CVO cold process ms | minicvo cold process ms | ratio | \`minicvo plan -o json\` ms | CVO ÷ plan | \`minicvo lint --previous P P\` ms | 2 × CVO ÷ lint | CVO peak RSS MiB | loadbench peak RSS MiB | \`plan -o json\` peak RSS MiB | CVO alloc MiB/load |"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
  local -a lints=()
  for cs in "${cases[@]}"; do
    local c=${cs%%:*}
    local gw rw gc rc cli grss rrss crss galloc
    gw=$(med "$c" cvo warm_median_ms)
    rw=$(med "$c" minicvo warm_median_ms)
    gc=$(med "$c" cvo cold_process_ms)
    rc=$(med "$c" minicvo cold_process_ms)
    cli=$(med "$c" cli cold_process_ms)
    grss=$(med "$c" cvo cold_rss_kib)
    rrss=$(med "$c" minicvo cold_rss_kib)
    crss=$(med "$c" cli cold_rss_kib)
    galloc=$(med "$c" cvo warm_alloc_mib)
    local lint2
    lint2=$(med "$c" cli lint_process_ms)
    lints+=("$c $lint2 $(med "$c" cli lintnext_process_ms) $(med "$c" cli lint_rss_kib) $gc")
    printf '| %s | %s | %s | **%s** | %s | %s | **%s** | %s | **%s** | %s | **%s** | %.0f | %.0f | %.0f | %s |\n' \
      "$c" "$gw" "$rw" "$(ratio "$gw" "$rw")" "$gc" "$rc" "$(ratio "$gc" "$rc")" "$cli" "$(ratio "$gc" "$cli")" \
      "$lint2" "$(ratio "$(awk -v g="$gc" 'BEGIN { print 2 * g }')" "$lint2")" \
      "$(awk -v k="$grss" 'BEGIN{print k/1024}')" "$(awk -v k="$rrss" 'BEGIN{print k/1024}')" \
      "$(awk -v k="$crss" 'BEGIN{print k/1024}')" "$galloc"
  done
  echo
  echo "\`minicvo lint -q --previous OLD NEW\`: NEW = OLD (every file shared), and NEW = OLD with a third of its files changed (\`next_of\`):"
  echo
  echo "| payload | 2 × CVO ms | lint P P ms | 2 × CVO ÷ lint | lint P P' ms | 2 × CVO ÷ lint | lint peak RSS MiB |"
  echo "|---|---|---|---|---|---|---|"
  local l
  for l in "${lints[@]}"; do
    read -r c a b rss gc <<<"$l"
    local two
    two=$(awk -v g="$gc" 'BEGIN { print 2 * g }')
    printf '| %s | %s | %s | **%s** | %s | **%s** | %.0f |\n' "$c" "$two" "$a" "$(ratio "$two" "$a")" "$b" "$(ratio "$two" "$b")" \
      "$(awk -v k="$rss" 'BEGIN{print k/1024}')"
  done
  if [[ -n $BEFORE_BENCH ]]; then
    echo
    echo "Before/after ($BEFORE vs HEAD), same rounds:"
    echo
    before_after "warm ms" before warm_median_ms minicvo warm_median_ms minicvo
    echo
    before_after "\`plan -o json\` ms" beforecli cold_process_ms cli cold_process_ms cli
    echo
    before_after "\`lint --previous P P\` ms" beforecli lint_process_ms cli lint_process_ms cli
    echo
    before_after "\`lint --previous P P'\` ms" beforecli lintnext_process_ms cli lintnext_process_ms cli
  fi
  echo
  echo "Raw measurements: $RAW"
}

bench_divan() {
  echo "## divan (cargo bench --bench load_plan)"
  echo
  machine divan
  echo
  echo '```'
  cargo bench --bench load_plan 2>/dev/null | sed 's/[[:space:]]*$//'
  echo '```'
}

# CPU seconds (user + system) used so far by the test plane's etcd and kube-apiserver.
plane_cpu() {
  local p t=0
  for p in etcd kube-apiserver; do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$(<"$TESTPLANE_DIR/$p.pid")/stat")))
  done
  awk -v t="$t" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }'
}

# CPU seconds (user + system) used so far by the test plane's kube-controller-manager (it
# reacts to the Deployments and ServiceAccounts; not part of the floor, reported beside it).
kcm_cpu() {
  awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' \
    "/proc/$(<"$TESTPLANE_DIR/kube-controller-manager.pid")/stat" 2>/dev/null || echo nan
}

# apply_run CASE TOOL PAYLOAD_OR_FILE: one apply, recording wall ms, requests, peak RSS, the
# client's CPU seconds and the plane's (kube-apiserver + etcd) CPU seconds. TOOL is minicvo
# (--apply-strategy server-side), minicvo-cvo (--apply-strategy cvo, the default) or kubectl.
apply_run() {
  local c=$1 t=$2 src=$3 start end cpu0 cpu1 kcm0 kcm1 requests
  local kc=${APPLY_KUBECONFIG:-$KUBECONFIG}
  # Both strategies by name: the default changed once, and a bench must not follow it silently.
  local -a strategy=(--apply-strategy server-side)
  [[ $t == minicvo-cvo ]] && strategy=(--apply-strategy cvo)
  cpu0=$(plane_cpu)
  kcm0=$(kcm_cpu)
  start=$(now_ms)
  case $t in
    minicvo | minicvo-cvo)
      KUBECONFIG=$kc /usr/bin/time -f 'rss_kib=%M cpu_s=%U+%S' -o "$WORK/time" "$MINICVO" apply "$src" \
        "${strategy[@]}" --no-progress -q --no-cluster-version -o json >"$WORK/apply.json" ||
        die "minicvo apply failed: $(head -c 2000 "$WORK/apply.json")"
      requests=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"]; print(d["requests"])' "$WORK/apply.json")
      ;;
    kubectl)
      KUBECONFIG=$kc /usr/bin/time -f 'rss_kib=%M cpu_s=%U+%S' -o "$WORK/time" "$KUBECTL" apply --server-side -f "$src" -v=6 \
        >/dev/null 2>"$WORK/kubectl.log" || die "kubectl apply failed: $(tail -n 5 "$WORK/kubectl.log")"
      requests=$(grep -c '"Response"' "$WORK/kubectl.log")
      ;;
  esac
  end=$(now_ms)
  cpu1=$(plane_cpu)
  kcm1=$(kcm_cpu)
  record "$c" "$t" wall_ms $((end - start))
  record "$c" "$t" requests "$requests"
  record "$c" "$t" rss_kib "$(sed -n 's/^rss_kib=\([0-9]*\).*/\1/p' "$WORK/time")"
  record "$c" "$t" client_cpu_s "$(sed -n 's/.*cpu_s=\([0-9.]*\)+\([0-9.]*\).*/\1 \2/p' "$WORK/time" | awk '{ print $1 + $2 }')"
  record "$c" "$t" plane_cpu_s "$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { printf "%.2f", b - a }')"
  record "$c" "$t" kcm_cpu_s "$(awk -v a="$kcm0" -v b="$kcm1" 'BEGIN { printf "%.2f", b - a }')"
  echo "$c $t: $((end - start)) ms, $requests requests, plane cpu $cpu0 -> $cpu1 s, $(cat "$WORK/time")" >>"$OUT/lines.txt"
}

start_plane() {
  local bin
  bin=$(bash hack/build-testplane.sh | tail -n 1)
  KUBECTL=$bin/kubectl
  say "starting a fresh test control plane"
  local env_lines
  env_lines=$(TESTPLANE_BIN=$bin TESTPLANE_WATCH_PID=$$ bash hack/testplane.sh start)
  eval "$env_lines"
  export KUBECONFIG TESTPLANE_DIR
  cleanup_fns+=(stop_plane)
}

stop_plane() {
  [[ -n ${TESTPLANE_DIR:-} ]] && bash hack/testplane.sh stop "$TESTPLANE_DIR" >&2
}

# apply_rounds SUFFIX: ROUNDS rounds of first apply and re-apply by each tool (minicvo with
# both apply strategies, kubectl), the order rotating from round to round, recorded as cases
# apply$SUFFIX and reapply$SUFFIX.
apply_rounds() {
  local x=$1 r s i
  local -a tools=(minicvo minicvo-cvo kubectl)
  for ((r = 0; r < ROUNDS; r++)); do
    say "apply round $((r + 1))/$ROUNDS${x:+ ($x)}: $APPLY_N objects each"
    "$LOADBENCH" gen "$APPLY_N" "$WORK/m$x$r" --replicas 0 --prefix "m$x-$r" >&2
    "$LOADBENCH" gen "$APPLY_N" "$WORK/c$x$r" --replicas 0 --prefix "c$x-$r" >&2
    "$LOADBENCH" gen "$APPLY_N" "$WORK/k$x$r" --replicas 0 --prefix "k$x-$r" >&2
    "$MINICVO" render "$WORK/k$x$r" -o yaml >"$WORK/k$x$r.yaml" 2>/dev/null
    for ((i = 0; i < ${#tools[@]}; i++)); do
      s=${tools[$(((i + r) % ${#tools[@]}))]}
      case $s in
        minicvo)
          apply_run "apply$x" minicvo "$WORK/m$x$r"
          apply_run "reapply$x" minicvo "$WORK/m$x$r"
          ;;
        minicvo-cvo)
          apply_run "apply$x" minicvo-cvo "$WORK/c$x$r"
          apply_run "reapply$x" minicvo-cvo "$WORK/c$x$r"
          ;;
        kubectl)
          apply_run "apply$x" kubectl "$WORK/k$x$r.yaml"
          apply_run "reapply$x" kubectl "$WORK/k$x$r.yaml"
          ;;
      esac
    done
  done
}

# start_delay_proxy MS: examples/delayproxy in front of the plane with MS of round-trip time;
# sets APPLY_KUBECONFIG to a copy of the kubeconfig that goes through it.
start_delay_proxy() {
  local upstream
  upstream=$(sed -n 's|^ *server: https://||p' "$KUBECONFIG" | head -n1)
  "$ROOT/target/release/examples/delayproxy" --upstream "$upstream" --delay-ms "$1" >"$WORK/proxy.out" &
  DELAY_PROXY=$!
  cleanup_fns+=(stop_delay_proxy)
  local i
  for ((i = 0; i < 50; i++)); do
    grep -q '^listening' "$WORK/proxy.out" 2>/dev/null && break
    sleep 0.1
  done
  local addr
  addr=$(sed -n 's/^listening //p' "$WORK/proxy.out")
  [[ -n $addr ]] || die "delayproxy did not start"
  APPLY_KUBECONFIG=$WORK/kubeconfig-delay-$1
  sed "s|server: https://$upstream|server: https://$addr|" "$KUBECONFIG" >"$APPLY_KUBECONFIG"
}

stop_delay_proxy() {
  [[ -n ${DELAY_PROXY:-} ]] && kill "$DELAY_PROXY" 2>/dev/null
  DELAY_PROXY=
  unset APPLY_KUBECONFIG
}

# Creates the namespaces of the corpus's objects (on OpenShift the installer and other
# operators create them).
create_corpus_namespaces() {
  local ns
  for ns in $("$MINICVO" render "$CORPUS" -o json 2>/dev/null | python3 -c '
import json, sys
objs = json.load(sys.stdin)["items"]
print(" ".join(sorted({o["metadata"]["namespace"] for o in objs if o["metadata"].get("namespace")})))'); do
    "$KUBECTL" create namespace "$ns" >/dev/null 2>&1 || true
  done
}

bench_apply() {
  say "building minicvo, loadbench and waitbench (release)"
  cargo build --release --bin minicvo --example loadbench --example waitbench --example delayproxy >&2
  LOADBENCH=$ROOT/target/release/examples/loadbench
  MINICVO=$ROOT/target/release/minicvo
  start_plane
  local kind_counts="ConfigMaps, Deployments (replicas 0), ServiceAccounts, Roles, RoleBindings, ClusterRoles, ClusterRoleBindings"

  # Warm-up (not recorded): discovery caches, etcd, both tools' first connection.
  "$LOADBENCH" gen 100 "$WORK/warm-m" --replicas 0 --prefix warm-m >&2
  "$LOADBENCH" gen 100 "$WORK/warm-k" --replicas 0 --prefix warm-k >&2
  "$MINICVO" render "$WORK/warm-k" -o yaml >"$WORK/warm-k.yaml" 2>/dev/null
  "$MINICVO" apply "$WORK/warm-m" --no-progress -q --no-cluster-version -o json >/dev/null
  "$KUBECTL" apply --server-side -f "$WORK/warm-k.yaml" >/dev/null 2>&1

  apply_rounds ""
  if [[ -n $LATENCY_MS ]]; then
    start_delay_proxy "$LATENCY_MS"
    apply_rounds "-rtt$LATENCY_MS"
    stop_delay_proxy
  fi

  if [[ ${APPLY_EXTRAS:-1} == 0 ]]; then
    apply_report
    return
  fi
  say "ClusterOperator wait latency"
  local line
  "$ROOT/target/release/examples/waitbench" --operators "${WAIT_OPERATORS:-10}" >"$WORK/wait.txt"
  while read -r line; do
    case $line in
      operator=*) record wait minicvo latency_ms "$(field "$line" latency_ms)" ;;
    esac
  done <"$WORK/wait.txt"
  cat "$WORK/wait.txt" >>"$OUT/lines.txt"

  say "memory of minicvo apply on openshift-multi (initializing, stub CRDs, simulated operators)"
  # The namespaces the installer and other operators create on OpenShift.
  create_corpus_namespaces
  "$MINICVO" simulate "$CORPUS" --release-version 4.17.0 -q >"$WORK/simulate.log" 2>&1 &
  local sim=$!
  local start end
  start=$(now_ms)
  /usr/bin/time -f 'rss_kib=%M' -o "$WORK/time" "$MINICVO" apply "$CORPUS" --stub-missing-crds \
    --release-version 4.17.0 --mode initializing --wait-timeout 120s --no-progress -q -o json \
    >"$WORK/multi.json" || say "openshift-multi apply reported failures (see $OUT/multi.json)"
  end=$(now_ms)
  kill "$sim" 2>/dev/null || true
  wait "$sim" 2>/dev/null || true
  cp "$WORK/multi.json" "$OUT/multi.json"
  local multi
  multi=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
c = {k: v for k, v in d["counts"].items() if v}
print("ok=%s tasks=%d requests=%d seconds=%.1f counts=%s" % (d["ok"], len(d["tasks"]), d["requests"], d["seconds"], c))' "$WORK/multi.json")

  apply_report
  echo
  echo "ClusterOperator wait latency (status write → next run-level's first request), $(awk '$1=="wait"' "$RAW" | wc -l) waits: median $(med wait minicvo latency_ms) ms (min $(awk '$1=="wait" {print $4}' "$RAW" | sort -g | head -n1), max $(awk '$1=="wait" {print $4}' "$RAW" | sort -g | tail -n1))."
  echo
  echo "\`minicvo apply\` of openshift-multi (initializing, --stub-missing-crds, operators played by \`minicvo simulate\`): peak RSS $(awk -v k="$(sed -n 's/^rss_kib=\([0-9]*\).*/\1/p' "$WORK/time")" 'BEGIN{printf "%.0f", k/1024}') MiB, wall $((end - start)) ms; $multi"
  echo
  echo "Raw measurements: $RAW"
}

# apply_report: the tables of the apply rounds.
apply_report() {
  local kind_counts="ConfigMaps, Deployments (replicas 0), ServiceAccounts, Roles, RoleBindings, ClusterRoles, ClusterRoleBindings"
  per() { awk -v a="$1" -v n="$APPLY_N" 'BEGIN { printf "%.3f", a / n }'; }
  mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }
  # floor CASE TOOL: the plane's CPU seconds during the tool's run divided by the cores: no
  # client can finish before the API server and etcd have done that work.
  local cores
  cores=$(nproc)
  floor_ms() { awk -v s="$(med "$1" "$2" plane_cpu_s)" -v n="$cores" 'BEGIN { printf "%.0f", s * 1000 / n }'; }
  over_floor() { awk -v w="$(med "$1" "$2" wall_ms)" -v f="$(floor_ms "$1" "$2")" 'BEGIN { if (f > 0) printf "%.2fx", w / f; else print "n/a" }'; }
  local -a tools=(minicvo minicvo-cvo kubectl)
  local c t row

  echo "## Apply"
  echo
  machine
  echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- payload: $APPLY_N objects over 20 components and 5 run-levels ($kind_counts), a fresh copy (own names) per tool and round; \`minicvo apply\` (updating mode, default parallelism 16, release build) with \`--apply-strategy server-side\` and \`--apply-strategy cvo\` (the default), vs \`kubectl apply --server-side -f\` of the same objects rendered by \`minicvo render\`; the three tools' order rotates from round to round"
  echo "- floor: the CPU seconds kube-apiserver and etcd spent during the run (/proc/PID/stat utime+stime, before and after) ÷ $cores cores; the ratio is the tool's wall time over the floor of its own run (1.00x: the client added no time beyond the server's work)"
  echo
  echo "| loopback (medians) | minicvo server-side | minicvo cvo | kubectl --server-side | kubectl ÷ minicvo server-side | kubectl ÷ minicvo cvo |"
  echo "|---|---|---|---|---|---|"
  for c in apply reapply; do
    local what="first apply"
    [[ $c == reapply ]] && what="re-apply unchanged"
    local ws=() ; for t in "${tools[@]}"; do ws+=("$(med "$c" "$t" wall_ms)"); done
    echo "| $what, wall ms | ${ws[0]} | ${ws[1]} | ${ws[2]} | **$(ratio "${ws[2]}" "${ws[0]}")** | **$(ratio "${ws[2]}" "${ws[1]}")** |"
    row="| $what, requests per object"; for t in "${tools[@]}"; do row+=" | $(per "$(med "$c" "$t" requests)")"; done; echo "$row | | |"
    row="| $what, kube-apiserver + etcd CPU s"; for t in "${tools[@]}"; do row+=" | $(med "$c" "$t" plane_cpu_s)"; done; echo "$row | | |"
    row="| $what, floor ms (CPU s ÷ $cores)"; for t in "${tools[@]}"; do row+=" | $(floor_ms "$c" "$t")"; done; echo "$row | | |"
    row="| $what, **wall ÷ floor**"; for t in "${tools[@]}"; do row+=" | **$(over_floor "$c" "$t")**"; done; echo "$row | | |"
    row="| $what, client CPU s"; for t in "${tools[@]}"; do row+=" | $(med "$c" "$t" client_cpu_s)"; done; echo "$row | | |"
    row="| $what, kube-controller-manager CPU s"; for t in "${tools[@]}"; do row+=" | $(med "$c" "$t" kcm_cpu_s)"; done; echo "$row | | |"
  done
  row="| client peak RSS MiB (first apply)"; for t in "${tools[@]}"; do row+=" | $(mib "$(med apply "$t" rss_kib)")"; done; echo "$row | | |"
  if [[ -n $LATENCY_MS ]]; then
    local x=-rtt$LATENCY_MS
    echo
    echo "| $LATENCY_MS ms round trip (delayproxy), medians | minicvo server-side | minicvo cvo | kubectl --server-side | kubectl ÷ minicvo server-side | kubectl ÷ minicvo cvo |"
    echo "|---|---|---|---|---|---|"
    for c in apply reapply; do
      local what="first apply"
      [[ $c == reapply ]] && what="re-apply unchanged"
      local ws=() ; for t in "${tools[@]}"; do ws+=("$(med "$c$x" "$t" wall_ms)"); done
      echo "| $what, wall ms | ${ws[0]} | ${ws[1]} | ${ws[2]} | **$(ratio "${ws[2]}" "${ws[0]}")** | **$(ratio "${ws[2]}" "${ws[1]}")** |"
      row="| $what, requests per object"; for t in "${tools[@]}"; do row+=" | $(per "$(med "$c$x" "$t" requests)")"; done; echo "$row | | |"
      row="| $what, wall ÷ floor"; for t in "${tools[@]}"; do row+=" | $(over_floor "$c$x" "$t")"; done; echo "$row | | |"
    done
  fi
}

# lint with and without the schema rule, ROUNDS rounds, order alternating.
bench_lint() {
  say "building minicvo (release)"
  cargo build --release --bin minicvo >&2
  local bin=$ROOT/target/release/minicvo i s start end
  for ((i = 0; i < ROUNDS; i++)); do
    local sides=(schema noschema)
    ((i % 2)) && sides=(noschema schema)
    for s in "${sides[@]}"; do
      local extra=()
      [[ $s == noschema ]] && extra=(--no-schema)
      start=$(now_ms)
      /usr/bin/time -f 'rss_kib=%M' -o "$WORK/time" "$bin" lint "$CORPUS" --all-profiles -q "${extra[@]}" >/dev/null 2>&1 || true
      end=$(now_ms)
      record lint "$s" wall_ms $((end - start))
      record lint "$s" rss_kib "$(sed -n 's/^rss_kib=//p' "$WORK/time")"
    done
  done
  local a b
  a=$(med lint schema wall_ms)
  b=$(med lint noschema wall_ms)
  echo "### lint: schema validation on and off"
  echo
  machine
  echo
  echo "\`minicvo lint ../shared/payloads/openshift-multi --all-profiles\` (4 profiles), release build:"
  echo
  echo "| | with schema validation | --no-schema | ratio |"
  echo "|---|---|---|---|"
  echo "| wall ms (median) | $a | $b | **$(ratio "$a" "$b")** |"
  echo "| peak RSS MiB (median) | $(awk -v k="$(med lint schema rss_kib)" 'BEGIN{printf "%.0f", k/1024}') | $(awk -v k="$(med lint noschema rss_kib)" 'BEGIN{printf "%.0f", k/1024}') | |"
  echo
  echo "Raw measurements: $RAW"
}

# e2e upgrade of openshift-multi, ROUNDS times on one fresh plane (each with --clean): the wall
# time per phase split into requests in flight, ClusterOperator waits with no request in
# flight, and idle time (between tasks: run-level barriers, the engine, the client).
bench_e2e() {
  say "building minicvo (release)"
  cargo build --release --bin minicvo >&2
  MINICVO=$ROOT/target/release/minicvo
  start_plane
  local r
  echo "## e2e upgrade of openshift-multi"
  echo
  machine
  echo "- \`minicvo e2e upgrade --from openshift-multi --to openshift-multi --from-version 4.16.0 --to-version 4.17.0 --stub-missing-crds --create-missing-namespaces --clean ${E2E_ARGS:-}\`, release build, one fresh test control plane"
  echo
  for ((r = 0; r < ROUNDS; r++)); do
    say "e2e round $((r + 1))/$ROUNDS"
    local start end
    start=$(now_ms)
    # shellcheck disable=SC2086
    "$MINICVO" e2e upgrade --from "$CORPUS" --to "$CORPUS" --from-version 4.16.0 --to-version 4.17.0 \
      --stub-missing-crds --create-missing-namespaces --clean --no-progress -q -o json \
      --timeline "$OUT/timeline-$r.json" --trace "$OUT/trace-$r.json" ${E2E_ARGS:-} >"$OUT/e2e-$r.json" ||
      say "e2e round $r reported failures (see $OUT/e2e-$r.json)"
    end=$(now_ms)
    echo "### round $((r + 1)): $((end - start)) ms as a process"
    echo
    echo '```'
    HACK_DIR=$ROOT/hack python3 - "$OUT/timeline-$r.json" "$OUT/e2e-$r.json" <<'PY'
import json, os, sys
from collections import defaultdict

sys.path.insert(0, os.environ["HACK_DIR"])
from timeline_split import intervals, split, sweep

tl = json.load(open(sys.argv[1]))["events"]
res = json.load(open(sys.argv[2]))
first = min((e.get("start") or e["t"]) for e in tl) if tl else 0.0
print(f"total {res['seconds']:.2f}s in the harness; before the first task (load, --clean, stand-ins) {first:.2f}s; ok={res['ok']}")
for r in res["runs"]:
    print(f"{r['phase']}: {r['seconds']:.2f}s, {r['requests']} requests, simulator {r['simulatorRequests']} requests / {r['simulatorReports']} status writes")

for phase in ("install", "upgrade"):
    got = split(tl, phase)
    if got is None:
        continue
    ev = [e for e in tl if e["phase"] == phase]
    lo, hi, br = got
    print(f"{phase}: span {hi-lo:.2f}s (first task start {lo:.2f}s, last event {hi:.2f}s); "
          + ", ".join(f"{k} {v:.2f}s" for k, v in sorted(br.items())))
    reqlat = sorted(e["t"] - e["start"] for e in ev
                    if e["action"] in ("apply", "delete") and e.get("start") is not None)
    if reqlat:
        print(f"  tasks with a write: {len(reqlat)}, task time median {reqlat[len(reqlat)//2]*1000:.1f} ms, p90 {reqlat[int(len(reqlat)*.9)]*1000:.1f} ms, max {reqlat[-1]*1000:.0f} ms")
    # per run-level
    byrl = defaultdict(list)
    for e in ev:
        if e.get("runLevel") is not None and e["action"] != "observed":
            byrl[e["runLevel"]].append(e)
    rows = []
    for rl, es in sorted(byrl.items(), key=lambda x: min((e.get("start") or e["t"]) for e in x[1])):
        a = min((e.get("start") or e["t"]) for e in es)
        b = max(e["t"] for e in es)
        br = sweep(intervals(es), a, b)
        rows.append((rl, a, b, br, sum(1 for e in es if e["action"] in ("apply","delete")), sum(1 for e in es if e["action"]=="wait-done")))
    if phase == "upgrade" or len(sys.argv) > 3:
        for rl, a, b, br, n, w in rows:
            if b - a > 0.02:
                print(f"  run-level {rl}: {a:.2f}-{b:.2f} ({b-a:.2f}s) writes {n} waits {w}: " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(br.items())))
PY
    echo '```'
    echo
  done
  echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "Raw: $OUT (timelines, traces, results)"
}

# bench_operator: the operator's figures on openshift-multi (see the header).
bench_operator() {
  say "building minicvo (release)"
  cargo build --release --bin minicvo >&2
  MINICVO=$ROOT/target/release/minicvo
  start_plane
  # The corpus has no release-metadata: two payload roots of symlinks, versions 4.17.0 and
  # 4.17.1, each with its release-metadata and an image-references named after its version.
  local v f
  for v in 4.17.0 4.17.1; do
    mkdir -p "$WORK/payloads/$v/release-manifests"
    for f in "$CORPUS"/release-manifests/*; do
      [[ $(basename "$f") == image-references ]] || ln -s "$f" "$WORK/payloads/$v/release-manifests/"
    done
    printf '{"kind":"cincinnati-metadata-v0","version":"%s"}' "$v" >"$WORK/payloads/$v/release-manifests/release-metadata"
    sed "s/^kind: ImageStream$/kind: ImageStream\nmetadata:\n  name: \"$v\"/" "$CORPUS/release-manifests/image-references" \
      >"$WORK/payloads/$v/release-manifests/image-references"
  done
  create_corpus_namespaces
  "$MINICVO" simulate "$CORPUS" --release-version 4.17.0 -q >"$WORK/simulate.log" 2>&1 &
  local sim=$!
  say "operator: install of openshift-multi 4.17.0"
  local start
  start=$(now_ms)
  "$MINICVO" -v operator --payloads "$WORK/payloads" --release 4.17.0 --stub-missing-crds \
    --resync-interval 3s --no-resync-jitter --pass-timeout 120s --no-leader-elect --wait-timeout 120s 2>"$OUT/operator.log" &
  local op=$!
  cv_field() { "$KUBECTL" get clusterversion version -o "jsonpath=$1" 2>/dev/null || true; }
  until [[ $(cv_field '{.status.history[0].state}') == Completed ]]; do
    kill -0 "$op" 2>/dev/null || die "the operator exited (see $OUT/operator.log)"
    ! grep -q ' refused ' "$OUT/operator.log" || die "the operator refused its release (see $OUT/operator.log)"
    sleep 0.2
  done
  local installed=$(($(now_ms) - start))
  say "operator: $ROUNDS reconcile passes"
  until (($(grep -c 'reconciling pass of 4.17.0 completed' "$OUT/operator.log") >= ROUNDS + 1)); do sleep 0.5; done
  local rss hwm
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$op/status")
  hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$op/status")
  grep -o 'reconciling pass of 4.17.0 completed in [0-9.]*s' "$OUT/operator.log" | tail -n "$ROUNDS" |
    sed 's/.* in \([0-9.]*\)s/\1/' | while read -r t; do record reconcile operator ms "$(awk -v t="$t" 'BEGIN {printf "%.0f", t * 1000}')"; done
  say "operator: time from kubectl patch to the first write of the update"
  local patched first
  patched=$(now_ms)
  "$KUBECTL" patch clusterversion version --type merge -p '{"spec":{"desiredUpdate":{"version":"4.17.1"}}}' >/dev/null
  until [[ $(cv_field '{.status.history[0].version}') == 4.17.1 ]]; do sleep 0.01; done
  first=$(($(now_ms) - patched))
  kill -TERM "$op"
  local term
  term=$(now_ms)
  wait "$op" || true
  term=$(($(now_ms) - term))
  kill "$sim" 2>/dev/null || true
  wait "$sim" 2>/dev/null || true
  say "baseline: $ROUNDS one-shot minicvo apply --mode reconciling of the same payload"
  local r t0
  for ((r = 0; r < ROUNDS; r++)); do
    t0=$(now_ms)
    "$MINICVO" apply "$WORK/payloads/4.17.0" --mode reconciling --no-cluster-version --stub-missing-crds \
      --no-progress -q -o json >"$WORK/reconcile-$r.json" || say "one-shot reconcile $r reported failures"
    record reconcile apply ms $(($(now_ms) - t0))
  done
  echo "## minicvo operator on openshift-multi"
  echo
  machine
  echo "- \`minicvo operator --payloads DIR --release 4.17.0 --stub-missing-crds --resync-interval 3s --no-resync-jitter --pass-timeout 120s --no-leader-elect\`, release build, one fresh test control plane, operators played by \`minicvo simulate\`"
  echo
  echo "| figure | value |"
  echo "|---|---|"
  echo "| install (initializing pass, process start → history Completed) | $installed ms |"
  echo "| reconciling pass, median of $ROUNDS (operator) | $(med reconcile operator ms) ms |"
  echo "| one-shot \`minicvo apply --mode reconciling\` as a process, median of $ROUNDS (baseline) | $(med reconcile apply ms) ms |"
  echo "| ratio one-shot ÷ operator pass | $(awk -v a="$(med reconcile apply ms)" -v b="$(med reconcile operator ms)" 'BEGIN {printf "%.2fx", a / b}') |"
  echo "| idle operator RSS after $((ROUNDS + 1)) reconcile passes | $((rss / 1024)) MiB (peak $((hwm / 1024)) MiB) |"
  echo "| \`kubectl patch\` of desiredUpdate → first write of the update (history entry) | $first ms |"
  echo "| SIGTERM → exit | $term ms |"
  echo
  echo "- load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "Raw: $OUT"
}

# bench_floor: the install's and upgrade's wall time against their floors (see the header).
# Cases: openshift-multi (install and upgrade), and with FLOOR_SYNTH=N (10000 by default, ""
# for none) a synthetic payload of N objects (its install; its upgrade to itself has nothing
# to write).
bench_floor() {
  local profile=${FLOOR_PROFILE:-release} dir=$ROOT/target/release
  if [[ -n ${FLOOR_BUILD_DIR:-} ]]; then
    dir=$FLOOR_BUILD_DIR
    profile="prebuilt ($dir)"
    local f
    for f in minicvo examples/floor examples/loadbench; do
      [[ -x $dir/$f ]] || die "FLOOR_BUILD_DIR: no $dir/$f"
    done
  else
    say "building minicvo, the floor tool and loadbench ($profile)"
    if [[ $profile == release ]]; then
      cargo build --release --bin minicvo --example floor --example loadbench >&2
    else
      dir=$ROOT/target/debug
      cargo build --bin minicvo --example floor --example loadbench >&2
    fi
  fi
  FLOOR=$dir/examples/floor
  local -a tools=(after)
  declare -A bins=([after]=$dir/minicvo)
  if [[ -n ${BEFORE_BIN:-} ]]; then
    bins[before]=$BEFORE_BIN
    tools=(before after)
  elif [[ -n ${BEFORE:-} ]]; then
    build_before --bin minicvo
    bins[before]=$ROOT/target/bench-before-target/release/minicvo
    tools=(before after)
  fi
  # CASE:PAYLOAD:FROM:TO (TO empty: the install only). multi-instant is openshift-multi with
  # simulated pods that start and become ready at once (`--pods '*=start:0s,ready:0s'`): its
  # operators report as soon as their workloads carry the new template, as the floor's do.
  local -a cases=("multi:$CORPUS:4.16.0:4.17.0")
  if [[ ${FLOOR_INSTANT:-1} == 1 ]]; then cases+=("multi-instant:$CORPUS:4.16.0:4.17.0"); fi
  local synth=${FLOOR_SYNTH-10000}
  if [[ -n $synth ]]; then
    say "generating a synthetic payload of $synth objects"
    "$dir/examples/loadbench" gen "$synth" "$WORK/synth-$synth" >&2
    cases+=("synth:$WORK/synth-$synth:4.99.0-synthetic:")
  fi
  start_plane
  local -a pids=(--cpu-pid "$(<"$TESTPLANE_DIR/etcd.pid")" --cpu-pid "$(<"$TESTPLANE_DIR/kube-apiserver.pid")")
  local r t cs c payload from to order cpu0 cpu1 start end line
  for ((r = 0; r < ROUNDS; r++)); do
    for cs in "${cases[@]}"; do
      IFS=: read -r c payload from to <<<"$cs"
      order=("${tools[@]}")
      if ((r % 2)) && ((${#tools[@]} == 2)); then order=(after before); fi
      for t in "${order[@]}"; do
        say "round $((r + 1))/$ROUNDS: $c: e2e upgrade ($t)"
        cpu0=$(plane_cpu)
        start=$(now_ms)
        local -a case_args=()
        if [[ $c == *-instant ]]; then case_args=(--pods '*=start:0s,ready:0s'); fi
        "${bins[$t]}" e2e upgrade --from "$payload" --to "$payload" --from-version "$from" --to-version "${to:-$from}" \
          --stub-missing-crds --create-missing-namespaces --clean --no-progress -q -o json \
          --timeline "$OUT/timeline-$c-$t-$r.json" "${case_args[@]}" ${E2E_ARGS:-} >"$OUT/e2e-$c-$t-$r.json" ||
          say "round $r ($c, $t) reported failures (see $OUT/e2e-$c-$t-$r.json)"
        end=$(now_ms)
        cpu1=$(plane_cpu)
        record "$c-e2e" "$t" ms $((end - start))
        record "$c-e2e" "$t" plane_cpu_s "$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { printf "%.2f", b - a }')"
        HACK_DIR=$ROOT/hack python3 - "$OUT/e2e-$c-$t-$r.json" "$c" "$t" "$OUT/timeline-$c-$t-$r.json" >>"$RAW" <<'PY'
import json, os, sys
sys.path.insert(0, os.environ["HACK_DIR"])
from timeline_split import split
res = json.load(open(sys.argv[1]))
c, t = sys.argv[2], sys.argv[3]
tl = json.load(open(sys.argv[4]))["events"]
first = min((e.get("start") or e["t"]) for e in tl) if tl else 0.0
print(f"{c}-e2e {t} before_first_task_ms {first * 1000:.0f}")
for r in res["runs"]:
    print(f"{c}-{r['phase']} {t} ms {r['seconds'] * 1000:.0f}")
    print(f"{c}-{r['phase']} {t} requests {r['requests']}")
    print(f"{c}-{r['phase']} {t} created {r['counts']['created']}")
    # Only ClusterOperator waits open, no write in flight: the operators' own time (pods
    # starting, leases, status writes), which the floor does not have.
    got = split(tl, r["phase"])
    w = got[2]["co-wait"] if got else 0.0
    print(f"{c}-{r['phase']} {t} waits_only_ms {w * 1000:.0f}")
    print(f"{c}-{r['phase']} {t} own_ms {(r['seconds'] - w) * 1000:.0f}")
PY
      done
      say "round $((r + 1))/$ROUNDS: $c: floor"
      "$FLOOR" "$payload" --release-version "$from" ${to:+--to-release-version "$to"} "${pids[@]}" \
        >"$OUT/floor-$c-$r.txt" 2>"$OUT/floor-$c-$r.err"
      while read -r line; do
        local ph
        ph=$(field "$line" phase)
        for m in ms requests failed cpu_s; do record "$c-$ph" floor "$m" "$(field "$line" "$m")"; done
      done <"$OUT/floor-$c-$r.txt"
    done
  done
  local cores
  cores=$(nproc)
  echo "## Install and upgrade against their floors"
  echo
  machine
  echo "- e2e: \`minicvo e2e upgrade --from P --to P --from-version V --to-version V2 --stub-missing-crds --create-missing-namespaces --clean${E2E_ARGS:+ $E2E_ARGS}\`, $profile builds, one fresh test control plane${BEFORE:+; before = $BEFORE}${BEFORE_BIN:+; before = $BEFORE_BIN}; openshift-multi 4.16.0 → 4.17.0 (multi-instant: the same with \`--pods '*=start:0s,ready:0s'\`)${synth:+; a synthetic payload of $synth objects (\`loadbench gen\`) to itself}"
  echo "- floor: \`examples/floor.rs\` on the same plane from the same starting state, every object written as the cvo strategy writes it (GET, then POST, PUT or nothing after the CVO's merge) with nothing waiting but the server: the install's namespaces and CRDs at once, the CRDs Established, then each node's objects in order; the upgrade's graph with its edges (run-level barriers); after each ClusterOperator's task, the status its simulated operator reports (one PATCH: the write that ends the wait, without the operator's own time); the run's parallelism"
  echo "- CPU: kube-apiserver + etcd user + system seconds during the e2e run (install, upgrade and what lies between) and during each floor phase"
  echo
  printf '| |'; for t in "${tools[@]}"; do printf ' %s |' "$t"; done; printf ' floor |'; echo
  printf '|---|'; for t in "${tools[@]}"; do printf -- '---|'; done; printf -- '---|'; echo
  local ph
  for cs in "${cases[@]}"; do
    IFS=: read -r c payload from to <<<"$cs"
    for ph in install ${to:+upgrade}; do
      local k=$c-$ph
      printf '| %s %s ms |' "$c" "$ph"; for t in "${tools[@]}"; do printf ' %s |' "$(med "$k" "$t" ms)"; done; printf ' %s |\n' "$(med "$k" floor ms)"
      printf '| %s %s requests |' "$c" "$ph"; for t in "${tools[@]}"; do printf ' %s |' "$(med "$k" "$t" requests)"; done; printf ' %s |\n' "$(med "$k" floor requests)"
      printf '| **%s %s ÷ floor** |' "$c" "$ph"
      for t in "${tools[@]}"; do printf ' **%s** |' "$(awk -v a="$(med "$k" "$t" ms)" -v b="$(med "$k" floor ms)" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }')"; done
      printf ' |\n'
      printf '| %s %s: only operators awaited (no write in flight) ms |' "$c" "$ph"; for t in "${tools[@]}"; do printf ' %s |' "$(med "$k" "$t" waits_only_ms)"; done; printf ' |\n'
      printf '| %s %s without that ÷ floor |' "$c" "$ph"
      for t in "${tools[@]}"; do printf ' %s |' "$(awk -v a="$(med "$k" "$t" own_ms)" -v b="$(med "$k" floor ms)" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }')"; done
      printf ' |\n'
      printf '| %s %s floor: plane CPU s / writes refused |' "$c" "$ph"; for t in "${tools[@]}"; do printf ' |'; done; printf ' %s / %s |\n' "$(med "$k" floor cpu_s)" "$(med "$k" floor failed)"
    done
    printf '| %s e2e ms (whole run) |' "$c"; for t in "${tools[@]}"; do printf ' %s |' "$(med "$c-e2e" "$t" ms)"; done; echo ' |'
    printf '| %s e2e plane CPU s |' "$c"; for t in "${tools[@]}"; do printf ' %s |' "$(med "$c-e2e" "$t" plane_cpu_s)"; done; echo ' |'
    printf '| %s e2e before the first task ms (loading, \`--clean\`) |' "$c"; for t in "${tools[@]}"; do printf ' %s |' "$(med "$c-e2e" "$t" before_first_task_ms)"; done; echo ' |'
    printf '| %s upgrade: objects created again (vanished since the install) |' "$c"; for t in "${tools[@]}"; do printf ' %s |' "$(med "$c-upgrade" "$t" created)"; done; echo ' |'
  done
  echo
  echo "- medians of $ROUNDS rounds; $cores cores; load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "Raw: $OUT"
}

case ${1:-} in
  lint) bench_lint ;;
  operator) bench_operator ;;
  load) bench_load ;;
  divan) bench_divan ;;
  apply) bench_apply ;;
  e2e) bench_e2e ;;
  floor) bench_floor ;;
  all)
    bench_load
    echo
    bench_divan
    echo
    bench_apply
    echo
    bench_lint
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
