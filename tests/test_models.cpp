// The reference models: parameter counts against the reference and an output shape.
#include <gtest/gtest.h>

#include "loupe.h"
#include "models/registry.h"

using namespace loupe;

TEST(Models, ParameterCountsMatchTheReference) {
  for (const auto& info : models::all_models()) {
    auto m = info.build();
    EXPECT_EQ(m->num_parameters(), info.expected_parameters) << info.name;
  }
}

TEST(Models, MnistCnnOutputShape) {
  auto m = models::find_model("mnist_cnn").build();
  m->eval();
  NoGradGuard g;
  EXPECT_EQ((*m)(full(Shape{2, 28, 28}, 0.5)).shape(), (Shape{2, 10}));
}
