#!/usr/bin/env python3
"""Model files of the Keras examples, as Keras 2.2.4's `model.to_json()` writes them (docs/keras.md,
"Functional models"): Keras cannot be installed here, so each config is written from the
example's code with Keras 2.2.4's serialization of its layers (keras/engine/network.py's
get_config, each layer's get_config, initializers and regularizers as VarianceScaling and L1L2).

    tests/keras_examples.py OUTDIR

resnet20_v1.json   keras/examples/cifar10_resnet.py, resnet_v1(input_shape=(32, 32, 3), depth=20):
                   Keras's summary gives 274,442 parameters (273,066 trainable).
mnist_hierarchical_rnn.json   keras/examples/mnist_hierarchical_rnn.py: TimeDistributed(LSTM(128))
                   over the rows, LSTM(128) over them, Dense(10); Keras 2.2's LSTM defaults
                   (hard_sigmoid).
mnist_irnn.json    keras/examples/mnist_irnn.py: SimpleRNN(100, relu) over the 784 pixels, its
                   kernel RandomNormal(stddev 0.001), its recurrent kernel Identity(1).
imdb_cnn.json      keras/examples/imdb_cnn.py: Embedding(5000, 50) over 400 tokens, Conv1D(250, 3,
                   relu), GlobalMaxPooling1D, Dense(250), Dropout, Activation layers (relu, and
                   sigmoid on the one output).
imdb_lstm.json     keras/examples/imdb_lstm.py: Embedding(20000, 128) without input_length (a time
                   length of None), LSTM(128, dropout=0.2, recurrent_dropout=0.2), Dense(1, sigmoid).
imdb_gru_mask.json a Keras 3 text model (model.to_json() of keras.Sequential): Input of any
                   length, Embedding(10000, 64, mask_zero=True), GRU(64), Dense(1, sigmoid).
inception.json     an Inception-style block (GoogLeNet's: 1x1, 1x1 then 3x3, 1x1 then 5x5, 3x3 max
                   pooling then 1x1, concatenated on the channels) twice over a CIFAR-10 image.

Beside each text model, its data as the Keras example would have it (keras.datasets.imdb after
pad_sequences: int32 token ids [N, length], 0 the padding before a review, labels 0 or 1), in
OUTDIR/NAME_data/{x,y}_{train,test}.npy. The reviews are random words with the sentiment in a few
of them (word 10 in a positive one, 11 in a negative one), so a model that trains learns it; and
MNIST's shape in OUTDIR/mnist_data, its label a bright bar's row.
"""
import json
import os
import sys

import numpy as np

counts = {}


def name_for(cls):
    """Keras 2.2's automatic names: the class in snake case and a count from 1 (conv2d_1, ...)."""
    base = {"Conv2D": "conv2d", "BatchNormalization": "batch_normalization", "Activation": "activation",
            "Add": "add", "AveragePooling2D": "average_pooling2d", "Flatten": "flatten", "Dense": "dense",
            "InputLayer": "input", "Embedding": "embedding", "Conv1D": "conv1d", "Dropout": "dropout",
            "GlobalMaxPooling1D": "global_max_pooling1d", "MaxPooling2D": "max_pooling2d", "Concatenate": "concatenate", "LSTM": "lstm",
            "TimeDistributed": "time_distributed", "SimpleRNN": "simple_rnn"}[cls]
    counts[base] = counts.get(base, 0) + 1
    return f"{base}_{counts[base]}"


def init(name, **config):
    return {"class_name": name, "config": config}


HE_NORMAL = init("VarianceScaling", scale=2.0, mode="fan_in", distribution="normal", seed=None)
GLOROT_UNIFORM = init("VarianceScaling", scale=1.0, mode="fan_avg", distribution="uniform", seed=None)


