// 2-D convolution (cross-correlation, as every framework), NCHW. cuDNN on the GPU with the
// algorithm chosen per shape by measuring once (like PyTorch's cudnn.benchmark) and cached;
// on the CPU oneDNN (float32, where built) or im2col + GEMM (ops/conv_cpu.h).
// The bias is a separate bias_add (its backward is a reduction).
#pragma once
#include <cstdint>

#include "core/exec_context.h"
#include "core/tensor.h"

namespace loupe {

struct Conv2dParams {
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;  // zero padding on each side
};

// x [N, C, H, W], w [K, C, R, S] -> [N, K, P, Q] with P = (H + 2 pad_h - R) / stride_h + 1.
Tensor conv2d(const Tensor& x, const Tensor& w, const Conv2dParams& p);

// "same" padding for stride 1 and an odd kernel; Keras' 'valid' is 0.
inline int same_padding(int kernel) { return (kernel - 1) / 2; }

struct ConvKernels {
  // y = conv(x, w); all contiguous.
  void (*forward)(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p);
  // gx = conv_transpose(gy, w) (gx may be undefined: not needed); gw = correlation of x and gy.
  void (*backward)(const ExecContext& ctx, const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w,
                   const Tensor& gy, const Conv2dParams& p);
};

}  // namespace loupe
