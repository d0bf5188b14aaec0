// The Keras model-file reader's layers (models/keras_layers.h): each layer a file may hold, read
// into the steps of a loupe Sequential with Keras's output shapes and parameter counts, and every
// option loupe cannot honour refused by name (docs/keras.md, "What is refused").
#include "models/keras_layers.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <unordered_set>

#include "core/error.h"
#include "core/file_check.h"
#include "nn/layers.h"
#include "nn/recurrent.h"
#include "ops/bias_act.h"
#include "ops/conv.h"
#include "ops/embedding.h"
#include "ops/pool.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace loupe::models::keras {
namespace {
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

// GlobalAveragePooling2D and GlobalMaxPooling2D: [N, C, H, W] -> [N, C] (the mean, or one max
// pooling window over the whole image).
class GlobalPool2D : public nn::Module {
 public:
  GlobalPool2D(bool max, int h, int w) : max_(max), h_(h), w_(w) {}
  Tensor forward(const Tensor& x) override {
    if (!max_) return global_avg_pool(x);
    return reshape(max_pool2d(x, Pool2dParams{h_, w_, h_, w_}), Shape{x.size(0), x.size(1)});
  }
  std::string type_name() const override { return max_ ? "GlobalMaxPooling2D" : "GlobalAveragePooling2D"; }

 private:
  bool max_;
  int h_, w_;
};

// A sequence [N, T, F] (Keras's channels last) as the image [N, F, 1, T] that loupe's 2-D
// convolutions and poolings take, and back.
Tensor sequence_image(const Tensor& x) {
  return reshape(contiguous(transpose(x, 1, 2)), Shape{x.size(0), x.size(2), 1, x.size(1)});
}
Tensor image_sequence(const Tensor& y) {
  return contiguous(transpose(reshape(y, Shape{y.size(0), y.size(1), y.size(3)}), 1, 2));
}

// Keras's Conv1D over [N, T, F]: a 2-D convolution of sequence_image's [N, F, 1, T] with a [1, k]
// kernel, so the parameter "weight" is [filters, F, 1, k]; an activation after it joins the
// convolution's epilogue as nn::Conv2d's does.
class Conv1D : public nn::Module {
 public:
  Conv1D(int64_t in, int64_t filters, int k, int stride, int pad, bool with_bias) : stride_(stride), pad_(pad) {
    Tensor w = empty(Shape{filters, in, 1, k}, DType::f32, kCPU);
    nn::glorot_uniform_(w, in * k, filters * k);  // Keras's fans for a [k, in, filters] kernel
    weight = register_parameter("weight", w);
    if (with_bias) bias = register_parameter("bias", zeros(Shape{filters}, DType::f32, kCPU));
  }
  Tensor forward(const Tensor& x) override { return forward_fused(x, nn::Epilogue{}); }
  bool accepts(const nn::Epilogue&) const override { return true; }
  Tensor forward_fused(const Tensor& x, const nn::Epilogue& e) override {
    Conv2dParams p;
    p.stride_w = stride_;
    p.pad_w = pad_;
    Tensor y = conv2d(sequence_image(nn::autocast(x)), nn::autocast(weight), p);
    if (bias.defined() || e.act || e.dropout > 0) y = bias_act(y, nn::autocast(bias), e.act, e.dropout, true);
    return image_sequence(y);
  }
  std::string type_name() const override {
    return "Conv1D(" + std::to_string(weight.size(1)) + " -> " + std::to_string(weight.size(0)) + ", " +
           std::to_string(weight.size(3)) + ", stride " + std::to_string(stride_) + ", pad " + std::to_string(pad_) + ")";
  }
  Tensor weight, bias;

