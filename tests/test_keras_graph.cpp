// Keras functional models (models/keras_graph.h, docs/keras.md "Functional models"): the three
// layouts of a call read into one graph, the graph built as nn::Graph (or nn::Sequential for a
// chain) and trained, and every graph that is not one refused by name. Their maths against NumPy
// is test_keras_reference's (residual, inception, merges).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/random.h"
#include "keras_test.h"
#include "loupe.h"
#include "models/keras_json.h"
#include "run/data.h"
#include "run/run.h"
#include "nn/graph.h"
#include "skip.h"

using namespace loupe;
using json = nlohmann::json;

namespace {
enum class Layout { Keras2, Keras3, Bare };

// One layer of a functional model: class, name, config and the layers its call reads.
struct L {
  std::string cls, name;
  json config;
  std::vector<std::string> reads;
};

json call_of(const std::vector<std::string>& reads, Layout layout) {
  if (reads.empty()) return json::array();
  if (layout == Layout::Bare && reads.size() == 1) return json::array({reads[0], 0, 0});
  if (layout != Layout::Keras3) {
    json call = json::array();
    for (const std::string& r : reads) call.push_back(json::array({r, 0, 0, json::object()}));
    return json::array({call});
  }
  json tensors = json::array();
  for (const std::string& r : reads)
    tensors.push_back({{"class_name", "__keras_tensor__"},
                       {"config", {{"shape", nullptr}, {"dtype", "float32"}, {"keras_history", {r, 0, 0}}}}});
  json args = reads.size() == 1 ? tensors : json::array({tensors});
  return json::array({{{"args", args}, {"kwargs", json::object()}}});
}

json functional(const std::vector<L>& layers, Layout layout = Layout::Keras2) {
  json list = json::array();
  for (const L& l : layers) {
    json c = l.config;
    c["name"] = l.name;
    list.push_back({{"class_name", l.cls}, {"name", l.name}, {"config", c}, {"inbound_nodes", call_of(l.reads, layout)}});
  }
  const bool k3 = layout == Layout::Keras3;
  json root = {{"class_name", k3 ? "Functional" : "Model"},
               {"config",
                {{"name", "model"}, {"layers", list}, {"input_layers", {{layers.front().name, 0, 0}}},
                 {"output_layers", {{layers.back().name, 0, 0}}}}}};
  if (k3) root["module"] = "keras.src.models.functional";
  else root["keras_version"] = "2.2.4";
  return root;
}

L input(const std::string& name, std::vector<int64_t> shape) {
  json s = json::array({nullptr});
  for (int64_t d : shape) s.push_back(d);
  return {"InputLayer", name, {{"batch_input_shape", s}}, {}};
}
L dense(const std::string& name, int64_t units, const std::string& from, const std::string& act = "linear") {
  return {"Dense", name, {{"units", units}, {"activation", act}}, {from}};
}
L merge(const std::string& cls, const std::string& name, std::vector<std::string> reads) {
  return {cls, name, json::object(), std::move(reads)};
}

// A two-branch model: x -> a -> b, Add(a, b) -> out.
std::vector<L> residual() {
  return {input("x", {6}), dense("a", 5, "x", "relu"), dense("b", 5, "a", "tanh"), merge("Add", "sum", {"a", "b"}),
          dense("out", 3, "sum", "softmax")};
}

std::vector<float> output_of(const json& file) {
  manual_seed(11);
  const models::ModelInfo info = models::keras_model(file.dump(), "m.json");
  auto model = info.build();
  model->eval();
  manual_seed(12);
  NoGradGuard g;
  return model->forward(test::uniform01(Shape{4, 6})).to_vector<float>();
}

void expect_refusal(const json& file, const std::string& part) {
  const std::string e = test::keras_refusal(file);
  EXPECT_NE(e.find(part), std::string::npos) << "want '" << part << "' in: " << (e.empty() ? "(accepted)" : e);
}
}  // namespace

