// The optimizers' updates against their formulas (SGD with Nesterov, RMSprop, Adam, Adadelta), lr decay and step counts.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "loupe.h"

using namespace loupe;

TEST(Optim, SgdMatchesTheFormula) {
  nn::Sequential m;
  m.add("fc", std::make_shared<nn::Linear>(2, 1, false));
  m.to(kCPU);
  Tensor w = m.parameters()[0];
  std::vector<float> w0 = w.to_vector<float>();
  optim::SGD opt(m.arena(), 0.1, 0.9, true);
  Tensor x = from_vector(std::vector<float>{1, 2}, Shape{1, 2});
  backward(sum(m(x)));  // grad = x
  opt.step();
  // buf = g; nesterov: g + 0.9 * buf = 1.9 g
  std::vector<float> w1 = w.to_vector<float>();
  EXPECT_NEAR(w1[0], w0[0] - 0.1f * 1.9f * 1, 1e-6);
  EXPECT_NEAR(w1[1], w0[1] - 0.1f * 1.9f * 2, 1e-6);
}

TEST(Optim, RmspropAndAdamFirstStep) {
  for (int which = 0; which < 2; ++which) {
    nn::Sequential m;
    m.add("fc", std::make_shared<nn::Linear>(1, 1, false));
    m.to(kCPU);
    Tensor w = m.parameters()[0];
    float w0 = w.to_vector<float>()[0];
    std::unique_ptr<optim::Optimizer> opt;
    if (which == 0) opt = std::make_unique<optim::RMSprop>(m.arena(), 0.01, 0.9, 1e-7);
    else opt = std::make_unique<optim::Adam>(m.arena(), 0.01);
    backward(sum(m(from_vector(std::vector<float>{2}, Shape{1, 1}))));  // g = 2
    opt->step();
    float expect = which == 0 ? w0 - 0.01f * 2 / (std::sqrt(0.1f * 4) + 1e-7f)  // v = 0.1 g^2
                              : w0 - 0.01f;                                   // Adam: mhat / sqrt(vhat) = 1
    EXPECT_NEAR(w.to_vector<float>()[0], expect, 1e-5) << opt->name();
  }
}

TEST(Optim, AdadeltaFirstStepMatchesKeras) {
  nn::Sequential m;
  m.add("fc", std::make_shared<nn::Linear>(1, 1, false));
  m.to(kCPU);
  Tensor w = m.parameters()[0];
  float w0 = w.to_vector<float>()[0];
  optim::Adadelta opt(m.arena(), 1.0, 0.95, 1e-7);
  backward(sum(m(from_vector(std::vector<float>{2}, Shape{1, 1}))));  // g = 2
  opt.step();
  // a = 0.05 * 4 = 0.2; u = 2 * sqrt(1e-7) / sqrt(0.2 + 1e-7)
  float u = 2.f * std::sqrt(1e-7f) / std::sqrt(0.2f + 1e-7f);
  EXPECT_NEAR(w.to_vector<float>()[0], w0 - u, 1e-7);
}

