// The run in the library (run/run.h): a model written in C++ trained through it with the report's
// observers, the order of the observer points, what observers may ask through Control (stop, the
// learning rate, saves, the weights kept and restored), and the training controls (run/controls.h)
// judged on given reports and end to end.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "loupe.h"
#include "models/registry.h"
#include "models/session.h"
#include "run/controls.h"
#include "run/report.h"
#include "run/run.h"
#include "run/target.h"
#include "skip.h"
#include "train/checkpoint.h"
#include "test_util.h"

using namespace loupe;

namespace {

// A model a user writes: an MLP over MNIST-shaped images, its recipe, no file.
models::ModelInfo users_model() {
  models::ModelInfo m;
  m.name = "users_mlp";
  m.description = "MLP 784-32-10 written in the test";
  m.recipe.optimizer = "adam";
  m.recipe.lr = 1e-3;
  m.recipe.batch = 64;
  m.recipe.epochs = 3;
  m.recipe.dataset = "mnist";
  m.build_for = [](int64_t) {
    auto net = std::make_shared<nn::Sequential>();
    net->add("flatten", std::make_shared<nn::Flatten>())
        .add("fc1", std::make_shared<nn::Linear>(784, 32))
        .add("relu", std::make_shared<nn::ReLU>())
        .add("fc2", std::make_shared<nn::Linear>(32, 10));
    return net;
  };
  return m;
}

run::RunConfig quick_config(int epochs) {
  run::RunConfig c;
  c.model = users_model();
  c.data = run::request_for(c.model);
  c.data.synthetic = true;
  c.data.synthetic_kind = data::SyntheticKind::Learnable;
  c.feed.resident = true;
  c.device = kCPU;
  c.epochs = epochs;
  c.max_steps = 8;
  c.monitor.nvml = false;
  return c;
}

// Four epochs whose test loss does not fall every epoch: labels without a pattern, learnt by heart
// at a large rate, so that the best epoch is not the last.
run::RunConfig overfitting_config() {
  run::RunConfig c = quick_config(4);
  c.data.synthetic_kind = data::SyntheticKind::Random;
  c.model.recipe.lr = 0.01;
  return c;
}

std::string read_all(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  return s;
}

instrument::EpochReport report(int epoch, int epochs, double test_loss, double test_acc, double lr = 1e-3) {
  instrument::EpochReport r;
  r.epoch = epoch;
  r.epochs = epochs;
  r.test_loss = test_loss;
  r.test_acc = test_acc;
  r.lr = lr;
  return r;
}

// The points each observer saw, in order.
struct Recorder final : train::Observer {
  std::vector<std::string> seen;
  void run_begin(const run::RunInfo&) override { seen.push_back("run_begin"); }
  void epoch_begin(const train::StepInfo& i, train::Control&) override { seen.push_back("epoch_begin " + std::to_string(i.epoch)); }
  void step_begin(const train::StepInfo&, train::Control&) override { seen.push_back("step_begin"); }
  void fetch_begin(const train::StepInfo&) override { seen.push_back("fetch_begin"); }
  void batch_ready(const train::StepInfo&) override { seen.push_back("batch_ready"); }
  void step_issued(const train::StepInfo&) override { seen.push_back("step_issued"); }
  void step_end(const train::StepInfo&, train::Control&) override { seen.push_back("step_end"); }
  void steps_end(const train::StepInfo&) override { seen.push_back("steps_end"); }
  void train_end(const train::EpochStats&) override { seen.push_back("train_end"); }
  void eval_batch(int64_t, int64_t) override { seen.push_back("eval_batch"); }
  void epoch_end(const instrument::EpochReport& r, train::Control&) override {
    seen.push_back("epoch_end " + std::to_string(r.epoch));
  }
  void run_end(const run::RunResult&) override { seen.push_back("run_end"); }
};

}  // namespace

// The README's promise: a model written in C++ gets loupe's report from the library, the header
// and each epoch's lines as `loupe train` prints them, and every epoch's record.
TEST(Run, AUsersModelGetsTheWholeReport) {
  run::Run r(quick_config(2));
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  r.add(std::make_shared<run::ReportPrinter>(out));
  const run::RunResult res = r.run();
  const std::string text = read_all(out);
  std::fclose(out);
  EXPECT_EQ(res.end, run::RunResult::End::Finished);
  EXPECT_EQ(res.epochs_done, 2);
  ASSERT_EQ(res.reports.size(), 2u);
  EXPECT_EQ(res.reports[1].epoch, 2);
  EXPECT_EQ(res.reports[1].model, "users_mlp");
  EXPECT_GT(res.reports[1].samples_per_sec, 0);
  EXPECT_TRUE(res.reports[1].test_acc.has_value());
  EXPECT_FALSE(res.reports[1].advice.empty());
  for (const char* line : {"model   users_mlp: MLP 784-32-10 written in the test, 25,450 parameters", "device  cpu",
                           "data    synthetic", "recipe  Adam lr 0.001, batch 64, epochs 2", "epoch 1/2  loss ",
                           "epoch 2/2  loss ", "  step p50 "})
    EXPECT_NE(text.find(line), std::string::npos) << "no '" << line << "' in:\n" << text;
}