// Keras 2's list of [layer, node, tensor, kwargs], Keras 3's args of "__keras_tensor__" objects and
// the bare [layer, node, tensor] give one model: the same parameters and, from one seed, the same
// outputs; its description says it is functional, and the parameters are Keras's count.
TEST(KerasGraph, TheThreeLayoutsAreOneModel) {
  const std::vector<float> want = output_of(functional(residual()));
  EXPECT_EQ(output_of(functional(residual(), Layout::Keras3)), want);
  EXPECT_EQ(output_of(functional(residual(), Layout::Bare)), want);
  const models::ModelInfo info = models::keras_model(functional(residual()).dump(), "m.json");
  EXPECT_EQ(info.keras_parameters, (6 * 5 + 5) + (5 * 5 + 5) + (5 * 3 + 3));
  EXPECT_NE(info.description.find("Keras functional model"), std::string::npos) << info.description;
  auto model = info.build();
  EXPECT_NE(dynamic_cast<nn::Graph*>(model.get()), nullptr);
  EXPECT_EQ(model->num_parameters(), info.keras_parameters);
}

// A functional model that is a chain is an nn::Sequential (its fusions are Sequential's), and the
// layers' order in the file need not be the graph's.
TEST(KerasGraph, AChainIsSequentialAndTheFilesOrderNeedNotBeTheGraphs) {
  const std::vector<L> chain = {input("x", {6}), dense("a", 5, "x", "relu"), dense("out", 3, "a", "softmax")};
  EXPECT_NE(dynamic_cast<nn::Sequential*>(models::keras_model(functional(chain).dump(), "m.json").build().get()), nullptr);
  std::vector<L> shuffled = residual();
  std::swap(shuffled[1], shuffled[3]);  // the Add before the layers it reads
  json f = functional(shuffled);
  f["config"]["input_layers"] = {{"x", 0, 0}};
  f["config"]["output_layers"] = {{"out", 0, 0}};
  EXPECT_EQ(output_of(f), output_of(functional(residual())));
}

// A checkpoint of a functional model is tied to its edges too: the same layers merged otherwise
// are another architecture.
TEST(KerasGraph, TheIdentityHoldsTheEdges) {
  std::vector<L> other = residual();
  other[3].reads = {"b", "b"};
  const models::ModelInfo a = models::keras_model(functional(residual()).dump(), "m.json");
  const models::ModelInfo b = models::keras_model(functional(other).dump(), "m.json");
  EXPECT_EQ(a.expected_parameters, b.expected_parameters);
  EXPECT_NE(a.identity, b.identity);
}

// Training reaches every parameter through both branches of the Add.
TEST(KerasGraph, GradientsReachBothBranches) {
  const models::ModelInfo info = models::keras_model(functional(residual()).dump(), "m.json");
  auto model = info.build();
  model->to(kCPU);
  Tensor y = model->forward(test::uniform01(Shape{4, 6}));
  backward(sum(y * y));
  for (const auto& [name, p] : model->named_parameters()) {
    double total = 0;
    for (float g : p.grad().to_vector<float>()) total += std::fabs(g);
    EXPECT_GT(total, 0) << name;
  }
}

