// The figures the epoch report prints, each against an independent computation on the CPU
// (docs/testing.md, "What each test checks"): the running loss and correct count of the losses,
// an epoch's train loss and accuracy against a replay of its steps outside the trainer, the
// test loss and accuracy against an evaluation of their own, and samples/s, the FLOP rate, MFU,
// samples per joule and the cost from the record's own fields.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run/report.h"
#include "instrument/monitor.h"
#include "instrument/report.h"
#include "loader/sampler.h"
#include "loupe.h"
#include "models/registry.h"
#include "models/session.h"
#include "train/observers.h"
#include "train/trainer.h"
#include "test_util.h"

using namespace loupe;

namespace {

// Mean of -log softmax(row)[label] over the rows, in double on the host.
double host_cross_entropy(const std::vector<double>& logits, const std::vector<int32_t>& labels, int64_t C) {
  double sum = 0;
  for (size_t r = 0; r < labels.size(); ++r) {
    const double* x = &logits[r * size_t(C)];
    const double m = *std::max_element(x, x + C);
    double z = 0;
    for (int64_t c = 0; c < C; ++c) z += std::exp(x[c] - m);
    sum += m + std::log(z) - x[labels[r]];
  }
  return sum / double(labels.size());
}

// Rows whose first largest logit is the label's (a binary classifier's one logit: > 0 is class 1).
int64_t host_correct(const std::vector<double>& logits, const std::vector<int32_t>& labels, int64_t C) {
  int64_t n = 0;
  for (size_t r = 0; r < labels.size(); ++r) {
    const double* x = &logits[r * size_t(C)];
    const int64_t best = C == 1 ? int64_t(x[0] > 0) : int64_t(std::max_element(x, x + C) - x);
    n += best == labels[r];
  }
  return n;
}

std::vector<double> as_doubles(const Tensor& t) {
  const std::vector<float> f = to(t, DType::f32).to_vector<float>();
  return std::vector<double>(f.begin(), f.end());
}

}  // namespace

// cross_entropy_counted on the CPU: loss_sum grows by the batch weight times each call's mean loss
// and correct by its argmax == label count, from the values they held, over two calls of other
// sizes; the loss it returns is cross_entropy's. A weight of 1 (the sum of the batch means) made
// `loupe train` print a loss 128 times too small.
TEST(CountedLoss, CrossEntropyAddsTheBatchWeightedLossAndTheCount) {
  for (DType dt : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor sums = from_vector(std::vector<float>{1.5f, 3.f}, Shape{2});
    Tensor loss_sum = as_strided(sums, Shape{}, Shape{}, 0), correct = as_strided(sums, Shape{}, Shape{}, 1);
    double want_loss = 1.5, want_correct = 3;
    const int64_t C = 4;
    for (int64_t N : {6, 5}) {
      std::vector<float> v(size_t(N * C));
      for (size_t i = 0; i < v.size(); ++i) v[i] = 3.f * (philox_uniform(21, uint64_t(N), i) - 0.5f);
      std::vector<int32_t> lab(static_cast<size_t>(N));
      for (size_t i = 0; i < lab.size(); ++i) lab[i] = int32_t(i * 3 % C);
      Tensor logits = to(from_vector(v, Shape{N, C}), dt).requires_grad_(true);
      Tensor labels = from_vector(lab, Shape{N});
      const std::vector<double> x = as_doubles(logits);
      const double batch_loss = host_cross_entropy(x, lab, C);
      Tensor loss = cross_entropy_counted(logits, labels, loss_sum, correct, double(N));
      EXPECT_NEAR(loss.item(), batch_loss, 1e-6);
      EXPECT_EQ(loss.item(), cross_entropy(logits, labels).item());
      want_loss += double(N) * batch_loss;
      want_correct += double(host_correct(x, lab, C));
      EXPECT_NEAR(loss_sum.item(), want_loss, 1e-5 * want_loss) << "after the batch of " << N;
      EXPECT_EQ(correct.item(), want_correct) << "after the batch of " << N;
    }
    EXPECT_GT(want_correct, 3 + 1) << "the data gives the count something to count";
  }
}