// The points come in the documented order: the run's around the trainer's, each step's in order.
TEST(Run, ObserversSeeThePointsInOrder) {
  run::RunConfig c = quick_config(1);
  c.max_steps = 2;
  run::Run r(c);
  auto rec = std::make_shared<Recorder>();
  r.add(rec);
  r.run();
  const std::vector<std::string> step{"step_begin", "fetch_begin", "batch_ready", "step_issued", "step_end"};
  std::vector<std::string> want{"run_begin", "epoch_begin 1"};
  for (int i = 0; i < 2; ++i) want.insert(want.end(), step.begin(), step.end());
  want.insert(want.end(), {"steps_end", "train_end", "eval_batch", "eval_batch", "epoch_end 1", "run_end"});
  EXPECT_EQ(rec->seen, want);
}

// An observer's stop ends the run after the epoch in which it asked, said in the result.
TEST(Run, AnObserversStopEndsTheRunAfterTheEpoch) {
  struct StopAfter2 final : train::Observer {
    void epoch_end(const instrument::EpochReport& r, train::Control& c) override {
      if (r.epoch == 2) c.stop("after epoch 2, as asked");
    }
  };
  run::Run r(quick_config(5));
  r.add(std::make_shared<StopAfter2>());
  const run::RunResult res = r.run();
  EXPECT_EQ(res.end, run::RunResult::End::Stopped);
  EXPECT_EQ(res.epochs_done, 2);
  EXPECT_EQ(res.message, "after epoch 2, as asked");
}

// A learning rate an observer sets is the optimizer's from the next update, and the report says so.
TEST(Run, AnObserversLearningRateIsAppliedAndSaid) {
  struct Halve final : train::Observer {
    void epoch_end(const instrument::EpochReport& r, train::Control& c) override { c.set_lr(*r.lr / 2, "halved"); }
  };
  struct Notes final : train::Observer {
    std::vector<std::string> lines;
    void note(const std::string& l) override { lines.push_back(l); }
  };
  run::Run r(quick_config(2));
  r.add(std::make_shared<Halve>());
  auto notes = std::make_shared<Notes>();
  r.add(notes);
  const run::RunResult res = r.run();
  EXPECT_DOUBLE_EQ(*res.reports[0].lr, 1e-3);
  EXPECT_DOUBLE_EQ(*res.reports[1].lr, 5e-4);
  EXPECT_DOUBLE_EQ(r.session().optimizer().lr(), 2.5e-4);
  EXPECT_NE(std::find(notes->lines.begin(), notes->lines.end(), "lr 0.001 -> 0.0005 (halved)"), notes->lines.end());
}

// Early stopping judged on given reports: it keeps each better epoch's weights, stops after
// `patience` epochs without one, and asks for the best weights back at the end in any case.
TEST(Controls, EarlyStoppingStopsAtTheRightEpoch) {
  run::EarlyStopping es(run::parse_early_stop("2"));
  train::Control c;
  const double losses[] = {1.0, 0.8, 0.85, 0.79, 0.9, 0.95, 0.7};
  int stopped_at = 0, kept = 0;
  for (int e = 1; e <= 7 && !stopped_at; ++e) {
    es.epoch_end(report(e, 7, losses[e - 1], 0.5), c);
    if (c.take_keep()) kept = e;
    if (c.stopped_by_observer()) stopped_at = e;
  }
  EXPECT_EQ(stopped_at, 6);  // 0.79 at epoch 4, then two epochs without better
  EXPECT_EQ(kept, 4);
  EXPECT_EQ(es.best_epoch(), 4);
  EXPECT_TRUE(c.restore_asked());
  EXPECT_EQ(c.stop_reason(), "at epoch 6: no better test loss for 2 epochs (--early-stop 2)");
  // min_delta: an improvement must be larger; monitor=test_acc: higher is better.
  run::EarlyStopping acc(run::parse_early_stop("1,monitor=test_acc,min_delta=0.05"));
  train::Control c2;
  acc.epoch_end(report(1, 5, 1, 0.50), c2);
  acc.epoch_end(report(2, 5, 1, 0.53), c2);  // +0.03: not enough
  EXPECT_TRUE(c2.stopped_by_observer());
}

