#!/usr/bin/env python3
"""The golden check's reference (docs/keras.md, "Weights"): Keras's maths without Keras.

For each case, writes into OUTDIR/CASE/ a Keras 2.2 model file (model.json, as `model.to_json()`
writes it), its weights as Keras names them (one .npy per variable: LAYER__NAME.npy, a '/' in
the name as '__'; and in Keras 2's .h5 layouts, model.h5 as `model.save` writes it and weights.h5
as `save_weights` does; model.weights.h5 as Keras 3 writes it, and model.keras, Keras 3's
whole model), an input batch (x.npy) and the model's output on it (y.npy), computed here with
NumPy from Keras's published formulas: the last layer's output before its softmax or sigmoid,
which loupe's losses apply. test_keras_reference builds the model from the file, loads the
weights and compares its output with y.npy.

    tests/keras_reference.py OUTDIR
"""
import json
import os
import re
import sys

import numpy as np

try:
    import h5py
except ImportError:  # the .h5 files are left out; test_keras_reference says so
    h5py = None

rng = np.random.default_rng(20171105)


def weights(*shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def sigmoid(z):
    return 1 / (1 + np.exp(-z))


def hard_sigmoid_keras2(z):
    """keras.backend.hard_sigmoid, Keras 2 and tf.keras: 0.2 x + 0.5, clipped to [0, 1]."""
    return np.clip(0.2 * z + 0.5, 0, 1)


def hard_sigmoid_keras3(z):
    """keras.ops.hard_sigmoid, Keras 3: relu6(x + 3) / 6."""
    return np.minimum(np.maximum(z + 3, 0), 6) / 6


def elu(z):
    """keras.activations.elu, alpha 1: x, or e^x - 1 below 0."""
    return np.where(z > 0, z, np.expm1(np.minimum(z, 0)))


def gelu(z):
    """keras.activations.gelu, approximate=False (Keras 3's and tf.keras's default): x P(X <= x)."""
    from math import erf, sqrt
    return 0.5 * z * (1 + np.vectorize(erf)(z / sqrt(2)))


def act(name, z):
    selu_alpha, selu_scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return {"relu": lambda v: np.maximum(v, 0), "linear": lambda v: v, "tanh": np.tanh,
            "sigmoid": sigmoid, "elu": elu, "selu": lambda v: selu_scale * np.where(v > 0, v, selu_alpha * np.expm1(v)),
            "softplus": lambda v: np.logaddexp(0, v), "softsign": lambda v: v / (1 + np.abs(v)),
            "gelu": gelu, "swish": lambda v: v * sigmoid(v), "silu": lambda v: v * sigmoid(v)}[name](z)


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
         activation=np.tanh, recurrent_activation=sigmoid, mask=None, initial=None, states=False):
    """Keras's LSTM cell: z = x W + h U + b split into i, f, c, o. `mask` [n, t]: a step where it
    is False keeps the state (keras.backend.rnn's masking), and outputs it again. `initial`: the
    states [h, c] it starts from (initial_state), else zeros; `states`: the final h and c too
    (return_state)."""
    n, t, _ = x.shape
    u = recurrent.shape[0]
    h, c = (np.zeros((n, u)), np.zeros((n, u))) if initial is None else initial
    steps = range(t - 1, -1, -1) if go_backwards else range(t)
    ys = []
    for s in steps:
        z = x[:, s, :] @ kernel + h @ recurrent + bias
        i, f = recurrent_activation(z[:, :u]), recurrent_activation(z[:, u:2 * u])
        c_new = f * c + i * activation(z[:, 2 * u:3 * u])
        h_new = recurrent_activation(z[:, 3 * u:]) * activation(c_new)
        keep = np.ones((n, 1), bool) if mask is None else mask[:, s:s + 1]
        h, c = np.where(keep, h_new, h), np.where(keep, c_new, c)
        ys.append(h)
    y = np.stack(ys, 1) if return_sequences else h
    return (y, h, c) if states else y


def gru(x, kernel, recurrent, bias, return_sequences, reset_after, recurrent_activation=sigmoid,
        go_backwards=False, mask=None, initial=None, states=False):
    """Keras's GRU cell (keras/layers/recurrent.py, Keras 2.2.4; keras/src/layers/rnn/gru.py, Keras 3):
    gates z, r, h in that order; reset_after's bias [2, 3u] (the input's, then the recurrent one's).
    `initial`: [h] to start from; `states`: the final h too."""
    n, t, _ = x.shape
    u = recurrent.shape[0]
    b_in, b_rec = (bias[0], bias[1]) if reset_after else (bias, np.zeros(3 * u))
    h = np.zeros((n, u)) if initial is None else initial[0]
    ys = []
    for s in (range(t - 1, -1, -1) if go_backwards else range(t)):
        xw = x[:, s, :] @ kernel + b_in
        if reset_after:
            hu = h @ recurrent + b_rec
            z = recurrent_activation(xw[:, :u] + hu[:, :u])
            r = recurrent_activation(xw[:, u:2 * u] + hu[:, u:2 * u])
            hh = np.tanh(xw[:, 2 * u:] + r * hu[:, 2 * u:])
        else:
            z = recurrent_activation(xw[:, :u] + h @ recurrent[:, :u])
            r = recurrent_activation(xw[:, u:2 * u] + h @ recurrent[:, u:2 * u])
            hh = np.tanh(xw[:, 2 * u:] + (r * h) @ recurrent[:, 2 * u:])
        keep = np.ones((n, 1), bool) if mask is None else mask[:, s:s + 1]
        h = np.where(keep, z * h + (1 - z) * hh, h)
        ys.append(h)
    y = np.stack(ys, 1) if return_sequences else h
    return (y, h) if states else y


def simple_rnn(x, kernel, recurrent, bias, return_sequences, activation=np.tanh, go_backwards=False, initial=None):
    """Keras's SimpleRNN cell: h = activation(x W + h U + b), from `initial` [h] or zeros."""
    n, t, _ = x.shape
    h = np.zeros((n, recurrent.shape[0])) if initial is None else initial[0]
    ys = []
    for s in (range(t - 1, -1, -1) if go_backwards else range(t)):
        h = activation(x[:, s, :] @ kernel + h @ recurrent + bias)
        ys.append(h)
    return np.stack(ys, 1) if return_sequences else h


# ---- the cases ---------------------------------------------------------------------------------------

def layer(cls, name, **config):
    return {"class_name": cls, "config": dict(name=name, **config)}


def model_file(layers, version="2.2.4"):
    if is_functional(layers):
        return functional_keras2(layers, version)
    return {"class_name": "Sequential", "config": {"name": "sequential_1", "layers": layers},
            "keras_version": version, "backend": "tensorflow"}


# ---- functional models: a case's layers name the layers each reads ("inbound") ---------------------

def is_functional(layers):
    return any("inbound" in l for l in layers)


def called(cls, name, inbound, initial=(), **config):
    """A layer of a functional model reading `inbound`: layers' names, or (name, output) for a
    recurrent layer's states (return_state: its output, then h and an LSTM's c); `initial`: a
    recurrent layer's initial_state, in the same form."""
    l = dict(layer(cls, name, **config), inbound=inbound)
    if initial:
        l["initial"] = list(initial)
    return l


