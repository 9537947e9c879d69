#!/usr/bin/env python3
"""Puts the real CVO's end state, as ../shared/research/realcvo/run-cvo.sh dumps it (one file
per manifest object, objects-index.json), and a `kubectl get -A -o json` dump of minicvo's run
(hack/end-state.sh) side by side in the format hack/strategy-diff.py reads, keeping only the
payload's manifest objects.

    hack/cvo-dump.py RUN_CVO_OUT MINICVO_DUMP CVO_LIST MINICVO_LIST
"""
import json
import os
import sys


def key(kind, api_version, namespace, name):
    group = api_version.rpartition("/")[0]
    return (f"{kind}.{group}" if group else kind, namespace or "", name)


def lists(path):
    """The items of the `kubectl get -o json` lists concatenated in `path`."""
    dec = json.JSONDecoder()
    text = open(path).read()
    i = 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        doc, i = dec.raw_decode(text, i)
        yield from doc.get("items", [])


def main():
    run, dump, cvo_out, minicvo_out = sys.argv[1:5]
    index = json.load(open(os.path.join(run, "objects-index.json")))
    wanted = set()
    cvo_items = []
    for e in index:
        if "kind" not in e:
            continue
        wanted.add(key(e["kind"], e["apiVersion"], e.get("namespace", ""), e["name"]))
        if e.get("present"):
            cvo_items.append(json.load(open(os.path.join(run, "objects", e["dump"]))))
    # A cluster-scoped manifest may carry a namespace the server ignores.
    cluster_scoped = {(w[0], w[2]) for w in wanted if w[1]}
    minicvo_items = [o for o in lists(dump)
                     if (k := key(o.get("kind", ""), o.get("apiVersion", ""),
                                  o.get("metadata", {}).get("namespace", ""),
                                  o.get("metadata", {}).get("name"))) in wanted
                     or (not k[1] and (k[0], k[2]) in cluster_scoped)]
    json.dump({"items": cvo_items}, open(cvo_out, "w"))
    json.dump({"items": minicvo_items}, open(minicvo_out, "w"))
    print(f"{len(wanted)} manifest objects; {len(cvo_items)} present after the CVO, "
          f"{len(minicvo_items)} after minicvo", file=sys.stderr)


main()
