#!/usr/bin/env python3
"""The golden check's reference (docs/keras.md, "Weights"): Keras's maths without Keras.

For each case, writes into OUTDIR/CASE/ a Keras 2.2 model file (model.json, as `model.to_json()`
writes it), its weights as Keras names them (one .npy per variable: LAYER__NAME.npy, a '/' in
the name as '__'), an input batch (x.npy) and the model's output on it (y.npy), computed here with
NumPy from Keras's published formulas: the last layer's output before its softmax or sigmoid,
which loupe's losses apply. test_keras_reference builds the model from the file, loads the
weights and compares its output with y.npy.

    tests/keras_reference.py OUTDIR
"""
import json
import os
import sys

import numpy as np

rng = np.random.default_rng(20171105)


def weights(*shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def act(name, z):
    return {"relu": lambda v: np.maximum(v, 0), "linear": lambda v: v, "tanh": np.tanh,
            "sigmoid": sigmoid}[name](z)


# ---- Keras's layers (keras/layers/*.py, Keras 2.2.4; channels_last) ---------------------------------

def same_padding(size, k, s):
    """TensorFlow's SAME: the output is ceil(size / s); the padding's odd pixel goes after."""
    total = max((-(-size // s) - 1) * s + k - size, 0)
    return total // 2, total - total // 2


def conv2d(x, kernel, bias, stride, padding):
    k = kernel.shape[0]
    if padding == "same":
        (t, b), (l, r) = same_padding(x.shape[1], k, stride), same_padding(x.shape[2], k, stride)
        x = np.pad(x, ((0, 0), (t, b), (l, r), (0, 0)))
    n, h, w, _ = x.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    y = np.zeros((n, oh, ow, kernel.shape[3]), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + k, j * stride:j * stride + k, :]
            y[:, i, j, :] = np.tensordot(patch, kernel, axes=([1, 2, 3], [0, 1, 2]))
    return y + (bias if bias is not None else 0)


def pool2d(x, k, stride, reduce):
    n, h, w, c = x.shape
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    y = np.zeros((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            y[:, i, j, :] = reduce(x[:, i * stride:i * stride + k, j * stride:j * stride + k, :], axis=(1, 2))
    return y


def batch_norm(x, gamma, beta, mean, var, eps):
    """Inference: the moving statistics (keras.backend.batch_normalization)."""
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def lstm(x, kernel, recurrent, bias, return_sequences, go_backwards=False,
         activation=np.tanh, recurrent_activation=sigmoid):
    """Keras's LSTM cell: z = x W + h U + b split into i, f, c, o."""
    n, t, _ = x.shape
    u = recurrent.shape[0]
    h, c = np.zeros((n, u)), np.zeros((n, u))
    steps = range(t - 1, -1, -1) if go_backwards else range(t)
    ys = []
    for s in steps:
        z = x[:, s, :] @ kernel + h @ recurrent + bias
        i, f = recurrent_activation(z[:, :u]), recurrent_activation(z[:, u:2 * u])
        c = f * c + i * activation(z[:, 2 * u:3 * u])
        h = recurrent_activation(z[:, 3 * u:]) * activation(c)
        ys.append(h)
    return np.stack(ys, 1) if return_sequences else h


# ---- the cases ---------------------------------------------------------------------------------------

def layer(cls, name, **config):
    return {"class_name": cls, "config": dict(name=name, **config)}


def model_file(layers):
    return {"class_name": "Sequential", "config": {"name": "sequential_1", "layers": layers},
            "keras_version": "2.2.4", "backend": "tensorflow"}


def case_mlp():
    w = {"fc1": [weights(7, 5), weights(5)], "out": [weights(5, 3), weights(3)]}
    layers = [layer("Dense", "fc1", units=5, activation="relu", batch_input_shape=[None, 7]),
              layer("Dense", "out", units=3, activation="softmax")]
    x = weights(4, 7, scale=1)
    y = np.maximum(x @ w["fc1"][0] + w["fc1"][1], 0) @ w["out"][0] + w["out"][1]
    names = {"fc1": ["kernel", "bias"], "out": ["kernel", "bias"]}
    return layers, w, names, x, y


def case_cnn():
    """Convolutions (same and valid), batch norm on an image and on a flattened one, both poolings,
    and a Dense over a flattened image (Keras flattens pixel by pixel)."""
    bn = lambda c: [np.float32(1) + weights(c, scale=0.2), weights(c, scale=0.2), weights(c, scale=0.3),
                    rng.uniform(0.5, 1.5, c).astype(np.float32)]
    w = {"conv1": [weights(3, 3, 2, 4), weights(4)], "bn1": bn(4), "conv2": [weights(2, 2, 4, 3), weights(3)],
         "bn2": bn(12), "fc": [weights(12, 5), weights(5)], "out": [weights(5, 3)]}
    layers = [layer("Conv2D", "conv1", filters=4, kernel_size=[3, 3], padding="same", activation="relu",
                    batch_input_shape=[None, 6, 7, 2]),
              layer("BatchNormalization", "bn1", momentum=0.9, epsilon=0.01),
              layer("MaxPooling2D", "pool1", pool_size=[2, 2]),
              layer("Conv2D", "conv2", filters=3, kernel_size=[2, 2], padding="valid"),
              layer("Flatten", "flat"),
              layer("BatchNormalization", "bn2", epsilon=0.001),
              layer("Dense", "fc", units=5, activation="relu"),
              layer("Dense", "out", units=3, use_bias=False, activation="softmax")]
    x = weights(3, 6, 7, 2, scale=1)
    h = np.maximum(conv2d(x, *w["conv1"], 1, "same"), 0)
    h = pool2d(batch_norm(h, *w["bn1"], 0.01), 2, 2, np.max)
    h = conv2d(h, *w["conv2"], 1, "valid").reshape(len(x), -1)
    h = np.maximum(batch_norm(h, *w["bn2"], 0.001) @ w["fc"][0] + w["fc"][1], 0)
    y = h @ w["out"][0]
    bn_names = ["gamma", "beta", "moving_mean", "moving_variance"]
    names = {"conv1": ["kernel", "bias"], "bn1": bn_names, "conv2": ["kernel", "bias"], "bn2": bn_names,
             "fc": ["kernel", "bias"], "out": ["kernel"]}
    return layers, w, names, x, y


def case_average_pool():
    w = {"conv": [weights(3, 3, 1, 2), weights(2)], "out": [weights(2 * 2 * 2, 2), weights(2)]}
    layers = [layer("Conv2D", "conv", filters=2, kernel_size=[3, 3], batch_input_shape=[None, 7, 7, 1]),
              layer("AveragePooling2D", "pool", pool_size=[2, 2]),
              layer("Flatten", "flat"),
              layer("Dense", "out", units=2, activation="softmax")]
    x = weights(2, 7, 7, 1, scale=1)
    h = pool2d(conv2d(x, *w["conv"], 1, "valid"), 2, 2, np.mean).reshape(len(x), -1)
    y = h @ w["out"][0] + w["out"][1]
    return layers, w, {"conv": ["kernel", "bias"], "out": ["kernel", "bias"]}, x, y


def case_lstm():
    """Token ids through an Embedding and two LSTMs, the first returning its sequence."""
    w = {"emb": [weights(50, 6)], "lstm1": [weights(6, 16), weights(4, 16), weights(16, scale=0.2)],
         "lstm2": [weights(4, 12), weights(3, 12), weights(12, scale=0.2)], "out": [weights(3, 1), weights(1)]}
    layers = [layer("Embedding", "emb", input_dim=50, output_dim=6, batch_input_shape=[None, 5]),
              layer("LSTM", "lstm1", units=4, return_sequences=True),
              layer("LSTM", "lstm2", units=3),
              layer("Dense", "out", units=1, activation="sigmoid")]
    x = rng.integers(0, 50, (3, 5)).astype(np.int32)
    h = lstm(w["emb"][0][x], *w["lstm1"], True)
    y = lstm(h, *w["lstm2"], False) @ w["out"][0] + w["out"][1]
    lstm_names = ["kernel", "recurrent_kernel", "bias"]
    names = {"emb": ["embeddings"], "lstm1": lstm_names, "lstm2": lstm_names, "out": ["kernel", "bias"]}
    return layers, w, names, x, y


def case_bidirectional():
    """Bidirectional(LSTM) as a sequence (the backward one's outputs back in time order), averaged,
    then one returning its last states side by side."""
    def two(n_in, u):
        return [weights(n_in, 4 * u), weights(u, 4 * u), weights(4 * u, scale=0.2)] * 1
    fw1, bw1, fw2, bw2 = two(3, 4), two(3, 4), two(8, 2), two(8, 2)
    lstm_cfg = lambda name, units, seq: {"class_name": "LSTM", "config": {"name": name, "units": units,
                                                                           "return_sequences": seq}}
    layers = [{"class_name": "Bidirectional", "config": {"name": "bi1", "merge_mode": "concat",
                                                         "layer": lstm_cfg("lstm_1", 4, True),
                                                         "batch_input_shape": [None, 5, 3]}},
              {"class_name": "Bidirectional", "config": {"name": "bi2", "merge_mode": "concat",
                                                         "layer": lstm_cfg("lstm_2", 2, False)}},
              layer("Dense", "out", units=2, activation="softmax")]
    out = [weights(4, 2), weights(2)]
    x = weights(2, 5, 3, scale=1)
    seq = np.concatenate([lstm(x, *fw1, True), lstm(x, *bw1, True, go_backwards=True)[:, ::-1]], 2)
    last = np.concatenate([lstm(seq, *fw2, False), lstm(seq, *bw2, False, go_backwards=True)], 1)
    y = last @ out[0] + out[1]
    lstm_names = ["kernel", "recurrent_kernel", "bias"]
    w = {"bi1": fw1 + bw1, "bi2": fw2 + bw2, "out": out}
    names = {"bi1": [f"{d}_lstm_1/{n}" for d in ("forward", "backward") for n in lstm_names],
             "bi2": [f"{d}_lstm_2/{n}" for d in ("forward", "backward") for n in lstm_names],
             "out": ["kernel", "bias"]}
    return layers, w, names, x, y


CASES = {"mlp": case_mlp, "cnn": case_cnn, "average_pool": case_average_pool, "lstm": case_lstm,
         "bidirectional": case_bidirectional}


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for name, make in CASES.items():
        layers, w, names, x, y = make()
        d = os.path.join(sys.argv[1], name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.json"), "w") as f:
            json.dump(model_file(layers), f, indent=1)
        for layer_name, arrays in w.items():
            assert len(arrays) == len(names[layer_name]), layer_name
            for var, a in zip(names[layer_name], arrays):
                np.save(os.path.join(d, f"{layer_name}__{var.replace('/', '__')}.npy"), a.astype(np.float32))
        np.save(os.path.join(d, "x.npy"), x)
        np.save(os.path.join(d, "y.npy"), y.astype(np.float32))


if __name__ == "__main__":
    main()
