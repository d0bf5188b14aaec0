// Batch normalisation over N and the spatial dimensions (per channel), for x [N, C, ...].
// Training: normalise with the batch statistics and update the running ones in place
// (running = (1 - momentum) running + momentum batch; the running variance is the unbiased one, as
// in PyTorch and cuDNN). Evaluation: normalise with the running statistics. cuDNN on the GPU.
#pragma once
#include <cstdint>

#include "core/exec_context.h"
#include "core/tensor.h"

namespace loupe {

// weight, bias, running_mean, running_var: [C] float. Gradients flow to x, weight and bias in
// training mode; evaluation mode records no gradient (the statistics are constants then).
Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum = 0.1, double eps = 1e-5);

struct NormKernels {
  // Writes y, the batch mean and 1/sqrt(var + eps) per channel, and updates the running stats.
  void (*forward_train)(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                        const Tensor& rmean, const Tensor& rvar, const Tensor& save_mean, const Tensor& save_invstd,
                        double momentum, double eps, int64_t N, int64_t C, int64_t HW);
  void (*forward_eval)(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                       const Tensor& rmean, const Tensor& rvar, double eps, int64_t N, int64_t C, int64_t HW);
  void (*backward)(const ExecContext& ctx, const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& x,
                   const Tensor& w, const Tensor& save_mean, const Tensor& save_invstd, const Tensor& gy, double eps,
                   int64_t N, int64_t C, int64_t HW);
};

}  // namespace loupe
