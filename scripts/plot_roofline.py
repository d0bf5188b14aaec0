#!/usr/bin/env python3
"""Plots the CSV of `loupe roofline`: achieved GFLOP/s of y = A·x against the memory roofline.

usage: scripts/plot_roofline.py ROOFLINE.csv OUT.png [--title T]

In the style of the 2017 study that found cuBLAS sgemv at 1 % of a K80's peak: log-log axes,
x = matrix size n (base 2, labelled 1k, 2k, ...), y = GFLOP/s. One line with markers per
implementation (GPU ones solid, CPU ones dashed). Per device, a dotted line for its memory-bandwidth
roofline, bandwidth_bytes_per_s * 2n^2 / (4n^2 + 8n) (the FLOP per byte of y = A·x in float32,
about 1/2), and a dash-dot line for its measured fp32 peak where there is one. The largest n of
gpu_ours and cublas_sgemv is annotated with its share of the bandwidth and of the peak.
Unmeasured figures are empty cells in the CSV and are left out of the plot, never drawn as 0.

Needs matplotlib: Debian's python3-matplotlib (tools/setup.sh installs it) is for /usr/bin/python3,
which need not be the python3 on PATH, so run it as
    /usr/bin/python3 scripts/plot_roofline.py roofline.csv roofline.png
Exit status 2, with a one-line message, for a missing file, missing columns or no rows.
"""
import argparse
import statistics

from plot_util import number, pyplot, read_rows as read_csv, short_number

REQUIRED = ("device_name", "impl", "n", "gflops", "roofline_fraction", "bandwidth_bytes_per_s",
            "peak_gflops")
DEFAULT_TITLE = "y = A·x, float32: achieved GFLOP/s against the memory roofline and the peak"

# Known implementations, in legend order, with a fixed colour and marker each.
STYLE = {
    "gpu_ours": ("tab:blue", "o"),
    "cublas_sgemv": ("tab:red", "s"),
    "gpu_naive": ("tab:orange", "v"),
    "cpu_blas": ("tab:green", "D"),
    "cpu_threads": ("tab:purple", "^"),
    "cpu_1thread": ("tab:brown", "P"),
}
OTHER_COLOURS = ("tab:pink", "tab:olive", "tab:cyan", "tab:gray")
ANNOTATE = ("gpu_ours", "cublas_sgemv")


def positive(cell):
    v = number(cell)
    return v if v is not None and v > 0 else None


def size_label(n):
    """1024 -> 1k, 16384 -> 16k, 512 -> 512."""
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def rate(bytes_per_s):
    """4.02e12 -> 4.02 TB/s, 1.02e11 -> 102 GB/s."""
    if bytes_per_s >= 1e12:
        return f"{bytes_per_s / 1e12:.3g} TB/s"
    return f"{bytes_per_s / 1e9:.3g} GB/s"


def percent(f):
    return f"{f * 100:.0f}%" if f * 100 >= 9.95 else f"{f * 100:.1f}%"


def is_cpu(impl):
    return impl.startswith("cpu")


def read_rows(path):
    # A log-log plot: keep only rows with a positive size and a positive achieved rate.
    return read_csv("plot_roofline", path, REQUIRED, "loupe roofline",
                    lambda r: positive(r["n"]) and positive(r["gflops"]) and r["impl"],
                    "no rows with a matrix size n and gflops")


def flop_per_byte(n):
    """2n^2 FLOP over 4n^2 + 8n bytes: A read once, x read and y written once (float32)."""
    return 2.0 * n * n / (4.0 * n * n + 8.0 * n)


