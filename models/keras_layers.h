// What the Keras model-file reader (models/keras_json.cpp) shares with its layer readers
// (models/keras_layers.cpp): a layer of the file, the checked reading of a config's values, and
// the layers read into the steps of a loupe Sequential. Internal to models/.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "models/registry.h"
#include "nn/layers.h"
#include "nn/module.h"

namespace loupe::models::keras {

using json = nlohmann::json;

// A hostile file must not make loupe allocate without bound or overflow a count: dimensions,
// values per sample and parameters are capped (fastText's 60M parameters are well inside), and so
// are the layers (a Keras model has tens to hundreds; each is checked against every earlier name).
constexpr int64_t kMaxDim = int64_t(1) << 24;
constexpr int64_t kMaxValues = int64_t(1) << 31;
constexpr int64_t kMaxParameters = 1000000000;
constexpr int64_t kMaxLstmUnits = 2048;
constexpr size_t kMaxLayers = 10000;
// A sequence's time length that the file leaves None (-1 in an input shape): the layers are read
// at kParsedLength, and only those that run at any length may see the time axis.
constexpr int64_t kFreeLength = -1;
constexpr int64_t kParsedLength = 100;
// Whether a layer of class `cls` runs over a sequence of any length (docs/keras.md, "A time length
// of None").
bool runs_at_any_length(const std::string& cls);
// Whether `cls` is one of Keras's recurrent layers: LSTM, GRU, SimpleRNN.
bool is_recurrent(const std::string& cls);
inline std::vector<int64_t> parsed_shape(std::vector<int64_t> s) {
  for (int64_t& d : s)
    if (d == kFreeLength) d = kParsedLength;
  return s;
}

struct Layer {
  std::string cls, name;
  const json* cfg;
  // In a functional model (models/keras_graph.h), the layers its call reads, by their index in the
  // model's list, and which output of each (a recurrent layer's states follow its output); empty in
  // a Sequential model, whose layer reads the one before.
  std::vector<int> inbound = {};
  std::vector<int> inbound_outputs = {};
};

std::string layer_label(const Layer& l);
// `s` cut to a short prefix with "..." (a name or key from the file, or a message that quotes it).
std::string cut(const std::string& s, size_t prefix = 40);
// A value as the file has it, cut to a short prefix with "..." (a message never echoes a whole
// value: docs/reliability.md).
std::string shown(const json& v);
// A Keras class's name as one key: "glorot_uniform", "GlorotUniform" and {"class_name": ...} are
// all "glorotuniform" (initializers, optimizers, losses).
std::string class_key(const json& v);
std::string shape_text(const std::vector<int64_t>& s);
// A serialized Keras object's config ({"class_name": ..., "config": {...}}), or an empty object
// where it has none (a name such as "he_normal", or no object at all).
const json& config_of(const json& v);
// nlohmann's own message without its "[json.exception.type_error.302] " tag.
std::string untagged(const char* what);

// The bounds of a number a file gives: lo < x (or lo <= x), x < hi (or x <= hi).
struct Range {
  double lo;
  bool lo_in;
  double hi = std::numeric_limits<double>::infinity();
  bool hi_in = true;
};
constexpr Range kAboveZero{0, false};
constexpr Range kFromZero{0, true};
constexpr Range kFraction{0, true, 1, false};  // rates, momenta, decays of running averages: [0, 1)

// One config object's values by type, each refused with `where`, the key and the value's prefix.
struct Config {
  const json& c;
  std::string where;  // "m.json: layer 'fc' (Dense)", "m.json: the optimizer (adam)"
  bool has(const char* key) const { return c.is_object() && c.contains(key) && !c.at(key).is_null(); }
  bool flag(const char* key, bool fallback) const;
  std::string text(const char* key, const std::string& fallback) const;
  double real(const char* key, double fallback, Range r) const;
  [[noreturn]] void fail(const std::string& why) const;
};

// A layer's trained variables as Keras keeps them (docs/keras.md, "Weights"), and how they become
// the tensors of the step that holds them.
struct KerasWeights {
  std::string layer;                          // the Keras layer's name
  std::string cls;                            // its class ("Dense"): Keras 3 files name it so
  std::vector<std::string> names;             // its variables in Keras's order ("kernel", "bias")
  std::vector<std::vector<int64_t>> shapes;   // their shapes as Keras has them
  std::vector<std::string> paths;             // where Keras 3 keeps each in the layer's group ("vars/0")
  // Keras's arrays (float32 on the CPU, those shapes) -> the step's parameters and buffers by
  // their own names ("weight", "running_mean"), in loupe's layouts.
  std::function<std::vector<std::pair<std::string, Tensor>>(const std::vector<Tensor>&)> convert;
};

// A step of the loupe model: a module named `name`, the Keras weights it holds (none for most), and
// the steps whose outputs it reads (-1: the model's input; nn::Graph's nodes): the step before it,
// but in a functional model's branches and merges.
struct Step {
  std::string name;
  std::function<std::shared_ptr<nn::Module>()> make;
  std::shared_ptr<const KerasWeights> weights;
  std::vector<int> inputs;
  std::vector<int> outputs = {};  // which output of each input (nn::Graph::add's; the first where not given)
};

// A kernel's initializer (`key`'s value `v`) as nn::VarianceScaling: glorot_*, he_*, lecun_*,
// VarianceScaling, and RandomNormal / RandomUniform about 0 (a variance over `fan_in`); an Error
// beginning with `where` for another.
nn::VarianceScaling keras_initializer(const json& v, const std::string& where, const std::string& key, int64_t fan_in);
// A regularizer's l2 factor: Keras 2's L1L2 with l1 0, tf.keras's and Keras 3's L2, or "l2" (0.01);
// an Error beginning with `where` for another.
double keras_l2(const json& v, const std::string& where, const std::string& key);

// The converters of Keras's variables into loupe's layouts (models/keras_weights.cpp). `chw`: the
// [C, H, W] image a Flatten made the input of, channel by channel where Keras goes pixel by pixel
// (empty when the input is not one), so that the rows of a kernel are taken in loupe's order.
KerasWeights dense_weights(const std::string& layer, int64_t in, int64_t units, bool bias, const std::vector<int64_t>& chw);
KerasWeights conv_weights(const std::string& layer, int64_t k, int64_t in, int64_t filters, bool bias);
KerasWeights conv1d_weights(const std::string& layer, int64_t k, int64_t in, int64_t filters, bool bias);
KerasWeights batch_norm_weights(const std::string& layer, int64_t channels, const std::vector<int64_t>& chw);
KerasWeights embedding_weights(const std::string& layer, int64_t rows, int64_t dim);
// `inner`: the LSTM's own name; a Bidirectional's variables are "forward_<inner>/kernel", ...
KerasWeights lstm_weights(const std::string& layer, const std::string& inner, int64_t in, int64_t units, bool bidirectional);

// GRU's and SimpleRNN's (`cls`), in nn::Recurrent's layouts, which are Keras's: `gates` 3 or 1,
// `bias_rows` 0 (no bias), 1, or 2 (a GRU with reset_after: the input's and the recurrent bias).
KerasWeights rnn_weights(const std::string& layer, const std::string& cls, int64_t in, int64_t units, int gates,
                         int64_t bias_rows);
// Bidirectional(GRU, SimpleRNN, or an LSTM run step by step): the two directions' variables as
// Keras names them ("forward_<inner>/kernel", ...), into BiRecurrent's two nn::Recurrent.
KerasWeights bi_rnn_weights(const std::string& layer, const std::string& inner, const std::string& cls, int64_t in,
                            int64_t units, int gates, int64_t bias_rows);

// What a file's Keras version decides (docs/keras.md, "Keras versions"): hard_sigmoid's slope
// (Keras 2: 0.2; Keras 3: 1/6), the recurrent layers' recurrent_activation where the file has
// none (hard_sigmoid before Keras 2.3), a GRU's reset_after where it has none, and whether an LSTM has Keras's one bias (a user's file)
// or cuDNN's two (a reference model, whose recipe has always had two).
struct Dialect {
  float hard_slope = 0.2f;
  std::string recurrent_default = "sigmoid";
  bool one_bias = true;
  bool gru_reset_after = true;  // GRU's default: false in Keras 2 to 2.3, true in tf.keras and Keras 3
  int rnn_implementation = 2;   // the recurrent layers' default: 1 in Keras 2 to 2.3, 2 in tf.keras and Keras 3
};
Dialect dialect_of(const json& root, bool reference);

// The layers of a file read into loupe's steps, with what the rest of the reader needs.
struct Parsed {
  std::vector<Step> steps;
  std::vector<int64_t> shape_;    // per sample, in Keras's (channels-last) layout
  bool chw_ = false;              // the tensor is the channels-first form of a 3-D shape_
  std::string output_activation;  // softmax, sigmoid, linear or relu: the last layer's
  int64_t keras_parameters = 0, loupe_parameters = 0;
  std::vector<std::string> count_differs;  // why loupe's parameter count is not Keras's
  int regularized = 0;            // layers with an l2 regularizer (nn::Module::regularize)
  bool embedding_input = false;   // the first layer takes token ids
  bool free_length = false;       // the input's time length is None (read at kParsedLength)
  int64_t vocab = 0;
  // A reference model's size from its data (keras_model's data_sized): the Embedding's rows
  // (imdb, imdb_bigrams), or char_lstm's output characters ("chars"; its input by parse_layers()).
  int64_t resize = 0;
  std::string dataset;
  std::vector<LayerCost> costs;  // each layer: its outputs cost memory too
  std::vector<std::pair<std::string, std::string>> classes;  // each layer's class and name, in order
  std::string architecture;      // each layer's class, name, steps, output shape and parameters
};

// `layers` over samples of shape `input`, for `dataset` (its first steps adapt what the data set
// delivers; "" for none); an Error naming the file, the layer and the key for what loupe cannot build.
Parsed parse_layers(const std::vector<Layer>& layers, std::vector<int64_t> input, const std::string& dataset,
                    const std::string& file, const Dialect& dialect, int64_t resize = 0);
// The reference data set whose samples fit the model: its input shape and its output ("" for none).
std::string dataset_for(const std::vector<int64_t>& input, const Parsed& p, int64_t outputs);

}  // namespace loupe::models::keras
