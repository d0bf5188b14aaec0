// The basic layers: Linear, ReLU, Dropout, Flatten, Embedding, and the Sequential container.
#pragma once
#include <memory>

#include "nn/module.h"
#include "ops/conv.h"
#include "ops/nonlinearity.h"
#include "ops/pool.h"
#include "ops/view.h"

namespace loupe::nn {

// y = x W^T + b with W [out, in] (PyTorch's layout), Glorot-uniform W and zero b (Keras' defaults).
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true);
  Tensor forward(const Tensor& x) override;
  // The GEMM, then the bias, an activation and dropout in one fused pass: one op, linear_act
  // (ops/fused/linear_act.h), whose GEMMs may take the bias in their epilogues.
  bool accepts(const Epilogue&) const override { return true; }
  Tensor forward_fused(const Tensor& x, const Epilogue& e) override;
  std::string type_name() const override;
  Tensor weight, bias;
  int64_t in_features, out_features;
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override;
  bool extend(Epilogue& e) const override;  // first in an epilogue, once
  std::string type_name() const override { return "ReLU"; }
};

// Sigmoid or tanh (ops/activation.h) as a layer; like ReLU, first in an epilogue, once.
class Activation : public Module {
 public:
  explicit Activation(Act a) : act_(a) {}
  Tensor forward(const Tensor& x) override;
  bool extend(Epilogue& e) const override;
  std::string type_name() const override;

 private:
  Act act_;
};

// Keras's other activations (ops/nonlinearity.h) as a layer: elu, selu, gelu, silu, hard_sigmoid
// (its slope: 0.2 in Keras 2, 1/6 in Keras 3), softplus, softsign. No epilogue: no fused kernel
// applies them.
class Nonlinearity : public Module {
 public:
  explicit Nonlinearity(Nonlin f, float slope = 0.2f) : f_(f), slope_(slope) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;

 private:
  Nonlin f_;
  float slope_;
};

class Dropout : public Module {
 public:
  explicit Dropout(double p) : p_(p) {}
  Tensor forward(const Tensor& x) override;
  bool extend(Epilogue& e) const override;  // after relu or nothing, once
  std::string type_name() const override;
 private:
  double p_;
};

class Flatten : public Module {
 public:
  Tensor forward(const Tensor& x) override { return flatten(x, 1); }
  std::string type_name() const override { return "Flatten"; }
};

// Conv2d: w [out, in, k, k] Glorot-uniform (fan_in = in k k, fan_out = out k k, as Keras), b zero.
// padding: "valid" (0), "same" (stride 1, odd k), or an explicit number of pixels.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in, int64_t out, int kernel, int stride = 1, int padding = 0, bool bias = true);
  Tensor forward(const Tensor& x) override;
  bool accepts(const Epilogue&) const override { return true; }
  Tensor forward_fused(const Tensor& x, const Epilogue& e) override;
  std::string type_name() const override;
  InputLayout input_layout() const override;  // autocast's dtype, the layer's memory format
  Tensor input(const Tensor& x) const;          // x as the convolution reads it: autocast, in that format
  Conv2dParams params() const;  // its stride and padding
  Tensor weight, bias;
  int64_t in_channels, out_channels;
  int kernel, stride, padding;
};
inline int same(int kernel) { return (kernel - 1) / 2; }

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int kernel, int stride = -1, int padding = 0);
  Tensor forward(const Tensor& x) override;
  // A Dropout after it runs in the pooling's own pass (ops/pool.h).
  bool accepts(const Epilogue& e) const override { return !e.act; }
  Tensor forward_fused(const Tensor& x, const Epilogue& e) override;
  std::string type_name() const override;
  Pool2dParams params() const;
 private:
  int kernel_, stride_, padding_;
};

class AvgPool2d : public Module {
 public:
  explicit AvgPool2d(int kernel, int stride = -1, int padding = 0);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override;
 private:
  int kernel_, stride_, padding_;
};

