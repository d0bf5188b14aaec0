// The Keras model-file reader's layers (models/keras_layers.h): each layer a file may hold, read
// into the steps of a loupe model (nn::Sequential, or nn::Graph for a functional model) with
// Keras's output shapes and parameter counts, and every option loupe cannot honour refused by name
// (docs/keras.md, "What is refused"). The sequences' layers are in models/keras_sequence_layers.cpp.
#include "models/keras_layers.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <optional>
#include <unordered_set>

#include "core/error.h"
#include "core/file_check.h"
#include "models/keras_graph.h"
#include "models/keras_modules.h"
#include "models/keras_parser.h"
#include "nn/graph.h"
#include "nn/layers.h"
#include "ops/nonlinearity.h"

namespace loupe::models::keras {

namespace {
// The layers a mask may reach (docs/keras.md, "Masking"): those it passes through, those that read
// it, and a Masking layer, whose own replaces it.
bool reads_mask(const std::string& cls) {
  for (const char* c : {"Dropout", "SpatialDropout1D", "Activation", "ReLU", "ELU", "Masking", "LSTM", "GRU", "SimpleRNN",
                        "Bidirectional", "GlobalAveragePooling1D"})
    if (cls == c) return true;
  return false;
}
}  // namespace

void Parser::layer(const Layer& l, bool last) {
  auto ref = [](int step, int output) { return std::to_string(step) + (output ? "." + std::to_string(output) : ""); };
  const std::string reads = ref(current_, current_output_);
  common(l);
  last_ = last;
  const int64_t before = loupe_parameters;
  const size_t first_step = steps.size();
  const bool masked = merging.empty() ? mask_ != kNoMask
                                      : std::any_of(merging.begin(), merging.end(), [](const Value& v) { return v.mask != kNoMask; });
  const bool timed = merging.empty() ? timed_
                                     : std::any_of(merging.begin(), merging.end(), [](const Value& v) { return v.timed; });
  if (free_length && timed && !runs_at_any_length(l.cls))
    fail(l, "needs the sequence's length, which the file leaves None; give the input one (input_length, or "
            "batch_input_shape [null, 100])");
  if (masked && !reads_mask(l.cls))
    fail(l, "receives a sequence's mask (an Embedding's mask_zero or a Masking layer), which loupe carries through "
            "Dropout, SpatialDropout1D, Activation, ReLU and ELU to LSTM, GRU, SimpleRNN, Bidirectional and "
            "GlobalAveragePooling1D layers only");
  dispatch(l);
  timed_ = timed_ && shape_.size() == 2;  // a layer that returns one vector ends the time axis
  if (l.cls == "InputLayer" || l.cls == "Embedding") timed_ = true;
  __int128 n = 1;
  for (int64_t d : shape_) n *= d;
  if (n > kMaxValues) fail(l, "gives more than " + std::to_string(kMaxValues) + " values a sample");
  costs.push_back({l.name, loupe_parameters - before, int64_t(n)});
  classes.emplace_back(l.cls, l.name);
  // What a checkpoint is tied to (models/keras_json.h): the layer as built, not the file's text.
  architecture += l.cls + " " + l.name;
  if (functional) {  // which steps it reads: a checkpoint is tied to the graph's edges too
    std::string from;
    for (const Value& v : merging) from += " " + ref(v.step, v.output);
    architecture += " <-" + (merging.empty() ? " " + reads : from);
    for (const Value& v : initial_states) architecture += " " + ref(v.step, v.output);
  }
  architecture += " ->";
  for (size_t i = first_step; i < steps.size(); ++i) architecture += " " + steps[i].name;
  architecture += " " + shape_text(shape_) + " " + std::to_string(loupe_parameters - before) + "\n";
}

void Parser::push(const std::string& name, std::function<std::shared_ptr<nn::Module>()> make) {
  names_.insert(name);
  steps.push_back({name, std::move(make), nullptr, {current_}});
  current_ = int(steps.size()) - 1;
}

void Parser::set(const Value& v) {
  shape_ = v.shape;
  chw_ = v.chw;
  flat_chw_ = v.flat_chw;
  current_ = v.step;
  current_output_ = v.output;
  mask_ = v.mask;
  timed_ = v.timed;
}

void Parser::dispatch(const Layer& l) {
  const std::string& c = l.cls;
  if (c == "InputLayer") return;
  if (c == "Dense") return dense(l);
  if (c == "Conv2D") return conv(l);
  if (c == "MaxPooling2D" || c == "AveragePooling2D") return pool(l);
  if (c == "BatchNormalization") return batch_norm(l);
  if (c == "Dropout") return dropout(l);
  if (c == "SpatialDropout1D" || c == "SpatialDropout2D") return spatial_dropout(l);
  if (c == "Masking") return masking(l);
  if (c == "RepeatVector") return repeat_vector(l);
  if (c == "Permute") return permute(l);
  if (c == "Flatten") return flatten(l);
  if (c == "Reshape") return reshape_layer(l);
  if (c == "Activation") return activation(l, conf(l).text("activation", ""), nullptr);
  if (c == "ReLU" || c == "ELU") return activation_layer(l);
  if (c == "Embedding") return embedding(l);
  if (c == "LSTM") return lstm(l, cfg(l), false);
  if (c == "Bidirectional") return bidirectional(l);
  if (c == "GlobalAveragePooling1D") return global_average(l);
  if (c == "GlobalAveragePooling2D" || c == "GlobalMaxPooling2D") return global_pool2d(l);
  if (c == "Conv1D") return conv1d(l);
  if (c == "MaxPooling1D" || c == "AveragePooling1D" || c == "GlobalMaxPooling1D") return pool1d(l);
  if (c == "ZeroPadding2D") return zero_padding(l);
  if (c == "GRU" || c == "SimpleRNN") return recurrent(l);
  if (c == "TimeDistributed") return time_distributed(l);
  if (merge_op(c)) return merge(l, *merge_op(c));
  fail(l, "is not a layer loupe has; it has InputLayer, Dense, Conv1D, Conv2D, MaxPooling1D, MaxPooling2D, "
          "AveragePooling1D, AveragePooling2D, ZeroPadding2D, BatchNormalization, Dropout, SpatialDropout1D, "
          "SpatialDropout2D, Flatten, Reshape, Permute, RepeatVector, Activation, ReLU, ELU, Embedding, Masking, LSTM, "
          "GRU, SimpleRNN, Bidirectional, TimeDistributed, GlobalAveragePooling1D, GlobalMaxPooling1D, "
          "GlobalAveragePooling2D, GlobalMaxPooling2D, and in a functional model Add, Subtract, Multiply, Average, "
          "Maximum, Minimum and Concatenate");
}

int64_t Parser::count(const Layer& l, const json& c, const char* key, int64_t max) {
  const json& v = c.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > max)
    fail(l, "has " + std::string(key) + " " + shown(v) + "; loupe takes a positive whole number up to " + std::to_string(max));
  return v.get<int64_t>();
}

