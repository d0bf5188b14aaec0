// The activations Keras has beyond relu, sigmoid and tanh (keras.io/api/layers/activations), with
// Keras's constants. Backward reads the input: gelu's, silu's and softplus's derivatives need it.
#pragma once
#include "core/exec_context.h"
#include "core/tensor.h"

namespace loupe {

// elu      x > 0 ? x : e^x - 1 (alpha 1)
// selu     1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (e^x - 1))
// gelu     x/2 * (1 + erf(x / sqrt 2)), exact (Keras's approximate=False)
// silu     x * sigmoid(x) (Keras's "swish")
// hard_sigmoid  clip(slope x + 0.5, 0, 1): slope 0.2 in Keras 2, 1/6 in Keras 3
// softplus log(1 + e^x), as max(x, 0) + log1p(e^-|x|) so that large |x| never overflows
// softsign x / (1 + |x|)
enum class Nonlin : int { Elu, Selu, Gelu, Silu, HardSigmoid, Softplus, Softsign };
// selu's constants, one copy for both backends.
constexpr double kSeluScale = 1.0507009873554805, kSeluAlpha = 1.6732632423543772;

// `slope` is read by HardSigmoid only.
Tensor nonlinearity(Nonlin f, const Tensor& x, float slope = 0.2f);

struct NonlinKernels {
  void (*forward)(const ExecContext& ctx, Nonlin f, float slope, const Tensor& y, const Tensor& x);  // contiguous
  void (*backward)(const ExecContext& ctx, Nonlin f, float slope, const Tensor& gx, const Tensor& x,
                   const Tensor& gy);  // contiguous
};

}  // namespace loupe
