// Learning-rate schedules (train/lr_schedule.h) against Keras's published formulas, evaluated here
// by a NumPy-free transcription of keras/src/optimizers/schedules/learning_rate_schedule.py
// (the values below), PyTorch's StepLR, and Keras's ReduceLROnPlateau traced epoch by epoch.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"
#include "train/lr_schedule.h"

using loupe::train::lr_at;
using loupe::train::parse_lr_schedule;

namespace {

std::string refusal(const std::string& spec) {
  try {
    parse_lr_schedule(spec, 0.1);
  } catch (const loupe::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// ExponentialDecay(0.1, decay_steps=1000, decay_rate=0.96) and InverseTimeDecay(0.1, 2, 0.5), with
// and without staircase, at steps where the floor matters.
TEST(LrSchedule, ExponentialAndInverseTimeAsKeras) {
  const auto e = parse_lr_schedule("exponential:decay_steps=1000,decay_rate=0.96", 0.1);
  EXPECT_DOUBLE_EQ(lr_at(e, 0), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(e, 500), 0.09797958971132713);
  EXPECT_DOUBLE_EQ(lr_at(e, 2500), 0.09029798987795908);
  const auto es = parse_lr_schedule("exponential:decay_steps=1000,decay_rate=0.96,staircase", 0.1);
  EXPECT_DOUBLE_EQ(lr_at(es, 2500), 0.09216);
  EXPECT_DOUBLE_EQ(lr_at(es, 999), 0.1);
  const auto i = parse_lr_schedule("inverse_time:decay_steps=2,decay_rate=0.5", 0.1);
  EXPECT_DOUBLE_EQ(lr_at(i, 3), 0.05714285714285715);
  const auto is = parse_lr_schedule("inverse_time:decay_steps=2,decay_rate=0.5,staircase", 0.1);
  EXPECT_DOUBLE_EQ(lr_at(is, 3), 0.06666666666666667);
}

// CosineDecay(0.1, 1000, alpha=0.1), and with a linear warm-up from 0 to 0.1 over 100 steps: the
// warm-up's middle, its end, the decay's middle, and past the end (held at alpha).
TEST(LrSchedule, CosineWithWarmupAsKeras) {
  const auto c = parse_lr_schedule("cosine:decay_steps=1000,alpha=0.1", 0.1);
  EXPECT_DOUBLE_EQ(lr_at(c, 0), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(c, 250), 0.08681980515339464);
  EXPECT_DOUBLE_EQ(lr_at(c, 5000), 0.010000000000000002);
  const auto w = parse_lr_schedule("cosine:decay_steps=1000,warmup_target=0.1,warmup_steps=100", 0.0);
  EXPECT_DOUBLE_EQ(lr_at(w, 0), 0.0);
  EXPECT_DOUBLE_EQ(lr_at(w, 50), 0.05);
  EXPECT_DOUBLE_EQ(lr_at(w, 100), 0.1);
  EXPECT_DOUBLE_EQ(lr_at(w, 350), 0.08535533905932738);
  EXPECT_DOUBLE_EQ(lr_at(w, 600), 0.05);
  EXPECT_NEAR(lr_at(w, 9999), 0.0, 1e-18);
}

// PiecewiseConstantDecay: values[i] up to boundaries[i] included; PyTorch's StepLR per epoch.
TEST(LrSchedule, PiecewiseAndStepAsKerasAndPyTorch) {
  const auto p = parse_lr_schedule("piecewise:boundaries=1000/2000,values=1/0.5/0.1", 0.1);
  EXPECT_EQ(lr_at(p, 0), 1.0);
  EXPECT_EQ(lr_at(p, 1000), 1.0);
  EXPECT_EQ(lr_at(p, 1001), 0.5);
  EXPECT_EQ(lr_at(p, 2000), 0.5);
  EXPECT_EQ(lr_at(p, 2001), 0.1);
  const auto s = parse_lr_schedule("step:step_size=10,gamma=0.5", 0.08);
  EXPECT_TRUE(s.per_epoch);
  EXPECT_EQ(lr_at(s, 9), 0.08);
  EXPECT_EQ(lr_at(s, 10), 0.04);
  EXPECT_EQ(lr_at(s, 25), 0.02);
}

// Keras's ReduceLROnPlateau(factor=0.5, patience=2, cooldown=1, min_lr=0.2), its on_epoch_end
// traced by hand over these losses: the rate after each epoch.
TEST(LrSchedule, PlateauAsKeras) {
  loupe::train::Plateau p(loupe::train::parse_plateau("plateau:factor=0.5,patience=2,cooldown=1,min_lr=0.2"));
  const std::vector<double> loss = {1.0, 0.9, 0.9, 0.95, 0.91, 0.8, 0.85, 0.86, 0.87, 0.88, 0.89, 0.9, 0.91};
  const std::vector<double> want = {1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.2, 0.2, 0.2, 0.2};
  double lr = 1;
  for (size_t e = 0; e < loss.size(); ++e) {
    lr = p.epoch_end(loss[e], lr);
    EXPECT_EQ(lr, want[e]) << "epoch " << e;
  }
  // mode=max: an accuracy that stops rising; min_delta counts as no rise.
  loupe::train::Plateau acc(loupe::train::parse_plateau("plateau:factor=0.1,patience=1,mode=max,min_delta=0.01"));
  EXPECT_EQ(acc.epoch_end(0.50, 1.0), 1.0);
  EXPECT_EQ(acc.epoch_end(0.505, 1.0), 0.1);
}

// A bad spec names --lr-schedule, what is wrong and an example.
TEST(LrSchedule, BadSpecsAreRefusedWithAnExample) {
  EXPECT_EQ(refusal("linear:x=1"), "--lr-schedule 'linear:x=1': no schedule 'linear'; loupe has exponential, "
                                   "inverse_time, cosine, piecewise and step (e.g. --lr-schedule cosine:decay_steps=10000)");
  EXPECT_EQ(refusal("exponential:decay_rate=0.9"),
            "--lr-schedule 'exponential:decay_rate=0.9': it needs decay_steps (e.g. --lr-schedule "
            "exponential:decay_steps=1000,decay_rate=0.96)");
  EXPECT_NE(refusal("exponential:decay_steps=0x10,decay_rate=0.9").find("decay_steps must be a number, got '0x10'"),
            std::string::npos);
  EXPECT_NE(refusal("exponential:decay_steps=10,decay_rate=1.5").find("decay_rate 1.5 is out of range (above 0 up to 1)"),
            std::string::npos);
  EXPECT_NE(refusal("cosine:decay_steps=10,alhpa=0.1").find("it has no key 'alhpa'"), std::string::npos);
  EXPECT_NE(refusal("piecewise:boundaries=5/3,values=1/0.5/0.1").find("boundaries must increase"), std::string::npos);
  EXPECT_NE(refusal("piecewise:boundaries=5,values=1/0.5/0.1").find("one more entry than boundaries"),
            std::string::npos);
  EXPECT_NE(refusal("step:step_size=2.5,gamma=0.5").find("step_size must be a whole number"), std::string::npos);
  EXPECT_NE(refusal("cosine:decay_steps=100,warmup_target=0.1").find("it needs warmup_steps"), std::string::npos);
  // The update kernels carry a piecewise schedule's boundaries as arguments (optim/lr_curve.h).
  EXPECT_NE(refusal("piecewise:boundaries=1/2/3/4/5/6/7/8/9,values=1/1/1/1/1/1/1/1/1/1").find("at most 8 boundaries"),
            std::string::npos);
}
