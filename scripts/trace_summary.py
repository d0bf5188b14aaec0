#!/usr/bin/env python3
"""Where a step's time goes, from a `loupe train --trace FILE.json` trace (add --busy for the GPU).

usage: scripts/trace_summary.py TRACE.json [--top 25] [--host]
Sums the GPU activity (kernels, copies, memsets) of the traced window by name and prints it per
step (the window's count of host `step` ranges), largest first, with the window's wall time and
the share of it in which the GPU was busy (the union of activity intervals). --host (or a trace
without GPU activity) prints the host's NVTX ranges the same way: the time the host spent issuing
each module's forward and backward work.
"""
import argparse
import collections
import json


def host_summary(ev, steps, top):
    """Inclusive host time per NVTX range name, per step (nested ranges count in their parents too)."""
    by = collections.defaultdict(lambda: [0.0, 0])
    for e in ev:
        if e.get("cat") == "host":
            by[e["name"]][0] += e["dur"]
            by[e["name"]][1] += 1
    print(f"host ranges, {steps} steps (inclusive: a range's time includes the ranges inside it)")
    print(f"{'us/step':>9} {'calls/step':>10} {'us/call':>8}  name")
    for name, (d, n) in sorted(by.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"{d / steps:9.1f} {n / steps:10.1f} {d / n:8.1f}  {name[:110]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--host", action="store_true")
    a = ap.parse_args()
    with open(a.trace) as f:
        ev = json.load(f)
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    steps = sum(1 for e in ev if e.get("cat") == "host" and e["name"] == "step") or 1
    gpu = [e for e in ev if e.get("cat") in ("kernel", "memcpy", "memset")]
    if a.host or not gpu:
        host_summary(ev, steps, a.top)
    if not gpu:
        return
    by = collections.defaultdict(lambda: [0.0, 0])
    for e in gpu:
        by[e["name"]][0] += e["dur"]
        by[e["name"]][1] += 1
    spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in gpu)
    busy, cur_b, cur_e = 0.0, *spans[0]
    for b, e in spans[1:]:
        if b > cur_e:
            busy += cur_e - cur_b
            cur_b, cur_e = b, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_b
    host = [e for e in ev if e.get("cat") == "host"]
    t0 = min(e["ts"] for e in host + gpu)
    t1 = max(e["ts"] + e["dur"] for e in host + gpu)
    total = sum(v[0] for v in by.values())
    print(f"{steps} steps, window {(t1 - t0) / 1e3:.2f} ms, {(t1 - t0) / steps:.1f} us/step wall, "
          f"GPU busy {busy / steps:.1f} us/step ({100 * busy / (t1 - t0):.0f}%), activity sum {total / steps:.1f} us/step")
    print(f"{'us/step':>9} {'share':>6} {'calls/step':>10}  name")
    for name, (d, n) in sorted(by.items(), key=lambda kv: -kv[1][0])[:a.top]:
        print(f"{d / steps:9.1f} {100 * d / total:5.1f}% {n / steps:10.1f}  {name[:110]}")


if __name__ == "__main__":
    main()
