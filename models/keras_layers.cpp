// The Keras model-file reader's layers (models/keras_layers.h): each layer a file may hold, read
// into the steps of a loupe model (nn::Sequential, or nn::Graph for a functional model) with
// Keras's output shapes and parameter counts, and every option loupe cannot honour refused by name
// (docs/keras.md, "What is refused").
#include "models/keras_layers.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <unordered_set>

#include "core/error.h"
#include "core/file_check.h"
#include "models/keras_graph.h"
#include "models/keras_modules.h"
#include "nn/graph.h"
#include "nn/layers.h"
#include "nn/recurrent.h"

namespace loupe::models::keras {

namespace {
class Parser : public Parsed {
 public:
  Parser(std::string file, std::vector<int64_t> input, Dialect d) : file_(std::move(file)), dialect_(std::move(d)) {
    shape_ = std::move(input);
  }

  void layer(const Layer& l, bool last) {
    const int reads = current_;
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
    if (masked && l.cls != "Dropout" && l.cls != "Activation" && l.cls != "LSTM" && l.cls != "GRU" &&
        l.cls != "SimpleRNN")
      fail(l, "receives a sequence's mask (an Embedding's mask_zero), which loupe carries through Dropout and "
              "Activation to LSTM, GRU and SimpleRNN layers only");
    dispatch(l);
    timed_ = timed_ && shape_.size() == 2;  // a layer that returns one vector ends the time axis
    if (l.cls == "InputLayer" || l.cls == "Embedding") timed_ = true;
    __int128 n = 1;
    for (int64_t d : shape_) n *= d;
    if (n > kMaxValues) fail(l, "gives more than " + std::to_string(kMaxValues) + " values a sample");
    costs.push_back({l.name, loupe_parameters - before, int64_t(n)});
    // What a checkpoint is tied to (models/keras_json.h): the layer as built, not the file's text.
    architecture += l.cls + " " + l.name;
    if (functional) {  // which steps it reads: a checkpoint is tied to the graph's edges too
      std::string from;
      for (const Value& v : merging) from += " " + std::to_string(v.step);
      architecture += " <-" + (merging.empty() ? " " + std::to_string(reads) : from);
    }
    architecture += " ->";
    for (size_t i = first_step; i < steps.size(); ++i) architecture += " " + steps[i].name;
    architecture += " " + shape_text(shape_) + " " + std::to_string(loupe_parameters - before) + "\n";
  }

  // A step of the data set's adaptation (adapt_input), before any layer's.
  void push(const std::string& name, std::function<std::shared_ptr<nn::Module>()> make) {
    names_.insert(name);
    steps.push_back({name, std::move(make), nullptr, {current_}});
    current_ = int(steps.size()) - 1;
  }

  // The tensor a layer's output is, as the layers after it read it: its Keras shape, its layout,
  // and the step that gives it (-1: the model's input).
  // `mask`: the step that gives its mask (Keras's: an Embedding's mask_zero), or kNoMask.
  static constexpr int kNoMask = -2;
  struct Value {
    std::vector<int64_t> shape;
    bool chw;
    std::vector<int64_t> flat_chw;
    int step;
    int mask;
    bool timed;
  };
  Value value() const { return {shape_, chw_, flat_chw_, current_, mask_, timed_}; }
  void set(const Value& v) {
    shape_ = v.shape;
    chw_ = v.chw;
    flat_chw_ = v.flat_chw;
    current_ = v.step;
    mask_ = v.mask;
    timed_ = v.timed;
  }
  // A merge layer's inputs, set before its layer() (a functional model's).
  std::vector<Value> merging;
  bool functional = false;

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
    if (c == "ZeroPadding2D") return zero_padding(l);
    if (c == "GRU" || c == "SimpleRNN") return recurrent(l);
    if (c == "TimeDistributed") return time_distributed(l);
    if (merge_op(c)) return merge(l, *merge_op(c));
    fail(l, "is not a layer loupe has; it has InputLayer, Dense, Conv1D, Conv2D, MaxPooling1D, MaxPooling2D, "
            "AveragePooling1D, AveragePooling2D, ZeroPadding2D, BatchNormalization, Dropout, Flatten, Reshape, Activation, Embedding, "
            "LSTM, GRU, SimpleRNN, Bidirectional(LSTM), TimeDistributed, GlobalAveragePooling1D, GlobalMaxPooling1D, GlobalAveragePooling2D, "
            "GlobalMaxPooling2D, and in a functional model Add, Subtract, Multiply, Average, Maximum, Minimum and "
            "Concatenate");
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
    steps.push_back({n, std::move(make), nullptr, {current_}});
    current_ = int(steps.size()) - 1;
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