class Model:
    def __init__(self):
        self.layers = []

    def call(self, cls, config, inputs):
        name = name_for(cls)
        config = dict(name=name, trainable=True, **config)
        calls = [[[x, 0, 0, {}] for x in inputs]] if inputs else []
        self.layers.append({"name": name, "class_name": cls, "config": config, "inbound_nodes": calls})
        return name

    def input(self, shape):
        name = name_for("InputLayer")
        self.layers.append({"name": name, "class_name": "InputLayer", "inbound_nodes": [],
                            "config": {"batch_input_shape": [None] + list(shape), "dtype": "float32",
                                       "sparse": False, "name": name}})
        return name

    def conv(self, x, filters, k, strides=1, activation="linear", initializer=HE_NORMAL, l2=1e-4):
        return self.call("Conv2D", {
            "filters": filters, "kernel_size": [k, k], "strides": [strides, strides], "padding": "same",
            "data_format": "channels_last", "dilation_rate": [1, 1], "activation": activation, "use_bias": True,
            "kernel_initializer": initializer, "bias_initializer": init("Zeros"),
            "kernel_regularizer": init("L1L2", l1=0.0, l2=l2) if l2 else None, "bias_regularizer": None,
            "activity_regularizer": None, "kernel_constraint": None, "bias_constraint": None}, [x])

    def batch_norm(self, x):
        return self.call("BatchNormalization", {
            "axis": -1, "momentum": 0.99, "epsilon": 0.001, "center": True, "scale": True,
            "beta_initializer": init("Zeros"), "gamma_initializer": init("Ones"),
            "moving_mean_initializer": init("Zeros"), "moving_variance_initializer": init("Ones"),
            "beta_regularizer": None, "gamma_regularizer": None, "beta_constraint": None, "gamma_constraint": None}, [x])

    def activation(self, x, a):
        return self.call("Activation", {"activation": a}, [x])

    def dense(self, x, units, activation, initializer):
        return self.call("Dense", {
            "units": units, "activation": activation, "use_bias": True, "kernel_initializer": initializer,
            "bias_initializer": init("Zeros"), "kernel_regularizer": None, "bias_regularizer": None,
            "activity_regularizer": None, "kernel_constraint": None, "bias_constraint": None}, [x])

    def file(self, inputs, outputs):
        return {"class_name": "Model", "keras_version": "2.2.4", "backend": "tensorflow",
                "config": {"name": "model_1", "layers": self.layers, "input_layers": [[inputs, 0, 0]],
                           "output_layers": [[outputs, 0, 0]]}}


def resnet20_v1():
    """keras/examples/cifar10_resnet.py: resnet_layer and resnet_v1, as the example writes them."""
    counts.clear()
    m = Model()

    def resnet_layer(inputs, num_filters=16, kernel_size=3, strides=1, activation="relu", batch_normalization=True):
        x = m.conv(inputs, num_filters, kernel_size, strides)
        if batch_normalization:
            x = m.batch_norm(x)
        if activation is not None:
            x = m.activation(x, activation)
        return x

    inputs = m.input((32, 32, 3))
    num_filters = 16
    x = resnet_layer(inputs)
    for stack in range(3):
        for res_block in range(3):  # (depth - 2) / 6
            strides = 2 if stack > 0 and res_block == 0 else 1
            y = resnet_layer(x, num_filters, strides=strides)
            y = resnet_layer(y, num_filters, activation=None)
            if stack > 0 and res_block == 0:
                x = resnet_layer(x, num_filters, kernel_size=1, strides=strides, activation=None,
                                 batch_normalization=False)
            x = m.call("Add", {}, [x, y])
            x = m.activation(x, "relu")
        num_filters *= 2
    x = m.call("AveragePooling2D", {"pool_size": [8, 8], "padding": "valid", "strides": [8, 8],
                                    "data_format": "channels_last"}, [x])
    y = m.call("Flatten", {"data_format": "channels_last"}, [x])
    outputs = m.dense(y, 10, "softmax", HE_NORMAL)
    return m.file(inputs, outputs)


