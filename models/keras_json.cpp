#include "models/keras_json.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_check.h"
#include "nn/layers.h"
#include "nn/recurrent.h"
#include "models/registry.h"
#include "ops/embedding.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace loupe::models {
namespace {

using json = nlohmann::json;

// A hostile file must not make loupe allocate without bound or overflow a count: dimensions,
// values per sample and parameters are capped (fastText's 60M parameters are well inside).
constexpr int64_t kMaxDim = int64_t(1) << 24;
constexpr int64_t kMaxValues = int64_t(1) << 31;
constexpr int64_t kMaxParameters = 1000000000;
constexpr int64_t kMaxLstmUnits = 2048;

// ---- the modules a Keras layer needs that loupe's layer set does not have as such -------------

// [N, H, W, C] -> [N, C, H, W]: Keras's channels-last image for loupe's convolutions, in NCHW's
// own format. With one channel the permuted tensor is already dense with channels-last's exact
// strides, which plain contiguous() kept: the convolutions then ran channels-last and the dropout
// after them drew its mask in that order (mnist_cnn from its file trained to other weights than
// the reference model; KerasJson.TheReferenceModelsTrainFromTheirFilesToTheSameWeights).
class ChannelsFirst : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override {
    return contiguous(transpose(transpose(x, 1, 3), 2, 3), MemoryFormat::Contiguous);
  }
  std::string type_name() const override { return "ChannelsFirst"; }
};

// GlobalAveragePooling1D: [N, T, F] -> [N, F].
class MeanOverTime : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override { return mean(x, 1); }
  std::string type_name() const override { return "GlobalAveragePooling1D"; }
};

// char_lstm's characters arrive as ids [N, T]; Keras's model takes them one-hot [N, T, C].
class OneHot : public nn::Module {
 public:
  explicit OneHot(int64_t classes) : classes_(classes) {}
  Tensor forward(const Tensor& ids) override { return one_hot(ids, classes_); }
  std::string type_name() const override { return "OneHot(" + std::to_string(classes_) + ")"; }

 private:
  int64_t classes_;
};

// Keras's LSTM (or Bidirectional(LSTM), merge_mode concat): the sequence [N, T, D*H] with
// return_sequences, else the last state of each direction side by side [N, D*H].
// An nn::LSTM itself (its weight is the layer's own, "lstm.weight" under a layer named "lstm", as
// checkpoints name the reference models' tensors) that gives what Keras's LSTM gives: the last
// step's state (both directions' side by side, as Bidirectional(merge_mode='concat')), or every
// step's output with return_sequences.
class KerasLstm : public nn::LSTM {
 public:
  KerasLstm(int64_t in, int64_t units, bool bidirectional, bool sequences)
      : nn::LSTM(in, units, 1, bidirectional), units_(units), dirs_(bidirectional ? 2 : 1), sequences_(sequences) {}
  Tensor forward(const Tensor& x) override {  // inside the layer's range (Module::operator())
    const LstmResult r = run(x);
    if (sequences_) return r.y;
    return reshape(transpose(r.h, 0, 1), Shape{x.size(0), dirs_ * units_});
  }

 private:
  int64_t units_, dirs_;
  bool sequences_;
};

// ---- reading the file -------------------------------------------------------------------------

struct Layer {
  std::string cls, name;
  const json* cfg;
};

[[noreturn]] void refuse(const std::string& file, const std::string& why) { throw Error(file + ": " + why); }

std::string layer_label(const Layer& l) { return "layer '" + l.name + "' (" + l.cls + ")"; }

// The layers of a Sequential model in either layout; anything else refused by name.
std::vector<Layer> sequential_layers(const json& root, const std::string& file) {
  if (!root.is_object() || !root.contains("class_name"))
    refuse(file, "not a Keras model file (no class_name at the top: what model.to_json() writes)");
  const std::string cls = root.value("class_name", "");
  if (cls != "Sequential")
    refuse(file, "a " + cls + " model; loupe reads Sequential models (a functional Model's graph is not supported yet)");
  const json& cfg = root.at("config");
  const json* list = cfg.is_array() ? &cfg : (cfg.is_object() && cfg.contains("layers") ? &cfg.at("layers") : nullptr);
  if (!list || !list->is_array() || list->empty()) refuse(file, "its Sequential model has no layers");
  std::vector<Layer> out;
  for (const json& l : *list) {
    if (!l.is_object() || !l.contains("class_name") || !l.contains("config") || !l.at("config").is_object())
      refuse(file, "a layer without class_name and config");
    out.push_back({l.at("class_name").get<std::string>(), l.at("config").value("name", "layer"), &l.at("config")});
  }
  return out;
}

// A list of dimensions with the batch's (null) first: the per-sample shape.
std::vector<int64_t> sample_shape(const json& dims, const std::string& what) {
  if (!dims.is_array() || dims.size() < 2) throw Error(what + " is not [batch, ...]");
  std::vector<int64_t> s;
  for (size_t i = 1; i < dims.size(); ++i) {
    if (!dims[i].is_number_integer() || dims[i].get<int64_t>() <= 0 || dims[i].get<int64_t>() > kMaxDim)
      throw Error(what + " has a dimension that is not a positive whole number up to " + std::to_string(kMaxDim) +
                  " (loupe needs fixed shapes)");
    s.push_back(dims[i].get<int64_t>());
  }
  __int128 n = 1;
  for (int64_t d : s) n *= d;
  if (n > kMaxValues) throw Error(what + " holds more than " + std::to_string(kMaxValues) + " values a sample");
  return s;
}

