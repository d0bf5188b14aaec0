// Activations: relu, sigmoid, tanh. Backward uses the saved output (cheaper than the input).
#pragma once
#include "core/exec_context.h"
#include "core/tensor.h"

namespace loupe {

enum class Act : int { Relu, Sigmoid, Tanh };

Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor activation(Act a, const Tensor& x);

struct ActivationKernels {
  void (*forward)(const ExecContext& ctx, Act a, const Tensor& y, const Tensor& x);                      // contiguous
  void (*backward)(const ExecContext& ctx, Act a, const Tensor& gx, const Tensor& y, const Tensor& gy);  // contiguous
};

}  // namespace loupe
