#!/usr/bin/env python3
"""The CPU studies (lab/plans/cpu_backend.md, lab/benchmarks.md): threads scaling against PyTorch,
and the same training on one CPU thread, on all of them and on the GPU, with energy and cost.

usage: scripts/cpu_study.py scaling --loupe BIN [--models LIST] [--threads 1,2,4,8,16] [--batch 128]
                                  [--rounds 1] [--python PY] [--out DIR]
       scripts/cpu_study.py cpu-gpu --loupe BIN [--models LIST] [--threads N] [--batch 128]
                                  [--gpu-precision fp32,fp16] [--prices 1t=X,all=Y,gpu=Z] [--out DIR]
       scripts/cpu_study.py CSV PNG      (redraw either study's plot from its CSV)

scaling: per model and thread count, `loupe bench MODEL --device cpu --threads T` and, with the same
OMP_NUM_THREADS, `scripts/compare_pytorch.py --device cpu --epochs 2 --max-steps S` (its best epoch:
the second, warm), one after the other (alternating, so the host's drift hits both); with
--rounds R each pair R times, the best kept. Writes scaling.csv, scaling.md and scaling.png.

cpu-gpu: per model, `loupe bench` on one CPU thread, on --threads (default: all cores) and on the
GPU (each --gpu-precision), with samples/s, samples per joule (NVML on the GPU; n/a on the CPU,
whose energy loupe does not read) and, with --prices, the cost of a million samples at those
hourly prices (inputs, not measurements: each configuration's machine as you rent it). Writes
cpu_gpu.csv, cpu_gpu.md and cpu_gpu.png.

Steps per run are sized per model so each measurement lasts about a second or more on 16 cores.
A run that fails is recorded as n/a with its status and the study goes on.
"""
import argparse
import csv
import json
import os
import subprocess
import sys

MODELS = ["mnist_mlp", "mnist_cnn", "cifar10_cnn", "imdb_bilstm", "imdb_fasttext", "char_lstm"]
STEPS = {"mnist_mlp": 200, "mnist_cnn": 40, "cifar10_cnn": 30, "imdb_bilstm": 30, "imdb_fasttext": 20, "char_lstm": 60}
SCALING_COLUMNS = ["model", "framework", "threads", "samples_per_sec", "status"]
CPU_GPU_COLUMNS = ["model", "config", "threads", "precision", "samples_per_sec", "samples_per_joule",
                   "price_per_hour", "usd_per_million_samples", "status"]
HERE = os.path.dirname(os.path.abspath(__file__))


def first_record(path):
    try:
        with open(path) as f:
            return json.loads(f.readline())
    except (OSError, ValueError):
        return None


def run(cmd, log, env=None, timeout=600):
    with open(log, "w") as f:
        try:
            return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            return "timeout"


def loupe_bench(a, model, out, tag, args, env=None):
    js = os.path.join(out, "runs", f"{tag}.json")
    rc = run([a.loupe, "bench", model, "--batch", str(a.batch), "--steps", str(a.steps(model)), "--warmup", "5",
              "--json", js] + args, os.path.join(out, "runs", f"{tag}.log"), env)
    return first_record(js) if rc == 0 else None, rc


def scaling(a):
    rows = []
    for model in a.models:
        for t in a.threads:
            best = {"loupe": None, "pytorch": None}
            status = {"loupe": "ok", "pytorch": "ok"}
            for r in range(a.rounds):
                rec, rc = loupe_bench(a, model, a.out, f"loupe-{model}-{t}-{r}", ["--device", "cpu", "--threads", str(t)])
                if rec:
                    best["loupe"] = max(best["loupe"] or 0, rec["samples_per_sec"])
                else:
                    status["loupe"] = f"exit {rc}"
                env = dict(os.environ, OMP_NUM_THREADS=str(t))
                js = os.path.join(a.out, "runs", f"pytorch-{model}-{t}-{r}.json")
                rc = run([a.python, os.path.join(HERE, "compare_pytorch.py"), "--device", "cpu", "--model", model,
                          "--batch", str(a.batch), "--epochs", "2", "--max-steps", str(a.steps(model)), "--json", js],
                         os.path.join(a.out, "runs", f"pytorch-{model}-{t}-{r}.log"), env)
                rec = first_record(js) if rc == 0 else None
                if rec:
                    best["pytorch"] = max(best["pytorch"] or 0, rec["samples_per_sec"])
                else:
                    status["pytorch"] = f"exit {rc}"
            for fw in ("loupe", "pytorch"):
                rows.append({"model": model, "framework": fw, "threads": t, "samples_per_sec": best[fw],
                             "status": status[fw]})
            print(f"{model} {t} threads: loupe {best['loupe'] or 'n/a'}  pytorch {best['pytorch'] or 'n/a'}", flush=True)
    return rows


