// Keras model files (models/keras_json.h): the reference models, built from their files (models/keras/,
// in the layouts Keras 2.2, tf.keras 2 and Keras 3 write), against their former C++ definitions
// (reference_definitions.h), the recipe from compile_config, and the refusals, each naming what it
// refuses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "loupe.h"
#include "models/keras_json.h"
#include "models/registry.h"
#include "models/session.h"
#include "nn/layers.h"
#include "optim/optimizer.h"
#include "reference_definitions.h"
#include "train/trainer.h"
#include "keras_test.h"

using namespace loupe;
using json = nlohmann::json;

namespace {
std::string file_of(const std::string& model) { return std::string(LOUPE_SOURCE_DIR) + "/models/keras/" + model + ".json"; }

json read_json(const std::string& model) {
  std::ifstream f(file_of(model));
  std::stringstream ss;
  ss << f.rdbuf();
  return json::parse(ss.str());
}

// A random input of the data set's sample shape: images in [0, 1), token ids below the vocabulary.
Tensor input_for(const std::string& dataset) {
  manual_seed(7);
  if (dataset == "mnist") return test::uniform01(Shape{4, 28, 28});
  if (dataset == "cifar10") return test::uniform01(Shape{4, 3, 32, 32});
  // Token ids (the IMDb sets) or characters (char_lstm's windows of 40).
  const int64_t len = dataset == "imdb_bigrams" ? 400 : dataset == "chars" ? 40 : 100;
  const float ids = dataset == "imdb_bigrams" ? 1200000.0f : dataset == "chars" ? 57.0f : 20000.0f;
  std::vector<float> v = test::uniform01(Shape{4, len}).to_vector<float>();
  for (float& x : v) x = float(int(x * ids));
  return from_vector(v, Shape{4, len});
}
}  // namespace

// Each reference model is built from its file, shipped in models/keras and built into the library:
// the parameter counts Keras prints and loupe's, the data set, the loss, the tensors' names (what
// checkpoints hold), the same weights from the same seed as the former C++ definition and the same
// outputs (evaluation mode). Read as a user's file, an LSTM is Keras's, with one bias, and counts
// what Keras counts; the reference models keep cuDNN's second bias (docs/keras.md).
TEST(KerasJson, TheReferenceModelsAsFilesAreTheModels) {
  const std::vector<std::pair<std::string, int64_t>> keras_counts = {
      {"mnist_mlp", 669706},     {"mnist_cnn", 1199882},        {"cifar10_cnn", 1250858},
      {"imdb_bilstm", 2658945},  {"imdb_fasttext", 60000051},   {"char_lstm", 102585}};
  const std::map<std::string, int64_t> second_bias = {{"imdb_bilstm", 2 * 4 * 64}, {"char_lstm", 4 * 128}};
  for (const auto& [name, keras] : keras_counts) {
    SCOPED_TRACE(name);
    const models::ModelInfo file = models::load_keras_model(file_of(name));
    const models::ModelInfo& ref = models::find_model(name);
    EXPECT_EQ(file.keras_parameters, keras);
    EXPECT_EQ(file.expected_parameters, keras);
    EXPECT_EQ(file.build()->num_parameters(), keras);
    EXPECT_EQ(ref.expected_parameters, keras + (second_bias.count(name) ? second_bias.at(name) : 0));
    // The memory check's figures (models/memory.h): each layer's parameters, as built.
    auto counted = [](const models::ModelInfo& m) {
      int64_t n = 0;
      for (const models::LayerCost& c : m.costs) n += c.parameters;
      return n;
    };
    EXPECT_EQ(counted(file), keras);
    EXPECT_EQ(counted(ref), ref.expected_parameters);
    EXPECT_EQ(ref.build()->num_parameters(), ref.expected_parameters);
    EXPECT_EQ(file.recipe.dataset, ref.recipe.dataset);
    EXPECT_EQ(file.recipe.loss, ref.recipe.loss);
    manual_seed(1);
    auto a = witness::defined_reference_model(name, ref.vocab);
    manual_seed(1);
    auto b = ref.build();
    manual_seed(1);
    auto c = file.build();  // the file on disk: the one built in is the same text
    const auto pa = a->named_parameters(), pb = b->named_parameters(), pc = c->named_parameters();
    ASSERT_EQ(pa.size(), pb.size());
    ASSERT_EQ(pa.size(), pc.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_EQ(pa[i].first, pb[i].first);  // a checkpoint written before the files still loads
      EXPECT_EQ(pa[i].second.to_vector<float>(), pb[i].second.to_vector<float>()) << "parameter " << pa[i].first;
      EXPECT_EQ(pb[i].second.to_vector<float>(), pc[i].second.to_vector<float>()) << "parameter " << pa[i].first;
    }
    a->eval();
    b->eval();
    const Tensor x = input_for(ref.recipe.dataset);
    EXPECT_EQ((*a)(x).to_vector<float>(), (*b)(x).to_vector<float>());
  }
}

