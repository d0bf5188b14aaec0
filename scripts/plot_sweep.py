#!/usr/bin/env python3
"""Plots the CSV of `loupe sweep`: throughput and GPU utilisation against batch size.

usage: scripts/plot_sweep.py SWEEP.csv OUT.png [--title T]

On a GPU: left, samples/s against batch size (log2 x, log y), one line per precision; right, NVML
GPU utilisation (percent, solid) and, where the sweep ran with --busy, the CUPTI busy share (x100,
dashed, same colour). On the CPU, where those are n/a, four panels of the CPU's own figures:
samples/s, GFLOP/s achieved, cores used (CPU seconds / wall seconds; the share of ready time its
threads waited for a core beside each point where it is 5 % or more) and peak resident memory.
Unmeasured figures are empty cells in the CSV and are left out of the plot, never drawn as 0. It
prints the panels it drew ("panels: ...").

Needs matplotlib: Debian's python3-matplotlib (tools/setup.sh installs it) is for /usr/bin/python3,
which need not be the python3 on PATH, so run it as
    /usr/bin/python3 scripts/plot_sweep.py sweep.csv sweep.png
Exit status 2, with a one-line message, for a missing file, missing columns or no rows.
"""
import argparse
from plot_util import number, pyplot, read_rows as read_csv, short_number

REQUIRED = ("model", "device_name", "precision", "batch", "samples_per_sec", "gpu_util_mean",
            "gpu_busy_share")


def read_rows(path):
    return read_csv("plot_sweep", path, REQUIRED, "loupe sweep",
                    lambda r: number(r["batch"]) and number(r["samples_per_sec"]) is not None,
                    "no rows with a batch size and samples_per_sec")


def batch_axis(ax, batches):
    from matplotlib.ticker import FixedLocator, NullLocator
    ax.set_xscale("log", base=2)
    ax.set_xlim(batches[0] / 1.5, batches[-1] * 1.5)
    ax.xaxis.set_major_locator(FixedLocator(batches))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(b) for b in batches])
    ax.set_xlabel("batch size")
    ax.grid(True, which="major", alpha=0.3)


def below(ax, **kw):
    """The panel's legend under its axes, never over its points."""
    n = len(ax.get_legend_handles_labels()[1])
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=min(n, 4), frameon=False, **kw)


def throughput_panel(ax, series, rows, colours):
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator
    for i, (prec, rs) in enumerate(series.items()):
        ax.plot([number(r["batch"]) for r in rs], [number(r["samples_per_sec"]) for r in rs], "o-",
                color=colours[i % len(colours)], label=prec)
    ax.set_yscale("log")
    # Readable log ticks (200k, 500k, 1M), denser when the throughput spans about a decade or less.
    tp = [number(r["samples_per_sec"]) for r in rows]
    subs = (1, 2, 5) if max(tp) > 12 * min(tp) else (1, 1.5, 2, 3, 4, 5, 7)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(short_number))
    ax.set_ylabel("samples/s")
    ax.set_title("throughput")
    below(ax, title="precision")


def gpu_panel(ax, series, colours):
    has_gpu = False
    for i, (prec, rs) in enumerate(series.items()):
        c = colours[i % len(colours)]
        b = [number(r["batch"]) for r in rs]
        # Unmeasured points are dropped, so a line joins only the measured ones.
        for col, scale, style, label in (("gpu_util_mean", 1, "o-", f"{prec} NVML util"),
                                         ("gpu_busy_share", 100, "s--", f"{prec} CUPTI busy")):
            pts = [(x, number(r[col])) for x, r in zip(b, rs) if number(r[col]) is not None]
            if pts:
                has_gpu = True
                ax.plot([p[0] for p in pts], [p[1] * scale for p in pts], style, color=c, label=label)
    ax.set_title("GPU utilisation")
    if has_gpu:
        ax.set_ylim(0, 105)
        ax.set_ylabel("percent")
        below(ax, fontsize="small")
    else:
        ax.set_yticks([])
        ax.grid(False)
        ax.text(0.5, 0.5, "GPU utilisation: n/a", transform=ax.transAxes,
                ha="center", va="center", fontsize=12, color="0.4")


# The CPU's panels: CSV column, scale, title, y label. A CSV from before a column existed has none.
CPU_PANELS = (
    ("achieved_tflops", 1e3, "GFLOP/s", "GFLOP/s achieved"),
    ("host_cpu_util", 1, "cores used", "CPU seconds / wall seconds"),
    ("host_rss_bytes", 1 / 2**20, "peak RSS", "MiB"),
)


def cpu_panel(ax, series, colours, col, scale, title, ylabel):
    """One CPU figure against the batch, one line per precision; whether it had any point."""
    drawn = False
    for i, (prec, rs) in enumerate(series.items()):
        pts = [(number(r["batch"]), number(r.get(col)), number(r.get("host_cpu_wait_share")))
               for r in rs if number(r.get(col)) is not None]
        if not pts:
            continue
        drawn = True
        ax.plot([p[0] for p in pts], [p[1] * scale for p in pts], "o-", color=colours[i % len(colours)],
                label=prec)
        if col == "host_cpu_util":  # waiting for a core is why cores used falls short of the threads
            for x, y, w in pts:
                if w is not None and w >= 0.05:
                    ax.annotate(f"waited {w * 100:.0f}%", (x, y * scale), textcoords="offset points",
                                xytext=(0, 6), ha="center", fontsize=7, color="0.3")
    ax.set_title(title)
    if drawn:
        ax.set_ylim(bottom=0, top=ax.get_ylim()[1] * 1.15)
        ax.set_ylabel(ylabel)
    else:
        ax.set_yticks([])
        ax.text(0.5, 0.5, f"{title}: not in this CSV", transform=ax.transAxes, ha="center",
                va="center", fontsize=11, color="0.4")
    return drawn


def main():
    ap = argparse.ArgumentParser(description="Plot the CSV written by `loupe sweep`.")
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title", help='figure title (default: "MODEL on DEVICE_NAME")')
    args = ap.parse_args()

    rows = read_rows(args.csv)
    plt = pyplot("plot_sweep")

    # Precisions in order of first appearance; each one's rows sorted by batch.
    series = {}
    for r in rows:
        series.setdefault(r["precision"], []).append(r)
    for rs in series.values():
        rs.sort(key=lambda r: number(r["batch"]))
    batches = sorted({int(number(r["batch"])) for r in rows})
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    # A run has one device: the CPU's sweep has no GPU figures to draw, so it draws its own.
    cpu = all(r.get("device") == "cpu" for r in rows)

    if cpu:
        fig, grid = plt.subplots(2, 2, figsize=(10, 8))
        axes = list(grid.flat)
        throughput_panel(axes[0], series, rows, colours)
        panels = ["throughput"]
        for ax, (col, scale, title, ylabel) in zip(axes[1:], CPU_PANELS):
            if cpu_panel(ax, series, colours, col, scale, title, ylabel):
                panels.append(title)
    else:
        fig, axes = plt.subplots(1, 2, figsize=(10, 4.6))
        throughput_panel(axes[0], series, rows, colours)
        gpu_panel(axes[1], series, colours)
        panels = ["throughput", "GPU utilisation"]
    for ax in axes:
        batch_axis(ax, batches)

    first = rows[0]
    fig.suptitle(args.title or f"{first['model']} on {first['device_name']}")
    fig.tight_layout()
    fig.savefig(args.png, dpi=150)
    print(f"wrote {args.png} ({len(rows)} points, precisions {', '.join(series)}; "
          f"panels: {', '.join(panels)})")


if __name__ == "__main__":
    main()
