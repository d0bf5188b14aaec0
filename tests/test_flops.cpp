// FLOP counting: every op of the table (op_cases.h) counts exactly its analytic number of FLOPs,
// forward and backward, and so does one mnist_mlp training step (conventions in
// framework/core/flops.h); the epoch report divides it per sample.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <thread>

#include "core/flops.h"
#include "instrument/monitor.h"
#include "instrument/peak.h"
#include "loupe.h"
#include "models/registry.h"
#include "models/session.h"
#include "op_cases.h"
#include "train/observers.h"
#include "train/trainer.h"

using namespace loupe;

namespace {
// The analytic count for one step of mnist_mlp at batch B, written out layer by layer.
double mnist_mlp_step_flops(double B) {
  const double P = 669706;  // parameters
  double gemm_fwd = 2 * B * (784 * 512 + 512 * 512 + 512 * 10);
  double gemm_dx = 2 * B * (512 * 512 + 512 * 10);  // no gradient for the input images
  double gemm_dw = 2 * B * (784 * 512 + 512 * 512 + 512 * 10);
  double bias = B * (512 + 512 + 10);                // forward add; backward the same-size reduction
  double relu = 2 * B * 512, drop = 2 * B * 512;     // forward; backward the same again
  double ce = 4 * B * 10;                            // forward; backward the same again
  double accumulate = P;                             // gradients added into the arena
  double rmsprop = 6 * P;
  return gemm_fwd + gemm_dx + gemm_dw + 2 * bias + 2 * relu + 2 * drop + 2 * ce + accumulate + rmsprop;
}
}  // namespace

// The library's count for one step at two batch sizes (an odd one too), each against the formula.
TEST(Flops, OneMnistMlpStepMatchesTheAnalyticCount) {
  models::Session session(models::find_model("mnist_mlp"));
  nn::Module* model = &session.model();
  optim::Optimizer* opt = &session.optimizer();
  for (int64_t B : {int64_t(128), int64_t(37)}) {
    Tensor x = full(Shape{B, 28, 28}, 0.5);
    Tensor y = zeros(Shape{B}, DType::i32);
    double f0 = flops_counted();
    opt->zero_grad();
    backward(cross_entropy((*model)(x), y));
    opt->step();
    EXPECT_DOUBLE_EQ(flops_counted() - f0, mnist_mlp_step_flops(double(B))) << "batch " << B;
  }
}

// Every op of the table on the CPU at the test's shapes: the library's count for the forward
// pass, and for the backward pass from a dense output gradient, against the case's formula.
class OpFlops : public ::testing::TestWithParam<test::OpCase> {};

TEST_P(OpFlops, MatchTheAnalyticCount) {
  const test::OpCase& c = GetParam();
  ASSERT_TRUE(c.flops) << c.name << " has no FLOP count in op_cases.h";
  std::vector<Tensor> xs = test::make_inputs(c, DType::f64, 7);
  const double f0 = flops_counted();
  Tensor out = c.f(xs);
  const double f1 = flops_counted();
  backward(out, ones(out.shape(), out.dtype(), out.device()));
  const double f2 = flops_counted();
  const test::Flops want = c.flops(c.shapes());
  EXPECT_DOUBLE_EQ(f1 - f0, want.forward) << c.name << " forward";
  EXPECT_DOUBLE_EQ(f2 - f1, want.backward) << c.name << " backward";
}

