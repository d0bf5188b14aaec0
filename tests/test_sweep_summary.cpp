// The lines `loupe sweep` prints under its table (run::sweep_summary), on rows shaped like the
// H100 cifar10_cnn sweep of lab/benchmarks.md, and on a CPU run with no GPU figures.
#include <gtest/gtest.h>

#include "run/bench.h"

using namespace loupe;

namespace {
instrument::EpochReport row(const std::string& prec, int64_t batch, double sps, std::optional<double> busy,
                            std::optional<double> util) {
  instrument::EpochReport r;
  r.precision = parse_precision(prec);
  r.batch = batch;
  r.samples_per_sec = sps;
  if (busy) r.gpu_busy_share = *busy;
  if (util) r.gpu_util_mean = *util;
  return r;
}
}  // namespace

TEST(SweepSummary, NamesTheFastestTheSaturationAndThePrecisionRatios) {
  std::vector<instrument::EpochReport> rows{
      row("fp32", 32, 28286, 0.44, 56), row("fp32", 128, 81938, 0.59, 70), row("fp32", 512, 167829, 0.92, 96),
      row("fp32", 2048, 146785, 0.98, 100), row("fp16", 2048, 445927, 0.94, 97), row("fp16", 32, 31097, 0.32, 51),
      row("fp16", 512, 334764, 0.84, 98)};
  std::string s = run::sweep_summary(rows);
  EXPECT_NE(s.find("fastest: fp16 at batch 2048, 445,927 samples/s\n"), std::string::npos) << s;
  EXPECT_NE(s.find("fp32: batch 32 -> 2048 multiplies samples/s by 5.2; GPU busy (CUPTI) >= 90 % from batch 512\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("fp16: batch 32 -> 2048 multiplies samples/s by 14.3; GPU busy (CUPTI) >= 90 % from batch 2048\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("fp16 against fp32: 1.10x at 32, 1.99x at 512, 3.04x at 2048\n"), std::string::npos) << s;
}

TEST(SweepSummary, FallsBackToNvmlAndSaysWhenNothingSaturates) {
  std::string s = run::sweep_summary({row("fp32", 32, 70692, {}, 42), row("fp32", 2048, 4409349, {}, 79)});
  EXPECT_NE(s.find("NVML utilisation below 90 % at every batch, at most 79 % (batch 2048)"), std::string::npos) << s;
  s = run::sweep_summary({row("fp32", 16, 3000, {}, {}), row("fp32", 64, 6000, {}, {})});
  EXPECT_NE(s.find("fp32: batch 16 -> 64 multiplies samples/s by 2.0; GPU figures n/a\n"), std::string::npos) << s;
  // On the CPU: its own figures at the smallest and the largest batch.
  std::vector<instrument::EpochReport> cpu{row("fp32", 16, 3000, {}, {}), row("fp32", 64, 6000, {}, {})};
  for (auto& r : cpu) r.device = "cpu";
  cpu[0].achieved_tflops = 0.0119, cpu[0].host_cpu_util = 1.63;
  cpu[1].achieved_tflops = 0.0435, cpu[1].host_cpu_util = 1.92;
  s = run::sweep_summary(cpu);
  EXPECT_NE(s.find("fp32: batch 16 -> 64 multiplies samples/s by 2.0; GPU figures n/a; GFLOP/s 11.9 -> 43.5, "
                   "cores used 1.6 -> 1.9\n"),
            std::string::npos)
      << s;
  EXPECT_EQ(run::sweep_summary({}), "");
}
