#!/usr/bin/env python3
"""Loads the event files of `loupe train --tensorboard DIR` with TensorBoard's own reader
(tensorboard.backend.event_processing.event_accumulator.EventAccumulator) and prints each scalar
tag with its number of points, first and last step and last value. Run it where `tensorboard` is
installed (pip install tensorboard); CI checks the files with tests/test_tensorboard.cpp instead.

Usage: check_tensorboard.py DIR [--expect-epochs N]
Exits 1 when DIR holds no scalars, when epoch/samples_per_sec or step/loss is missing, or when
--expect-epochs is given and an epoch/ tag does not have N points.
"""
import argparse
import glob
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="the --tensorboard directory")
    ap.add_argument("--expect-epochs", type=int, default=None, help="each epoch/ tag must have this many points")
    a = ap.parse_args()
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        sys.exit("check_tensorboard: the tensorboard package is not installed (pip install tensorboard)")
    files = sorted(glob.glob(os.path.join(a.dir, "events.out.tfevents.*")))
    if not files:
        sys.exit(f"check_tensorboard: no events.out.tfevents.* file in {a.dir}")
    print("files:", *[os.path.basename(f) for f in files], sep="\n  ")
    # size_guidance 0: keep every point (the default samples 1,000 scalars per tag).
    acc = event_accumulator.EventAccumulator(a.dir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = acc.Tags().get("scalars", [])
    if not tags:
        sys.exit(f"check_tensorboard: TensorBoard read no scalars from {a.dir}")
    bad = []
    print(f"{'tag':<36} {'points':>6} {'steps':>13} {'last value':>14}")
    for tag in sorted(tags):
        ev = acc.Scalars(tag)
        print(f"{tag:<36} {len(ev):>6} {ev[0].step:>6}-{ev[-1].step:<6} {ev[-1].value:>14.6g}")
        if a.expect_epochs is not None and tag.startswith("epoch/") and len(ev) != a.expect_epochs:
            bad.append(f"{tag} has {len(ev)} points, expected {a.expect_epochs}")
    for need in ("epoch/samples_per_sec", "step/loss"):
        if need not in tags:
            bad.append(f"{need} is missing")
    print(f"{len(tags)} scalar tags")
    for b in bad:
        print("check_tensorboard:", b, file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
