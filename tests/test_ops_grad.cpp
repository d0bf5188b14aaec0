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
