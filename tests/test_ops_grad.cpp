// Every op in the table: float64 gradient check on the CPU, to the case's float64 tolerances.
#include <gtest/gtest.h>

#include "op_cases.h"

using namespace loupe;

class OpGrad : public ::testing::TestWithParam<test::OpCase> {};

TEST_P(OpGrad, MatchesCentralDifferences) {
  const test::OpCase& c = GetParam();
  std::vector<Tensor> xs = test::make_inputs(c, DType::f64, 7);
  autograd::GradcheckResult r = autograd::gradcheck(c.f, xs, c.tol.f64_eps, c.tol.f64_atol, c.tol.f64_rtol);
  EXPECT_TRUE(r.ok) << c.name << ": " << r.message << " (max abs err " << r.max_abs_err << ")";
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpGrad, ::testing::ValuesIn(test::op_cases()),
                         [](const auto& info) { return info.param.name; });

// The checker itself must be able to fail: a deliberately wrong backward is caught.
namespace {
struct WrongBackward : autograd::Node {
  const char* name() const override { return "WrongBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override { return {g[0] * 3.0}; }  // d(2x)/dx is 2
};
}  // namespace

TEST(Gradcheck, CatchesAWrongGradient) {
  Tensor x = from_vector(std::vector<double>{0.3, -0.7, 1.1}, Shape{3});
  x.requires_grad_(true);
  auto f = [](const std::vector<Tensor>& in) {
    Tensor y;
    {
      NoGradGuard g;
      y = in[0] * 2.0;
    }
    if (autograd::grad_enabled()) autograd::record(std::make_shared<WrongBackward>(), {&in[0]}, {&y});
    return y;
  };
  EXPECT_FALSE(autograd::gradcheck(f, {x}).ok);
}

// A running count of correct predictions: the count added to what the scalar held (classes and
// binary outputs), and a count that is no float32 scalar refused.
TEST(CountCorrect, IntoAddsToTheRunningCount) {
  Tensor logits = from_vector(std::vector<float>{0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f}, Shape{3, 2});
  Tensor labels = from_vector(std::vector<int32_t>{1, 0, 0}, Shape{3});
  Tensor acc = full(Shape{}, 5.0, DType::f32, kCPU);
  count_correct_into(acc, logits, labels);
  EXPECT_EQ(acc.item(), 7.0);
  EXPECT_EQ(count_correct(logits, labels).item(), 2.0);
  Tensor binary = from_vector(std::vector<float>{1.f, -1.f, 2.f}, Shape{3});
  count_correct_into(acc, binary, from_vector(std::vector<float>{1.f, 0.f, 0.f}, Shape{3}));
  EXPECT_EQ(acc.item(), 9.0);
  EXPECT_THROW(count_correct_into(zeros(Shape{2}, DType::f32, kCPU), logits, labels), Error);
}

// 16-bit logits are read as they come on CUDA only (test_ops_half's HalfLoss); the CPU says so
// instead of running a kernel that has no 16-bit path.
TEST(CrossEntropy, SixteenBitLogitsOnTheCpuAreRefusedByName) {
  Tensor logits = to(from_vector(std::vector<float>{0.1f, 0.9f, 0.8f, 0.2f}, Shape{2, 2}), DType::f16);
  Tensor labels = from_vector(std::vector<int32_t>{1, 0}, Shape{2});
  try {
    cross_entropy(logits, labels);
    ADD_FAILURE() << "float16 logits ran on the CPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("runs on CUDA only"), std::string::npos) << e.what();
  }
}
