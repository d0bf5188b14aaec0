// The training step as one CUDA graph (train/trainer.h; docs/performance.md, "The step as one CUDA
// graph"): a graphed run and an eager run from the same seed end with the same parameters,
// optimizer state, loss scaler and test accuracy, bit for bit where two eager runs agree bit for
// bit, otherwise within the spread of two eager runs. On the CPU, --graph on is refused and auto
// runs eagerly, saying why.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <memory>

#include "data/synthetic.h"
#include "instrument/monitor.h"
#include "loader/loader.h"
#include "loupe.h"
#include "models/keras_json.h"
#include "models/registry.h"
#include "models/session.h"
#include "train/observers.h"
#include "train/trainer.h"
#include "skip.h"

using namespace loupe;
using json = nlohmann::json;

namespace {

struct Run {
  std::vector<float> params, state, scaler;
  int64_t graph_steps = 0, skipped = 0, opt_steps = 0;
  int graph_kernels = 0;
  double loss = 0, test_acc = 0;
};

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (std::isnan(a[i]) != std::isnan(b[i])) return INFINITY;
    if (!std::isnan(a[i])) d = std::max(d, double(std::abs(a[i] - b[i])));
  }
  return d;
}

// Two epochs of `name` on synthetic data with a last, partial batch (eager after graphed steps:
// the generator's device word must follow), through the resident path or the loader.
// `overflow_before_epoch2` sets fp16's loss scale to 2^30 between the epochs, so that the first
// steps of epoch 2 overflow and are skipped, inside the graph's replays when graphed.
Run train(const models::ModelInfo& info, int64_t batch, Precision prec, train::GraphMode graph, bool loader,
          bool overflow_before_epoch2 = false) {
  const std::string& name = info.name;
  const int64_t n = batch * 4 + batch / 2, n_test = 1000 * 2;
  manual_seed(1);
  train::TensorDataset set, test;
  std::shared_ptr<loader::Dataset> host;
  int64_t vocab = 0;
  const bool text = info.recipe.dataset.rfind("imdb", 0) == 0;  // imdb, imdb_bigrams
  if (text) {
    data::SyntheticSequences s = data::synthetic_sequences(data::SyntheticKind::Learnable, n, n_test, 100, 20000);
    set = {from_vector(s.train_x, Shape{n, 100}), from_vector(s.train_y, Shape{n}), 1.0};
    test = {from_vector(s.test_x, Shape{n_test, 100}), from_vector(s.test_y, Shape{n_test}), 1.0};
    vocab = 20000;
  } else {
    Shape sample = name == "cifar10_cnn" ? Shape{3, 32, 32} : Shape{28, 28};
    data::SyntheticImages s = data::synthetic_images(data::SyntheticKind::Learnable, sample, n, n_test);
    Shape xs{n}, ts{n_test};
    for (int64_t d : sample) xs.push_back(d), ts.push_back(d);
    set = {from_vector(s.train_images, xs), from_vector(s.train_labels, Shape{n})};
    test = {from_vector(s.test_images, ts), from_vector(s.test_labels, Shape{n_test})};
    if (loader) host = std::make_shared<loader::ArrayDataset>(s.train_images, s.train_labels, sample);
  }
  set = set.to(kCUDA);
  test = test.to(kCUDA);
  // The model on the device, channels-last in fp16/bf16 where it has convolutions (as loupe train),
  // the recipe's optimizer and loss.
  models::SessionOptions so;
  so.device = kCUDA;
  so.trainer.precision = prec;
  so.trainer.graph = graph;
  so.vocab = vocab;
  models::Session session(info, so);
  nn::Module* model = &session.model();
  optim::Optimizer* opt = &session.optimizer();
  train::Trainer& t = session.trainer();
  std::unique_ptr<loader::DataLoader> dl;
  if (loader) {
    loader::LoaderOptions lo;
    lo.batch = batch;
    lo.workers = 2;
    lo.seed = 1;
    lo.device = kCUDA;
    dl = std::make_unique<loader::DataLoader>(host, lo);
  }
  Run r;
  for (int e = 1; e <= 2; ++e) {
    if (e == 2 && overflow_before_epoch2) {
      EXPECT_TRUE(t.scaler());
      fill_(slice(t.scaler()->state(), 0, optim::kScale, optim::kScale + 1), std::ldexp(1.0, 30));
    }
    train::EpochStats st = loader ? t.train_epoch(*dl, e) : t.train_epoch(set, batch, 1, e);
    EXPECT_EQ(st.steps, 5);
    r.graph_steps += st.graph_steps;
    r.skipped += st.skipped_steps;
    r.graph_kernels = st.graph_kernels;
    r.loss = st.train_loss;
    if (graph != train::GraphMode::Off) EXPECT_EQ(st.graph_why, "") << name;
  }
  r.test_acc = t.evaluate(test);
  r.params = model->arena().values().to_vector<float>();
  for (auto& [key, s] : opt->state()) {
    std::vector<float> v = s.to_vector<float>();
    r.state.insert(r.state.end(), v.begin(), v.end());
  }
  if (t.scaler()) r.scaler = t.scaler()->state().to_vector<float>();
  r.opt_steps = opt->steps();
  return r;
}

