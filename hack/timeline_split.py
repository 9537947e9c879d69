"""How a phase of an `e2e upgrade --timeline` spent its time: requests in flight, ClusterOperator
waits with no request in flight, and idle time. Imported by hack/bench.sh (e2e and floor)."""

from collections import defaultdict

# When intervals overlap, the first kind listed here is the one counted.
PRIO = ["request", "co-wait"]


def sweep(intervals, lo, hi):
    """Seconds per kind over [lo, hi]; intervals are (start, end, kind), "idle" where none."""
    pts = sorted({lo, hi} | {max(lo, min(hi, x)) for s, e, _ in intervals for x in (s, e)})
    out = defaultdict(float)
    for a, b in zip(pts, pts[1:]):
        m = (a + b) / 2
        kinds = {k for s, e, k in intervals if s <= m < e}
        out[next((p for p in PRIO if p in kinds), "idle")] += b - a
    return out


def intervals(events):
    """The (start, end, kind) intervals of events: writes ("request") and waits ("co-wait")."""
    iv = []
    waits = {}
    for e in events:
        if e["action"] in ("apply", "delete") and e.get("start") is not None:
            iv.append((e["start"], e["t"], "request"))
        elif e["action"] == "wait-start":
            waits[e["name"]] = e["t"]
        elif e["action"] == "wait-done":
            s = waits.pop(e.get("name"), None)
            if s is not None:
                iv.append((s, e["t"], "co-wait"))
    return iv


def split(events, phase):
    """(first, last, seconds per kind) of `phase`'s events: the first task's start, the last
    event, and the time between them by kind; None when the phase has no event."""
    ev = [e for e in events if e["phase"] == phase]
    if not ev:
        return None
    lo = min(min(e.get("start") or e["t"], e["t"]) for e in ev)
    hi = max(e["t"] for e in ev)
    return lo, hi, sweep(intervals(ev), lo, hi)