// What is not a graph loupe builds, each refused in one sentence naming the layer.
TEST(KerasGraph, GraphsThatAreNotOneAreRefusedByName) {
  auto edited = [](auto edit) {
    std::vector<L> g = residual();
    edit(g);
    return functional(g);
  };
  expect_refusal(edited([](std::vector<L>& g) { g[1].reads = {"b"}; }), "layer 'b' (Dense) is on a cycle of calls");
  // The first layer left over is past the cycle (out reads it): the one named is on it.
  json past = edited([](std::vector<L>& g) {
    g[2].reads = {"sum"};
    std::rotate(g.begin() + 1, g.end() - 1, g.end());
  });
  past["config"]["output_layers"] = {{"out", 0, 0}};
  expect_refusal(past, "layer 'sum' (Add) is on a cycle of calls");
  expect_refusal(edited([](std::vector<L>& g) { g[2].reads = {"nowhere"}; }),
                 "layer 'b' (Dense) reads 'nowhere', which is not a layer of the model");
  expect_refusal(edited([](std::vector<L>& g) { g[2].name = "a"; }), "two layers are named 'a'");
  expect_refusal(edited([](std::vector<L>& g) { g.insert(g.end() - 1, dense("spare", 2, "a")); }),
                 "layer 'spare' (Dense) does not lead to the model's output");
  expect_refusal(edited([](std::vector<L>& g) { g[2].reads = {"a", "x"}; }),
                 "layer 'b' (Dense) is called on 2 tensors; loupe's layers but the merges");
  expect_refusal(edited([](std::vector<L>& g) { g[2].reads = {}; }), "layer 'b' (Dense) is not called on any tensor");
  expect_refusal(edited([](std::vector<L>& g) { g.insert(g.begin() + 1, input("y", {6})); g[4].reads = {"a", "y"}; }),
                 "layer 'y' (InputLayer) is a second input; loupe trains a model of one input");
  expect_refusal(edited([](std::vector<L>& g) { g[3].cls = "Subtract"; g[3].reads = {"a", "b", "a"}; }),
                 "subtracts 3 tensors; Keras's Subtract takes two");
  expect_refusal(edited([](std::vector<L>& g) { g[2].config["units"] = 4; }),
                 "layer 'sum' (Add) merges [5] with [4]; loupe's merges take one shape");
  expect_refusal(edited([](std::vector<L>& g) { g[3].cls = "Concatenate"; g[3].config["axis"] = 0; }),
                 "layer 'sum' (Concatenate) has axis 0; loupe concatenates along a sample's dimension, 1 to 1 or -1 to -1");
  json shared = functional(residual());
  shared["config"]["layers"][2]["inbound_nodes"].push_back(shared["config"]["layers"][2]["inbound_nodes"][0]);
  expect_refusal(shared, "layer 'b' (Dense) is called 2 times (a shared layer)");
  json second = functional(residual());
  second["config"]["layers"][3]["inbound_nodes"][0][1][1] = 1;
  expect_refusal(second, "layer 'sum' (Add) reads call 1 of layer 'b' (a shared layer)");
  json outputs = functional(residual());
  outputs["config"]["layers"][3]["inbound_nodes"][0][1][2] = 1;
  expect_refusal(outputs, "layer 'sum' (Add) reads output 1 of layer 'b', which has 1");
  json kwargs = functional(residual());
  kwargs["config"]["layers"][2]["inbound_nodes"][0][0][3] = {{"training", false}};
  expect_refusal(kwargs, "layer 'b' (Dense) is called with the keyword argument 'training'");
  json two_out = functional(residual());
  two_out["config"]["output_layers"] = {{"out", 0, 0}, {"b", 0, 0}};
  expect_refusal(two_out, "the model has 2 outputs; loupe trains a model of one output");
  json not_input = functional(residual());
  not_input["config"]["input_layers"] = {{"a", 0, 0}};
  expect_refusal(not_input, "the model's input is layer 'a' (Dense), not an InputLayer");
  const json merge_in_sequential = json::parse(R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "Dense", "config": {"name": "d", "units": 2, "batch_input_shape": [null, 3]}},
      {"class_name": "Add", "config": {"name": "add"}}]}})");
  expect_refusal(merge_in_sequential, "layer 'add' (Add) merges tensors, which only a functional model's layers do");
}