def tensor_ref(t):
    return (t, 0) if isinstance(t, str) else tuple(t)


def functional_keras2(layers, version):
    """Keras 2.2's `Model.get_config` (keras/engine/network.py): each layer with its name and
    inbound_nodes, one call each, a list of [layer, node_index, tensor_index, kwargs]; a recurrent
    layer's initial states are its call's tensors after the sequence (RNN.__call__'s full_input)."""
    def call(l):
        return [[n, 0, k, {}] for n, k in map(tensor_ref, l["inbound"] + l.get("initial", []))]
    out = [{"name": l["config"]["name"], "class_name": l["class_name"], "config": l["config"],
            "inbound_nodes": [call(l)] if l.get("inbound") else []}
           for l in layers]
    return {"class_name": "Model", "keras_version": version, "backend": "tensorflow",
            "config": {"name": "model_1", "layers": out, "input_layers": [[out[0]["name"], 0, 0]],
                       "output_layers": [[out[-1]["name"], 0, 0]]}}


def functional_keras3(layers, k3):
    """Keras 3's `Functional.get_config` (keras/src/models/functional.py): each call
    {"args": [...], "kwargs": {}} whose tensors are "__keras_tensor__" objects with their
    keras_history [layer, node_index, tensor_index]; a merge's first argument is a list of them, a
    recurrent layer's initial states its kwargs' initial_state."""
    def tensor(t):
        n, k = tensor_ref(t)
        return {"class_name": "__keras_tensor__", "config": {"shape": None, "dtype": "float32",
                                                             "keras_history": [n, 0, k]}}
    out = []
    for l in layers:
        e = k3(l) if l["class_name"] != "InputLayer" else {
            "module": "keras.layers", "class_name": "InputLayer", "registered_name": None,
            "config": {"batch_shape": l["config"]["batch_input_shape"], "dtype": "float32", "sparse": False,
                       "name": l["config"]["name"]}}
        e["name"] = l["config"]["name"]
        reads = l.get("inbound", [])
        args = [[tensor(n) for n in reads]] if len(reads) > 1 else [tensor(n) for n in reads]
        kwargs = {"initial_state": [tensor(t) for t in l["initial"]]} if l.get("initial") else {}
        e["inbound_nodes"] = [{"args": args, "kwargs": kwargs}] if reads else []
        out.append(e)
    return {"module": "keras.src.models.functional", "class_name": "Functional", "registered_name": "Functional",
            "config": {"name": "functional", "trainable": True, "layers": out,
                       "input_layers": [[out[0]["name"], 0, 0]], "output_layers": [out[-1]["name"], 0, 0]}}


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
              layer("LSTM", "lstm1", units=4, return_sequences=True, recurrent_activation="sigmoid"),
              layer("LSTM", "lstm2", units=3, recurrent_activation="sigmoid"),
              layer("Dense", "out", units=1, activation="sigmoid")]
    x = rng.integers(0, 50, (3, 5)).astype(np.int32)
    h = lstm(w["emb"][0][x], *w["lstm1"], True)
    y = lstm(h, *w["lstm2"], False) @ w["out"][0] + w["out"][1]
    lstm_names = ["kernel", "recurrent_kernel", "bias"]
    names = {"emb": ["embeddings"], "lstm1": lstm_names, "lstm2": lstm_names, "out": ["kernel", "bias"]}
    return layers, w, names, x, y


def case_activations():
    """tanh and sigmoid inside layers and as Activation layers, after a Dense and a Conv2D."""
    w = {"conv": [weights(3, 3, 1, 2), weights(2)], "fc1": [weights(2 * 4 * 4, 6), weights(6)],
         "fc2": [weights(6, 5), weights(5)], "out": [weights(5, 3), weights(3)]}
    layers = [layer("Conv2D", "conv", filters=2, kernel_size=[3, 3], activation="tanh",
                    batch_input_shape=[None, 6, 6, 1]),
              layer("Flatten", "flat"),
              layer("Dense", "fc1", units=6, activation="sigmoid"),
              layer("Dense", "fc2", units=5),
              layer("Activation", "act", activation="tanh"),
              layer("Dense", "out", units=3, activation="softmax")]
    x = weights(3, 6, 6, 1, scale=1)
    h = np.tanh(conv2d(x, *w["conv"], 1, "valid")).reshape(len(x), -1)
    h = np.tanh(sigmoid(h @ w["fc1"][0] + w["fc1"][1]) @ w["fc2"][0] + w["fc2"][1])
    y = h @ w["out"][0] + w["out"][1]
    names = {k: ["kernel", "bias"] for k in w}
    return layers, w, names, x, y


def more_activations_case(names, hard):
    """Keras's other activations, each inside a Dense and then as an Activation layer, and
    hard_sigmoid as the file's Keras defines it (`hard`)."""
    w = {f"fc{i}": [weights(5, 5, scale=1.5), weights(5)] for i in range(len(names))}
    w["out"] = [weights(5, 3), weights(3)]
    layers, h = [], weights(4, 5, scale=2)
    x = h
    for i, a in enumerate(names):
        layers.append(layer("Dense", f"fc{i}", units=5, activation=a, **({"batch_input_shape": [None, 5]} if i == 0 else {})))
        layers.append(layer("Activation", f"act{i}", activation=a))
        f = hard if a == "hard_sigmoid" else lambda v, a=a: act(a, v)
        h = f(f(h @ w[f"fc{i}"][0] + w[f"fc{i}"][1]))
    layers.append(layer("Dense", "out", units=3, activation="softmax"))
    y = h @ w["out"][0] + w["out"][1]
    return layers, w, {k: ["kernel", "bias"] for k in w}, x, y


def case_activations_keras2():
    """Keras 2's: elu, selu, softplus, softsign, relu as a layer, and hard_sigmoid 0.2 x + 0.5."""
    return more_activations_case(["elu", "selu", "softplus", "softsign", "relu", "hard_sigmoid"], hard_sigmoid_keras2)


def case_activations_keras3():
    """Keras 3's gelu and swish (silu), and its hard_sigmoid x / 6 + 0.5."""
    return more_activations_case(["gelu", "swish", "silu", "hard_sigmoid"], hard_sigmoid_keras3)


