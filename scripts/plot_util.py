"""Shared by loupe's plotting scripts (plot_sweep.py, plot_roofline.py): reading a CSV that loupe
wrote, with exit status 2 and a one-line message when it cannot be used, and matplotlib."""
import csv
import sys


def fail(prog, msg):
    print(f"{prog}: {msg}", file=sys.stderr)
    sys.exit(2)


def number(cell):
    """The cell as a float, or None when it is empty (unmeasured) or not finite."""
    try:
        v = float(cell)
    except (TypeError, ValueError):
        return None
    return v if v == v and abs(v) != float("inf") else None


def short_number(v, _pos=None):
    """1500 -> 1.5k, 2e6 -> 2M: tick labels."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")):
        if abs(v) >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def read_rows(prog, path, required, command, keep, none_msg):
    """The rows of the CSV at path that keep(row) accepts; fails (exit 2) for an unreadable file,
    missing columns (naming them and the loupe command that writes the CSV) or no rows left."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in required if c not in (reader.fieldnames or [])]
            if missing:
                fail(prog, f"{path}: missing column(s) {', '.join(missing)}; expected the CSV of `{command}`")
            rows = list(reader)
    except OSError as e:
        fail(prog, f"cannot read {path}: {e.strerror}")
    rows = [r for r in rows if keep(r)]
    if not rows:
        fail(prog, f"{path}: {none_msg}")
    return rows


def pyplot(prog):
    """matplotlib.pyplot on the Agg backend, or a clear failure when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        fail(prog, "matplotlib is missing: install python3-matplotlib (tools/setup.sh does) "
                   "and run this with /usr/bin/python3")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