def main():
    ap = argparse.ArgumentParser(description="Plot the CSV written by `loupe roofline`.")
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title", help=f'figure title (default: "{DEFAULT_TITLE}")')
    args = ap.parse_args()

    rows = read_rows(args.csv)
    plt = pyplot("plot_roofline")
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    # Implementations: the known ones in STYLE order, then any others in order of appearance;
    # each one's rows sorted by n.
    series = {}
    for r in rows:
        series.setdefault(r["impl"], []).append(r)
    order = [i for i in STYLE if i in series] + [i for i in series if i not in STYLE]
    for rs in series.values():
        rs.sort(key=lambda r: number(r["n"]))
    sizes = sorted({int(number(r["n"])) for r in rows})

    # Devices in order of appearance: GPU if any of its rows is not a cpu_* implementation.
    devices = {}
    for r in rows:
        d = devices.setdefault(r["device_name"], {"gpu": False, "bw": [], "peak": []})
        d["gpu"] |= not is_cpu(r["impl"])
        for col, key in (("bandwidth_bytes_per_s", "bw"), ("peak_gflops", "peak")):
            v = positive(r[col])
            if v is not None:
                d[key].append(v)
    for d in devices.values():
        d["bw"] = statistics.median(d["bw"]) if d["bw"] else None
        d["peak"] = statistics.median(d["peak"]) if d["peak"] else None

    fig, ax = plt.subplots(figsize=(12, 6.5))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    lo, hi = sizes[0] / 1.4, sizes[-1] * 1.4
    ax.set_xlim(lo, hi)
    ys = [positive(r["gflops"]) for r in rows]

    others = iter(OTHER_COLOURS * (len(order) // len(OTHER_COLOURS) + 1))
    colour_of = {}
    for impl in order:
        colour, marker = STYLE.get(impl, (None, "X"))
        colour = colour or next(others)
        colour_of[impl] = colour
        rs = series[impl]
        ax.plot([number(r["n"]) for r in rs], [positive(r["gflops"]) for r in rs],
                linestyle="--" if is_cpu(impl) else "-", marker=marker, markersize=7,
                linewidth=2, color=colour, label=impl, zorder=3)

    # The device lines: memory roofline (dotted) and measured peak (dash-dot).
    steps = 200
    grid = [lo * (hi / lo) ** (i / (steps - 1)) for i in range(steps)]
    device_colours = iter(("black", "0.5", "tab:olive", "tab:cyan"))
    for name, d in devices.items():
        c = next(device_colours, "0.3")
        kind = "GPU" if d["gpu"] else "CPU"
        if d["bw"]:
            line = [d["bw"] * flop_per_byte(n) / 1e9 for n in grid]
            ys += line
            ax.plot(grid, line, ":", color=c, linewidth=2,
                    label=f"{kind} memory roofline: {name}, {'copy' if kind == 'GPU' else 'read'} {rate(d['bw'])}")
        if d["peak"]:
            ys.append(d["peak"])
            ax.axhline(d["peak"], linestyle="-.", color=c, linewidth=1.5,
                       label=f"{kind} fp32 peak (measured) {d['peak'] / 1e3:.3g} TFLOP/s")

    # Annotate the largest n of the GPU implementations the study is about.
    offsets = {"gpu_ours": (-14, 34), "cublas_sgemv": (-14, -40)}
    for impl in ANNOTATE:
        if impl not in series:
            continue
        r = series[impl][-1]
        n, g = number(r["n"]), positive(r["gflops"])
        d = devices[r["device_name"]]
        frac = number(r["roofline_fraction"])
        if frac is None and d["bw"]:
            frac = g * 1e9 / flop_per_byte(n) / d["bw"]
        parts = []
        if frac is not None:
            parts.append(f"{percent(frac)} of bandwidth")
        if d["peak"]:
            parts.append(f"{percent(g / d['peak'])} of peak")
        if not parts:
            continue
        ax.annotate(f"{impl} at n = {size_label(int(n))}:\n" + ", ".join(parts), xy=(n, g),
                    xytext=offsets[impl], textcoords="offset points", ha="right",
                    va="center", fontsize=9.5, color=colour_of[impl],
                    bbox=dict(boxstyle="round,pad=0.3", fc="white", ec=colour_of[impl], alpha=0.9),
                    arrowprops=dict(arrowstyle="->", color=colour_of[impl]), zorder=5)

    ax.set_ylim(min(ys) / 2.5, max(ys) * 3)
    ax.xaxis.set_major_locator(FixedLocator(sizes))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([size_label(n) for n in sizes])
    ax.set_xlabel("matrix size n (A is n × n, float32)")
    # Readable log ticks, denser when the figures span little more than a decade.
    bottom, top = ax.get_ylim()
    subs = (1,) if top > 300 * bottom else (1, 2, 5)
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    ax.yaxis.set_minor_locator(LogLocator(base=10, subs=tuple(range(1, 10))))
    ax.yaxis.set_major_formatter(FuncFormatter(short_number))
    ax.set_ylabel("GFLOP/s (2n² / seconds)")
    ax.grid(True, which="major", alpha=0.3)
    ax.grid(True, which="minor", axis="y", alpha=0.1)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, borderaxespad=0)
    ax.set_title(args.title or DEFAULT_TITLE)
    fig.tight_layout()
    fig.savefig(args.png, dpi=150, bbox_inches="tight")
    print(f"wrote {args.png} ({len(rows)} points, impls {', '.join(order)})")


if __name__ == "__main__":
    main()
