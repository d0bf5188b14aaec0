// A Keras model file's learning-rate schedule (models/keras_json.cpp; docs/keras.md, "Learning-rate
// schedules"): each class loupe reads, in Keras 3's layout and tf.keras 2's, read back into the
// recipe's train::LrSchedule, its rates against Keras's formulas, and each kind of bad schedule
// refused in one sentence naming the file, the optimizer and the key.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "models/keras_json.h"
#include "models/registry.h"
#include "run/run.h"
#include "train/lr_schedule.h"
#include "keras_test.h"

using namespace loupe;
using json = nlohmann::json;
using Kind = train::LrSchedule::Kind;

namespace {

// The two layouts as Keras writes a compiled model's optimizer with a schedule for its rate:
// Keras 3 (serialization_lib.serialize_keras_object: module, class_name, config, registered_name;
// the optimizer's config as its get_config) and tf.keras 2 (class_name and config only; name null
// by default, Keras 2's decay 0.0 beside the rate; its model's input in batch_input_shape).
enum class Layout { Keras3, TfKeras2 };

json keras3_model() {
  auto layer = [](const std::string& cls, json config) {
    return json{{"module", "keras.layers"}, {"class_name", cls}, {"config", config}, {"registered_name", nullptr}};
  };
  return {{"module", "keras"},
          {"class_name", "Sequential"},
          {"config", {{"name", "sequential"},
                      {"layers", {layer("InputLayer", {{"batch_shape", {nullptr, 6}}, {"dtype", "float32"}, {"name", "input_layer"}}),
                                  layer("Dense", {{"units", 3}, {"activation", "softmax"}, {"use_bias", true}, {"name", "fc"}})}}}},
          {"registered_name", nullptr}};
}

json tf_keras2_model() {
  return {{"class_name", "Sequential"},
          {"config", {{"name", "sequential"},
                      {"layers", {{{"class_name", "Dense"},
                                   {"config", {{"name", "fc"}, {"units", 3}, {"activation", "softmax"}, {"use_bias", true},
                                               {"batch_input_shape", {nullptr, 6}}}}}}}}},
          {"keras_version", "2.15.0"},
          {"backend", "tensorflow"}};
}

// `schedule` (class and config) as the SGD's learning_rate of a compiled model in `layout`.
json compiled(const std::string& cls, const json& config, Layout layout = Layout::Keras3) {
  if (layout == Layout::TfKeras2) {
    json j = tf_keras2_model();
    const json lr = {{"class_name", cls}, {"config", config}};
    j["compile_config"] = {{"optimizer", {{"class_name", "SGD"}, {"config", {{"name", "SGD"}, {"learning_rate", lr}, {"decay", 0.0},
                                                                             {"momentum", 0.0}, {"nesterov", false}}}}},
                           {"loss", "categorical_crossentropy"}};
    return j;
  }
  json j = keras3_model();
  const json lr = {{"module", "keras.optimizers.schedules"}, {"class_name", cls}, {"config", config}, {"registered_name", nullptr}};
  const json sgd = {{"name", "SGD"}, {"learning_rate", lr}, {"weight_decay", nullptr}, {"clipnorm", nullptr},
                    {"global_clipnorm", nullptr}, {"clipvalue", nullptr}, {"use_ema", false}, {"ema_momentum", 0.99},
                    {"ema_overwrite_frequency", nullptr}, {"loss_scale_factor", nullptr},
                    {"gradient_accumulation_steps", nullptr}, {"momentum", 0.0}, {"nesterov", false}};
  j["compile_config"] = {{"optimizer", {{"module", "keras.optimizers"}, {"class_name", "SGD"}, {"config", sgd},
                                        {"registered_name", nullptr}}},
                         {"loss", "categorical_crossentropy"}, {"loss_weights", nullptr}, {"metrics", {"accuracy"}},
                         {"weighted_metrics", nullptr}, {"run_eagerly", false}, {"steps_per_execution", 1},
                         {"jit_compile", false}};
  return j;
}

models::ModelInfo read(const json& j) { return models::keras_model(j.dump(), "m.json"); }

void expect_refusal(const json& j, const std::string& says) {
  const std::string e = test::keras_refusal(j);
  EXPECT_NE(e.find(says), std::string::npos) << "refusal: '" << e << "'\nexpected: " << says;
}

// Keras's ExponentialDecay(0.1, decay_steps=1000, decay_rate=0.96) as its get_config writes it.
json exponential() {
  return {{"initial_learning_rate", 0.1}, {"decay_steps", 1000}, {"decay_rate", 0.96}, {"staircase", false},
          {"name", "ExponentialDecay"}};
}

}  // namespace

