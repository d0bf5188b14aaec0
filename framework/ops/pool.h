// 2-D max and average pooling, NCHW. cuDNN on the GPU, direct loops on the CPU. Padding is
// never part of a window: max ignores it, average divides by the count of real elements (Keras'
// semantics; PyTorch's default counts the padding).
#pragma once
#include "core/exec_context.h"
#include "core/random.h"
#include "core/tensor.h"

namespace loupe {

enum class PoolMode : int { Max, Avg };

struct Pool2dParams {
  int kernel_h = 2, kernel_w = 2;
  int stride_h = 2, stride_w = 2;
  int pad_h = 0, pad_w = 0;
};

Tensor max_pool2d(const Tensor& x, const Pool2dParams& p);
// Max pooling followed by dropout (in training): one pass each way where the backend has a kernel
// for it (CUDA, channels-last, windows that do not overlap; nn::Sequential uses it for MaxPool2d +
// Dropout), else the two ops one after the other; the same result either way.
Tensor max_pool2d(const Tensor& x, const Pool2dParams& p, double dropout, bool training);
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p);
// Mean over H and W: [N, C, H, W] -> [N, C].
Tensor global_avg_pool(const Tensor& x);

// Dropout applied to a pooling's output (off, or its probability and draw).
struct PoolDropout {
  bool on = false;
  float p = 0;
  RngDraw rng;
};

struct PoolKernels {
  void (*forward)(const ExecContext& ctx, PoolMode m, const Tensor& y, const Tensor& x, const Pool2dParams& p);
  // gx from gy (and x, y for max pooling).
  void (*backward)(const ExecContext& ctx, PoolMode m, const Tensor& gx, const Tensor& x, const Tensor& y,
                   const Tensor& gy, const Pool2dParams& p);
  // Max pooling with its dropout, recomputing each window's max from x in the backward (y is not
  // needed); both return false, having done nothing, where the backend has no kernel for the
  // shapes (null: none at all). The same shapes give the same answer forward and backward.
  bool (*max_forward_fused)(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Pool2dParams& p,
                            const PoolDropout& d);
  bool (*max_backward_fused)(const ExecContext& ctx, const Tensor& gx, const Tensor& x, const Tensor& gy,
                             const Pool2dParams& p, const PoolDropout& d);
};

}  // namespace loupe
