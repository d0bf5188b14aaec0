// Optimizers: each step is one fused kernel over the whole parameter arena (docs/design.md principle 4).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/exec_context.h"
#include "nn/arena.h"
#include "optim/grad_scaler.h"
#include "optim/lr_curve.h"

namespace loupe::optim {

// What every update kernel reads besides its tensors (all device pointers on the kernel's device).
struct UpdateArgs {
  const double* lr = nullptr;     // the base rate: the update's is curve_rate(curve, *lr, *count)
  LrCurve curve;
  const double* count = nullptr;  // updates issued before this one; read for a curve not constant, and by Adam
  // A GradScaler's state or null: skip everything while found_inf is set, else read each gradient
  // times 1 / state[kScale] (the gradients are still scaled: GradScaler divides nowhere else).
  const float* scaler = nullptr;
};

class Optimizer {
 public:
  explicit Optimizer(nn::ParameterArena& arena);
  virtual ~Optimizer() = default;
  // One update over the whole arena. Everything that changes from step to step (the step count
  // behind Adam's bias corrections and the rate's curve, the base rate, the GradScaler's skip) is
  // read on the device, so a captured step replays as the next eager step would run.
  virtual void step() = 0;
  virtual std::string name() const = 0;
  void zero_grad() { arena_.zero_grad(); }
  // Skips each update on the device while the GradScaler's found_inf flag is set (null: never),
  // without the host waiting for the flag; Adam then counts only the steps that were applied.
  // With a scaler, the update also unscales: it reads each gradient divided by the scale (the
  // arena's gradients stay scaled; optim/grad_scaler.h).
  void set_scaler(const GradScaler* s) { scaler_ = s; }
  double lr() const { return lr_; }  // the base learning rate
  // The base rate from the next update on, replays of a captured step included: the device's copy
  // is written on the compute stream, after the work queued so far. Call it outside a step (inside
  // a capture the write would be recorded, not run). A curve's piecewise values and cosine warm-up
  // target are absolute rates, which it does not scale (optim/lr_curve.h).
  void set_lr(double lr);
  // The rate's curve over the updates (optim/lr_curve.h), from the base rate. It is part of every
  // update kernel's arguments, so a captured step keeps the curve it was captured with: install it
  // before the first update (after one, an Error). A per-epoch curve needs updates_per_epoch >= 1.
  void set_schedule(const LrCurve& c);
  const LrCurve& schedule() const { return curve_; }
  // Keras' time-based decay: each update uses lr / (1 + decay * updates before it), the curve
  // InverseTime with decay_steps 1 (0: constant). decay() is 0 for any other curve.
  double decay() const;
  void set_decay(double d);
  double current_lr() const { return curve_rate(curve_, lr_, double(steps_)); }  // for the next update
  int64_t steps() const { return steps_; }  // updates issued (skipped ones included)
  void set_steps(int64_t s);
  // The host's count alone, for updates that a CUDA graph replays: the graph's own kernels keep
  // the device's count (train/trainer.cpp).
  void set_host_steps(int64_t s) { steps_ = s; }
  // State buffers (arena-shaped) by name, for checkpoints; restore with the same names.
  std::vector<std::pair<std::string, Tensor>> state() const { return state_; }

 protected:
  Tensor& add_state(const std::string& name);
  // The arguments every update kernel reads; counts the update (host and, where a kernel reads
  // it, device). Call once per step(), before launching the update.
  UpdateArgs begin_update(bool reads_count);
  // After the update: the device count follows the host's, and the 16-bit compute copy the update.
  void end_update(double flops_per_parameter);
  nn::ParameterArena& arena_;
  const GradScaler* scaler_ = nullptr;
  double lr_ = 1e-3;
  LrCurve curve_;
  int64_t steps_ = 0;
  std::vector<std::pair<std::string, Tensor>> state_;

 private:
  Tensor count_;              // float64 [1] on the arena's device: updates issued before the current one
  Tensor lr_device_;          // float64 [1] on the arena's device: the base rate, lr_
  bool count_stale_ = false;  // the device count lags the host's (set_steps, or not kept up)
  bool count_this_step_ = false;
  bool issued_ = false;       // an update has been issued (a schedule can no longer be installed)
};

// PyTorch's SGD: buf = momentum * buf + g; g' = nesterov ? g + momentum * buf : buf; p -= lr * g'.
class SGD : public Optimizer {
 public:
  SGD(nn::ParameterArena& arena, double lr, double momentum = 0, bool nesterov = false, double weight_decay = 0);
  void step() override;
  std::string name() const override { return "SGD"; }
 private:
  double momentum_, weight_decay_;
  bool nesterov_;
};

// Keras' RMSprop: v = rho v + (1 - rho) g^2; p -= lr g / (sqrt(v) + eps).
class RMSprop : public Optimizer {
 public:
  RMSprop(nn::ParameterArena& arena, double lr = 1e-3, double rho = 0.9, double eps = 1e-7);
  void step() override;
  std::string name() const override { return "RMSprop"; }
 private:
  double rho_, eps_;
};

// Adam with bias correction (Kingma & Ba); weight_decay > 0 gives AdamW's decoupled decay.
class Adam : public Optimizer {
 public:
  Adam(nn::ParameterArena& arena, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-7,
       double weight_decay = 0);
  void step() override;
  std::string name() const override { return "Adam"; }
 private:
  double beta1_, beta2_, eps_, weight_decay_;
};

// Keras' Adadelta: a = rho a + (1 - rho) g^2; u = g sqrt(d + eps) / sqrt(a + eps);
// d = rho d + (1 - rho) u^2; p -= lr u.
class Adadelta : public Optimizer {
 public:
  Adadelta(nn::ParameterArena& arena, double lr = 1.0, double rho = 0.95, double eps = 1e-7);
  void step() override;
  std::string name() const override { return "Adadelta"; }
 private:
  double rho_, eps_;
};

struct OptimKernels {
  void (*sgd)(const ExecContext& ctx, const Tensor& p, const Tensor& g, const Tensor& buf, const UpdateArgs& a,
              float momentum, bool nesterov, float weight_decay);
  void (*rmsprop)(const ExecContext& ctx, const Tensor& p, const Tensor& g, const Tensor& v, const UpdateArgs& a,
                  float rho, float eps);
  // Adam's bias corrections for t = *count + 1 - (with a scaler) the steps it skipped, in double.
  void (*adam)(const ExecContext& ctx, const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
               const UpdateArgs& a, double beta1, double beta2, float eps, float weight_decay);
  void (*adadelta)(const ExecContext& ctx, const Tensor& p, const Tensor& g, const Tensor& acc, const Tensor& delta,
                   const UpdateArgs& a, float rho, float eps);
  void (*count)(const ExecContext& ctx, const Tensor& c);  // c[0] += 1 (float64)
};

}  // namespace loupe::optim