  // The initializer under `key` must be Keras's default for it (loupe initialises as Keras's defaults).
  void init(const Layer& l, const char* key, const std::string& want) {
    const json& c = cfg(l);
    if (!c.contains(key) || c.at(key).is_null()) return;
    if (class_key(c.at(key)) != want)
      fail(l, "has " + std::string(key) + " '" + cut(class_key(c.at(key))) + "'; loupe initialises as Keras's default (" + want + ")");
  }

  // The layer's Keras options for its weights (keras_initializer, keras_l2 in keras_config.cpp).
  nn::VarianceScaling kernel_init(const Layer& l, int64_t fan_in) {
    const json& c = cfg(l);
    if (!c.contains("kernel_initializer") || c.at("kernel_initializer").is_null()) return {};
    return keras_initializer(c.at("kernel_initializer"), file_ + ": " + layer_label(l), "kernel_initializer", fan_in);
  }
  double l2_of(const Layer& l, const char* key) {
    const json& c = cfg(l);
    return c.contains(key) && !c.at(key).is_null() ? keras_l2(c.at(key), file_ + ": " + layer_label(l), key) : 0;
  }
  // The maker of a Dense or a convolution with Keras's options for its weights: the kernel's
  // initializer (drawn here unless it is the modules' own glorot_uniform), zero biases, and the
  // kernel's and bias's l2 regularizers (nn::Module::regularize).
  std::function<std::shared_ptr<nn::Module>()> weighted(const Layer& l, std::function<std::shared_ptr<nn::Module>()> make,
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

  void need_value(const Layer& l, const char* key, const json& want, const std::string& why) {
    const json& c = cfg(l);
    if (c.contains(key) && !c.at(key).is_null() && c.at(key) != want)
      fail(l, "has " + std::string(key) + " " + shown(c.at(key)) + "; " + why);
  }
  // Each key of `want` in `c` (a recurrent layer's config) at its value, or unset.
  void need_values(const Layer& l, const json& c, const json& want) {
    for (auto it = want.begin(); it != want.end(); ++it)
      if (c.contains(it.key()) && !c.at(it.key()).is_null() && c.at(it.key()) != it.value())
        fail(l, "has " + it.key() + " " + shown(c.at(it.key())) + "; loupe's " + l.cls + " has " + it.value().dump());
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
    add(l, weighted(l, [in, units, bias] { return std::make_shared<nn::Linear>(in, units, bias); }, in, units));
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

  // A Conv1D's padding on each side (valid, or same at stride 1 with an odd kernel) and groups.
  int conv_padding(const Layer& l, int k, int stride) {
    need_value(l, "groups", 1, "loupe's convolutions are not grouped");
    const std::string pad = conf(l).text("padding", "valid");
    if (pad != "valid" && !(pad == "same" && stride == 1 && k % 2 == 1))
      fail(l, "has padding '" + cut(pad) + "'; loupe has valid, and same at stride 1 with an odd kernel");
    return pad == "same" ? nn::same(k) : 0;
  }
  // Keras's 2-D padding (TensorFlow's): valid, none; same, an output of ceil(size / stride) pixels
  // with the padding's odd pixel after. Returns the pixels on each side of an even padding (the
  // layer's own) and sets `uneven` to each side's (top, bottom, left, right) where they differ.
  int padding_2d(const Layer& l, int k, int stride, const std::string& what, std::vector<int64_t>* uneven) {
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
  // A Conv2D's padding: an uneven one as a ZeroPadding2D step before the convolution.
  int conv2d_padding(const Layer& l, int k, int stride) {
    need_value(l, "groups", 1, "loupe's convolutions are not grouped");
    std::vector<int64_t> uneven;
    const int p = padding_2d(l, k, stride, "", &uneven);
    if (!uneven.empty()) zero_pad(l, uneven, "_pad");
    return p;
  }
  void zero_pad(const Layer& l, const std::vector<int64_t>& sides, const std::string& suffix) {
    add(l, [sides] { return std::make_shared<ZeroPad2D>(sides); }, suffix);
    shape_ = {shape_[0] + sides[0] + sides[1], shape_[1] + sides[2] + sides[3], shape_[2]};
  }
  // ZeroPadding2D's padding: 1 (every side), [rows, columns], or [[top, bottom], [left, right]].
  void zero_padding(const Layer& l) {
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
  // The output's rows and columns of a window of k pixels at `stride` over the image padded by p
  // on each side (a convolution's or a pooling's), refused where it leaves none.
  std::pair<int64_t, int64_t> window_out(const Layer& l, int k, int stride, int p) {
    if (std::min(shape_[0], shape_[1]) + 2 * p < k)
      fail(l, "leaves no pixels of its " + std::to_string(shape_[0]) + "x" + std::to_string(shape_[1]) + " input");
    return {(shape_[0] + 2 * p - k) / stride + 1, (shape_[1] + 2 * p - k) / stride + 1};
  }
  void valid_pooling(const Layer& l) { need_value(l, "padding", "valid", "loupe's pooling has valid padding"); }

  void conv(const Layer& l) {
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

  void pool(const Layer& l) {
    image(l);
    const int k = square(l, "pool_size", 2), stride = square(l, "strides", k);
    // Padding is never part of a pooling window (ops/pool.h), as in Keras: an even one only.
    const int p = padding_2d(l, k, stride, "loupe's pooling pads evenly", nullptr);
    if (l.cls == "MaxPooling2D") add(l, [k, stride, p] { return std::make_shared<nn::MaxPool2d>(k, stride, p); });
    else add(l, [k, stride, p] { return std::make_shared<nn::AvgPool2d>(k, stride, p); });
    const auto [h, w] = window_out(l, k, stride, p);
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
    if (shape_[0] + 2 * p < k) fail(l, "leaves no steps of its " + std::to_string(shape_[0]) + "-step input");
    add(l, weighted(l, [in, f, k, stride, p, bias] { return std::make_shared<Conv1D>(in, f, k, stride, p, bias); },
                    int64_t(k) * in, int64_t(k) * f));
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
    init(l, "embeddings_initializer", "randomuniform");
    if (conf(l).flag("mask_zero", false)) {  // a step of its own beside the Embedding, reading the ids
      const int ids = current_;
      add(l, [] { return std::make_shared<TokenMask>(); }, "_mask");
      mask_ = current_;
      current_ = ids;
    }
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
    // What nn::LSTM's kernels do not have runs as Keras's LSTM step by step (nn::Recurrent).
    const Config k{c, file_ + ": " + layer_label(l)};
    if (!bidirectional && (k.real("dropout", 0, kFraction) > 0 || k.real("recurrent_dropout", 0, kFraction) > 0 ||
                           k.flag("go_backwards", false) || mask_ != kNoMask))
      return recurrent(l);
    need_values(l, c, {{"activation", "tanh"}, {"use_bias", true}, {"unit_forget_bias", true}, {"dropout", 0.0},
                       {"recurrent_dropout", 0.0}, {"go_backwards", false}, {"stateful", false}, {"return_state", false},
                       {"time_major", false}});
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
    fail(l, "has recurrent_activation '" + cut(a) + "'; loupe's " + l.cls + " has sigmoid and hard_sigmoid");
  }

  // Keras's GRU, SimpleRNN, and an LSTM with what nn::LSTM's kernels lack (nn::Recurrent, Keras's
  // layouts): the options it computes, the others refused by name.
  void recurrent(const Layer& l) {
    const json& c = cfg(l);
    if (shape_.size() != 2) fail(l, "takes a sequence [time, features] per sample");
    need_values(l, c, {{"stateful", false}, {"return_state", false}, {"time_major", false}, {"unit_forget_bias", true}});
    const bool gru = l.cls == "GRU";
    nn::RnnParams p;
    p.cell = gru ? nn::RnnParams::Cell::Gru : l.cls == "LSTM" ? nn::RnnParams::Cell::Lstm : nn::RnnParams::Cell::Simple;
    dropouts(l, p);
    p.input_size = shape_[1];
    p.units = count(l, c, "units", kMaxLstmUnits);  // the orthogonal initialisation's cost, as an LSTM's
    const std::string act = conf(l).text("activation", "tanh");
    if (act != "tanh" && act != "relu") fail(l, "has activation '" + cut(act) + "'; loupe's " + l.cls + " has tanh and relu");
    p.activation = act == "relu" ? Act::Relu : Act::Tanh;
    if (gru || p.cell == nn::RnnParams::Cell::Lstm) p.hard_slope = recurrent_slope(l, c);
    if (gru) p.reset_after = conf(l).flag("reset_after", dialect_.gru_reset_after);
    p.use_bias = conf(l).flag("use_bias", true);
    p.go_backwards = conf(l).flag("go_backwards", false);
    p.return_sequences = conf(l).flag("return_sequences", false);
    init(l, "bias_initializer", "zeros");
    add(l, recurrent_init(l, p));
    if (mask_ != kNoMask) {  // the step reads the mask too; a layer that returns one vector ends it
      steps.back().inputs.push_back(mask_);
      if (!p.return_sequences) mask_ = kNoMask;
    }
    const int64_t g = p.gates(), u = p.units, in = p.input_size;
    const int64_t bias_rows = !p.use_bias ? 0 : gru && p.reset_after ? 2 : 1;
    own(rnn_weights(l.name, l.cls, in, u, int(g), bias_rows));
    parameters(l, g * __int128(u) * (in + u) + bias_rows * g * u, 0);
    shape_ = p.return_sequences ? std::vector<int64_t>{shape_[0], u} : std::vector<int64_t>{u};
  }

  // Keras's dropout and recurrent_dropout, and how many masks it draws: one per gate in its
  // implementation 1 (Keras 2's default; every Keras's with recurrent dropout), else one.
  void dropouts(const Layer& l, nn::RnnParams& p) {
    const Config k = conf(l);
    p.dropout = k.real("dropout", 0, kFraction);
    p.recurrent_dropout = k.real("recurrent_dropout", 0, kFraction);
    const double implementation = k.real("implementation", dialect_.rnn_implementation, Range{0, true, 2, true});
    p.mask_per_gate = implementation < 2 || p.recurrent_dropout > 0;
  }

  // A GRU's or SimpleRNN's maker with its kernel_initializer (as a Dense's) and its
  // recurrent_initializer: Keras's default orthogonal or, for a SimpleRNN (mnist_irnn's), Identity.
  std::function<std::shared_ptr<nn::Module>()> recurrent_init(const Layer& l, const nn::RnnParams& p) {
    const nn::VarianceScaling v = kernel_init(l, p.input_size);
    const bool drawn = !v.glorot_uniform();
    const json& c = cfg(l);
    double gain = 0;  // 0: orthogonal
    if (c.contains("recurrent_initializer") && !c.at("recurrent_initializer").is_null() &&
        class_key(c.at("recurrent_initializer")) != "orthogonal") {
      const json& r = c.at("recurrent_initializer");
      if (class_key(r) != "identity" || p.cell != nn::RnnParams::Cell::Simple)
        fail(l, "has recurrent_initializer '" + cut(class_key(r)) + "'; loupe's is orthogonal, or identity in a SimpleRNN");
      gain = Config{config_of(r), file_ + ": " + layer_label(l) + "'s recurrent_initializer (identity)"}.real("gain", 1.0, kAboveZero);
    }
    return [p, v, drawn, gain] { return keras_recurrent(p, drawn ? &v : nullptr, gain); };
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

  // TimeDistributed(layer): the wrapped layer over each step of [time, ...] as over N T samples
  // (batch and time folded into one before it, unfolded after). Its weights are the wrapper's, as
  // Keras names them (Keras 3 keeps them in the wrapper's "layer").
  void time_distributed(const Layer& l) {
    const json& c = cfg(l);
    if (shape_.size() < 2 || chw_) fail(l, "wraps a layer over the steps of a sequence [time, ...] per sample");
    const json& inner = c.at("layer");
    const std::string cls = Config{inner, file_ + ": " + layer_label(l) + "'s layer"}.text("class_name", "");
    if (!inner.contains("config") || !inner.at("config").is_object()) fail(l, "wraps a layer without a config");
    if (cls == "TimeDistributed" || cls == "InputLayer" || cls == "Embedding" || merge_op(cls))
      fail(l, "wraps a " + cut(cls) + "; loupe's TimeDistributed wraps a layer of one input");
    const int64_t t = shape_[0];
    add(l, [] { return std::make_shared<FoldTime>(); }, "_fold");
    shape_.erase(shape_.begin());
    const Layer wrapped{cls, l.name, &inner.at("config")};  // the wrapper's name: Keras names its weights so
    common(wrapped);
    const size_t first = steps.size();
    dispatch(wrapped);
    if (chw_ || !flat_chw_.empty())
      fail(l, "wraps an image layer (" + cut(cls) + "); loupe's TimeDistributed wraps layers of vectors and sequences");
    for (size_t i = first; i < steps.size(); ++i)
      if (steps[i].weights) {
        KerasWeights w = *steps[i].weights;
        w.cls = "TimeDistributed";
        for (std::string& p : w.paths) p = "layer/" + p;
        steps[i].weights = std::make_shared<const KerasWeights>(std::move(w));
      }
    add(l, [t] { return std::make_shared<UnfoldTime>(t); }, "_unfold");
    shape_.insert(shape_.begin(), t);
  }

  // Keras's merge layers over `merging` (a functional model's): one shape, or Concatenate's shapes
  // equal but along its axis. An image that is channels-first in one input is made so in all.
  void merge(const Layer& l, nn::MergeOp op) {
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
    std::vector<int> reads;
    for (const Value& v : in) reads.push_back(v.step);
    add(l, [op, dim] { return std::make_shared<nn::Merge>(op, dim); });
    steps.back().inputs = reads;
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
  int current_ = -1;  // the step whose output the next layer reads (-1: the model's input)
  int mask_ = kNoMask;  // the step giving that output's mask
  bool timed_ = true;   // that output still has the input's time axis
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
  std::vector<Parser::Value> out;  // each layer's, in a functional model
  for (size_t i = 0; i < layers.size(); ++i) {
    try {
      const Layer& l = layers[i];
      p.merging.clear();
      if (l.inbound.size() == 1) p.set(out.at(size_t(l.inbound[0])));
      if (l.inbound.size() > 1)
        for (int k : l.inbound) p.merging.push_back(out.at(size_t(k)));
      if (l.inbound.size() > 1 && !merge_op(l.cls))
        refuse_file(file, layer_label(l) + " is called on " + std::to_string(l.inbound.size()) +
                              " tensors; loupe's layers but the merges (Add, Concatenate, ...) take one");
      p.layer(l, i + 1 == layers.size());
      out.push_back(p.value());
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