// What the perf mode (tests/ops_perf.cpp) needs of every case: a FLOP count, a perf shape per
// input, no smaller than the test's, and a byte count.
TEST(OpTable, EveryCaseCarriesItsCountsAndAPerfShape) {
  for (const test::OpCase& c : test::op_cases()) {
    EXPECT_TRUE(c.flops) << c.name;
    ASSERT_EQ(c.perf.size(), c.inputs.size()) << c.name << ": one perf shape per input";
    for (size_t k = 0; k < c.perf.size(); ++k)
      EXPECT_GE(c.perf[k].numel(), c.inputs[k].shape.numel()) << c.name << " input " << k;
    EXPECT_GT(test::op_bytes(c.at_perf_shape(), Shape{1}, 4), 0) << c.name;
  }
  // The default: each input read once and the output written once; ids at 4 bytes each.
  const auto cases = test::op_cases();
  auto find = [&](const std::string& n) {
    return *std::find_if(cases.begin(), cases.end(), [&](const test::OpCase& c) { return c.name == n; });
  };
  EXPECT_EQ(test::op_bytes(find("relu"), Shape{6, 9}, 2), 2.0 * 54 * 2);
  EXPECT_EQ(test::op_bytes(find("cross_entropy"), Shape{}, 4), (60 + 6 + 1) * 4.0);
  EXPECT_EQ(test::op_bytes(find("embedding_2d"), Shape{3, 5, 4}, 4), 15 * 4 + 2 * 60 * 4.0) << "the rows it touches";
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpFlops, ::testing::ValuesIn(test::op_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(Flops, EpochReportGivesFlopsPerSample) {
  models::Session session(models::find_model("mnist_mlp"));
  train::TensorDataset data{full(Shape{256, 28, 28}, 9, DType::u8), zeros(Shape{256}, DType::u8)};
  instrument::EpochMonitor mon(kCPU, {});
  train::Trainer& t = session.trainer();
  train::MonitorObserver timing(mon);
  t.observe(timing);
  train::EpochStats st = t.train_epoch(data, 128, 1, 1);
  instrument::EpochReport r;
  r.samples = st.samples;
  r.train_seconds = st.train_seconds;
  mon.fill(r);
  ASSERT_TRUE(r.flops_per_sample.has_value());
  // The trainer's step also keeps the epoch's sums on the device: the correct count (1 per logit)
  // and two adds into the loss and accuracy sums.
  const double metrics = 128 * 10 + 2;
  EXPECT_DOUBLE_EQ(*r.flops_per_sample, (mnist_mlp_step_flops(128) + metrics) / 128);
  EXPECT_TRUE(r.achieved_tflops.has_value());
  EXPECT_FALSE(r.mfu.has_value());  // no CPU peak table: n/a, not 0
  EXPECT_FALSE(r.gpu_util_mean.has_value());
  EXPECT_EQ(r.nvml_why, "training on the CPU");
  ASSERT_TRUE(r.step_ms_p50.has_value());
  EXPECT_EQ(*instrument::percentile({1, 2, 3, 4}, 50), 2.5);
}

// The count is the run's (core/flops.h): two threads, each in its own FlopScope, adding at the same
// time, each count only their own ops, and neither touches the process's counter or the other's.
TEST(Flops, EachScopeCountsOnlyItsOwnThreadsOps) {
  auto adds = [](int64_t n, int times, FlopCounter& c) {
    FlopScope scope(c);
    Tensor a = full(Shape{n}, 1.0), b = full(Shape{n}, 2.0);
    for (int i = 0; i < times; ++i) a = add(a, b);
  };
  const double process0 = flops_counted();
  FlopCounter big, small;
  std::thread t1(adds, 100, 2000, std::ref(big)), t2(adds, 7, 2000, std::ref(small));
  t1.join();
  t2.join();
  EXPECT_EQ(big.total, 100.0 * 2000);
  EXPECT_EQ(small.total, 7.0 * 2000);
  EXPECT_EQ(flops_counted(), process0);
  // Scopes nest: the inner one counts while it lives, then the outer one again.
  FlopCounter outer, inner;
  {
    FlopScope o(outer);
    add(full(Shape{3}, 1.0), full(Shape{3}, 1.0));
    {
      FlopScope i(inner);
      add(full(Shape{5}, 1.0), full(Shape{5}, 1.0));
      EXPECT_EQ(flops_counted(), 5.0);
    }
    add(full(Shape{3}, 1.0), full(Shape{3}, 1.0));
    EXPECT_EQ(flops_counted(), 6.0);
  }
  EXPECT_EQ(outer.total, 6.0);
  EXPECT_EQ(inner.total, 5.0);
}

TEST(Peak, DatasheetTable) {
  auto h = instrument::datasheet_peak("NVIDIA H200", Precision::FP32);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->tflops, 67);
  EXPECT_EQ(instrument::datasheet_peak("NVIDIA H100 PCIe", Precision::BF16)->tflops, 756);
  EXPECT_FALSE(instrument::datasheet_peak("Some Future GPU", Precision::FP32).has_value());
}
