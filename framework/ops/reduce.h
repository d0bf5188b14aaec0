// Reductions: sum and mean (all elements or one dimension), argmax, and sum_to for broadcasting.
#pragma once
#include "core/exec_context.h"
#include "core/tensor.h"

namespace loupe {

Tensor sum(const Tensor& x);
Tensor mean(const Tensor& x);
Tensor sum(const Tensor& x, int dim, bool keepdim = false);
Tensor mean(const Tensor& x, int dim, bool keepdim = false);
// Sums over every dimension but `dim`: [N, C, H, W] with dim 1 -> [C] (a bias's gradient).
Tensor sum_except(const Tensor& x, int dim);
// Sums g down to `shape` (the inverse of broadcasting `shape` up to g's shape).
Tensor sum_to(const Tensor& g, const Shape& shape);
// Index of the largest element along the last dimension, int32; no autograd.
Tensor argmax(const Tensor& x);

struct ReduceKernels {
  // x contiguous, viewed as [outer, n, inner]; out[outer, inner] = scale * sum over n.
  void (*sum_dim)(const ExecContext& ctx, const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
                  double scale);
  // x contiguous, viewed as [outer, n, inner]; out[n] = scale * sum over outer and inner.
  void (*sum_keep_middle)(const ExecContext& ctx, const Tensor& out, const Tensor& x, int64_t outer, int64_t n,
                          int64_t inner, double scale);
  // x contiguous [rows, cols]; out int32 [rows].
  void (*argmax_rows)(const ExecContext& ctx, const Tensor& out, const Tensor& x, int64_t rows, int64_t cols);
};

}  // namespace loupe