// The model's input shape per sample: an InputLayer's batch_shape (Keras 3) or batch_input_shape
// (Keras 2), the first layer's batch_input_shape, or the model's build_input_shape / build_config.
std::vector<int64_t> input_shape(const json& root, const std::vector<Layer>& layers, const std::string& file) {
  const json& first = *layers.front().cfg;
  for (const char* key : {"batch_shape", "batch_input_shape"})
    if (first.contains(key) && !first.at(key).is_null()) return sample_shape(first.at(key), file + ": " + key);
  const json& cfg = root.at("config");
  if (cfg.is_object() && cfg.contains("build_input_shape") && !cfg.at("build_input_shape").is_null())
    return sample_shape(cfg.at("build_input_shape"), file + ": build_input_shape");
  if (root.contains("build_config") && root.at("build_config").contains("input_shape"))
    return sample_shape(root.at("build_config").at("input_shape"), file + ": build_config.input_shape");
  refuse(file, "the model's input shape is not in the file (an InputLayer, or input_shape on the first layer)");
}

// ---- checks every layer takes -----------------------------------------------------------------

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// A Keras class's name as one key, from a string or a serialized object: "glorot_uniform",
// "GlorotUniform" and {"class_name": "GlorotUniform", ...} are all "glorotuniform" (initializers,
// optimizers, losses). Keras 2.2 wrote Glorot's uniform as VarianceScaling(1, fan_avg, uniform).
std::string class_key(const json& v) {
  std::string n = v.is_string() ? v.get<std::string>() : v.is_object() ? v.value("class_name", "") : "";
  n = lower(n);
  n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
  if (n == "variancescaling" && v.is_object() && v.contains("config")) {
    const json& c = v.at("config");
    if (c.value("scale", 0.0) == 1.0 && c.value("mode", "") == "fan_avg" && c.value("distribution", "") == "uniform")
      return "glorotuniform";
  }
  return n;
}

class Parser {
 public:
  Parser(std::string file, std::vector<int64_t> input) : shape_(std::move(input)), file_(std::move(file)) {}

  void layer(const Layer& l, bool last) {
    common(l);
    last_ = last;
    dispatch(l);
    __int128 n = 1;
    for (int64_t d : shape_) n *= d;
    if (n > kMaxValues) fail(l, "gives more than " + std::to_string(kMaxValues) + " values a sample");
  }

  void dispatch(const Layer& l) {
    const std::string& c = l.cls;
    if (c == "InputLayer") return;
    if (c == "Dense") return dense(l);
    if (c == "Conv2D") return conv(l);
    if (c == "MaxPooling2D" || c == "AveragePooling2D") return pool(l);
    if (c == "BatchNormalization") return batch_norm(l);
    if (c == "Dropout") return dropout(l);
    if (c == "Flatten") return flatten(l);
    if (c == "Reshape") return reshape_layer(l);
    if (c == "Activation") return activation(l, cfg(l).value("activation", ""), nullptr);
    if (c == "Embedding") return embedding(l);
    if (c == "LSTM") return lstm(l, cfg(l), false);
    if (c == "Bidirectional") return bidirectional(l);
    if (c == "GlobalAveragePooling1D") return global_average(l);
    fail(l, "is not a layer loupe has; it has InputLayer, Dense, Conv2D, MaxPooling2D, AveragePooling2D, "
            "BatchNormalization, Dropout, Flatten, Reshape, Activation, Embedding, LSTM, Bidirectional(LSTM) "
            "and GlobalAveragePooling1D");
  }

  struct Step {
    std::string name;
    std::function<std::shared_ptr<nn::Module>()> make;
  };
  std::vector<Step> steps;
  std::vector<int64_t> shape_;    // per sample, in Keras's (channels-last) layout
  bool chw_ = false;              // the tensor is the channels-first form of a 3-D shape_
  std::string output_activation;  // softmax, sigmoid, linear or relu: the last layer's
  int64_t keras_parameters = 0, loupe_parameters = 0;
  std::vector<std::string> count_differs;  // why loupe's parameter count is not Keras's
  bool embedding_input = false;   // the first layer takes token ids
  int64_t vocab = 0;
  // A reference model's size from its data (keras_model's data_sized): the Embedding's rows
  // (imdb, imdb_bigrams), or char_lstm's output characters ("chars"; its input by parse()).
  int64_t resize = 0;
  std::string dataset;

 private:
  static const json& cfg(const Layer& l) { return *l.cfg; }