// A number stays a constant rate: Recipe's default schedule.
TEST(KerasSchedules, ANumberIsAConstantRate) {
  EXPECT_EQ(models::Recipe{}.schedule.kind, Kind::Constant);
  json j = compiled("ExponentialDecay", exponential());
  j["compile_config"]["optimizer"]["config"]["learning_rate"] = 0.02;
  const models::ModelInfo m = read(j);
  EXPECT_EQ(m.recipe.schedule.kind, Kind::Constant);
  EXPECT_DOUBLE_EQ(m.recipe.lr, 0.02);
  EXPECT_EQ(m.recipe_source.rfind("the optimizer and loss from the file's compile_config", 0), 0u) << m.recipe_source;
}

TEST(KerasSchedules, ExponentialDecayInBothLayouts) {
  for (Layout layout : {Layout::Keras3, Layout::TfKeras2}) {
    json config = exponential();
    if (layout == Layout::TfKeras2) config["name"] = nullptr;
    const models::ModelInfo m = read(compiled("ExponentialDecay", config, layout));
    const train::LrSchedule& s = m.recipe.schedule;
    EXPECT_EQ(s.kind, Kind::Exponential);
    EXPECT_DOUBLE_EQ(s.initial, 0.1);
    EXPECT_DOUBLE_EQ(s.decay_steps, 1000);
    EXPECT_DOUBLE_EQ(s.decay_rate, 0.96);
    EXPECT_FALSE(s.staircase);
    EXPECT_DOUBLE_EQ(m.recipe.lr, 0.1);  // the initial rate
    EXPECT_EQ(m.recipe.optimizer, "sgd");
    EXPECT_EQ(m.recipe.decay, 0.0);
    EXPECT_EQ(m.recipe_source.rfind("the optimizer, its learning rate ExponentialDecay(initial 0.1, decay_steps 1000, "
                                    "decay_rate 0.96) and the loss from the file's compile_config", 0), 0u)
        << m.recipe_source;
  }
  json stairs = exponential();
  stairs["staircase"] = true;
  const models::ModelInfo m = read(compiled("ExponentialDecay", stairs));
  EXPECT_TRUE(m.recipe.schedule.staircase);
  EXPECT_NE(m.recipe_source.find("decay_rate 0.96, staircase)"), std::string::npos) << m.recipe_source;
}

TEST(KerasSchedules, InverseTimeDecayInBothLayouts) {
  for (Layout layout : {Layout::Keras3, Layout::TfKeras2}) {
    const json config = {{"initial_learning_rate", 0.5}, {"decay_steps", 2.0}, {"decay_rate", 3}, {"staircase", true},
                         {"name", layout == Layout::Keras3 ? json("InverseTimeDecay") : json()}};
    const models::ModelInfo m = read(compiled("InverseTimeDecay", config, layout));
    const train::LrSchedule& s = m.recipe.schedule;
    EXPECT_EQ(s.kind, Kind::InverseTime);
    EXPECT_DOUBLE_EQ(s.initial, 0.5);
    EXPECT_DOUBLE_EQ(s.decay_steps, 2);
    EXPECT_DOUBLE_EQ(s.decay_rate, 3);  // above 1: an inverse-time decay only slows
    EXPECT_TRUE(s.staircase);
    EXPECT_DOUBLE_EQ(m.recipe.lr, 0.5);
    EXPECT_NE(m.recipe_source.find("InverseTimeDecay(initial 0.5, decay_steps 2, decay_rate 3, staircase)"), std::string::npos)
        << m.recipe_source;
  }
}