def lstm_config(units):
    """Keras 2.2.4's LSTM.get_config, its defaults."""
    return {"name": name_for("LSTM"), "trainable": True, "return_sequences": False, "return_state": False,
            "go_backwards": False, "stateful": False, "unroll": False, "units": units, "activation": "tanh",
            "recurrent_activation": "hard_sigmoid", "use_bias": True, "kernel_initializer": GLOROT_UNIFORM,
            "recurrent_initializer": init("Orthogonal", gain=1.0, seed=None), "bias_initializer": init("Zeros"),
            "unit_forget_bias": True, "kernel_regularizer": None, "recurrent_regularizer": None, "bias_regularizer": None,
            "activity_regularizer": None, "kernel_constraint": None, "recurrent_constraint": None,
            "bias_constraint": None, "dropout": 0.0, "recurrent_dropout": 0.0, "implementation": 1}


def mnist_hierarchical_rnn():
    counts.clear()
    m = Model()
    x = m.input((28, 28, 1))
    rows = m.call("TimeDistributed", {"layer": {"class_name": "LSTM", "config": lstm_config(128)}}, [x])
    cols = lstm_config(128)
    name = cols.pop("name")
    m.layers.append({"name": name, "class_name": "LSTM", "config": dict(name=name, **cols),
                     "inbound_nodes": [[[rows, 0, 0, {}]]]})
    return m.file(x, m.dense(name, 10, "softmax", GLOROT_UNIFORM))


def mnist_irnn():
    counts.clear()
    rnn = {"name": name_for("SimpleRNN"), "trainable": True, "batch_input_shape": [None, 784, 1], "dtype": "float32",
           "return_sequences": False, "return_state": False, "go_backwards": False, "stateful": False, "unroll": False,
           "units": 100, "activation": "relu", "use_bias": True,
           "kernel_initializer": init("RandomNormal", mean=0.0, stddev=0.001, seed=None),
           "recurrent_initializer": init("Identity", gain=1.0), "bias_initializer": init("Zeros"),
           "kernel_regularizer": None, "recurrent_regularizer": None, "bias_regularizer": None,
           "activity_regularizer": None, "kernel_constraint": None, "recurrent_constraint": None,
           "bias_constraint": None, "dropout": 0.0, "recurrent_dropout": 0.0}
    dense = {"name": name_for("Dense"), "trainable": True, "units": 10, "activation": "softmax", "use_bias": True,
             "kernel_initializer": GLOROT_UNIFORM, "bias_initializer": init("Zeros"), "kernel_regularizer": None,
             "bias_regularizer": None, "activity_regularizer": None, "kernel_constraint": None, "bias_constraint": None}
    return {"class_name": "Sequential", "keras_version": "2.2.4", "backend": "tensorflow",
            "config": {"name": "sequential_1", "layers": [{"class_name": "SimpleRNN", "config": rnn},
                                                          {"class_name": "Dense", "config": dense}]}}


def sequential(layers):
    """Keras 2.2.4's Sequential.get_config: a name and the layers' list."""
    return {"class_name": "Sequential", "keras_version": "2.2.4", "backend": "tensorflow",
            "config": {"name": "sequential_1", "layers": layers}}


def keras2_layer(cls, **config):
    return {"class_name": cls, "config": dict(name=name_for(cls), trainable=True, **config)}


def embedding(vocab, dims, length):
    return keras2_layer("Embedding", batch_input_shape=[None, length], dtype="float32", input_dim=vocab,
                        output_dim=dims, embeddings_initializer=init("RandomUniform", minval=-0.05, maxval=0.05,
                                                                     seed=None),
                        embeddings_regularizer=None, activity_regularizer=None, embeddings_constraint=None,
                        mask_zero=False, input_length=length)


def dense2(units, activation):
    return keras2_layer("Dense", units=units, activation=activation, use_bias=True, kernel_initializer=GLOROT_UNIFORM,
                        bias_initializer=init("Zeros"), kernel_regularizer=None, bias_regularizer=None,
                        activity_regularizer=None, kernel_constraint=None, bias_constraint=None)