  // A positive whole number under `key` (units, filters, a vocabulary), at most `max`.
  int64_t count(const Layer& l, const json& c, const char* key, int64_t max = kMaxDim) {
    const json& v = c.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > max)
      fail(l, "has " + std::string(key) + " " + v.dump() + "; loupe takes a positive whole number up to " + std::to_string(max));
    return v.get<int64_t>();
  }
  // Parameters as Keras counts them, and loupe's (`extra` more: cuDNN's second LSTM bias, or fewer).
  void parameters(const Layer& l, __int128 keras, __int128 extra) {
    const __int128 k = keras_parameters + keras, m = loupe_parameters + keras + extra;
    if (k > kMaxParameters || m > kMaxParameters)
      fail(l, "takes the model past " + std::to_string(kMaxParameters) + " parameters, more than loupe builds");
    keras_parameters = int64_t(k);
    loupe_parameters = int64_t(m);
  }
  void note(const std::string& why) {
    if (std::find(count_differs.begin(), count_differs.end(), why) == count_differs.end()) count_differs.push_back(why);
  }
  [[noreturn]] void fail(const Layer& l, const std::string& why) const { refuse(file_, layer_label(l) + " " + why); }

  // A module named after its Keras layer (the profile and the trace show these names), `suffix`
  // for the parts a layer brings ("conv2d_relu"); a name taken already gets its position.
  void add(const Layer& l, std::function<std::shared_ptr<nn::Module>()> make, const std::string& suffix = "") {
    std::string n = l.name + suffix;
    for (char& ch : n)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') ch = '_';
    for (const Step& st : steps)
      if (st.name == n) n += "_" + std::to_string(steps.size());
    steps.push_back({n, std::move(make)});
  }

  // Options no layer of loupe's honours: refused wherever they are set.
  void common(const Layer& l) {
    const json& c = cfg(l);
    if (c.contains("trainable") && c.at("trainable").is_boolean() && !c.at("trainable").get<bool>())
      fail(l, "is frozen (trainable: false); loupe trains every layer");
    for (auto it = c.begin(); it != c.end(); ++it) {
      const std::string& k = it.key();
      const bool reg = k.size() > 12 && k.compare(k.size() - 12, 12, "_regularizer") == 0;
      const bool con = k.size() > 11 && k.compare(k.size() - 11, 11, "_constraint") == 0;
      if ((reg || con) && !it.value().is_null())
        fail(l, "has a " + std::string(reg ? "regularizer" : "constraint") + " (" + k + "), which loupe does not apply");
    }
    // An InputLayer's dtype is its data's (int32 token ids, say), which the data's reader checks.
    if (l.cls != "InputLayer" && c.contains("dtype") && !c.at("dtype").is_null()) {
      const json& d = c.at("dtype");
      const std::string t = d.is_string() ? d.get<std::string>()
                                          : d.is_object() && d.contains("config") ? d.at("config").value("name", "") : "";
      if (t != "float32") fail(l, "has dtype '" + t + "'; loupe's layers are float32 (--precision fp16/bf16 sets the compute type)");
    }
  }

  // The initializer under `key` must be Keras's default for it (loupe initialises as Keras's defaults).
  void init(const Layer& l, const char* key, const std::string& want) {
    const json& c = cfg(l);
    if (!c.contains(key) || c.at(key).is_null()) return;
    if (class_key(c.at(key)) != want)
      fail(l, "has " + std::string(key) + " '" + class_key(c.at(key)) + "'; loupe initialises as Keras's default (" + want + ")");
  }

  void need_value(const Layer& l, const char* key, const json& want, const std::string& why) {
    const json& c = cfg(l);
    if (c.contains(key) && !c.at(key).is_null() && c.at(key) != want)
      fail(l, "has " + std::string(key) + " " + c.at(key).dump() + "; " + why);
  }

  // An activation inside or after a layer: relu, linear, or on the model's last layer softmax
  // (cross-entropy) or sigmoid on one unit (binary cross-entropy): the loss applies those.
  void activation(const Layer& l, const std::string& a, const int64_t* units) {
    if (a.empty() || a == "linear") {
      if (last_) output_activation = "linear";
      return;
    }
    if (a == "relu") {
      add(l, [] { return std::make_shared<nn::ReLU>(); }, l.cls == "Activation" ? "" : "_relu");
      if (last_) output_activation = "relu";  // no loss takes it: named when a loss is refused
      return;
    }
    if ((a == "softmax" || a == "sigmoid") && last_) {
      const int64_t out = units ? *units : shape_.empty() ? 0 : shape_.back();
      if (a == "sigmoid" && out != 1)
        fail(l, "ends in sigmoid over " + std::to_string(out) + " units; loupe trains sigmoid on one unit "
                "(binary cross-entropy) or softmax over classes");
      output_activation = a;
      return;
    }
    fail(l, "has activation '" + a + "'; loupe has relu and linear, and softmax or sigmoid on the last layer");
  }

  int64_t features(const Layer& l) {
    if (shape_.size() != 1)
      fail(l, "takes an input of " + std::to_string(shape_.size()) + " dimensions per sample; loupe's takes a "
              "vector (Flatten before it)");
    return shape_[0];
  }

  void dense(const Layer& l) {
    const int64_t in = features(l), units = resize && last_ && dataset == "chars" ? resize : count(l, cfg(l), "units");
    const bool bias = cfg(l).value("use_bias", true);
    init(l, "kernel_initializer", "glorotuniform");
    init(l, "bias_initializer", "zeros");
    add(l, [in, units, bias] { return std::make_shared<nn::Linear>(in, units, bias); });
    parameters(l, __int128(in) * units + (bias ? units : 0), 0);
    shape_ = {units};
    activation(l, cfg(l).value("activation", "linear"), &units);
  }

  // An image layer: the shape must be [H, W, C], and the tensor channels-first from here on.
  void image(const Layer& l) {
    if (shape_.size() != 3) fail(l, "needs an image [height, width, channels] per sample");
    need_value(l, "data_format", "channels_last", "loupe reads Keras's default, channels_last");
    if (chw_) return;
    add(l, [] { return std::make_shared<ChannelsFirst>(); }, "_channels_first");
    chw_ = true;
  }

  // A square pair ([3, 3] or 3) from the config: kernel_size, strides, pool_size.
  int square(const Layer& l, const char* key, int fallback) {
    const json& c = cfg(l);
    if (!c.contains(key) || c.at(key).is_null()) return fallback;
    const json& v = c.at(key);
    const json& one = v.is_array() && v.size() == 2 && v[0] == v[1] ? v[0] : v;
    if (!one.is_number_integer()) fail(l, "has " + std::string(key) + " " + v.dump() + "; loupe's are square");
    if (one.get<int64_t>() <= 0 || one.get<int64_t>() > 4096)
      fail(l, "has " + std::string(key) + " " + v.dump() + "; loupe takes 1 to 4096");
    return one.get<int>();
  }

  void conv(const Layer& l) {
    image(l);
    const int k = square(l, "kernel_size", 0), stride = square(l, "strides", 1);
    const std::string pad = cfg(l).value("padding", "valid");
    need_value(l, "dilation_rate", json::array({1, 1}), "loupe's convolutions are not dilated");
    need_value(l, "groups", 1, "loupe's convolutions are not grouped");
    if (pad != "valid" && !(pad == "same" && stride == 1 && k % 2 == 1))
      fail(l, "has padding '" + pad + "'; loupe has valid, and same at stride 1 with an odd kernel");
    const int64_t cin = shape_[2], f = count(l, cfg(l), "filters");
    const bool bias = cfg(l).value("use_bias", true);
    const int p = pad == "same" ? nn::same(k) : 0;
    init(l, "kernel_initializer", "glorotuniform");
    init(l, "bias_initializer", "zeros");
    add(l, [cin, f, k, stride, p, bias] { return std::make_shared<nn::Conv2d>(cin, f, k, stride, p, bias); });
    parameters(l, __int128(k) * k * cin * f + (bias ? f : 0), 0);
    const int64_t h = (shape_[0] + 2 * p - k) / stride + 1, w = (shape_[1] + 2 * p - k) / stride + 1;
    if (std::min(shape_[0], shape_[1]) + 2 * p < k) fail(l, "leaves no pixels of its " + std::to_string(shape_[0]) + "x" + std::to_string(shape_[1]) + " input");
    shape_ = {h, w, f};
    activation(l, cfg(l).value("activation", "linear"), nullptr);
  }

  void pool(const Layer& l) {
    image(l);
    const int k = square(l, "pool_size", 2), stride = square(l, "strides", k);
    need_value(l, "padding", "valid", "loupe's pooling has valid padding");
    if (l.cls == "MaxPooling2D") add(l, [k, stride] { return std::make_shared<nn::MaxPool2d>(k, stride); });
    else add(l, [k, stride] { return std::make_shared<nn::AvgPool2d>(k, stride); });
    const int64_t h = (shape_[0] - k) / stride + 1, w = (shape_[1] - k) / stride + 1;
    if (std::min(shape_[0], shape_[1]) < k) fail(l, "leaves no pixels of its " + std::to_string(shape_[0]) + "x" + std::to_string(shape_[1]) + " input");
    shape_ = {h, w, shape_[2]};
  }

  void batch_norm(const Layer& l) {
    const json& c = cfg(l);
    json axis = c.contains("axis") ? c.at("axis") : json(-1);
    if (axis.is_array() && axis.size() == 1) axis = axis[0];
    const bool last_axis = axis == -1 || (axis.is_number_integer() && axis.get<int64_t>() == int64_t(shape_.size()));
    if (!last_axis || (shape_.size() != 1 && shape_.size() != 3))
      fail(l, "normalises axis " + axis.dump() + " of a " + std::to_string(shape_.size()) + "-D sample; loupe's "
              "normalises the channels of an image or the features of a vector (axis -1)");
    need_value(l, "center", true, "loupe's has a shift (beta)");
    need_value(l, "scale", true, "loupe's has a scale (gamma)");
    need_value(l, "renorm", false, "loupe's has no batch renormalisation");
    need_value(l, "synchronized", false, "loupe's normalises each GPU's batch on its own");
    for (const char* k : {"beta_initializer", "moving_mean_initializer"}) init(l, k, "zeros");
    for (const char* k : {"gamma_initializer", "moving_variance_initializer"}) init(l, k, "ones");
    if (shape_.size() == 3) image(l);
    const int64_t ch = shape_.back();
    // Keras's momentum is the running statistics' decay (0.99); loupe's, PyTorch's, its complement.
    const double momentum = 1.0 - c.value("momentum", 0.99), eps = c.value("epsilon", 1e-3);
    add(l, [ch, momentum, eps] { return std::make_shared<nn::BatchNorm2d>(ch, momentum, eps); });
    parameters(l, 4 * __int128(ch), -2 * __int128(ch));  // Keras counts the moving mean and variance too
    note("Keras counts BatchNormalization's moving mean and variance");
  }

  void dropout(const Layer& l) {
    need_value(l, "noise_shape", nullptr, "loupe's dropout draws every value");
    const double rate = cfg(l).value("rate", 0.0);
    if (!(rate >= 0 && rate < 1)) fail(l, "has rate " + std::to_string(rate) + "; a rate is in [0, 1)");
    add(l, [rate] { return std::make_shared<nn::Dropout>(rate); });
  }

  void flatten(const Layer& l) {
    need_value(l, "data_format", "channels_last", "loupe reads Keras's default, channels_last");
    int64_t n = 1;
    for (int64_t d : shape_) n *= d;
    add(l, [] { return std::make_shared<nn::Flatten>(); });
    shape_ = {n};
    chw_ = false;
  }

  void reshape_layer(const Layer& l) {
    std::vector<int64_t> target;
    int64_t n = 1, m = 1;
    for (const json& d : cfg(l).at("target_shape")) {
      if (!d.is_number_integer() || d.get<int64_t>() <= 0) fail(l, "has a target dimension that is not a positive whole number");
      target.push_back(d.get<int64_t>());
      m *= target.back();
    }
    for (int64_t d : shape_) n *= d;
    if (n != m) fail(l, "reshapes " + std::to_string(n) + " values per sample into " + std::to_string(m));
    if (chw_ && target.size() != 1) fail(l, "reshapes a channels-first image; loupe reshapes vectors and sequences");
    Shape t;
    for (int64_t d : target) t.push_back(d);
    add(l, [t] { return std::make_shared<nn::Reshape>(t); });
    shape_ = target;
    chw_ = false;
  }

  void embedding(const Layer& l) {
    if (!steps.empty() || shape_.size() != 1)
      fail(l, "is not the first layer over a sequence of token ids; loupe's Embedding comes first");
    need_value(l, "mask_zero", false, "loupe does not mask padding");
    init(l, "embeddings_initializer", "randomuniform");
    const int64_t e = count(l, cfg(l), "output_dim");
    const int64_t v = resize && (dataset == "imdb" || dataset == "imdb_bigrams") ? resize : count(l, cfg(l), "input_dim");
    add(l, [v, e] { return std::make_shared<nn::Embedding>(v, e); });
    parameters(l, __int128(v) * e, 0);
    shape_ = {shape_[0], e};
    embedding_input = true;
    vocab = v;
  }

  // LSTM(units) as Keras's defaults have it (the ones loupe's kernels compute), alone or inside
  // Bidirectional; the others are refused by name.
  void lstm(const Layer& l, const json& c, bool bidirectional) {
    if (shape_.size() != 2) fail(l, "takes a sequence [time, features] per sample");
    const json want = {{"activation", "tanh"},       {"recurrent_activation", "sigmoid"}, {"use_bias", true},
                       {"unit_forget_bias", true},   {"dropout", 0.0},                    {"recurrent_dropout", 0.0},
                       {"go_backwards", false},      {"stateful", false},                 {"return_state", false},
                       {"time_major", false}};
    for (auto it = want.begin(); it != want.end(); ++it)
      if (c.contains(it.key()) && !c.at(it.key()).is_null() && c.at(it.key()) != it.value())
        fail(l, "has " + it.key() + " " + c.at(it.key()).dump() + "; loupe's LSTM has " + it.value().dump());
    const Layer inner{"LSTM", l.name, &c};
    init(inner, "kernel_initializer", "glorotuniform");
    init(inner, "recurrent_initializer", "orthogonal");
    init(inner, "bias_initializer", "zeros");
    // Keras's orthogonal initialisation of the recurrent weights costs the cube of the units
    // (6 s at 1,024 on two cores, about a minute at 2,048, hours at the 15,000 that the parameter
    // cap would let through), so a file cannot hold the run there.
    const int64_t in = shape_[1], units = count(l, c, "units", kMaxLstmUnits);
    const bool seq = c.value("return_sequences", false);
    add(l, [in, units, bidirectional, seq] { return std::make_shared<KerasLstm>(in, units, bidirectional, seq); });
    const int64_t dirs = bidirectional ? 2 : 1;
    parameters(l, dirs * 4 * (__int128(units) * (in + units) + units), dirs * 4 * __int128(units));
    note("Keras's LSTM has one bias per gate where cuDNN's layout has two");
    shape_ = seq ? std::vector<int64_t>{shape_[0], dirs * units} : std::vector<int64_t>{dirs * units};
  }

  void bidirectional(const Layer& l) {
    const json& c = cfg(l);
    if (c.contains("merge_mode") && c.at("merge_mode") != "concat")  // null too: Keras's None keeps the two apart
      fail(l, "has merge_mode " + c.at("merge_mode").dump() + "; loupe concatenates the two directions");
    if (c.contains("backward_layer") && !c.at("backward_layer").is_null())
      fail(l, "has a backward_layer of its own; loupe's runs the forward layer's twin");
    const json& inner = c.at("layer");
    if (inner.value("class_name", "") != "LSTM")
      fail(l, "wraps a " + inner.value("class_name", std::string("layer")) + "; loupe's Bidirectional wraps an LSTM");
    // The step takes the wrapper's name (Keras's summary names the layer by it; Keras 3 calls the
    // inner one "forward_" + it).
    const Layer lstm_layer{"LSTM", l.name, &inner.at("config")};
    common(lstm_layer);
    lstm(lstm_layer, inner.at("config"), true);
  }

  void global_average(const Layer& l) {
    if (shape_.size() != 2) fail(l, "takes a sequence [time, features] per sample");
    need_value(l, "data_format", "channels_last", "loupe averages over time, Keras's default");
    need_value(l, "keepdims", false, "loupe's drops the time axis");
    add(l, [] { return std::make_shared<MeanOverTime>(); });
    shape_ = {shape_[1]};
  }

  std::string file_;
  bool last_ = false;
};