// Graphed against eager: identical where eager runs are identical, else within a few times their
// spread.
void check_same_as_eager(const models::ModelInfo& info, int64_t batch, Precision prec, bool loader, bool overflow = false) {
  const std::string& name = info.name;
  SCOPED_TRACE(name + " " + precision_name(prec) + (loader ? " (loader)" : " (resident)"));
  Run e1 = train(info, batch, prec, train::GraphMode::Off, loader, overflow);
  Run e2 = train(info, batch, prec, train::GraphMode::Off, loader, overflow);
  Run e3 = train(info, batch, prec, train::GraphMode::Off, loader, overflow);
  Run g = train(info, batch, prec, train::GraphMode::On, loader, overflow);
  EXPECT_EQ(e1.graph_steps, 0);
  // Epoch 1: 2 eager warm-up steps, then 2 replays (the capture's own launch included), the
  // partial batch eagerly; epoch 2: 4 replays and the partial batch.
  EXPECT_EQ(g.graph_steps, 6);
  EXPECT_GT(g.graph_kernels, 10);
  EXPECT_EQ(g.opt_steps, e1.opt_steps) << "the host's count follows the replays";
  EXPECT_EQ(g.scaler, e1.scaler) << "loss scale, growth tracker and skipped steps";
  if (overflow) EXPECT_GE(e1.skipped, 1) << "the injected overflow must have been skipped";
  EXPECT_EQ(g.skipped, e1.skipped);
  // The eager runs' spread: the largest distance of the three pairs.
  const double spread = std::max({max_diff(e1.params, e2.params), max_diff(e1.params, e3.params), max_diff(e2.params, e3.params)});
  const double spread_state = std::max({max_diff(e1.state, e2.state), max_diff(e1.state, e3.state), max_diff(e2.state, e3.state)});
  // The graph against the nearest eager run: each run times cuDNN's algorithms on first use and may
  // pick another, so one eager run can land nearer the graph than the others do.
  const double d = std::min({max_diff(g.params, e1.params), max_diff(g.params, e2.params), max_diff(g.params, e3.params)});
  const double d_state = std::min({max_diff(g.state, e1.state), max_diff(g.state, e2.state), max_diff(g.state, e3.state)});
  std::printf("%s %s: eager against eager %.3g (state %.3g), graph against the nearest eager %.3g (state %.3g); "
              "test accuracy %.4f / %.4f; %d kernels in the graph\n",
              name.c_str(), precision_name(prec), spread, spread_state, d, d_state, e1.test_acc, g.test_acc,
              g.graph_kernels);
  if (spread == 0 && spread_state == 0) {
    EXPECT_EQ(g.params, e1.params) << "bit-identical where eager runs are";
    EXPECT_EQ(g.state, e1.state);
    EXPECT_EQ(g.test_acc, e1.test_acc);
    EXPECT_EQ(g.loss, e1.loss);
  } else {
    // A distance between two runs is one draw of the nondeterministic kernels' noise (cuDNN's
    // atomics, its algorithms timed per run); the graph's is another, which can pass twice one
    // draw: hence three eager runs, the nearest of them, and a margin. A graph that computes
    // something else lands orders of magnitude away.
    EXPECT_LE(d, 4 * spread) << "outside the spread of two eager runs";
    EXPECT_LE(d_state, 4 * spread_state);
  }
}

