#!/usr/bin/env python3
"""Plots the CSV of `loupe compare ... --csv FILE` (or --plot, which writes and draws it): runs side by side.

usage: scripts/plot_compare.py COMPARE.csv OUT.png [--title T]

A grouped bar chart per section (one (model, batch, precision), or all runs when each has one):
one group of bars per metric (samples/s, GPU busy %, MFU %, joules per sample, cost per million
samples), one bar per run, its height the ratio to the section's first run (so the first run's bars
are all 1), with the absolute value written on each bar. A figure a run did not measure has no bar
and is marked n/a, never drawn as 0. Where a run is on the CPU (its gpu column "CPU"), the groups
are the CPU's own figures instead, GFLOP/s, cores used and peak resident memory, besides samples/s
and any GPU figure some run measured. It prints the groups it drew ("metrics: ...").

Needs matplotlib: Debian's python3-matplotlib is for /usr/bin/python3, so run it as
    /usr/bin/python3 scripts/plot_compare.py compare.csv compare.png
Exit status 2, with a one-line message, for a missing file, missing columns or no rows.
"""
import argparse

from plot_util import number, pyplot, read_rows

PROG = "plot_compare.py"
# CSV column, group label, how the absolute value is written
METRICS = (
    ("samples_per_sec", "samples/s\n(higher is better)", lambda v: f"{v:,.0f}" if v >= 100 else f"{v:.3g}"),
    ("busy_pct", "GPU busy %\n(CUPTI)", lambda v: f"{v:.1f}%"),
    ("mfu_pct", "MFU %", lambda v: f"{v:.2g}%" if v < 1 else f"{v:.1f}%"),
    ("j_per_sample", "J/sample\n(lower is better)", lambda v: f"{v:.3g} J"),
    ("cost_per_million_samples", "$ per million samples\n(lower is better)", lambda v: f"${v:.3g}"),
)
REQUIRED = ("section", "label", "gpu") + tuple(c for m in METRICS for c in (m[0], m[0] + "_ratio"))
# The CPU's figures (optional columns: a CSV from before them has none).
CPU_METRICS = (
    ("gflops", "GFLOP/s", lambda v: f"{v:.3g}"),
    ("cpu_cores", "cores used\n(CPU s / wall s)", lambda v: f"{v:.2g}"),
    ("rss_mib", "peak RSS\n(lower is better)", lambda v: f"{v:,.0f} MiB"),
)


def metrics_for(rows):
    """The table's metrics for GPU runs. With a CPU run: samples/s, the CPU's figures, then the
    others that some run measured (the GPU-only ones are n/a on the CPU: empty groups say nothing)."""
    if not any(r["gpu"] == "CPU" for r in rows):
        return METRICS
    measured = [m for m in METRICS[1:] + CPU_METRICS if any(number(r.get(m[0])) is not None for r in rows)]
    cpu = [m for m in measured if m in CPU_METRICS]
    return (METRICS[0],) + tuple(cpu) + tuple(m for m in measured if m not in cpu)


def sections(rows):
    """[(title, [rows])] in the CSV's order."""
    out = {}
    for r in rows:
        out.setdefault(r["section"], []).append(r)
    return list(out.items())


def draw_section(ax, title, rows, colours, metrics):
    n = len(rows)
    width = 0.8 / n
    top = 1.0
    for j, r in enumerate(rows):
        for i, (col, _, show) in enumerate(metrics):
            x = i - 0.4 + width * (j + 0.5)
            k, v = number(r.get(col + "_ratio")), number(r.get(col))
            if v is None or (k is None and j > 0):
                ax.text(x, 0.02, "n/a", ha="center", va="bottom", fontsize=8, color="0.35",
                        rotation=90 if n > 3 else 0)
                continue
            k = 1.0 if k is None else k  # the first run's own figure
            top = max(top, k)
            ax.bar(x, k, width * 0.92, color=colours[r["label"]], label=r["label"] if i == 0 else None)
            ax.text(x, k, show(v), ha="center", va="bottom", fontsize=7, rotation=90 if n > 3 else 0)
    ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
    ax.set_xlim(-0.55, len(metrics) - 0.45)
    ax.set_xticks(range(len(metrics)))
    ax.set_xticklabels([m[1] for m in metrics], fontsize=9)
    ax.set_ylim(0, top * 1.25)
    ax.set_ylabel(f"ratio to {rows[0]['label']} (×)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)


def main():
    ap = argparse.ArgumentParser(description="Plot the CSV written by `loupe compare --csv`.")
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title")
    a = ap.parse_args()
    rows = read_rows(PROG, a.csv, REQUIRED, "loupe compare RUN.jsonl RUN.jsonl --csv FILE", lambda r: r["label"],
                     "no runs in the table")
    plt = pyplot(PROG)
    groups = sections(rows)
    labels = list(dict.fromkeys(r["label"] for r in rows))
    colours = {lab: f"C{i}" for i, lab in enumerate(labels)}
    # Many groups (every model at two precisions) in a grid, so the page stays readable.
    ncols = 1 if len(groups) <= 2 else 2 if len(groups) <= 6 else 3
    nrows = -(-len(groups) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(11 if ncols == 1 else 8.5 * ncols, 4.2 * nrows), squeeze=False)
    flat = list(axes.flat)
    metrics = metrics_for(rows)
    for ax, (title, rs) in zip(flat, groups):
        draw_section(ax, title, rs, colours, metrics)
    for ax in flat[len(groups):]:
        ax.set_visible(False)
    gpus = {r["label"]: r["gpu"] for r in rows}
    from matplotlib.patches import Patch
    handles = [Patch(color=colours[lab], label=f"{lab} ({gpus[lab]})" if gpus[lab] else lab) for lab in labels]
    if ncols == 1:
        axes[0, 0].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, title="runs")
    else:
        fig.legend(handles=handles, loc="upper right", fontsize=10, title="runs")
    title = a.title or "loupe compare: " + " vs ".join(labels)
    fig.suptitle(f"{title}\nbar height: ratio to the first run; value written on each bar; n/a: not measured")
    fig.tight_layout(rect=(0, 0, 1, 0.96 if nrows > 1 else 0.9))  # room for the title above the grid
    fig.savefig(a.png, dpi=110, bbox_inches="tight")
    print(f"{a.png}: {len(groups)} section(s), {len(labels)} runs; metrics: "
          f"{', '.join(m[1].split(chr(10))[0] for m in metrics)}")


if __name__ == "__main__":
    main()
