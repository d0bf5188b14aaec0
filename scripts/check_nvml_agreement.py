#!/usr/bin/env python3
"""Compares loupe's NVML GPU utilisation with nvidia-smi sampled by a separate process.

usage: check_nvml_agreement.py TIMESTAMPED_LOG SMI_CSV METRICS_JSONL
  TIMESTAMPED_LOG: loupe's stdout with each line prefixed by `date +%s.%N` (the training window
                   runs from the "recipe" line to the "done" line)
  SMI_CSV: nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader,nounits -lms 100
  METRICS_JSONL: loupe train --metrics output
Prints both means over the training window and their difference in points.
"""
import datetime
import json
import sys


def main():
    log, smi, metrics = sys.argv[1:4]
    t0 = t1 = None
    for line in open(log):
        ts, _, text = line.partition(" ")
        if text.startswith("recipe"):
            t0 = float(ts)
        if text.startswith("done"):
            t1 = float(ts)
    vals = []
    for line in open(smi):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 2 or not parts[1].replace(".", "").isdigit():
            continue
        t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        if t0 <= t <= t1:
            vals.append(float(parts[1]))
    reports = [json.loads(l) for l in open(metrics)]
    # Weight each epoch's mean by its training time, as the smi samples are spread over time.
    num = sum(r["gpu_util_mean"] * r["train_seconds"] for r in reports if r["gpu_util_mean"] is not None)
    den = sum(r["train_seconds"] for r in reports if r["gpu_util_mean"] is not None)
    loupe = num / den if den else float("nan")
    smi_mean = sum(vals) / len(vals) if vals else float("nan")
    print(f"window {t1 - t0:.2f} s: nvidia-smi mean {smi_mean:.1f}% over {len(vals)} samples; "
          f"loupe mean {loupe:.1f}%; difference {abs(smi_mean - loupe):.1f} points")


if __name__ == "__main__":
    main()
