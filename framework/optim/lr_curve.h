// The learning rate as the update kernels compute it on the device (docs/cli.md, "Training
// controls"): a curve of the updates issued, evaluated in each update from the optimizer's base
// rate and its update count, both device scalars, so that a step captured in a CUDA graph follows
// the schedule as it replays. train::lr_at evaluates this same function on the host
// (train/lr_schedule.h turns Keras's and PyTorch's schedules into curves): one formula for the
// host, the CPU kernels and the CUDA kernels.
#pragma once
#include <math.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define LOUPE_LR_HD __host__ __device__ inline
#else
#define LOUPE_LR_HD inline
#endif

namespace loupe::optim {

// Plain data, passed by value in every update kernel's arguments: no pointers, a bounded number
// of pieces. The base rate is not in it: it is the optimizer's (Optimizer::set_lr).
struct LrCurve {
  enum Kind : int32_t { kConstant, kExponential, kInverseTime, kPiecewise, kCosine };
  static constexpr int kMaxBoundaries = 8;
  int32_t kind = kConstant;
  int32_t boundaries_used = 0;       // Piecewise: values[0..boundaries_used] are used
  bool staircase = false;            // Exponential, InverseTime: the exponent (the quotient) floored
  bool warmup = false;               // Cosine: first a linear warm-up from the base to warmup_target
  bool per_epoch = false;            // t counts epochs of updates_per_epoch updates (PyTorch's StepLR)
  double updates_per_epoch = 0;      // set by whoever installs a per-epoch curve
  double decay_steps = 1;            // Exponential, InverseTime, Cosine
  double decay_rate = 1;             // Exponential, InverseTime
  double alpha = 0;                  // Cosine: the floor, a fraction of the rate it decays from
  double warmup_target = 0, warmup_steps = 0;
  double boundaries[kMaxBoundaries] = {};      // Piecewise: values[i] up to boundaries[i] included,
  double values[kMaxBoundaries + 1] = {};      // absolute rates (Keras): the base is not used
};

namespace lr_detail {

// Keras's CosineDecay._decay_function: from `from` to alpha * from over decay_steps.
LOUPE_LR_HD double cosine(double t, double decay_steps, double from, double alpha) {
  const double cosine_decayed = 0.5 * (1.0 + cos(3.14159265358979323846 * (t / decay_steps)));
  return from * ((1.0 - alpha) * cosine_decayed + alpha);
}

LOUPE_LR_HD double least(double a, double b) { return b < a ? b : a; }  // std::min, on the device too

LOUPE_LR_HD double cosine_rate(const LrCurve& c, double base, double t) {
  if (!c.warmup) return cosine(least(t, c.decay_steps), c.decay_steps, base, c.alpha);
  t = least(t, c.decay_steps + c.warmup_steps);
  if (t < c.warmup_steps) return (c.warmup_target - base) * (t / c.warmup_steps) + base;
  return cosine(t - c.warmup_steps, c.decay_steps, c.warmup_target, c.alpha);
}

}  // namespace lr_detail

// The rate of the update that `t` updates preceded, from the base rate. Keras 2's decay d is
// InverseTime with decay_steps 1 and decay_rate d: base / (1 + d * t), the operations (and so the
// floats) of Keras's time-based decay.
LOUPE_LR_HD double curve_rate(const LrCurve& c, double base, double t) {
  if (c.per_epoch) t = floor(t / c.updates_per_epoch);
  switch (c.kind) {
    case LrCurve::kExponential: {
      const double p = c.staircase ? floor(t / c.decay_steps) : t / c.decay_steps;
      return base * pow(c.decay_rate, p);
    }
    case LrCurve::kInverseTime: {
      const double p = c.staircase ? floor(t / c.decay_steps) : t / c.decay_steps;
      return base / (1.0 + c.decay_rate * p);
    }
    case LrCurve::kPiecewise:
      for (int i = 0; i < c.boundaries_used; ++i)
        if (t <= c.boundaries[i]) return c.values[i];
      return c.values[c.boundaries_used];
    case LrCurve::kCosine: return lr_detail::cosine_rate(c, base, t);
    default: return base;
  }
}

}  // namespace loupe::optim