// A recurrent layer's states (return_state) follow its output, and another recurrent layer may start
// from them (initial_state: Keras 2's tensors after the sequence, Keras 3's keyword); the model
// trains. What does not fit is refused naming the layer.
TEST(KerasGraph, RecurrentStatesAreReadOrRefusedByName) {
  auto model = [](const json& enc_config, Layout layout = Layout::Keras2) {
    return functional({input("x", {5, 3}), {"LSTM", "enc", enc_config, {"x"}}, dense("h", 4, "enc", "tanh"),
                       {"GRU", "dec", {{"units", 4}, {"reset_after", true}, {"recurrent_activation", "sigmoid"}}, {"x", "h"}},
                       dense("out", 2, "dec", "softmax")},
                      layout);
  };
  const json states = {{"units", 4}, {"return_state", true}, {"recurrent_activation", "sigmoid"}};
  json file = model(states);
  file["config"]["layers"][2]["inbound_nodes"][0][0][2] = 2;  // h reads the encoder's carry c
  const models::ModelInfo info = models::keras_model(file.dump(), "m.json");
  manual_seed(4);
  auto net = info.build();
  EXPECT_EQ(net->num_parameters(), info.expected_parameters);
  const Tensor y = net->forward(test::uniform01(Shape{2, 5, 3}));
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  backward(sum(y * y));
  for (const auto& [name, p] : net->named_parameters()) {  // the gradient reaches the encoder through c
    double total = 0;
    for (float g : p.grad().to_vector<float>()) total += std::fabs(g);
    EXPECT_GT(total, 0) << name;
  }
  json k3 = model(states, Layout::Keras3);
  json& dec = k3["config"]["layers"][3]["inbound_nodes"][0];
  dec["kwargs"]["initial_state"] = json::array({dec["args"][0][1]});
  dec["args"] = json::array({dec["args"][0][0]});
  k3["config"]["layers"][2]["inbound_nodes"][0]["args"][0]["config"]["keras_history"][2] = 2;
  EXPECT_EQ(models::keras_model(k3.dump(), "m.json").expected_parameters, info.expected_parameters);

  json third = file;
  third["config"]["layers"][2]["inbound_nodes"][0][0][2] = 3;
  expect_refusal(third, "layer 'h' (Dense) reads output 3 of layer 'enc', which has 3");
  json stateless = model({{"units", 4}, {"recurrent_activation", "sigmoid"}});
  stateless["config"]["layers"][2]["inbound_nodes"][0][0][2] = 2;
  expect_refusal(stateless, "layer 'h' (Dense) reads output 2 of layer 'enc', which has 1");
  json one_unit = file;
  one_unit["config"]["layers"][2]["config"]["units"] = 3;
  expect_refusal(one_unit, "layer 'dec' (GRU) is called with an initial state of [3] a sample; its states are [4]");
  json two = file;
  two["config"]["layers"][3]["inbound_nodes"][0].push_back(two["config"]["layers"][3]["inbound_nodes"][0][1]);
  expect_refusal(two, "layer 'dec' (GRU) is called with 2 initial states; its cell has one (h)");
  json mask = k3;
  mask["config"]["layers"][3]["inbound_nodes"][0]["kwargs"]["mask"] = true;
  expect_refusal(mask, "layer 'dec' (GRU) is called with the keyword argument 'mask'");
  const json in_sequential = json::parse(R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "LSTM", "config": {"name": "l", "units": 2, "return_state": true, "batch_input_shape": [null, 4, 3]}},
      {"class_name": "Dense", "config": {"name": "d", "units": 2}}]}})");
  expect_refusal(in_sequential, "layer 'l' (LSTM) returns its states (return_state), several tensors; a Sequential model's");
  const json bidirectional = json::parse(R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "Bidirectional", "config": {"name": "bi", "batch_input_shape": [null, 4, 3],
       "layer": {"class_name": "GRU", "config": {"name": "g", "units": 2, "return_state": true}}}},
      {"class_name": "Dense", "config": {"name": "d", "units": 2}}]}})");
  expect_refusal(bidirectional, "layer 'bi' (GRU) returns its states inside a Bidirectional");
  const json lstm_states = {{"class_name", "LSTM"}, {"config", {{"name", "l"}, {"units", 2}, {"return_state", true}}}};
  json wrapped = functional({input("x", {4, 5, 3}), {"TimeDistributed", "td", {{"layer", lstm_states}}, {"x"}},
                             {"Flatten", "flat", json::object(), {"td"}}, dense("out", 2, "flat", "softmax")});
  wrapped["config"]["layers"][2]["inbound_nodes"][0][0][2] = 1;  // the flatten reads the inner LSTM's h
  expect_refusal(wrapped, "layer 'td' (TimeDistributed) wraps a layer that returns its states (return_state); loupe's "
                          "TimeDistributed returns its output alone");
}

