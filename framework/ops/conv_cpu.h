// The CPU convolution's two implementations: oneDNN's (float32, where the build found libdnnl-dev:
// LOUPE_DNNL, conv_dnnl.cpp) and im2col + GEMM (conv_cpu.cpp: float64, and every dtype without
// oneDNN). The op table (ConvKernels) picks between them; this header is for `loupe --version`,
// tests and benchmarks.
#pragma once
#include <string>

#include "core/tensor.h"
#include "ops/conv.h"

namespace loupe::cpu {

// oneDNN's version ("2.6.3") when this build does float32 convolutions through it, else "".
std::string dnnl_version();

namespace detail {

// Which implementation the CPU's float32 convolutions use. Auto: oneDNN in its own layouts where
// built (measured the fastest, conv_cpu.cpp), else im2col. The others force one, for tests and benchmarks; the oneDNN ones fall back to im2col
// without oneDNN or where it refuses the shapes.
enum class ConvPath { Auto, Im2col, DnnlAny, DnnlPlain };
void set_conv_path(ConvPath path);  // not while a convolution runs
ConvPath conv_path();

// The im2col + GEMM convolution on contiguous NCHW / OIHW tensors (any floating dtype), whatever
// the path: the reference the oneDNN one is tested against. Same contract as ConvKernels.
void conv_forward_im2col(const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p);
void conv_backward_im2col(const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w, const Tensor& gy,
                          const Conv2dParams& p);

// oneDNN's float32 convolution on contiguous NCHW / OIHW tensors, in layout `any` (oneDNN's choice
// of internal layouts, with reorders) or plain (NCHW / OIHW throughout). False, having done
// nothing, where the build has no oneDNN or oneDNN cannot take these shapes.
bool conv_forward_dnnl(const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p, bool any);
bool conv_backward_dnnl(const Tensor& gx, const Tensor& gw, const Tensor& x, const Tensor& w, const Tensor& gy,
                        const Conv2dParams& p, bool any);

}  // namespace detail
}  // namespace loupe::cpu
