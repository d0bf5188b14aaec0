#include "optim/optimizer.h"

#include <cmath>

#include "core/dispatch.h"
#include "core/flops.h"

namespace loupe::optim {

Optimizer::Optimizer(nn::ParameterArena& arena)
    : arena_(arena),
      count_(zeros(Shape{1}, DType::f64, arena.device())),
      lr_device_(full(Shape{1}, lr_, DType::f64, arena.device())) {}

Tensor& Optimizer::add_state(const std::string& name) {
  state_.emplace_back(name, zeros(arena_.values().shape(), DType::f32, arena_.device()));
  return state_.back().second;
}

// A fill on the compute stream (the value travels as a kernel argument): ordered after the
// replays queued before it and before those queued after, with no host wait.
void Optimizer::set_lr(double lr) {
  lr_ = lr;
  fill_(lr_device_, lr);
}

void Optimizer::set_schedule(const LrCurve& c) {
  LOUPE_CHECK(!issued_, "a learning-rate schedule is installed before the first update (a captured step keeps "
              "the one it was captured with); this optimizer has already updated");
  LOUPE_CHECK(c.kind >= LrCurve::kConstant && c.kind <= LrCurve::kCosine, "no learning-rate curve of kind ", c.kind);
  LOUPE_CHECK(!c.per_epoch || c.updates_per_epoch >= 1,
              "a per-epoch learning-rate schedule needs the updates per epoch (>= 1), got ", c.updates_per_epoch);
  LOUPE_CHECK(c.boundaries_used >= 0 && c.boundaries_used <= LrCurve::kMaxBoundaries,
              "a piecewise learning-rate schedule has at most ", LrCurve::kMaxBoundaries, " boundaries, got ",
              c.boundaries_used);
  LOUPE_CHECK(c.decay_steps > 0, "a learning-rate schedule's decay_steps must be above 0, got ", c.decay_steps);
  curve_ = c;
}

double Optimizer::decay() const {
  const bool keras = curve_.kind == LrCurve::kInverseTime && curve_.decay_steps == 1 && !curve_.staircase &&
                     !curve_.per_epoch;
  return keras ? curve_.decay_rate : 0.0;
}

void Optimizer::set_decay(double d) {
  LOUPE_CHECK(d >= 0 && std::isfinite(d), "the lr decay must be a finite number >= 0, got ", d);
  LrCurve c;
  if (d != 0) c.kind = LrCurve::kInverseTime, c.decay_steps = 1, c.decay_rate = d;
  set_schedule(c);
}

void Optimizer::set_steps(int64_t s) {
  LOUPE_CHECK(s >= 0, "an optimizer's step count cannot be negative, got ", s);
  steps_ = s;
  count_stale_ = true;
}

UpdateArgs Optimizer::begin_update(bool reads_count) {
  UpdateArgs a;
  a.lr = lr_device_.data<double>();
  a.curve = curve_;
  issued_ = true;
  count_this_step_ = reads_count || curve_.kind != LrCurve::kConstant;
  if (count_this_step_) {
    // The count is kept on the device only by optimizers that read it; one that starts reading
    // it (or a restored count) is brought up to the host's first, with the value as a kernel
    // argument: no host wait (in the eager steps before any capture, so never baked into a graph).
    if (count_stale_) fill_(count_, double(steps_));
    count_stale_ = false;
    a.count = count_.data<double>();
  } else {
    count_stale_ = true;
  }
  if (scaler_) {
    LOUPE_CHECK(scaler_->state().device() == arena_.device(), "the GradScaler is on ",
                scaler_->state().device().str(), ", the parameters on ", arena_.device().str());
    a.scaler = scaler_->state().data<float>();
  }
  ++steps_;
  return a;
}

// The updates run inside the training step (and its CUDA graph capture), in the calling thread's context.
void Optimizer::end_update(double flops_per_parameter) {
  if (count_this_step_) kernels<OptimKernels>(arena_.device()).count(current_context(), count_);
  arena_.refresh_compute_copy();
  add_flops(flops_per_parameter * double(arena_.num_parameters()));
}

SGD::SGD(nn::ParameterArena& arena, double lr, double momentum, bool nesterov, double weight_decay)
    : Optimizer(arena), momentum_(momentum), weight_decay_(weight_decay), nesterov_(nesterov) {
  set_lr(lr);
  LOUPE_CHECK(!nesterov || momentum > 0, "Nesterov momentum needs momentum > 0");
  add_state("momentum_buffer");
}

void SGD::step() {
  UpdateArgs a = begin_update(false);
  kernels<OptimKernels>(arena_.device())
      .sgd(current_context(), arena_.values(), arena_.grads(), state_[0].second, a, float(momentum_), nesterov_,
           float(weight_decay_));
  end_update(2 + (momentum_ != 0 ? 2 : 0) + (nesterov_ ? 1 : 0) + (weight_decay_ != 0 ? 2 : 0));
}

RMSprop::RMSprop(nn::ParameterArena& arena, double lr, double rho, double eps)
    : Optimizer(arena), rho_(rho), eps_(eps) {
  set_lr(lr);
  add_state("square_avg");
}

void RMSprop::step() {
  UpdateArgs a = begin_update(false);
  kernels<OptimKernels>(arena_.device())
      .rmsprop(current_context(), arena_.values(), arena_.grads(), state_[0].second, a, float(rho_), float(eps_));
  end_update(6.0);
}

Adam::Adam(nn::ParameterArena& arena, double lr, double beta1, double beta2, double eps, double weight_decay)
    : Optimizer(arena), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay) {
  set_lr(lr);
  add_state("exp_avg");
  add_state("exp_avg_sq");
}

void Adam::step() {
  UpdateArgs a = begin_update(true);  // the bias corrections need the step count
  kernels<OptimKernels>(arena_.device())
      .adam(current_context(), arena_.values(), arena_.grads(), state_[0].second, state_[1].second, a, beta1_, beta2_,
            float(eps_), float(weight_decay_));
  end_update(12.0);
}

Adadelta::Adadelta(nn::ParameterArena& arena, double lr, double rho, double eps)
    : Optimizer(arena), rho_(rho), eps_(eps) {
  set_lr(lr);
  add_state("square_avg");
  add_state("acc_delta");
}

void Adadelta::step() {
  UpdateArgs a = begin_update(false);
  kernels<OptimKernels>(arena_.device())
      .adadelta(current_context(), arena_.values(), arena_.grads(), state_[0].second, state_[1].second, a, float(rho_),
                float(eps_));
  end_update(14.0);
}

}  // namespace loupe::optim
