# shellcheck shell=bash
# Sourced by the image scripts (hack/build-kind-image.sh, hack/build-operator-image.sh,
# hack/kind-e2e.sh): a throwaway registry images are assembled in with crane.
#
#   start_crane_registry CRANE DIR    serves DIR on a free 127.0.0.1 port and waits until it
#                                     answers (up to 10 s); sets REG (host:port) and REG_PID.
#                                     The caller stops it (kill "$REG_PID").
start_crane_registry() {
  local crane=$1 dir=$2 port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mkdir -p "$dir"
  "$crane" registry serve --address "127.0.0.1:$port" --disk "$dir" >"$dir.log" 2>&1 &
  REG_PID=$!
  REG=127.0.0.1:$port
  for _ in $(seq 100); do
    curl -fsS "http://$REG/v2/" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "crane registry on $REG did not answer within 10 s; its log: $dir.log" >&2
  return 1
}
