#!/usr/bin/env python3
"""Reading N live objects before a no-op re-apply: N GETs (16 at a time over keep-alive
connections, as `minicvo apply --apply-strategy cvo` does) against one LIST of their namespace.
Side by side, same plane, same objects; prints the median of REPEAT rounds of each and the
ratio. Needs a plane (hack/testplane.sh start): TESTPLANE_DIR and its admin token and CA.

    hack/get-vs-list.py [N] [REPEAT]
"""
import http.client
import json
import os
import ssl
import statistics
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
REPEAT = int(sys.argv[2]) if len(sys.argv) > 2 else 9
PARALLEL = 16
plane = os.environ["TESTPLANE_DIR"]
token = open(os.path.join(plane, "admin.token")).read().strip()
server = next(l.split("server:", 1)[1].strip()
              for l in open(os.path.join(plane, "kubeconfig")) if "server:" in l)
url = urllib.parse.urlparse(server)
ctx = ssl.create_default_context(cafile=os.path.join(plane, "pki", "ca.crt"))
local = threading.local()


def conn():
    if not hasattr(local, "c"):
        local.c = http.client.HTTPSConnection(url.hostname, url.port, context=ctx)
    return local.c


def request(method, path, body=None):
    c = conn()
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    if r.status >= 300 and not (method == "DELETE" and r.status == 404):
        raise SystemExit(f"{method} {path}: {r.status} {data[:200]!r}")
    return data


ns = f"get-vs-list-{os.getpid()}"
request("POST", "/api/v1/namespaces", json.dumps({"metadata": {"name": ns}}))
try:
    with ThreadPoolExecutor(PARALLEL) as pool:
        list(pool.map(lambda i: request(
            "POST", f"/api/v1/namespaces/{ns}/configmaps",
            json.dumps({"metadata": {"name": f"cm-{i}"}, "data": {"key": "v" * 64}})), range(N)))

        def gets():
            list(pool.map(lambda i: request("GET", f"/api/v1/namespaces/{ns}/configmaps/cm-{i}"), range(N)))

        def one_list():
            items = json.loads(request("GET", f"/api/v1/namespaces/{ns}/configmaps"))["items"]
            assert len(items) >= N

        def timed(f):
            t = time.perf_counter()
            f()
            return time.perf_counter() - t

        gets(), one_list()  # warm the connections
        g, l = [], []
        for _ in range(REPEAT):  # interleaved, so load changes hit both alike
            g.append(timed(gets))
            l.append(timed(one_list))
    mg, ml = statistics.median(g), statistics.median(l)
    print(f"{N} objects, median of {REPEAT}: {N} GETs ({PARALLEL} at a time) {mg * 1000:.1f} ms, "
          f"one LIST {ml * 1000:.1f} ms; GETs/LIST = {mg / ml:.1f}")
finally:
    request("DELETE", f"/api/v1/namespaces/{ns}")