// The first layers that turn what a reference data set delivers into the model's input: MNIST's
// [28, 28] into [28, 28, 1] or [784]; CIFAR-10 arrives channels-first, as the convolutions take it.
void adapt_input(const std::vector<int64_t>& input, const std::string& dataset, Parser& p) {
  auto reshape_to = [&p](const std::vector<int64_t>& s) {
    Shape t;
    for (int64_t d : s) t.push_back(d);
    p.steps.push_back({"input", [t] { return std::make_shared<nn::Reshape>(t); }});
  };
  if (dataset == "mnist" && input != std::vector<int64_t>{28, 28}) reshape_to(input);
  if (dataset == "cifar10" && input.size() == 1) reshape_to(input);
  if (dataset == "cifar10" && input.size() == 3) p.chw_ = true;
  if (dataset == "chars") {
    const int64_t c = input[1];
    p.steps.push_back({"input_one_hot", [c] { return std::make_shared<OneHot>(c); }});
  }
}

// The reference data set whose samples fit the model: its input shape and its output.
std::string dataset_for(const std::vector<int64_t>& input, const Parser& p, int64_t outputs) {
  using V = std::vector<int64_t>;
  if (!p.embedding_input && outputs == 10 && (input == V{28, 28} || input == V{28, 28, 1} || input == V{784}))
    return "mnist";
  if (!p.embedding_input && outputs == 10 && (input == V{32, 32, 3} || input == V{3072})) return "cifar10";
  if (p.embedding_input && outputs == 1 && input == V{100} && p.vocab == 20000) return "imdb";
  // fastText's words and bigrams: ids from 20,000 on are the training set's bigrams.
  if (p.embedding_input && outputs == 1 && input == V{400} && p.vocab > 20000) return "imdb_bigrams";
  // char_lstm's windows of 40 characters, one-hot, predicting the next of the same characters.
  if (!p.embedding_input && input.size() == 2 && input[0] == 40 && outputs == input[1] && outputs >= 2 &&
      outputs <= kCharLstmMaxChars && p.output_activation == "softmax")
    return "chars";
  return "";
}

