// loupe tune (run/tune.h): the rows tried around a recipe, the command line of a row, and a whole
// tune of mnist_mlp on the CPU whose table holds what it measured.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/registry.h"
#include "run/tune.h"

using namespace loupe;

namespace {

run::RunConfig recipe(Device d) {
  run::RunConfig c;
  c.model = models::find_model("mnist_mlp");
  c.data = run::request_for(c.model);
  c.data.synthetic = true;
  c.device = d;
  c.batch = 128;
  c.trainer.precision = Precision::FP32;
  c.threads = 4;
  return c;
}

std::vector<std::string> settings(const std::vector<run::TuneRow>& rows) {
  std::vector<std::string> s;
  for (const run::TuneRow& r : rows) s.push_back(r.setting);
  return s;
}

const run::TuneRow& find(const std::vector<run::TuneRow>& rows, const std::string& setting) {
  auto it = std::find_if(rows.begin(), rows.end(), [&](const run::TuneRow& r) { return r.setting == setting; });
  if (it == rows.end()) throw Error("no row " + setting);
  return *it;
}

}  // namespace

TEST(TuneCandidates, CpuGridAroundTheRecipe) {
  instrument::EpochReport measured;
  const std::vector<run::TuneRow> rows = run::tune_candidates(recipe(kCPU), measured, 4);
  EXPECT_EQ(settings(rows), (std::vector<std::string>{"--batch 256", "--batch 512", "--resident", "--workers 8",
                                                      "--prefetch 8", "--threads 1", "--threads 2"}));
  const run::TuneRow& b = find(rows, "--batch 512");
  EXPECT_EQ(b.config.batch, 512);
  // The recipe's rate (mnist_mlp: RMSprop at 0.001) times four, set on its command line.
  EXPECT_EQ(b.options, (std::vector<std::string>{"--batch", "512", "--lr", "0.004"}));
  EXPECT_NE(b.note.find("--lr 0.004"), std::string::npos);
  EXPECT_TRUE(find(rows, "--resident").config.feed.resident);
  EXPECT_TRUE(find(rows, "--resident").note.empty());  // mnist_mlp's recipe does not augment
  EXPECT_EQ(find(rows, "--workers 8").config.feed.workers, 8);
  EXPECT_EQ(find(rows, "--threads 1").config.threads, 1);
  for (const run::TuneRow& r : rows) EXPECT_FALSE(r.advised) << r.setting;
}

TEST(TuneCandidates, GpuTriesPrecisionsAndTheAdvisedChangeFirst) {
  run::RunConfig c = recipe(Device{DeviceType::CUDA, 0});
  c.feed.resident = true;
  instrument::EpochReport measured;
  measured.advice = {"fp32 on a tensor-core GPU: try --precision fp16 or bf16"};
  const std::vector<run::TuneRow> rows = run::tune_candidates(c, measured, 4);
  // Advised first; resident data has no loader to change; a GPU run has no thread rows.
  EXPECT_EQ(settings(rows), (std::vector<std::string>{"--precision bf16", "--precision fp16", "--precision tf32",
                                                      "--batch 256", "--batch 512"}));
  EXPECT_TRUE(rows[0].advised);
  EXPECT_FALSE(rows[3].advised);
  EXPECT_EQ(*rows[1].config.trainer.precision, Precision::FP16);
}

TEST(TuneCandidates, ResidentDataSaysItDropsTheAugmentation) {
  run::RunConfig c = recipe(kCPU);
  c.data.augment = true;
  const std::vector<run::TuneRow> rows = run::tune_candidates(c, instrument::EpochReport{}, 2);
  EXPECT_NE(find(rows, "--resident").note.find("without the recipe's augmentation"), std::string::npos);
}