// A channels-last image and a convolution's channels-first output merge in one layout; the
// concatenated channels are the Keras axis -1.
TEST(KerasGraph, ImagesMergeInOneLayout) {
  const std::vector<L> g = {
      input("img", {4, 5, 2}),
      {"Conv2D", "conv", {{"filters", 2}, {"kernel_size", {3, 3}}, {"padding", "same"}}, {"img"}},
      merge("Add", "sum", {"img", "conv"}),
      merge("Concatenate", "cat", {"sum", "img"}),
      {"Flatten", "flat", json::object(), {"cat"}},
      dense("out", 3, "flat", "softmax")};
  const models::ModelInfo info = models::keras_model(functional(g).dump(), "m.json");
  EXPECT_EQ(info.keras_parameters, (3 * 3 * 2 * 2 + 2) + (4 * 5 * 4 * 3 + 3));
  auto model = info.build();
  model->eval();
  NoGradGuard ng;
  EXPECT_EQ(model->forward(test::uniform01(Shape{2, 4, 5, 2})).shape(), (Shape{2, 3}));
}

namespace {
// The Keras examples' model files (tests/keras_examples.py), written once for the process.
std::filesystem::path g_examples;
class ExampleFiles : public ::testing::Environment {
 public:
  void SetUp() override {
    const auto d = std::filesystem::temp_directory_path() / ("loupe_keras_examples_" + std::to_string(::getpid()));
    const std::string cmd = "/usr/bin/python3 '" + std::string(LOUPE_SOURCE_DIR) + "/tests/keras_examples.py' '" + d.string() + "'";
    if (std::system(cmd.c_str()) == 0) g_examples = d;
  }
  void TearDown() override {
    if (!g_examples.empty()) std::filesystem::remove_all(g_examples);
  }
};
const auto* const g_example_files = ::testing::AddGlobalTestEnvironment(new ExampleFiles);
const std::filesystem::path& examples() { return g_examples; }

// The model, its parameters' count as built, and one batch of two samples forward and backward:
// every parameter gets a gradient.
void builds_and_learns(const models::ModelInfo& info) {
  manual_seed(4);
  auto model = info.build();
  model->to(kCPU);
  EXPECT_EQ(model->num_parameters(), info.expected_parameters);
  // CIFAR-10's images arrive channels-first, MNIST's as [28, 28] (docs/keras.md, "What is read").
  ASSERT_TRUE(info.recipe.dataset == "cifar10" || info.recipe.dataset == "mnist") << info.recipe.dataset;
  Tensor y = model->forward(test::uniform01(info.recipe.dataset == "mnist" ? Shape{2, 28, 28} : Shape{2, 3, 32, 32}));
  EXPECT_EQ(y.shape(), (Shape{2, 10}));
  Tensor loss = sum(y * y);
  if (const Tensor p = model->penalty(); p.defined()) loss = loss + p;
  backward(loss);
  for (const auto& [name, p] : model->named_parameters()) {
    double total = 0;
    for (float g : p.grad().to_vector<float>()) total += std::fabs(g);
    EXPECT_GT(total, 0) << name;
  }
}
}  // namespace