def cpu_gpu(a):
    rows = []
    # (configuration, its --prices key, bench arguments, threads, precision)
    configs = [("cpu-1t", "1t", ["--device", "cpu", "--threads", "1"], 1, "fp32"),
               ("cpu-all", "all", ["--device", "cpu", "--threads", str(a.all_threads)], a.all_threads, "fp32")]
    configs += [("gpu", "gpu", ["--device", "cuda", "--precision", p], "", p) for p in a.gpu_precision]
    for model in a.models:
        for config, key, args, threads, prec in configs:
            price = a.prices.get(key)
            extra = ["--price-per-hour", str(price)] if price is not None else []
            rec, rc = loupe_bench(a, model, a.out, f"{config}-{prec}-{model}", args + extra)
            row = {"model": model, "config": config, "threads": threads, "precision": prec, "price_per_hour": price,
                   "status": "ok" if rec else f"exit {rc}"}
            if rec:
                row["samples_per_sec"] = rec.get("samples_per_sec")
                row["samples_per_joule"] = rec.get("samples_per_joule")
                row["usd_per_million_samples"] = rec.get("cost_per_million_samples")
            rows.append(row)
            print(f"{model} {config} {prec}: {row.get('samples_per_sec') or 'n/a'} samples/s", flush=True)
    return rows


def fmt(v, f="{:,.0f}"):
    return "n/a" if v in (None, "") else f.format(float(v))


def write(rows, columns, out, name):
    path = os.path.join(out, f"{name}.csv")
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for r in rows:
            w.writerow({c: "" if r.get(c) is None else r.get(c) for c in columns})
    return path


def markdown_scaling(rows):
    models = list(dict.fromkeys(r["model"] for r in rows))
    threads = sorted({int(r["threads"]) for r in rows})
    by = {(r["model"], r["framework"], int(r["threads"])): r["samples_per_sec"] for r in rows}
    lines = ["| model | " + " | ".join(f"{t} thr loupe / PyTorch (ratio)" for t in threads) + " |",
             "|---" * (len(threads) + 1) + "|"]
    for m in models:
        cells = []
        for t in threads:
            lo, pt = by.get((m, "loupe", t)), by.get((m, "pytorch", t))
            ratio = f"{float(lo) / float(pt):.2f}" if lo not in (None, "") and pt not in (None, "") else "n/a"
            cells.append(f"{fmt(lo)} / {fmt(pt)} ({ratio})")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def markdown_cpu_gpu(rows):
    lines = ["| model | configuration | samples/s | samples/J | $/h (input) | $ per million samples |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        conf = r["config"] + (f" ({r['threads']} threads)" if r["config"] != "gpu" else f" ({r['precision']})")
        lines.append(f"| {r['model']} | {conf} | {fmt(r.get('samples_per_sec'))} | "
                     f"{fmt(r.get('samples_per_joule'), '{:,.1f}')} | {fmt(r.get('price_per_hour'), '{:.2f}')} | "
                     f"{fmt(r.get('usd_per_million_samples'), '{:.4f}')} |")
    return "\n".join(lines) + "\n"


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def plot(csv_path, png):
    rows = read_csv(csv_path)
    cols = set(rows[0].keys()) if rows else set()
    kind = "scaling" if "framework" in cols else "cpu_gpu"
    need = SCALING_COLUMNS if kind == "scaling" else ["model", "config", "precision", "samples_per_sec"]
    missing = [c for c in need if c not in cols]
    if missing:
        print(f"cpu_study: {csv_path} has no column {', '.join(missing)}", file=sys.stderr)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    models = list(dict.fromkeys(r["model"] for r in rows))
    if kind == "scaling":
        ncol = (len(models) + 1) // 2
        fig, axes = plt.subplots(2, ncol, figsize=(max(8, 4 * ncol), 7), squeeze=False)
        for ax, m in zip(axes.flat, models):
            for fw, style in (("loupe", "o-"), ("pytorch", "s--")):
                pts = sorted((int(r["threads"]), float(r["samples_per_sec"])) for r in rows
                             if r["model"] == m and r["framework"] == fw and r["samples_per_sec"])
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, label=fw)
            ax.set_xscale("log", base=2)
            ax.set_title(m)
            ax.set_xlabel("threads")
            ax.set_ylabel("samples/s")
            ax.grid(True, alpha=0.3)
            ax.legend()
        for ax in list(axes.flat)[len(models):]:
            ax.axis("off")
        fig.suptitle("CPU training throughput by threads, batch 128 fp32: loupe and PyTorch")
    else:
        configs = list(dict.fromkeys(f"{r['config']} {r['precision']}" for r in rows))
        fig, axes = plt.subplots(1, 2, figsize=(13, 5))
        width = 0.8 / max(1, len(configs))
        for i, c in enumerate(configs):
            for ax, key in ((axes[0], "samples_per_sec"), (axes[1], "usd_per_million_samples")):
                vals = []
                for m in models:
                    v = [r.get(key) for r in rows if r["model"] == m and f"{r['config']} {r['precision']}" == c]
                    vals.append(float(v[0]) if v and v[0] not in (None, "") else float("nan"))  # no bar
                ax.bar([j + i * width for j in range(len(models))], vals, width, label=c)
        for ax, title in ((axes[0], "samples/s (log)"), (axes[1], "$ per million samples at the given prices (log)")):
            ax.set_xticks([j + 0.4 - width / 2 for j in range(len(models))])
            ax.set_xticklabels(models, rotation=30, ha="right")
            ax.set_yscale("log")
            ax.set_title(title)
            ax.legend(fontsize=8)
        fig.suptitle("One CPU thread, all CPU threads, the GPU: the same training, batch 128")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print(f"plot written to {png}")
    return 0