// BatchNorm2d over [N, C, H, W] (or [N, C]): weight 1, bias 0; running mean 0 and variance 1 as
// buffers. PyTorch's defaults: momentum 0.1 (Keras' 0.99 is 0.01 here), eps 1e-5.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t channels, double momentum = 0.1, double eps = 1e-5);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "BatchNorm2d(" + std::to_string(channels) + ")"; }
  Tensor weight, bias, running_mean, running_var;
  int64_t channels;

 protected:
  std::vector<Tensor> own_float32_parameters() const override { return {weight, bias}; }  // scale, shift

 private:
  double momentum_, eps_;
};

// Reshapes each sample to `shape` (e.g. [28, 28] images to [1, 28, 28] for a Conv2d).
class Reshape : public Module {
 public:
  explicit Reshape(Shape shape) : shape_(shape) {}
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Reshape"; }
 private:
  Shape shape_;
};

// Runs its layers in order. A layer that accepts an epilogue gets the activation and dropout
// layers that follow it folded into its own pass (Module::accepts; LOUPE_FUSE=0 turns this off,
// for comparison). On CUDA a stack of Linear + ReLU (+ Dropout) layers ending in a narrow Linear
// runs as one op, ops/fused/mlp.h, where its kernels take it (LOUPE_FUSE_MLP=0 turns that off).
class Sequential : public Module {
 public:
  Sequential() = default;
  // Appends a layer named `name` (e.g. "fc1"); returns *this for chaining.
  Sequential& add(const std::string& name, std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Sequential"; }
  InputLayout input_layout() const override;  // its first layer's

 private:
  size_t epilogue_after(size_t i, Epilogue& e) const;
  size_t run_mlp(size_t i, Tensor& h);
  size_t run_conv_pool(size_t i, Tensor& h);
};

// Fills t (on the CPU) with U(-a, a), a = sqrt(6 / (fan_in + fan_out)), from the default generator.
void glorot_uniform_(const Tensor& t, int64_t fan_in, int64_t fan_out);
// Fills t (on the CPU, float32) with U(lo, hi), drawn from the default generator like glorot_uniform_.
void uniform_(const Tensor& t, double lo, double hi);

// Keras's VarianceScaling initializer (glorot_*, he_*, lecun_* are cases of it): values of variance
// scale / n, n the fan in, the fan out or their mean, drawn from a normal truncated at two standard
// deviations (its deviation divided by 0.8796..., so the variance is still scale / n), a normal,
// or a uniform of that variance. Fills t (CPU, float32) from the default generator.
enum class FanMode { In, Out, Average };
enum class Distribution { TruncatedNormal, Normal, Uniform };
struct VarianceScaling {
  double scale = 1;
  FanMode mode = FanMode::Average;
  Distribution distribution = Distribution::Uniform;  // glorot_uniform, Keras's default kernel initializer
  // glorot_uniform: what Linear and Conv2d draw themselves.
  bool glorot_uniform() const { return scale == 1 && mode == FanMode::Average && distribution == Distribution::Uniform; }
};
void variance_scaling_(const Tensor& t, int64_t fan_in, int64_t fan_out, const VarianceScaling& v);

// A [V, E] table of rows looked up by token id, initialised U(-0.05, 0.05) (Keras' default for
// Embedding). Input: ids of any shape, int32 or floats holding integers; output ids.shape + [E].
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim);
  Tensor forward(const Tensor& ids) override;
  std::string type_name() const override;
  Tensor weight;
  int64_t num_embeddings, embedding_dim;

 protected:
  // The lookup reads the float32 table and gives float32 rows (the next layer casts them): a 16-bit
  // copy of a large table (fastText's 60M entries) would cost a refresh over all of it every step.
  std::vector<Tensor> own_float32_parameters() const override { return {weight}; }
};

}  // namespace loupe::nn