TEST(TuneCommand, ReplacesTheOptionsARowSets) {
  const std::vector<std::string> row{"--batch", "512", "--lr", "0.004"};
  EXPECT_EQ(run::tune_command("mnist_mlp", {"mnist_mlp", "-b", "64", "--device", "cuda", "--rounds", "3"}, row),
            "loupe train mnist_mlp --device cuda --batch 512 --lr 0.004");
  EXPECT_EQ(run::tune_command("mnist_mlp", {"--batch=64", "--lr", "0.1", "--objective", "energy", "mnist_mlp"}, row),
            "loupe train mnist_mlp --batch 512 --lr 0.004");
  // A path a shell would split is quoted; a flag takes no value with it.
  EXPECT_EQ(run::tune_command("my model.json", {"my model.json", "--resident", "--data", "a b/it's"}, {"--resident"}),
            "loupe train 'my model.json' --data 'a b/it'\\''s' --resident");
  // tune's own options are not train's: --metrics takes a value, --recipe-only none.
  EXPECT_EQ(run::tune_words("mnist_mlp", {"mnist_mlp", "--recipe-only", "--metrics", "m.jsonl", "--seed", "3"}, {"--resident"}),
            (std::vector<std::string>{"mnist_mlp", "--seed", "3", "--resident"}));
}

// Where each row is measured is the caller's (loupe tune: a process per row): the hook gets every
// row, the seconds asked for, and its report is the row's; --recipe-only measures the recipe alone.
TEST(Tune, AHookMeasuresEachRow) {
  run::TuneConfig c;
  c.base = recipe(kCPU);
  c.seconds = 0.25;
  c.rounds = 1;
  std::vector<std::string> seen;
  c.measure = [&seen](const run::TuneRow& row, double seconds) {
    EXPECT_EQ(seconds, 0.25);
    seen.push_back(row.setting);
    instrument::EpochReport r;
    r.batch = row.config.batch;
    r.precision = Precision::FP32;
    r.samples_per_sec = row.setting == "--resident" ? 3000 : 1000;  // the one change that gains
    r.train_seconds = 1;
    r.steps = 10;
    return r;
  };
  const run::TuneResult r = run::tune(c);
  ASSERT_EQ(seen.size(), r.rows.size());
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], r.rows[i].setting);
  EXPECT_EQ(r.rows[r.best].setting, "--resident");
  EXPECT_DOUBLE_EQ(r.rows[r.best].gain, 3.0);
  EXPECT_EQ(r.best_command, "loupe train mnist_mlp --resident");

  c.recipe_only = true;
  seen.clear();
  const run::TuneResult one = run::tune(c);
  EXPECT_EQ(seen, std::vector<std::string>{"recipe"});
  ASSERT_EQ(one.rows.size(), 1u);
  EXPECT_EQ(one.best, 0u);
}

// A row is its median round, not its fastest: a rerun of its command is a typical round. The CPU's
// default is three rounds; of two, the slower; the combined row's rounds are its own.
TEST(Tune, EachRowIsItsMedianRound) {
  run::TuneConfig c;
  c.base = recipe(kCPU);
  c.base.threads = 2;
  c.seconds = 0.25;
  std::map<std::string, int> calls;
  const std::map<std::string, std::vector<double>> speeds{
      {"recipe", {1000, 1600, 1100}}, {"--resident", {3000, 1300, 2400}}, {"--threads 1", {2600, 2800, 2200}}};
  c.measure = [&](const run::TuneRow& row, double) {
    const int n = calls[row.setting]++;
    instrument::EpochReport r;
    r.batch = row.config.batch;
    r.precision = Precision::FP32;
    auto it = speeds.find(row.setting);
    r.samples_per_sec = it == speeds.end() ? 500 : it->second[n % 3];
    r.train_seconds = 1;
    r.steps = 10;
    return r;
  };
  const run::TuneResult r = run::tune(c);
  EXPECT_EQ(calls["recipe"], 3);  // the CPU's default
  ASSERT_EQ(r.rows[0].rounds.size(), 3u);
  EXPECT_EQ(r.rows[0].rounds[1].samples_per_sec, 1600);  // in the order measured
  EXPECT_EQ(r.rows[0].report->samples_per_sec, 1100);
  const run::TuneRow* resident = nullptr;
  for (const run::TuneRow& row : r.rows)
    if (row.setting == "--resident") resident = &row;
  ASSERT_NE(resident, nullptr);
  EXPECT_EQ(resident->report->samples_per_sec, 2400);
  EXPECT_DOUBLE_EQ(resident->gain, 2400.0 / 1100);
  ASSERT_EQ(r.rows.back().kind, "combined");  // --resident with --threads 1 (2600)
  EXPECT_EQ(r.rows.back().rounds.size(), 3u);
  EXPECT_NE(run::tune_table(r).find("3 rounds differed by 60.0 %"), std::string::npos) << run::tune_table(r);

  c.rounds = 2;
  calls.clear();
  const run::TuneResult two = run::tune(c);
  EXPECT_EQ(two.rows[0].report->samples_per_sec, 1000);  // the slower of 1000 and 1600
}