namespace {

// A tiny data set for each loss: 4 features, and labels of 3 classes (cross-entropy), 0/1 (binary
// cross-entropy) or 2 float targets a sample (mean squared error).
struct Tiny {
  std::vector<float> x, y;
  std::vector<int32_t> labels;
  int64_t n = 37, outputs = 0;
  train::TensorDataset set() const {
    const Tensor xt = from_vector(x, Shape{n, 4});
    if (!y.empty()) return {xt, from_vector(y, Shape{n, outputs}), 1.0};
    return {xt, from_vector(labels, Shape{n}), 1.0};
  }
};

Tiny tiny(train::Loss loss) {
  Tiny t;
  t.outputs = loss == train::Loss::CrossEntropy ? 3 : loss == train::Loss::MeanSquaredError ? 2 : 1;
  for (int64_t i = 0; i < t.n; ++i) {
    for (int j = 0; j < 4; ++j) t.x.push_back(float((i * 37 + j * 11) % 64) / 32.0f - 1.0f);
    const float* r = &t.x[size_t(i * 4)];
    if (loss == train::Loss::MeanSquaredError) {
      t.y.push_back(2 * r[0] - r[1] + 0.25f);
      t.y.push_back(r[2] * r[3] - 1);
    } else {
      t.labels.push_back(loss == train::Loss::CrossEntropy ? int32_t(i % 3) : int32_t(r[0] + r[1] > 0));
    }
  }
  return t;
}

std::shared_ptr<nn::Sequential> linear_model(int64_t outputs) {
  manual_seed(5);
  auto m = std::make_shared<nn::Sequential>();
  m->add("fc", std::make_shared<nn::Linear>(4, outputs));
  return m;
}

// The loss of `logits` (double, on the host) for the samples `rows` of the tiny set.
double host_loss(train::Loss loss, const Tiny& t, const std::vector<double>& logits, const std::vector<int32_t>& rows) {
  if (loss == train::Loss::CrossEntropy) {
    std::vector<int32_t> lab;
    for (int32_t r : rows) lab.push_back(t.labels[size_t(r)]);
    return host_cross_entropy(logits, lab, t.outputs);
  }
  double sum = 0;
  for (size_t k = 0; k < rows.size(); ++k)
    for (int64_t o = 0; o < t.outputs; ++o) {
      const double z = logits[k * size_t(t.outputs) + size_t(o)];
      if (loss == train::Loss::MeanSquaredError) {
        const double d = z - t.y[size_t(rows[k] * t.outputs + o)];
        sum += d * d;
      } else {  // BCE(sigmoid(z), label), stably
        sum += std::max(z, 0.0) - z * t.labels[size_t(rows[k])] + std::log1p(std::exp(-std::fabs(z)));
      }
    }
  return sum / double(rows.size() * size_t(t.outputs));
}

// The rows' loss and correct count on the host from model m's logits.
std::pair<double, int64_t> host_figures(train::Loss loss, const Tiny& t, nn::Module& m, const std::vector<int32_t>& rows) {
  std::vector<float> xb;
  for (int32_t r : rows) xb.insert(xb.end(), t.x.begin() + r * 4, t.x.begin() + r * 4 + 4);
  NoGradGuard g;
  const std::vector<double> z = as_doubles(m(from_vector(xb, Shape{int64_t(rows.size()), 4})));
  std::vector<int32_t> lab;
  if (loss != train::Loss::MeanSquaredError)
    for (int32_t r : rows) lab.push_back(t.labels[size_t(r)]);
  return {host_loss(loss, t, z, rows), lab.empty() ? 0 : host_correct(z, lab, t.outputs)};
}

// One epoch of the trainer against the same steps replayed by hand on a copy of the model (same
// weights, the order the trainer takes, SGD): its train loss is the mean of the batch losses
// weighted by the batch (37 samples in batches of 8: the last has 5), its accuracy the count over
// the samples; the evaluation's loss and accuracy are the trained model's over the set.
void epoch_figures_are_the_replayed_steps(train::Loss loss) {
  const Tiny t = tiny(loss);
  const train::TensorDataset set = t.set();
  const int64_t batch = 8;
  const uint64_t seed = 9;
  auto trained = linear_model(t.outputs), replayed = linear_model(t.outputs);
  optim::SGD opt_t(trained->arena(), 0.3), opt_r(replayed->arena(), 0.3);
  train::TrainerOptions o;
  o.loss = loss;
  train::Trainer trainer(*trained, opt_t, kCPU, o);
  const train::EpochStats st = trainer.train_epoch(set, batch, seed, 1);

  const std::vector<int32_t> order = loader::epoch_permutation(t.n, seed, 1);
  double loss_sum = 0, first_loss = 0;
  int64_t correct = 0;
  for (int64_t start = 0; start < t.n; start += batch) {
    const std::vector<int32_t> rows(order.begin() + start, order.begin() + std::min(t.n, start + batch));
    const auto [l, c] = host_figures(loss, t, *replayed, rows);
    if (start == 0) first_loss = l;
    loss_sum += l * double(rows.size());
    correct += c;
    std::vector<float> xb;
    for (int32_t r : rows) xb.insert(xb.end(), t.x.begin() + r * 4, t.x.begin() + r * 4 + 4);
    const Tensor xt = from_vector(xb, Shape{int64_t(rows.size()), 4}), logits = (*replayed)(xt);
    Tensor step_loss;
    if (loss == train::Loss::MeanSquaredError) {
      std::vector<float> yb;
      for (int32_t r : rows) yb.insert(yb.end(), t.y.begin() + r * t.outputs, t.y.begin() + (r + 1) * t.outputs);
      step_loss = mean_squared_error(logits, from_vector(yb, Shape{int64_t(rows.size()), t.outputs}));
    } else {
      std::vector<int32_t> lab;
      for (int32_t r : rows) lab.push_back(t.labels[size_t(r)]);
      const Tensor lt = from_vector(lab, Shape{int64_t(lab.size())});
      step_loss = loss == train::Loss::CrossEntropy ? cross_entropy(logits, lt)
                                                     : binary_cross_entropy_with_logits(flatten(logits, 0), to(lt, DType::f32));
    }
    opt_r.zero_grad();
    backward(step_loss);
    opt_r.step();
  }
  ASSERT_EQ(st.samples, t.n);
  ASSERT_EQ(st.steps, 5);
  const std::vector<float> wt = trained->arena().values().to_vector<float>(), wr = replayed->arena().values().to_vector<float>();
  for (size_t i = 0; i < wt.size(); ++i) ASSERT_NEAR(wt[i], wr[i], 1e-5) << "the replay is not the trainer's epoch: weight " << i;
  const double want = loss_sum / double(t.n);
  EXPECT_NEAR(st.train_loss, want, 1e-5 * want);
  EXPECT_GT(std::fabs(first_loss - want), 1e-3 * want) << "the steps learned nothing: a mean of equal losses";
  if (has_accuracy(loss)) EXPECT_DOUBLE_EQ(st.train_acc, double(correct) / double(t.n));
  else EXPECT_TRUE(std::isnan(st.train_acc));

  std::vector<int32_t> all(static_cast<size_t>(t.n));
  for (int32_t i = 0; i < int32_t(t.n); ++i) all[size_t(i)] = i;
  const auto [test_loss, test_correct] = host_figures(loss, t, *trained, all);
  const double acc = trainer.evaluate(set, 10);  // four batches, the last of seven
  EXPECT_NEAR(trainer.last_eval_loss(), test_loss, 1e-5 * test_loss);
  EXPECT_GT(std::fabs(test_loss - st.train_loss), 1e-3 * test_loss) << "the evaluation is of the trained weights";
  if (has_accuracy(loss)) EXPECT_DOUBLE_EQ(acc, double(test_correct) / double(t.n));
}

}  // namespace