def main():
    if len(sys.argv) == 3 and sys.argv[1].endswith(".csv"):
        return plot(sys.argv[1], sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study", choices=["scaling", "cpu-gpu"])
    ap.add_argument("--loupe", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", default="")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--steps-scale", type=float, default=1.0, help="multiply each model's steps (shorter runs: < 1)")
    ap.add_argument("--python", default=sys.executable, help="the python with torch, for the scaling study")
    ap.add_argument("--gpu-precision", default="fp32,fp16")
    ap.add_argument("--prices", default="", help="hourly prices, e.g. 1t=0.05,all=0.80,gpu=3.00")
    ap.add_argument("--out", default="")
    a = ap.parse_args()
    a.models = [m for m in a.models.split(",") if m]
    a.steps = lambda m: max(5, int(STEPS.get(m, 30) * a.steps_scale))
    a.out = a.out or os.path.join("out", "cpu_study")
    os.makedirs(os.path.join(a.out, "runs"), exist_ok=True)
    try:
        a.prices = {k: float(v) for k, v in (p.split("=") for p in a.prices.split(",") if p)}
    except ValueError:
        ap.error("--prices takes KEY=PRICE pairs, e.g. 1t=0.05,all=0.80,gpu=3.00")
    if a.study == "scaling":
        a.threads = [int(t) for t in (a.threads or "1,2,4,8,16").split(",")]
        rows, columns, name, md = scaling(a), SCALING_COLUMNS, "scaling", markdown_scaling
    else:
        a.all_threads = int(a.threads or os.cpu_count())
        a.gpu_precision = [p for p in a.gpu_precision.split(",") if p]
        rows, columns, name, md = cpu_gpu(a), CPU_GPU_COLUMNS, "cpu_gpu", markdown_cpu_gpu
    path = write(rows, columns, a.out, name)
    text = md(rows)
    with open(os.path.join(a.out, f"{name}.md"), "w") as f:
        f.write(text)
    print(text)
    try:
        return plot(path, os.path.join(a.out, f"{name}.png"))
    except ImportError:  # the numbers are the study; the plot can be drawn later from the CSV
        print("cpu_study: no matplotlib here; redraw with scripts/cpu_study.py CSV PNG", file=sys.stderr)
        return 0


if __name__ == "__main__":
    sys.exit(main())