TEST(Controls, BadSpecsAreRefusedWithAnExample) {
  for (const char* spec : {"", "x", "-1", "2.5", "3,monitor=train_loss", "3,min_delta=-1", "3,patience_x=2"}) {
    try {
      run::parse_early_stop(spec);
      ADD_FAILURE() << "'" << spec << "' was taken";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("--early-stop"), std::string::npos) << m;
      EXPECT_NE(m.find("e.g. --early-stop 3"), std::string::npos) << m;
    }
  }
}

// Keras's ReduceLROnPlateau over the reports: the rate halves after `patience` epochs without a
// better test loss, and the note says why.
TEST(Controls, PlateauLowersTheRateAfterPatience) {
  run::LrPlateau p(train::parse_plateau("plateau:factor=0.5,patience=2"));
  train::Control c;
  const double losses[] = {1.0, 0.9, 0.95, 0.97};
  double lr = 1e-3;
  std::vector<int> changed;
  for (int e = 1; e <= 4; ++e) {
    p.epoch_end(report(e, 4, losses[e - 1], 0.5, lr), c);
    if (auto ch = c.take_lr()) {
      lr = ch->lr;
      changed.push_back(e);
      EXPECT_EQ(ch->why, "plateau: no better test loss for 2 epochs");
    }
  }
  EXPECT_EQ(changed, std::vector<int>{4});
  EXPECT_DOUBLE_EQ(lr, 5e-4);
}

// End to end: the weights at the run's end are those of the best epoch by test loss (compared
// with a copy taken at that epoch's end), not the last epoch's.
namespace {
// Early stopping on `dev`: the weights at the run's end are the best epoch's, bit for bit.
void expect_best_weights_restored(Device dev) {
  struct Snapshots final : train::Observer {
    run::Run* run = nullptr;
    std::vector<std::vector<float>> weights;
    void epoch_end(const instrument::EpochReport&, train::Control&) override {
      weights.push_back(run->session().model().arena().values().to_vector<float>());
    }
  };
  run::RunConfig c = overfitting_config();
  c.device = dev;
  run::Run r(c);
  auto es = std::make_shared<run::EarlyStopping>(run::parse_early_stop("10"));
  auto snaps = std::make_shared<Snapshots>();
  snaps->run = &r;
  r.add(snaps);
  r.add(es);
  const run::RunResult res = r.run();
  ASSERT_EQ(res.end, run::RunResult::End::Finished);
  int best = 1;
  for (size_t i = 0; i < res.reports.size(); ++i)
    if (*res.reports[i].test_loss < *res.reports[size_t(best - 1)].test_loss) best = int(i) + 1;
  ASSERT_NE(best, 4) << "the test needs a run whose last epoch is not its best";
  EXPECT_EQ(es->best_epoch(), best);
  EXPECT_EQ(r.session().model().arena().values().to_vector<float>(), snaps->weights[size_t(best - 1)]);
  EXPECT_NE(snaps->weights[size_t(best - 1)], snaps->weights[3]);
}
}  // namespace

TEST(Controls, EarlyStoppingRestoresTheBestEpochsWeights) { expect_best_weights_restored(kCPU); }

// The kept weights travel to the host and back: on a GPU too (CTest test_run_gpu).
TEST(ControlsGpu, EarlyStoppingRestoresTheBestEpochsWeights) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)";
  expect_best_weights_restored(kCUDA);
}

// --save-best: the file holds the epoch with the best test loss, whatever came after.
TEST(Controls, SaveBestKeepsTheBestEpochsCheckpoint) {
  const std::string path = testing::TempDir() + "/run_best.ckpt";
  std::filesystem::remove(path);
  run::RunConfig c = overfitting_config();
  c.save = path;
  c.save_best = true;
  run::Run r(c);
  const run::RunResult res = r.run();
  int best = 1;
  for (size_t i = 0; i < res.reports.size(); ++i)
    if (*res.reports[i].test_loss < *res.reports[size_t(best - 1)].test_loss) best = int(i) + 1;
  ASSERT_NE(best, 4) << "the test needs a run whose last epoch is not its best";
  models::Session s(c.model);
  EXPECT_EQ(s.load_weights(path).epoch, best);
  std::filesystem::remove(path);
}

