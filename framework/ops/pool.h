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
// Max pooling (and its dropout) as the one reader of x = relu(z + b), where x's gradient is
// wanted only on the way to z's and b's: x's recorded gradient is z's (through the relu: where a
// window's max is positive), and b's is that summed over each channel, both from the pooling's
// backward pass, which on CUDA makes them in the same kernel; bias_act's pass over the activation
// is gone (nn::Sequential: Conv2d + ReLU + MaxPool2d (+ Dropout)). Only where max_pool2d's fused
// kernels take x (CUDA, channels-last, disjoint windows: max_pool2d_of_relu_fits); the result is
// max_pool2d's. The caller's x must have no other reader, and its own node must take z's gradient.
Tensor max_pool2d_of_relu(const Tensor& x, const Tensor& b, const Pool2dParams& p, double dropout, bool training);
bool max_pool2d_of_relu_fits(Device d, DType t, int64_t channels, const Pool2dParams& p);
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
  // max_backward_fused for x = relu(z + b) (max_pool2d_of_relu): gz, z's gradient, and gb[c], its
  // sum over channel c, in gb's dtype. False, having done nothing, where it has no kernel for them.
  bool (*max_backward_relu_bias)(const ExecContext& ctx, const Tensor& gz, const Tensor& gb, const Tensor& x,
                                 const Tensor& gy, const Pool2dParams& p, const PoolDropout& d) = nullptr;
};

}  // namespace loupe
