#!/usr/bin/env python3
"""The step's floor against the step (lab/plans/toward_the_floor.md, point 4): from `loupe profile
MODEL --graph on --json F` runs, per model and batch, the analytic floors at the ceilings the
profile measured (a GEMM at the precision in use, a device copy) beside the measured graphed step,
its busy time, its boundaries and its kernels, and, where given, PyTorch's step from its samples/s.
With --compiled (the compiled.md of dev/device_check_compiled.sh, from the same machine): PyTorch's
compiled step and loupe's `bench` step (its fastest precision; the profile's step carries the
profiler's own gaps) and their ratio, the issue's 1.5x target.

  floor (ops)   each op at its own roofline, summed: max(FLOPs / peak, bytes / bandwidth) per row.
                Bytes are loupe's analytic ones (each input read once, each output written once),
                so fusing ops can go below it, but no kernel of the op can.
  floor (FLOPs) the step's FLOPs at the peak: what no schedule beats.

usage: floor_table.py MODEL@BATCH=PROFILE.json [...] [--pytorch MODEL@BATCH=SAMPLES_PER_SEC ...]
                      [--compiled compiled.md]
"""
import argparse
import json
import sys


def floors(profile):
    peak = profile["ceiling_tflops"] * 1e12
    bw = profile["ceiling_gbs"] * 1e9
    ops = sum(max(r["flops_per_step"] / peak, r["bytes_per_step"] / bw) for r in profile["rows"])
    return ops * 1e6, profile["flops_per_step"] / peak * 1e6


def key_value(text, what):
    if "=" not in text or "@" not in text.split("=", 1)[0]:
        sys.exit(f"floor_table.py: {what} takes MODEL@BATCH=VALUE, got '{text}'")
    k, v = text.split("=", 1)
    model, batch = k.split("@", 1)
    return (model, int(batch)), v


def read_compiled(path):
    """{(model, batch): (loupe samples/s, PyTorch samples/s)} from dev/device_check_compiled.sh's
    table rows: | model | batch | 1,234 (fp16) | 567 | 2.18x |."""
    got = {}
    with open(path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) != 5 or not cells[1].isdigit():
                continue
            try:
                loupe = float(cells[2].split()[0].replace(",", ""))
                torch = float(cells[3].replace(",", ""))
            except ValueError:
                continue
            if loupe > 0 and torch > 0:
                got[(cells[0], int(cells[1]))] = (loupe, torch)
    if not got:
        sys.exit(f"floor_table.py: no rows of dev/device_check_compiled.sh's table in {path}")
    return got


def table(runs, pytorch, compiled=None):
    compiled = compiled or {}
    out = ["| model | batch | floor, ops at their rooflines (us) | floor, FLOPs at the peak (us) | loupe step (us) "
           "| busy (us) | boundaries (us) | records a step | step / floor (ops) | PyTorch step (us) "
           "| loupe bench step (us) | loupe / PyTorch |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (model, batch), p in runs:
        if p.get("graph_replays", -1) <= 0:
            sys.exit(f"floor_table.py: the {model}@{batch} profile is not of a graphed step (loupe profile --graph on)")
        f_ops, f_flops = floors(p)
        step = p["wall_us_per_step"]
        loupe_sps, compiled_sps = compiled.get((model, batch), (None, None))
        sps = pytorch.get((model, batch), compiled_sps)
        pt = f"{batch / sps * 1e6:.1f}" if sps else "not measured"
        lb = f"{batch / loupe_sps * 1e6:.1f}" if loupe_sps else "not measured"
        ratio = f"{loupe_sps / sps:.2f}x" if loupe_sps and sps else "n/a"
        out.append(f"| {model} | {batch} | {f_ops:.1f} | {f_flops:.2f} | {step:.1f} | {p['busy_us_per_step']:.1f} | "
                   f"{p['boundary_us_per_step']:.1f} | {p['activities_per_step']:.0f} | {step / f_ops:.1f}x | {pt} | "
                   f"{lb} | {ratio} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="MODEL@BATCH=PROFILE.json")
    ap.add_argument("--pytorch", action="append", default=[], help="MODEL@BATCH=SAMPLES_PER_SEC")
    ap.add_argument("--compiled", default="", metavar="FILE",
                    help="dev/device_check_compiled.sh's compiled.md: PyTorch's and loupe's bench samples/s")
    a = ap.parse_args()
    runs = []
    for r in a.runs:
        k, path = key_value(r, "a run")
        with open(path) as f:
            runs.append((k, json.load(f)))
    pytorch = {}
    for r in a.pytorch:
        k, v = key_value(r, "--pytorch")
        pytorch[k] = float(v)
    print(table(runs, pytorch, read_compiled(a.compiled) if a.compiled else None))


if __name__ == "__main__":
    main()
