#!/usr/bin/env python3
"""Plots the CSV of `loupe profile` as a roofline: one point per op row.

usage: scripts/plot_profile.py PROFILE.csv OUT.png [--title T]

x: arithmetic intensity (analytic FLOPs per byte moved), y: achieved FLOP/s, both log. The two
roofs are the measured ceilings in the CSV (memory bandwidth x intensity, and the compute peak).
Each row is a point whose area is proportional to its share of the GPU's busy time (of the time
in ops on the CPU), coloured by what bounds it; the longest rows are labelled. Rows with no FLOPs
(copies) sit on the left edge, at the lowest intensity drawn, and are labelled too if long.

Needs matplotlib: run it as /usr/bin/python3 scripts/plot_profile.py profile.csv profile.png
Exit status 2, with a one-line message, for a missing file, missing columns or no rows.
"""
import argparse
from plot_util import number, pyplot, read_rows

REQUIRED = ("module", "op", "phase", "us_per_step", "share", "flops_per_step", "bytes_per_step",
            "tflops", "gbs", "bound", "ceiling_tflops", "ceiling_gbs")
COLOURS = {"compute": "tab:red", "memory": "tab:blue", "latency": "tab:gray", "unknown": "white"}
OFFSETS = [(6, 6), (6, -12), (-10, 14), (6, -24), (-10, -18), (6, 18), (-10, 26), (6, -36)]


def short_module(m):
    """fc1/Linear+relu1/ReLU -> fc1+relu1, as the command's table prints it."""
    return "+".join(p.rsplit("/", 1)[0] for p in m.split("+") if p)


def main():
    ap = argparse.ArgumentParser(description="Plot the CSV written by `loupe profile`.")
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    rows = read_rows("plot_profile", a.csv, REQUIRED, "loupe profile",
                     lambda r: (number(r["us_per_step"]) or 0) > 0, "no rows with a time")
    plt = pyplot("plot_profile")
    peak = number(rows[0]["ceiling_tflops"])
    bw = number(rows[0]["ceiling_gbs"])
    pts = []
    for r in rows:
        fl, by = number(r["flops_per_step"]) or 0, number(r["bytes_per_step"]) or 0
        rate = (number(r["tflops"]) or 0) * 1e12
        pts.append((fl / by if by > 0 and fl > 0 else None, rate if rate > 0 else None, r))
    xs = [p[0] for p in pts if p[0]]
    ys = [p[1] for p in pts if p[1]]
    xmin = min(xs + [0.1]) / 4
    xmax = max(xs + [100.0]) * 4
    fig, ax = plt.subplots(figsize=(9, 6))
    if peak and bw:
        import math
        grid = [xmin * (xmax / xmin) ** (i / 200) for i in range(201)]
        ax.plot(grid, [min(peak * 1e12, bw * 1e9 * x) for x in grid], color="black", lw=1.5,
                label=f"ceilings: {peak:.3g} TFLOP/s, {bw:.0f} GB/s (measured)")
        ax.axvline(peak * 1e12 / (bw * 1e9), color="black", ls=":", lw=0.8)
    ymin = min(ys + [peak * 1e12 if peak else 1e9]) / 10
    ranked = sorted(pts, key=lambda p: -(number(p[2]["share"]) or 0))
    labelled = {id(p[2]): k for k, p in enumerate(ranked[:8])}
    seen = set()
    for x, y, r in pts:
        share = number(r["share"]) or 0
        bound = r["bound"] or "latency"
        xx, yy = (x if x else xmin), (y if y else ymin * 1.5)
        ax.scatter([xx], [yy], s=20 + 2000 * share, color=COLOURS.get(bound, "tab:gray"), alpha=0.6,
                   edgecolors="black", linewidths=0.5,
                   label=(f"{bound}-bound" if bound != "unknown" else "no FLOP/byte count")
                   if bound not in seen else None)
        seen.add(bound)
        if id(r) in labelled:
            name = (short_module(r["module"]) + " " if r["module"] else "") + r["op"][:30]
            phase = "" if r["phase"] == "unattributed" else " " + r["phase"]
            ax.annotate(f"{name}{phase} ({100 * share:.0f}%)", (xx, yy), fontsize=7,
                        xytext=OFFSETS[labelled[id(r)]], textcoords="offset points",
                        arrowprops=dict(arrowstyle="-", lw=0.4, color="0.4"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(bottom=ymin)
    ax.set_xlabel("arithmetic intensity (FLOP per byte, analytic)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title((a.title or "loupe profile") + "\neach op against the roofline (area: its share of the step's time)",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    # Outside the axes, so that it never covers a point.
    leg = ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0)
    for h in getattr(leg, "legend_handles", getattr(leg, "legendHandles", [])):  # one marker size, whatever the op's
        if hasattr(h, "set_sizes"):
            h.set_sizes([40])
    fig.tight_layout()
    fig.savefig(a.png, dpi=120)
    print(f"plot written to {a.png}")


if __name__ == "__main__":
    main()
