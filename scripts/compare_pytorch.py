#!/usr/bin/env python3
"""PyTorch side of the speed comparison: the reference models in PyTorch with the same recipe,
trained on data resident on the GPU (the same setting as `loupe train`), timed per epoch.

usage: scripts/compare_pytorch.py [--model mnist_mlp] [--batch 128] [--epochs 2] [--data DIR]
                                [--device cuda] [--mode eager|amp|graph|compiled] [--amp-dtype fp16|bf16]
                                [--modes eager,graph,amp,compiled] [--loupe build-gpu/loupe] [--no-tf32]
                                [--max-steps N] [--json FILE] [--ddp] [--bucket-cap-mb 25] [--check-shards]
Prints one line per epoch and a final line `pytorch MODEL batch B MODE: N samples/s (best epoch)`
per mode. With --loupe it then runs `loupe bench` on the same model and batch and prints the
ratios, e.g. (strict fp32 on both sides):
    scripts/compare_pytorch.py --model cifar10_cnn --batch 1024 --epochs 3 --no-tf32 \
        --modes eager,graph,amp --loupe build-gpu/loupe
With --data it trains on the MNIST-format files there (raw or .gz) and reports test accuracy.
Modes: eager (float32, as written); amp (torch.autocast in float16 with torch.amp.GradScaler, or
bfloat16 without); graph (the whole training step, forward, backward and optimizer, captured
once in a CUDA graph and replayed: full batches only, the optimizer made capturable); compiled
(PyTorch's strongest mode without hand-written kernels: the model through torch.compile, whose
Triton kernels fuse the elementwise work, the whole step in a CUDA graph as in `graph`, and
autocast in --amp-dtype; no loss scaling, since GradScaler's step waits for the host with these
optimizers and cannot be captured). With --loupe, `compiled` is compared with loupe's fastest
precision of fp32, tf32, fp16 and bf16.

Data parallel (docs/multi-gpu.md): started by torchrun (WORLD_SIZE set; `--ddp` insists on
it), each process trains on cuda:LOCAL_RANK (NCCL; gloo with --device cpu) through
DistributedDataParallel, `--batch` per GPU, the data sharded as loupe shards it, e.g.
    torchrun --standalone --nproc-per-node 2 scripts/compare_pytorch.py --model cifar10_cnn \
        --batch 1024 --mode eager --epochs 3 --json ddp.json
Rank 0 alone prints, one line per epoch and `pytorch-ddp MODEL batch B world W MODE: N samples/s
(best epoch)`, N the total over the ranks. Under DDP `compiled` is torch.compile of the DDP model
with autocast and no whole-step CUDA graph; `graph` captures the whole step with DDP (static_graph,
built and warmed up on a side stream). --check-shards asserts the ranks' batches and prints a digest
per epoch of the global steps' index sets, the same for W ranks at batch b as for one at W*b.
--json FILE writes each mode's result as one JSON object (one line per mode).
"""
import argparse
import gzip
import hashlib
import json
import os
import struct
import time
from collections import namedtuple

import torch
import torch.nn as nn


def read_idx(path):
    for p in (path, path + ".gz"):
        if os.path.exists(p):
            opener = gzip.open if p.endswith(".gz") else open
            with opener(p, "rb") as f:
                data = f.read()
            ndim = data[3]
            dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
            return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)
    raise FileNotFoundError(path)


def keras_init(m):
    """Keras' defaults: Glorot-uniform weights, zero biases."""
    for layer in m:
        if isinstance(layer, (nn.Linear, nn.Conv2d)):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)


def mnist_mlp():
    m = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Dropout(0.2),
                      nn.Linear(512, 512), nn.ReLU(), nn.Dropout(0.2), nn.Linear(512, 10))
    keras_init(m)
    # Keras RMSprop: eps outside the sqrt, like torch's.
    return m, lambda p, **kw: torch.optim.RMSprop(p, lr=1e-3, alpha=0.9, eps=1e-7, **kw)