void Parser::parameters(const Layer& l, __int128 keras, __int128 extra) {
  const __int128 k = keras_parameters + keras, m = loupe_parameters + keras + extra;
  if (k > kMaxParameters || m > kMaxParameters)
    fail(l, "takes the model past " + std::to_string(kMaxParameters) + " parameters, more than loupe builds");
  keras_parameters = int64_t(k);
  loupe_parameters = int64_t(m);
}

void Parser::note(const std::string& why) {
  if (std::find(count_differs.begin(), count_differs.end(), why) == count_differs.end()) count_differs.push_back(why);
}

void Parser::add(const Layer& l, std::function<std::shared_ptr<nn::Module>()> make, const std::string& suffix) {
  std::string n = l.name + suffix;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') ch = '_';
  while (names_.count(n)) n += "_" + std::to_string(steps.size());
  names_.insert(n);
  steps.push_back({n, std::move(make), nullptr, {current_}, {current_output_}});
  current_ = int(steps.size()) - 1;
  current_output_ = 0;
}

void Parser::common(const Layer& l) {
  const json& c = cfg(l);
  if (c.contains("trainable") && c.at("trainable").is_boolean() && !c.at("trainable").get<bool>())
    fail(l, "is frozen (trainable: false); loupe trains every layer");
  for (auto it = c.begin(); it != c.end(); ++it) {
    const std::string& k = it.key();
    const bool reg = k.size() > 12 && k.compare(k.size() - 12, 12, "_regularizer") == 0;
    const bool con = k.size() > 11 && k.compare(k.size() - 11, 11, "_constraint") == 0;
    // A Dense's and a convolution's kernel and bias regularizers are theirs to read (weighted).
    const bool theirs = (k == "kernel_regularizer" || k == "bias_regularizer") &&
                        (l.cls == "Dense" || l.cls == "Conv2D" || l.cls == "Conv1D");
    if ((reg || con) && !it.value().is_null() && !theirs)
      fail(l, "has a " + std::string(reg ? "regularizer" : "constraint") + " (" + cut(k) + "), which loupe does not apply");
  }
  // An InputLayer's dtype is its data's (int32 token ids, say), which the data's reader checks.
  if (l.cls != "InputLayer" && c.contains("dtype") && !c.at("dtype").is_null()) {
    const json& d = c.at("dtype");
    const std::string t = d.is_string() ? d.get<std::string>()
                                        : d.is_object() && d.contains("config") ? d.at("config").value("name", "") : "";
    if (t != "float32") fail(l, "has dtype '" + cut(t) + "'; loupe's layers are float32 (--precision fp16/bf16 sets the compute type)");
  }
}

