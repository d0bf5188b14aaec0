// loupe bench --gpus LIST: the figures read back from each run's records, the scaling efficiency,
// the table, and the command's refusals on a machine without the GPUs (the runs themselves are
// tests/check_launchers.sh's, on two GPUs).
#include <gtest/gtest.h>

#include "test_util.h"
#include "instrument/scaling.h"

namespace loupe::instrument {
namespace {

const char* kTwoRanks =
    R"({"epoch":1,"rank":0,"world_size":2,"samples_per_sec":100,"world_samples_per_sec":190,"nccl_share":0.5})" "\n"
    R"({"epoch":1,"rank":1,"world_size":2,"samples_per_sec":95,"world_samples_per_sec":null})" "\n"
    R"({"epoch":2,"rank":0,"world_size":2,"samples_per_sec":110,"world_samples_per_sec":210,"nccl_share":0.2,)"
    R"("nccl_exposed_share":0.05,"bus_gbps":40})" "\n"
    R"({"epoch":3,"rank":0,"world_size":2,"samples_per_sec":120,"world_samples_per_sec":230,"nccl_share":0.3,)"
    R"("nccl_exposed_share":0.07,"bus_gbps":50})" "\n"
    R"({"epoch":4,"rank":0,"world_size":2,"samples_per_sec":1,"world_samples_per_sec":220,"advice":["x"]})" "\n"
    R"({"epoch":5,"rank":0,"world_s)";  // a torn last line (a killed run) is skipped

TEST(BenchWorld, FiguresAreRankZerosMedianOverEpochsTwoOn) {
  WorldFigures f = world_figures(kTwoRanks, 2);
  ASSERT_TRUE(f.samples_per_sec) << f.why;
  EXPECT_DOUBLE_EQ(*f.samples_per_sec, 220);  // median of 210, 230, 220: epoch 1 and rank 1 left out
  EXPECT_DOUBLE_EQ(*f.nccl_share, 0.25);      // epochs 2 and 3 had it
  EXPECT_DOUBLE_EQ(*f.nccl_exposed_share, 0.06);
  EXPECT_DOUBLE_EQ(*f.bus_gbps, 45);
  // One GPU: samples_per_sec; a single epoch counts when it is all there is.
  f = world_figures(R"({"epoch":1,"samples_per_sec":80})", 1);
  ASSERT_TRUE(f.samples_per_sec);
  EXPECT_DOUBLE_EQ(*f.samples_per_sec, 80);
  EXPECT_FALSE(f.nccl_share);
  // Records of another world size, or none, are no figure, with the reason.
  f = world_figures(kTwoRanks, 4);
  EXPECT_FALSE(f.samples_per_sec);
  EXPECT_EQ(f.why, "the records are of a world of 2, not 4");
  EXPECT_EQ(world_figures("", 1).why, "no records");
  EXPECT_EQ(world_figures(R"({"epoch":1,"samples_per_sec":null})", 1).why, "no samples/s in the records");
}

TEST(BenchWorld, EfficiencyIsAgainstTheSmallestSizeMeasured) {
  std::vector<WorldRow> rows{{1, {}}, {2, {}}, {4, {}}};
  rows[0].f.samples_per_sec = 100;
  rows[1].f.samples_per_sec = 190;
  rows[2].f.samples_per_sec = 360;
  EXPECT_DOUBLE_EQ(*scaling_efficiency(rows, 0), 1.0);
  EXPECT_DOUBLE_EQ(*scaling_efficiency(rows, 1), 0.95);
  EXPECT_DOUBLE_EQ(*scaling_efficiency(rows, 2), 0.9);
  rows[0].f.samples_per_sec.reset();  // one GPU failed: 2 is the base now
  EXPECT_FALSE(scaling_efficiency(rows, 0));
  EXPECT_DOUBLE_EQ(*scaling_efficiency(rows, 2), 360.0 * 2 / (4 * 190));
}

TEST(BenchWorld, TheTableSaysEveryFigureOrNa) {
  std::vector<WorldRow> rows{{1, {}}, {2, {}}};
  rows[0].f.samples_per_sec = 1000000;
  rows[1].f.samples_per_sec = 1900000;
  rows[1].f.nccl_share = 0.123;
  rows[1].f.nccl_exposed_share = 0.04;
  rows[1].f.bus_gbps = 45.25;
  const std::string t = world_table(rows);
  EXPECT_NE(t.find("    1      1,000,000    1,000,000    100.0%                   -         -"), std::string::npos) << t;
  EXPECT_NE(t.find("    2      1,900,000      950,000     95.0%        12.3% (4.0%)      45.2"), std::string::npos) << t;
  rows[1].f = WorldFigures{};
  rows[1].f.why = "the run exited 1";
  const std::string u = world_table(rows);
  EXPECT_NE(u.find("    2            n/a          n/a       n/a                 n/a       n/a  (the run exited 1)"),
            std::string::npos) << u;
}

TEST(BenchWorld, TheCommandRefusesWhatItCannotMeasure) {
  auto run = [](const std::string& args) { return test::run_command(std::string(LOUPE_CLI) + " " + args); };
  auto [rc, log] = run("bench mnist_mlp --gpus 1,2 --device cpu");
  EXPECT_EQ(rc, 1);
  EXPECT_TRUE(log.find("--device cpu runs none") != std::string::npos || log.find("without NCCL") != std::string::npos)
      << log;
  std::tie(rc, log) = run("bench mnist_mlp --epochs 2 --device cpu");
  EXPECT_EQ(rc, 1);
  EXPECT_NE(log.find("--epochs with --gpus LIST only"), std::string::npos) << log;
  std::tie(rc, log) = run("bench mnist_mlp --gpus 1,0");
  EXPECT_EQ(rc, 2);  // a bad value: a usage error
  EXPECT_NE(log.find("--gpus"), std::string::npos) << log;
  std::tie(rc, log) = run("train mnist_mlp --gpus 1,2 --device cpu");
  EXPECT_EQ(rc, 2);  // train takes one number
}

}  // namespace
}  // namespace loupe::instrument