void check_same_as_eager(const std::string& name, int64_t batch, Precision prec, bool loader, bool overflow = false) {
  check_same_as_eager(models::find_model(name), batch, prec, loader, overflow);
}

#define REQUIRE_GPU() \
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build): CUDA graphs not run"

}  // namespace

TEST(GraphGpu, MlpWithDropoutSameAsEager) {
  REQUIRE_GPU();
  check_same_as_eager("mnist_mlp", 128, Precision::FP32, false);
  check_same_as_eager("mnist_mlp", 128, Precision::FP32, true);  // the loader's slots into the graph's buffers
  check_same_as_eager("mnist_mlp", 128, Precision::BF16, false);
}

TEST(GraphGpu, Cifar10Fp16SkipsAnOverflowAsEager) {
  REQUIRE_GPU();
  check_same_as_eager("cifar10_cnn", 64, Precision::FP16, false, true);
}

// fastText's embedding checks its rows for inf and NaN as it adds them (autograd/source_check.h),
// inside the graph as eagerly, and the scaler's pass reads only the rest of the arena.
// The embedding's gradient checked at its source (optim/grad_scaler.h), under a graph: imdb_bilstm
// (imdb_fasttext has no layer that computes in 16 bits, so its fp16 step drops the scaler).
TEST(GraphGpu, EmbeddingFp16SkipsAnOverflowAsEager) {
  REQUIRE_GPU();
  check_same_as_eager("imdb_bilstm", 64, Precision::FP16, false, true);
}

TEST(GraphGpu, BiLstmWithAdamSameAsEager) {
  REQUIRE_GPU();
  check_same_as_eager("imdb_bilstm", 64, Precision::FP32, false);
  check_same_as_eager("imdb_bilstm", 64, Precision::BF16, false);  // loupe's own LSTM kernels
}