def mnist_cnn():
    m = nn.Sequential(nn.Unflatten(1, (1, 28)), nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(),
                      nn.Dropout(0.5), nn.Linear(128, 10))
    keras_init(m)
    return m, lambda p, **kw: torch.optim.Adadelta(p, lr=1.0, rho=0.95, eps=1e-7, **kw)


def cifar10_cnn():
    m = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                      nn.Dropout(0.25), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(),
                      nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(), nn.Linear(2304, 512), nn.ReLU(),
                      nn.Dropout(0.5), nn.Linear(512, 10))
    keras_init(m)
    return m, lambda p, **kw: torch.optim.RMSprop(p, lr=1e-4, alpha=0.9, eps=1e-7, **kw)


class BiLstm(nn.Module):
    """imdb_bilstm: Embedding 20000x128 -> BiLSTM 64 (final states concatenated) -> Dropout -> Dense 1."""
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20000, 128)
        self.lstm = nn.LSTM(128, 64, batch_first=True, bidirectional=True)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(128, 1)

    def forward(self, x):
        _, (h, _) = self.lstm(self.emb(x))
        return self.fc(self.drop(torch.cat([h[0], h[1]], 1)))


class FastText(nn.Module):
    """imdb_fasttext: Embedding Vx50 -> mean over time -> Dense 1 (V = 1.2 million: words + bigrams)."""
    def __init__(self, vocab=1200000):
        super().__init__()
        self.emb = nn.Embedding(vocab, 50)
        self.fc = nn.Linear(50, 1)

    def forward(self, x):
        return self.fc(self.emb(x).mean(1))


class CharLstm(nn.Module):
    """char_lstm: one-hot characters -> LSTM 128 -> Dense C."""
    def __init__(self, chars=57):
        super().__init__()
        self.chars = chars
        self.lstm = nn.LSTM(chars, 128, batch_first=True)
        self.fc = nn.Linear(128, chars)

    def forward(self, x):
        _, (h, _) = self.lstm(nn.functional.one_hot(x, self.chars).float())
        return self.fc(h[-1])


def adam(p, **kw):
    return torch.optim.Adam(p, lr=1e-3, eps=1e-7, **kw)


MODELS = {"mnist_mlp": mnist_mlp, "mnist_cnn": mnist_cnn, "cifar10_cnn": cifar10_cnn,
          "imdb_bilstm": lambda: (BiLstm(), adam), "imdb_fasttext": lambda: (FastText(), adam),
          "char_lstm": lambda: (CharLstm(), lambda p, **kw: torch.optim.RMSprop(p, lr=1e-2, alpha=0.9, eps=1e-7, **kw))}
SHAPES = {"mnist_mlp": (60000, 28, 28), "mnist_cnn": (60000, 28, 28), "cifar10_cnn": (50000, 3, 32, 32)}
# Text models: (samples, sequence length, id range, classes); labels 0/1 use BCE on one logit.
TEXT = {"imdb_bilstm": (25000, 100, 20000, 2), "imdb_fasttext": (25000, 400, 1200000, 2),
        "char_lstm": (200000, 40, 57, 57)}


# A data-parallel process: its rank, the world size, and the local rank that picks its GPU.
Dist = namedtuple("Dist", "rank world local_rank backend")