// ---- the recipe -------------------------------------------------------------------------------

// The optimizer of compile_config, with Keras's defaults for what it does not say.
void optimizer_from(const json& o, Recipe& r, const std::string& file) {
  const std::string name = class_key(o);
  const json c = o.is_object() && o.contains("config") ? o.at("config") : json::object();
  auto why = [&](const std::string& w) { refuse(file, "the optimizer (" + name + ") " + w); };
  const json lr = c.contains("learning_rate") ? c.at("learning_rate") : c.contains("lr") ? c.at("lr") : json();
  if (!lr.is_null() && !lr.is_number()) why("has a learning-rate schedule; loupe takes a number (and Keras 2's decay)");
  for (const char* k : {"clipnorm", "clipvalue", "global_clipnorm"})
    if (c.contains(k) && !c.at(k).is_null()) why("clips gradients (" + std::string(k) + "); loupe does not");
  if (c.contains("weight_decay") && !c.at("weight_decay").is_null() && c.at("weight_decay") != 0)
    why("has weight_decay; loupe's optimizers have none");
  for (const char* k : {"use_ema", "amsgrad", "nesterov", "centered"})
    if (c.value(k, false)) why("has " + std::string(k) + " on; loupe's does not");
  if (name != "adam" && name != "rmsprop" && name != "sgd" && name != "adadelta")
    refuse(file, "the optimizer '" + name + "' is not one loupe has (adam, rmsprop, sgd, adadelta)");
  r = with_optimizer(Recipe{}, name);
  r.beta1 = c.value("beta_1", r.beta1), r.beta2 = c.value("beta_2", r.beta2), r.rho = c.value("rho", r.rho);
  r.momentum = c.value("momentum", 0.0);
  if (name == "rmsprop" && r.momentum != 0) why("has momentum; loupe's RMSprop has none");
  if (lr.is_number()) r.lr = lr.get<double>();
  r.eps = c.value("epsilon", 1e-7);
  r.decay = c.value("decay", 0.0);
}