TEST(KerasSchedules, PiecewiseConstantDecayInBothLayouts) {
  for (Layout layout : {Layout::Keras3, Layout::TfKeras2}) {
    const json config = {{"boundaries", {1000, 2000}}, {"values", {0.1, 0.01, 0.001}},
                         {"name", layout == Layout::Keras3 ? json("PiecewiseConstant") : json()}};
    const models::ModelInfo m = read(compiled("PiecewiseConstantDecay", config, layout));
    const train::LrSchedule& s = m.recipe.schedule;
    EXPECT_EQ(s.kind, Kind::Piecewise);
    EXPECT_EQ(s.boundaries, (std::vector<double>{1000, 2000}));
    EXPECT_EQ(s.values, (std::vector<double>{0.1, 0.01, 0.001}));
    EXPECT_DOUBLE_EQ(m.recipe.lr, 0.1);  // the first value: Keras's has no initial rate
    EXPECT_NE(m.recipe_source.find("PiecewiseConstantDecay(boundaries [1000, 2000], values [0.1, 0.01, 0.001])"),
              std::string::npos) << m.recipe_source;
  }
  // A long list is named by its ends in the header; past the device's 8 boundaries, refused.
  json many = {{"boundaries", json::array()}, {"values", {1.0}}};
  for (int i = 1; i <= 8; ++i) many["boundaries"].push_back(100 * i), many["values"].push_back(1.0 / (i + 1));
  const models::ModelInfo m = read(compiled("PiecewiseConstantDecay", many));
  EXPECT_EQ(m.recipe.schedule.boundaries.size(), 8u);
  EXPECT_NE(m.recipe_source.find("boundaries [100, 200, 300, ..., 800] (8 in all)"), std::string::npos) << m.recipe_source;
  many["boundaries"].push_back(900), many["values"].push_back(0.01);
  try {
    read(compiled("PiecewiseConstantDecay", many));
    ADD_FAILURE() << "9 boundaries were taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a list of 1 to 9 numbers"), std::string::npos) << e.what();
  }
}

TEST(KerasSchedules, CosineDecayWithAndWithoutWarmup) {
  // Keras 3's, with its warm-up from 0 (the example of its docstring).
  const json warm = {{"initial_learning_rate", 0.0}, {"decay_steps", 1000}, {"alpha", 0.1}, {"name", "CosineDecay"},
                     {"warmup_target", 0.1}, {"warmup_steps", 100}};
  const models::ModelInfo w = read(compiled("CosineDecay", warm));
  EXPECT_EQ(w.recipe.schedule.kind, Kind::Cosine);
  EXPECT_DOUBLE_EQ(w.recipe.schedule.initial, 0.0);
  EXPECT_DOUBLE_EQ(w.recipe.schedule.decay_steps, 1000);
  EXPECT_DOUBLE_EQ(w.recipe.schedule.alpha, 0.1);
  EXPECT_DOUBLE_EQ(w.recipe.schedule.warmup_target, 0.1);
  EXPECT_DOUBLE_EQ(w.recipe.schedule.warmup_steps, 100);
  EXPECT_EQ(w.recipe.lr, 0.0);
  EXPECT_NE(w.recipe_source.find("CosineDecay(initial 0, decay_steps 1000, alpha 0.1, warm-up to 0.1 over 100 steps)"),
            std::string::npos) << w.recipe_source;
  // Keras 3's without a warm-up (warmup_target null, warmup_steps 0), and tf.keras 2.11's, whose
  // get_config had no warm-up keys.
  const json plain3 = {{"initial_learning_rate", 0.2}, {"decay_steps", 500}, {"alpha", 0.0}, {"name", "CosineDecay"},
                       {"warmup_target", nullptr}, {"warmup_steps", 0}};
  const json plain2 = {{"initial_learning_rate", 0.2}, {"decay_steps", 500}, {"alpha", 0.0}, {"name", nullptr}};
  for (const models::ModelInfo& m : {read(compiled("CosineDecay", plain3)), read(compiled("CosineDecay", plain2, Layout::TfKeras2))}) {
    EXPECT_EQ(m.recipe.schedule.kind, Kind::Cosine);
    EXPECT_TRUE(std::isnan(m.recipe.schedule.warmup_target));
    EXPECT_EQ(m.recipe.schedule.warmup_steps, 0.0);
    EXPECT_DOUBLE_EQ(m.recipe.lr, 0.2);
    EXPECT_NE(m.recipe_source.find("CosineDecay(initial 0.2, decay_steps 500, alpha 0)"), std::string::npos) << m.recipe_source;
  }
}

