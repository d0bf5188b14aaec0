// Optimizers: each step is one fused kernel over the whole parameter arena (DESIGN.md principle 4).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nn/arena.h"
#include "optim/grad_scaler.h"

namespace loupe::optim {

class Optimizer {
 public:
  explicit Optimizer(nn::ParameterArena& arena) : arena_(arena) {}
  virtual ~Optimizer() = default;
  virtual void step() = 0;
  virtual std::string name() const = 0;
  void zero_grad() { arena_.zero_grad(); }
  // Skips each update on the device while the GradScaler's found_inf flag is set (null: never),
  // without the host waiting for the flag; Adam then counts only the steps that were applied.
  void set_scaler(const GradScaler* s) { scaler_ = s; }
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  int64_t steps() const { return steps_; }
  // State buffers (arena-shaped) by name, for checkpoints; restore with the same names.
  std::vector<std::pair<std::string, Tensor>> state() const { return state_; }
  void set_steps(int64_t s) { steps_ = s; }

 protected:
  Tensor& add_state(const std::string& name);
  const float* scaler_state() const;  // the scaler's device state, or null
  nn::ParameterArena& arena_;
  const GradScaler* scaler_ = nullptr;
  double lr_ = 1e-3;
  int64_t steps_ = 0;
  std::vector<std::pair<std::string, Tensor>> state_;
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

// `scaler`: a GradScaler's state on the kernel's device, or null. When set, the kernel leaves
// everything untouched if scaler[kFoundInf] != 0.
struct AdamArgs {
  float lr, beta1, beta2, eps, weight_decay;
  float bias1, bias2;  // 1 - beta^t for the host's step count t (used without a scaler)
  // With a scaler, the kernel computes the corrections itself for t = step - scaler[kSkipped]
  // (the steps skipped before this one), in double as the host does.
  int64_t step;
  double beta1_d, beta2_d;
};
struct OptimKernels {
  void (*sgd)(const Tensor& p, const Tensor& g, const Tensor& buf, float lr, float momentum, bool nesterov,
              float weight_decay, const float* scaler);
  void (*rmsprop)(const Tensor& p, const Tensor& g, const Tensor& v, float lr, float rho, float eps,
                  const float* scaler);
  void (*adam)(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamArgs& a,
               const float* scaler);
  void (*adadelta)(const Tensor& p, const Tensor& g, const Tensor& acc, const Tensor& delta, float lr, float rho,
                   float eps, const float* scaler);
};

}  // namespace loupe::optim