TEST(EpochFigures, CrossEntropyIsTheReplayedSteps) { epoch_figures_are_the_replayed_steps(train::Loss::CrossEntropy); }
TEST(EpochFigures, BinaryCrossEntropyIsTheReplayedSteps) {
  epoch_figures_are_the_replayed_steps(train::Loss::BinaryCrossEntropyWithLogits);
}
TEST(EpochFigures, MeanSquaredErrorIsTheReplayedSteps) {
  epoch_figures_are_the_replayed_steps(train::Loss::MeanSquaredError);
}

// The record takes the epoch's figures as they are: the test loss and accuracy are the
// evaluation's (not the training's, which differ), samples/s is the training samples over the
// training seconds alone (not over the epoch's, which include the evaluation), and an epoch
// without an evaluation has no test figures (null, never 0).
TEST(Record, TakesTheEpochsFiguresEachFromItsOwnSource) {
  train::EpochStats st;
  st.epoch = 2;
  st.steps = 8;
  st.samples = 1000;
  st.train_loss = 0.8125;
  st.train_acc = 0.75;
  st.test_loss = 0.625;
  st.test_acc = 0.6875;
  st.train_seconds = 2;
  st.eval_seconds = 0.5;
  const instrument::EpochReport r = run::epoch_report("mnist_mlp", kCPU, 125, st, 3);
  EXPECT_EQ(r.train_loss, 0.8125);
  EXPECT_EQ(r.train_acc, 0.75);
  ASSERT_TRUE(r.test_loss && r.test_acc);
  EXPECT_EQ(*r.test_loss, 0.625);
  EXPECT_EQ(*r.test_acc, 0.6875);
  EXPECT_EQ(r.samples, 1000);
  EXPECT_EQ(r.steps, 8);
  EXPECT_EQ(r.train_seconds, 2);
  EXPECT_EQ(r.epoch_seconds, 2.5);
  EXPECT_EQ(r.samples_per_sec, 500);
  st.test_loss = st.test_acc = -1;
  const instrument::EpochReport none = run::epoch_report("mnist_mlp", kCPU, 125, st, 3);
  EXPECT_FALSE(none.test_loss);
  EXPECT_FALSE(none.test_acc);
}

