#!/usr/bin/env python3
"""Plots the CSV of `loupe train --timeline FILE.csv`: the GPU over the run's time.

usage: tools/plot_timeline.py TIMELINE.csv OUT.png [--title T] [--model M] [--gpu NAME]

One panel per metric (utilisation %, memory used, power W, temperature °C, SM clock MHz), all on
one time axis (seconds since the run's start), one line per GPU index. Epochs (epoch_start ..
epoch_end marks) are shaded alternately; evaluation starts and ends and checkpoints are vertical
lines. Unmeasured figures are empty cells and leave gaps, never 0. A file with marks only (a CPU
run, or no NVML) is drawn with its marks and says it has no samples. The title names the file, and
the model and GPU where --model and --gpu give them.

Needs matplotlib: Debian's python3-matplotlib is for /usr/bin/python3, so run it as
    /usr/bin/python3 tools/plot_timeline.py timeline.csv timeline.png
Exit status 2, with a one-line message, for a missing file, missing columns or no rows.
"""
import argparse
import os

from plot_util import number, pyplot, read_rows

REQUIRED = ("t_s", "gpu", "util_pct", "mem_used_mib", "power_w", "temp_c", "sm_clock_mhz", "mark")
PROG = "plot_timeline.py"
# column, axis label
PANELS = (
    ("util_pct", "GPU utilisation (%)"),
    ("mem_used_mib", "memory used"),  # the unit (MiB or GiB) is chosen from the data
    ("power_w", "power (W)"),
    ("temp_c", "temperature (°C)"),
    ("sm_clock_mhz", "SM clock (MHz)"),
)
MARK_STYLE = {  # vertical lines: colour, line style, legend text
    "eval_start": ("tab:green", "--", "evaluation start"),
    "eval_end": ("tab:green", ":", "evaluation end"),
    "checkpoint": ("tab:purple", "-", "checkpoint"),
}


def split(rows):
    """({gpu: [rows]} of the samples, [(t, mark)] of the marks), both in time order."""
    samples, marks = {}, []
    for r in rows:
        t = number(r["t_s"])
        if t is None:
            continue
        if r["mark"]:
            marks.append((t, r["mark"]))
        else:
            samples.setdefault(r["gpu"] or "?", []).append((t, r))
    for v in samples.values():
        v.sort(key=lambda x: x[0])
    marks.sort(key=lambda x: x[0])
    return samples, marks


def epochs(marks, t_end):
    """[(start, end)] of the epochs: each epoch_start to its epoch_end (or the next start, or the end)."""
    spans, start = [], None
    for t, m in marks:
        if m == "epoch_start":
            if start is not None:
                spans.append((start, t))
            start = t
        elif m == "epoch_end" and start is not None:
            spans.append((start, t))
            start = None
    if start is not None:
        spans.append((start, max(t_end, start)))
    return spans


def draw_marks(ax, marks, spans):
    for i, (a, b) in enumerate(spans):
        ax.axvspan(a, b, color="tab:blue" if i % 2 == 0 else "tab:orange", alpha=0.08, lw=0)
    for t, m in marks:
        if m in MARK_STYLE:
            colour, style, _ = MARK_STYLE[m]
            ax.axvline(t, color=colour, ls=style, lw=1)


def legend_handles(gpus, marks, spans):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    handles = [Line2D([], [], color=f"C{i}", lw=1.5, label=f"GPU {g}") for i, g in enumerate(gpus)]
    if spans:
        handles.append(Patch(color="tab:blue", alpha=0.2, label="epochs (shaded alternately)"))
    seen = {m for _, m in marks}
    for m, (colour, style, text) in MARK_STYLE.items():
        if m in seen:
            handles.append(Line2D([], [], color=colour, ls=style, lw=1, label=text))
    return handles


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title")
    ap.add_argument("--model", help="the model, for the title")
    ap.add_argument("--gpu", help="the GPU's name, for the title")
    a = ap.parse_args()
    rows = read_rows(PROG, a.csv, REQUIRED, "loupe train --timeline FILE.csv", lambda r: True,
                     "no rows (not even marks): the run wrote only the header")
    samples, marks = split(rows)
    plt = pyplot(PROG)
    times = [t for v in samples.values() for t, _ in v] + [t for t, _ in marks]
    t_end = max(times) if times else 0
    spans = epochs(marks, t_end)
    fig, axes = plt.subplots(len(PANELS), 1, sharex=True, figsize=(11, 11))
    all_mib = [number(r["mem_used_mib"]) for v in samples.values() for _, r in v]
    gib = max([m for m in all_mib if m is not None], default=0) >= 2048
    for ax, (col, label) in zip(axes, PANELS):
        scale = 1 / 1024 if col == "mem_used_mib" and gib else 1
        if col == "mem_used_mib":
            label = f"memory used ({'GiB' if gib else 'MiB'})"
        for i, (g, v) in enumerate(sorted(samples.items())):
            ys = [number(r[col]) for _, r in v]
            ax.plot([t for t, _ in v], [y * scale if y is not None else float("nan") for y in ys],
                    color=f"C{i}", lw=1.2)
        draw_marks(ax, marks, spans)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        if col == "util_pct":
            ax.set_ylim(-2, 102)
        if not samples:
            ax.text(0.5, 0.5, "no NVML samples in this file (marks only)", transform=ax.transAxes,
                    ha="center", va="center", color="0.4")
    for i, (a0, b0) in enumerate(spans):  # the epochs' numbers above the first panel
        axes[0].text((a0 + b0) / 2, 1.01, f"epoch {i + 1}", transform=axes[0].get_xaxis_transform(),
                     ha="center", va="bottom", fontsize=8, color="0.3")
    axes[-1].set_xlabel("time since the run's start (s)")
    axes[-1].set_xlim(0, max(t_end, 1e-3) * 1.01)
    axes[0].legend(handles=legend_handles(sorted(samples), marks, spans), loc="upper left",
                   bbox_to_anchor=(1.01, 1.0), fontsize=9)
    what = ", ".join(x for x in (a.model, a.gpu) if x)
    title = a.title or f"GPU timeline: {os.path.basename(a.csv)}" + (f" ({what})" if what else "")
    n = len(spans)
    fig.suptitle(f"{title}\n{n} epoch{'s' if n != 1 else ''}, "
                 f"{sum(len(v) for v in samples.values())} NVML samples")
    fig.tight_layout()
    fig.savefig(a.png, dpi=110, bbox_inches="tight")


if __name__ == "__main__":
    main()
