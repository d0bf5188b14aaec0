// The optimizers' updates against their formulas (SGD with Nesterov, RMSprop, Adam, Adadelta), lr decay and step
// counts, and the learning-rate schedules as the update kernels compute them (optim/lr_curve.h), eagerly and
// through a CUDA graph's replays.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "loupe.h"
#include "skip.h"
#include "train/lr_schedule.h"
#include "train/step_graph.h"

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

namespace {

// The rates Keras 2's decay gave before the rate became a curve on the device (the update kernels'
// lr_of then): each update's floats must stay exactly these.
float old_decayed_lr(double lr, double decay, double count) {
  return float(decay != 0 ? lr / (1.0 + decay * count) : lr);
}

// One update of each optimizer as the CPU kernels wrote it then, element by element.
void old_update(int which, float lr, float* p, const float* g, float* s0, float* s1, int n, double t) {
  for (int i = 0; i < n; ++i) {
    if (which == 0) {  // SGD, momentum 0.9, Nesterov, weight decay 0.01
      float gi = g[i] + 0.01f * p[i];
      s0[i] = 0.9f * s0[i] + gi;
      gi = gi + 0.9f * s0[i];
      p[i] -= lr * gi;
    } else if (which == 1) {  // RMSprop, rho 0.9, eps 1e-7
      s0[i] = 0.9f * s0[i] + (1.f - 0.9f) * g[i] * g[i];
      p[i] -= lr * g[i] / (std::sqrt(s0[i]) + 1e-7f);
    } else if (which == 2) {  // Adam, 0.9, 0.999, eps 1e-7; t counts this update
      const float bias1 = float(1.0 - std::pow(0.9, t)), bias2 = float(1.0 - std::pow(0.999, t));
      s0[i] = 0.9f * s0[i] + (1.f - 0.9f) * g[i];
      s1[i] = 0.999f * s1[i] + (1.f - 0.999f) * g[i] * g[i];
      float mhat = s0[i] / bias1, vhat = s1[i] / bias2;
      p[i] -= lr * (mhat / (std::sqrt(vhat) + 1e-7f) + 0.f * p[i]);
    } else {  // Adadelta, rho 0.95, eps 1e-7
      s0[i] = 0.95f * s0[i] + (1.f - 0.95f) * g[i] * g[i];
      float u = g[i] * std::sqrt(s1[i] + 1e-7f) / std::sqrt(s0[i] + 1e-7f);
      s1[i] = 0.95f * s1[i] + (1.f - 0.95f) * u * u;
      p[i] -= lr * u;
    }
  }
}

std::unique_ptr<optim::Optimizer> make(int which, nn::ParameterArena& arena, double lr) {
  if (which == 0) return std::make_unique<optim::SGD>(arena, lr, 0.9, true, 0.01);
  if (which == 1) return std::make_unique<optim::RMSprop>(arena, lr, 0.9, 1e-7);
  if (which == 2) return std::make_unique<optim::Adam>(arena, lr, 0.9, 0.999, 1e-7);
  return std::make_unique<optim::Adadelta>(arena, lr, 0.95, 1e-7);
}

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

}  // namespace

// With the rate a curve read on the device, a constant rate and Keras 2's decay still give every
// update's floats exactly as before (same operations in the same order), resumed mid-way too.
TEST(Optim, ConstantAndDecayedRatesBitIdenticalToBefore) {
  for (int which = 0; which < 4; ++which) {
    for (double decay : {0.0, 0.37}) {
      nn::Sequential m;
      m.add("fc", std::make_shared<nn::Linear>(3, 2, false));
      m.to(kCPU);
      Tensor values = m.arena().values(), grads = m.arena().grads();
      const int n = int(values.numel());
      std::vector<float> p = values.to_vector<float>(), s0(n), s1(n), g(n);
      std::unique_ptr<optim::Optimizer> opt = make(which, m.arena(), 0.01);
      opt->set_decay(decay);
      opt->set_steps(3);
      for (int k = 3; k < 10; ++k) {
        // The rate in double, before its cast to float hides most differences: the same operations.
        ASSERT_EQ(opt->current_lr(), decay != 0 ? 0.01 / (1.0 + decay * double(k)) : 0.01) << opt->name();
        for (int i = 0; i < n; ++i) g[i] = grads.data<float>()[i] = 0.3f * float(i - k) + 0.1f * float(k);
        opt->step();
        old_update(which, old_decayed_lr(0.01, decay, k), p.data(), g.data(), s0.data(), s1.data(), n, k + 1.0);
        const std::vector<float> got = values.to_vector<float>();
        for (int i = 0; i < n; ++i)
          ASSERT_EQ(bits(got[i]), bits(p[i])) << opt->name() << " decay " << decay << " update " << k << " at " << i;
      }
    }
  }
}