def imdb_cnn():
    counts.clear()
    conv = keras2_layer("Conv1D", filters=250, kernel_size=[3], strides=[1], padding="valid",
                        data_format="channels_last", dilation_rate=[1], activation="relu", use_bias=True,
                        kernel_initializer=GLOROT_UNIFORM, bias_initializer=init("Zeros"), kernel_regularizer=None,
                        bias_regularizer=None, activity_regularizer=None, kernel_constraint=None, bias_constraint=None)
    return sequential([embedding(5000, 50, 400), keras2_layer("Dropout", rate=0.2, noise_shape=None, seed=None), conv,
                       keras2_layer("GlobalMaxPooling1D", data_format="channels_last"), dense2(250, "linear"),
                       keras2_layer("Dropout", rate=0.2, noise_shape=None, seed=None),
                       keras2_layer("Activation", activation="relu"), dense2(1, "linear"),
                       keras2_layer("Activation", activation="sigmoid")])


def imdb_lstm():
    counts.clear()
    lstm = lstm_config(128)
    lstm.update(dropout=0.2, recurrent_dropout=0.2)
    return sequential([embedding(20000, 128, None), {"class_name": "LSTM", "config": lstm}, dense2(1, "sigmoid")])


def keras3(cls, config, module="keras.layers"):
    return {"module": module, "class_name": cls, "config": config, "registered_name": None}


FLOAT32 = keras3("DTypePolicy", {"name": "float32"}, module="keras")


def imdb_gru_mask():
    """Keras 3.x's serialization: modules and registered names, the dtype a policy, Input's batch_shape."""
    def init3(cls, **config):
        return keras3(cls, config, module="keras.initializers")

    def base(name):
        return {"name": name, "trainable": True, "dtype": FLOAT32}
    emb = dict(base("embedding"), input_dim=10000, output_dim=64,
               embeddings_initializer=init3("RandomUniform", minval=-0.05, maxval=0.05, seed=None),
               embeddings_regularizer=None, activity_regularizer=None, embeddings_constraint=None, mask_zero=True)
    gru = dict(base("gru"), return_sequences=False, return_state=False, go_backwards=False, stateful=False,
               unroll=False, zero_output_for_mask=False, units=64, activation="tanh", recurrent_activation="sigmoid",
               use_bias=True, kernel_initializer=init3("GlorotUniform", seed=None),
               recurrent_initializer=init3("Orthogonal", gain=1.0, seed=None), bias_initializer=init3("Zeros"),
               kernel_regularizer=None, recurrent_regularizer=None, bias_regularizer=None, activity_regularizer=None,
               kernel_constraint=None, recurrent_constraint=None, bias_constraint=None, dropout=0.0,
               recurrent_dropout=0.0, reset_after=True, seed=None)
    dense = dict(base("dense"), units=1, activation="sigmoid", use_bias=True,
                 kernel_initializer=init3("GlorotUniform", seed=None), bias_initializer=init3("Zeros"),
                 kernel_regularizer=None, bias_regularizer=None, kernel_constraint=None, bias_constraint=None)
    layers = [keras3("InputLayer", {"batch_shape": [None, None], "dtype": "int32", "sparse": False,
                                    "name": "input_layer"}),
              keras3("Embedding", emb), keras3("GRU", gru), keras3("Dense", dense)]
    return keras3("Sequential", {"name": "sequential", "trainable": True, "dtype": FLOAT32, "layers": layers},
                  module="keras")


