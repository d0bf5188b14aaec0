#!/usr/bin/env python3
"""Plots the CSV of `loupe sweep`: throughput and GPU utilisation against batch size.

usage: tools/plot_sweep.py SWEEP.csv OUT.png [--title T]

Left panel: samples/s against batch size (log2 x, log y), one line per precision. Right panel:
NVML GPU utilisation (percent, solid) and, where the sweep ran with --busy, the CUPTI busy share
(x100, dashed, same colour); on a CPU run it says n/a. Unmeasured figures are empty cells in the
CSV and are left out of the plot, never drawn as 0.

Needs matplotlib: Debian's python3-matplotlib (tools/setup.sh installs it) is for /usr/bin/python3,
which need not be the python3 on PATH, so run it as
    /usr/bin/python3 tools/plot_sweep.py sweep.csv sweep.png
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


def main():
    ap = argparse.ArgumentParser(description="Plot the CSV written by `loupe sweep`.")
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title", help='figure title (default: "MODEL on DEVICE_NAME")')
    args = ap.parse_args()

    rows = read_rows(args.csv)
    plt = pyplot("plot_sweep")
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    # Precisions in order of first appearance; each one's rows sorted by batch.
    series = {}
    for r in rows:
        series.setdefault(r["precision"], []).append(r)
    for rs in series.values():
        rs.sort(key=lambda r: number(r["batch"]))
    batches = sorted({int(number(r["batch"])) for r in rows})

    fig, (ax_tp, ax_gpu) = plt.subplots(1, 2, figsize=(10, 4))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    has_gpu = False
    for i, (prec, rs) in enumerate(series.items()):
        c = colours[i % len(colours)]
        b = [number(r["batch"]) for r in rs]
        ax_tp.plot(b, [number(r["samples_per_sec"]) for r in rs], "o-", color=c, label=prec)
        # Unmeasured points are dropped, so a line joins only the measured ones.
        for col, scale, style, label in (("gpu_util_mean", 1, "o-", f"{prec} NVML util"),
                                         ("gpu_busy_share", 100, "s--", f"{prec} CUPTI busy")):
            pts = [(x, number(r[col])) for x, r in zip(b, rs) if number(r[col]) is not None]
            if pts:
                has_gpu = True
                ax_gpu.plot([p[0] for p in pts], [p[1] * scale for p in pts], style, color=c,
                            label=label)

    for ax in (ax_tp, ax_gpu):
        ax.set_xscale("log", base=2)
        ax.set_xlim(batches[0] / 1.5, batches[-1] * 1.5)
        ax.xaxis.set_major_locator(FixedLocator(batches))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([str(b) for b in batches])
        ax.set_xlabel("batch size")
        ax.grid(True, which="major", alpha=0.3)
    ax_tp.set_yscale("log")
    # Readable log ticks (200k, 500k, 1M), denser when the throughput spans about a decade or less.
    tp = [number(r["samples_per_sec"]) for r in rows]
    subs = (1, 2, 5) if max(tp) > 12 * min(tp) else (1, 1.5, 2, 3, 4, 5, 7)
    ax_tp.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax_tp.yaxis.set_minor_locator(NullLocator())
    ax_tp.yaxis.set_major_formatter(FuncFormatter(short_number))
    ax_tp.set_ylabel("samples/s")
    ax_tp.set_title("throughput")
    ax_tp.legend(title="precision")
    ax_gpu.set_title("GPU utilisation")
    if has_gpu:
        ax_gpu.set_ylim(0, 105)
        ax_gpu.set_ylabel("percent")
        ax_gpu.legend(fontsize="small")
    else:
        ax_gpu.set_yticks([])
        ax_gpu.grid(False)
        ax_gpu.text(0.5, 0.5, "GPU utilisation: n/a (CPU run)", transform=ax_gpu.transAxes,
                    ha="center", va="center", fontsize=12, color="0.4")

    first = rows[0]
    fig.suptitle(args.title or f"{first['model']} on {first['device_name']}")
    fig.tight_layout()
    fig.savefig(args.png, dpi=150)
    print(f"wrote {args.png} ({len(rows)} points, precisions {', '.join(series)})")


if __name__ == "__main__":
    main()
