#!/usr/bin/env python3
"""Compares two dumps of `kubectl get KIND -A -o json` lists (hack/strategy-diff.sh): the
objects whose state differs between the two, with the differing field paths, after removing
what the server or the plane owns (uid, resourceVersion, timestamps, managedFields, status,
owner reference uids, the plane's own CA)."""
import json
import sys
from collections import defaultdict

# Kinds the plane or its controllers make, not the payload.
SKIP_KINDS = {"Event", "Lease", "Endpoints", "EndpointSlice", "ComponentStatus", "APIService",
              "FlowSchema", "PriorityLevelConfiguration", "IPAddress", "ServiceCIDR"}
META_DROP = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation",
             "selfLink", "deletionTimestamp")


def load(path):
    dec = json.JSONDecoder()
    text = open(path).read()
    objs = {}
    i = 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        doc, i = dec.raw_decode(text, i)
        for o in doc.get("items", []):
            kind = o.get("kind", "")
            meta = o.get("metadata", {})
            if kind in SKIP_KINDS:
                continue
            if kind == "ConfigMap" and meta.get("name") == "kube-root-ca.crt":
                continue
            if kind == "Service" and (meta.get("namespace"), meta.get("name")) == ("default", "kubernetes"):
                continue
            if kind == "Secret" and o.get("type") == "kubernetes.io/service-account-token":
                continue
            group = o.get("apiVersion", "").rpartition("/")[0]
            key = (f"{kind}.{group}" if group else kind, meta.get("namespace", ""), meta.get("name"))
            objs[key] = normalise(o)
    return objs


def normalise(o):
    o = dict(o)
    o.pop("status", None)
    meta = dict(o.get("metadata", {}))
    for k in META_DROP:
        meta.pop(k, None)
    refs = meta.get("ownerReferences")
    if refs:
        meta["ownerReferences"] = [{k: v for k, v in r.items() if k != "uid"} for r in refs]
    ann = dict(meta.get("annotations", {}))
    ann.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if ann:
        meta["annotations"] = ann
    else:
        meta.pop("annotations", None)
    o["metadata"] = meta
    if o.get("kind") == "Service" and isinstance(o.get("spec"), dict):
        # Allocated by the plane.
        o["spec"] = {k: v for k, v in o["spec"].items() if k not in ("clusterIP", "clusterIPs")}
    if o.get("kind") == "ClusterVersion" and isinstance(o.get("spec"), dict):
        # A random UUID per cluster.
        o["spec"] = {k: v for k, v in o["spec"].items() if k != "clusterID"}
    return o


def paths(a, b, prefix=""):
    """The leaf paths where a and b differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += paths(a.get(k), b.get(k), f"{prefix}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += paths(x, y, f"{prefix}/{i}")
        return out
    return [] if a == b else [prefix]


def main():
    cvo, ssa = load(sys.argv[1]), load(sys.argv[2])
    a_name, b_name = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else ("cvo", "server-side")
    only_cvo = sorted(set(cvo) - set(ssa))
    only_ssa = sorted(set(ssa) - set(cvo))
    by_path = defaultdict(list)
    different = 0
    for key in sorted(set(cvo) & set(ssa)):
        ps = paths(cvo[key], ssa[key])
        if not ps:
            continue
        different += 1
        # ClusterVersion owner references: one class, counted, not listed per object.
        rest = [p for p in ps if not p.startswith("/metadata/ownerReferences")]
        if len(rest) < len(ps):
            by_path["/metadata/ownerReferences"].append(key)
        for p in rest:
            by_path[p].append(key)
    print(f"objects: {len(cvo)} ({a_name}), {len(ssa)} ({b_name}); {different} differ")
    for k in only_cvo:
        print(f"only after {a_name}: {k[0]} {k[1]}/{k[2]}")
    for k in only_ssa:
        print(f"only after {b_name}: {k[0]} {k[1]}/{k[2]}")
    for p, keys in sorted(by_path.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if p == "/metadata/ownerReferences":
            print(f"{p}: {len(keys)} objects")
            continue
        print(f"{p}: {len(keys)} object(s)")
        for k in keys[:50]:
            a = value(cvo[k], p)
            b = value(ssa[k], p)
            print(f"    {k[0]} {k[1]}/{k[2]}: {a_name} {short(a)} | {b_name} {short(b)}")


def value(o, path):
    for part in path.strip("/").split("/"):
        if isinstance(o, list):
            o = o[int(part)] if part.isdigit() and int(part) < len(o) else None
        elif isinstance(o, dict):
            o = o.get(part)
        else:
            return None
    return o


def short(v):
    s = json.dumps(v)
    return s if len(s) <= 80 else s[:77] + "..."


if __name__ == "__main__":
    main()