namespace {

// One schedule of each kind, small enough that 14 updates cross its boundaries and its end; `step`
// is per epoch (kUpdatesPerEpoch updates each). The rate after a set_lr is checked too.
const std::vector<std::pair<std::string, double>> kSchedules = {
    {"", 0.05},  // constant
    {"exponential:decay_steps=4,decay_rate=0.5", 0.08},
    {"exponential:decay_steps=4,decay_rate=0.5,staircase", 0.08},
    {"inverse_time:decay_steps=3,decay_rate=0.5", 0.08},
    {"piecewise:boundaries=2/5,values=0.3/0.2/0.1", 0.08},
    {"cosine:decay_steps=6,alpha=0.1", 0.08},
    {"cosine:decay_steps=5,warmup_target=0.1,warmup_steps=3", 0.0},
    {"step:step_size=2,gamma=0.5", 0.08}};
constexpr int kUpdatesPerEpoch = 3, kUpdates = 14, kSetLrAt = 9;

train::LrSchedule schedule(const std::pair<std::string, double>& spec) {
  if (!spec.first.empty()) return train::parse_lr_schedule(spec.first, spec.second);
  train::LrSchedule s;
  s.initial = spec.second;
  return s;
}

// The rate update t should use: lr_at at t (at the epochs t completed for a per-epoch schedule),
// from the base rate set last (twice the initial from update kSetLrAt on).
float expected_rate(train::LrSchedule s, int t) {
  if (t >= kSetLrAt) s.initial *= 2;
  return float(train::lr_at(s, s.per_epoch ? std::floor(double(t) / kUpdatesPerEpoch) : double(t)));
}

// SGD without momentum on one weight whose gradient is 1, the weight zeroed before each update:
// afterwards the weight is minus the rate that update used, exactly.
struct OneWeight {
  nn::Sequential m;
  std::unique_ptr<optim::SGD> opt;
  OneWeight(Device d, const train::LrSchedule& s) {
    m.add("fc", std::make_shared<nn::Linear>(1, 1, false));
    m.to(d);
    opt = std::make_unique<optim::SGD>(m.arena(), s.initial);
    opt->set_schedule(train::lr_curve(s, kUpdatesPerEpoch));
  }
  void prepare() {
    fill_(m.arena().values(), 0.0);
    fill_(m.arena().grads(), 1.0);
  }
  float rate() { return -m.arena().values().to_vector<float>()[0]; }
};

// The rates of kUpdates eager updates, with set_lr(2 * initial) before update kSetLrAt.
std::vector<float> eager_rates(Device d, const train::LrSchedule& s) {
  OneWeight w(d, s);
  std::vector<float> rates;
  for (int t = 0; t < kUpdates; ++t) {
    if (t == kSetLrAt) w.opt->set_lr(2 * s.initial);
    EXPECT_EQ(float(w.opt->current_lr()), expected_rate(s, t)) << "current_lr before update " << t;
    w.prepare();
    w.opt->step();
    rates.push_back(w.rate());
  }
  return rates;
}

}  // namespace

// Each update uses the schedule's rate at the updates before it (lr_at: Keras's and PyTorch's
// formulas, tests/test_lr_schedule.cpp), at 0, the boundaries and past the end; a set_lr takes
// effect at the next update; a restored count (a checkpoint's) far past the end too.
TEST(Optim, EachUpdateUsesTheScheduleRate) {
  for (const auto& spec : kSchedules) {
    const train::LrSchedule s = schedule(spec);
    const std::vector<float> rates = eager_rates(kCPU, s);
    for (int t = 0; t < kUpdates; ++t) EXPECT_EQ(rates[t], expected_rate(s, t)) << spec.first << " update " << t;
    OneWeight w(kCPU, s);
    w.opt->set_steps(100000);
    w.prepare();
    w.opt->step();
    EXPECT_EQ(w.rate(), float(train::lr_at(s, s.per_epoch ? 100000 / kUpdatesPerEpoch : 100000))) << spec.first;
  }
}