// keras/examples/cifar10_resnet.py's ResNet20 v1 as Keras 2.2.4 writes it: Keras's summary count
// (274,442), he_normal kernels, l2(1e-4) on every convolution (the penalty of 21 kernels), strided
// 'same' convolutions, the shortcuts' Adds; it trains a step on the CPU. Its GPU run, graphed, is
// docs/keras.md's.
TEST(KerasExamples, ResNet20V1IsKerassModel) {
  if (examples().empty()) LOUPE_SKIP_NOT_HERE << "tests/keras_examples.py did not run (/usr/bin/python3)";
  const models::ModelInfo info = models::load_keras_model((examples() / "resnet20_v1.json").string());
  EXPECT_EQ(info.keras_parameters, 274442);
  EXPECT_EQ(info.expected_parameters, 273066);
  EXPECT_NE(info.description.find("72 layers"), std::string::npos) << info.description;
  EXPECT_NE(info.description.find("l2 on 21 layers"), std::string::npos) << info.description;
  EXPECT_EQ(info.recipe.dataset, "cifar10");
  builds_and_learns(info);
}

// Two Inception blocks (four branches concatenated on the channels, a 'same' max pooling among
// them): Keras's count, worked out from the layers' shapes, and a training step.
TEST(KerasExamples, InceptionBlocksAreKerassModel) {
  if (examples().empty()) LOUPE_SKIP_NOT_HERE << "tests/keras_examples.py did not run (/usr/bin/python3)";
  const models::ModelInfo info = models::load_keras_model((examples() / "inception.json").string());
  auto conv = [](int64_t k, int64_t in, int64_t out) { return k * k * in * out + out; };
  const int64_t block1 = conv(1, 32, 16) + conv(1, 32, 16) + conv(3, 16, 24) + conv(1, 32, 4) + conv(5, 4, 8) + conv(1, 32, 8);
  const int64_t block2 = conv(1, 56, 32) + conv(1, 56, 24) + conv(3, 24, 48) + conv(1, 56, 8) + conv(5, 8, 16) + conv(1, 56, 16);
  EXPECT_EQ(info.keras_parameters, conv(3, 3, 32) + block1 + block2 + 112 * 10 + 10);
  builds_and_learns(info);
}

// keras/examples/mnist_hierarchical_rnn.py (a functional model: TimeDistributed(LSTM(128)) over the
// rows, Keras 2.2's hard_sigmoid LSTMs) and mnist_irnn.py (SimpleRNN(100, relu) over the 784 pixels,
// RandomNormal and Identity initializers): Keras's counts, MNIST's data, a training step.
TEST(KerasExamples, TheMnistRecurrentExamplesAreKerass) {
  if (examples().empty()) LOUPE_SKIP_NOT_HERE << "tests/keras_examples.py did not run (/usr/bin/python3)";
  const models::ModelInfo rows = models::load_keras_model((examples() / "mnist_hierarchical_rnn.json").string());
  EXPECT_EQ(rows.keras_parameters, (4 * 128 * (1 + 128) + 4 * 128) + (4 * 128 * (128 + 128) + 4 * 128) + 128 * 10 + 10);
  EXPECT_EQ(rows.recipe.dataset, "mnist");
  builds_and_learns(rows);
  const models::ModelInfo irnn = models::load_keras_model((examples() / "mnist_irnn.json").string());
  EXPECT_EQ(irnn.keras_parameters, 100 * (1 + 100) + 100 + 100 * 10 + 10);
  EXPECT_EQ(irnn.recipe.dataset, "mnist");
  builds_and_learns(irnn);
}

