// Weights trained in Keras, into a model read from its Keras file (models/keras_json.h): each
// layer's variables as Keras keeps them (a Dense's kernel [in, units] and bias, a Conv2D's kernel
// [kh, kw, in, filters], BatchNormalization's gamma, beta, moving mean and variance, an
// Embedding's table, an LSTM's kernel, recurrent kernel and single bias) converted to loupe's
// layouts (docs/keras.md, "Weights"). The files that hold them are read elsewhere; this is the
// mapping both directions share.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "models/registry.h"
#include "nn/module.h"

namespace loupe::models {

// One variable as Keras names it: the layer's name and the variable's ("kernel", "bias";
// "forward_lstm/kernel" inside a Bidirectional), and its shape.
struct KerasVariable {
  std::string layer, name;
  std::vector<int64_t> shape;
};

// Every variable of `info`'s layers, layer by layer, each layer's in Keras's order (the order of
// Keras's `layer.weights` and of a .keras file's vars/0, vars/1, ...).
std::vector<KerasVariable> keras_variables(const ModelInfo& info);

// Sets `model` (built from `info`, on any device) to the arrays `get` gives for each of
// keras_variables(info): float32 CPU tensors of the variable's shape. An Error naming the layer
// and the variable for an array of another shape or type.
void load_keras_weights(nn::Module& model, const ModelInfo& info,
                        const std::function<Tensor(const KerasVariable&)>& get);

// The same from a Keras weights file: Keras 2's and tf.keras's `.h5` (`model.save`, the weights
// under model_weights/, or `save_weights`, at the root: each layer a group named in the
// layer_names attribute, its variables in its weight_names attribute) or Keras 3's `.weights.h5`
// (layers/NAME/vars/0, 1, ...), alone or as the model.weights.h5 of a .keras file. libhdf5 reads
// it in a child process (data/isolated.h): a damaged file is a refusal. The file must hold the
// model's layers with weights, no other, each with its variables in Keras's order and shapes;
// anything else is refused in one sentence naming the file and the layer.
void load_keras_weights_file(nn::Module& model, const ModelInfo& info, const std::string& path);

// The model's weights as Keras's variables, in keras_variables(info)'s order and shapes (float32,
// on the CPU): the inverse of load_keras_weights, each element read from the loupe element
// loading puts it into. An Error naming the layer where loupe holds what Keras's variables cannot
// give back (cuDNN's second LSTM bias, not zero after training: the reference models' layout).
std::vector<Tensor> keras_arrays(nn::Module& model, const ModelInfo& info);

// Whether `info` can be written as a .keras file (a model file's, with Keras's variables): an Error
// beginning with `what` (the path, or the option that names it) otherwise.
void check_keras_savable(const ModelInfo& info, const std::string& what);

// A .keras file of `model` (built from `info`, a model file's) at `path`, as Keras 3's model.save
// writes one: config.json (info.keras_config, the file's own), metadata.json, and model.weights.h5
// with each layer's variables at layers/NAME/vars/0, 1, ... (docs/keras.md, "Weights out").
// Written whole to a temporary file that then replaces `path`. An Error naming the file, or the
// layer, where it cannot be written.
void save_keras_file(nn::Module& model, const ModelInfo& info, const std::string& path);

}  // namespace loupe::models
