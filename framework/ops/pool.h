// 2-D max and average pooling, NCHW. cuDNN on the GPU, direct loops on the CPU. Padding is
// never part of a window: max ignores it, average divides by the count of real elements (Keras'
// semantics; PyTorch's default counts the padding).
#pragma once
#include "core/tensor.h"

namespace loupe {

enum class PoolMode : int { Max, Avg };

struct Pool2dParams {
  int kernel_h = 2, kernel_w = 2;
  int stride_h = 2, stride_w = 2;
  int pad_h = 0, pad_w = 0;
};

Tensor max_pool2d(const Tensor& x, const Pool2dParams& p);
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p);
// Mean over H and W: [N, C, H, W] -> [N, C].
Tensor global_avg_pool(const Tensor& x);

struct PoolKernels {
  void (*forward)(PoolMode m, const Tensor& y, const Tensor& x, const Pool2dParams& p);
  // gx from gy (and x, y for max pooling).
  void (*backward)(PoolMode m, const Tensor& gx, const Tensor& x, const Tensor& y, const Tensor& gy,
                   const Pool2dParams& p);
};

}  // namespace loupe