// The schedules read from files give Keras's rates: its formulas (learning_rate_schedule.py's
// __call__) transcribed here, at steps where a floor, a boundary or the warm-up's end matters.
TEST(KerasSchedules, TheRatesAreKerasFormulas) {
  const double pi = 3.14159265358979323846;
  const train::LrSchedule e = read(compiled("ExponentialDecay", exponential())).recipe.schedule;
  for (double t : {0.0, 1.0, 500.0, 999.0, 2500.0})
    EXPECT_DOUBLE_EQ(train::lr_at(e, t), 0.1 * std::pow(0.96, t / 1000)) << t;
  json stairs = exponential();
  stairs["staircase"] = true;
  const train::LrSchedule es = read(compiled("ExponentialDecay", stairs, Layout::TfKeras2)).recipe.schedule;
  EXPECT_DOUBLE_EQ(train::lr_at(es, 999), 0.1);
  EXPECT_DOUBLE_EQ(train::lr_at(es, 2500), 0.1 * 0.96 * 0.96);
  const train::LrSchedule i = read(compiled("InverseTimeDecay", {{"initial_learning_rate", 0.1}, {"decay_steps", 2},
                                                                 {"decay_rate", 0.5}})).recipe.schedule;
  for (double t : {0.0, 3.0, 10.0}) EXPECT_DOUBLE_EQ(train::lr_at(i, t), 0.1 / (1 + 0.5 * t / 2)) << t;
  const train::LrSchedule p = read(compiled("PiecewiseConstantDecay", {{"boundaries", {1000, 2000}},
                                                                       {"values", {1.0, 0.5, 0.1}}})).recipe.schedule;
  EXPECT_EQ(train::lr_at(p, 0), 1.0);
  EXPECT_EQ(train::lr_at(p, 1000), 1.0);  // values[i] while step <= boundaries[i]
  EXPECT_EQ(train::lr_at(p, 1001), 0.5);
  EXPECT_EQ(train::lr_at(p, 2001), 0.1);
  const train::LrSchedule w = read(compiled("CosineDecay", {{"initial_learning_rate", 0.0}, {"decay_steps", 1000},
                                                            {"alpha", 0.1}, {"warmup_target", 0.1},
                                                            {"warmup_steps", 100}})).recipe.schedule;
  auto keras_cosine = [&](double t) {  // CosineDecay.__call__ with a warm-up target
    t = std::min(t, 1000.0 + 100.0);
    if (t < 100) return (0.1 - 0.0) * (t / 100) + 0.0;
    return 0.1 * ((1 - 0.1) * 0.5 * (1 + std::cos(pi * ((t - 100) / 1000))) + 0.1);
  };
  for (double t : {0.0, 50.0, 100.0, 350.0, 600.0, 1100.0, 5000.0})
    EXPECT_NEAR(train::lr_at(w, t), keras_cosine(t), 1e-15) << t;
}

// ---- refusals: each names the file, the optimizer and the key -------------------------------

TEST(KerasSchedules, PolynomialDecayAndCosineDecayRestartsAreRefusedByName) {
  expect_refusal(compiled("PolynomialDecay", {{"initial_learning_rate", 0.1}, {"decay_steps", 1000},
                                              {"end_learning_rate", 0.0001}, {"power", 1.0}, {"cycle", false}}),
                 "m.json: the optimizer (sgd)'s learning_rate is 'PolynomialDecay', which loupe's schedules do not have "
                 "yet; loupe reads ExponentialDecay, InverseTimeDecay, PiecewiseConstantDecay and CosineDecay");
  expect_refusal(compiled("CosineDecayRestarts", {{"initial_learning_rate", 0.1}, {"first_decay_steps", 1000}}, Layout::TfKeras2),
                 "the optimizer (sgd)'s learning_rate is 'CosineDecayRestarts', which loupe's schedules do not have yet");
  expect_refusal(compiled("WarmUp", exponential()), "the optimizer (sgd)'s learning_rate is 'WarmUp'; loupe reads");
}

TEST(KerasSchedules, AnUnknownKeyIsRefused) {
  json config = exponential();
  config["power"] = 2;
  expect_refusal(compiled("ExponentialDecay", config),
                 "m.json: the optimizer (sgd)'s learning_rate ExponentialDecay has a key 'power' that Keras's "
                 "ExponentialDecay does not have");
  expect_refusal(compiled("PiecewiseConstantDecay", {{"boundaries", {1}}, {"values", {0.1, 0.01}}, {"staircase", true}}),
                 "learning_rate PiecewiseConstantDecay has a key 'staircase'");
  json outer = compiled("ExponentialDecay", exponential());
  outer["compile_config"]["optimizer"]["config"]["learning_rate"]["build_config"] = json::object();
  expect_refusal(outer, "the optimizer (sgd)'s learning_rate has a key 'build_config' that a serialized Keras schedule does not have");
}

