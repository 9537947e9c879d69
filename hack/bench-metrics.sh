#!/usr/bin/env bash
# Scrape latency of `minicvo operator`'s /metrics, side by side: a BEFORE binary (e.g. main's
# hand-written plain-HTTP server) and an AFTER binary (this tree's hyper server: plain HTTP, and
# HTTPS with a ServiceAccount token, per scrape a new connection or one kept alive). Never a test.
#
#   hack/bench-metrics.sh BEFORE_BIN [AFTER_BIN]    (AFTER_BIN default: target/debug/minicvo)
#
# Each operator runs on a fresh test control plane, standing by (its Lease is held by another
# holder for an hour), so it serves its endpoints and does nothing else. A Python client on the
# same machine scrapes each N times after WARM scrapes, the sides alternating in ROUNDS rounds;
# it prints the median and p90 per side and the ratios of the medians. Both binaries should be
# built with the same profile.
#
# Environment: N=300 scrapes per side and round, WARM=20, ROUNDS=3.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BEFORE=${1:?usage: hack/bench-metrics.sh BEFORE_BIN [AFTER_BIN]}
AFTER=${2:-${CARGO_TARGET_DIR:-target}/debug/minicvo}
N=${N:-300} WARM=${WARM:-20} ROUNDS=${ROUNDS:-3}
[[ -x $BEFORE && -x $AFTER ]] || { echo "bench-metrics: $BEFORE or $AFTER is not executable" >&2; exit 2; }

eval "$(bash hack/testplane.sh start)"
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  bash hack/testplane.sh stop "$TESTPLANE_DIR" || true
  rm -rf "$WORK"
}
trap cleanup EXIT
k() { "$TESTPLANE_BIN/kubectl" --kubeconfig "$KUBECONFIG" "$@"; }
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

NS=bench-metrics
k create namespace "$NS" >/dev/null
now=$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)
k apply -f - >/dev/null <<EOF
{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "held", "namespace": "$NS"},
 "spec": {"holderIdentity": "someone-else", "leaseDurationSeconds": 3600, "acquireTime": "$now", "renewTime": "$now"}}
EOF
k apply -f deploy/60-metrics-reader.yaml >/dev/null
k -n "$NS" create serviceaccount scraper >/dev/null
k create clusterrolebinding bench-metrics-scraper --clusterrole=minicvo-metrics-reader \
  --serviceaccount="$NS:scraper" >/dev/null
TOKEN=$(k -n "$NS" create token scraper --duration=1h)

# start NAME BIN ARGS...: an operator standing by; prints its port.
start() {
  local name=$1 bin=$2 p
  shift 2
  p=$(port)
  "$bin" operator --payloads payload/old --release 4.13.0 --namespace "$NS" --lease-name held \
    --identity "$name" --kubeconfig "$KUBECONFIG" --metrics-addr "127.0.0.1:$p" "$@" \
    >/dev/null 2>"$WORK/$name.log" &
  PIDS+=($!)
  echo "$p"
}
P_BEFORE=$(start before "$BEFORE")
P_PLAIN=$(start after-plain "$AFTER" --metrics-plain-http)
P_TLS=$(start after-tls "$AFTER")

python3 - "$N" "$WARM" "$ROUNDS" "$P_BEFORE" "$P_PLAIN" "$P_TLS" "$TOKEN" <<'PY'
import http.client, ssl, statistics, sys, time
n, warm, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
p_before, p_plain, p_tls, token = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
auth = {"Authorization": "Bearer " + token}

def wait(port, tls):
    deadline = time.time() + 60
    while True:
        try:
            c = (http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5) if tls
                 else http.client.HTTPConnection("127.0.0.1", port, timeout=5))
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return
        except OSError:
            pass
        if time.time() > deadline:
            sys.exit(f"port {port} never ready")
        time.sleep(0.2)

def new_conn(port, tls, headers):
    def once():
        c = (http.client.HTTPSConnection("127.0.0.1", port, context=ctx) if tls
             else http.client.HTTPConnection("127.0.0.1", port))
        c.request("GET", "/metrics", headers=headers)
        r = c.getresponse()
        body = r.read()
        assert r.status == 200, (port, r.status, body)
        c.close()
    return once

def kept(port, tls, headers):
    c = (http.client.HTTPSConnection("127.0.0.1", port, context=ctx) if tls
         else http.client.HTTPConnection("127.0.0.1", port))
    def once():
        c.request("GET", "/metrics", headers=headers)
        r = c.getresponse()
        body = r.read()
        assert r.status == 200, (port, r.status, body)
    return once

sides = [
    ("before: plain HTTP, a connection per scrape", new_conn(p_before, False, {})),
    ("after: plain HTTP, a connection per scrape", new_conn(p_plain, False, {})),
    ("after: plain HTTP, kept alive", kept(p_plain, False, {})),
    ("after: HTTPS + token, a connection per scrape", new_conn(p_tls, True, auth)),
    ("after: HTTPS + token, kept alive", kept(p_tls, True, auth)),
]
for p, tls in [(p_before, False), (p_plain, False), (p_tls, True)]:
    wait(p, tls)
times = {name: [] for name, _ in sides}
for r in range(rounds):
    order = sides if r % 2 == 0 else list(reversed(sides))
    for name, once in order:
        for _ in range(warm):
            once()
        for _ in range(n):
            t = time.perf_counter()
            once()
            times[name].append((time.perf_counter() - t) * 1000)
base = statistics.median(times[sides[0][0]])
print(f"| side | median ms | p90 ms | median ÷ before |")
print(f"|---|---|---|---|")
for name, _ in sides:
    t = sorted(times[name])
    med = statistics.median(t)
    print(f"| {name} | {med:.3f} | {t[int(len(t) * 0.9)]:.3f} | {med / base:.2f} |")
print(f"\n{rounds} rounds × {n} scrapes per side ({warm} warm-up scrapes each)")
PY