 private:
  int stride_, pad_;
};

// MaxPooling1D, AveragePooling1D and GlobalMaxPooling1D over [N, T, F]: a [1, k] window of
// sequence_image's image; the global one a window of the whole sequence, giving [N, F].
class Pool1D : public nn::Module {
 public:
  Pool1D(bool max, int k, int stride, bool global) : max_(max), k_(k), stride_(stride), global_(global) {}
  Tensor forward(const Tensor& x) override {
    const Pool2dParams p{1, k_, 1, stride_};
    const Tensor img = sequence_image(x), y = max_ ? max_pool2d(img, p) : avg_pool2d(img, p);
    return global_ ? reshape(y, Shape{x.size(0), x.size(2)}) : image_sequence(y);
  }
  std::string type_name() const override {
    return std::string(global_ ? "GlobalMaxPooling1D" : max_ ? "MaxPooling1D" : "AveragePooling1D") + "(" +
           std::to_string(k_) + ", stride " + std::to_string(stride_) + ")";
  }

 private:
  bool max_;
  int k_, stride_;
  bool global_;
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
  KerasLstm(const LstmParams& p, bool sequences)
      : nn::LSTM(p), units_(p.hidden_size), dirs_(p.directions()), sequences_(sequences) {}
  Tensor forward(const Tensor& x) override {  // inside the layer's range (Module::operator())
    const LstmResult r = run(x);
    if (sequences_) return r.y;
    return reshape(transpose(r.h, 0, 1), Shape{x.size(0), dirs_ * units_});
  }

 private:
  int64_t units_, dirs_;
  bool sequences_;
};
}  // namespace

// ---- checked values --------------------------------------------------------------------------

std::string layer_label(const Layer& l) { return "layer '" + cut(l.name) + "' (" + cut(l.cls) + ")"; }

std::string cut(const std::string& s, size_t prefix) {
  if (s.size() <= prefix) return s;
  size_t n = prefix;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // not inside a UTF-8 character
  return s.substr(0, n) + "...";
}

std::string shown(const json& v) { return cut(v.dump(-1, ' ', false, json::error_handler_t::replace)); }

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + "]";
}

void Config::fail(const std::string& why) const { throw Error(where + " " + why); }

bool Config::flag(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!c.at(key).is_boolean()) fail("has " + std::string(key) + " " + shown(c.at(key)) + "; loupe takes true or false");
  return c.at(key).get<bool>();
}

std::string Config::text(const char* key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!c.at(key).is_string()) fail("has " + std::string(key) + " " + shown(c.at(key)) + "; loupe takes a name");
  return c.at(key).get<std::string>();
}

namespace {
std::string bound(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}
}  // namespace