// Each derived figure from the figures it is made of: FLOPs per sample, the FLOP rate (FLOPs over
// the wall seconds, in TFLOP/s), MFU (that over the peak, a fraction), samples per joule (samples
// over the energy), the cost (the price per hour times the hours; per million samples over the
// training's); and none of them where what it is made of was not measured.
TEST(Record, DerivedFiguresFollowTheirFormulas) {
  instrument::EpochReport r;
  r.samples = 1000;
  r.train_seconds = 50;
  r.epoch_seconds = 100;
  r.peak_tflops = 8;
  r.energy_j = 400;
  instrument::derive_figures(r, 3e12, 1.5, 3.6);
  ASSERT_TRUE(r.flops_per_sample && r.achieved_tflops && r.mfu && r.samples_per_joule);
  EXPECT_DOUBLE_EQ(*r.flops_per_sample, 3e9);
  EXPECT_DOUBLE_EQ(*r.achieved_tflops, 2);
  EXPECT_DOUBLE_EQ(*r.mfu, 0.25);
  EXPECT_DOUBLE_EQ(*r.samples_per_joule, 2.5);
  ASSERT_TRUE(r.cost_epoch && r.cost_per_million_samples);
  EXPECT_DOUBLE_EQ(*r.cost_epoch, 0.1);
  EXPECT_DOUBLE_EQ(*r.cost_per_million_samples, 50);

  instrument::EpochReport cpu;  // no peak, no energy counter, no price
  cpu.samples = 1000;
  cpu.train_seconds = 50;
  instrument::derive_figures(cpu, 3e12, 1.5, -1);
  EXPECT_TRUE(cpu.achieved_tflops);
  EXPECT_FALSE(cpu.mfu);
  EXPECT_FALSE(cpu.samples_per_joule);
  EXPECT_FALSE(cpu.cost_epoch || cpu.cost_per_million_samples);
  instrument::EpochReport nothing;
  nothing.energy_j = 0;  // a counter that did not tick: no samples/J, not infinity
  instrument::derive_figures(nothing, 0, 0, -1);
  EXPECT_FALSE(nothing.flops_per_sample || nothing.achieved_tflops || nothing.samples_per_joule);
}

// A CPU epoch's FLOP rate from its monitor: the FLOPs the record counts over a time between the
// trainer's training seconds (inside the monitor's window) and the whole call (around it).
TEST(Record, FlopRateOfACpuEpochIsItsFlopsOverItsSeconds) {
  manual_seed(1);
  models::SessionOptions so;
  so.device = kCPU;
  models::Session session(models::find_model("mnist_mlp"), so);
  const train::TensorDataset data{full(Shape{256, 28, 28}, 9, DType::u8), zeros(Shape{256}, DType::u8)};
  instrument::EpochMonitor mon(kCPU, {});
  train::Trainer& t = session.trainer();
  train::MonitorObserver timing(mon);
  t.observe(timing);
  const double t0 = now_s();
  const train::EpochStats st = t.train_epoch(data, 64, 1, 1);
  const double outer = now_s() - t0;
  instrument::EpochReport r = run::epoch_report("mnist_mlp", kCPU, 64, st, 1);
  mon.fill(r);
  ASSERT_TRUE(r.flops_per_sample && r.achieved_tflops);
  const double flops = *r.flops_per_sample * double(r.samples);
  // At least each weight's multiply-add in the forward pass and in its gradient, for every sample.
  EXPECT_GT(flops, 4.0 * (784 * 512 + 512 * 512 + 512 * 10) * 256);
  EXPECT_LE(*r.achieved_tflops * 1e12, flops / st.train_seconds * (1 + 1e-9));
  EXPECT_GE(*r.achieved_tflops * 1e12, flops / outer * (1 - 1e-9));
  EXPECT_FALSE(r.mfu) << "no CPU peak: n/a, never 0";
}

