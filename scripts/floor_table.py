#!/usr/bin/env python3
"""The step's floor against the step (issue 35, point 4): from `loupe profile MODEL --graph on
--json F` runs, per model and batch, the analytic floors at the ceilings the profile measured (a
GEMM at the precision in use, a device copy) beside the measured graphed step, its busy time,
its boundaries and its kernels, and, where given, PyTorch's step from its samples/s.

  floor (ops)   each op at its own roofline, summed: max(FLOPs / peak, bytes / bandwidth) per row.
                Bytes are loupe's analytic ones (each input read once, each output written once),
                so fusing ops can go below it, but no kernel of the op can.
  floor (FLOPs) the step's FLOPs at the peak: what no schedule beats.

usage: floor_table.py MODEL@BATCH=PROFILE.json [...] [--pytorch MODEL@BATCH=SAMPLES_PER_SEC ...]
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


def table(runs, pytorch):
    out = ["| model | batch | floor, ops at their rooflines (us) | floor, FLOPs at the peak (us) | loupe step (us) "
           "| busy (us) | boundaries (us) | records a step | step / floor (ops) | PyTorch step (us) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for (model, batch), p in runs:
        if p.get("graph_replays", -1) <= 0:
            sys.exit(f"floor_table.py: the {model}@{batch} profile is not of a graphed step (loupe profile --graph on)")
        f_ops, f_flops = floors(p)
        step = p["wall_us_per_step"]
        sps = pytorch.get((model, batch))
        pt = f"{batch / sps * 1e6:.1f}" if sps else "not measured"
        out.append(f"| {model} | {batch} | {f_ops:.1f} | {f_flops:.2f} | {step:.1f} | {p['busy_us_per_step']:.1f} | "
                   f"{p['boundary_us_per_step']:.1f} | {p['activities_per_step']:.0f} | {step / f_ops:.1f}x | {pt} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="MODEL@BATCH=PROFILE.json")
    ap.add_argument("--pytorch", action="append", default=[], help="MODEL@BATCH=SAMPLES_PER_SEC")
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
    print(table(runs, pytorch))


if __name__ == "__main__":
    main()
