#!/usr/bin/env python3
"""The links study (docs/multi-gpu.md): data-parallel throughput on one GPU and on each of --gpus
(2; e.g. 2,4,8 for the scaling curve) with NCCL over each intra-node transport, for loupe and
(with --pytorch) PyTorch DDP.

usage: scripts/links_study.py --loupe build-gpu/loupe [--models cifar10_cnn,imdb_bilstm,mnist_mlp]
           [--batch 1024] [--precision fp32] [--epochs 3] [--transports nvlink,shm,socket]
           [--gpus 2[,4,8]] [--pytorch] [--pytorch-mode eager|amp|graph|compiled] [--pytorch-args ARGS]
           [--max-steps N] [--timeout S] [--out out/links_study]
       scripts/links_study.py --plot-only CSV [--png PNG]
       scripts/links_study.py CSV PNG            (the same; as tests/check_plot.sh calls it)

Transports (each a set of NCCL variables; every process also gets NCCL_NVLS_ENABLE=0, NVLink
multicast staying off on our machines):
    nvlink  NCCL's default (P2P over NVLink where the GPUs have it)
    shm     NCCL_P2P_DISABLE=1: through host shared memory
    socket  NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_IB_DISABLE=1: through the network stack (IB
            off too, or a host with InfiniBand would use it instead of sockets)
Per model: loupe on one GPU once and on each size of --gpus per transport (`loupe train MODEL --synthetic --resident
--batch B --precision P --epochs E --plain [--gpus 2] --metrics F`), and with --pytorch
`torchrun --standalone --nproc-per-node G scripts/compare_pytorch.py ... --json F` the same way (one
rank does no communication, so the one-GPU run does not depend on the transport). `--batch` is per
GPU. A run's throughput is the median over epochs 2.. (epoch 1 warms up; the last epoch if there
is only one), the total over the ranks; scaling efficiency = samples/s on W / (W x samples/s on 1),
against the same framework's one-GPU run.
Writes into --out: runs/NAME/ (each run's log and metrics), links.csv, links.md (also printed) and
links.png. A run that fails or times out is recorded as n/a with its status, and the study goes on.
NCCL_DEBUG=INFO (unless --no-nccl-debug) lets the table show the path NCCL reports ("via ...").
"""
import argparse
import csv
import glob
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time

