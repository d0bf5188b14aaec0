#!/usr/bin/env python3
"""The report `loupe train` prints for each reference recipe, line by line, against the report
before the run moved into the library (tests/golden/report/, docs/design.md "The run"): a short
CPU run on synthetic data, its numbers masked, its measurement and advice lines (which follow the
machine's load) reduced to their label.

Usage: check_report_lines.py LOUPE [--write]   exit 0 when every report matches; --write records them.
"""
import pathlib
import re
import subprocess
import sys

MODELS = ["mnist_mlp", "mnist_cnn", "cifar10_cnn", "imdb_bilstm", "imdb_fasttext", "char_lstm"]
GOLDEN = pathlib.Path(__file__).resolve().parent / "golden" / "report"


def masked(text):
    lines = []
    for line in text.splitlines():
        if line.startswith("  advice"):
            continue  # what the machine's load says: judged by the advice tests
        if line.startswith("  step p50"):
            line = "  step (measurements)"
        elif line.startswith("device  "):
            line = "device  (this machine)"
        lines.append(re.sub(r"[0-9][0-9,]*(\.[0-9]+)?", "N", line))
    return "\n".join(lines) + "\n"


def main():
    loupe, write = sys.argv[1], "--write" in sys.argv
    failed = 0
    for m in MODELS:
        run = subprocess.run([loupe, "train", m, "--device", "cpu", "--synthetic", "--epochs", "2", "--max-steps", "3",
                              "--plain", "--threads", "1", "--no-nvml"], capture_output=True, text=True)
        got = masked(run.stdout)
        path = GOLDEN / f"{m}.txt"
        if write:
            path.write_text(got)
            continue
        want = path.read_text()
        if run.returncode != 0 or got != want:
            failed += 1
            print(f"report_lines: {m}: exit {run.returncode}; the report differs from {path}:\n--- want\n{want}--- got\n{got}"
                  f"--- stderr\n{run.stderr}")
        else:
            print(f"report_lines: {m}: the same lines")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
