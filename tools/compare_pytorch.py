#!/usr/bin/env python3
"""PyTorch side of the speed comparison: the reference models in PyTorch with the same recipe,
trained on data resident on the GPU (the same setting as `loupe train`), timed per epoch.

usage: tools/compare_pytorch.py [--model mnist_mlp] [--batch 128] [--epochs 2] [--data DIR]
                                [--device cuda] [--mode eager|amp|graph|compiled] [--amp-dtype fp16|bf16]
                                [--modes eager,graph,amp,compiled] [--loupe build-gpu/loupe] [--no-tf32]
Prints one line per epoch and a final line `pytorch MODEL batch B MODE: N samples/s (best epoch)`
per mode. With --loupe it then runs `loupe bench` on the same model and batch and prints the
ratios, e.g. (strict fp32 on both sides):
    tools/compare_pytorch.py --model cifar10_cnn --batch 1024 --epochs 3 --no-tf32 \
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
"""
import argparse
import gzip
import os
import struct
import time

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


def profile_steps(step, inputs, xtr, ytr, batch, steps):
    """GPU time per kernel over `steps` training steps of `step` (a graph's replay in the graphed
    modes: the profiler sees its kernels), per step, largest first."""
    from torch.profiler import ProfilerActivity, profile
    idx = torch.arange(batch, device=xtr.device)
    x, y = inputs(xtr[idx]), ytr[idx].long()
    for _ in range(5):
        step(x, y)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step(x, y)
        torch.cuda.synchronize()
    rows = [(e.device_time_total / steps, e.count / steps, e.key) for e in prof.key_averages()
            if e.device_time_total > 0]
    total = sum(r[0] for r in rows)
    print(f"pytorch profile: {steps} steps, GPU activity sum {total:.1f} us/step")
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


def train_mode(a, mode, dev, xtr, ytr, xte, yte):
    """Trains a fresh model for a.epochs epochs in `mode`; returns the best epoch's samples/s."""
    model, make_opt = MODELS[a.model]()
    model.to(dev)
    graphed = mode in ("graph", "compiled")
    # A CUDA graph replays the optimizer's kernels as captured: its step count must live on the GPU.
    opt = make_opt(model.parameters(), capturable=True) if graphed else make_opt(model.parameters())
    # compiled: Triton kernels from torch.compile (inductor) for the forward and backward.
    fwd_model = torch.compile(model) if mode == "compiled" else model
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
    scaler = torch.amp.GradScaler("cuda") if mode == "amp" and amp_dtype == torch.float16 else None

    def forward_loss(x, y):
        with torch.autocast(dev.type, dtype=amp_dtype, enabled=amp):  # losses autocast to float32
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
            for _ in range(3):
                train_step(static_x, static_y)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = forward_loss(static_x, static_y)
            static_loss.backward()
            opt.step()

        def step(x, y):
            static_x.copy_(x)
            static_y.copy_(y)
            graph.replay()
            return static_loss
    best = 0.0
    n = xtr.shape[0]
    # A graph has fixed shapes: it runs the full batches only (and counts only their samples).
    last = n - a.batch + 1 if graphed else n
    for epoch in range(1, a.epochs + 1):
        model.train()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        perm = torch.randperm(n, device=dev)
        loss_sum = torch.zeros((), device=dev)
        samples = 0
        for s in range(0, last, a.batch):
            idx = perm[s:s + a.batch]
            loss = step(inputs(xtr[idx]), ytr[idx].long())
            loss_sum += loss.detach().float() * idx.numel()
            samples += idx.numel()
        lsum = loss_sum.item()
        dt = time.perf_counter() - t0
        sps = samples / dt
        best = max(best, sps)
        model.eval()
        with torch.no_grad():
            correct = sum((predicted(model(inputs(xte[s:s + 1000]))) == yte[s:s + 1000].long()).sum().item()
                          for s in range(0, xte.shape[0], 1000))
        print(f"pytorch epoch {epoch}: loss {lsum / samples:.4f} test acc {100 * correct / xte.shape[0]:.2f}% "
              f"{dt:.2f} s {sps:,.0f} samples/s", flush=True)
    if a.profile:
        model.train()
        profile_steps(step, inputs, xtr, ytr, a.batch, a.profile)
    tf32 = (" (TF32 for convolutions and GEMMs)" if a.tf32 else "" if a.no_tf32 or not torch.backends.cudnn.allow_tf32
            else " (cuDNN TF32 allowed, PyTorch's default)")
    label = {"eager": "eager fp32", "graph": "CUDA graph fp32",
             "amp": f"autocast {a.amp_dtype}" + (" + GradScaler" if scaler else ""),
             "compiled": f"torch.compile + CUDA graph + autocast {a.amp_dtype} (no loss scaling)"}[mode]
    print(f"pytorch {a.model} batch {a.batch} {label}{tf32}: {best:,.0f} samples/s (best epoch)", flush=True)
    return best


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
                    help="after training, profile STEPS steps with torch.profiler and print GPU time per kernel")
    a = ap.parse_args()
    if a.no_tf32:
        torch.backends.cudnn.allow_tf32 = False
    if a.tf32:
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cuda.matmul.allow_tf32 = True
    assert a.model in MODELS, f"models: {sorted(MODELS)}"
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
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
    xtr, ytr, xte, yte = (t.to(dev) for t in (xtr, ytr, xte, yte))
    modes = a.modes.split(",") if a.modes else [a.mode]
    for m in modes:
        assert m in ("eager", "amp", "graph", "compiled"), f"modes: eager, amp, graph, compiled (not {m})"
    best = {}
    for m in modes:
        torch.manual_seed(a.seed)
        best[m] = train_mode(a, m, dev, xtr, ytr, xte, yte)
    if a.loupe:
        compare_with_loupe(a, best)


if __name__ == "__main__":
    main()