// A schedule is part of each update kernel's arguments: it is installed before the first update
// (a restored count is no update), per epoch only with the updates per epoch, with at most
// LrCurve::kMaxBoundaries boundaries.
TEST(Optim, ScheduleInstalledBeforeTheFirstUpdate) {
  nn::Sequential m;
  m.add("fc", std::make_shared<nn::Linear>(1, 1, false));
  m.to(kCPU);
  optim::SGD opt(m.arena(), 0.1);
  const train::LrSchedule e = train::parse_lr_schedule("exponential:decay_steps=4,decay_rate=0.5", 0.1);
  opt.set_steps(7);
  opt.set_schedule(train::lr_curve(e));
  EXPECT_EQ(opt.current_lr(), train::lr_at(e, 7));
  EXPECT_EQ(opt.decay(), 0.0);
  optim::LrCurve per_epoch = train::lr_curve(train::parse_lr_schedule("step:step_size=2,gamma=0.5", 0.1), 0);
  EXPECT_THROW(opt.set_schedule(per_epoch), Error);
  backward(sum(m(from_vector(std::vector<float>{1}, Shape{1, 1}))));
  opt.step();
  EXPECT_THROW(opt.set_schedule(train::lr_curve(e)), Error);
  EXPECT_THROW(opt.set_decay(0.1), Error);
  train::LrSchedule p;
  p.kind = train::LrSchedule::Kind::Piecewise;
  for (int i = 0; i < 9; ++i) p.boundaries.push_back(i + 1), p.values.push_back(1.0 / (i + 1));
  p.values.push_back(0.01);
  try {
    train::lr_curve(p);
    ADD_FAILURE() << "nine boundaries accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("at most 8 boundaries"), std::string::npos) << err.what();
  }
}

// Through a CUDA graph that captured one update and replays it: the rate follows the schedule over
// the replays (the count on the device), a set_lr between replays is seen by the next one (the
// base rate on the device), and the rates are the CPU's: bit for bit for a constant or piecewise
// rate, else within one float ulp (nvcc fuses a * b + c into one rounding, and CUDA's double pow
// and cos may round otherwise than the host's: the doubles may differ in their last bit).
TEST(OptimGpu, ScheduleFollowedByGraphReplays) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build): CUDA graphs not run";
  for (const auto& spec : kSchedules) {
    const train::LrSchedule s = schedule(spec);
    const std::vector<float> cpu = eager_rates(kCPU, s), gpu = eager_rates(kCUDA, s);
    OneWeight w(kCUDA, s);
    w.prepare();
    w.opt->step();  // eager: brings the device count up, as the trainer's steps before a capture
    std::vector<float> graphed = {w.rate()};
    train::StepGraph g;
    std::string why;
    ASSERT_TRUE(g.capture(kCUDA, [&] { w.opt->step(); }, &why)) << why;
    w.opt->set_host_steps(w.opt->steps() - 1);  // the capture ran nothing
    for (int t = 1; t < kUpdates; ++t) {
      if (t == kSetLrAt) w.opt->set_lr(2 * s.initial);
      w.prepare();
      g.replay();
      w.opt->set_host_steps(w.opt->steps() + 1);
      graphed.push_back(w.rate());
    }
    const bool exact = s.kind == train::LrSchedule::Kind::Constant || s.kind == train::LrSchedule::Kind::Piecewise;
    for (int t = 0; t < kUpdates; ++t) {
      EXPECT_EQ(graphed[t], gpu[t]) << spec.first << " update " << t << ": graphed against eager";
      EXPECT_EQ(cpu[t], expected_rate(s, t)) << spec.first << " update " << t;
      const float ulp = std::nextafter(cpu[t], INFINITY) - cpu[t];
      if (exact) EXPECT_EQ(gpu[t], cpu[t]) << spec.first << " update " << t;
      else EXPECT_NEAR(gpu[t], cpu[t], ulp) << spec.first << " update " << t;
    }
  }
}