// The Keras examples' text models from their files, trained on NumPy arrays of the examples' shapes
// (tests/keras_examples.py: imdb.load_data after pad_sequences, the sentiment in a few words):
// imdb_cnn.py (Conv1D, GlobalMaxPooling1D, Activation layers), imdb_lstm.py (Keras's dropout and
// recurrent dropout, a time length of None: the arrays' 80), and a Keras 3 GRU with mask_zero over
// reviews padded before. Keras's counts, and a model that learns the words: 2 epochs on the CPU.
TEST(KerasExamples, TheImdbExamplesTrainOnTheirNumPyArrays) {
  if (examples().empty()) LOUPE_SKIP_NOT_HERE << "tests/keras_examples.py did not run (/usr/bin/python3)";
  struct Example {
    const char* name;
    int64_t keras_parameters;
    const char* data_line;
  };
  const Example cases[] = {
      {"imdb_cnn", 5000 * 50 + (3 * 50 * 250 + 250) + (250 * 250 + 250) + (250 + 1), "[N, 400]"},
      {"imdb_lstm", 20000 * 128 + (4 * 128 * (128 + 128) + 4 * 128) + (128 + 1), "[N, 80]"},
      {"imdb_gru_mask", 10000 * 64 + (3 * 64 * (64 + 64) + 2 * 3 * 64) + (64 + 1), "[N, 80]"},
  };
  for (const Example& e : cases) {
    run::RunConfig c;
    c.model = models::load_keras_model((examples() / (std::string(e.name) + ".json")).string());
    EXPECT_EQ(c.model.keras_parameters, e.keras_parameters) << e.name;
    EXPECT_EQ(c.model.expected_parameters, e.keras_parameters) << e.name;
    c.data = run::request_for(c.model);
    c.data.dir = (examples() / (std::string(e.name) + "_data")).string();
    c.device = kCPU;
    c.epochs = 2;
    c.monitor.nvml = false;
    run::Run r(c);
    EXPECT_NE(r.data().description.find(std::string("int32 ") + e.data_line), std::string::npos) << r.data().description;
    const run::RunResult res = r.run();
    ASSERT_EQ(res.end, run::RunResult::End::Finished) << e.name << ": " << res.message;
    EXPECT_GE(res.last, 0.9) << e.name;
  }
}

// keras/examples/mnist_hierarchical_rnn.py and mnist_irnn.py from their files on NumPy arrays of
// MNIST's shape (tests/keras_examples.py: the label a bright bar's row): the row-by-row LSTMs learn
// it in 2 epochs; the IRNN at the example's learning rate (RMSprop 1e-6; its 784 relu steps diverge
// at Keras's default 1e-3) trains without diverging, its test loss falling every epoch.
TEST(KerasExamples, TheMnistRecurrentExamplesTrainOnNumPyArrays) {
  if (examples().empty()) LOUPE_SKIP_NOT_HERE << "tests/keras_examples.py did not run (/usr/bin/python3)";
  auto config = [](const std::string& name, int epochs) {
    run::RunConfig c;
    c.model = models::load_keras_model((examples() / (name + ".json")).string());
    c.data = run::request_for(c.model);
    c.data.dir = (examples() / "mnist_data").string();
    c.device = kCPU;
    c.epochs = epochs;
    c.monitor.nvml = false;
    return c;
  };
  run::Run rows(config("mnist_hierarchical_rnn", 2));
  const run::RunResult r = rows.run();
  ASSERT_EQ(r.end, run::RunResult::End::Finished) << r.message;
  EXPECT_GE(r.last, 0.5);
  run::RunConfig c = config("mnist_irnn", 3);
  c.lr = 1e-6;
  c.max_steps = 6;
  run::Run irnn(c);
  const run::RunResult i = irnn.run();
  ASSERT_EQ(i.end, run::RunResult::End::Finished) << i.message;
  ASSERT_EQ(i.reports.size(), 3u);
  for (size_t e = 1; e < 3; ++e) {
    ASSERT_TRUE(i.reports[e].test_loss && i.reports[e - 1].test_loss);
    EXPECT_LT(*i.reports[e].test_loss, *i.reports[e - 1].test_loss) << "epoch " << e + 1;
  }
}