// A Keras functional model (nn::Graph): residual Adds around batch norm, a strided 'same'
// convolution (its uneven padding a step of its own), an Inception-style Concatenate of three
// branches, read by several nodes each; channels-last and its 16-bit copies in fp16.
TEST(GraphGpu, FunctionalModelSameAsEager) {
  REQUIRE_GPU();
  auto layer = [](const std::string& cls, const std::string& name, std::vector<std::string> reads, json c) {
    json call = json::array();
    for (const std::string& r : reads) call.push_back(json::array({r, 0, 0, json::object()}));
    c["name"] = name;
    return json{{"class_name", cls}, {"name", name}, {"config", c},
                {"inbound_nodes", reads.empty() ? json::array() : json::array({call})}};
  };
  auto conv = [&](const std::string& name, const std::string& from, int filters, int k, int stride, const char* act) {
    return layer("Conv2D", name, {from}, {{"filters", filters}, {"kernel_size", {k, k}}, {"strides", {stride, stride}},
                                          {"padding", "same"}, {"activation", act}});
  };
  const json layers = {layer("InputLayer", "img", {}, {{"batch_input_shape", {nullptr, 28, 28, 1}}}),
                       conv("c1", "img", 16, 3, 1, "relu"), conv("c2", "c1", 16, 3, 1, "linear"),
                       layer("BatchNormalization", "bn", {"c2"}, json::object()),
                       layer("Add", "add", {"c1", "bn"}, json::object()),
                       layer("Activation", "relu", {"add"}, {{"activation", "relu"}}),
                       conv("down", "relu", 32, 3, 2, "relu"), conv("b1", "down", 8, 1, 1, "relu"),
                       conv("b2", "down", 8, 3, 1, "relu"),
                       layer("MaxPooling2D", "b3", {"down"}, {{"pool_size", {3, 3}}, {"strides", {1, 1}}, {"padding", "same"}}),
                       layer("Concatenate", "mixed", {"b1", "b2", "b3"}, json::object()),
                       layer("GlobalAveragePooling2D", "gap", {"mixed"}, json::object()),
                       layer("Dense", "out", {"gap"}, {{"units", 10}, {"activation", "softmax"}})};
  const json file = {{"class_name", "Model"}, {"keras_version", "2.2.4"},
                     {"config", {{"layers", layers}, {"input_layers", {{"img", 0, 0}}}, {"output_layers", {{"out", 0, 0}}}}}};
  const models::ModelInfo info = models::keras_model(file.dump(), "functional.json");
  check_same_as_eager(info, 64, Precision::FP32, false);
  check_same_as_eager(info, 64, Precision::FP16, false);
}

TEST(GraphGpu, OnAndAutoSayWhatTheyDid) {
  REQUIRE_GPU();
  models::SessionOptions so;
  so.device = kCUDA;
  models::Session session(models::find_model("mnist_mlp"), so);
  train::Trainer& t = session.trainer();
  EXPECT_TRUE(t.graphs_on());
  EXPECT_NE(t.step_mode().find("CUDA graph from full batch 3"), std::string::npos) << t.step_mode();
  train::TensorDataset set{zeros(Shape{512, 28, 28}, DType::u8, kCUDA), zeros(Shape{512}, DType::u8, kCUDA)};
  train::EpochStats st = t.train_epoch(set, 128, 1, 1);
  EXPECT_EQ(st.graph_steps, 2);
  EXPECT_NE(st.graph_event.find("CUDA graph captured at step 3"), std::string::npos) << st.graph_event;
  EXPECT_NE(st.graph_event.find(std::to_string(st.graph_kernels) + " kernels)"), std::string::npos) << st.graph_event;
  train::TrainerOptions off;
  off.graph = train::GraphMode::Off;
  train::Trainer t2(session.model(), session.optimizer(), kCUDA, off);
  EXPECT_EQ(t2.step_mode(), "eager: --graph off");
}

// --busy's split of a graphed epoch (docs/profiling.md, "The graphed step, node by node: `loupe
// profile MODEL --graph on`"): the GPU ran the graph's kernels each step (and at most the
// one-thread kernel that advances the dropout's random base, outside the graph), the gaps between
// them are there and short, and busy + boundaries never exceed the window.
TEST(GraphGpu, BusySplitsAGraphedEpochIntoWorkAndBoundaries) {
  REQUIRE_GPU();
  models::SessionOptions so;
  so.device = kCUDA;
  models::Session session(models::find_model("mnist_mlp"), so);
  train::Trainer& t = session.trainer();
  instrument::MonitorOptions mo;
  mo.nvml = false;
  mo.busy = true;
  instrument::EpochMonitor mon(kCUDA, mo);
  train::MonitorObserver timing(mon);
  t.observe(timing);
  train::TensorDataset set{zeros(Shape{128 * 40, 28, 28}, DType::u8, kCUDA), zeros(Shape{128 * 40}, DType::u8, kCUDA)};
  t.train_epoch(set, 128, 1, 1);  // captures the graph
  const train::EpochStats st = t.train_epoch(set, 128, 1, 2);
  ASSERT_EQ(st.graph_steps, 40);
  instrument::EpochReport r;
  r.steps = st.steps;
  mon.fill(r);
  if (!r.gpu_busy_share) LOUPE_SKIP_NOT_HERE << "no CUPTI busy time here: " << r.busy_why;
  ASSERT_TRUE(r.gpu_boundary_share && r.gpu_kernels_per_step);
  EXPECT_GE(*r.gpu_kernels_per_step, st.graph_kernels);
  EXPECT_LE(*r.gpu_kernels_per_step, st.graph_kernels + 1.0);
  EXPECT_GT(*r.gpu_boundary_share, 0.0);
  EXPECT_LT(*r.gpu_boundary_share, *r.gpu_busy_share);
  EXPECT_LE(*r.gpu_busy_share + *r.gpu_boundary_share, 1.0);
}

