// The Keras model-file reader's layers of sequences (models/keras_parser.h): Embedding, Conv1D,
// the 1-D poolings, the recurrent layers (LSTM, GRU, SimpleRNN, Bidirectional) and TimeDistributed,
// with Keras's shapes and counts and every option loupe cannot honour refused by name (docs/keras.md).
#include <cstdint>
#include <limits>

#include "models/keras_graph.h"
#include "models/keras_modules.h"
#include "models/keras_parser.h"
#include "nn/layers.h"
#include "nn/recurrent.h"

namespace loupe::models::keras {

int Parser::single(const Layer& l, const char* key, int fallback) {
  const json& c = cfg(l);
  if (!c.contains(key) || c.at(key).is_null()) return fallback;
  const json& v = c.at(key);
  const json& one = v.is_array() && v.size() == 1 ? v[0] : v;
  if (!one.is_number_integer() || one.get<int64_t>() <= 0 || one.get<int64_t>() > 4096)
    fail(l, "has " + std::string(key) + " " + shown(v) + "; loupe takes 1 to 4096");
  return one.get<int>();
}

void Parser::sequence(const Layer& l) {
  if (shape_.size() != 2) fail(l, "takes a sequence [time, features] per sample");
  need_value(l, "data_format", "channels_last", "loupe reads Keras's default, channels_last");
}

void Parser::conv1d(const Layer& l) {
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

void Parser::pool1d(const Layer& l) {
  sequence(l);
  const bool global = l.cls == "GlobalMaxPooling1D", max = l.cls != "AveragePooling1D";
  if (global) need_value(l, "keepdims", false, "loupe's gives a vector of the features");
  else valid_pooling(l);
  const int k = global ? int(shape_[0]) : single(l, "pool_size", 2), stride = global ? k : single(l, "strides", k);
  if (shape_[0] < k) fail(l, "leaves no steps of its " + std::to_string(shape_[0]) + "-step input");
  add(l, [max, k, stride, global] { return std::make_shared<Pool1D>(max, k, stride, global); });
  shape_ = global ? std::vector<int64_t>{shape_[1]} : std::vector<int64_t>{(shape_[0] - k) / stride + 1, shape_[1]};
}

void Parser::embedding(const Layer& l) {
  if (!steps.empty() || shape_.size() != 1)
    fail(l, "is not the first layer over a sequence of token ids; loupe's Embedding comes first");
  init(l, "embeddings_initializer", "randomuniform");
  if (conf(l).flag("mask_zero", false)) {  // a step of its own beside the Embedding, reading the ids
    const int ids = current_, ids_output = current_output_;
    add(l, [] { return std::make_shared<TokenMask>(); }, "_mask");
    mask_ = current_;
    current_ = ids;
    current_output_ = ids_output;
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

void Parser::lstm(const Layer& l, const json& c, bool bidirectional, const std::string& inner_name) {
  if (shape_.size() != 2) fail(l, "takes a sequence [time, features] per sample");
  // What nn::LSTM's kernels do not have runs as Keras's LSTM step by step (nn::Recurrent), inside
  // a Bidirectional too.
  const Config k{c, file_ + ": " + layer_label(l)};
  if (k.real("dropout", 0, kFraction) > 0 || k.real("recurrent_dropout", 0, kFraction) > 0 || k.flag("go_backwards", false) ||
      mask_ != kNoMask || k.flag("return_state", false) || !initial_states.empty())
    return recurrent(l, inner_name);
  // Dropout, recurrent dropout, go_backwards and the states never reach here: they run step by step.
  need_values(l, c, {{"activation", "tanh"}, {"use_bias", true}, {"unit_forget_bias", true}, {"stateful", false},
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

float Parser::recurrent_slope(const Layer& l, const json& c) const {
  const std::string a = Config{c, file_ + ": " + layer_label(l)}.text("recurrent_activation", dialect_.recurrent_default);
  if (a == "sigmoid") return 0;
  if (a == "hard_sigmoid") return dialect_.hard_slope;
  fail(l, "has recurrent_activation '" + cut(a) + "'; loupe's " + l.cls + " has sigmoid and hard_sigmoid");
}

void Parser::recurrent(const Layer& l, const std::string& inner_name) {
  const json& c = cfg(l);
  if (shape_.size() != 2) fail(l, "takes a sequence [time, features] per sample");
  need_values(l, c, {{"stateful", false}, {"time_major", false}, {"unit_forget_bias", true}});
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
  const bool bi = !inner_name.empty();
  states(l, p, bi);
  if (bi && p.go_backwards) fail(l, "reads its sequence backwards inside a Bidirectional; loupe's runs it forwards and its twin backwards");
  if (bi) {
    nn::RnnParams back = p;
    back.go_backwards = back.time_order = true;
    const auto make_forward = recurrent_init(l, p), make_backward = recurrent_init(l, back);
    add(l, [make_forward, make_backward] { return std::make_shared<BiRecurrent>(make_forward(), make_backward()); });
  } else {
    add(l, recurrent_init(l, p));
  }
  read_states(p);
  if (mask_ != kNoMask) {  // the step reads the mask too; a layer that returns one vector ends it
    steps.back().inputs.push_back(mask_);
    if (!p.return_sequences) mask_ = kNoMask;
  }
  const int64_t g = p.gates(), u = p.units, in = p.input_size, dirs = bi ? 2 : 1;
  const int64_t bias_rows = !p.use_bias ? 0 : gru && p.reset_after ? 2 : 1;
  own(bi ? bi_rnn_weights(l.name, inner_name, l.cls, in, u, int(g), bias_rows) : rnn_weights(l.name, l.cls, in, u, int(g), bias_rows));
  parameters(l, dirs * (g * __int128(u) * (in + u) + bias_rows * g * u), 0);
  shape_ = p.return_sequences ? std::vector<int64_t>{shape_[0], dirs * u} : std::vector<int64_t>{dirs * u};
}

void Parser::states(const Layer& l, nn::RnnParams& p, bool bidirectional) {
  p.return_state = conf(l).flag("return_state", false);
  p.initial_state = !initial_states.empty();
  if (bidirectional && (p.return_state || p.initial_state))
    fail(l, std::string(p.return_state ? "returns its states" : "starts from given states") +
                " inside a Bidirectional; loupe's Bidirectional reads a sequence and returns its output alone");
  if (p.return_state && !functional)
    fail(l, "returns its states (return_state), several tensors; a Sequential model's layers have one output each, as "
            "in Keras");
  const std::string cell = p.states() == 2 ? "two (h and c)" : "one (h)";
  if (p.initial_state && int(initial_states.size()) != p.states())
    fail(l, "is called with " + std::to_string(initial_states.size()) + " initial state" +
                (initial_states.size() == 1 ? "" : "s") + "; its cell has " + cell);
  for (const Value& v : initial_states)
    if (v.shape != std::vector<int64_t>{p.units})
      fail(l, "is called with an initial state of " + shape_text(v.shape) + " a sample; its states are [" +
                  std::to_string(p.units) + "]");
}

void Parser::read_states(const nn::RnnParams& p) {
  Step& s = steps.back();
  s.outputs.resize(s.inputs.size(), 0);
  for (const Value& v : initial_states) s.inputs.push_back(v.step), s.outputs.push_back(v.output);
  returned_states.clear();
  if (p.return_state)
    for (int k = 1; k <= p.states(); ++k) returned_states.push_back({{p.units}, false, {}, current_, kNoMask, false, k});
}

void Parser::dropouts(const Layer& l, nn::RnnParams& p) {
  const Config k = conf(l);
  p.dropout = k.real("dropout", 0, kFraction);
  p.recurrent_dropout = k.real("recurrent_dropout", 0, kFraction);
  const double implementation = k.real("implementation", dialect_.rnn_implementation, Range{0, true, 2, true});
  p.mask_per_gate = implementation < 2 || p.recurrent_dropout > 0;
}

std::function<std::shared_ptr<nn::Module>()> Parser::recurrent_init(const Layer& l, const nn::RnnParams& p) {
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

void Parser::bidirectional(const Layer& l) {
  const json& c = cfg(l);
  if (c.contains("merge_mode") && c.at("merge_mode") != "concat")  // null too: Keras's None keeps the two apart
    fail(l, "has merge_mode " + shown(c.at("merge_mode")) + "; loupe concatenates the two directions");
  if (c.contains("backward_layer") && !c.at("backward_layer").is_null())
    fail(l, "has a backward_layer of its own; loupe's runs the forward layer's twin");
  const json& inner = c.at("layer");
  const std::string wrapped = Config{inner, file_ + ": " + layer_label(l) + "'s layer"}.text("class_name", "layer");
  if (!is_recurrent(wrapped))
    fail(l, "wraps a " + cut(wrapped) + "; loupe's Bidirectional wraps an LSTM, a GRU or a SimpleRNN");
  // The step takes the wrapper's name (Keras's summary names the layer by it; Keras 3 calls the
  // inner one "forward_" + it).
  const json& ic = inner.at("config");
  const Layer wrapped_layer{wrapped, l.name, &ic};
  common(wrapped_layer);
  const std::string inner_name = Config{ic, file_ + ": " + layer_label(l)}.text("name", "lstm");
  // An LSTM runs both directions at once on loupe's kernels where they can (lstm() decides).
  if (wrapped == "LSTM") return lstm(wrapped_layer, ic, true, inner_name);
  recurrent(wrapped_layer, inner_name);
}

void Parser::time_distributed(const Layer& l) {
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
  if (chw_) {  // an image layer's output, channels-last again for what reads the steps after it
    add(l, [] { return std::make_shared<ChannelsLast>(); }, "_channels_last");
    chw_ = false;
  }
  if (!flat_chw_.empty()) fail(l, "wraps a layer that flattens a channels-first image");
  if (!returned_states.empty())
    fail(l, "wraps a layer that returns its states (return_state); loupe's TimeDistributed returns its output alone");
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

void Parser::global_average(const Layer& l) {
  if (shape_.size() != 2) fail(l, "takes a sequence [time, features] per sample");
  need_value(l, "data_format", "channels_last", "loupe averages over time, Keras's default");
  need_value(l, "keepdims", false, "loupe's drops the time axis");
  add(l, [] { return std::make_shared<MeanOverTime>(); });
  if (mask_ != kNoMask) {  // the mean over the steps the mask keeps; the mask ends here
    steps.back().inputs.push_back(mask_);
    mask_ = kNoMask;
  }
  shape_ = {shape_[1]};
}

void Parser::masking(const Layer& l) {
  if (shape_.size() != 2) fail(l, "takes a sequence [time, features] per sample");
  const double value = conf(l).real("mask_value", 0.0, Range{-std::numeric_limits<double>::infinity(), false});
  const int x = current_, x_output = current_output_;
  add(l, [value] { return std::make_shared<MaskOfValues>(value); }, "_mask");
  const int mask = current_;
  current_ = x;
  current_output_ = x_output;
  add(l, [] { return std::make_shared<ApplyMask>(); });
  steps.back().inputs.push_back(mask);
  mask_ = mask;
}

void Parser::repeat_vector(const Layer& l) {
  if (shape_.size() != 1) fail(l, "takes a vector per sample");
  const int64_t n = count(l, cfg(l), "n");
  add(l, [n] { return std::make_shared<RepeatSteps>(n); });
  shape_ = {n, shape_[0]};
}

void Parser::permute(const Layer& l) {
  const json& dims = cfg(l).at("dims");
  const size_t rank = shape_.size();
  std::vector<int> order;
  std::vector<bool> seen(rank + 1, false);
  bool ok = dims.is_array() && dims.size() == rank && (rank == 2 || rank == 3);
  for (size_t i = 0; ok && i < rank; ++i) {
    const json& d = dims[i];
    ok = d.is_number_integer() && d.get<int64_t>() >= 1 && d.get<int64_t>() <= int64_t(rank) && !seen[size_t(d.get<int64_t>())];
    if (ok) seen[size_t(d.get<int64_t>())] = true, order.push_back(int(d.get<int64_t>()));
  }
  if (!ok)
    fail(l, "has dims " + shown(dims) + " over a sample of " + std::to_string(rank) +
                " dimensions; loupe's Permute takes an order of a sequence's or an image's axes, each of 1 to " +
                std::to_string(rank) + " once");
  if (chw_) {  // Keras's axes are the channels-last image's
    add(l, [] { return std::make_shared<ChannelsLast>(); }, "_channels_last");
    chw_ = false;
  }
  add(l, [order] { return std::make_shared<PermuteAxes>(order); });
  std::vector<int64_t> s;
  for (int d : order) s.push_back(shape_[size_t(d - 1)]);
  shape_ = s;
}

}  // namespace loupe::models::keras
