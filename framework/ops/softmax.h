// Softmax and log-softmax over the last dimension.
#pragma once
#include "core/exec_context.h"
#include "core/tensor.h"

namespace loupe {

Tensor softmax(const Tensor& x);
Tensor log_softmax(const Tensor& x);

struct SoftmaxKernels {
  // x, y contiguous [rows, cols].
  void (*forward)(const ExecContext& ctx, bool log, const Tensor& y, const Tensor& x, int64_t rows, int64_t cols);
  // softmax: gx = y * (gy - sum(gy * y)); log-softmax: gx = gy - exp(y) * sum(gy).
  void (*backward)(const ExecContext& ctx, bool log, const Tensor& gx, const Tensor& y, const Tensor& gy, int64_t rows,
                   int64_t cols);
};

}  // namespace loupe