// Checked as the command line's numbers are (cli/options.cpp): a NaN or an infinity is outside
// every range.
double Config::real(const char* key, double fallback, Range r) const {
  if (!has(key)) return fallback;
  const json& v = c.at(key);
  const double x = v.is_number() ? v.get<double>() : std::nan("");
  const bool ok = std::isfinite(x) && (r.lo_in ? x >= r.lo : x > r.lo) && (r.hi_in ? x <= r.hi : x < r.hi);
  if (ok) return x;
  std::string range = std::string(r.lo_in ? "from " : "above ") + bound(r.lo);
  if (std::isfinite(r.hi)) range += (r.hi_in ? " up to " : " to below ") + bound(r.hi);
  fail("has " + std::string(key) + " " + shown(v) + "; loupe takes a number " + range);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

// A Keras class's name as one key, from a string or a serialized object: "glorot_uniform",
// "GlorotUniform" and {"class_name": "GlorotUniform", ...} are all "glorotuniform" (initializers,
// optimizers, losses). Keras 2.2 wrote Glorot's uniform as VarianceScaling(1, fan_avg, uniform).
std::string class_key(const json& v) {
  auto string_at = [](const json& o, const char* key) {  // "" where absent or not a string: never throws
    return o.is_object() && o.contains(key) && o.at(key).is_string() ? o.at(key).get<std::string>() : std::string();
  };
  std::string n = v.is_string() ? v.get<std::string>() : string_at(v, "class_name");
  n = lower(n);
  n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
  if (n == "variancescaling" && v.is_object() && v.contains("config")) {
    const json& c = v.at("config");
    const bool unit = c.is_object() && c.contains("scale") && c.at("scale") == 1.0;
    if (unit && string_at(c, "mode") == "fan_avg" && string_at(c, "distribution") == "uniform") return "glorotuniform";
  }
  return n;
}

namespace {
class Parser : public Parsed {
 public:
  Parser(std::string file, std::vector<int64_t> input, Dialect d) : file_(std::move(file)), dialect_(std::move(d)) {
    shape_ = std::move(input);
  }

  void layer(const Layer& l, bool last) {
    common(l);
    last_ = last;
    const int64_t before = loupe_parameters;
    const size_t first_step = steps.size();
    dispatch(l);
    __int128 n = 1;
    for (int64_t d : shape_) n *= d;
    if (n > kMaxValues) fail(l, "gives more than " + std::to_string(kMaxValues) + " values a sample");
    costs.push_back({l.name, loupe_parameters - before, int64_t(n)});
    // What a checkpoint is tied to (models/keras_json.h): the layer as built, not the file's text.
    architecture += l.cls + " " + l.name + " ->";
    for (size_t i = first_step; i < steps.size(); ++i) architecture += " " + steps[i].name;
    architecture += " " + shape_text(shape_) + " " + std::to_string(loupe_parameters - before) + "\n";
  }

  // A step of the data set's adaptation (adapt_input), before any layer's.
  void push(const std::string& name, std::function<std::shared_ptr<nn::Module>()> make) {
    names_.insert(name);
    steps.push_back({name, std::move(make), nullptr});
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
    if (c == "Activation") return activation(l, conf(l).text("activation", ""), nullptr);
    if (c == "Embedding") return embedding(l);
    if (c == "LSTM") return lstm(l, cfg(l), false);
    if (c == "Bidirectional") return bidirectional(l);
    if (c == "GlobalAveragePooling1D") return global_average(l);
    if (c == "GlobalAveragePooling2D" || c == "GlobalMaxPooling2D") return global_pool2d(l);
    if (c == "Conv1D") return conv1d(l);
    if (c == "MaxPooling1D" || c == "AveragePooling1D" || c == "GlobalMaxPooling1D") return pool1d(l);
    fail(l, "is not a layer loupe has; it has InputLayer, Dense, Conv1D, Conv2D, MaxPooling1D, MaxPooling2D, "
            "AveragePooling1D, AveragePooling2D, BatchNormalization, Dropout, Flatten, Reshape, Activation, Embedding, "
            "LSTM, Bidirectional(LSTM), GlobalAveragePooling1D, GlobalMaxPooling1D, GlobalAveragePooling2D and "
            "GlobalMaxPooling2D");
  }


 private:
  static const json& cfg(const Layer& l) { return *l.cfg; }
  Config conf(const Layer& l) const { return {cfg(l), file_ + ": " + layer_label(l)}; }

  // A positive whole number under `key` (units, filters, a vocabulary), at most `max`.
  int64_t count(const Layer& l, const json& c, const char* key, int64_t max = kMaxDim) {
    const json& v = c.at(key);
    if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > max)
      fail(l, "has " + std::string(key) + " " + shown(v) + "; loupe takes a positive whole number up to " + std::to_string(max));
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
  [[noreturn]] void fail(const Layer& l, const std::string& why) const { refuse_file(file_, layer_label(l) + " " + why); }

  // A module named after its Keras layer (the profile and the trace show these names), `suffix`
  // for the parts a layer brings ("conv2d_relu"); a name taken already gets its position (looked
  // up in a set: a file of thousands of layers of one name is read in linear time).
  void add(const Layer& l, std::function<std::shared_ptr<nn::Module>()> make, const std::string& suffix = "") {
    std::string n = l.name + suffix;
    for (char& ch : n)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_') ch = '_';
    while (names_.count(n)) n += "_" + std::to_string(steps.size());
    names_.insert(n);
    steps.push_back({n, std::move(make), nullptr});
  }
  // The Keras variables the step just added holds.
  void own(KerasWeights w) { steps.back().weights = std::make_shared<const KerasWeights>(std::move(w)); }

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

  // The initializer under `key` must be Keras's default for it (loupe initialises as Keras's defaults).
  void init(const Layer& l, const char* key, const std::string& want) {
    const json& c = cfg(l);
    if (!c.contains(key) || c.at(key).is_null()) return;
    if (class_key(c.at(key)) != want)
      fail(l, "has " + std::string(key) + " '" + cut(class_key(c.at(key))) + "'; loupe initialises as Keras's default (" + want + ")");
  }

  void need_value(const Layer& l, const char* key, const json& want, const std::string& why) {
    const json& c = cfg(l);
    if (c.contains(key) && !c.at(key).is_null() && c.at(key) != want)
      fail(l, "has " + std::string(key) + " " + shown(c.at(key)) + "; " + why);
  }

  // An activation inside or after a layer: relu, tanh, sigmoid, linear, or on the model's last
  // layer softmax (cross-entropy) or sigmoid on one unit (binary cross-entropy): the loss applies
  // those.
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
    if (a == "tanh" || (a == "sigmoid" && !last_)) {
      const Act act = a == "tanh" ? Act::Tanh : Act::Sigmoid;
      add(l, [act] { return std::make_shared<nn::Activation>(act); }, l.cls == "Activation" ? "" : "_" + a);
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
    fail(l, "has activation '" + cut(a) + "'; loupe has relu, tanh, sigmoid and linear, and softmax on the last layer");
  }

  int64_t features(const Layer& l) {
    if (shape_.size() != 1)
      fail(l, "takes an input of " + std::to_string(shape_.size()) + " dimensions per sample; loupe's takes a "
              "vector (Flatten before it)");
    return shape_[0];
  }

  void dense(const Layer& l) {
    const int64_t in = features(l), units = resize && last_ && dataset == "chars" ? resize : count(l, cfg(l), "units");
    const bool bias = conf(l).flag("use_bias", true);
    init(l, "kernel_initializer", "glorotuniform");
    init(l, "bias_initializer", "zeros");
    add(l, [in, units, bias] { return std::make_shared<nn::Linear>(in, units, bias); });
    own(dense_weights(l.name, in, units, bias, flat_chw_));
    flat_chw_.clear();
    parameters(l, __int128(in) * units + (bias ? units : 0), 0);
    shape_ = {units};
    activation(l, conf(l).text("activation", "linear"), &units);
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
    if (!one.is_number_integer()) fail(l, "has " + std::string(key) + " " + shown(v) + "; loupe's are square");
    if (one.get<int64_t>() <= 0 || one.get<int64_t>() > 4096)
      fail(l, "has " + std::string(key) + " " + shown(v) + "; loupe takes 1 to 4096");
    return one.get<int>();
  }

  // A convolution's padding on each side (valid, or same at stride 1 with an odd kernel) and
  // groups: the options both Conv1D and Conv2D take.
  int conv_padding(const Layer& l, int k, int stride) {
    need_value(l, "groups", 1, "loupe's convolutions are not grouped");
    const std::string pad = conf(l).text("padding", "valid");
    if (pad != "valid" && !(pad == "same" && stride == 1 && k % 2 == 1))
      fail(l, "has padding '" + cut(pad) + "'; loupe has valid, and same at stride 1 with an odd kernel");
    return pad == "same" ? nn::same(k) : 0;
  }
  void valid_pooling(const Layer& l) { need_value(l, "padding", "valid", "loupe's pooling has valid padding"); }

  void conv(const Layer& l) {
    image(l);
    const int k = square(l, "kernel_size", 0), stride = square(l, "strides", 1);
    need_value(l, "dilation_rate", json::array({1, 1}), "loupe's convolutions are not dilated");
    const int p = conv_padding(l, k, stride);
    const int64_t cin = shape_[2], f = count(l, cfg(l), "filters");
    const bool bias = conf(l).flag("use_bias", true);
    init(l, "kernel_initializer", "glorotuniform");
    init(l, "bias_initializer", "zeros");
    add(l, [cin, f, k, stride, p, bias] { return std::make_shared<nn::Conv2d>(cin, f, k, stride, p, bias); });
    own(conv_weights(l.name, k, cin, f, bias));
    parameters(l, __int128(k) * k * cin * f + (bias ? f : 0), 0);
    const int64_t h = (shape_[0] + 2 * p - k) / stride + 1, w = (shape_[1] + 2 * p - k) / stride + 1;
    if (std::min(shape_[0], shape_[1]) + 2 * p < k) fail(l, "leaves no pixels of its " + std::to_string(shape_[0]) + "x" + std::to_string(shape_[1]) + " input");
    shape_ = {h, w, f};
    activation(l, conf(l).text("activation", "linear"), nullptr);
  }

  void pool(const Layer& l) {
    image(l);
    const int k = square(l, "pool_size", 2), stride = square(l, "strides", k);
    valid_pooling(l);
    if (l.cls == "MaxPooling2D") add(l, [k, stride] { return std::make_shared<nn::MaxPool2d>(k, stride); });
    else add(l, [k, stride] { return std::make_shared<nn::AvgPool2d>(k, stride); });
    const int64_t h = (shape_[0] - k) / stride + 1, w = (shape_[1] - k) / stride + 1;
    if (std::min(shape_[0], shape_[1]) < k) fail(l, "leaves no pixels of its " + std::to_string(shape_[0]) + "x" + std::to_string(shape_[1]) + " input");
    shape_ = {h, w, shape_[2]};
  }

  void batch_norm(const Layer& l) {
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

  void dropout(const Layer& l) {
    need_value(l, "noise_shape", nullptr, "loupe's dropout draws every value");
    const double rate = conf(l).real("rate", 0.0, kFraction);
    add(l, [rate] { return std::make_shared<nn::Dropout>(rate); });
  }

  void flatten(const Layer& l) {
    need_value(l, "data_format", "channels_last", "loupe reads Keras's default, channels_last");
    int64_t n = 1;
    for (int64_t d : shape_) n *= d;
    add(l, [] { return std::make_shared<nn::Flatten>(); });
    if (chw_) flat_chw_ = {shape_[2], shape_[0], shape_[1]};
    shape_ = {n};
    chw_ = false;
  }

  // A window's size from the config: 3 or [3] (kernel_size, strides, pool_size of a 1-D layer).
  int single(const Layer& l, const char* key, int fallback) {
    const json& c = cfg(l);
    if (!c.contains(key) || c.at(key).is_null()) return fallback;
    const json& v = c.at(key);
    const json& one = v.is_array() && v.size() == 1 ? v[0] : v;
    if (!one.is_number_integer() || one.get<int64_t>() <= 0 || one.get<int64_t>() > 4096)
      fail(l, "has " + std::string(key) + " " + shown(v) + "; loupe takes 1 to 4096");
    return one.get<int>();
  }

  void sequence(const Layer& l) {
    if (shape_.size() != 2) fail(l, "takes a sequence [time, features] per sample");
    need_value(l, "data_format", "channels_last", "loupe reads Keras's default, channels_last");
  }

  void conv1d(const Layer& l) {
    sequence(l);
    const int k = single(l, "kernel_size", 0), stride = single(l, "strides", 1);
    need_value(l, "dilation_rate", json::array({1}), "loupe's convolutions are not dilated");
    const int p = conv_padding(l, k, stride);
    const int64_t in = shape_[1], f = count(l, cfg(l), "filters");
    const bool bias = conf(l).flag("use_bias", true);
    init(l, "kernel_initializer", "glorotuniform");
    init(l, "bias_initializer", "zeros");
    if (shape_[0] + 2 * p < k) fail(l, "leaves no steps of its " + std::to_string(shape_[0]) + "-step input");
    add(l, [in, f, k, stride, p, bias] { return std::make_shared<Conv1D>(in, f, k, stride, p, bias); });
    own(conv1d_weights(l.name, k, in, f, bias));
    parameters(l, __int128(k) * in * f + (bias ? f : 0), 0);
    shape_ = {(shape_[0] + 2 * p - k) / stride + 1, f};
    activation(l, conf(l).text("activation", "linear"), nullptr);
  }

  void pool1d(const Layer& l) {
    sequence(l);
    const bool global = l.cls == "GlobalMaxPooling1D", max = l.cls != "AveragePooling1D";
    if (global) need_value(l, "keepdims", false, "loupe's gives a vector of the features");
    else valid_pooling(l);
    const int k = global ? int(shape_[0]) : single(l, "pool_size", 2), stride = global ? k : single(l, "strides", k);
    if (shape_[0] < k) fail(l, "leaves no steps of its " + std::to_string(shape_[0]) + "-step input");
    add(l, [max, k, stride, global] { return std::make_shared<Pool1D>(max, k, stride, global); });
    shape_ = global ? std::vector<int64_t>{shape_[1]} : std::vector<int64_t>{(shape_[0] - k) / stride + 1, shape_[1]};
  }

  void global_pool2d(const Layer& l) {
    image(l);
    need_value(l, "keepdims", false, "loupe's gives a vector of the channels");
    const int h = int(shape_[0]), w = int(shape_[1]);
    const bool max = l.cls == "GlobalMaxPooling2D";
    add(l, [max, h, w] { return std::make_shared<GlobalPool2D>(max, h, w); });
    shape_ = {shape_[2]};
    chw_ = false;
  }

  void reshape_layer(const Layer& l) {
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

  void embedding(const Layer& l) {
    if (!steps.empty() || shape_.size() != 1)
      fail(l, "is not the first layer over a sequence of token ids; loupe's Embedding comes first");
    need_value(l, "mask_zero", false, "loupe does not mask padding");
    init(l, "embeddings_initializer", "randomuniform");
    const int64_t e = count(l, cfg(l), "output_dim");
    const int64_t v = resize && (dataset == "imdb" || dataset == "imdb_bigrams") ? resize : count(l, cfg(l), "input_dim");
    add(l, [v, e] { return std::make_shared<nn::Embedding>(v, e); });
    own(embedding_weights(l.name, v, e));
    parameters(l, __int128(v) * e, 0);
    shape_ = {shape_[0], e};
    embedding_input = true;
    vocab = v;
  }

  // LSTM(units) as Keras's defaults have it (the ones loupe's kernels compute), alone or inside
  // Bidirectional; the others are refused by name.
  // `inner_name`: a Bidirectional's LSTM's own name (its variables' prefix).
  void lstm(const Layer& l, const json& c, bool bidirectional, const std::string& inner_name = "") {
    if (shape_.size() != 2) fail(l, "takes a sequence [time, features] per sample");
    const json want = {{"activation", "tanh"},     {"use_bias", true},       {"unit_forget_bias", true},
                       {"dropout", 0.0},           {"recurrent_dropout", 0.0}, {"go_backwards", false},
                       {"stateful", false},        {"return_state", false},  {"time_major", false}};
    for (auto it = want.begin(); it != want.end(); ++it)
      if (c.contains(it.key()) && !c.at(it.key()).is_null() && c.at(it.key()) != it.value())
        fail(l, "has " + it.key() + " " + shown(c.at(it.key())) + "; loupe's LSTM has " + it.value().dump());
    const Layer inner{"LSTM", l.name, &c};
    init(inner, "kernel_initializer", "glorotuniform");
    init(inner, "recurrent_initializer", "orthogonal");
    init(inner, "bias_initializer", "zeros");
    // Keras's orthogonal initialisation of the recurrent weights costs the cube of the units
    // (6 s at 1,024 on two cores, about a minute at 2,048, hours at the 15,000 that the parameter
    // cap would let through), so a file cannot hold the run there.
    LstmParams p{shape_[1], count(l, c, "units", kMaxLstmUnits), 1, bidirectional};
    p.hard_slope = recurrent_slope(l, c);
    p.single_bias = dialect_.one_bias;
    const bool seq = Config{c, file_ + ": " + layer_label(l)}.flag("return_sequences", false);
    add(l, [p, seq] { return std::make_shared<KerasLstm>(p, seq); });
    own(lstm_weights(l.name, inner_name, p.input_size, p.hidden_size, bidirectional));
    const int64_t dirs = bidirectional ? 2 : 1, in = p.input_size, units = p.hidden_size;
    parameters(l, dirs * 4 * (__int128(units) * (in + units) + units), p.single_bias ? 0 : dirs * 4 * __int128(units));
    if (!p.single_bias) note("Keras's LSTM has one bias per gate where cuDNN's layout has two");
    shape_ = seq ? std::vector<int64_t>{shape_[0], dirs * units} : std::vector<int64_t>{dirs * units};
  }

  // The slope of the gates' hard_sigmoid (LstmParams::hard_slope), or 0 for the sigmoid.
  float recurrent_slope(const Layer& l, const json& c) const {
    const std::string a = Config{c, file_ + ": " + layer_label(l)}.text("recurrent_activation", dialect_.recurrent_default);
    if (a == "sigmoid") return 0;
    if (a == "hard_sigmoid") return dialect_.hard_slope;
    fail(l, "has recurrent_activation '" + cut(a) + "'; loupe's LSTM has sigmoid and hard_sigmoid");
  }

  void bidirectional(const Layer& l) {
    const json& c = cfg(l);
    if (c.contains("merge_mode") && c.at("merge_mode") != "concat")  // null too: Keras's None keeps the two apart
      fail(l, "has merge_mode " + shown(c.at("merge_mode")) + "; loupe concatenates the two directions");
    if (c.contains("backward_layer") && !c.at("backward_layer").is_null())
      fail(l, "has a backward_layer of its own; loupe's runs the forward layer's twin");
    const json& inner = c.at("layer");
    const std::string wrapped = Config{inner, file_ + ": " + layer_label(l) + "'s layer"}.text("class_name", "layer");
    if (wrapped != "LSTM") fail(l, "wraps a " + cut(wrapped) + "; loupe's Bidirectional wraps an LSTM");
    // The step takes the wrapper's name (Keras's summary names the layer by it; Keras 3 calls the
    // inner one "forward_" + it).
    const Layer lstm_layer{"LSTM", l.name, &inner.at("config")};
    common(lstm_layer);
    lstm(lstm_layer, inner.at("config"), true, Config{inner.at("config"), file_ + ": " + layer_label(l)}.text("name", "lstm"));
  }

  void global_average(const Layer& l) {
    if (shape_.size() != 2) fail(l, "takes a sequence [time, features] per sample");
    need_value(l, "data_format", "channels_last", "loupe averages over time, Keras's default");
    need_value(l, "keepdims", false, "loupe's drops the time axis");
    add(l, [] { return std::make_shared<MeanOverTime>(); });
    shape_ = {shape_[1]};
  }

  std::string file_;
  Dialect dialect_;
  bool last_ = false;
  std::vector<int64_t> flat_chw_;  // the [C, H, W] image a Flatten made the vector of, until a Dense
  std::unordered_set<std::string> names_;  // the steps' names
};

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

// nlohmann's own message without its "[json.exception.type_error.302] " tag.
std::string untagged(const char* what) {
  const std::string w = what;
  const size_t end = w.rfind("] ", w.find(' '));
  return w.rfind("[json.exception.", 0) == 0 && end != std::string::npos ? w.substr(end + 2) : w;
}
}  // namespace

std::string dataset_for(const std::vector<int64_t>& input, const Parsed& p, int64_t outputs) {
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

Parsed parse_layers(const std::vector<Layer>& layers, std::vector<int64_t> input, const std::string& dataset,
                    const std::string& file, const Dialect& dialect, int64_t resize) {
  if (resize && dataset == "chars") input[1] = resize;  // windows of one-hot characters: [40, C]
  Parser p(file, input, dialect);
  p.resize = resize;
  p.dataset = dataset;
  adapt_input(input, dataset, p);
  for (size_t i = 0; i < layers.size(); ++i) {
    try {
      p.layer(layers[i], i + 1 == layers.size());
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