// A reference model takes its size from its data as it always has: fastText's table has a row per
// id the data holds, char_lstm's input and output a column per character of the text (a user's
// file refuses such data instead: DataThatDoesNotFitTheFilesSizesIsRefused).
TEST(KerasJson, TheReferenceModelsTakeTheirSizesFromTheData) {
  for (const auto& [name, vocab] : std::vector<std::pair<std::string, int64_t>>{
           {"char_lstm", 51}, {"char_lstm", 300}, {"imdb_fasttext", 1000}, {"imdb_fasttext", 1250000}, {"imdb_bilstm", 5000}}) {
    SCOPED_TRACE(name + " " + std::to_string(vocab));
    manual_seed(3);
    auto a = witness::defined_reference_model(name, vocab);
    manual_seed(3);
    auto b = models::find_model(name).build_for(vocab);
    const auto pa = a->named_parameters(), pb = b->named_parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_EQ(pa[i].second.shape(), pb[i].second.shape()) << pa[i].first;
      EXPECT_EQ(pa[i].second.to_vector<float>(), pb[i].second.to_vector<float>()) << pa[i].first;
    }
  }
  for (int64_t chars : std::vector<int64_t>{0, models::kCharLstmMaxChars + 1}) {
    try {
      models::find_model("char_lstm").build_for(chars);
      ADD_FAILURE() << chars << " characters";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("texts of 1 to 4096 distinct characters, not " + std::to_string(chars)),
                std::string::npos) << e.what();
    }
  }
}

// The issue's own check: each reference model as built from its file and as its former C++
// definition, the same seed, recipe (optimizer, learning rate, loss) and batches, ends with the same
// weights bit for bit after four steps on the CPU, dropout included. Equal outputs at
// initialisation (the test above) would not see a layer whose backward or training-mode forward
// differs.
TEST(KerasJson, TheReferenceModelsTrainFromTheirFilesToTheSameWeights) {
  for (const std::string name : {"mnist_mlp", "mnist_cnn", "cifar10_cnn", "imdb_bilstm", "imdb_fasttext", "char_lstm"}) {
    SCOPED_TRACE(name);
    const models::ModelInfo& ref = models::find_model(name);
    const Tensor x0 = input_for(ref.recipe.dataset);  // 4 samples: 16 of them by repetition
    const int64_t n = 16, classes = ref.recipe.loss == train::Loss::BinaryCrossEntropyWithLogits ? 2
                                    : ref.recipe.dataset == "chars"                         ? 57
                                                                                            : 10;
    std::vector<Tensor> parts(size_t(n / x0.size(0)), x0);
    train::TensorDataset data{cat(parts, 0), Tensor(), 1.0};
    std::vector<int32_t> labels(static_cast<size_t>(n), 0);
    for (int64_t i = 0; i < n; ++i) labels[size_t(i)] = int32_t((i * 7 + 3) % classes);
    data.y = from_vector(labels, Shape{n});
    auto trained = [&](const std::function<std::shared_ptr<nn::Module>()>& build) {
      manual_seed(1);
      auto net = build();
      auto opt = models::make_optimizer(ref.recipe, net->arena(), ref.recipe.lr);
      train::TrainerOptions o;
      o.loss = ref.recipe.loss;
      train::Trainer t(*net, *opt, kCPU, o);
      manual_seed(2);  // dropout's masks: the same draws for both
      for (int e = 1; e <= 2; ++e) t.train_epoch(data, 8, 1, e);
      return net->arena().values().to_vector<float>();
    };
    const std::vector<float> a = trained([&] { return witness::defined_reference_model(name, ref.vocab); });
    const std::vector<float> b = trained([&] { return ref.build(); });
    ASSERT_EQ(a.size(), b.size());
    size_t differ = 0;
    for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
    EXPECT_EQ(differ, 0u) << "of " << a.size() << " weights";
    EXPECT_NE(a, [&] {  // and the steps moved them
      manual_seed(1);
      return ref.build()->arena().values().to_vector<float>();
    }());
  }
}

