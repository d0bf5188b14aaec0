#include "models/keras_json.h"
#include "optim/lr_curve.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/npy.h"
#include "core/file_check.h"
#include "models/keras_graph.h"
#include "models/keras_layers.h"
#include "models/registry.h"
#include "nn/graph.h"
#include "nn/layers.h"

namespace loupe::models {
namespace {

using namespace keras;

// ---- reading the file -------------------------------------------------------------------------


// The layers of a Sequential model in either layout, or of a functional model (models/keras_graph.h);
// anything else refused by name.
std::vector<Layer> model_layers(const json& root, const std::string& file) {
  if (!root.is_object() || !root.contains("class_name"))
    refuse_file(file, "not a Keras model file (no class_name at the top: what model.to_json() writes)");
  if (is_functional(root)) return graph_layers(root, file);
  const std::string cls = root.at("class_name").is_string() ? root.at("class_name").get<std::string>() : shown(root.at("class_name"));
  if (cls != "Sequential")
    refuse_file(file, "a " + cut(cls) + " model; loupe reads Sequential and functional models (Model, Functional)");
  const json& cfg = root.at("config");
  const json* list = cfg.is_array() ? &cfg : (cfg.is_object() && cfg.contains("layers") ? &cfg.at("layers") : nullptr);
  if (!list || !list->is_array() || list->empty()) refuse_file(file, "its Sequential model has no layers");
  if (list->size() > kMaxLayers)
    refuse_file(file, std::to_string(list->size()) + " layers; loupe reads at most " + std::to_string(kMaxLayers) +
                     " (a Keras model has tens to hundreds)");
  std::vector<Layer> out;
  for (const json& l : *list) {
    if (!l.is_object() || !l.contains("class_name") || !l.contains("config") || !l.at("config").is_object())
      refuse_file(file, "a layer without class_name and config");
    if (!l.at("class_name").is_string())
      refuse_file(file, "a layer's class_name is " + shown(l.at("class_name")) + "; a Keras layer's is its class's name");
    const json& name = l.at("config").contains("name") ? l.at("config").at("name") : json();
    out.push_back({l.at("class_name").get<std::string>(), name.is_string() ? name.get<std::string>() : "layer", &l.at("config")});
  }
  return out;
}

// A list of dimensions with the batch's (null) first: the per-sample shape. A sequence's time
// length may be null (Keras's None: [null, null] ids, [null, null, F] features), kept as -1 and
// taken from the data (docs/keras.md, "A time length of None").
std::vector<int64_t> sample_shape(const json& dims, const std::string& what) {
  if (!dims.is_array() || dims.size() < 2) throw Error(what + " is not [batch, ...]");
  std::vector<int64_t> s;
  for (size_t i = 1; i < dims.size(); ++i) {
    if (i == 1 && dims[i].is_null() && dims.size() <= 3) {
      s.push_back(kFreeLength);
      continue;
    }
    if (!dims[i].is_number_integer() || dims[i].get<int64_t>() <= 0 || dims[i].get<int64_t>() > kMaxDim)
      throw Error(what + " has a dimension that is not a positive whole number up to " + std::to_string(kMaxDim) +
                  " (loupe needs fixed shapes)");
    s.push_back(dims[i].get<int64_t>());
  }
  __int128 n = 1;
  for (int64_t d : s) n *= d < 0 ? kParsedLength : d;
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
  refuse_file(file, "the model's input shape is not in the file (an InputLayer, or input_shape on the first layer)");
}

// The batch size the file fixes, or 0: batch_input_shape [64, ...] (a stateful model's, or a
// script's Input(batch_size=64)) is a model that takes batches of exactly that many, so it is the
// recipe's batch (--batch still overrides it).
int64_t fixed_batch(const std::vector<Layer>& layers, const std::string& file) {
  const json& first = *layers.front().cfg;
  for (const char* key : {"batch_shape", "batch_input_shape"}) {
    if (!first.contains(key) || !first.at(key).is_array() || first.at(key).empty()) continue;
    const json& b = first.at(key)[0];
    if (b.is_null()) return 0;
    if (!b.is_number_integer() || b.get<int64_t>() < 1 || b.get<int64_t>() > kMaxDim)
      refuse_file(file, std::string(key) + "'s batch size " + shown(b) + " is not null or a positive whole number up to " +
                            std::to_string(kMaxDim));
    return b.get<int64_t>();
  }
  return 0;
}

// ---- the recipe -------------------------------------------------------------------------------

// ---- a learning-rate schedule (docs/keras.md, "Learning-rate schedules") ----------------------

// Keras's schedules as its get_config writes them (keras/src/optimizers/schedules/
// learning_rate_schedule.py; tf.keras 2's are the same, with name null by default): the keys of
// each class loupe's LrSchedule has, the first `required` of them without a default in Keras.
struct ScheduleClass {
  const char* name;
  train::LrSchedule::Kind kind;
  std::vector<const char*> keys;
  size_t required;
};

const std::vector<ScheduleClass>& schedule_classes() {
  using K = train::LrSchedule::Kind;
  static const std::vector<ScheduleClass> classes = {
      {"ExponentialDecay", K::Exponential, {"initial_learning_rate", "decay_steps", "decay_rate", "staircase", "name"}, 3},
      {"InverseTimeDecay", K::InverseTime, {"initial_learning_rate", "decay_steps", "decay_rate", "staircase", "name"}, 3},
      {"PiecewiseConstantDecay", K::Piecewise, {"boundaries", "values", "name"}, 2},
      {"CosineDecay", K::Cosine, {"initial_learning_rate", "decay_steps", "alpha", "name", "warmup_target", "warmup_steps"}, 2}};
  return classes;
}

// A Keras schedule has a handful of pieces; the update kernels' curve holds at most
// optim::LrCurve::kMaxBoundaries boundaries (and one value more).
constexpr size_t kMaxPieces = optim::LrCurve::kMaxBoundaries + 1;
constexpr double kMaxSteps = 1e12;  // as --lr-schedule's counts (train/lr_schedule.cpp)
constexpr Range kRate{0, false, 1000, true};  // as --lr (cli/options.cpp)

std::string number_text(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

// A list of numbers under `key`, each in `r` (refused by its index and value, never the whole list).
std::vector<double> number_list(const Config& k, const char* key, Range r) {
  const json& v = k.c.at(key);
  if (!v.is_array() || v.empty() || v.size() > kMaxPieces)
    k.fail("has " + std::string(key) + " " + shown(v) + "; loupe takes a list of 1 to " + std::to_string(kMaxPieces) +
           " numbers");
  std::vector<double> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item = std::string(key) + "[" + std::to_string(i) + "]";
    if (!v[i].is_number()) k.fail("has " + item + " " + shown(v[i]) + "; loupe takes a number");
    const json one = {{item, v[i]}};  // a number: a copy of one scalar
    out.push_back(Config{one, k.where}.real(item.c_str(), 0, r));
  }
  return out;
}

// The keys of the schedule's config: each one its class has, the required ones present.
void check_schedule_keys(const Config& k, const ScheduleClass& sc) {
  for (auto it = k.c.begin(); it != k.c.end(); ++it)
    if (std::none_of(sc.keys.begin(), sc.keys.end(), [&](const char* key) { return it.key() == key; }))
      k.fail("has a key '" + cut(it.key()) + "' that Keras's " + sc.name + " does not have");
  for (size_t i = 0; i < sc.required; ++i)
    if (!k.has(sc.keys[i])) k.fail("has no " + std::string(sc.keys[i]) + "; Keras's " + sc.name + " needs one");
  k.text("name", "");  // a name or null: a wrong type is refused
}

void piecewise_from(const Config& k, train::LrSchedule& s) {
  s.boundaries = number_list(k, "boundaries", Range{0, true, kMaxSteps, true});
  s.values = number_list(k, "values", kRate);
  if (s.values.size() != s.boundaries.size() + 1)
    k.fail("has " + std::to_string(s.values.size()) + " values for " + std::to_string(s.boundaries.size()) +
           (s.boundaries.size() == 1 ? " boundary" : " boundaries") +
           "; Keras's PiecewiseConstantDecay takes one value more than boundaries");
  for (size_t i = 1; i < s.boundaries.size(); ++i)
    if (s.boundaries[i] <= s.boundaries[i - 1])
      k.fail("has boundaries[" + std::to_string(i) + "] " + number_text(s.boundaries[i]) + " after " +
             number_text(s.boundaries[i - 1]) + "; Keras's boundaries increase");
  s.initial = s.values.front();  // the rate of the first update (no initial_learning_rate in Keras's)
}

// The serialized schedule `v` (Keras 3's {"module", "class_name", "config", "registered_name"};
// tf.keras 2's {"class_name", "config"}) as an LrSchedule, every key checked; `where` names the file,
// the optimizer and its key ("m.json: the optimizer (adam)'s learning_rate").
train::LrSchedule schedule_from(const json& v, const std::string& where) {
  const Config outer{v, where};
  for (auto it = v.begin(); it != v.end(); ++it)
    if (it.key() != "module" && it.key() != "class_name" && it.key() != "config" && it.key() != "registered_name")
      outer.fail("has a key '" + cut(it.key()) + "' that a serialized Keras schedule does not have");
  const std::string cls = outer.text("class_name", "");
  const std::string module = outer.text("module", "keras.optimizers.schedules");
  if (v.contains("module") && v.at("module").is_null()) outer.fail("has module null; Keras's schedules name theirs");
  const std::string registered = outer.text("registered_name", "");
  if (!registered.empty())  // Keras writes null for its own classes (serialization_lib.py)
    outer.fail("is a schedule of the model's own (registered_name '" + cut(registered) +
               "'); loupe reads Keras's, from keras.optimizers.schedules");
  if (module != "keras.optimizers.schedules")
    outer.fail("has module '" + cut(module) + "'; loupe reads Keras's schedules, from keras.optimizers.schedules");
  const auto& classes = schedule_classes();
  const auto sc = std::find_if(classes.begin(), classes.end(), [&](const ScheduleClass& c) { return cls == c.name; });
  if (sc == classes.end())
    outer.fail("is " + (cls.empty() ? "a schedule without class_name" : "'" + cut(cls) + "'") +
               (cls == "PolynomialDecay" || cls == "CosineDecayRestarts" ? ", which loupe's schedules do not have yet" : "") +
               "; loupe reads ExponentialDecay, InverseTimeDecay, PiecewiseConstantDecay and CosineDecay");
  if (!v.contains("config") || !v.at("config").is_object()) outer.fail("has no config object");
  const Config k{v.at("config"), where + " " + sc->name};
  check_schedule_keys(k, *sc);
  train::LrSchedule s;
  s.kind = sc->kind;
  if (s.kind == train::LrSchedule::Kind::Piecewise) {
    piecewise_from(k, s);
    return s;
  }
  s.decay_steps = k.real("decay_steps", 0, Range{0, false, kMaxSteps, true});  // Keras refuses <= 0 too
  if (s.kind == train::LrSchedule::Kind::Cosine) {
    s.alpha = k.real("alpha", 0, Range{0, true, 1, true});
    s.warmup_target = k.has("warmup_target") ? k.real("warmup_target", 0, kRate) : s.warmup_target;
    s.warmup_steps = k.real("warmup_steps", 0, Range{0, true, kMaxSteps, true});
    if (std::isnan(s.warmup_target)) s.warmup_steps = 0;  // Keras has no warm-up without a target
  } else {
    s.decay_rate = k.real("decay_rate", 1, s.kind == train::LrSchedule::Kind::Exponential ? Range{0, false, 1, true}
                                                                                           : Range{0, true, 1e12, true});
    s.staircase = k.flag("staircase", false);
  }
  // A warm-up may start from 0 (Keras's own example); any other schedule needs a rate above it.
  const bool warm = !std::isnan(s.warmup_target);
  s.initial = k.real("initial_learning_rate", 0, warm ? Range{0, true, 1000, true} : kRate);
  return s;
}

// The schedule as the run header names it: its class and numbers (a long list cut to its ends).
std::string schedule_text(const train::LrSchedule& s) {
  using K = train::LrSchedule::Kind;
  auto list = [](const std::vector<double>& xs) {
    const bool cut_short = xs.size() > 6;
    std::string t = "[";
    for (size_t i = 0; i < xs.size(); ++i) {
      if (cut_short && i == 3) {
        t += ", ...";
        i = xs.size() - 2;  // then the last
        continue;
      }
      t += (i ? ", " : "") + number_text(xs[i]);
    }
    return t + "]" + (cut_short ? " (" + std::to_string(xs.size()) + " in all)" : "");
  };
  if (s.kind == K::Piecewise)
    return "PiecewiseConstantDecay(boundaries " + list(s.boundaries) + ", values " + list(s.values) + ")";
  std::string t = std::string(s.kind == K::Exponential ? "ExponentialDecay" : s.kind == K::InverseTime ? "InverseTimeDecay"
                                                                                                        : "CosineDecay") +
                  "(initial " + number_text(s.initial) + ", decay_steps " + number_text(s.decay_steps);
  if (s.kind == K::Cosine) {
    t += ", alpha " + number_text(s.alpha);
    if (!std::isnan(s.warmup_target))
      t += ", warm-up to " + number_text(s.warmup_target) + " over " + number_text(s.warmup_steps) + " steps";
  } else {
    t += ", decay_rate " + number_text(s.decay_rate) + (s.staircase ? ", staircase" : "");
  }
  return t + ")";
}

// The optimizer of compile_config, with Keras's defaults for what it does not say; its numbers in
// the ranges the command line takes (cli/options.cpp: --lr above 0 up to 1000). A learning rate
// that is a schedule becomes r.schedule, its initial rate r.lr; what is returned names it ("" for
// a number).
std::string optimizer_from(const json& o, Recipe& r, const std::string& file) {
  const std::string name = cut(class_key(o));
  const json& c = config_of(o);
  const Config k{c, file + ": the optimizer (" + name + ")"};
  auto why = [&](const std::string& w) { k.fail(w); };
  const char* lr_key = k.has("learning_rate") ? "learning_rate" : "lr";
  for (const char* k : {"clipnorm", "clipvalue", "global_clipnorm"})
    if (c.contains(k) && !c.at(k).is_null()) why("clips gradients (" + std::string(k) + "); loupe does not");
  if (c.contains("weight_decay") && !c.at("weight_decay").is_null() && c.at("weight_decay") != 0)
    why("has weight_decay; loupe's optimizers have none");
  for (const char* key : {"use_ema", "amsgrad", "nesterov", "centered"})
    if (k.flag(key, false)) why("has " + std::string(key) + " on; loupe's does not");
  if (name != "adam" && name != "rmsprop" && name != "sgd" && name != "adadelta")
    refuse_file(file, "the optimizer '" + name + "' is not one loupe has (adam, rmsprop, sgd, adadelta)");
  r = with_optimizer(Recipe{}, name);
  r.beta1 = k.real("beta_1", r.beta1, kFraction), r.beta2 = k.real("beta_2", r.beta2, kFraction);
  r.rho = k.real("rho", r.rho, kFraction);
  r.momentum = k.real("momentum", 0.0, kFraction);
  if (name == "rmsprop" && r.momentum != 0) why("has momentum; loupe's RMSprop has none");
  r.eps = k.real("epsilon", 1e-7, Range{0, false, 1, true});
  r.decay = k.real("decay", 0.0, kFromZero);
  if (!k.has(lr_key) || !c.at(lr_key).is_object()) {
    r.lr = k.real(lr_key, r.lr, kRate);
    return "";
  }
  r.schedule = schedule_from(c.at(lr_key), k.where + "'s " + lr_key);
  r.lr = r.schedule.initial;
  // Keras 2 divides the schedule's rate by 1 + decay x updates as well; loupe runs one curve.
  if (r.decay > 0)
    why("has a learning-rate schedule and decay " + number_text(r.decay) +
        " (Keras 2 divides the schedule's rate by 1 + decay x updates); loupe takes one or the other");
  return schedule_text(r.schedule);
}

// The loss of compile_config, which must agree with the last layer's activation (the loss applies
// softmax or sigmoid itself unless from_logits says the layer gives logits). Binary cross-entropy
// over a softmax of two units is categorical cross-entropy for 0/1 labels (the two terms of each
// sample are the same), and is trained as that; `source` says so.
train::Loss loss_from(const json& l, const std::string& act, int64_t outputs, const std::string& file,
                      std::string* source = nullptr) {
  const std::string name = cut(class_key(l));
  const json& c = config_of(l);
  const Config k{c, file + ": the loss " + name};
  const bool logits = k.flag("from_logits", false);
  if (c.contains("label_smoothing") && c.at("label_smoothing") != 0 && !c.at("label_smoothing").is_null())
    refuse_file(file, "the loss " + name + " smooths its labels (label_smoothing " + shown(c.at("label_smoothing")) +
                     "); loupe's does not");
  const std::string reduction = k.text("reduction", "sum_over_batch_size");
  if (reduction != "sum_over_batch_size" && reduction != "auto")
    refuse_file(file, "the loss " + name + " has reduction '" + cut(reduction) + "'; loupe's is the mean over the batch");
  if (name == "categoricalcrossentropy" || name == "sparsecategoricalcrossentropy") {
    if (act != (logits ? "linear" : "softmax"))
      refuse_file(file, "the loss " + name + " needs a last layer with " + (logits ? "no activation" : "softmax") + ", not " + act);
    return train::Loss::CrossEntropy;
  }
  if (name == "binarycrossentropy") {
    if (act == "softmax" && !logits && outputs == 2) {
      if (source) *source = "binary_crossentropy over a softmax of 2 units, trained as the categorical cross-entropy it equals";
      return train::Loss::CrossEntropy;
    }
    if (act != (logits ? "linear" : "sigmoid"))
      refuse_file(file, "the loss binary_crossentropy needs a last layer of one unit with " +
                       std::string(logits ? "no activation" : "sigmoid") + " (or a softmax of two), not " + act);
    return train::Loss::BinaryCrossEntropyWithLogits;
  }
  if (name == "meansquarederror" || name == "mse") {
    if (act != "linear")
      refuse_file(file, "the loss mean_squared_error needs a last layer with no activation (a regression's outputs), not " +
                       act);
    return train::Loss::MeanSquaredError;
  }
  refuse_file(file, "the loss '" + name + "' is not one loupe trains (categorical, sparse categorical or binary "
               "cross-entropy, mean squared error)");
}

// compile_config where the file has it (Keras 3), else Keras's compile defaults (RMSprop at 0.001)
// with the loss the last layer implies; batch and epochs as Keras's fit, or the batch the file
// fixes (`batch`: fixed_batch's, 0 for none).
void recipe_from(const json& root, const Parsed& p, int64_t outputs, int64_t batch, ModelInfo& m, const std::string& file) {
  const json* cc = root.contains("compile_config") && root.at("compile_config").is_object() ? &root.at("compile_config") : nullptr;
  if (cc && cc->contains("optimizer") && !cc->at("optimizer").is_null()) {
    const std::string schedule = optimizer_from(cc->at("optimizer"), m.recipe, file);
    m.recipe_source = schedule.empty() ? "the optimizer and loss from the file's compile_config"
                                       : "the optimizer, its learning rate " + schedule +
                                             " and the loss from the file's compile_config";
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
    refuse_file(file, "cross-entropy over " + std::to_string(outputs) + " output; a classifier has at least 2 classes");
  m.recipe.batch = batch ? batch : 32;
  m.recipe.epochs = 1;
  m.recipe_source += (batch ? "; batch " + std::to_string(batch) + " as the file's input fixes it, 1 epoch"
                            : std::string("; batch 32 and 1 epoch")) +
                     " as Keras's fit unless --batch, --epochs";
}

// A file fixes the sizes the reference models take from their data (models/registry.h): the data
// (`vocab`: its largest id + 1, or its distinct characters) must fit the file's (`sized`).
void check_data_vocabulary(const std::string& file, const std::string& dataset, int64_t sized, int64_t vocab) {
  if (dataset == "chars" && vocab != sized)
    refuse_file(file, "the text has " + std::to_string(vocab) + " distinct characters, but the model's one-hot input and "
                 "its output take " + std::to_string(sized) + ": a model for this text has input [40, " +
                 std::to_string(vocab) + "] and Dense(" + std::to_string(vocab) + ")");
  if ((dataset == "imdb" || dataset == "imdb_bigrams") && vocab > sized)
    refuse_file(file, "the data has token ids up to " + std::to_string(vocab - 1) + ", but the Embedding's input_dim is " +
                 std::to_string(sized) + ": a model for this data has input_dim " + std::to_string(vocab) + " or more");
}
}  // namespace

namespace {
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
}  // namespace

bool is_keras_archive(const std::string& name) { return ends_with(name, ".keras"); }

bool is_model_file(const std::string& name) { return ends_with(name, ".json") || is_keras_archive(name); }

std::string model_stem(const std::string& name) {
  if (!is_model_file(name)) return name;
  const size_t slash = name.find_last_of('/');
  const std::string base = slash == std::string::npos ? name : name.substr(slash + 1);
  return base.substr(0, base.size() - (is_keras_archive(name) ? 6 : 5));
}


namespace {
// An nn::Sequential where each step reads the one before's output (the fused MLP is Sequential's),
// else an nn::Graph of the steps.
std::shared_ptr<nn::Module> model_of(const std::vector<Step>& steps) {
  bool chain = true;
  for (size_t i = 0; i < steps.size(); ++i)
    chain = chain && steps[i].inputs == std::vector<int>{int(i) - 1} &&
            std::all_of(steps[i].outputs.begin(), steps[i].outputs.end(), [](int o) { return o == 0; });
  if (chain) {
    auto s = std::make_shared<nn::Sequential>();
    for (const Step& st : steps) s->add(st.name, st.make());
    return s;
  }
  auto g = std::make_shared<nn::Graph>();
  for (const Step& st : steps) g->add(st.name, st.make(), st.inputs, st.outputs);
  return g;
}

// A reference model's builder: the data's vocabulary or alphabet replaces the file's own size (the
// fastText table's rows grow with the training set's bigrams; char_lstm's input and output with
// the text's characters), as the reference models have always taken them.
std::function<std::shared_ptr<nn::Module>(int64_t)> data_sized_builder(json root, std::vector<int64_t> input,
                                                                         std::string dataset, std::string file,
                                                                         int64_t sized, std::vector<Step> steps) {
  if (dataset != "chars" && dataset != "imdb" && dataset != "imdb_bigrams")
    return [steps](int64_t) { return model_of(steps); };
  auto doc = std::make_shared<const json>(std::move(root));
  return [doc, input, dataset, file, sized, steps](int64_t vocab) {
    if (vocab == sized) return model_of(steps);
    if (vocab < 1 || (dataset == "chars" && vocab > kCharLstmMaxChars))
      refuse_file(file, (dataset == "chars" ? "texts of 1 to " + std::to_string(kCharLstmMaxChars) + " distinct characters, not "
                                       : std::string("a vocabulary of at least 1 token, not ")) + std::to_string(vocab));
    return model_of(parse_layers(model_layers(*doc, file), input, dataset, file, dialect_of(*doc, true), vocab).steps);
  };
}
}  // namespace

std::string keras::dataset_for(const std::vector<int64_t>& input, const Parsed& p, int64_t outputs) {
  using V = std::vector<int64_t>;
  // [784, 1]: the pixels as a sequence (the Keras example mnist_irnn's).
  if (!p.embedding_input && outputs == 10 &&
      (input == V{28, 28} || input == V{28, 28, 1} || input == V{784} || input == V{784, 1}))
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

Dialect keras::dialect_of(const json& root, bool reference) {
  Dialect d;
  d.one_bias = !reference;
  // Keras 2 and tf.keras write keras_version ("2.1.6"); Keras 3's to_json does not, but names each
  // object's module, which Keras 2 before tf.keras 2.13 never wrote (2.13's keras_version says 2).
  int major = root.contains("module") ? 3 : 2, minor = 99;
  if (root.contains("keras_version") && root.at("keras_version").is_string())
    if (std::sscanf(root.at("keras_version").get<std::string>().c_str(), "%d.%d", &major, &minor) < 1) major = 2;
  if (major >= 3) d.hard_slope = 1.f / 6;
  if (major < 2 || (major == 2 && minor < 3)) d.recurrent_default = "hard_sigmoid";
  // Keras 2's own GRU (up to 2.3.1) has reset_after False; tf.keras's (2.4 on) and Keras 3's True.
  if (major < 2 || (major == 2 && minor <= 3)) d.gru_reset_after = false, d.rnn_implementation = 1;
  return d;
}

namespace {
// Keras files nest fewer than 10 levels (an initializer's config inside a layer inside the model);
// a few times that leaves room for any layout, and refuses a hostile nesting while parsing, before
// it costs memory or reaches a recursive copy, comparison or dump (docs/reliability.md).
constexpr int kMaxDepth = 32;
struct TooDeep {};

json parse_text(const std::string& text, const std::string& file) {
  try {
    return json::parse(text, [](int depth, json::parse_event_t, json&) {
      if (depth >= kMaxDepth) throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
    refuse_file(file, "nested deeper than " + std::to_string(kMaxDepth) + " levels; a Keras model file nests fewer than 10");
  } catch (const json::exception& e) {
    refuse_file(file, "not JSON: " + cut(e.what(), 160));  // nlohmann's message quotes the token it read, whole
  }
}

// What a checkpoint of a model file is tied to: its architecture as read (each layer's class, name,
// steps, output shape and parameters), not its path or its spacing; FNV-1a, 64 bits.
std::string identity_of(const std::vector<int64_t>& input, const Parsed& p) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : shape_text(input) + "\n" + p.architecture) h = (h ^ ch) * 1099511628211ull;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, h);
  return std::string("keras:") + hex;
}

void set_builder(ModelInfo& m, json root, const std::vector<int64_t>& input, const std::string& dataset,
                 const std::string& file, const Parsed& p, bool data_sized) {
  const std::vector<Step> steps = p.steps;
  if (data_sized) {
    m.build_for = data_sized_builder(std::move(root), input, dataset, file, m.vocab, steps);
  } else {
    m.build_for = [steps, dataset, file, sized = m.vocab](int64_t vocab) {
      check_data_vocabulary(file, dataset, sized, vocab);
      return model_of(steps);
    };
  }
}
}  // namespace

ModelInfo keras_model(const std::string& text, const std::string& file, bool data_sized) {
  json root = parse_text(text, file);
  try {
    const std::vector<Layer> layers = model_layers(root, file);
    const std::vector<int64_t> input = input_shape(root, layers, file);
    const Dialect dialect = dialect_of(root, data_sized);
    Parsed p = parse_layers(layers, input, "", file, dialect);  // what the model outputs, to pick the data set
    const int64_t outputs = p.shape_[0];
    ModelInfo m;
    // The loss first: a regression's data are its own arrays.
    recipe_from(root, p, outputs, fixed_batch(layers, file), m, file);
    const bool regression = m.loss_missing.empty() && m.recipe.loss == train::Loss::MeanSquaredError;
    const std::string dataset = regression ? "" : dataset_for(parsed_shape(input), p, outputs);
    // Read again only for a reference data set, whose first steps adapt what it delivers.
    if (!dataset.empty()) p = parse_layers(layers, input, dataset, file, dialect);
    m.recipe.dataset = dataset.empty() ? "arrays" : dataset;
    m.input_shape = input;
    m.classes = regression ? 0 : m.recipe.loss == train::Loss::BinaryCrossEntropyWithLogits ? 2 : outputs;
    m.outputs = outputs;
    m.token_ids = p.embedding_input;
    m.name = file;
    m.keras_config = text;
    m.identity = identity_of(input, p);
    m.description = std::string(is_functional(root) ? "Keras functional model" : "Keras Sequential model") + ", input " +
                    shape_text(input) + ", " + std::to_string(layers.size()) + " layers" +
                    (p.regularized ? ", l2 on " + std::to_string(p.regularized) + " layer" + (p.regularized > 1 ? "s" : "") +
                                         " (its penalty part of the loss, as Keras's)"
                                   : "");
    m.vocab = dataset == "chars" ? input[1] : p.vocab;
    m.keras_parameters = p.keras_parameters;
    for (const std::string& w : p.count_differs) m.keras_parameters_why += (m.keras_parameters_why.empty() ? "" : "; ") + w;
    m.costs = p.costs;
    for (const Step& st : p.steps)
      if (st.weights) m.keras_weights.emplace_back(st.name, st.weights);
    m.keras_layers = p.classes;
    set_builder(m, std::move(root), input, dataset, file, p, data_sized);
    m.expected_parameters = p.loupe_parameters;  // counted, not built: a file's sizes are checked first
    return m;
  } catch (const json::exception& e) {  // a key missing or of the wrong type
    refuse_file(file, std::string("not a model file loupe can read: ") + e.what());
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
  constexpr uint64_t kConfigCap = 16u << 20;
  if (is_keras_archive(path)) {
    const auto config = data::zip_member(path, "config.json", kConfigCap, "a .keras file");
    if (!config) refuse_file(path, "has no config.json (a .keras file holds config.json, metadata.json and model.weights.h5)");
    ModelInfo m = keras_model(std::string(config->begin(), config->end()), path);
    m.own_weights = path;
    return m;
  }
  std::string text;
  uint64_t size = 0;
  constexpr uint64_t kCap = 16u << 20;
  if (!read_capped(path, kCap, &text, &size))
    throw Error(path + ": " + std::to_string(size) + " bytes; a Keras model file (model.to_json()) is kilobytes, "
                "and loupe reads at most 16 MiB");
  return keras_model(text, path);
}

}  // namespace loupe::models