namespace {

// The number after "key": in a JSON line; NaN when absent or null.
double json_number(const std::string& line, const std::string& key) {
  const size_t at = line.find("\"" + key + "\":");
  if (at == std::string::npos) return std::nan("");
  const char* p = line.c_str() + at + key.size() + 3;
  char* end = nullptr;
  const double v = std::strtod(p, &end);
  return end == p ? std::nan("") : v;
}

// The number after `label` in `text`; NaN when absent.
double number_after(const std::string& text, const std::string& label) {
  const size_t at = text.find(label);
  if (at == std::string::npos) return std::nan("");
  return std::strtod(text.c_str() + at + label.size(), nullptr);
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

}  // namespace

// Through the command, on Fashion-MNIST (tools/setup.sh installs it): the record's test loss and
// accuracy are what `loupe eval` of the epoch's checkpoint says on the same test set, the train
// loss is another figure, samples/s is the samples over the training seconds, and the printed
// epoch line shows the record's figures.
TEST(CliFigures, TrainRecordAgreesWithEvalAndThePrintedLine) {
  const std::string metrics = test::temp_path("figures.jsonl").string(), ck = test::temp_path("figures.ckpt").string();
  std::filesystem::remove(metrics);
  std::filesystem::remove(ck);
  // Ten steps, and an evaluation of at most ten batches of 1000: the whole test set of 10,000.
  const auto [rc, out] = test::run_command(std::string(LOUPE_CLI) + " train mnist_mlp --device cpu --plain --no-nvml "
                                           "--resident --batch 64 --max-steps 10 --epochs 1 --metrics " + metrics +
                                           " --save " + ck);
  ASSERT_EQ(rc, 0) << out;
  std::ifstream f(metrics);
  std::string line;
  ASSERT_TRUE(std::getline(f, line)) << out;
  const double train_loss = json_number(line, "train_loss"), test_loss = json_number(line, "test_loss"),
               test_acc = json_number(line, "test_acc"), train_acc = json_number(line, "train_acc");
  ASSERT_FALSE(std::isnan(test_loss) || std::isnan(test_acc) || std::isnan(train_loss)) << line;
  EXPECT_GT(std::fabs(test_loss - train_loss), 0.01) << line;
  EXPECT_EQ(json_number(line, "samples"), 640) << line;
  EXPECT_DOUBLE_EQ(json_number(line, "samples_per_sec"), 640 / json_number(line, "train_seconds")) << line;
  const size_t epoch = out.find("epoch 1/1  ");
  ASSERT_NE(epoch, std::string::npos) << out;
  const std::string printed = out.substr(epoch, out.find('\n', epoch) - epoch);
  EXPECT_NE(printed.find("  loss " + fmt("%.4f", train_loss) + "  train acc " + fmt("%.2f%%", 100 * train_acc) +
                         "  test loss " + fmt("%.4f", test_loss) + "  test acc " + fmt("%.2f%%", 100 * test_acc) + "  "),
            std::string::npos)
      << printed << "\n" << line;

  const auto [rc2, out2] =
      test::run_command(std::string(LOUPE_CLI) + " eval mnist_mlp --device cpu --checkpoint " + ck);
  ASSERT_EQ(rc2, 0) << out2;
  const double eval_acc = number_after(out2, "test accuracy "), eval_loss = number_after(out2, "test loss ");
  EXPECT_NEAR(eval_acc, 100 * test_acc, 0.005 + 1e-9) << out2 << line;
  EXPECT_NEAR(eval_loss, test_loss, 0.00005 + 1e-9) << out2 << line;
  std::filesystem::remove(metrics);
  std::filesystem::remove(ck);
}
