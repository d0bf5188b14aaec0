#!/usr/bin/python3
"""Full-size stand-ins for the data sets this machine cannot download, in their published layouts,
so that a whole recipe runs through loupe's real readers and loader
(docs/performance.md, "The six recipes on a 2-core CPU"):

  OUT/cifar10/cifar-10-batches-bin/{data_batch_1..5,test_batch}.bin   random pixels, 50,000 / 10,000
  OUT/imdb/aclImdb/{train,test}/{pos,neg}/ID_RATING.txt               12,500 reviews per folder
  OUT/nietzsche/nietzsche.txt                                         600,893 characters

The text is drawn from a Zipf law over invented words (about 89,000 of them, as IMDb's), each word
often one of its predecessor's usual successors, reviews of about 230 words on average, so
vocabulary sizes, bigram counts (imdb_fasttext's embedding rows) and sequence lengths are of the
real sets' order. Labels are random: the timings mean something, the
accuracies do not. Use: LOUPE_DATA=OUT loupe train MODEL --device cpu.
"""
import os
import sys

import numpy as np


def words(rng, n):
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    out = set()
    while len(out) < n:
        k = int(rng.integers(2, 11))
        out.add("".join(letters[int(i)] for i in rng.zipf(1.4, k) % 26))
    return sorted(out, key=lambda w: (len(w), w))


def zipf_mandelbrot(n):
    # Word frequencies of English text: p(rank k) proportional to 1 / (k + 2.7).
    w = 1.0 / (np.arange(n) + 2.7)
    return w / w.sum()


def cifar(out, rng):
    d = os.path.join(out, "cifar10", "cifar-10-batches-bin")
    os.makedirs(d, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        rec = np.empty((10000, 3073), np.uint8)
        rec[:, 0] = rng.integers(0, 10, 10000)
        rec[:, 1:] = rng.integers(0, 256, (10000, 3072))
        rec.tofile(os.path.join(d, name + ".bin"))


def imdb(out, rng):
    # Words follow one another as in text: with probability 0.55 a word is one of its predecessor's
    # eight usual successors, else a fresh draw. That gives about 1.25 M distinct training bigrams
    # (IMDb's, as imdb_fasttext counts them, about 1.2 M); independent draws would give 2.2 M and
    # an embedding table (whose Adam step dominates imdb_fasttext's time) 1.8 times too large.
    V, K, follow_p = 89000, 8, 0.55
    vocab = np.array(words(rng, V))
    weights = zipf_mandelbrot(V)
    succ = rng.choice(V, (V, K), p=weights)
    succ_w = 1.0 / np.arange(1, K + 1)
    succ_w /= succ_w.sum()
    base = os.path.join(out, "imdb", "aclImdb")
    for split in ("train", "test"):
        lens = np.maximum(10, rng.lognormal(5.2, 0.6, 25000).astype(int))
        ids = np.zeros((25000, lens.max()), np.int64)
        ids[:, 0] = rng.choice(V, 25000, p=weights)
        for t in range(1, lens.max()):
            fresh = rng.choice(V, 25000, p=weights)
            k = rng.choice(K, 25000, p=succ_w)
            ids[:, t] = np.where(rng.random(25000) < follow_p, succ[ids[:, t - 1], k], fresh)
        for r in range(25000):
            label = "pos" if r < 12500 else "neg"
            i = r % 12500
            d = os.path.join(base, split, label)
            os.makedirs(d, exist_ok=True)
            rating = int(rng.integers(7, 11)) if label == "pos" else int(rng.integers(1, 5))
            with open(os.path.join(d, f"{i}_{rating}.txt"), "w") as f:
                f.write(" ".join(vocab[ids[r, :lens[r]]]).capitalize() + ".")


def nietzsche(out, rng):
    vocab = words(rng, 5000)
    weights = zipf_mandelbrot(len(vocab))
    punct = [" ", " ", " ", " ", " ", " ", ", ", ". ", "; ", "--", "\n"]
    parts, size = [], 0
    while size < 600893:
        w = vocab[int(rng.choice(len(vocab), p=weights))]
        if rng.random() < 0.05:
            w = w.capitalize()
        p = punct[int(rng.integers(0, len(punct)))]
        parts.append(w + p)
        size += len(w) + len(p)
    d = os.path.join(out, "nietzsche")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "nietzsche.txt"), "w") as f:
        f.write("".join(parts)[:600893])


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    # One generator per set, so that each set's files depend on its own code only.
    cifar(out, np.random.default_rng(2017))
    imdb(out, np.random.default_rng(2018))
    nietzsche(out, np.random.default_rng(2019))


if __name__ == "__main__":
    main()