// The loss of compile_config, which must agree with the last layer's activation (the loss applies
// softmax or sigmoid itself unless from_logits says the layer gives logits). Binary cross-entropy
// over a softmax of two units is categorical cross-entropy for 0/1 labels (the two terms of each
// sample are the same), and is trained as that; `source` says so.
train::Loss loss_from(const json& l, const std::string& act, int64_t outputs, const std::string& file,
                      std::string* source = nullptr) {
  const std::string name = class_key(l);
  const json c = l.is_object() && l.contains("config") && l.at("config").is_object() ? l.at("config") : json::object();
  const bool logits = c.value("from_logits", false);
  if (c.contains("label_smoothing") && c.at("label_smoothing") != 0 && !c.at("label_smoothing").is_null())
    refuse(file, "the loss " + name + " smooths its labels (label_smoothing " + c.at("label_smoothing").dump() +
                     "); loupe's does not");
  const std::string reduction = c.value("reduction", std::string("sum_over_batch_size"));
  if (reduction != "sum_over_batch_size" && reduction != "auto")
    refuse(file, "the loss " + name + " has reduction '" + reduction + "'; loupe's is the mean over the batch");
  if (name == "categoricalcrossentropy" || name == "sparsecategoricalcrossentropy") {
    if (act != (logits ? "linear" : "softmax"))
      refuse(file, "the loss " + name + " needs a last layer with " + (logits ? "no activation" : "softmax") + ", not " + act);
    return train::Loss::CrossEntropy;
  }
  if (name == "binarycrossentropy") {
    if (act == "softmax" && !logits && outputs == 2) {
      if (source) *source = "binary_crossentropy over a softmax of 2 units, trained as the categorical cross-entropy it equals";
      return train::Loss::CrossEntropy;
    }
    if (act != (logits ? "linear" : "sigmoid"))
      refuse(file, "the loss binary_crossentropy needs a last layer of one unit with " +
                       std::string(logits ? "no activation" : "sigmoid") + " (or a softmax of two), not " + act);
    return train::Loss::BinaryCrossEntropyWithLogits;
  }
  if (name == "meansquarederror" || name == "mse") {
    if (act != "linear")
      refuse(file, "the loss mean_squared_error needs a last layer with no activation (a regression's outputs), not " +
                       act);
    return train::Loss::MeanSquaredError;
  }
  refuse(file, "the loss '" + name + "' is not one loupe trains (categorical, sparse categorical or binary "
               "cross-entropy, mean squared error)");
}