def inception():
    counts.clear()
    m = Model()

    def block(x, f1, f3r, f3, f5r, f5, fp):
        b1 = m.conv(x, f1, 1, activation="relu", initializer=GLOROT_UNIFORM, l2=0)
        b3 = m.conv(m.conv(x, f3r, 1, activation="relu", initializer=GLOROT_UNIFORM, l2=0), f3, 3, activation="relu",
                    initializer=GLOROT_UNIFORM, l2=0)
        b5 = m.conv(m.conv(x, f5r, 1, activation="relu", initializer=GLOROT_UNIFORM, l2=0), f5, 5, activation="relu",
                    initializer=GLOROT_UNIFORM, l2=0)
        pool = m.call("MaxPooling2D", {"pool_size": [3, 3], "padding": "same", "strides": [1, 1],
                                       "data_format": "channels_last"}, [x])
        bp = m.conv(pool, fp, 1, activation="relu", initializer=GLOROT_UNIFORM, l2=0)
        return m.call("Concatenate", {"axis": -1}, [b1, b3, b5, bp])

    inputs = m.input((32, 32, 3))
    x = m.conv(inputs, 32, 3, activation="relu", initializer=GLOROT_UNIFORM, l2=0)
    x = block(x, 16, 16, 24, 4, 8, 8)
    x = m.call("MaxPooling2D", {"pool_size": [2, 2], "padding": "valid", "strides": [2, 2],
                                "data_format": "channels_last"}, [x])
    x = block(x, 32, 24, 48, 8, 16, 16)
    x = m.call("AveragePooling2D", {"pool_size": [16, 16], "padding": "valid", "strides": [16, 16],
                                    "data_format": "channels_last"}, [x])
    y = m.call("Flatten", {"data_format": "channels_last"}, [x])
    return m.file(inputs, m.dense(y, 10, "softmax", GLOROT_UNIFORM))


def text_arrays(out, vocab, length, padded, n_train=640, n_test=256, seed=1):
    rng = np.random.default_rng(seed)
    os.makedirs(out, exist_ok=True)
    for part, n in (("train", n_train), ("test", n_test)):
        y = rng.integers(0, 2, n)
        x = rng.integers(12, vocab, (n, length))
        for i in range(n):
            start = int(rng.integers(0, length // 2)) if padded else 0
            x[i, :start] = 0
            x[i, rng.choice(np.arange(start, length), 3, replace=False)] = 10 if y[i] else 11
        np.save(os.path.join(out, f"x_{part}.npy"), x.astype(np.int32))
        np.save(os.path.join(out, f"y_{part}.npy"), y.astype(np.int32))


def mnist_arrays(out, n_train=640, n_test=256, seed=2):
    """MNIST's shape ([N, 28, 28, 1] uint8, labels 0-9): noise, and a bright bar on rows 2y+2 and
    2y+3 for the label y."""
    rng = np.random.default_rng(seed)
    os.makedirs(out, exist_ok=True)
    for part, n in (("train", n_train), ("test", n_test)):
        y = rng.integers(0, 10, n)
        x = (rng.random((n, 28, 28)) * 60).astype(np.uint8)
        for i in range(n):
            x[i, 2 + 2 * y[i]:4 + 2 * y[i], 4:24] = 255
        np.save(os.path.join(out, f"x_{part}.npy"), x[..., None])
        np.save(os.path.join(out, f"y_{part}.npy"), y.astype(np.uint8))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    for name, make in (("resnet20_v1", resnet20_v1), ("inception", inception),
                       ("mnist_hierarchical_rnn", mnist_hierarchical_rnn), ("mnist_irnn", mnist_irnn),
                       ("imdb_cnn", imdb_cnn), ("imdb_lstm", imdb_lstm), ("imdb_gru_mask", imdb_gru_mask)):
        with open(os.path.join(sys.argv[1], name + ".json"), "w") as f:
            json.dump(make(), f, indent=1)
    for name, vocab, length, padded in (("imdb_cnn", 5000, 400, False), ("imdb_lstm", 20000, 80, False),
                                        ("imdb_gru_mask", 10000, 80, True)):
        text_arrays(os.path.join(sys.argv[1], name + "_data"), vocab, length, padded)
    mnist_arrays(os.path.join(sys.argv[1], "mnist_data"))


if __name__ == "__main__":
    main()
