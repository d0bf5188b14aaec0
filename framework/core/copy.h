// Copy family: strided copies, dtype casts, fills and the add that accumulates gradients: the
// memory-level kernels core/ itself needs (copy_, fill_, to_contiguous, add_into), below every op.
#pragma once
#include "core/exec_context.h"
#include "core/tensor.h"

#include <utility>
#include <vector>

namespace loupe {

struct CopyKernels {
  // dst and src: same device, shape and element size; any strides.
  void (*copy_strided)(const ExecContext& ctx, const Tensor& dst, const Tensor& src);
  // Both contiguous, same numel, any two dtypes (float rounding to nearest even).
  void (*cast)(const ExecContext& ctx, const Tensor& dst, const Tensor& src);
  // dst contiguous.
  void (*fill)(const ExecContext& ctx, const Tensor& dst, double value);
  // dst = a + b, element by element over the buffers: all three dense with the same strides; dst
  // and a of one floating dtype, b of any floating dtype (a float16 gradient into a float32 one).
  // dst's dtype sets the arithmetic: float64 for float64, else float32.
  void (*add)(const ExecContext& ctx, const Tensor& dst, const Tensor& a, const Tensor& b);
  // dst += src for every pair, as `add` does one: the gradients of a backward pass accumulated
  // into their leaves' .grad in one launch on a GPU (autograd/engine.cpp), not one per leaf. Each
  // dst dense, each src dense with dst's strides and numel, or (a channels-last convolution's
  // filter gradient) 4-D channels-last into a contiguous dst. `write`: dst = src instead, as
  // `cast` does it (gradients that were to read zero: autograd::FreshGrads).
  void (*add_many)(const ExecContext& ctx, const std::vector<std::pair<Tensor, Tensor>>& pairs, bool write);
};

}  // namespace loupe
