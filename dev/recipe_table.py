#!/usr/bin/python3
"""One markdown row per whole-recipe run, for docs/performance.md's CPU table.

  dev/recipe_table.py RUN...

RUN is the path stem of a run made by
  /usr/bin/time -v loupe train MODEL --device cpu --plain --metrics RUN.jsonl > RUN.out 2> RUN.err
(the metrics JSON Lines, and /usr/bin/time's report at the end of RUN.err). A row: the model, its
epochs and batch, the whole run's wall time, the median epoch (training + evaluation) with the
first and last, the median training samples/s, the median evaluation, the peak RSS and the share of
the time the threads waited for a core (other processes held it).
"""
import json
import re
import statistics
import sys


def wall_and_rss(err_path):
    text = open(err_path).read()
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", text)
    parts = [float(p) for p in m.group(1).split(":")]
    wall = sum(p * 60 ** i for i, p in enumerate(reversed(parts)))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1)) * 1024
    return wall, rss


def human(seconds):
    if seconds < 1:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} min {seconds % 60:.0f} s"


def row(stem):
    recs = [json.loads(line) for line in open(stem + ".jsonl") if line.strip()]
    wall, rss = wall_and_rss(stem + ".err")
    ep = [r["epoch_seconds"] for r in recs]
    sps = statistics.median(r["samples_per_sec"] for r in recs)
    ev = statistics.median(r["eval_seconds"] for r in recs)
    wait = statistics.median(r.get("host_cpu_wait_share") or 0 for r in recs)
    r0 = recs[0]
    return (f"| `{r0['model']}` | {len(recs)} epochs, batch {r0['batch']} | {human(wall)} | "
            f"{human(statistics.median(ep))} ({human(ep[0])}, {human(ep[-1])}) | {sps:,.0f} | {human(ev)} | "
            f"{rss / 2**20:,.0f} MiB | {100 * wait:.1f} % |")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    print("| model | recipe | whole run | epoch, median (first, last) | training samples/s | evaluation | peak RSS | waited for a core |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for stem in sys.argv[1:]:
        print(row(stem))


if __name__ == "__main__":
    main()