def init_dist(a):
    """torch.distributed from torchrun's environment, or None in a single process."""
    if "WORLD_SIZE" not in os.environ:
        if a.ddp:
            raise SystemExit("compare_pytorch: --ddp needs torchrun (no WORLD_SIZE in the environment), e.g. "
                             "torchrun --standalone --nproc-per-node 2 scripts/compare_pytorch.py --ddp ...")
        return None
    import torch.distributed as dist
    # NVLink multicast (NVLS) stays off on our machines, as loupe's launcher sets it.
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    backend = "gloo" if a.device == "cpu" else "nccl"
    dist.init_process_group(backend)
    return Dist(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")), backend)


def epoch_order(n, seed, epoch):
    """The epoch's global order, the same on every rank: it depends on the seed and epoch only."""
    g = torch.Generator().manual_seed(seed + epoch)
    return torch.randperm(n, generator=g)


def shard_steps(n, batch, world):
    """Full global steps of world*batch samples; the tail is dropped so every rank has a full batch."""
    return n // (world * batch)


def shard_batch(order, step, batch, rank, world):
    """Rank `rank`'s batch of global step `step`: the global step takes [s*W*b, (s+1)*W*b) of the
    order, and the rank the b of them from rank*b (so W ranks at b see one process's batches at W*b)."""
    first = step * world * batch + rank * batch
    return order[first:first + batch]


def shard_part(n, rank, world):
    """Evaluation keeps every sample: contiguous parts whose sizes differ by at most one."""
    q, r = divmod(n, world)
    first = rank * q + min(rank, r)
    return first, first + q + (1 if rank < r else 0)


def barrier(dd, dev):
    """Every rank's GPU idle and every rank here: the epoch's clock starts and stops together."""
    import torch.distributed as dist
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    dist.barrier(device_ids=[dev.index]) if dd.backend == "nccl" else dist.barrier()


def wrap_ddp(a, model, dev, capture):
    """DistributedDataParallel with its defaults made explicit (25 MB buckets, gradients as views of
    the buckets: no copy in or out). For whole-step capture PyTorch's CUDA graphs notes ask for DDP
    built on a side stream, and static_graph keeps its per-step host logic out of the replay."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    kw = dict(bucket_cap_mb=a.bucket_cap_mb, gradient_as_bucket_view=True)
    if dev.type == "cuda":
        kw.update(device_ids=[dev.index], output_device=dev.index)
    if not capture:
        return DDP(model, **kw)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        net = DDP(model, static_graph=True, **kw)
    torch.cuda.current_stream().wait_stream(side)
    return net


def check_shard(dd, idx, order, step, batch, digest):
    """--check-shards: the ranks' batches, gathered, are exactly the global step's W*b entries of the
    order, disjoint; their sorted index set goes into the epoch's digest."""
    import torch.distributed as dist
    got = [torch.empty_like(idx) for _ in range(dd.world)]
    dist.all_gather(got, idx)
    glob = torch.cat(got).cpu()
    want = order[step * dd.world * batch:(step + 1) * dd.world * batch]
    assert torch.equal(glob, want), f"rank {dd.rank}: step {step}: the ranks' batches are not the global step's"
    assert torch.unique(glob).numel() == glob.numel(), f"step {step}: ranks' batches overlap"
    digest.update(",".join(map(str, sorted(glob.tolist()))).encode() + b";")


def profile_steps(step, inputs, xtr, ytr, batch, steps):
    """Time per op over `steps` training steps of `step`, per step, largest first: GPU kernel time on
    CUDA (a graph's replay in the graphed modes: the profiler sees its kernels), on the CPU each op's
    own host time (self time, so nested ops are not counted twice)."""
    from torch.profiler import ProfilerActivity, profile
    cuda = xtr.device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    idx = torch.arange(batch, device=xtr.device)
    x, y = inputs(xtr[idx]), ytr[idx].long()
    for _ in range(5):
        step(x, y)
    sync()
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step(x, y)
        sync()
    rows = [((e.device_time_total if cuda else e.self_cpu_time_total) / steps, e.count / steps, e.key)
            for e in prof.key_averages()]
    rows = [r for r in rows if r[0] > 0]
    total = sum(r[0] for r in rows)
    print(f"pytorch profile: {steps} steps, {'GPU activity' if cuda else 'CPU self time'} sum {total:.1f} us/step")
    for t, n, k in sorted(rows, reverse=True)[:25]:
        print(f"{t:9.1f} {100 * t / total:5.1f}% {n:10.1f}  {k[:110]}")


def compare_with_loupe(a, best):
    """Runs `loupe bench` on the same model and batch (the faster of two rounds) and prints a ratio
    per mode: eager and graph against loupe fp32, amp against loupe in the autocast dtype, compiled
    against loupe's fastest precision."""
    import csv
    import subprocess
    import tempfile
    amp_prec = a.amp_dtype
    precs = "fp32,tf32,fp16,bf16" if "compiled" in best else f"fp32,{amp_prec}"
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "bench.csv")
        cmd = [a.loupe, "bench", a.model, "--batch", str(a.batch), "--precision", precs,
               "--rounds", "2", "--warmup", "20", "--no-nvml", "--csv", out]
        print("loupe: " + " ".join(cmd), flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        print(r.stdout.rstrip(), flush=True)
        if r.returncode != 0:
            raise SystemExit(f"compare_pytorch: loupe bench failed ({r.returncode}): {r.stderr.strip()}")
        loupe = {row["precision"]: float(row["samples_per_sec"]) for row in csv.DictReader(open(out))}
    fastest = max(loupe, key=loupe.get)
    print(f"\n{a.model}, batch {a.batch}: samples/s, ratio = loupe / PyTorch (above 1: loupe is faster)")
    print(f"{'PyTorch mode':<40} {'PyTorch':>12} {'loupe':>12} {'ratio':>7}")
    for mode, sps in best.items():
        prec = {"amp": amp_prec, "compiled": fastest}.get(mode, "fp32")
        name = {"eager": "eager fp32", "graph": "CUDA graph fp32", "amp": f"autocast {amp_prec}",
                "compiled": f"compile + CUDA graph + autocast {amp_prec}"}[mode]
        ratio = f"{loupe[prec] / sps:.2f}x" if prec in loupe and sps else "n/a"
        print(f"{name:<40} {sps:>12,.0f} {loupe.get(prec, 0):>12,.0f} {ratio:>7}  (loupe {prec})", flush=True)


def train_mode(a, mode, dev, xtr, ytr, xte, yte, dd=None):
    """Trains a fresh model for a.epochs epochs in `mode`, through DDP where dd is given; returns the
    best epoch's samples/s (under DDP the total over the ranks) and the epochs' records."""
    model, make_opt = MODELS[a.model]()
    model.to(dev)
    # The whole step in one CUDA graph: in graph always; in compiled only in one process (with DDP,
    # torch.compile's DDPOptimizer splits the graph at the buckets and capturing NCCL there as well
    # is not attempted: compiled under DDP is compile + autocast, replayed eagerly).
    graphed = mode == "graph" or (mode == "compiled" and dd is None)
    # A CUDA graph replays the optimizer's kernels as captured: its step count must live on the GPU.
    opt = make_opt(model.parameters(), capturable=True) if graphed else make_opt(model.parameters())
    net = wrap_ddp(a, model, dev, capture=graphed) if dd else model
    if dd:  # the weights are the same on every rank; the dropout masks should not be
        torch.manual_seed(a.seed + dd.rank)
    # compiled: Triton kernels from torch.compile (inductor) for the forward and backward.
    fwd_model = torch.compile(net) if mode == "compiled" else net
    text = a.model in TEXT
    binary = text and TEXT[a.model][3] == 2
    ce = nn.CrossEntropyLoss()
    bce = nn.BCEWithLogitsLoss()

    def loss_fn(logits, y):  # one logit: binary cross-entropy with the sigmoid fused, as Keras' Dense(1, sigmoid)
        return bce(logits.squeeze(1), y.float()) if binary else ce(logits, y)

    def inputs(x):
        return x if text else x.float() / 255.0

    def predicted(logits):
        return (logits.squeeze(1) > 0).long() if binary else logits.argmax(1)

    amp = mode in ("amp", "compiled")
    amp_dtype = torch.bfloat16 if a.amp_dtype == "bf16" else torch.float16
    # Loss scaling is for float16 on the GPU (CPU autocast is bfloat16 only).
    scaler = (torch.amp.GradScaler("cuda") if mode == "amp" and amp_dtype == torch.float16 and dev.type == "cuda"
              else None)

    def forward_loss(x, y):
        if not amp:  # no autocast at all: older PyTorch refuses float16 on the CPU even when disabled
            return loss_fn(fwd_model(x), y)
        with torch.autocast(dev.type, dtype=amp_dtype):  # losses autocast to float32
            return loss_fn(fwd_model(x), y)

    def train_step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = forward_loss(x, y)
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        return loss

    step = train_step
    if graphed:  # whole-network capture, as in PyTorch's CUDA graphs notes
        static_x, static_y = inputs(xtr[:a.batch]).clone(), ytr[:a.batch].long().clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up: the optimizer's state, cuDNN's plans
            # DDP: the notes ask for at least 11 eager DDP steps before capture (bucket rebuilding).
            for _ in range(11 if dd else 3):
                train_step(static_x, static_y)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        try:
            with torch.cuda.graph(graph):
                static_loss = forward_loss(static_x, static_y)
                static_loss.backward()
                opt.step()
        except RuntimeError as e:
            if not dd:
                raise
            raise SystemExit(f"compare_pytorch: rank {dd.rank}: capturing the DDP step in a CUDA graph failed "
                             f"({str(e).splitlines()[0]}); under DDP use --mode eager, amp or compiled")

        def step(x, y):
            static_x.copy_(x)
            static_y.copy_(y)
            graph.replay()
            return static_loss
    best = 0.0
    records = []
    n = xtr.shape[0]
    world, rank = (dd.world, dd.rank) if dd else (1, 0)
    if dd:
        steps = shard_steps(n, a.batch, world)
    else:  # a graph has fixed shapes: it runs the full batches only (and counts only their samples)
        steps = n // a.batch if graphed else -(-n // a.batch)
    if a.max_steps:
        steps = min(steps, a.max_steps)
    if steps == 0:
        raise SystemExit(f"compare_pytorch: {n} samples make no full step of {world} x {a.batch}")
    te_first, te_end = shard_part(xte.shape[0], rank, world)
    tag = "pytorch-ddp" if dd else "pytorch"
    for epoch in range(1, a.epochs + 1):
        model.train()
        digest = hashlib.sha256() if a.check_shards else None
        if dd:  # the order is made before the clock starts, the same on every rank
            order = epoch_order(n, a.seed, epoch)
            perm = order.to(dev)
            barrier(dd, dev)
        elif dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        if not dd:
            perm = torch.randperm(n, device=dev)
        loss_sum = torch.zeros((), device=dev)
        samples = 0
        for s in range(steps):
            idx = shard_batch(perm, s, a.batch, rank, world) if dd else perm[s * a.batch:(s + 1) * a.batch]
            if digest is not None:  # gathers every step: a check, not a timing
                check_shard(dd, idx, order, s, a.batch, digest)
            loss = step(inputs(xtr[idx]), ytr[idx].long())
            loss_sum += loss.detach().float() * idx.numel()
            samples += idx.numel()
        if dd:
            barrier(dd, dev)
        else:
            loss_sum = loss_sum.item()
        dt = time.perf_counter() - t0
        model.eval()
        with torch.no_grad():  # this rank's contiguous part of the test set (all of it in one process)
            correct = torch.zeros((), dtype=torch.int64, device=dev)
            for s in range(te_first, te_end, 1000):
                e = min(s + 1000, te_end)
                correct += (predicted(model(inputs(xte[s:e]))) == yte[s:e].long()).sum()
        if dd:
            import torch.distributed as dist
            sums = torch.stack([loss_sum.double(), correct.double()])
            dist.all_reduce(sums)
            loss_sum, correct = sums.tolist()
            samples *= world  # every rank ran the same number of full batches
        else:
            correct = correct.item()
        sps = samples / dt
        best = max(best, sps)
        acc = 100 * correct / xte.shape[0]
        records.append({"epoch": epoch, "seconds": dt, "samples": samples, "samples_per_sec": sps,
                        "loss": loss_sum / samples, "test_acc": acc})
        if rank == 0:
            print(f"{tag} epoch {epoch}: loss {loss_sum / samples:.4f} test acc {acc:.2f}% "
                  f"{dt:.2f} s {sps:,.0f} samples/s" + (f" ({world} rank{'s' if world > 1 else ''})" if dd else ""), flush=True)
            if digest is not None:
                print(f"{tag} shards epoch {epoch}: {steps} global steps of {world} x {a.batch}, index sets "
                      f"checked, digest {digest.hexdigest()[:16]}", flush=True)
    if a.profile:
        model.train()
        profile_steps(step, inputs, xtr, ytr, a.batch, a.profile)
    tf32 = (" (TF32 for convolutions and GEMMs)" if a.tf32 else "" if a.no_tf32 or dev.type != "cuda"
            or not torch.backends.cudnn.allow_tf32
            else " (cuDNN TF32 allowed, PyTorch's default)")
    label = {"eager": "eager fp32", "graph": "CUDA graph fp32",
             "amp": f"autocast {a.amp_dtype}" + (" + GradScaler" if scaler else ""),
             "compiled": f"torch.compile + CUDA graph + autocast {a.amp_dtype} (no loss scaling)"}[mode]
    if dd and mode == "compiled":
        label = (f"torch.compile of the DDP model + autocast {a.amp_dtype} (no loss scaling; no whole-step "
                 "CUDA graph under DDP)")
    if dd:
        if rank == 0:
            print(f"{tag} {mode}: {label}{tf32}; DDP over {dd.backend}, bucket_cap_mb {a.bucket_cap_mb}, "
                  "gradient_as_bucket_view" + (", static_graph" if graphed else ""), flush=True)
            print(f"{tag} {a.model} batch {a.batch} world {world} {mode}: {best:,.0f} samples/s (best epoch)",
                  flush=True)
    else:
        print(f"pytorch {a.model} batch {a.batch} {label}{tf32}: {best:,.0f} samples/s (best epoch)", flush=True)
    return best, records, label


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="mnist_mlp")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--data", default="")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-tf32", action="store_true",
                    help="strict fp32 convolutions (PyTorch lets cuDNN use TF32 for them by default)")
    ap.add_argument("--tf32", action="store_true",
                    help="TF32 for GEMMs too (torch.backends.cuda.matmul.allow_tf32), like loupe --precision tf32")
    ap.add_argument("--mode", choices=["eager", "amp", "graph", "compiled"], default="eager",
                    help="eager float32, autocast (amp), a CUDA-graphed step (graph), or torch.compile + a "
                         "CUDA-graphed step + autocast (compiled)")
    ap.add_argument("--amp-dtype", choices=["fp16", "bf16"], default="fp16")
    ap.add_argument("--modes", default="", metavar="LIST",
                    help="several modes in turn, e.g. eager,graph,amp (each on a fresh model)")
    ap.add_argument("--loupe", default="", metavar="BIN",
                    help="also run `BIN bench` on the same model and batch (fp32, and fp16 or bf16 "
                         "for amp) and print loupe / PyTorch per mode")
    ap.add_argument("--profile", type=int, default=0, metavar="STEPS",
                    help="after training, profile STEPS steps with torch.profiler and print the time per op "
                         "(GPU kernel time; on the CPU each op's own host time)")
    ap.add_argument("--max-steps", type=int, default=0, metavar="N",
                    help="at most N (global) steps per epoch, for short checks")
    ap.add_argument("--json", default="", metavar="FILE",
                    help="write each mode's result (rank 0's under DDP) as one JSON object, one line per mode")
    ap.add_argument("--ddp", action="store_true",
                    help="insist on data parallelism: fail unless started by torchrun (which it is "
                         "whenever WORLD_SIZE is set, flag or not)")
    ap.add_argument("--bucket-cap-mb", type=float, default=25, metavar="MB",
                    help="DDP's bucket size (its default, 25)")
    ap.add_argument("--check-shards", action="store_true",
                    help="under torchrun: assert every step's gathered batches are the global step's "
                         "entries and print a digest of the index sets per epoch")
    a = ap.parse_args()
    dd = init_dist(a)
    if dd and (a.loupe or a.profile):
        raise SystemExit("compare_pytorch: --loupe and --profile run one process; not under torchrun")
    if a.check_shards and not dd:
        raise SystemExit("compare_pytorch: --check-shards needs torchrun (--nproc-per-node 1 for a world of one)")
    if a.no_tf32:
        torch.backends.cudnn.allow_tf32 = False
    if a.tf32:
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cuda.matmul.allow_tf32 = True
    assert a.model in MODELS, f"models: {sorted(MODELS)}"
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    if dd and dev.type == "cuda":  # one GPU per process, picked by torchrun's LOCAL_RANK
        dev = torch.device("cuda", dd.local_rank)
        torch.cuda.set_device(dev)
    if a.data:
        xtr = read_idx(os.path.join(a.data, "train-images-idx3-ubyte"))
        ytr = read_idx(os.path.join(a.data, "train-labels-idx1-ubyte"))
        xte = read_idx(os.path.join(a.data, "t10k-images-idx3-ubyte"))
        yte = read_idx(os.path.join(a.data, "t10k-labels-idx1-ubyte"))
    elif a.model in TEXT:  # synthetic token ids with the real shapes
        n, t, ids, classes = TEXT[a.model]
        xtr = torch.randint(1, ids, (n, t), dtype=torch.int64)
        if classes == 2:  # reviews as loupe's synthetic set has them: t/2 to t ids, padded at the front
            lengths = torch.randint(t // 2, t + 1, (n, 1))
            xtr[torch.arange(t).expand(n, t) < t - lengths] = 0
        ytr = torch.randint(0, classes, (n,), dtype=torch.int64)
        xte, yte = xtr[:5000], ytr[:5000]
    else:  # synthetic data with the real shapes
        shape = SHAPES[a.model]
        xtr = torch.randint(0, 256, shape, dtype=torch.uint8)
        ytr = torch.randint(0, 10, (shape[0],), dtype=torch.uint8)
        xte, yte = xtr[:10000], ytr[:10000]
    # Every rank made the same data from the same seed and keeps all of it on its GPU, as loupe does.
    xtr, ytr, xte, yte = (t.to(dev) for t in (xtr, ytr, xte, yte))
    modes = a.modes.split(",") if a.modes else [a.mode]
    for m in modes:
        assert m in ("eager", "amp", "graph", "compiled"), f"modes: eager, amp, graph, compiled (not {m})"
    best = {}
    results = []
    for m in modes:
        torch.manual_seed(a.seed)  # the same initial weights on every rank (DDP also broadcasts rank 0's)
        best[m], records, label = train_mode(a, m, dev, xtr, ytr, xte, yte, dd)
        results.append({"framework": "pytorch", "model": a.model, "batch": a.batch,
                        "world_size": dd.world if dd else 1, "mode": m, "label": label,
                        "device": str(dev), "samples_per_sec": best[m], "epochs": records})
    if a.json and (dd is None or dd.rank == 0):
        with open(a.json, "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    if dd:
        import torch.distributed as dist
        dist.destroy_process_group()
    if a.loupe:
        compare_with_loupe(a, best)


if __name__ == "__main__":
    main()
