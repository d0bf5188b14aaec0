#!/usr/bin/env python3
"""Compares `loupe profile --counters` with Nsight Compute on the same kernels.

usage: scripts/check_counters_ncu.py PROFILE.json NCU.csv [--points 5]

PROFILE.json: `loupe profile MODEL --counters --json PROFILE.json` (its "counters" list: every
kernel of the step after the window, in launch order). NCU.csv: `ncu --csv --page raw --metrics
<the same four metrics>` of the same step of the same run (loupe train ... --profile-steps S:S
under `ncu --profile-from-start off`, S = the window's last step + 1). Kernels are paired in launch
order by kernel name (a cuDNN or cuBLAS call may choose other kernels in another process: kernels
found on one side only are skipped and counted); for each metric it prints the largest difference in percentage
points and how many kernels are within --points (kernels under 2 us left out: their counters are a
few hundred cycles), and the means weighted by duration that loupe reports; exits 1 when a mean
differs by more than --points.
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


def base_name(n):
    """The kernel's own name, without namespaces, template arguments or parameters, as either tool
    writes it: loupe's 'void loupe::(anonymous namespace)::gather_kernel<unsigned char, float>(float*,
    ...)' and ncu's 'void <unnamed>::gather_kernel<unsigned char, float>(T2 *, ...)' are both
    'gather_kernel'."""
    for anon in ("(anonymous namespace)", "<unnamed>", "unnamed>"):
        n = n.replace(anon, "anon")
    depth, out = 0, ""
    for ch in n:  # drop template arguments, then everything from the parameter list on
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            if ch == "(":
                break
            out += ch
    return out.split("::")[-1].split(" ")[-1]


def pair(ours, theirs):
    """[(i, j)]: by launch order where both tools saw as many kernels and nearly all names agree
    position by position (one step's kernels, launched in one order); else the longest common
    subsequence of the names (cuDNN or cuBLAS chose other kernels in one process)."""
    import difflib
    a = [base_name(o["name"]) for o in ours]
    b = [base_name(t.get("Kernel Name", "")) for t in theirs]
    if a and len(a) == len(b) and sum(x == y for x, y in zip(a, b)) >= 0.9 * len(a):
        return [(i, i) for i in range(len(a))]
    out = []
    for blk in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
        out += [(blk.a + k, blk.b + k) for k in range(blk.size)]
    return out


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
    pairs = pair(ours, theirs)
    print(f"loupe: {len(ours)} kernels, ncu: {len(theirs)} kernels; {len(pairs)} paired in launch order")
    worst = {m: 0.0 for m in metrics[:3]}
    within = {m: 0 for m in metrics[:3]}
    held = 0
    bad = []
    for i, j in pairs:
        o, t = ours[i], theirs[j]
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
                    bad.append((i, base_name(o["name"])[:60], m, x, y))
    # What loupe reports: the means weighted by each kernel's duration (each tool's own), paired kernels.
    failed = False
    print("time-weighted over the paired kernels (what loupe prints):")
    for m, k in zip(metrics[:3], keys):
        wo = sum(ours[i]["duration_ns"] or 0 for i, _ in pairs)
        wt = sum(num(theirs[j].get(metrics[3])) or 0 for _, j in pairs)
        mo = sum((ours[i][k] or 0) * (ours[i]["duration_ns"] or 0) for i, _ in pairs) / wo if wo else float("nan")
        mt = sum((num(theirs[j].get(m)) or 0) * (num(theirs[j].get(metrics[3])) or 0) for _, j in pairs) / wt if wt else float("nan")
        ok = abs(mo - mt) <= a.points
        failed |= not ok
        print(f"  {m}: loupe {mo:.2f} ncu {mt:.2f} ({'within' if ok else 'NOT within'} {a.points} points)")
    print("per kernel:")
    for m in metrics[:3]:
        print(f"  {m}: largest difference {worst[m]:.2f} points; {within[m]} of {held} kernels (>= 2 us) within {a.points}")
    for i, name, m, x, y in bad[:20]:
        print(f"    kernel {i} {name}: {m} loupe {x:.2f} ncu {y:.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