// --target-acc: the run stops at the first epoch whose test accuracy reaches the target, having
// counted every epoch's time, energy and cost up to it; an epoch without its energy leaves the
// run's unset; the last epoch is not stopped (nothing is left of it).
TEST(TimeToAccuracy, TheRunStopsWhereTheTargetIsReached) {
  run::TargetAccuracy t(0.9, 7);
  train::Control c;
  const double accs[] = {0.5, 0.89, 0.9, 0.95};
  for (int e = 1; e <= 4 && !c.stopped_by_observer(); ++e) {
    instrument::EpochReport r = report(e, 4, 1, accs[e - 1]);
    r.epoch_seconds = e;  // 1 + 2 + 3 up to the third
    r.energy_j = 100.0 * e;
    r.cost_epoch = 0.5;
    t.epoch_end(r, c);
  }
  EXPECT_TRUE(c.stopped_by_observer());
  EXPECT_EQ(c.stop_reason(), "at epoch 3: test accuracy 90.00% reached the target 90.00% (--target-acc)");
  const run::TargetRun& o = t.outcome();
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(o.epoch, 3);
  EXPECT_DOUBLE_EQ(o.seconds, 6);
  EXPECT_DOUBLE_EQ(*o.joules, 600);
  EXPECT_DOUBLE_EQ(*o.cost, 1.5);
  run::TargetAccuracy cpu(0.99, 1);
  train::Control c2;
  for (int e = 1; e <= 2; ++e) {
    instrument::EpochReport r = report(e, 2, 1, 0.999);
    r.epoch_seconds = 2;
    cpu.epoch_end(r, c2);
  }
  EXPECT_EQ(cpu.outcome().epoch, 1);
  EXPECT_DOUBLE_EQ(cpu.outcome().seconds, 2);  // the epoch after it is not counted
  EXPECT_FALSE(cpu.outcome().joules.has_value());
  run::TargetAccuracy last(0.9, 1);
  train::Control c3;
  last.epoch_end(report(1, 1, 1, 0.95), c3);
  EXPECT_EQ(last.outcome().epoch, 1);
  EXPECT_FALSE(c3.stopped_by_observer());
  EXPECT_THROW(run::TargetAccuracy(1.5, 1), Error);
}

// Over seeds: the mean and sample standard deviation over the runs that reached the target, the
// misses counted, a figure one of them lacks unset; the line and the record say so.
TEST(TimeToAccuracy, TheSummaryIsOverTheRunsThatReachedIt) {
  auto make = [](uint64_t seed, int epoch, double s, std::optional<double> j) {
    run::TargetRun r;
    r.seed = seed, r.epoch = epoch, r.seconds = s, r.joules = j, r.accuracy = 0.9;
    return r;
  };
  const run::TargetSummary s = run::summarize(0.9, {make(1, 2, 10, 100), make(2, 3, 14, 300), make(3, 0, 99, 900)});
  EXPECT_EQ(s.reached, 2);
  ASSERT_TRUE(s.seconds && s.joules);
  EXPECT_DOUBLE_EQ(s.seconds->mean, 12);
  EXPECT_NEAR(s.seconds->sd, std::sqrt(8.0), 1e-12);  // (4 + 4) / (2 - 1)
  EXPECT_DOUBLE_EQ(s.joules->mean, 200);
  EXPECT_FALSE(s.cost.has_value());
  EXPECT_EQ(run::summary_line(s), "time to 90.00% test accuracy over 3 seeds (1-3): 12 ± 2.8 s, 200 ± 141 J; "
                                  "reached by 2 of 3, at epochs 2 3 -");
  const std::string json = run::summary_json(s);
  for (const char* part : {"\"record\": \"time_to_accuracy\"", "\"target_acc\": 0.9", "\"reached\": 2", "\"seconds_mean\": 12",
                           "\"cost_mean\": null", "{\"seed\": 3, \"epoch\": null"})
    EXPECT_NE(json.find(part), std::string::npos) << part << " in " << json;
  const run::TargetSummary none = run::summarize(0.9, {make(4, 0, 5, std::nullopt)});
  EXPECT_EQ(run::summary_line(none), "time to 90.00% test accuracy over 1 seed (4): no run reached it; reached by 0 of 1, at epochs -");
  const run::TargetSummary unmeasured = run::summarize(0.9, {make(1, 1, 5, 10), make(2, 1, 5, std::nullopt)});
  EXPECT_FALSE(unmeasured.joules.has_value());
}

// The library's series: a run per seed, each stopped at the target, the caller's observers on each.
TEST(TimeToAccuracy, SeedsAreRunsOfTheLibrary) {
  int runs = 0;
  std::vector<uint64_t> seeds;
  const run::TargetSummary s = run::time_to_accuracy(quick_config(3), 0.05, 2, [&](run::Run& r) {
    ++runs;
    seeds.push_back(r.config().seed);
  });
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(seeds, (std::vector<uint64_t>{1, 2}));
  ASSERT_EQ(s.runs.size(), 2u);
  EXPECT_EQ(s.reached, 2);
  for (const run::TargetRun& r : s.runs) {
    EXPECT_EQ(r.epoch, 1);  // 5 % of ten classes: the first epoch reaches it
    EXPECT_GT(r.seconds, 0);
  }
}
