// Every op in the table: float64 gradient check on the CPU, to the case's float64 tolerances, and
// finite in float32; the gradient checker itself, and the count of correct predictions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

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

// Every op in float32 on the CPU: its output and its inputs' gradients are finite. float32's e^x
// overflows past 88, float64's only past 709: at the large cases' magnitudes (op_cases.h, *_large)
// an exp that the op's stable form avoids makes an inf or a NaN here, whatever the draw.
class OpFinite : public ::testing::TestWithParam<test::OpCase> {};

TEST_P(OpFinite, Float32OutputAndGradients) {
  const test::OpCase& c = GetParam();
  std::vector<Tensor> xs = test::make_inputs(c, DType::f32, 7);
  Tensor out = c.f(xs);
  backward(out, full(out.shape(), 1.0, out.dtype(), kCPU));
  auto finite = [](const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float f) { return std::isfinite(f); });
  };
  EXPECT_TRUE(finite(out.to_vector<float>())) << c.name << " output";
  for (size_t k = 0; k < xs.size(); ++k)
    if (xs[k].requires_grad() && xs[k].grad().defined())
      EXPECT_TRUE(finite(xs[k].grad().to_vector<float>())) << c.name << " gradient of input " << k;
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpFinite, ::testing::ValuesIn(test::op_cases()),
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

// A NaN compares false with every tolerance: the checker fails it rather than letting it pass, on
// either side (an overflowing forward pass makes the central differences inf - inf).
TEST(Gradcheck, CatchesANaN) {
  Tensor x = from_vector(std::vector<double>{0.3, -0.7, 1.1}, Shape{3});
  x.requires_grad_(true);
  auto nan_forward = [](const std::vector<Tensor>& in) { return in[0] * std::nan(""); };
  EXPECT_FALSE(autograd::gradcheck(nan_forward, {x}).ok);
  auto inf_forward = [](const std::vector<Tensor>& in) { return in[0] * 1e308 * 10.0; };
  EXPECT_FALSE(autograd::gradcheck(inf_forward, {x}).ok);
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

// Tied logits: a row is correct when its label is the first of its largest values, the rule of the
// library's argmax (ops/reduce.h), for float32 and float64, through count_correct and through
// cross_entropy_counted (the trainer's loss and count in one). CUDA's count follows the same rule
// (loss_cuda.cu's warp_correct: the first largest index per lane, the lower index on a tie between
// lanes).
TEST(CountCorrect, TiesGoToTheFirstLargestClassAsArgmax) {
  // rows: a tie for the top between classes 0 and 1 (twice), between 1 and 2 (twice), all equal
  const std::vector<double> v{1, 1, 0, 1, 1, 0, -2, 3, 3, -2, 3, 3, 5, 5, 5};
  const Tensor labels = from_vector(std::vector<int32_t>{0, 1, 1, 2, 0}, Shape{5});
  for (DType dt : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor logits = to(from_vector(v, Shape{5, 3}), dt);
    EXPECT_EQ(argmax(logits).to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 1, 1, 0}));
    EXPECT_EQ(count_correct(logits, labels).item(), 3.0);  // rows 0, 2 and 4
    Tensor loss_sum = zeros(Shape{}, DType::f32, kCPU), correct = zeros(Shape{}, DType::f32, kCPU);
    cross_entropy_counted(logits, labels, loss_sum, correct, 1.0, Tensor());
    EXPECT_EQ(correct.item(), 3.0);
  }
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

// The relu_margin adjust (op_cases.h) leaves every pre-activation at least its margin from zero,
// by moving only the bias, and moves a bias only where a row needed it.
TEST(OpCaseAdjust, ReluMarginKeepsPreActivationsOffTheKink) {
  const size_t rows = 3, K = 4, N = 50;
  std::vector<std::vector<double>> v{std::vector<double>(rows * K), std::vector<double>(N * K), std::vector<double>(N)};
  for (size_t i = 0; i < v[0].size(); ++i) v[0][i] = 0.1 * double(i % 7);
  for (size_t i = 0; i < v[1].size(); ++i) v[1][i] = 0.05 * double(int(i % 11) - 5);
  for (size_t j = 0; j < N; ++j) v[2][j] = 0.02 * double(int(j) - 25);  // some columns sit on the kink
  const std::vector<double> before = v[2];
  test::relu_margin(0, 1, 2, 0.1)(v);
  int moved = 0;
  for (size_t j = 0; j < N; ++j) {
    bool needed = false;
    for (size_t r = 0; r < rows; ++r) {
      double h0 = before[j], h = v[2][j];
      for (size_t k = 0; k < K; ++k) { h0 += v[0][r * K + k] * v[1][j * K + k]; h += v[0][r * K + k] * v[1][j * K + k]; }
      needed = needed || std::abs(h0) < 0.1;
      EXPECT_GE(std::abs(h), 0.1 - 1e-12) << "column " << j << " row " << r;
    }
    EXPECT_EQ(v[2][j] != before[j], needed) << "column " << j;
    moved += v[2][j] != before[j];
  }
  EXPECT_GT(moved, 0) << "the draw must put some column on the kink";
}
