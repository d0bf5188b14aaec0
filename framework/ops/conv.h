// 2-D convolution (cross-correlation, as every framework), NCHW. cuDNN on the GPU with the
// algorithm chosen per shape by measuring once (like PyTorch's cudnn.benchmark) and cached;
// on the CPU oneDNN (float32, where built) or im2col + GEMM (ops/conv_cpu.h).
// A layer's bias and activation come through conv2d_bias_act, which fuses them into the
// convolution's kernel where the backend has such a kernel and it is faster.
#pragma once
#include <cstdint>
#include <optional>

#include "core/exec_context.h"
#include "core/tensor.h"
#include "ops/activation.h"
#include "ops/pool.h"

namespace loupe {

struct Conv2dParams {
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;  // zero padding on each side
};

// x [N, C, H, W], w [K, C, R, S] -> [N, K, P, Q] with P = (H + 2 pad_h - R) / stride_h + 1.
Tensor conv2d(const Tensor& x, const Tensor& w, const Conv2dParams& p);

// drop(act(conv2d(x, w) + b)): bias_act's epilogue (ops/bias_act.h; b [K] or undefined) after the
// convolution. On CUDA, with a bias, relu or no activation and no dropout, one cuDNN kernel where
// its runtime fusion has one that ran faster than the two kernels (ConvKernels::forward_bias_act):
// the sum is then rounded once, from float32, rather than after the convolution and again after
// the bias. Elsewhere the separate ops, bit for bit.
Tensor conv2d_bias_act(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                       std::optional<Act> act, double dropout, bool training);

// relu(conv2d(x, w) + b), then max pooling and its dropout, as the convolution output's only
// reader: the relu's and the bias's backward in the pooling's pass (max_pool2d_of_relu), the
// forward as conv2d_bias_act's. x channels-last; undefined, having done nothing, where that
// pooling has no kernel for the output (the caller then runs the ops apart). nn::Sequential runs
// Conv2d + ReLU + MaxPool2d (+ Dropout) through it.
Tensor conv2d_relu_max_pool(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& cp,
                            const Pool2dParams& pp, double dropout, bool training);
bool conv2d_relu_max_pool_fits(const Tensor& x, const Tensor& w, const Tensor& b, const Pool2dParams& pp);

// "same" padding for stride 1 and an odd kernel; Keras' 'valid' is 0.
inline int same_padding(int kernel) { return (kernel - 1) / 2; }

struct ConvKernels {
  // y = conv(x, w); all contiguous.
  void (*forward)(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p);
  // gx = conv_transpose(gy, w) (gx may be undefined: not needed); gw = correlation of x and gy.
  void (*backward)(const ExecContext& ctx, const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w,
                   const Tensor& gy, const Conv2dParams& p);
  // y = act(conv(x, w) + b[k]) in one kernel (act: -1 none, or Act::Relu; b [K] contiguous in x's
  // dtype), where the backend has one for this problem and it beat the separate kernels when timed.
  // False, having done nothing, otherwise. Null where the backend has no such kernel.
  bool (*forward_bias_act)(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Tensor& w,
                           const Tensor& b, int act, const Conv2dParams& p) = nullptr;
  // A first layer's backward (x needs no gradient): gw and gb (or undefined) of y =
  // act(conv(x, w) + b) from gy, the gradient at y, and y, in one pass that never writes the
  // activation's gradient, where the backend has a kernel for the problem and it beat bias_act's
  // backward followed by the filter gradient when timed (or `always`: the tests). False, having
  // done nothing, otherwise. Null where the backend has no such kernel.
  bool (*filter_bias_act_backward)(const ExecContext& ctx, const Tensor& gw, const Tensor& gb, const Tensor& x,
                                   const Tensor& w, const Tensor& y, const Tensor& gy, int act, const Conv2dParams& p,
                                   bool always) = nullptr;
};

}  // namespace loupe
