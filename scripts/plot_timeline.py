#!/usr/bin/env python3
"""Plots the CSV of `loupe train --timeline FILE.csv`: the GPU over the run's time.

usage: scripts/plot_timeline.py TIMELINE.csv OUT.png [--title T] [--model M] [--gpu NAME]

One panel per metric (utilisation %, memory used, power W, temperature °C, SM clock MHz), all on
one time axis (seconds since the run's start), one line per GPU index. Epochs (epoch_start ..
epoch_end marks) are shaded alternately; evaluation starts and ends and checkpoints are vertical
lines. Unmeasured figures are empty cells and leave gaps, never 0. A file with marks only (a CPU
run, or no NVML) has no GPU panels to draw: one panel instead shows its marks on the time axis, each
epoch's training and evaluation as bars with their seconds and the checkpoints as lines, and the
title says it has no samples. The title names the file, and the model and GPU where --model and
--gpu give them. It prints the panels it drew ("panels: ...").

Needs matplotlib: Debian's python3-matplotlib is for /usr/bin/python3, so run it as
    /usr/bin/python3 scripts/plot_timeline.py timeline.csv timeline.png
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


def phases(marks, spans):
    """([(start, end)] of the training, [(start, end)] of the evaluations): an epoch trains from its
    start to its first evaluation (or its end); what follows its evaluation (checkpoint, report) is
    neither."""
    evals, start = [], None
    for t, m in marks:
        if m == "eval_start":
            start = t
        elif m == "eval_end" and start is not None:
            evals.append((start, t))
            start = None
    train = []
    for a, b in spans:
        end = min([e0 for e0, _ in evals if a <= e0 < b], default=b)
        if end > a:
            train.append((a, end))
    return train, evals


def draw_marks_only(ax, marks, spans, t_end):
    """A CPU run's timeline (or one without NVML): its phases as bars, not five empty GPU panels."""
    train, evals = phases(marks, spans)
    for y, (bars, colour) in enumerate(((evals, "tab:green"), (train, "tab:blue"))):
        ax.broken_barh([(a, b - a) for a, b in bars], (y - 0.35, 0.7), color=colour, alpha=0.6)
        for a, b in bars:  # the seconds where the bar has room for them
            if b - a >= 0.06 * max(t_end, 1e-3):
                ax.text((a + b) / 2, y, f"{b - a:.3g} s", ha="center", va="center", fontsize=8)
    for t, m in marks:
        if m == "checkpoint":
            colour, style, _ = MARK_STYLE[m]
            ax.axvline(t, color=colour, ls=style, lw=1)
    for i, (a0, b0) in enumerate(spans):
        ax.text((a0 + b0) / 2, 1.01, f"epoch {i + 1}", transform=ax.get_xaxis_transform(),
                ha="center", va="bottom", fontsize=8, color="0.3")
        ax.axvline(a0, color="0.5", lw=0.6)
    ax.set_yticks([0, 1])
    ax.set_yticklabels(["evaluation", "training"])
    ax.set_ylim(-0.7, 1.7)
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title("no GPU samples in this file (a CPU run, or NVML off): the run's phases from its marks",
                 fontsize=10, color="0.3", pad=14)


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
    if not samples:
        fig, ax = plt.subplots(1, 1, figsize=(11, 3.2))
        draw_marks_only(ax, marks, spans, t_end)
        ax.set_xlabel("time since the run's start (s)")
        ax.set_xlim(0, max(t_end, 1e-3) * 1.01)
        if any(m == "checkpoint" for _, m in marks):
            ax.legend(handles=legend_handles([], [(t, m) for t, m in marks if m == "checkpoint"], []),
                      loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9)
        finish(fig, a, spans, 0, "timeline")
        print(f"wrote {a.png} (panels: phases from the marks; no samples)")
        return
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
        if col == "util_pct":  # GPM's SM activity beside it, dashed, where the file has it
            for i, (g, v) in enumerate(sorted(samples.items())):
                sm = [(t, number(r.get("sm_active_pct") or "")) for t, r in v]
                sm = [(t, y) for t, y in sm if y is not None]
                if sm:
                    ax.plot([t for t, _ in sm], [y for _, y in sm], color=f"C{i}", lw=1.2, ls="--")
                    label = "GPU util (solid), SM active (dashed), %"
        draw_marks(ax, marks, spans)
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        if col == "util_pct":
            ax.set_ylim(-2, 102)
    for i, (a0, b0) in enumerate(spans):  # the epochs' numbers above the first panel
        axes[0].text((a0 + b0) / 2, 1.01, f"epoch {i + 1}", transform=axes[0].get_xaxis_transform(),
                     ha="center", va="bottom", fontsize=8, color="0.3")
    axes[-1].set_xlabel("time since the run's start (s)")
    axes[-1].set_xlim(0, max(t_end, 1e-3) * 1.01)
    axes[0].legend(handles=legend_handles(sorted(samples), marks, spans), loc="upper left",
                   bbox_to_anchor=(1.01, 1.0), fontsize=9)
    finish(fig, a, spans, sum(len(v) for v in samples.values()), "GPU timeline")
    print(f"wrote {a.png} (panels: {', '.join(label for _, label in PANELS)})")


def finish(fig, a, spans, nsamples, kind):
    what = ", ".join(x for x in (a.model, a.gpu) if x)
    title = a.title or f"{kind}: {os.path.basename(a.csv)}" + (f" ({what})" if what else "")
    n = len(spans)
    fig.suptitle(f"{title}\n{n} epoch{'s' if n != 1 else ''}, {nsamples} NVML samples")
    fig.tight_layout()
    fig.savefig(a.png, dpi=110, bbox_inches="tight")


if __name__ == "__main__":
    main()