// A file fixes the sizes the reference models take from their data: a text of other characters, or
// token ids past the Embedding's input_dim, are refused in one sentence before anything is built.
TEST(KerasJson, DataThatDoesNotFitTheFilesSizesIsRefused) {
  const models::ModelInfo chars = models::load_keras_model(file_of("char_lstm"));
  EXPECT_EQ(chars.recipe.dataset, "chars");
  EXPECT_EQ(chars.vocab, 57);
  try {
    chars.build_for(51);
    ADD_FAILURE() << "51 characters for a model of 57";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the text has 51 distinct characters, but the model's one-hot input and its "
                                         "output take 57: a model for this text has input [40, 51] and Dense(51)"),
              std::string::npos) << e.what();
  }
  const models::ModelInfo ft = models::load_keras_model(file_of("imdb_fasttext"));
  EXPECT_EQ(ft.recipe.dataset, "imdb_bigrams");
  EXPECT_NO_THROW(ft.build_for(1000));  // fewer ids than the table has rows: fits
  try {
    ft.build_for(1250000);
    ADD_FAILURE() << "1,250,000 ids for a table of 1,200,000";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the data has token ids up to 1249999, but the Embedding's input_dim is 1200000"),
              std::string::npos) << e.what();
  }
}

TEST(KerasJson, TheRecipeComesFromCompileConfigElseKerasDefaults) {
  const models::ModelInfo cnn = models::load_keras_model(file_of("mnist_cnn"));  // Keras 3, compiled
  EXPECT_EQ(cnn.recipe.optimizer, "adadelta");
  EXPECT_DOUBLE_EQ(cnn.recipe.lr, 1.0);
  EXPECT_DOUBLE_EQ(cnn.recipe.rho, 0.95);
  EXPECT_NE(cnn.recipe_source.find("compile_config"), std::string::npos) << cnn.recipe_source;
  const models::ModelInfo mlp = models::load_keras_model(file_of("mnist_mlp"));  // Keras 2.2: none
  EXPECT_EQ(mlp.recipe.optimizer, "rmsprop");
  EXPECT_DOUBLE_EQ(mlp.recipe.lr, 1e-3);
  EXPECT_EQ(mlp.recipe.loss, train::Loss::CrossEntropy);  // from its softmax
  EXPECT_NE(mlp.recipe_source.find("defaults"), std::string::npos) << mlp.recipe_source;
  EXPECT_EQ(mlp.recipe.batch, 32);
  // A Keras 2 dict layout ({"layers": [...]} with an InputLayer's batch_input_shape) reads alike.
  json k2 = read_json("mnist_mlp");
  json layers = json::array({{{"class_name", "InputLayer"}, {"config", {{"batch_input_shape", {nullptr, 784}}, {"name", "in"}}}}});
  for (json l : k2["config"]) {
    l["config"].erase("batch_input_shape");
    layers.push_back(l);
  }
  k2["config"] = {{"name", "sequential"}, {"layers", layers}};
  EXPECT_EQ(models::keras_model(k2.dump(), "k2.json").expected_parameters, 669706);
}

