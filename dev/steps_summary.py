#!/usr/bin/env python3
"""One line for a run's --metrics: rank 0's medians over epochs 2.. (samples/s, the world's on
several GPUs; step p50 and p95; the epoch's training time over its steps; NCCL's shares).
usage: dev/steps_summary.py METRICS.jsonl LABEL   (the device check scripts' `steps` parts)"""
import json
import statistics
import sys

recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [x for x in recs if x.get("rank", 0) == 0 and x["epoch"] >= 2]


def m(k):
    v = [x[k] for x in r if x.get(k) is not None]
    return statistics.median(v) if v else float("nan")


sps = m("world_samples_per_sec") if r and r[0].get("world_size", 1) > 1 else m("samples_per_sec")
steps = r[0]["steps"] if r else 0
train = 1e3 * m("train_seconds")
print(f"steps {sys.argv[2]}: samples/s {sps:,.0f}  step p50 {m('step_ms_p50'):.3f} ms p95 {m('step_ms_p95'):.3f}"
      f"  epoch {train:.2f} ms / {steps} steps  nccl {m('nccl_share'):.3f} exposed {m('nccl_exposed_share'):.3f}")
