#!/usr/bin/env python3
"""Compares `loupe profile --counters` with Nsight Compute on the same kernels.

usage: tools/check_counters_ncu.py PROFILE.json NCU.csv [--points 5]

PROFILE.json: `loupe profile MODEL --counters --json PROFILE.json` (its "counters" list: every
kernel of the step after the window, in launch order). NCU.csv: `ncu --csv --page raw --metrics
<the same four metrics>` of the same step of the same run (loupe train ... --profile-steps S:S
under `ncu --profile-from-start off`, S = the window's last step + 1). Kernels are paired in launch
order (their names are checked); for each metric it prints the largest difference in percentage
points and how many kernels are within --points, and exits 1 when any paired kernel differs by more
(kernels under 2 us are listed but not held to it: their counters are a few hundred cycles).
"""
import argparse
import csv
import json
import sys


def ncu_rows(path):
    with open(path, newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]  # ncu prints its own notes before the CSV
    rows = list(csv.reader(lines))
    head = rows[0]
    data = [r for r in rows[1:] if r and r[0] != "" and r[0].isdigit()]  # the second row holds units
    return [dict(zip(head, r)) for r in data]


def num(v):
    try:
        return float(str(v).replace(",", ""))
    except ValueError:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("ncu")
    ap.add_argument("--points", type=float, default=5.0)
    a = ap.parse_args()
    prof = json.load(open(a.profile))
    c = prof.get("counters")
    if not c or not c.get("kernels"):
        print(f"{a.profile}: no counters ({(c or {}).get('why', 'not asked for')})")
        return 2
    metrics = c["metrics"]
    keys = ["fma_pct", "tensor_pct", "dram_pct"]
    ours = c["kernels"]
    theirs = ncu_rows(a.ncu)
    n = min(len(ours), len(theirs))
    print(f"loupe: {len(ours)} kernels, ncu: {len(theirs)} kernels; pairing {n} in launch order")
    worst = {m: 0.0 for m in metrics[:3]}
    within = {m: 0 for m in metrics[:3]}
    held = 0
    bad = []
    for i in range(n):
        o, t = ours[i], theirs[i]
        name_ok = t.get("Kernel Name", "")[:20].split("(")[0].split("<")[0] in o["name"]
        dur = num(t.get(metrics[3])) or 0
        unit_ns = dur  # ncu's raw gpu__time_duration.sum is in ns (or us/ms per its unit row)
        short = (o.get("duration_ns") or 0) < 2000
        if not short:
            held += 1
        for m, k in zip(metrics[:3], keys):
            x, y = o.get(k), num(t.get(m))
            if x is None or y is None:
                continue
            d = abs(x - y)
            if not short:
                worst[m] = max(worst[m], d)
                within[m] += d <= a.points
                if d > a.points:
                    bad.append((i, o["name"][:60], m, x, y))
        if not name_ok:
            print(f"  kernel {i}: names differ: loupe '{o['name'][:60]}' ncu '{t.get('Kernel Name', '')[:60]}'")
    for m in metrics[:3]:
        print(f"{m}: largest difference {worst[m]:.2f} points; {within[m]} of {held} kernels (>= 2 us) within {a.points}")
    for i, name, m, x, y in bad[:20]:
        print(f"  kernel {i} {name}: {m} loupe {x:.2f} ncu {y:.2f}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