// fp16 on a model with no layer wide enough for tensor cores (imdb_fasttext: its Dense(50 -> 1) is
// fed float32 and stays float32) runs float32 steps with no loss scaling, and says so; a model with
// 16-bit layers keeps its scaler. Both then train as graphed steps.
TEST(GraphGpu, Fp16WithNothingIn16BitsDropsTheScaler) {
  REQUIRE_GPU();
  for (const char* name : {"imdb_fasttext", "mnist_mlp"}) {
    const models::ModelInfo& info = models::find_model(name);
    const bool text = std::string(name) == "imdb_fasttext";
    models::SessionOptions so;
    so.device = kCUDA;
    so.trainer.precision = Precision::FP16;
    so.vocab = text ? 1000 : 0;
    models::Session session(info, so);
    nn::Module* model = &session.model();
    train::Trainer& t = session.trainer();
    train::TensorDataset set = text ? train::TensorDataset{ones(Shape{512, 40}, DType::f32, kCUDA),
                                                           zeros(Shape{512}, DType::u8, kCUDA), 1.0}
                                    : train::TensorDataset{zeros(Shape{512, 28, 28}, DType::u8, kCUDA),
                                                           zeros(Shape{512}, DType::u8, kCUDA)};
    train::EpochStats st = t.train_epoch(set, 128, 1, 1);
    EXPECT_EQ(st.graph_steps, 2) << name;
    if (text) {
      EXPECT_FALSE(st.loss_scale.has_value()) << "no 16-bit layer, so no loss scaler";
      EXPECT_NE(st.precision_event.find("no layer computes in 16 bits"), std::string::npos) << st.precision_event;
      EXPECT_FALSE(model->arena().compute_values().defined()) << "the unused 16-bit weight copy is gone";
    } else {
      EXPECT_TRUE(st.loss_scale.has_value());
      EXPECT_EQ(st.precision_event, "");
      EXPECT_TRUE(model->arena().compute_values().defined());
    }
  }
}

TEST(GraphCpu, OnIsRefusedAndAutoIsEager) {
  const models::ModelInfo& info = models::find_model("mnist_mlp");
  models::SessionOptions on;
  on.trainer.graph = train::GraphMode::On;
  try {
    models::Session refused(info, on);
    refused.trainer();
    ADD_FAILURE() << "--graph on on the CPU must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA graphs are a GPU feature"), std::string::npos) << e.what();
  }
  models::Session session(info);
  train::Trainer& t = session.trainer();
  EXPECT_FALSE(t.graphs_on());
  EXPECT_EQ(t.step_mode(), "eager: CUDA graphs are a GPU feature");
  train::TensorDataset set{zeros(Shape{20, 28, 28}, DType::u8), zeros(Shape{20}, DType::u8)};
  train::EpochStats st = t.train_epoch(set, 8, 1, 1);
  EXPECT_EQ(st.graph_steps, 0);
  EXPECT_EQ(st.graph_why, "CUDA graphs are a GPU feature");
  EXPECT_THROW(train::parse_graph_mode("maybe"), Error);
  EXPECT_EQ(train::parse_graph_mode("off"), train::GraphMode::Off);
}
