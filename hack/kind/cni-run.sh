#!/bin/bash
# The program of minicvo's kind pod network (hack/kind/default-cni.yaml), baked into the image
# minicvo.local/kind-cni:1 as /etc/minicvo-kind-cni/run.sh. Needs NODE_NAME and
# CONTROL_PLANE_ENDPOINT (host:port of the API server, added by kind).
set -u
sa=/var/run/secrets/kubernetes.io/serviceaccount
get() {
  curl -fsS --max-time 10 --cacert "$sa/ca.crt" -H "Authorization: Bearer $(cat "$sa/token")" \
    "https://$CONTROL_PLANE_ENDPOINT$1"
}
until cidr=$(get "/api/v1/nodes/$NODE_NAME" | jq -r '.spec.podCIDR // empty') && [[ -n $cidr ]]; do
  echo "no podCIDR on node $NODE_NAME yet"
  sleep 1
done
echo "node $NODE_NAME: pods on $cidr (cluster pod subnet ${POD_SUBNET:-?})"
conf=/host/etc/cni/net.d/10-minicvo-kind.conflist
jq -n --arg cidr "$cidr" '{
  cniVersion: "1.0.0",
  name: "minicvo-kind",
  plugins: [
    {type: "bridge", bridge: "kindbr0", isDefaultGateway: true, ipMasq: true, hairpinMode: true,
     ipam: {type: "host-local", ranges: [[{subnet: $cidr}]]}},
    {type: "portmap", capabilities: {portMappings: true}}
  ]}' >"$conf.tmp" && mv "$conf.tmp" "$conf"
# Routes to the pods of the other nodes, through their InternalIP (IPv4 only).
while true; do
  get /api/v1/nodes | jq -r --arg me "$NODE_NAME" '.items[]
    | select(.metadata.name != $me and (.spec.podCIDR // "") != "")
    | [.spec.podCIDR, (.status.addresses[]? | select(.type == "InternalIP") | .address)] | @tsv' |
    while IFS=$'\t' read -r other via; do
      [[ $other == *:* || -z ${via:-} || $via == *:* ]] && continue
      ip route replace "$other" via "$via" || echo "route to $other via $via failed"
    done
  sleep 10
done