// Keras' lr decay and Adam's bias corrections are computed by the update kernels from the
// optimizer's step count on its device (what a captured step replays): they follow the host's
// formulas step by step, and a restored count (a checkpoint's) takes effect at the next update.
TEST(Optim, DecayAndAdamCorrectionsFollowTheStepCount) {
  for (int which = 0; which < 2; ++which) {
    nn::Sequential m;
    m.add("fc", std::make_shared<nn::Linear>(1, 1, false));
    m.to(kCPU);
    Tensor w = m.parameters()[0];
    float wf = w.to_vector<float>()[0], s1 = 0, s2 = 0;  // the expected weight and the optimizer's state
    std::unique_ptr<optim::Optimizer> opt;
    if (which == 0) opt = std::make_unique<optim::RMSprop>(m.arena(), 0.01, 0.9, 1e-7);
    else opt = std::make_unique<optim::Adam>(m.arena(), 0.01, 0.9, 0.999, 1e-7);
    opt->set_decay(0.5);
    opt->set_steps(3);  // resumed after 3 updates
    Tensor x = from_vector(std::vector<float>{2}, Shape{1, 1});
    for (int k = 3; k < 8; ++k) {
      opt->zero_grad();
      backward(sum(m(x)));  // g = 2
      opt->step();
      const float g = 2, lr = float(0.01 / (1.0 + 0.5 * k));
      if (which == 0) {
        s1 = 0.9f * s1 + 0.1f * g * g;
        wf -= lr * g / (std::sqrt(s1) + 1e-7f);
      } else {
        const double t = k + 1;  // Adam counts this update too
        s1 = 0.9f * s1 + 0.1f * g;
        s2 = 0.999f * s2 + (1.f - 0.999f) * g * g;
        const float b1 = float(1.0 - std::pow(0.9, t)), b2 = float(1.0 - std::pow(0.999, t));
        wf -= lr * ((s1 / b1) / (std::sqrt(s2 / b2) + 1e-7f));
      }
      EXPECT_NEAR(w.to_vector<float>()[0], wf, 1e-6 * (1 + std::abs(wf))) << opt->name() << " update " << k;
    }
    EXPECT_EQ(opt->steps(), 8);
    EXPECT_NEAR(opt->current_lr(), 0.01 / 5.0, 1e-12);
  }
  nn::Sequential m;
  m.add("fc", std::make_shared<nn::Linear>(1, 1, false));
  m.to(kCPU);
  optim::RMSprop opt(m.arena(), 0.01);
  EXPECT_THROW(opt.set_decay(-1), Error);
  EXPECT_THROW(opt.set_steps(-2), Error);
}

// Weight decay adds decay * w to the gradient before the step (no test used it: its sign could
// flip unnoticed).
TEST(Optim, SgdWeightDecay) {
  nn::Sequential m;
  m.add("fc", std::make_shared<nn::Linear>(2, 1, false));
  m.to(kCPU);
  Tensor w = m.parameters()[0];
  const std::vector<float> w0 = w.to_vector<float>();
  optim::SGD opt(m.arena(), 0.1, 0.0, false, 0.5);
  backward(sum(m(from_vector(std::vector<float>{1, 2}, Shape{1, 2}))));  // gradient (1, 2)
  opt.step();
  const std::vector<float> w1 = w.to_vector<float>();
  EXPECT_NEAR(w1[0], w0[0] - 0.1f * (1 + 0.5f * w0[0]), 1e-6);
  EXPECT_NEAR(w1[1], w0[1] - 0.1f * (2 + 0.5f * w0[1]), 1e-6);
}

// RMSprop's epsilon is added outside the square root (Keras, PyTorch): invisible at the default
// 1e-7, so a large one here (0.1) tells sqrt(v) + eps from sqrt(v + eps), 3.6% apart.
TEST(Optim, RmspropEpsilonOutsideTheRoot) {
  nn::Sequential m;
  m.add("fc", std::make_shared<nn::Linear>(1, 1, false));
  m.to(kCPU);
  Tensor w = m.parameters()[0];
  const float w0 = w.to_vector<float>()[0];
  optim::RMSprop opt(m.arena(), 0.01, 0.9, 0.1);
  backward(sum(m(from_vector(std::vector<float>{2}, Shape{1, 1}))));  // gradient 2: v = 0.1 * 4
  opt.step();
  EXPECT_NEAR(w.to_vector<float>()[0], w0 - 0.01f * 2 / (std::sqrt(0.4f) + 0.1f), 1e-6);
}

// Adam's epsilon is added outside the square root too (Keras, PyTorch): at 0.1 and a first step
// with gradient 0.2 (mhat = 0.2, vhat = 0.04), 0.2 / (0.2 + 0.1) against 0.2 / sqrt(0.14), 25% apart.
TEST(Optim, AdamEpsilonOutsideTheRoot) {
  nn::Sequential m;
  m.add("fc", std::make_shared<nn::Linear>(1, 1, false));
  m.to(kCPU);
  Tensor w = m.parameters()[0];
  const float w0 = w.to_vector<float>()[0];
  optim::Adam opt(m.arena(), 0.01, 0.9, 0.999, 0.1);
  backward(sum(m(from_vector(std::vector<float>{0.2f}, Shape{1, 1}))));  // gradient 0.2
  opt.step();
  EXPECT_NEAR(w.to_vector<float>()[0], w0 - 0.01f * 0.2f / (0.2f + 0.1f), 1e-6);
}