// What loupe cannot honour is refused by name, never replaced.
TEST(KerasJson, WhatLoupeCannotHonourIsRefusedByName) {
  const json bil = read_json("imdb_bilstm"), cnn = read_json("mnist_cnn");
  auto expect = [](const json& j, const std::string& part) {
    const std::string e = test::keras_refusal(j);
    EXPECT_NE(e.find(part), std::string::npos) << "want '" << part << "' in: " << e;
  };
  json j = bil;
  j["config"]["layers"][2]["config"]["layer"]["config"]["recurrent_activation"] = "relu";
  expect(j, "recurrent_activation 'relu'; loupe's LSTM has sigmoid and hard_sigmoid");
  j = bil;
  j["config"]["layers"][2]["config"]["layer"]["config"]["recurrent_dropout"] = 1.0;
  expect(j, "recurrent_dropout 1.0; loupe takes a number from 0 to below 1");
  j = cnn;
  j["config"]["layers"][6]["config"]["activity_regularizer"] = {{"class_name", "L2"}, {"config", {{"l2", 0.01}}}};
  expect(j, "regularizer (activity_regularizer)");
  j = cnn;
  j["config"]["layers"][1]["class_name"] = "Conv3D";
  expect(j, "(Conv3D) is not a layer loupe has");
  j = cnn;
  j["config"]["layers"][1]["config"]["padding"] = "causal";
  expect(j, "padding 'causal'");
  j = cnn;
  j["class_name"] = "Subclassed";
  expect(j, "a Subclassed model; loupe reads Sequential and functional models (Model, Functional)");
  j["class_name"] = "Functional";  // a Sequential's layers, which name no calls
  expect(j, "layer 'conv1' (Conv2D) is not called on any tensor (its inbound_nodes are empty)");
  j = cnn;
  j["compile_config"]["loss"] = "mean_squared_error";  // on a softmax: a regression has no activation
  expect(j, "the loss mean_squared_error needs a last layer with no activation (a regression's outputs), not softmax");
  j["compile_config"]["loss"] = "hinge";
  expect(j, "the loss 'hinge' is not one loupe trains (categorical, sparse categorical or binary cross-entropy, mean "
            "squared error)");
  j = cnn;
  j["compile_config"]["loss"] = {{"class_name", "CategoricalCrossentropy"}, {"config", {{"label_smoothing", 0.1}}}};
  expect(j, "smooths its labels (label_smoothing 0.1); loupe's does not");
  j["compile_config"]["loss"] = {{"class_name", "CategoricalCrossentropy"}, {"config", {{"reduction", "sum"}}}};
  expect(j, "has reduction 'sum'; loupe's is the mean over the batch");
  j = cnn;
  const json bn = {{"class_name", "BatchNormalization"}, {"config", {{"name", "bn"}, {"synchronized", true}}}};
  j["config"]["layers"].insert(j["config"]["layers"].begin() + 2, bn);
  expect(j, "has synchronized true; loupe's normalises each GPU's batch on its own");
  j = cnn;
  j["compile_config"]["optimizer"]["class_name"] = "Nadam";
  expect(j, "'nadam' is not one loupe has");
  j = cnn;
  j["compile_config"]["optimizer"]["config"]["clipnorm"] = 1.0;
  expect(j, "clips gradients (clipnorm)");
  j = cnn;
  j["config"]["layers"][8]["config"]["activation"] = "leaky_relu";
  expect(j, "activation 'leaky_relu'");
  j = bil;
  j["config"]["layers"][4]["config"]["units"] = 3;
  expect(j, "sigmoid over 3 units");
  j = cnn;  // only layers without weights (found by fuzz_keras)
  j["config"]["layers"] = {j["config"]["layers"][0], j["config"]["layers"][3], j["config"]["layers"][5],
                           {{"class_name", "Activation"}, {"config", {{"name", "a"}, {"activation", "softmax"}}}}};
  expect(j, "the model has no weights to train");
  j = bil;  // an LSTM whose initialisation alone would take hours
  j["config"]["layers"][2]["config"]["layer"]["config"]["units"] = 15000;
  expect(j, "units 15000; loupe takes a positive whole number up to 2048");
  j = bil;
  j["config"]["layers"][1]["config"]["mask_zero"] = true;
  j["config"]["layers"][2]["config"]["layer"]["config"]["return_sequences"] = true;
  expect(j, "(Dense) receives a sequence's mask (an Embedding's mask_zero or a Masking layer)");
  j = cnn;
  j["config"]["layers"][0]["config"]["batch_shape"] = {nullptr, nullptr, 28, 1};
  expect(j, "not a positive whole number");
  expect(json::parse("[1, 2]"), "not a Keras model file");
  j = cnn;  // sizes that would take more memory than any model loupe builds, or overflow a count
  j["config"]["layers"][6]["config"]["units"] = int64_t(1) << 40;
  expect(j, "units 1099511627776; loupe takes a positive whole number up to 16777216");
  j["config"]["layers"][6]["config"]["units"] = 16000000;
  expect(j, "past 1000000000 parameters");
  j = cnn;
  j["config"]["layers"][1]["config"]["strides"] = {0, 0};
  expect(j, "strides [0,0]; loupe takes 1 to 4096");
  EXPECT_NE(test::keras_refusal(json::object()).find("not a Keras model file"), std::string::npos);
  EXPECT_THROW(models::keras_model("{not json", "m.json"), Error);
}