// compile_config where the file has it (Keras 3), else Keras's compile defaults (RMSprop at 0.001)
// with the loss the last layer implies; batch and epochs as Keras's fit.
void recipe_from(const json& root, const Parser& p, int64_t outputs, ModelInfo& m, const std::string& file) {
  const json* cc = root.contains("compile_config") && root.at("compile_config").is_object() ? &root.at("compile_config") : nullptr;
  if (cc && cc->contains("optimizer") && !cc->at("optimizer").is_null()) {
    optimizer_from(cc->at("optimizer"), m.recipe, file);
    m.recipe_source = "the optimizer and loss from the file's compile_config";
  } else {
    m.recipe = with_optimizer(Recipe{}, "rmsprop");
    m.recipe_source = "the file has no compile_config: Keras's compile defaults, RMSprop and the loss its last layer implies";
  }
  const std::string& act = p.output_activation;
  if (cc && cc->contains("loss") && !cc->at("loss").is_null()) {
    std::string said;
    m.recipe.loss = loss_from(cc->at("loss"), act, outputs, file, &said);
    if (!said.empty()) m.recipe_source += "; " + said;
  } else if (act == "softmax" || act == "sigmoid") {
    m.recipe.loss = act == "softmax" ? train::Loss::CrossEntropy : train::Loss::BinaryCrossEntropyWithLogits;
  } else {
    m.loss_missing = file + ": the last layer has no softmax or sigmoid and the file names no loss: give --loss "
                     "categorical_crossentropy or binary_crossentropy (on the outputs as logits), or "
                     "mean_squared_error for a regression";
  }
  m.output_activation = act;
  if (m.loss_missing.empty() && m.recipe.loss == train::Loss::CrossEntropy && outputs < 2)
    refuse(file, "cross-entropy over " + std::to_string(outputs) + " output; a classifier has at least 2 classes");
  m.recipe.batch = 32;
  m.recipe.epochs = 1;
  m.recipe_source += "; batch 32 and 1 epoch as Keras's fit unless --batch, --epochs";
}

// A file fixes the sizes the reference models take from their data (models/registry.h): the data
// (`vocab`: its largest id + 1, or its distinct characters) must fit the file's (`sized`).
void check_data_vocabulary(const std::string& file, const std::string& dataset, int64_t sized, int64_t vocab) {
  if (dataset == "chars" && vocab != sized)
    refuse(file, "the text has " + std::to_string(vocab) + " distinct characters, but the model's one-hot input and "
                 "its output take " + std::to_string(sized) + ": a model for this text has input [40, " +
                 std::to_string(vocab) + "] and Dense(" + std::to_string(vocab) + ")");
  if ((dataset == "imdb" || dataset == "imdb_bigrams") && vocab > sized)
    refuse(file, "the data has token ids up to " + std::to_string(vocab - 1) + ", but the Embedding's input_dim is " +
                 std::to_string(sized) + ": a model for this data has input_dim " + std::to_string(vocab) + " or more");
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

Parser parse(const std::vector<Layer>& layers, std::vector<int64_t> input, const std::string& dataset,
             const std::string& file, int64_t resize = 0) {
  if (resize && dataset == "chars") input[1] = resize;  // windows of one-hot characters: [40, C]
  Parser p(file, input);
  p.resize = resize;
  p.dataset = dataset;
  adapt_input(input, dataset, p);
  for (size_t i = 0; i < layers.size(); ++i) p.layer(layers[i], i + 1 == layers.size());
  if (p.shape_.size() != 1) refuse(file, "the model's output is " + shape_text(p.shape_) + " a sample; a classifier's is a vector");
  if (p.loupe_parameters == 0)
    refuse(file, "the model has no weights to train (no Dense, Conv2D, BatchNormalization, Embedding or LSTM layer)");
  return p;
}

}  // namespace

bool is_model_file(const std::string& name) {
  return name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
}

std::string model_stem(const std::string& name) {
  if (!is_model_file(name)) return name;
  const size_t slash = name.find_last_of('/');
  const std::string base = slash == std::string::npos ? name : name.substr(slash + 1);
  return base.substr(0, base.size() - 5);
}

namespace {
std::shared_ptr<nn::Module> sequential_of(const std::vector<Parser::Step>& steps) {
  auto s = std::make_shared<nn::Sequential>();
  for (const Parser::Step& st : steps) s->add(st.name, st.make());
  return s;
}

// A reference model's builder: the data's vocabulary or alphabet replaces the file's own size (the
// fastText table's rows grow with the training set's bigrams; char_lstm's input and output with
// the text's characters), as the reference models have always taken them.
std::function<std::shared_ptr<nn::Module>(int64_t)> data_sized_builder(json root, std::vector<int64_t> input,
                                                                         std::string dataset, std::string file,
                                                                         int64_t sized, std::vector<Parser::Step> steps) {
  if (dataset != "chars" && dataset != "imdb" && dataset != "imdb_bigrams")
    return [steps](int64_t) { return sequential_of(steps); };
  auto doc = std::make_shared<const json>(std::move(root));
  return [doc, input, dataset, file, sized, steps](int64_t vocab) {
    if (vocab == sized) return sequential_of(steps);
    if (vocab < 1 || (dataset == "chars" && vocab > kCharLstmMaxChars))
      refuse(file, (dataset == "chars" ? "texts of 1 to " + std::to_string(kCharLstmMaxChars) + " distinct characters, not "
                                       : std::string("a vocabulary of at least 1 token, not ")) + std::to_string(vocab));
    return sequential_of(parse(sequential_layers(*doc, file), input, dataset, file, vocab).steps);
  };
}
}  // namespace