TEST(KerasSchedules, AMissingKeyIsRefused) {
  json config = exponential();
  config.erase("decay_rate");
  expect_refusal(compiled("ExponentialDecay", config),
                 "m.json: the optimizer (sgd)'s learning_rate ExponentialDecay has no decay_rate; Keras's ExponentialDecay needs one");
  expect_refusal(compiled("CosineDecay", {{"initial_learning_rate", 0.1}}), "learning_rate CosineDecay has no decay_steps");
  json no_config = compiled("ExponentialDecay", exponential());
  no_config["compile_config"]["optimizer"]["config"]["learning_rate"].erase("config");
  expect_refusal(no_config, "the optimizer (sgd)'s learning_rate has no config object");
}

TEST(KerasSchedules, AWrongTypeIsRefused) {
  json config = exponential();
  config["decay_steps"] = "1000";
  expect_refusal(compiled("ExponentialDecay", config),
                 "m.json: the optimizer (sgd)'s learning_rate ExponentialDecay has decay_steps \"1000\"; loupe takes a number");
  config = exponential();
  config["staircase"] = 1;
  expect_refusal(compiled("ExponentialDecay", config), "learning_rate ExponentialDecay has staircase 1; loupe takes true or false");
  config = exponential();
  config["name"] = 7;
  expect_refusal(compiled("ExponentialDecay", config), "learning_rate ExponentialDecay has name 7; loupe takes a name");
  expect_refusal(compiled("PiecewiseConstantDecay", {{"boundaries", 1000}, {"values", {0.1, 0.01}}}),
                 "learning_rate PiecewiseConstantDecay has boundaries 1000; loupe takes a list of 1 to 9 numbers");
  expect_refusal(compiled("PiecewiseConstantDecay", {{"boundaries", {1000}}, {"values", {0.1, "0.01"}}}),
                 "learning_rate PiecewiseConstantDecay has values[1] \"0.01\"; loupe takes a number");
  json cls = compiled("ExponentialDecay", exponential());
  cls["compile_config"]["optimizer"]["config"]["learning_rate"]["class_name"] = 3;
  expect_refusal(cls, "the optimizer (sgd)'s learning_rate has class_name 3; loupe takes a name");
}

TEST(KerasSchedules, NonPositiveDecayStepsAreRefused) {
  for (double steps : {0.0, -10.0}) {
    json config = exponential();
    config["decay_steps"] = steps;
    expect_refusal(compiled("ExponentialDecay", config),
                   "m.json: the optimizer (sgd)'s learning_rate ExponentialDecay has decay_steps " + json(steps).dump() +
                       "; loupe takes a number above 0 up to 1e+12");
  }
  expect_refusal(compiled("CosineDecay", {{"initial_learning_rate", 0.1}, {"decay_steps", 0}}),
                 "learning_rate CosineDecay has decay_steps 0; loupe takes a number above 0");
  expect_refusal(compiled("InverseTimeDecay", {{"initial_learning_rate", 0.1}, {"decay_steps", -1}, {"decay_rate", 0.5}}),
                 "learning_rate InverseTimeDecay has decay_steps -1");
}

TEST(KerasSchedules, RatesOutOfRangeAreRefused) {
  json config = exponential();
  config["initial_learning_rate"] = 0;  // no warm-up: a rate of 0 trains nothing
  expect_refusal(compiled("ExponentialDecay", config),
                 "learning_rate ExponentialDecay has initial_learning_rate 0; loupe takes a number above 0 up to 1000");
  config = exponential();
  config["decay_rate"] = 1.5;  // a growing rate, as --lr-schedule refuses it
  expect_refusal(compiled("ExponentialDecay", config), "has decay_rate 1.5; loupe takes a number above 0 up to 1");
  expect_refusal(compiled("CosineDecay", {{"initial_learning_rate", 0.1}, {"decay_steps", 10}, {"alpha", 2}}),
                 "learning_rate CosineDecay has alpha 2; loupe takes a number from 0 up to 1");
  expect_refusal(compiled("CosineDecay", {{"initial_learning_rate", 0.0}, {"decay_steps", 10}, {"warmup_target", -1},
                                          {"warmup_steps", 5}}),
                 "learning_rate CosineDecay has warmup_target -1; loupe takes a number above 0 up to 1000");
  expect_refusal(compiled("PiecewiseConstantDecay", {{"boundaries", {10}}, {"values", {0.1, 0.0}}}),
                 "learning_rate PiecewiseConstantDecay has values[1] 0.0; loupe takes a number above 0 up to 1000");
}