void Parser::init(const Layer& l, const char* key, const std::string& want) {
  const json& c = cfg(l);
  if (!c.contains(key) || c.at(key).is_null()) return;
  if (class_key(c.at(key)) != want)
    fail(l, "has " + std::string(key) + " '" + cut(class_key(c.at(key))) + "'; loupe initialises as Keras's default (" + want + ")");
}

nn::VarianceScaling Parser::kernel_init(const Layer& l, int64_t fan_in) {
  const json& c = cfg(l);
  if (!c.contains("kernel_initializer") || c.at("kernel_initializer").is_null()) return {};
  return keras_initializer(c.at("kernel_initializer"), file_ + ": " + layer_label(l), "kernel_initializer", fan_in);
}

double Parser::l2_of(const Layer& l, const char* key) {
  const json& c = cfg(l);
  return c.contains(key) && !c.at(key).is_null() ? keras_l2(c.at(key), file_ + ": " + layer_label(l), key) : 0;
}

std::function<std::shared_ptr<nn::Module>()> Parser::weighted(const Layer& l, std::function<std::shared_ptr<nn::Module>()> make,
                                                      int64_t fan_in, int64_t fan_out) {
  const nn::VarianceScaling v = kernel_init(l, fan_in);
  init(l, "bias_initializer", "zeros");
  const double kernel_l2 = l2_of(l, "kernel_regularizer"), bias_l2 = l2_of(l, "bias_regularizer");
  const bool drawn = !v.glorot_uniform();
  if (kernel_l2 > 0 || bias_l2 > 0) ++regularized;
  if (!drawn && kernel_l2 == 0 && bias_l2 == 0) return make;
  return [make, v, drawn, fan_in, fan_out, kernel_l2, bias_l2] {
    std::shared_ptr<nn::Module> m = make();
    for (const auto& [name, t] : m->named_parameters()) {
      if (name == "weight" && drawn) nn::variance_scaling_(t, fan_in, fan_out, v);
      if (name == "weight" && kernel_l2 > 0) m->regularize(name, kernel_l2);
      if (name == "bias" && bias_l2 > 0) m->regularize(name, bias_l2);
    }
    return m;
  };
}

void Parser::need_value(const Layer& l, const char* key, const json& want, const std::string& why) {
  const json& c = cfg(l);
  if (c.contains(key) && !c.at(key).is_null() && c.at(key) != want)
    fail(l, "has " + std::string(key) + " " + shown(c.at(key)) + "; " + why);
}

void Parser::need_values(const Layer& l, const json& c, const json& want) {
  for (auto it = want.begin(); it != want.end(); ++it)
    if (c.contains(it.key()) && !c.at(it.key()).is_null() && c.at(it.key()) != it.value())
      fail(l, "has " + it.key() + " " + shown(c.at(it.key())) + "; loupe's " + l.cls + " has " + it.value().dump());
}

