// Autograd bookkeeping: accumulation, release after backward, NoGradGuard, a tensor used twice.
#include <gtest/gtest.h>

#include "loupe.h"

using namespace loupe;

TEST(Autograd, AccumulatesAndReleases) {
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, Shape{3});
  x.requires_grad_(true);
  Tensor y = sum(x * x);
  backward(y);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_THROW(backward(y), Error);  // the graph was freed
  backward(sum(x));                  // gradients accumulate across backward calls
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{3, 5, 7}));
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = ones(Shape{2});
  x.requires_grad_(true);
  NoGradGuard g;
  Tensor y = x * 2.0;
  EXPECT_FALSE(y.requires_grad());
  EXPECT_FALSE(y.grad_fn());
}

TEST(Autograd, TensorUsedTwiceGetsBothGradients) {
  Tensor x = from_vector(std::vector<float>{1, -2}, Shape{2});
  x.requires_grad_(true);
  Tensor y = sum(relu(x) + x * 3.0);
  backward(y);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, 3}));
}