TRANSPORTS = {
    "nvlink": {},
    "shm": {"NCCL_P2P_DISABLE": "1"},
    "socket": {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1", "NCCL_IB_DISABLE": "1"},
}
# Cleared from the inherited environment first, so a transport is exactly its own variables.
NCCL_TRANSPORT_VARS = ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_NET")
COLUMNS = ["model", "framework", "transport", "gpus", "samples_per_sec", "scaling_efficiency"]
EXTRA = ["batch", "precision", "nccl_path", "status", "log"]
ONE_GPU = "-"  # the transport column of a one-GPU run


def run_env(transport, nccl_debug):
    env = {k: v for k, v in os.environ.items() if k not in NCCL_TRANSPORT_VARS}
    env.update(TRANSPORTS.get(transport, {}))
    env["NCCL_NVLS_ENABLE"] = "0"
    if nccl_debug:
        env.setdefault("NCCL_DEBUG", "INFO")
        env.setdefault("NCCL_DEBUG_SUBSYS", "INIT")
    return env


def run_logged(cmd, env, log_path, timeout):
    """Runs cmd with its output into log_path; returns its status as text ('ok', 'exit N', ...).
    Its own process group, so a timeout also ends the ranks a launcher (loupe, torchrun) started."""
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        try:
            p = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as e:
            log.write(f"links_study: cannot start: {e}\n")
            return "not started"
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            log.write(f"links_study: killed after {timeout} s\n")
            return "timeout"
    if rc < 0:
        return f"signal {-rc}"
    return "ok" if rc == 0 else f"exit {rc}"


def steady(per_epoch):
    """Median of epochs 2.. (epoch 1 warms up), the last epoch where there is only one; None if none."""
    known = {e: v for e, v in per_epoch.items() if isinstance(v, (int, float))}
    if not known:
        return None
    later = [v for e, v in sorted(known.items()) if e >= 2]
    return statistics.median(later) if later else known[max(known)]


def read_jsonl(paths):
    recs = []
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    r = json.loads(line)
                except ValueError:
                    continue  # a torn line from a killed run: the others still count
                if isinstance(r, dict):
                    recs.append(r)
    return recs


def loupe_throughput(run_dir, gpus):
    """Total samples/s of a loupe run from its JSONL (every *.jsonl in its directory, in case the
    ranks write files of their own). A one-GPU run's records have no rank: rank 0 of a world of one.
    Rank 0 of a multi-GPU run carries world_samples_per_sec, the total; without it, the ranks'
    samples_per_sec of the same epoch are added where every rank's record is there."""
    recs = [r for r in read_jsonl(sorted(glob.glob(os.path.join(run_dir, "*.jsonl")))) if "epoch" in r]
    if not recs:
        return None, "no records"
    worlds = {int(r.get("world_size", 1)) for r in recs}
    if worlds != {gpus}:
        return None, f"world_size {sorted(worlds)} in the records, expected {gpus}"
    per_epoch = {}
    for r in recs:
        if int(r.get("rank", 0)) != 0:
            continue
        v = r.get("world_samples_per_sec") if gpus > 1 else r.get("samples_per_sec")
        if v is None and gpus > 1:
            same = {int(q.get("rank", 0)): q.get("samples_per_sec") for q in recs if q.get("epoch") == r["epoch"]}
            if len(same) == gpus and all(isinstance(x, (int, float)) for x in same.values()):
                v = sum(same.values())
        per_epoch[int(r["epoch"])] = v
    sps = steady(per_epoch)
    return sps, "ok" if sps is not None else "no samples/s in the records"


def pytorch_throughput(path, mode, gpus):
    """Total samples/s from compare_pytorch.py --json (one object per mode, written by rank 0)."""
    if not os.path.exists(path):
        return None, "no json"
    recs = [r for r in read_jsonl([path]) if r.get("mode") == mode]
    if not recs:
        return None, f"no {mode} record"
    r = recs[-1]
    if int(r.get("world_size", 1)) != gpus:
        return None, f"world_size {r.get('world_size')}, expected {gpus}"
    sps = steady({int(e["epoch"]): e.get("samples_per_sec") for e in r.get("epochs", []) if "epoch" in e})
    return sps, "ok" if sps is not None else "no samples/s in the json"


def nccl_path(log_path):
    """The transports NCCL says it connected through ('via P2P/CUMEM', 'via SHM/direct/direct',
    'via NET/Socket/0'), from its INFO lines; '' where it said nothing (one GPU, no NCCL_DEBUG)."""
    try:
        text = open(log_path, errors="replace").read()
    except OSError:
        return ""
    return " ".join(sorted(set(re.findall(r" via (\S+)", text))))


def pytorch_args(a):
    """compare_pytorch.py's mode for loupe's precision: strict fp32 (PyTorch lets cuDNN use TF32 by
    default, loupe's fp32 does not), TF32, or autocast in fp16/bf16; --pytorch-mode overrides."""
    if a.pytorch_mode:
        return a.pytorch_mode, []
    return {"fp32": ("eager", ["--no-tf32"]), "tf32": ("eager", ["--tf32"]),
            "fp16": ("amp", ["--amp-dtype", "fp16"]), "bf16": ("amp", ["--amp-dtype", "bf16"])}[a.precision]


def study(a):
    """Runs every run in turn (they share the GPUs) and returns the CSV rows."""
    os.makedirs(os.path.join(a.out, "runs"), exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    plan = []  # (model, framework, transport, gpus)
    for model in a.models.split(","):
        for fw in ["loupe"] + (["pytorch"] if a.pytorch else []):
            plan.append((model, fw, ONE_GPU, 1))
            plan += [(model, fw, t, g) for g in a.sizes for t in a.transports.split(",")]
    rows = []
    for i, (model, fw, transport, gpus) in enumerate(plan, 1):
        name = f"{model}-{fw}-{'1gpu' if gpus == 1 else f'{transport}-{gpus}gpu'}"
        run_dir = os.path.join(a.out, "runs", name)
        os.makedirs(run_dir, exist_ok=True)
        for old in glob.glob(os.path.join(run_dir, "*.json*")):
            os.remove(old)  # loupe appends to --metrics: a rerun must not read the last one's records
        log = os.path.join(run_dir, "log.txt")
        if fw == "loupe":
            cmd = [a.loupe, "train", model, "--synthetic", "--resident", "--batch", str(a.batch),
                   "--precision", a.precision, "--epochs", str(a.epochs), "--plain",
                   "--metrics", os.path.join(run_dir, "metrics.jsonl")]
            if gpus > 1:  # one GPU is loupe's default path (no launcher, no NCCL)
                cmd[3:3] = ["--gpus", str(gpus)]
        else:
            mode, extra = pytorch_args(a)
            # --nproc_per_node: the spelling both old (1.x) and new torchrun accept
            cmd = [a.torchrun, "--standalone", "--nproc_per_node", str(gpus),
                   os.path.join(here, "compare_pytorch.py"), "--model", model, "--batch", str(a.batch),
                   "--mode", mode, "--epochs", str(a.epochs), "--json", os.path.join(run_dir, "result.json")] + extra + shlex.split(a.pytorch_args)
        if a.max_steps:
            cmd += ["--max-steps", str(a.max_steps)]
        print(f"[{i}/{len(plan)}] {name}: " + " ".join(cmd), flush=True)
        t0 = time.monotonic()
        status = run_logged(cmd, run_env(transport if gpus > 1 else "nvlink", a.nccl_debug), log, a.timeout)
        sps = None
        if status == "ok":
            if fw == "loupe":
                sps, why = loupe_throughput(run_dir, gpus)
            else:
                sps, why = pytorch_throughput(os.path.join(run_dir, "result.json"), pytorch_args(a)[0], gpus)
            if sps is None:
                status = why
        print(f"    {status}, {time.monotonic() - t0:.0f} s" +
              (f", {sps:,.0f} samples/s" if sps is not None else f" (log: {log})"), flush=True)
        rows.append({"model": model, "framework": fw, "transport": transport, "gpus": gpus,
                     "samples_per_sec": sps, "batch": a.batch,
                     "precision": a.precision if fw == "loupe" else pytorch_args(a)[0] + (
                         "" if a.pytorch_mode else f" ({a.precision})"),
                     "nccl_path": nccl_path(log) if gpus > 1 else "", "status": status, "log": log})
    add_efficiency(rows)
    return rows


def add_efficiency(rows):
    """Scaling efficiency of each multi-GPU row against its framework's one-GPU row of the model."""
    one = {(r["model"], r["framework"]): r["samples_per_sec"] for r in rows if int(r["gpus"]) == 1}
    for r in rows:
        base = one.get((r["model"], r["framework"]))
        if int(r["gpus"]) == 1:
            r["scaling_efficiency"] = ""  # the baseline itself
        elif r["samples_per_sec"] is None or not base:
            r["scaling_efficiency"] = None
        else:
            r["scaling_efficiency"] = r["samples_per_sec"] / (int(r["gpus"]) * base)


def cell(v, fmt):
    return "n/a" if v is None else v if isinstance(v, str) else fmt.format(v)


def write_csv(rows, path):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS + EXTRA, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({**r, "samples_per_sec": cell(r["samples_per_sec"], "{:.1f}"),
                        "scaling_efficiency": cell(r["scaling_efficiency"], "{:.4f}")})


def markdown(rows, title):
    lines = [f"### {title}", "",
             "| model | framework | transport | GPUs | samples/s | scaling efficiency | NCCL path | status |",
             "| --- | --- | --- | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        eff = r["scaling_efficiency"]
        lines.append(f"| {r['model']} | {r['framework']} | {r['transport']} | {r['gpus']} | "
                     f"{cell(r['samples_per_sec'], '{:,.0f}')} | {cell(eff, '{:.1%}') if eff != '' else ''} | "
                     f"{r.get('nccl_path', '')} | {r.get('status', '')} |")
    return "\n".join(lines) + "\n"


def read_csv(path):
    """The rows of a links CSV, numbers parsed ('n/a' and '' kept as None / ''); exits 2 naming a
    missing column."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            print(f"links_study: {path}: no column {', '.join(missing)} (expected {','.join(COLUMNS)})",
                  file=sys.stderr)
            sys.exit(2)
        rows = list(reader)

    def num(v):
        try:
            return float(v)
        except (TypeError, ValueError):
            return None if v != "" else ""
    for r in rows:
        r["gpus"] = int(r["gpus"])
        r["samples_per_sec"] = num(r["samples_per_sec"])
        r["scaling_efficiency"] = num(r["scaling_efficiency"])
    return rows


def group_of(r):
    """A bar group of the plot: the one-GPU run, or one (world size, transport)."""
    return (1, ONE_GPU) if r["gpus"] == 1 else (r["gpus"], r["transport"])


def plot(rows, png, title=""):
    """One panel per model: bars of samples/s, grouped by world size and transport (the one-GPU run
    first), one bar per framework; each multi-GPU bar annotated with its scaling efficiency, a failed
    run with n/a."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    models = list(dict.fromkeys(r["model"] for r in rows))
    fws = list(dict.fromkeys(r["framework"] for r in rows))
    groups = sorted(dict.fromkeys(group_of(r) for r in rows), key=lambda g: g[0])  # the baseline leftmost
    fig, axes = plt.subplots(1, len(models), figsize=(4.8 * len(models), 4.6), squeeze=False)
    width = 0.8 / max(1, len(fws))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, model in zip(axes[0], models):
        top = max([r["samples_per_sec"] or 0 for r in rows if r["model"] == model] + [1])
        for k, fw in enumerate(fws):
            for g, group in enumerate(groups):
                match = [r for r in rows if r["model"] == model and r["framework"] == fw and group_of(r) == group]
                if not match:
                    continue
                r = match[0]
                x = g + (k - (len(fws) - 1) / 2) * width
                v = r["samples_per_sec"]
                ax.bar(x, v or 0, width, color=colors[k % len(colors)], label=fw)
                eff = r["scaling_efficiency"]
                note = "n/a" if v is None else "1 GPU" if r["gpus"] == 1 else (
                    f"{eff:.0%}" if isinstance(eff, float) else "n/a")
                ax.annotate(note, (x, v or 0), xytext=(0, 2), textcoords="offset points", ha="center",
                            va="bottom", fontsize=8, rotation=90 if len(fws) > 2 else 0)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels(["1 GPU" if g[0] == 1 else f"{g[0]} GPUs\n{g[1]}" for g in groups])
        ax.set_ylim(0, top * 1.25)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.set_title(model)
        ax.set_ylabel("samples/s (total over GPUs)")
        ax.grid(axis="y", alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        uniq = dict(zip(labels, handles))
        ax.legend(uniq.values(), uniq.keys(), fontsize=8, loc="upper right")
    sizes = ", ".join(str(g[0]) for g in dict.fromkeys((g[0],) for g in groups))
    fig.suptitle(title or f"NCCL transports: samples/s on {sizes} GPUs (labels: scaling efficiency)")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv_png", nargs="*", metavar="CSV [PNG]",
                    help="plot an existing CSV (as --plot-only) into PNG (default: beside the CSV)")
    ap.add_argument("--plot-only", default="", metavar="CSV", help="redraw the plot of an existing CSV")
    ap.add_argument("--png", default="", help="the plot's path with --plot-only (default: CSV's, .png)")
    ap.add_argument("--loupe", default="build-gpu/loupe", metavar="BIN")
    ap.add_argument("--models", default="cifar10_cnn,imdb_bilstm,mnist_mlp")
    ap.add_argument("--batch", type=int, default=1024, help="per GPU")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "fp16", "bf16"])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--max-steps", type=int, default=0, metavar="N", help="passed on: N steps per epoch at most")
    ap.add_argument("--transports", default="nvlink,shm,socket")
    ap.add_argument("--gpus", default="2", metavar="N[,N...]",
                    help="the world sizes past one GPU, e.g. 2,4,8 (one GPU always runs: the baseline)")
    ap.add_argument("--pytorch", action="store_true", help="also PyTorch DDP through torchrun")
    ap.add_argument("--pytorch-mode", default="", choices=["", "eager", "amp", "graph", "compiled"],
                    help="compare_pytorch.py's mode (default: the one matching --precision)")
    ap.add_argument("--pytorch-args", default="", metavar="ARGS",
                    help="more arguments for compare_pytorch.py, e.g. \"--bucket-cap-mb 50\"")
    ap.add_argument("--torchrun", default="torchrun", metavar="BIN")
    ap.add_argument("--timeout", type=float, default=1800, metavar="S", help="per run")
    ap.add_argument("--no-nccl-debug", dest="nccl_debug", action="store_false",
                    help="without NCCL_DEBUG=INFO (the NCCL path column stays empty)")
    ap.add_argument("--out", default="out/links_study")
    a = ap.parse_args()
    if a.csv_png and not a.plot_only:
        if len(a.csv_png) > 2:
            ap.error("at most CSV and PNG")
        a.plot_only = a.csv_png[0]
        a.png = a.png or (a.csv_png[1] if len(a.csv_png) > 1 else "")
    if a.plot_only:
        rows = read_csv(a.plot_only)
        png = a.png or os.path.splitext(a.plot_only)[0] + ".png"
        plot(rows, png)
        print(markdown(rows, os.path.basename(a.plot_only)))
        print(f"plot: {png}")
        return
    try:
        a.sizes = sorted({int(g) for g in a.gpus.split(",")})
    except ValueError:
        ap.error(f"--gpus takes world sizes such as 2,4,8 (not {a.gpus})")
    if not a.sizes or a.sizes[0] < 2:
        ap.error(f"--gpus takes world sizes of 2 or more (one GPU always runs), not {a.gpus}")
    bad = [t for t in a.transports.split(",") if t not in TRANSPORTS]
    if bad:
        ap.error(f"transports: {', '.join(TRANSPORTS)} (not {', '.join(bad)})")
    rows = study(a)
    csv_path, md_path, png = (os.path.join(a.out, "links." + e) for e in ("csv", "md", "png"))
    write_csv(rows, csv_path)
    title = f"links study: batch {a.batch} per GPU, {a.precision}, {a.epochs} epochs"
    table = markdown(rows, title)
    with open(md_path, "w") as f:
        f.write(table)
    print("\n" + table)
    try:
        plot(read_csv(csv_path), png, title)
        print(f"csv: {csv_path}\nmarkdown: {md_path}\nplot: {png}")
    except ImportError:  # the numbers are the study; the plot can be drawn later with --plot-only
        print(f"csv: {csv_path}\nmarkdown: {md_path}\nno plot: matplotlib is not installed")


if __name__ == "__main__":
    main()
