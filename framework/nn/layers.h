// The basic layers: Linear, ReLU, Dropout, Flatten, and the Sequential container.
#pragma once
#include <memory>

#include "nn/module.h"

namespace loupe::nn {

// y = x W^T + b with W [out, in] (PyTorch's layout), Glorot-uniform W and zero b (Keras' defaults).
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;
  Tensor weight, bias;
  int64_t in_features, out_features;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "ReLU"; }
};

class Dropout : public Module {
 public:
  explicit Dropout(double p) : p_(p) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;
 private:
  double p_;
};

class Flatten : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.flatten(1); }
  std::string type_name() const override { return "Flatten"; }
};

class Sequential : public Module {
 public:
  Sequential() = default;
  // Appends a layer named `name` (e.g. "fc1"); returns *this for chaining.
  Sequential& add(const std::string& name, std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
};

// Fills t (on the CPU) with U(-a, a), a = sqrt(6 / (fan_in + fan_out)), from the default generator.
void glorot_uniform_(const Tensor& t, int64_t fan_in, int64_t fan_out);

}  // namespace loupe::nn