TEST(TuneObjective, ParsesAndRefusesEnergyOnTheCpu) {
  EXPECT_EQ(run::parse_objective("energy"), run::TuneObjective::Energy);
  EXPECT_THROW(run::parse_objective("fast"), Error);
  run::TuneConfig c;
  c.base = recipe(kCPU);
  c.objective = run::TuneObjective::Energy;
  try {
    run::tune(c);
    FAIL() << "tuned for energy on the CPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no energy"), std::string::npos) << e.what();
  }
}

// A whole tune, short: every row measured, the gains against the recipe's figure, the best row the
// fastest, its command line `loupe train` with its options.
TEST(Tune, MeasuresEveryRowAndNamesTheBest) {
  run::TuneConfig c;
  c.base = recipe(kCPU);
  c.base.threads = 2;
  c.base.feed.workers = 1;
  c.args = {"mnist_mlp", "--synthetic", "--device", "cpu"};
  c.seconds = 0.05;
  c.rounds = 1;
  int seen = 0;
  c.on_row = [&seen](const run::TuneRow&) { ++seen; };
  const run::TuneResult r = run::tune(c);
  ASSERT_GE(r.rows.size(), 6u);
  EXPECT_EQ(r.rows[0].setting, "recipe");
  EXPECT_DOUBLE_EQ(r.rows[0].gain, 1.0);
  EXPECT_EQ(seen, int(r.rows.size()));
  for (const run::TuneRow& row : r.rows) {
    ASSERT_TRUE(row.report) << row.setting << ": " << row.skipped;
    EXPECT_GT(row.report->samples_per_sec, 0) << row.setting;
    EXPECT_NEAR(row.gain, row.report->samples_per_sec / r.rows[0].report->samples_per_sec, 1e-9);
    EXPECT_EQ(row.report->batch, row.config.batch) << row.setting;
    EXPECT_GE(row.report->steps, 5) << row.setting;
  }
  for (const run::TuneRow& row : r.rows) EXPECT_LE(row.report->samples_per_sec, r.rows[r.best].report->samples_per_sec);
  EXPECT_EQ(r.best_command.rfind("loupe train mnist_mlp --synthetic --device cpu", 0), 0u) << r.best_command;
  const std::string table = run::tune_table(r);
  EXPECT_NE(table.find("best (samples/s)"), std::string::npos) << table;
  EXPECT_NE(table.find("--threads 1"), std::string::npos) << table;
}

// A row measured by a command that fails says why, in the command's own last words.
TEST(Tune, ARowsProcessThatFailsSaysWhy) {
  const std::string script = (std::filesystem::temp_directory_path() / ("loupe_tune_fails_" + std::to_string(getpid()))).string();
  {
    std::ofstream f(script);
    f << "#!/bin/sh\necho 'loading the data'\necho 'loupe: no MNIST-format data in /nowhere' >&2\nexit 1\n";
  }
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);
  run::TuneConfig c;
  c.base = recipe(kCPU);
  c.args = {"mnist_mlp", "--data", "/nowhere"};
  c.measure = run::measure_by_command(script, c);
  try {
    run::tune(c);
    FAIL() << "a recipe whose process failed was measured";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "the recipe's run could not be measured: no MNIST-format data in /nowhere");
  }
  std::filesystem::remove(script);
}