// --loss (models::with_loss): Keras's loss names; on a softmax or sigmoid last layer as Keras
// applies them, so a loss that does not fit it is refused, as in compile_config.
TEST(KerasJson, ALossByNameFitsTheLastLayer) {
  const models::ModelInfo cnn = models::load_keras_model(file_of("mnist_cnn"));  // softmax over 10
  EXPECT_EQ(models::with_loss(cnn, "sparse_categorical_crossentropy").recipe.loss, train::Loss::CrossEntropy);
  EXPECT_NE(models::with_loss(cnn, "categorical_crossentropy").recipe_source.find("the loss from --loss"), std::string::npos);
  auto message = [](const models::ModelInfo& m, const std::string& name) {
    try {
      models::with_loss(m, name);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(cnn, "binary_crossentropy").find("needs a last layer of one unit with sigmoid (or a softmax of two), "
                                                    "not softmax"), std::string::npos);
  EXPECT_NE(message(cnn, "mse").find("the loss mean_squared_error needs a last layer with no activation (a "
                                     "regression's outputs), not softmax"), std::string::npos);
  EXPECT_NE(message(cnn, "hinge").find("loupe trains categorical_crossentropy, sparse_categorical_crossentropy, "
                                       "binary_crossentropy or mean_squared_error"), std::string::npos);
  EXPECT_NE(message(models::find_model("mnist_mlp"), "mse").find("the reference models' data sets hold class labels"),
            std::string::npos);
  EXPECT_NE(message(models::load_keras_model(file_of("imdb_bilstm")), "mean_squared_error").find("this model reads text"),
            std::string::npos);
  // Keras's binary cross-entropy over a softmax of two units (as Keras 3 wrote a user's model) is
  // categorical cross-entropy for 0/1 labels: trained as that, and said.
  json two = read_json("mnist_cnn");
  two["config"]["layers"].back()["config"]["units"] = 2;
  two["compile_config"]["loss"] = {{"module", "keras.losses"}, {"class_name", "BinaryCrossentropy"},
                                   {"config", {{"from_logits", false}, {"label_smoothing", 0.0}, {"reduction", "sum_over_batch_size"}}}};
  const models::ModelInfo pair = models::keras_model(two.dump(), "two.json");
  EXPECT_EQ(pair.recipe.loss, train::Loss::CrossEntropy);
  EXPECT_NE(pair.recipe_source.find("binary_crossentropy over a softmax of 2 units, trained as the categorical "
                                    "cross-entropy it equals"), std::string::npos) << pair.recipe_source;
  // A reference model's last layer gives logits: its own loss by name is accepted.
  EXPECT_EQ(models::with_loss(models::find_model("imdb_bilstm"), "binary_crossentropy").recipe.loss,
            train::Loss::BinaryCrossEntropyWithLogits);
  // A linear last layer without a loss in the file: read, but no session until a loss is named.
  json j = read_json("mnist_cnn");
  j.erase("compile_config");
  j["config"]["layers"].back()["config"]["activation"] = "linear";
  const models::ModelInfo logits = models::keras_model(j.dump(), "logits.json");
  EXPECT_NE(logits.loss_missing.find("give --loss"), std::string::npos) << logits.loss_missing;
  try {
    models::Session s(logits);
    ADD_FAILURE() << "a session without a loss";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), logits.loss_missing);
  }
  const models::ModelInfo named = models::with_loss(logits, "categorical_crossentropy");
  EXPECT_TRUE(named.loss_missing.empty());
  EXPECT_EQ(named.recipe.loss, train::Loss::CrossEntropy);
  EXPECT_EQ(models::Session(named).model().num_parameters(), 1199882);
  // Mean squared error: a regression on the file's own arrays, whether named by --loss or by the
  // file's compile_config, whatever data set the input's shape would have picked (MNIST's here).
  const models::ModelInfo reg = models::with_loss(logits, "mse");
  EXPECT_EQ(reg.recipe.loss, train::Loss::MeanSquaredError);
  EXPECT_EQ(reg.classes, 0);
  EXPECT_EQ(reg.recipe.dataset, "arrays");
  j["compile_config"] = {{"optimizer", {{"class_name", "Adam"}, {"config", {{"learning_rate", 0.01}}}}},
                         {"loss", "mean_squared_error"}};
  const models::ModelInfo own = models::keras_model(j.dump(), "regression.json");
  EXPECT_EQ(own.recipe.loss, train::Loss::MeanSquaredError);
  EXPECT_EQ(own.classes, 0);
  EXPECT_EQ(own.recipe.dataset, "arrays");
}

