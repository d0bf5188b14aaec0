#include "optim/optimizer.h"

#include <cmath>

#include "core/dispatch.h"
#include "instrument/flops.h"

namespace loupe::optim {

const float* Optimizer::scaler_state() const {
  if (!scaler_) return nullptr;
  LOUPE_CHECK(scaler_->state().device() == arena_.device(), "the GradScaler is on ", scaler_->state().device().str(),
              ", the parameters on ", arena_.device().str());
  return scaler_->state().data<float>();
}

Tensor& Optimizer::add_state(const std::string& name) {
  state_.emplace_back(name, zeros(arena_.values().shape(), DType::f32, arena_.device()));
  return state_.back().second;
}

SGD::SGD(nn::ParameterArena& arena, double lr, double momentum, bool nesterov, double weight_decay)
    : Optimizer(arena), momentum_(momentum), weight_decay_(weight_decay), nesterov_(nesterov) {
  lr_ = lr;
  LOUPE_CHECK(!nesterov || momentum > 0, "Nesterov momentum needs momentum > 0");
  add_state("momentum_buffer");
}

void SGD::step() {
  ++steps_;
  kernels<OptimKernels>(arena_.device())
      .sgd(arena_.values(), arena_.grads(), state_[0].second, float(lr_), float(momentum_), nesterov_,
           float(weight_decay_), scaler_state());
  arena_.refresh_compute_copy();
  double per = 2 + (momentum_ != 0 ? 2 : 0) + (nesterov_ ? 1 : 0) + (weight_decay_ != 0 ? 2 : 0);
  instrument::add_flops(per * double(arena_.num_parameters()));
}

RMSprop::RMSprop(nn::ParameterArena& arena, double lr, double rho, double eps)
    : Optimizer(arena), rho_(rho), eps_(eps) {
  lr_ = lr;
  add_state("square_avg");
}

void RMSprop::step() {
  ++steps_;
  kernels<OptimKernels>(arena_.device())
      .rmsprop(arena_.values(), arena_.grads(), state_[0].second, float(lr_), float(rho_), float(eps_),
               scaler_state());
  arena_.refresh_compute_copy();
  instrument::add_flops(6.0 * double(arena_.num_parameters()));
}

Adam::Adam(nn::ParameterArena& arena, double lr, double beta1, double beta2, double eps, double weight_decay)
    : Optimizer(arena), beta1_(beta1), beta2_(beta2), eps_(eps), weight_decay_(weight_decay) {
  lr_ = lr;
  add_state("exp_avg");
  add_state("exp_avg_sq");
}

void Adam::step() {
  ++steps_;
  // The bias corrections depend only on the host's step count: no device read-back (with a
  // scaler the kernel subtracts the skipped steps it reads on the device).
  AdamArgs a;
  a.lr = float(lr_);
  a.beta1 = float(beta1_);
  a.beta2 = float(beta2_);
  a.eps = float(eps_);
  a.weight_decay = float(weight_decay_);
  a.bias1 = float(1.0 - std::pow(beta1_, double(steps_)));
  a.bias2 = float(1.0 - std::pow(beta2_, double(steps_)));
  a.step = steps_;
  a.beta1_d = beta1_;
  a.beta2_d = beta2_;
  kernels<OptimKernels>(arena_.device())
      .adam(arena_.values(), arena_.grads(), state_[0].second, state_[1].second, a, scaler_state());
  arena_.refresh_compute_copy();
  instrument::add_flops(12.0 * double(arena_.num_parameters()));
}

Adadelta::Adadelta(nn::ParameterArena& arena, double lr, double rho, double eps)
    : Optimizer(arena), rho_(rho), eps_(eps) {
  lr_ = lr;
  add_state("square_avg");
  add_state("acc_delta");
}

void Adadelta::step() {
  ++steps_;
  kernels<OptimKernels>(arena_.device())
      .adadelta(arena_.values(), arena_.grads(), state_[0].second, state_[1].second, float(lr_), float(rho_),
                float(eps_), scaler_state());
  arena_.refresh_compute_copy();
  instrument::add_flops(14.0 * double(arena_.num_parameters()));
}

}  // namespace loupe::optim