def conv1d(x, kernel, bias, padding):
    """keras.layers.Conv1D at stride 1: x [N, T, F], kernel [k, F, filters]; same pads (k-1)/2."""
    k = kernel.shape[0]
    if padding == "same":
        x = np.pad(x, ((0, 0), ((k - 1) // 2, k // 2), (0, 0)))
    t = x.shape[1] - k + 1
    y = np.stack([np.tensordot(x[:, i:i + k, :], kernel, axes=([1, 2], [0, 1])) for i in range(t)], 1)
    return y + bias


def pool1d(x, k, reduce):
    t = (x.shape[1] - k) // k + 1
    return np.stack([reduce(x[:, i * k:i * k + k, :], axis=1) for i in range(t)], 1)


def case_conv1d():
    """imdb_cnn's layers: token ids, an Embedding, Conv1D (valid, then same), the 1-D poolings."""
    w = {"emb": [weights(40, 6)], "conv1": [weights(3, 6, 5), weights(5)], "conv2": [weights(3, 5, 4), weights(4)],
         "out": [weights(4, 1), weights(1)]}
    layers = [layer("Embedding", "emb", input_dim=40, output_dim=6, batch_input_shape=[None, 12]),
              layer("Conv1D", "conv1", filters=5, kernel_size=[3], padding="valid", activation="relu"),
              layer("MaxPooling1D", "pool1", pool_size=[2]),
              layer("Conv1D", "conv2", filters=4, kernel_size=[3], padding="same"),
              layer("AveragePooling1D", "pool2", pool_size=[2]),
              layer("GlobalMaxPooling1D", "pool3"),
              layer("Dense", "out", units=1, activation="sigmoid")]
    x = rng.integers(0, 40, (3, 12)).astype(np.int32)
    h = pool1d(np.maximum(conv1d(w["emb"][0][x], *w["conv1"], "valid"), 0), 2, np.max)
    h = pool1d(conv1d(h, *w["conv2"], "same"), 2, np.mean).max(axis=1)
    y = h @ w["out"][0] + w["out"][1]
    names = {"emb": ["embeddings"], "conv1": ["kernel", "bias"], "conv2": ["kernel", "bias"], "out": ["kernel", "bias"]}
    return layers, w, names, x, y


def global_pool_case(cls, reduce):
    w = {"conv": [weights(3, 3, 2, 4), weights(4)], "out": [weights(4, 3), weights(3)]}
    layers = [layer("Conv2D", "conv", filters=4, kernel_size=[3, 3], activation="relu",
                    batch_input_shape=[None, 7, 6, 2]),
              layer(cls, "pool"),
              layer("Dense", "out", units=3, activation="softmax")]
    x = weights(3, 7, 6, 2, scale=1)
    h = reduce(np.maximum(conv2d(x, *w["conv"], 1, "valid"), 0), axis=(1, 2))
    y = h @ w["out"][0] + w["out"][1]
    return layers, w, {"conv": ["kernel", "bias"], "out": ["kernel", "bias"]}, x, y


def case_global_average():
    """GlobalAveragePooling2D: the mean of each channel over the image."""
    return global_pool_case("GlobalAveragePooling2D", np.mean)


def case_global_max():
    """GlobalMaxPooling2D: the largest value of each channel."""
    return global_pool_case("GlobalMaxPooling2D", np.max)


def hard_lstm_case(recurrent_activation, explicit):
    """Two LSTMs with hard_sigmoid gates; the biases large enough that some gates sit past both of
    its corners. `explicit`: the second LSTM names hard_sigmoid, the first leaves it to the
    version's default (or names it too)."""
    w = {"lstm1": [weights(3, 16), weights(4, 16), weights(16, scale=2.0)],
         "lstm2": [weights(4, 12), weights(3, 12), weights(12, scale=2.0)], "out": [weights(3, 2), weights(2)]}
    first = {} if not explicit else {"recurrent_activation": "hard_sigmoid"}
    layers = [layer("LSTM", "lstm1", units=4, return_sequences=True, batch_input_shape=[None, 6, 3], **first),
              layer("LSTM", "lstm2", units=3, recurrent_activation="hard_sigmoid"),
              layer("Dense", "out", units=2, activation="softmax")]
    x = weights(3, 6, 3, scale=1.5)
    h = lstm(x, *w["lstm1"], True, recurrent_activation=recurrent_activation)
    y = lstm(h, *w["lstm2"], False, recurrent_activation=recurrent_activation) @ w["out"][0] + w["out"][1]
    lstm_names = ["kernel", "recurrent_kernel", "bias"]
    return layers, w, {"lstm1": lstm_names, "lstm2": lstm_names, "out": ["kernel", "bias"]}, x, y


def case_lstm_hard_keras2():
    """A Keras 2.1 file: hard_sigmoid was the LSTM's default recurrent_activation before 2.3."""
    return hard_lstm_case(hard_sigmoid_keras2, explicit=False)


def case_lstm_hard_keras3():
    """A Keras 3 file (no keras_version, a module on every object): its hard_sigmoid is x / 6 + 0.5."""
    return hard_lstm_case(hard_sigmoid_keras3, explicit=True)


def case_residual():
    """A functional model (Keras 2's layout): a residual block, the Add of a convolution's output
    and the batch-normalised convolution of it, then relu, a pooling and a Dense over the image
    flattened."""
    bn = [np.float32(1) + weights(4, scale=0.2), weights(4, scale=0.2), weights(4, scale=0.3),
          rng.uniform(0.5, 1.5, 4).astype(np.float32)]
    w = {"conv_a": [weights(3, 3, 2, 4), weights(4)], "conv_b": [weights(3, 3, 4, 4), weights(4)], "bn": bn,
         "out": [weights(2 * 2 * 4, 3), weights(3)]}
    layers = [layer("InputLayer", "image", batch_input_shape=[None, 6, 6, 2], dtype="float32"),
              called("Conv2D", "conv_a", ["image"], filters=4, kernel_size=[3, 3], padding="same", activation="relu"),
              called("Conv2D", "conv_b", ["conv_a"], filters=4, kernel_size=[3, 3], padding="same"),
              called("BatchNormalization", "bn", ["conv_b"], epsilon=0.001),
              called("Add", "add", ["conv_a", "bn"]),
              called("Activation", "relu", ["add"], activation="relu"),
              called("AveragePooling2D", "pool", ["relu"], pool_size=[3, 3]),
              called("Flatten", "flat", ["pool"]),
              called("Dense", "out", ["flat"], units=3, activation="softmax")]
    x = weights(3, 6, 6, 2, scale=1)
    a = np.maximum(conv2d(x, *w["conv_a"], 1, "same"), 0)
    b = batch_norm(conv2d(a, *w["conv_b"], 1, "same"), *bn, 0.001)
    h = pool2d(np.maximum(a + b, 0), 3, 3, np.mean).reshape(len(x), -1)
    y = h @ w["out"][0] + w["out"][1]
    names = {"conv_a": ["kernel", "bias"], "conv_b": ["kernel", "bias"],
             "bn": ["gamma", "beta", "moving_mean", "moving_variance"], "out": ["kernel", "bias"]}
    return layers, w, names, x, y


def case_inception():
    """A functional model in Keras 3's layout: an Inception-style block of three branches over the
    input concatenated along the channels, that joined to itself along the rows, then a Dense."""
    w = {"b1": [weights(1, 1, 3, 2), weights(2)], "b2": [weights(3, 3, 3, 3), weights(3)],
         "b3": [weights(1, 1, 3, 2), weights(2)], "out": [weights(10 * 5 * 7, 2), weights(2)]}
    layers = [layer("InputLayer", "image", batch_input_shape=[None, 5, 5, 3]),
              called("Conv2D", "b1", ["image"], filters=2, kernel_size=[1, 1], activation="relu"),
              called("Conv2D", "b2", ["image"], filters=3, kernel_size=[3, 3], padding="same", activation="relu"),
              called("Conv2D", "b3", ["image"], filters=2, kernel_size=[1, 1], activation="tanh"),
              called("Concatenate", "mixed", ["b1", "b2", "b3"], axis=-1),
              called("Concatenate", "rows", ["mixed", "mixed"], axis=1),
              called("Flatten", "flat", ["rows"]),
              called("Dense", "out", ["flat"], units=2, activation="softmax")]
    x = weights(2, 5, 5, 3, scale=1)
    mixed = np.concatenate([np.maximum(conv2d(x, *w["b1"], 1, "valid"), 0),
                            np.maximum(conv2d(x, *w["b2"], 1, "same"), 0),
                            np.tanh(conv2d(x, *w["b3"], 1, "valid"))], 3)
    h = np.concatenate([mixed, mixed], 1).reshape(len(x), -1)
    y = h @ w["out"][0] + w["out"][1]
    return layers, w, {k: ["kernel", "bias"] for k in w}, x, y


def case_merges():
    """Every merge over vectors, the model's input among the merged."""
    w = {"d0": [weights(6, 6), weights(6)], "d1": [weights(6, 4), weights(4)], "d2": [weights(6, 4), weights(4)],
         "d3": [weights(6, 4), weights(4)], "out": [weights(8, 3), weights(3)]}
    layers = [layer("InputLayer", "x", batch_input_shape=[None, 6]),
              called("Dense", "d0", ["x"], units=6),
              called("Add", "res", ["x", "d0"]),
              called("Dense", "d1", ["res"], units=4, activation="tanh"),
              called("Dense", "d2", ["res"], units=4, activation="relu"),
              called("Dense", "d3", ["res"], units=4),
              called("Subtract", "sub", ["d1", "d2"]),
              called("Multiply", "mul", ["d1", "d3"]),
              called("Average", "avg", ["sub", "mul", "d2"]),
              called("Maximum", "max", ["avg", "d3"]),
              called("Minimum", "min", ["max", "d1"]),
              called("Concatenate", "cat", ["min", "d2"]),
              called("Dense", "out", ["cat"], units=3, activation="softmax")]
    x = weights(5, 6, scale=1)
    dense = lambda k, h: h @ w[k][0] + w[k][1]
    r = x + dense("d0", x)
    d1, d2, d3 = np.tanh(dense("d1", r)), np.maximum(dense("d2", r), 0), dense("d3", r)
    m = np.minimum(np.maximum((d1 - d2 + d1 * d3 + d2) / 3, d3), d1)
    y = dense("out", np.concatenate([m, d2], 1))
    return layers, w, {k: ["kernel", "bias"] for k in w}, x, y


def pool2d_same(x, k, stride, reduce):
    """Keras's pooling with padding 'same': the padding is never part of a window (NaN, skipped)."""
    (t, b), (l, r) = same_padding(x.shape[1], k, stride), same_padding(x.shape[2], k, stride)
    return pool2d(np.pad(x, ((0, 0), (t, b), (l, r), (0, 0)), constant_values=np.nan), k, stride, reduce)


def case_same_padding():
    """ZeroPadding2D's uneven sides; 'same' at stride 2 and with an even kernel, whose padding's odd
    pixel goes after; the poolings' 'same', whose padding is no part of a window."""
    w = {"conv1": [weights(3, 3, 2, 3), weights(3)], "conv2": [weights(4, 4, 3, 2), weights(2)],
         "out": [weights(4 * 5 * 2, 3), weights(3)]}
    layers = [layer("ZeroPadding2D", "pad", padding=[[1, 0], [2, 1]], batch_input_shape=[None, 7, 6, 2]),
              layer("Conv2D", "conv1", filters=3, kernel_size=[3, 3], strides=[2, 2], padding="same", activation="relu"),
              layer("Conv2D", "conv2", filters=2, kernel_size=[4, 4], padding="same"),
              layer("MaxPooling2D", "max", pool_size=[3, 3], strides=[1, 1], padding="same"),
              layer("AveragePooling2D", "avg", pool_size=[3, 3], strides=[1, 1], padding="same"),
              layer("Flatten", "flat"),
              layer("Dense", "out", units=3, activation="softmax")]
    x = weights(3, 7, 6, 2, scale=1)
    h = np.pad(x, ((0, 0), (1, 0), (2, 1), (0, 0)))
    h = conv2d(np.maximum(conv2d(h, *w["conv1"], 2, "same"), 0), *w["conv2"], 1, "same")
    h = pool2d_same(pool2d_same(h, 3, 1, np.nanmax), 3, 1, np.nanmean).reshape(len(x), -1)
    y = h @ w["out"][0] + w["out"][1]
    return layers, w, {k: ["kernel", "bias"] for k in w}, x, y


def case_gru_keras2():
    """A Keras 2.2 file's GRUs: reset_after False and hard_sigmoid, both Keras 2.2's defaults (the
    file names neither), the first returning its sequence."""
    w = {"gru1": [weights(3, 12), weights(4, 12), weights(12, scale=2.0)],
         "gru2": [weights(4, 9), weights(3, 9), weights(9, scale=2.0)], "out": [weights(3, 2), weights(2)]}
    layers = [layer("GRU", "gru1", units=4, return_sequences=True, batch_input_shape=[None, 6, 3]),
              layer("GRU", "gru2", units=3),
              layer("Dense", "out", units=2, activation="softmax")]
    x = weights(3, 6, 3, scale=1.5)
    h = gru(x, *w["gru1"], True, False, hard_sigmoid_keras2)
    y = gru(h, *w["gru2"], False, False, hard_sigmoid_keras2) @ w["out"][0] + w["out"][1]
    names = ["kernel", "recurrent_kernel", "bias"]
    return layers, w, {"gru1": names, "gru2": names, "out": ["kernel", "bias"]}, x, y


def case_gru_keras3():
    """A Keras 3 file's GRU: reset_after (its default) with its two biases, sigmoid, read backwards."""
    w = {"gru": [weights(3, 15), weights(5, 15), weights(2, 15, scale=0.5)], "out": [weights(5, 2), weights(2)]}
    layers = [layer("GRU", "gru", units=5, go_backwards=True, batch_input_shape=[None, 6, 3]),
              layer("Dense", "out", units=2, activation="softmax")]
    x = weights(3, 6, 3, scale=1.5)
    y = gru(x, *w["gru"], False, True, go_backwards=True) @ w["out"][0] + w["out"][1]
    return layers, w, {"gru": ["kernel", "recurrent_kernel", "bias"], "out": ["kernel", "bias"]}, x, y


def case_mask_zero():
    """Token ids padded with 0 (before, after, inside, and a row of padding only) through an
    Embedding with mask_zero, a Dropout, a GRU returning its sequence and an LSTM: Keras skips the
    masked steps, the state carried over them."""
    w = {"emb": [weights(20, 4)], "gru": [weights(4, 15), weights(5, 15), weights(2, 15, scale=0.5)],
         "lstm": [weights(5, 12), weights(3, 12), weights(12, scale=0.2)], "out": [weights(3, 2), weights(2)]}
    layers = [layer("Embedding", "emb", input_dim=20, output_dim=4, mask_zero=True, batch_input_shape=[None, 6]),
              layer("Dropout", "drop", rate=0.3),
              layer("GRU", "gru", units=5, return_sequences=True),
              layer("LSTM", "lstm", units=3),
              layer("Dense", "out", units=2, activation="softmax")]
    x = np.array([[0, 0, 3, 7, 1, 9], [5, 2, 8, 0, 0, 0], [4, 0, 6, 0, 11, 2], [0, 0, 0, 0, 0, 0]], np.int32)
    mask = x != 0
    h = gru(w["emb"][0][x], *w["gru"], True, True, mask=mask)
    y = lstm(h, *w["lstm"], False, mask=mask) @ w["out"][0] + w["out"][1]
    names = ["kernel", "recurrent_kernel", "bias"]
    return layers, w, {"emb": ["embeddings"], "gru": names, "lstm": names, "out": ["kernel", "bias"]}, x, y


def case_masking():
    """Keras's Masking (steps whose every feature is mask_value; one equal feature is not enough)
    before a GRU returning its sequence, averaged over the steps the mask keeps."""
    w = {"gru": [weights(3, 15), weights(5, 15), weights(2, 15, scale=0.5)], "out": [weights(5, 2), weights(2)]}
    layers = [layer("Masking", "mask", mask_value=-1.0, batch_input_shape=[None, 6, 3]),
              layer("GRU", "gru", units=5, return_sequences=True),
              layer("GlobalAveragePooling1D", "avg"),
              layer("Dense", "out", units=2, activation="softmax")]
    x = weights(4, 6, 3, scale=1)
    x[0, :2], x[1, 3:], x[2, 2], x[3, 1, 0] = -1, -1, -1, -1
    mask = (x != -1).any(-1)
    h = gru(x * mask[..., None], *w["gru"], True, True, mask=mask)
    avg = (h * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
    y = avg @ w["out"][0] + w["out"][1]
    return layers, w, {"gru": ["kernel", "recurrent_kernel", "bias"], "out": ["kernel", "bias"]}, x, y


def case_repeat_permute():
    """RepeatVector, SpatialDropout1D (inference: as it came), a SimpleRNN's sequence, Permute's
    swapped axes, flattened as Keras flattens them."""
    w = {"fc": [weights(4, 6), weights(6)], "rnn": [weights(6, 3), weights(3, 3), weights(3)],
         "out": [weights(15, 2), weights(2)]}
    layers = [layer("Dense", "fc", units=6, activation="relu", batch_input_shape=[None, 4]),
              layer("RepeatVector", "rep", n=5),
              layer("SpatialDropout1D", "drop", rate=0.4),
              layer("SimpleRNN", "rnn", units=3, return_sequences=True),
              layer("Permute", "perm", dims=[2, 1]),
              layer("Flatten", "flat"),
              layer("Dense", "out", units=2, activation="softmax")]
    x = weights(3, 4, scale=1)
    h = np.repeat(np.maximum(x @ w["fc"][0] + w["fc"][1], 0)[:, None, :], 5, 1)
    r = simple_rnn(h, *w["rnn"], True).transpose(0, 2, 1).reshape(len(x), -1)
    y = r @ w["out"][0] + w["out"][1]
    return layers, w, {"fc": ["kernel", "bias"], "rnn": ["kernel", "recurrent_kernel", "bias"],
                       "out": ["kernel", "bias"]}, x, y


def case_simple_rnn():
    """SimpleRNN: tanh returning its sequence, then relu (mnist_irnn's) read backwards."""
    w = {"rnn1": [weights(3, 4), weights(4, 4), weights(4)], "rnn2": [weights(4, 3), weights(3, 3), weights(3)],
         "out": [weights(3, 2), weights(2)]}
    layers = [layer("SimpleRNN", "rnn1", units=4, return_sequences=True, batch_input_shape=[None, 5, 3]),
              layer("SimpleRNN", "rnn2", units=3, activation="relu", go_backwards=True),
              layer("Dense", "out", units=2, activation="softmax")]
    x = weights(3, 5, 3, scale=1.0)
    h = simple_rnn(x, *w["rnn1"], True)
    y = simple_rnn(h, *w["rnn2"], False, lambda v: np.maximum(v, 0), True) @ w["out"][0] + w["out"][1]
    names = ["kernel", "recurrent_kernel", "bias"]
    return layers, w, {"rnn1": names, "rnn2": names, "out": ["kernel", "bias"]}, x, y


def case_time_distributed_conv():
    """TimeDistributed over frames [4, 6, 6, 2]: Dropout, Conv2D, MaxPooling2D and Flatten on each
    (Keras flattens its channels-last maps pixel by pixel), then a SimpleRNN over the frames. Keras
    3 numbers its weight groups over every TimeDistributed: the Conv2D's is time_distributed_1."""
    w = {"td_conv": [weights(3, 3, 2, 3), weights(3)], "rnn": [weights(12, 2), weights(2, 2), weights(2)],
         "out": [weights(2, 2), weights(2)]}
    conv = {"class_name": "Conv2D", "config": {"name": "conv", "filters": 3, "kernel_size": [3, 3], "activation": "relu"}}
    pool = {"class_name": "MaxPooling2D", "config": {"name": "pool", "pool_size": [2, 2]}}
    drop = {"class_name": "Dropout", "config": {"name": "drop", "rate": 0.3}}
    layers = [layer("TimeDistributed", "td_drop", layer=drop, batch_input_shape=[None, 4, 6, 6, 2]),
              layer("TimeDistributed", "td_conv", layer=conv),
              layer("TimeDistributed", "td_pool", layer=pool),
              layer("TimeDistributed", "td_flat", layer={"class_name": "Flatten", "config": {"name": "flat"}}),
              layer("SimpleRNN", "rnn", units=2),
              layer("Dense", "out", units=2, activation="softmax")]
    x = weights(3, 4, 6, 6, 2, scale=1)
    frames = np.stack([pool2d(np.maximum(conv2d(x[:, t], *w["td_conv"], 1, "valid"), 0), 2, 2, np.max)
                       for t in range(4)], 1).reshape(3, 4, -1)
    y = simple_rnn(frames, *w["rnn"], False) @ w["out"][0] + w["out"][1]
    return layers, w, {"td_conv": ["kernel", "bias"], "rnn": ["kernel", "recurrent_kernel", "bias"],
                       "out": ["kernel", "bias"]}, x, y


def case_time_distributed():
    """TimeDistributed: an LSTM over each of four steps' own sequence of three (mnist_hierarchical_rnn's
    rows), then a Dense over each step's vector."""
    w = {"td_lstm": [weights(2, 12), weights(3, 12), weights(12, scale=0.2)], "td_dense": [weights(3, 2), weights(2)],
         "out": [weights(8, 3), weights(3)]}
    inner_lstm = {"class_name": "LSTM", "config": {"name": "lstm_rows", "units": 3, "recurrent_activation": "sigmoid"}}
    inner_dense = {"class_name": "Dense", "config": {"name": "dense_steps", "units": 2, "activation": "relu"}}
    layers = [layer("TimeDistributed", "td_lstm", layer=inner_lstm, batch_input_shape=[None, 4, 3, 2]),
              layer("TimeDistributed", "td_dense", layer=inner_dense),
              layer("Flatten", "flat"),
              layer("Dense", "out", units=3, activation="softmax")]
    x = weights(3, 4, 3, 2, scale=1)
    rows = np.stack([lstm(x[:, t], *w["td_lstm"], False) for t in range(4)], 1)
    h = np.maximum(rows @ w["td_dense"][0] + w["td_dense"][1], 0).reshape(len(x), -1)
    y = h @ w["out"][0] + w["out"][1]
    return layers, w, {"td_lstm": ["kernel", "recurrent_kernel", "bias"], "td_dense": ["kernel", "bias"],
                       "out": ["kernel", "bias"]}, x, y


def case_lstm_backwards():
    """An LSTM read backwards, and one with Keras's dropout and recurrent_dropout: both run step by
    step (nn::Recurrent), the second evaluated, where nothing is dropped."""
    w = {"back": [weights(3, 16), weights(4, 16), weights(16, scale=0.2)],
         "dropped": [weights(4, 12), weights(3, 12), weights(12, scale=0.2)], "out": [weights(3, 2), weights(2)]}
    layers = [layer("LSTM", "back", units=4, go_backwards=True, return_sequences=True, recurrent_activation="sigmoid",
                    batch_input_shape=[None, 5, 3]),
              layer("LSTM", "dropped", units=3, dropout=0.2, recurrent_dropout=0.3, recurrent_activation="sigmoid"),
              layer("Dense", "out", units=2, activation="softmax")]
    x = weights(3, 5, 3, scale=1)
    h = lstm(x, *w["back"], True, go_backwards=True)
    y = lstm(h, *w["dropped"], False) @ w["out"][0] + w["out"][1]
    names = ["kernel", "recurrent_kernel", "bias"]
    return layers, w, {"back": names, "dropped": names, "out": ["kernel", "bias"]}, x, y


def case_bidirectional():
    """Bidirectional(LSTM) as a sequence (the backward one's outputs back in time order), averaged,
    then one returning its last states side by side."""
    def two(n_in, u):
        return [weights(n_in, 4 * u), weights(u, 4 * u), weights(4 * u, scale=0.2)] * 1
    fw1, bw1, fw2, bw2 = two(3, 4), two(3, 4), two(8, 2), two(8, 2)
    lstm_cfg = lambda name, units, seq: {"class_name": "LSTM", "config": {
        "name": name, "units": units, "return_sequences": seq, "recurrent_activation": "sigmoid"}}
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


def case_bidirectional_masked():
    """Token ids with padding (mask_zero) through Bidirectional(GRU) returning its sequence and
    Bidirectional(LSTM) run step by step: each direction skips the masked steps, the backward one
    from the last step to the first, its sequence back in time order."""
    def gru_w(n_in, u):
        return [weights(n_in, 3 * u), weights(u, 3 * u), weights(2, 3 * u, scale=0.5)]

    def lstm_w(n_in, u):
        return [weights(n_in, 4 * u), weights(u, 4 * u), weights(4 * u, scale=0.2)]
    emb = [weights(12, 3)]
    fw1, bw1, fw2, bw2 = gru_w(3, 4), gru_w(3, 4), lstm_w(8, 2), lstm_w(8, 2)
    rnn_cfg = lambda cls, name, units, seq: {"class_name": cls, "config": {"name": name, "units": units,
                                                                           "return_sequences": seq}}
    layers = [layer("Embedding", "emb", input_dim=12, output_dim=3, mask_zero=True, batch_input_shape=[None, 6]),
              {"class_name": "Bidirectional", "config": {"name": "bi1", "merge_mode": "concat",
                                                         "layer": rnn_cfg("GRU", "gru", 4, True)}},
              {"class_name": "Bidirectional", "config": {"name": "bi2", "merge_mode": "concat",
                                                         "layer": rnn_cfg("LSTM", "lstm", 2, False)}},
              layer("Dense", "out", units=2, activation="softmax")]
    out = [weights(4, 2), weights(2)]
    x = np.array([[0, 0, 3, 7, 1, 9], [5, 2, 8, 0, 0, 0], [4, 0, 6, 0, 11, 2]], np.int32)
    mask, e = x != 0, emb[0][x]
    seq = np.concatenate([gru(e, *fw1, True, True, mask=mask),
                          gru(e, *bw1, True, True, go_backwards=True, mask=mask)[:, ::-1]], 2)
    last = np.concatenate([lstm(seq, *fw2, False, mask=mask), lstm(seq, *bw2, False, go_backwards=True, mask=mask)], 1)
    y = last @ out[0] + out[1]
    rnn_names = ["kernel", "recurrent_kernel", "bias"]
    w = {"emb": emb, "bi1": fw1 + bw1, "bi2": fw2 + bw2, "out": out}
    names = {"emb": ["embeddings"], "bi1": [f"{d}_gru/{n}" for d in ("forward", "backward") for n in rnn_names],
             "bi2": [f"{d}_lstm/{n}" for d in ("forward", "backward") for n in rnn_names], "out": ["kernel", "bias"]}
    return layers, w, names, x, y


def case_permute_image():
    """Permute over an image's axes: its rows and columns swapped before a convolution, its rows
    and channels after it (loupe's image is channels-first there: a permutation that is not a
    rotation of the axes tells the two orders apart), then flattened for a Dense."""
    w = {"conv": [weights(3, 3, 2, 3), weights(3)], "out": [weights(3 * 3 * 2, 2), weights(2)]}
    layers = [layer("Permute", "swap", dims=[2, 1, 3], batch_input_shape=[None, 4, 5, 2]),
              layer("Conv2D", "conv", filters=3, kernel_size=[3, 3], activation="relu"),
              layer("Permute", "channels", dims=[3, 2, 1]),
              layer("Flatten", "flat"),
              layer("Dense", "out", units=2, activation="softmax")]
    x = weights(3, 4, 5, 2, scale=1)
    c = np.maximum(conv2d(x.transpose(0, 2, 1, 3), *w["conv"], 1, "valid"), 0)
    y = c.transpose(0, 3, 2, 1).reshape(len(x), -1) @ w["out"][0] + w["out"][1]
    return layers, w, {k: ["kernel", "bias"] for k in w}, x, y


def states_case(reset_after):
    """A functional model of one sequence whose recurrent layers hand their states on: an LSTM
    encoder returning its sequence and its states (return_state), an LSTM decoder started from
    them (initial_state), a GRU returning its state, a SimpleRNN started from it, and the
    decoder's output, the encoder's carry c and the SimpleRNN's joined for a Dense."""
    def rnn_w(cls, n_in, u):
        g = {"LSTM": 4, "GRU": 3, "SimpleRNN": 1}[cls]
        b = weights(2, 3 * u, scale=0.5) if cls == "GRU" and reset_after else weights(g * u, scale=0.3)
        return [weights(n_in, g * u), weights(u, g * u), b]
    w = {"enc": rnn_w("LSTM", 3, 4), "dec": rnn_w("LSTM", 4, 4), "gru": rnn_w("GRU", 3, 3),
         "rnn": rnn_w("SimpleRNN", 3, 3), "out": [weights(11, 2), weights(2)]}
    sig = {"recurrent_activation": "sigmoid"}
    layers = [layer("InputLayer", "x", batch_input_shape=[None, 5, 3]),
              called("LSTM", "enc", ["x"], units=4, return_sequences=True, return_state=True, **sig),
              called("LSTM", "dec", ["enc"], initial=[("enc", 1), ("enc", 2)], units=4, **sig),
              called("GRU", "gru", ["x"], units=3, return_state=True, reset_after=reset_after, **sig),
              called("SimpleRNN", "rnn", ["x"], initial=[("gru", 1)], units=3),
              called("Concatenate", "cat", ["dec", ("enc", 2), "rnn"]),
              called("Dense", "out", ["cat"], units=2, activation="softmax")]
    x = weights(3, 5, 3, scale=1)
    seq, h, c = lstm(x, *w["enc"], True, states=True)
    dec = lstm(seq, *w["dec"], False, initial=(h, c))
    _, g = gru(x, *w["gru"], False, reset_after, states=True)
    r = simple_rnn(x, *w["rnn"], False, initial=(g,))
    y = np.concatenate([dec, c, r], 1) @ w["out"][0] + w["out"][1]
    names = {k: ["kernel", "recurrent_kernel", "bias"] for k in ("enc", "dec", "gru", "rnn")}
    names["out"] = ["kernel", "bias"]
    return layers, w, names, x, y


def case_states_keras2():
    return states_case(False)


def case_states_keras3():
    return states_case(True)


CASES = {"mlp": case_mlp, "cnn": case_cnn, "average_pool": case_average_pool, "lstm": case_lstm,
         "bidirectional": case_bidirectional, "lstm_hard_keras2": case_lstm_hard_keras2,
         "lstm_hard_keras3": case_lstm_hard_keras3, "activations": case_activations,
         "global_average": case_global_average, "global_max": case_global_max, "conv1d": case_conv1d,
         "residual": case_residual, "inception": case_inception, "merges": case_merges,
         "same_padding": case_same_padding, "gru_keras2": case_gru_keras2, "gru_keras3": case_gru_keras3,
         "simple_rnn": case_simple_rnn, "time_distributed": case_time_distributed, "lstm_backwards": case_lstm_backwards,
         "mask_zero": case_mask_zero, "activations_keras2": case_activations_keras2,
         "activations_keras3": case_activations_keras3, "masking": case_masking,
         "repeat_permute": case_repeat_permute, "bidirectional_masked": case_bidirectional_masked,
         "time_distributed_conv": case_time_distributed_conv, "states_keras2": case_states_keras2,
         "states_keras3": case_states_keras3, "permute_image": case_permute_image}
# The model file's Keras where it is not 2.2.4: "3" writes Keras 3's config (and only then a
# .keras file, which a Keras 2 model with Keras 2's hard_sigmoid cannot be: Keras 3 has no such).
VERSIONS = {"lstm_hard_keras2": "2.1.6", "lstm_hard_keras3": "3", "inception": "3", "gru_keras2": "2.1.6",
            "gru_keras3": "3", "mask_zero": "3", "activations_keras2": "2.1.6", "activations_keras3": "3", "masking": "3",
            "bidirectional_masked": "3", "states_keras3": "3"}


def save_keras2_h5(path, model, layers, w, names, under_model_weights):
    """Keras 2.2.4's layout (keras/engine/saving.py): `model.save` puts the weights under
    model_weights/ beside the model_config attribute, `save_weights` at the root. Every layer gets
    a group listed in layer_names; its weight_names are "LAYER/VAR:0", a layer without weights an
    empty float array (np.asarray([]), as save_attributes_to_hdf5_group writes it)."""
    with h5py.File(path, "w") as f:
        if under_model_weights:
            f.attrs["keras_version"] = b"2.2.4"
            f.attrs["backend"] = b"tensorflow"
            f.attrs["model_config"] = json.dumps(model).encode("utf8")
            g = f.create_group("model_weights")
        else:
            g = f
        g.attrs["layer_names"] = np.asarray([l["config"]["name"].encode("utf8") for l in layers])
        g.attrs["backend"] = b"tensorflow"
        g.attrs["keras_version"] = b"2.2.4"
        for l in layers:
            name = l["config"]["name"]
            lg = g.create_group(name)
            full = [f"{name}/{v}:0".encode("utf8") for v in names.get(name, [])]
            lg.attrs["weight_names"] = np.asarray(full)
            for n, a in zip(full, w.get(name, [])):
                lg.create_dataset(n.decode(), data=a.astype(np.float32))


def snake_case(name):
    """keras.src.utils.naming.to_snake_case."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def save_keras3_h5(path, layers, w):
    """Keras 3's layout (keras/src/saving/saving_lib.py, H5IOStore): the root's vars/, then each
    layer of the Sequential under layers/, named for its class in snake case and numbered from the
    second of a class on; variables at vars/0, 1, ... in creation order; an LSTM's in its cell,
    a Bidirectional's in forward_layer/ and backward_layer/; each vars group named in an
    attribute."""
    with h5py.File(path, "w") as f:
        f.create_group("vars").attrs["name"] = "sequential_1"
        seen = {}
        for l in layers:
            cls, name = l["class_name"], l["config"]["name"]
            base = snake_case(cls)
            k = seen.get(base, 0)
            seen[base] = k + 1
            group = f"layers/{base}" + (f"_{k}" if k else "")
            f.create_group(group + "/vars").attrs["name"] = name
            arrays = w.get(name, [])
            if cls in ("LSTM", "GRU", "SimpleRNN"):
                parts = [("cell", arrays)]
            elif cls == "TimeDistributed":
                inner = l["config"]["layer"]["class_name"]
                parts = [("layer/cell" if inner in ("LSTM", "GRU", "SimpleRNN") else "layer", arrays)]
            elif cls == "Bidirectional":
                parts = [("forward_layer/cell", arrays[:3]), ("backward_layer/cell", arrays[3:])]
            else:
                parts = [("", arrays)]
            for sub, values in parts:
                vars_group = f"{group}/{sub}/vars" if sub else f"{group}/vars"
                g = f.require_group(vars_group)
                for i, a in enumerate(values):
                    g.create_dataset(str(i), data=a.astype(np.float32))


def hostile_files(d, layers, w, names):
    """Weight files that are not what the mlp model needs, each with the sentence loupe refuses it
    with (hostile/NAME.h5 and NAME.txt): test_keras_reference reads them all."""
    os.makedirs(d, exist_ok=True)
    model = model_file(layers)

    def keras2(name, said, edit, under_model_weights=True):
        path = os.path.join(d, name + ".h5")
        save_keras2_h5(path, model, layers, w, names, under_model_weights)
        with h5py.File(path, "a") as f:
            edit(f["model_weights"] if under_model_weights else f)
        with open(os.path.join(d, name + ".txt"), "w") as f:
            f.write(said)

    def delete(path):
        return lambda g: g.__delitem__(path)

    def replace(path, data):
        def edit(g):
            del g[path]
            g.create_dataset(path, data=data)
        return edit

    def huge(g):  # 10^12 floats declared, none written: refused by its shape, never allocated
        del g["fc1/fc1/kernel:0"]
        g.create_dataset("fc1/fc1/kernel:0", shape=(10**6, 10**6), dtype="f4", chunks=(1, 1000))

    keras2("layer_missing", "holds no weights for layer 'out'", delete("out"))
    keras2("shape", "'/model_weights/fc1/fc1/kernel:0' is [5, 7] where the model's is [7, 5]",
           replace("fc1/fc1/kernel:0", np.zeros((5, 7), np.float32)))
    keras2("huge", "'/model_weights/fc1/fc1/kernel:0' is [1000000, 1000000] where the model's is [7, 5]", huge)
    keras2("text_data", "'/fc1/fc1/bias:0' does not hold numbers",
           replace("fc1/fc1/bias:0", np.array([b"abc"] * 5)), under_model_weights=False)

    def extra_layer(g):
        g.attrs["layer_names"] = np.asarray([b"fc1", b"out", b"extra"])
        e = g.create_group("extra")
        e.attrs["weight_names"] = np.asarray([b"extra/kernel:0"])
        e.create_dataset("extra/kernel:0", data=np.zeros((2, 2), np.float32))
    keras2("extra_layer", "holds weights for layer 'extra', which the model does not have", extra_layer)

    def renamed(g):
        g["fc1"].attrs["weight_names"] = np.asarray([b"fc1/bias:0", b"fc1/kernel:0"])
    keras2("order", "layer 'fc1''s weight 1 is fc1/bias:0 where the model's is kernel", renamed)

    def numbers(g):
        g.attrs["layer_names"] = np.arange(3)
    keras2("names_not_text", "the attribute layer_names of '/model_weights' is not text", numbers)

    def three_weights(g):
        g["out"].attrs["weight_names"] = np.asarray([b"out/kernel:0", b"out/bias:0", b"out/x:0"])
    keras2("count", "holds 3 weights for layer 'out' where the model's has 2", three_weights)

    def keras3(name, said, edit):
        path = os.path.join(d, name + ".h5")
        save_keras3_h5(path, layers, w)
        with h5py.File(path, "a") as f:
            edit(f)
        with open(os.path.join(d, name + ".txt"), "w") as f:
            f.write(said)

    keras3("k3_missing", "has no layers/dense_1 for layer 'out' (Dense)", delete("layers/dense_1"))
    keras3("k3_extra_layer", "holds layers/dense_2, a layer more than the model's 2 of its class",
           lambda f: f.create_group("layers/dense_2/vars"))
    keras3("k3_extra_var", "holds layers/dense/vars/2, more variables than layer 'fc1' has",
           lambda f: f.create_dataset("layers/dense/vars/2", data=np.zeros(3, np.float32)))

    import zipfile
    for name, members in (("no_weights.keras", ("config.json", "metadata.json")),
                          ("no_config.keras", ("metadata.json", "model.weights.h5"))):
        with zipfile.ZipFile(os.path.join(d, name), "w") as z:
            for m in members:
                z.writestr(m, json.dumps(keras3_config(layers)) if m == "config.json" else "{}")

    with zipfile.ZipFile(os.path.join(d, "big_config.keras"), "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("config.json", " " * (17 << 20) + "{}")

    with h5py.File(os.path.join(d, "not_keras.h5"), "w") as f:
        f.create_dataset("x", data=np.zeros(3))
    with open(os.path.join(d, "not_keras.txt"), "w") as f:
        f.write("is HDF5 but not Keras weights")
    with open(os.path.join(d, "not_hdf5.h5"), "w") as f:
        f.write("{}")
    with open(os.path.join(d, "not_hdf5.txt"), "w") as f:
        f.write("is not a readable HDF5 file")


def labelled_arrays(d, w):
    """NumPy arrays for `loupe eval model.json --weights`: labels that the mlp's weights predict
    for 150 of the 200 test samples and miss for 50, so the accuracy they imply is 75.00 %."""
    os.makedirs(d, exist_ok=True)
    for split, n in (("train", 60), ("test", 200)):
        x = weights(n, 7, scale=1)
        pred = np.argmax(np.maximum(x @ w["fc1"][0] + w["fc1"][1], 0) @ w["out"][0] + w["out"][1], 1)
        y = pred.copy()
        y[:n // 4] = (pred[:n // 4] + 1) % 3
        np.save(os.path.join(d, f"x_{split}.npy"), x)
        np.save(os.path.join(d, f"y_{split}.npy"), y.astype(np.int64))


def keras3_config(layers):
    """The model's config as Keras 3 writes it into a .keras file's config.json: module and
    registered_name on every layer, the input an InputLayer with batch_shape."""
    def k3(l):
        cfg = {k: v for k, v in l["config"].items() if k != "batch_input_shape"}
        if "layer" in cfg:
            cfg["layer"] = k3(cfg["layer"])
        return {"module": "keras.layers", "class_name": l["class_name"], "config": cfg, "registered_name": None}
    if is_functional(layers):
        return functional_keras3(layers, k3)
    first = layers[0]["config"]["batch_input_shape"]
    return {"module": "keras", "class_name": "Sequential", "registered_name": None,
            "config": {"name": "sequential", "trainable": True,
                       "layers": [{"module": "keras.layers", "class_name": "InputLayer", "registered_name": None,
                                   "config": {"batch_shape": first, "dtype": "float32", "sparse": False,
                                              "name": "input_layer"}}] + [k3(l) for l in layers]}}


def save_keras_archive(path, layers, w):
    """Keras 3's `model.save("m.keras")`: a zip of config.json, metadata.json and model.weights.h5."""
    import zipfile
    weights = path + ".weights.h5"
    save_keras3_h5(weights, layers, w)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.6.0", "date_saved": "2026-11-29@00:00:00"}))
        z.writestr("config.json", json.dumps(keras3_config(layers)))
        z.write(weights, "model.weights.h5")
    os.remove(weights)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for name, make in CASES.items():
        layers, w, names, x, y = make()
        d = os.path.join(sys.argv[1], name)
        os.makedirs(d, exist_ok=True)
        version = VERSIONS.get(name, "2.2.4")
        with open(os.path.join(d, "model.json"), "w") as f:
            json.dump(keras3_config(layers) if version == "3" else model_file(layers, version), f, indent=1)
        for layer_name, arrays in w.items():
            assert len(arrays) == len(names[layer_name]), layer_name
            for var, a in zip(names[layer_name], arrays):
                np.save(os.path.join(d, f"{layer_name}__{var.replace('/', '__')}.npy"), a.astype(np.float32))
        if h5py is not None:
            save_keras2_h5(os.path.join(d, "model.h5"), model_file(layers), layers, w, names, True)
            save_keras2_h5(os.path.join(d, "weights.h5"), model_file(layers), layers, w, names, False)
            save_keras3_h5(os.path.join(d, "model.weights.h5"), layers, w)
            if version in ("2.2.4", "3"):
                save_keras_archive(os.path.join(d, "model.keras"), layers, w)
            if name == "mlp":
                hostile_files(os.path.join(sys.argv[1], "hostile"), layers, w, names)
        if name == "mlp":
            labelled_arrays(os.path.join(d, "data"), w)
        np.save(os.path.join(d, "x.npy"), x)
        np.save(os.path.join(d, "y.npy"), y.astype(np.float32))


if __name__ == "__main__":
    main()
