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
inception.json     an Inception-style block (GoogLeNet's: 1x1, 1x1 then 3x3, 1x1 then 5x5, 3x3 max
                   pooling then 1x1, concatenated on the channels) twice over a CIFAR-10 image.
"""
import json
import os
import sys

counts = {}


def name_for(cls):
    """Keras 2.2's automatic names: the class in snake case and a count from 1 (conv2d_1, ...)."""
    base = {"Conv2D": "conv2d", "BatchNormalization": "batch_normalization", "Activation": "activation",
            "Add": "add", "AveragePooling2D": "average_pooling2d", "Flatten": "flatten", "Dense": "dense",
            "InputLayer": "input", "MaxPooling2D": "max_pooling2d", "Concatenate": "concatenate", "LSTM": "lstm",
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


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    os.makedirs(sys.argv[1], exist_ok=True)
    for name, make in (("resnet20_v1", resnet20_v1), ("inception", inception),
                       ("mnist_hierarchical_rnn", mnist_hierarchical_rnn), ("mnist_irnn", mnist_irnn)):
        with open(os.path.join(sys.argv[1], name + ".json"), "w") as f:
            json.dump(make(), f, indent=1)


if __name__ == "__main__":
    main()