// Non-finite numbers never reach a schedule: a number past a double's range, NaN and Infinity
// (Python's json.dumps writes them) are refused while the file is parsed; the largest doubles are
// refused by range, with the key.
TEST(KerasSchedules, NonFiniteNumbersAreRefused) {
  auto refusal_with = [](const std::string& cls, const json& config, const std::string& from, const std::string& to) {
    std::string text = compiled(cls, config).dump();
    EXPECT_NE(text.find(from), std::string::npos) << text;
    if (text.find(from) != std::string::npos) text.replace(text.find(from), from.size(), to);
    try {
      models::keras_model(text, "m.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string steps = refusal_with("ExponentialDecay", exponential(), "\"decay_steps\":1000", "\"decay_steps\":1e999");
  EXPECT_EQ(steps.rfind("m.json: not JSON: ", 0), 0u) << steps;
  EXPECT_NE(steps.find("number overflow parsing '1e999'"), std::string::npos) << steps;
  const json piecewise = {{"boundaries", {10}}, {"values", {0.5, 0.25}}};
  for (const char* x : {"NaN", "Infinity", "-Infinity"})
    EXPECT_EQ(refusal_with("PiecewiseConstantDecay", piecewise, "0.25", x).rfind("m.json: not JSON: ", 0), 0u) << x;
  const std::string big = refusal_with("PiecewiseConstantDecay", piecewise, "0.25", "-1.7e308");
  EXPECT_NE(big.find("m.json: the optimizer (sgd)'s learning_rate PiecewiseConstantDecay has values[1] -1.7e+308; loupe "
                     "takes a number above 0 up to 1000"), std::string::npos) << big;
  json config = exponential();
  config["decay_steps"] = 1.7e308;
  expect_refusal(compiled("ExponentialDecay", config), "has decay_steps 1.7e+308; loupe takes a number above 0 up to 1e+12");
}

TEST(KerasSchedules, BoundariesAndValuesMustAgree) {
  expect_refusal(compiled("PiecewiseConstantDecay", {{"boundaries", {1000, 2000}}, {"values", {0.1, 0.01}}}),
                 "m.json: the optimizer (sgd)'s learning_rate PiecewiseConstantDecay has 2 values for 2 boundaries; "
                 "Keras's PiecewiseConstantDecay takes one value more than boundaries");
  expect_refusal(compiled("PiecewiseConstantDecay", {{"boundaries", {1000}}, {"values", {0.1, 0.01, 0.001}}}),
                 "learning_rate PiecewiseConstantDecay has 3 values for 1 boundary; Keras's PiecewiseConstantDecay takes");
  expect_refusal(compiled("PiecewiseConstantDecay", {{"boundaries", json::array()}, {"values", {0.1}}}),
                 "has boundaries []; loupe takes a list of 1 to 9 numbers");
  expect_refusal(compiled("PiecewiseConstantDecay", {{"boundaries", {2000, 1000}}, {"values", {0.1, 0.01, 0.001}}}),
                 "learning_rate PiecewiseConstantDecay has boundaries[1] 1000 after 2000; Keras's boundaries increase");
  // A hostile list: refused by its length, echoed as a short prefix.
  json huge = {{"boundaries", json::array()}, {"values", json::array()}};
  for (int i = 0; i < 5000; ++i) huge["boundaries"].push_back(i + 1), huge["values"].push_back(0.1);
  huge["values"].push_back(0.1);
  const std::string e = test::keras_refusal(compiled("PiecewiseConstantDecay", huge));
  EXPECT_NE(e.find("has boundaries [1,2,3,"), std::string::npos) << e;
  EXPECT_LT(e.size(), 300u) << e;
}

// A schedule of the user's own (registered with keras.saving) or from another module is not Keras's.
TEST(KerasSchedules, ACustomScheduleIsRefused) {
  json custom = compiled("ExponentialDecay", exponential());
  json& lr = custom["compile_config"]["optimizer"]["config"]["learning_rate"];
  lr["module"] = "__main__";
  lr["registered_name"] = "my_package>ExponentialDecay";
  expect_refusal(custom, "m.json: the optimizer (sgd)'s learning_rate is a schedule of the model's own (registered_name "
                         "'my_package>ExponentialDecay'); loupe reads Keras's, from keras.optimizers.schedules");
  lr["registered_name"] = nullptr;
  expect_refusal(custom, "the optimizer (sgd)'s learning_rate has module '__main__'; loupe reads Keras's schedules");
  lr["module"] = nullptr;
  expect_refusal(custom, "the optimizer (sgd)'s learning_rate has module null");
}

// Keras 2's decay divides the schedule's rate again: loupe runs one curve, so the pair is refused;
// decay 0.0 (what tf.keras 2 writes beside any rate) is not a decay.
TEST(KerasSchedules, AScheduleWithKeras2DecayIsRefused) {
  json j = compiled("ExponentialDecay", exponential(), Layout::TfKeras2);
  EXPECT_EQ(test::keras_refusal(j), "");
  j["compile_config"]["optimizer"]["config"]["decay"] = 0.01;
  expect_refusal(j, "m.json: the optimizer (sgd) has a learning-rate schedule and decay 0.01 (Keras 2 divides the "
                    "schedule's rate by 1 + decay x updates); loupe takes one or the other");
  // Keras 2's own name for the rate, lr, is read as learning_rate is.
  json lr = compiled("ExponentialDecay", exponential(), Layout::TfKeras2);
  json& config = lr["compile_config"]["optimizer"]["config"];
  const json rate = config["learning_rate"];
  config["lr"] = rate;
  config.erase("learning_rate");
  EXPECT_EQ(read(lr).recipe.schedule.kind, Kind::Exponential);
  config["lr"]["config"]["decay_steps"] = 0;
  expect_refusal(lr, "the optimizer (sgd)'s lr ExponentialDecay has decay_steps 0");
}

// A Keras 3 file's ExponentialDecay drives the training: each epoch's record shows the rate of the
// next update by Keras's formula, and the weights are those of the same schedule given as
// --lr-schedule to the model at a constant rate (the file's schedule installed on the optimizer).
TEST(KerasSchedules, AKeras3FilesExponentialDecayDrivesTheTraining) {
  const json decay = {{"initial_learning_rate", 0.1}, {"decay_steps", 4}, {"decay_rate", 0.5}, {"staircase", false},
                      {"name", "ExponentialDecay"}};
  auto train = [](const models::ModelInfo& m, std::optional<train::LrSchedule> s) {
    run::RunConfig c;
    c.model = m;
    c.data = run::request_for(m);
    c.data.synthetic = true;
    c.feed.resident = true;
    c.epochs = 2;
    c.batch = 16;
    c.max_steps = 4;
    c.monitor.nvml = false;
    c.lr_schedule = s;
    run::Run r(c);
    const run::RunResult res = r.run();
    return std::make_pair(res, r.session().model().arena().values().to_vector<float>());
  };
  const models::ModelInfo file = read(compiled("ExponentialDecay", decay));
  const auto [scheduled, weights] = train(file, std::nullopt);
  ASSERT_EQ(scheduled.reports.size(), 2u);
  EXPECT_DOUBLE_EQ(*scheduled.reports[0].lr, 0.1 * std::pow(0.5, 4.0 / 4));   // after 4 updates
  EXPECT_DOUBLE_EQ(*scheduled.reports[1].lr, 0.1 * std::pow(0.5, 8.0 / 4));   // after 8
  json constant = compiled("ExponentialDecay", decay);
  constant["compile_config"]["optimizer"]["config"]["learning_rate"] = 0.1;
  const auto [flat, flat_weights] = train(read(constant), std::nullopt);
  EXPECT_DOUBLE_EQ(*flat.reports[1].lr, 0.1);
  EXPECT_NE(weights, flat_weights) << "the schedule changed nothing";
  const auto [given, given_weights] =
      train(read(constant), train::parse_lr_schedule("exponential:decay_steps=4,decay_rate=0.5", 0.1));
  EXPECT_EQ(weights, given_weights);
}
