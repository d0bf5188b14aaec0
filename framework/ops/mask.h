// A sequence's mask from its values (Keras's Masking layer): a step is kept where any of its
// features differs from the padding value.
#pragma once
#include "core/exec_context.h"
#include "core/tensor.h"

namespace loupe {

// x [..., F] -> [...] in x's dtype: 1 where some x[..., f] != value (NaN included), else 0. Not
// differentiable: the mask carries no gradient.
Tensor any_not_equal(const Tensor& x, double value);

struct MaskKernels {
  // out [rows] from x [rows, features], both contiguous.
  void (*any_not_equal)(const ExecContext& ctx, const Tensor& out, const Tensor& x, int64_t features, double value);
};

}  // namespace loupe