// --optimizer: the recipe's optimizer replaced, with Keras's defaults for the new one; what the
// data and the loss need stays.
TEST(KerasJson, AnOptimizerByNameTakesKerasDefaults) {
  const models::Recipe ref = models::find_model("cifar10_cnn").recipe;  // RMSprop 1e-4, decay 1e-6
  const models::Recipe adam = models::with_optimizer(ref, "adam");
  EXPECT_EQ(adam.optimizer, "adam");
  EXPECT_DOUBLE_EQ(adam.lr, 1e-3);
  EXPECT_DOUBLE_EQ(adam.decay, 0);
  EXPECT_DOUBLE_EQ(adam.beta2, 0.999);
  EXPECT_EQ(adam.batch, ref.batch);
  EXPECT_EQ(adam.dataset, ref.dataset);
  EXPECT_EQ(adam.augment, ref.augment);
  EXPECT_EQ(adam.loss, ref.loss);
  EXPECT_DOUBLE_EQ(models::with_optimizer(ref, "sgd").lr, 0.01);
  EXPECT_DOUBLE_EQ(models::with_optimizer(ref, "adadelta").rho, 0.95);
  EXPECT_THROW(models::with_optimizer(ref, "nadam"), Error);
}

// Output files named after a model file take its base name (`loupe profile runs/cnn.json` writes
// profile-cnn.csv, not a path inside a path); the modules take the Keras layers' names.
TEST(KerasJson, NamesComeFromTheFileAndItsLayers) {
  EXPECT_EQ(models::model_stem("runs/my_cnn.json"), "my_cnn");
  EXPECT_EQ(models::model_stem("my_cnn.json"), "my_cnn");
  EXPECT_EQ(models::model_stem("mnist_mlp"), "mnist_mlp");
  json j = read_json("mnist_cnn");  // as Keras names the layers itself (the file names them as loupe's tensors)
  j["config"]["layers"][1]["config"]["name"] = "conv2d";
  j["config"]["layers"][8]["config"]["name"] = "dense_1";
  auto m = models::keras_model(j.dump(), "m.json").build();
  std::vector<std::string> names;
  for (const auto& [name, p] : m->named_parameters()) names.push_back(name);
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.front(), "conv2d.weight");
  EXPECT_NE(std::find(names.begin(), names.end(), "dense_1.weight"), names.end()) << ::testing::PrintToString(names);
}