ModelInfo keras_model(const std::string& text, const std::string& file, bool data_sized) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    refuse(file, std::string("not JSON: ") + e.what());
  }
  try {
    const std::vector<Layer> layers = sequential_layers(root, file);
    const std::vector<int64_t> input = input_shape(root, layers, file);
    const Parser first = parse(layers, input, "", file);  // what the model outputs, to pick the data set
    const int64_t outputs = first.shape_[0];
    ModelInfo m;
    recipe_from(root, first, outputs, m, file);  // the loss first: a regression's data are its own arrays
    const bool regression = m.loss_missing.empty() && m.recipe.loss == train::Loss::MeanSquaredError;
    const std::string dataset = regression ? "" : dataset_for(input, first, outputs);
    const Parser p = parse(layers, input, dataset, file);
    m.recipe.dataset = dataset.empty() ? "arrays" : dataset;
    m.input_shape = input;
    m.classes = regression ? 0 : m.recipe.loss == train::Loss::BinaryCrossEntropyWithLogits ? 2 : outputs;
    m.outputs = outputs;
    m.token_ids = p.embedding_input;
    m.name = file;
    m.description = "Keras Sequential model, input " + shape_text(input) + ", " +
                    std::to_string(layers.size()) + " layers";
    m.vocab = dataset == "chars" ? input[1] : p.vocab;
    m.keras_parameters = p.keras_parameters;
    for (const std::string& w : p.count_differs) m.keras_parameters_why += (m.keras_parameters_why.empty() ? "" : "; ") + w;
    const std::vector<Parser::Step> steps = p.steps;
    if (data_sized) {
      m.build_for = data_sized_builder(std::move(root), input, dataset, file, m.vocab, steps);
    } else {
      m.build_for = [steps, dataset, file, sized = m.vocab](int64_t vocab) {
        check_data_vocabulary(file, dataset, sized, vocab);
        return sequential_of(steps);
      };
    }
    m.expected_parameters = p.loupe_parameters;  // counted, not built: a file's sizes are checked first
    return m;
  } catch (const json::exception& e) {  // a key missing or of the wrong type
    refuse(file, std::string("not a model file loupe can read: ") + e.what());
  }
}

// --loss mean_squared_error: a model file's outputs as a regression's, on its own NumPy arrays.
ModelInfo with_regression(ModelInfo info, const std::string& name) {
  if (info.outputs == 0)
    throw Error("--loss " + name + " on " + info.name + ": the reference models' data sets hold class labels; a "
                "regression is a model file (.json, .keras) trained on NumPy targets");
  const std::string& d = info.recipe.dataset;
  if (d != "arrays" && d != "mnist" && d != "cifar10")
    throw Error("--loss " + name + " on " + info.name + ": this model reads text (" + d + "), whose data sets hold "
                "class labels; a regression trains on NumPy arrays");
  const std::string act = info.output_activation.empty() ? "linear" : info.output_activation;
  info.recipe.loss = loss_from(json{{"class_name", name}}, act, info.outputs, info.name);
  info.recipe.dataset = "arrays";
  info.classes = 0;
  info.loss_missing.clear();
  info.recipe_source = "the loss from --loss " + name + (info.recipe_source.empty() ? "" : "; " + info.recipe_source);
  return info;
}

void check_loss_name(const std::string& name) {
  const std::string key = class_key(json(name));
  if (key != "categoricalcrossentropy" && key != "sparsecategoricalcrossentropy" && key != "binarycrossentropy" &&
      key != "meansquarederror" && key != "mse")
    throw Error("--loss '" + name + "': loupe trains categorical_crossentropy, sparse_categorical_crossentropy, "
                "binary_crossentropy or mean_squared_error");
}

ModelInfo with_loss(ModelInfo info, const std::string& name) {
  check_loss_name(name);
  const std::string key = class_key(json(name));
  if (key == "meansquarederror" || key == "mse") return with_regression(std::move(info), name);
  const std::string act = info.output_activation.empty() ? "linear" : info.output_activation;
  std::string said;
  info.recipe.loss = loss_from(json{{"class_name", name}, {"config", {{"from_logits", act == "linear"}}}}, act,
                               info.outputs, info.name, &said);
  const bool binary = info.recipe.loss == train::Loss::BinaryCrossEntropyWithLogits;
  if (info.outputs > 0 && binary != (info.outputs == 1))  // a reference model's: the trainer checks its logits
    throw Error(info.name + ": --loss " + name + " over " + std::to_string(info.outputs) + " output" +
                (info.outputs == 1 ? "" : "s") + "; " +
                (binary ? "binary_crossentropy trains one" : "a classifier has at least 2 classes (binary_crossentropy trains one output)"));
  if (info.outputs > 0) info.classes = binary ? 2 : info.outputs;
  info.loss_missing.clear();
  info.recipe_source = "the loss from --loss " + name + (said.empty() ? "" : " (" + said + ")") +
                       (info.recipe_source.empty() ? "" : "; " + info.recipe_source);
  return info;
}

ModelInfo load_keras_model(const std::string& path) {
  const std::string other = what_else(path);
  if (!other.empty()) throw Error(path + ": is " + other + ", not a model file");
  std::string text;
  uint64_t size = 0;
  constexpr uint64_t kCap = 16u << 20;
  if (!read_capped(path, kCap, &text, &size))
    throw Error(path + ": " + std::to_string(size) + " bytes; a Keras model file (model.to_json()) is kilobytes, "
                "and loupe reads at most 16 MiB");
  return keras_model(text, path);
}

}  // namespace loupe::models