namespace {
// Keras's activations beyond relu, tanh and sigmoid, by the names its files give them.
std::optional<Nonlin> nonlinearity_named(const std::string& a) {
  if (a == "elu") return Nonlin::Elu;
  if (a == "selu") return Nonlin::Selu;
  if (a == "gelu") return Nonlin::Gelu;  // Keras's default, the exact erf form
  if (a == "swish" || a == "silu") return Nonlin::Silu;
  if (a == "hard_sigmoid") return Nonlin::HardSigmoid;
  if (a == "softplus") return Nonlin::Softplus;
  if (a == "softsign") return Nonlin::Softsign;
  return std::nullopt;
}
}  // namespace

void Parser::activation(const Layer& l, const std::string& a, const int64_t* units) {
  if (a.empty() || a == "linear") {
    if (last_) output_activation = "linear";
    return;
  }
  if (a == "relu") {
    add(l, [] { return std::make_shared<nn::ReLU>(); }, l.cls == "Activation" ? "" : "_relu");
    if (last_) output_activation = "relu";  // no loss takes it: named when a loss is refused
    return;
  }
  if (a == "tanh" || (a == "sigmoid" && !last_)) {
    const Act act = a == "tanh" ? Act::Tanh : Act::Sigmoid;
    add(l, [act] { return std::make_shared<nn::Activation>(act); }, l.cls == "Activation" ? "" : "_" + a);
    if (last_) output_activation = a;  // no loss takes it: named when a loss is refused
    return;
  }
  if (const std::optional<Nonlin> f = nonlinearity_named(a)) {
    const float slope = dialect_.hard_slope;  // hard_sigmoid's, as the file's Keras defines it
    add(l, [f, slope] { return std::make_shared<nn::Nonlinearity>(*f, slope); }, l.cls == "Activation" ? "" : "_" + a);
    if (last_) output_activation = a;  // no loss takes it: named when a loss is refused
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
  fail(l, "has activation '" + cut(a) + "'; loupe has relu, tanh, sigmoid, elu, selu, gelu, swish (silu), "
          "hard_sigmoid, softplus, softsign and linear, and softmax on the last layer");
}

void Parser::activation_layer(const Layer& l) {
  if (l.cls == "ELU") {
    need_value(l, "alpha", 1.0, "loupe's elu has Keras's default alpha, 1");
    return activation(l, "elu", nullptr);
  }
  need_value(l, "max_value", nullptr, "loupe's relu is not capped");
  for (const char* k : {"negative_slope", "threshold"}) need_value(l, k, 0.0, "loupe's relu is Keras's default");
  activation(l, "relu", nullptr);
}

int64_t Parser::features(const Layer& l) {
  if (shape_.size() != 1)
    fail(l, "takes an input of " + std::to_string(shape_.size()) + " dimensions per sample; loupe's takes a "
            "vector (Flatten before it)");
  return shape_[0];
}

void Parser::dense(const Layer& l) {
  const int64_t in = features(l), units = resize && last_ && dataset == "chars" ? resize : count(l, cfg(l), "units");
  const bool bias = conf(l).flag("use_bias", true);
  add(l, weighted(l, [in, units, bias] { return std::make_shared<nn::Linear>(in, units, bias); }, in, units));
  own(dense_weights(l.name, in, units, bias, flat_chw_));
  flat_chw_.clear();
  parameters(l, __int128(in) * units + (bias ? units : 0), 0);
  shape_ = {units};
  activation(l, conf(l).text("activation", "linear"), &units);
}

void Parser::image(const Layer& l) {
  if (shape_.size() != 3) fail(l, "needs an image [height, width, channels] per sample");
  need_value(l, "data_format", "channels_last", "loupe reads Keras's default, channels_last");
  if (chw_) return;
  add(l, [] { return std::make_shared<ChannelsFirst>(); }, "_channels_first");
  chw_ = true;
}

int Parser::square(const Layer& l, const char* key, int fallback) {
  const json& c = cfg(l);
  if (!c.contains(key) || c.at(key).is_null()) return fallback;
  const json& v = c.at(key);
  const json& one = v.is_array() && v.size() == 2 && v[0] == v[1] ? v[0] : v;
  if (!one.is_number_integer()) fail(l, "has " + std::string(key) + " " + shown(v) + "; loupe's are square");
  if (one.get<int64_t>() <= 0 || one.get<int64_t>() > 4096)
    fail(l, "has " + std::string(key) + " " + shown(v) + "; loupe takes 1 to 4096");
  return one.get<int>();
}

int Parser::conv_padding(const Layer& l, int k, int stride) {
  need_value(l, "groups", 1, "loupe's convolutions are not grouped");
  const std::string pad = conf(l).text("padding", "valid");
  if (pad != "valid" && !(pad == "same" && stride == 1 && k % 2 == 1))
    fail(l, "has padding '" + cut(pad) + "'; loupe has valid, and same at stride 1 with an odd kernel");
  return pad == "same" ? nn::same(k) : 0;
}

int Parser::padding_2d(const Layer& l, int k, int stride, const std::string& what, std::vector<int64_t>* uneven) {
  const std::string pad = conf(l).text("padding", "valid");
  if (pad != "valid" && pad != "same") fail(l, "has padding '" + cut(pad) + "'; loupe has valid and same");
  if (pad == "valid") return 0;
  auto sides = [&](int64_t size) {
    const int64_t total = std::max<int64_t>(((size + stride - 1) / stride - 1) * stride + k - size, 0);
    return std::pair<int64_t, int64_t>{total / 2, total - total / 2};
  };
  const auto [top, bottom] = sides(shape_[0]);
  const auto [left, right] = sides(shape_[1]);
  if (top == bottom && left == right && top == left) return int(top);
  if (!uneven) fail(l, "has padding 'same', which pads its " + std::to_string(shape_[0]) + "x" + std::to_string(shape_[1]) +
                          " input unevenly; " + what);
  *uneven = {top, bottom, left, right};
  return 0;
}

int Parser::conv2d_padding(const Layer& l, int k, int stride) {
  need_value(l, "groups", 1, "loupe's convolutions are not grouped");
  std::vector<int64_t> uneven;
  const int p = padding_2d(l, k, stride, "", &uneven);
  if (!uneven.empty()) zero_pad(l, uneven, "_pad");
  return p;
}

void Parser::zero_pad(const Layer& l, const std::vector<int64_t>& sides, const std::string& suffix) {
  add(l, [sides] { return std::make_shared<ZeroPad2D>(sides); }, suffix);
  shape_ = {shape_[0] + sides[0] + sides[1], shape_[1] + sides[2] + sides[3], shape_[2]};
}

void Parser::zero_padding(const Layer& l) {
  image(l);
  need_value(l, "data_format", "channels_last", "loupe reads Keras's default, channels_last");
  const json& c = cfg(l);
  const json& v = c.contains("padding") ? c.at("padding") : json(1);
  auto pixels = [&](const json& n) -> int64_t {
    if (!n.is_number_integer() || n.get<int64_t>() < 0 || n.get<int64_t>() > 4096)
      fail(l, "has padding " + shown(v) + "; loupe takes 0 to 4096 pixels a side");
    return n.get<int64_t>();
  };
  auto pair = [&](const json& p) { return p.is_array() && p.size() == 2; };
  std::vector<int64_t> sides;
  if (v.is_number()) sides = std::vector<int64_t>(4, pixels(v));
  else if (pair(v) && pair(v[0]) && pair(v[1])) sides = {pixels(v[0][0]), pixels(v[0][1]), pixels(v[1][0]), pixels(v[1][1])};
  else if (pair(v)) sides = {pixels(v[0]), pixels(v[0]), pixels(v[1]), pixels(v[1])};
  else fail(l, "has padding " + shown(v) + "; Keras's is a number, [rows, columns] or [[top, bottom], [left, right]]");
  zero_pad(l, sides, "");
}

std::pair<int64_t, int64_t> Parser::window_out(const Layer& l, int k, int stride, int p) {
  if (std::min(shape_[0], shape_[1]) + 2 * p < k)
    fail(l, "leaves no pixels of its " + std::to_string(shape_[0]) + "x" + std::to_string(shape_[1]) + " input");
  return {(shape_[0] + 2 * p - k) / stride + 1, (shape_[1] + 2 * p - k) / stride + 1};
}

void Parser::conv(const Layer& l) {
  image(l);
  const int k = square(l, "kernel_size", 0), stride = square(l, "strides", 1);
  need_value(l, "dilation_rate", json::array({1, 1}), "loupe's convolutions are not dilated");
  const int p = conv2d_padding(l, k, stride);
  const int64_t cin = shape_[2], f = count(l, cfg(l), "filters");
  const bool bias = conf(l).flag("use_bias", true);
  add(l, weighted(l, [cin, f, k, stride, p, bias] { return std::make_shared<nn::Conv2d>(cin, f, k, stride, p, bias); },
                  int64_t(k) * k * cin, int64_t(k) * k * f));
  own(conv_weights(l.name, k, cin, f, bias));
  parameters(l, __int128(k) * k * cin * f + (bias ? f : 0), 0);
  const auto [h, w] = window_out(l, k, stride, p);
  shape_ = {h, w, f};
  activation(l, conf(l).text("activation", "linear"), nullptr);
}

void Parser::pool(const Layer& l) {
  image(l);
  const int k = square(l, "pool_size", 2), stride = square(l, "strides", k);
  // Padding is never part of a pooling window (ops/pool.h), as in Keras: an even one only.
  const int p = padding_2d(l, k, stride, "loupe's pooling pads evenly", nullptr);
  if (l.cls == "MaxPooling2D") add(l, [k, stride, p] { return std::make_shared<nn::MaxPool2d>(k, stride, p); });
  else add(l, [k, stride, p] { return std::make_shared<nn::AvgPool2d>(k, stride, p); });
  const auto [h, w] = window_out(l, k, stride, p);
  shape_ = {h, w, shape_[2]};
}

void Parser::batch_norm(const Layer& l) {
  const json& c = cfg(l);
  static const json minus_one = -1;
  const json& given = c.contains("axis") ? c.at("axis") : minus_one;
  const json& axis = given.is_array() && given.size() == 1 ? given[0] : given;  // a reference: never a copy
  const bool last_axis = axis == -1 || (axis.is_number_integer() && axis.get<int64_t>() == int64_t(shape_.size()));
  if (!last_axis || (shape_.size() != 1 && shape_.size() != 3))
    fail(l, "normalises axis " + shown(axis) + " of a " + std::to_string(shape_.size()) + "-D sample; loupe's "
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
  const double momentum = 1.0 - conf(l).real("momentum", 0.99, kFraction), eps = conf(l).real("epsilon", 1e-3, kAboveZero);
  add(l, [ch, momentum, eps] { return std::make_shared<nn::BatchNorm2d>(ch, momentum, eps); });
  own(batch_norm_weights(l.name, ch, shape_.size() == 1 ? flat_chw_ : std::vector<int64_t>{}));
  parameters(l, 4 * __int128(ch), -2 * __int128(ch));  // Keras counts the moving mean and variance too
  note("Keras counts BatchNormalization's moving mean and variance");
}

void Parser::dropout(const Layer& l) {
  need_value(l, "noise_shape", nullptr, "loupe's dropout draws every value");
  const double rate = conf(l).real("rate", 0.0, kFraction);
  add(l, [rate] { return std::make_shared<nn::Dropout>(rate); });
}

void Parser::spatial_dropout(const Layer& l) {
  const bool image_layer = l.cls == "SpatialDropout2D";
  if (image_layer) image(l);
  else if (shape_.size() != 2) fail(l, "takes a sequence [time, features] per sample");
  need_value(l, "data_format", "channels_last", "loupe reads Keras's default, channels_last");
  need_value(l, "noise_shape", nullptr, "loupe's draws one value per sample and channel");
  const double p = conf(l).real("rate", 0.0, kFraction);
  const int channel_dim = image_layer ? 1 : 2;  // loupe's [N, C, H, W], or [N, T, F]
  add(l, [p, channel_dim] { return std::make_shared<SpatialDropout>(p, channel_dim); });
}

void Parser::flatten(const Layer& l) {
  need_value(l, "data_format", "channels_last", "loupe reads Keras's default, channels_last");
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  add(l, [] { return std::make_shared<nn::Flatten>(); });
  if (chw_) flat_chw_ = {shape_[2], shape_[0], shape_[1]};
  shape_ = {n};
  chw_ = false;
}

void Parser::global_pool2d(const Layer& l) {
  image(l);
  need_value(l, "keepdims", false, "loupe's gives a vector of the channels");
  const int h = int(shape_[0]), w = int(shape_[1]);
  const bool max = l.cls == "GlobalMaxPooling2D";
  add(l, [max, h, w] { return std::make_shared<GlobalPool2D>(max, h, w); });
  shape_ = {shape_[2]};
  chw_ = false;
}

void Parser::reshape_layer(const Layer& l) {
  std::vector<int64_t> target;
  int64_t n = 1, m = 1;
  const json& dims = cfg(l).at("target_shape");
  if (!dims.is_array()) fail(l, "has target_shape " + shown(dims) + "; loupe takes a list of dimensions");
  for (const json& d : dims) {
    if (!d.is_number_integer() || d.get<int64_t>() <= 0) fail(l, "has a target dimension that is not a positive whole number");
    target.push_back(d.get<int64_t>());
    m *= target.back();
  }
  for (int64_t d : shape_) n *= d;
  if (n != m) fail(l, "reshapes " + std::to_string(n) + " values per sample into " + std::to_string(m));
  if (chw_ && target.size() != 1) fail(l, "reshapes a channels-first image; loupe reshapes vectors and sequences");
  if (!flat_chw_.empty() && target.size() != 1)
    fail(l, "reshapes a flattened image, which loupe flattens channel by channel where Keras goes pixel by pixel");
  Shape t;
  for (int64_t d : target) t.push_back(d);
  add(l, [t] { return std::make_shared<nn::Reshape>(t); });
  shape_ = target;
  chw_ = false;
}

void Parser::merge(const Layer& l, nn::MergeOp op) {
  if (!functional) fail(l, "merges tensors, which only a functional model's layers do");
  std::vector<Value> in = merging;
  if (in.size() < 2) fail(l, "merges " + std::to_string(in.size()) + " tensor; Keras's merge layers take two or more");
  if (op == nn::MergeOp::Subtract && in.size() != 2) fail(l, "subtracts " + std::to_string(in.size()) + " tensors; Keras's Subtract takes two");
  const bool any_chw = std::any_of(in.begin(), in.end(), [](const Value& v) { return v.chw; });
  for (Value& v : in) {
    if (v.chw || !any_chw || v.shape.size() != 3) continue;
    set(v);
    image(l);
    v = value();
  }
  const bool concat = op == nn::MergeOp::Concatenate;
  int axis = concat ? concat_axis(l, in[0].shape.size(), file_) : 0;
  for (const Value& v : in) {
    bool same = v.shape.size() == in[0].shape.size() && v.flat_chw == in[0].flat_chw && v.chw == in[0].chw;
    for (size_t d = 0; same && d < v.shape.size(); ++d) same = v.shape[d] == in[0].shape[d] || (concat && int(d) == axis);
    if (!same) fail(l, "merges " + shape_text(in[0].shape) + " with " + shape_text(v.shape) + "; " +
                       (concat ? "Concatenate's shapes differ only along its axis" : "loupe's merges take one shape"));
    if (concat && !v.flat_chw.empty())
      fail(l, "concatenates flattened images, which loupe flattens channel by channel where Keras goes pixel by pixel");
  }
  Value out = in[0];
  if (concat)
    for (size_t k = 1; k < in.size(); ++k) out.shape[size_t(axis)] += in[k].shape[size_t(axis)];
  // loupe's dimension: the batch's first, and an image's channels before its rows and columns.
  const int dim = out.chw ? (axis == 2 ? 1 : axis + 2) : axis + 1;
  set(out);
  std::vector<int> reads, outputs;
  for (const Value& v : in) reads.push_back(v.step), outputs.push_back(v.output);
  add(l, [op, dim] { return std::make_shared<nn::Merge>(op, dim); });
  steps.back().inputs = reads;
  steps.back().outputs = outputs;
}

namespace {

// The first layers that turn what a reference data set delivers into the model's input: MNIST's
// [28, 28] into [28, 28, 1] or [784]; CIFAR-10 arrives channels-first, as the convolutions take it.
void adapt_input(const std::vector<int64_t>& input, const std::string& dataset, Parser& p) {
  auto reshape_to = [&p](const std::vector<int64_t>& s) {
    Shape t;
    for (int64_t d : s) t.push_back(d);
    p.push("input", [t] { return std::make_shared<nn::Reshape>(t); });
  };
  if (dataset == "mnist" && input != std::vector<int64_t>{28, 28}) reshape_to(input);
  if (dataset == "cifar10" && input.size() == 1) reshape_to(input);
  if (dataset == "cifar10" && input.size() == 3) p.chw_ = true;
  if (dataset == "chars") {
    const int64_t c = input[1];
    p.push("input_one_hot", [c] { return std::make_shared<OneHot>(c); });
  }
}

// The outputs layer `l`'s call reads (Layer::inbound, inbound_outputs) among the earlier layers'.
std::vector<Parser::Value> inbound_values(const std::vector<Layer>& layers, const Layer& l,
                                          const std::vector<std::vector<Parser::Value>>& out, const std::string& file) {
  std::vector<Parser::Value> in;
  for (size_t r = 0; r < l.inbound.size(); ++r) {
    const std::vector<Parser::Value>& of = out.at(size_t(l.inbound[r]));
    const int k = r < l.inbound_outputs.size() ? l.inbound_outputs[r] : 0;
    if (k < 0 || size_t(k) >= of.size())
      refuse_file(file, layer_label(l) + " reads output " + std::to_string(k) + " of layer '" +
                            cut(layers.at(size_t(l.inbound[r])).name) + "', which has " + std::to_string(of.size()) +
                            " (a recurrent layer's states follow its output where it has return_state)");
    in.push_back(of[size_t(k)]);
  }
  return in;
}

}  // namespace

Parsed parse_layers(const std::vector<Layer>& layers, std::vector<int64_t> input, const std::string& dataset,
                    const std::string& file, const Dialect& dialect, int64_t resize) {
  if (resize && dataset == "chars") input[1] = resize;  // windows of one-hot characters: [40, C]
  Parser p(file, parsed_shape(input), dialect);
  p.free_length = !input.empty() && input[0] == kFreeLength;
  p.resize = resize;
  p.dataset = dataset;
  adapt_input(input, dataset, p);
  p.functional = std::any_of(layers.begin(), layers.end(), [](const Layer& l) { return !l.inbound.empty(); });
  std::vector<std::vector<Parser::Value>> out;  // each layer's outputs, in a functional model
  for (size_t i = 0; i < layers.size(); ++i) {
    try {
      const Layer& l = layers[i];
      std::vector<Parser::Value> in = inbound_values(layers, l, out, file);
      p.merging.clear();
      p.initial_states.clear();
      p.returned_states.clear();
      if (in.size() == 1) p.set(in[0]);
      const bool recurrent = is_recurrent(l.cls);
      if (in.size() > 1 && recurrent) {  // Keras's initial_state: the call's tensors after the sequence
        p.set(in[0]);
        p.initial_states.assign(in.begin() + 1, in.end());
      } else if (in.size() > 1) {
        p.merging = in;
      }
      if (in.size() > 1 && !merge_op(l.cls) && !recurrent)
        refuse_file(file, layer_label(l) + " is called on " + std::to_string(l.inbound.size()) +
                              " tensors; loupe's layers but the merges (Add, Concatenate, ...) and a recurrent "
                              "layer's initial states take one");
      p.layer(l, i + 1 == layers.size());
      out.push_back({p.value()});
      out.back().insert(out.back().end(), p.returned_states.begin(), p.returned_states.end());
    } catch (const json::exception& e) {  // a key missing or of another type than the layer reads
      refuse_file(file, layer_label(layers[i]) + ": " + untagged(e.what()));
    }
  }
  if (p.shape_.size() != 1) refuse_file(file, "the model's output is " + shape_text(p.shape_) + " a sample; a classifier's is a vector");
  if (p.loupe_parameters == 0)
    refuse_file(file, "the model has no weights to train (no Dense, Conv2D, BatchNormalization, Embedding or LSTM layer)");
  return std::move(p);
}

}  // namespace loupe::models::keras
