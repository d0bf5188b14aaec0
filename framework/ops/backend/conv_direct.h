// The convolution's kernels outside cuDNN (ops/conv_direct_cuda.cu), for ops/conv_cuda.cu: small
// 16-bit filters as im2col + one cuBLAS GEMM, and a first layer's filter and bias gradients in
// one pass. Each file's comments say when ops/conv_cuda.cu takes them.
#pragma once
#include <cuda_runtime.h>

#include "core/exec_context.h"
#include "core/tensor.h"
#include "ops/conv.h"

namespace loupe::conv_direct {

// [N, C, H, W] laid out densely as [N, H, W, C] (C == 1 is both layouts).
bool nhwc(const Tensor& t);

// Whether a convolution runs as im2col + GEMM: bfloat16, channels-last, at most 16 filter values.
bool small_filter(const Tensor& x, const Tensor& w, const Tensor& y);
// y = conv(x, w) and gw = the correlation of x and gy, as im2col + one GEMM each.
void forward_gemm(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p,
                  cudaStream_t stream);
void filter_gemm(const ExecContext& ctx, const Tensor& gw, const Tensor& x, const Tensor& w, const Tensor& gy,
                 const Conv2dParams& p, cudaStream_t stream);

// A first layer's one pass (conv_direct_cuda.cu says how it works): its geometry, set by
// first_layer_fits where the pass takes the problem (a 3x3 filter over 1-4 channels; x, y and gy
// channels-last; relu or no activation; a tile that fits in shared memory).
struct FirstLayer {
  int H, W, P, Q, K, sh, sw, ph, pw;
  int TH, TW;      // the x tile of a block's rows: input rows and columns
  int row_blocks;  // blocks of kFirstWarps output rows in an image
  int slabs;       // N * row_blocks
};
bool first_layer_fits(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& gy, int act,
                      const Conv2dParams& p, FirstLayer& g);
// gw (KRSC) and gb (or undefined) of y = act(conv(x, w) + b) from gy and y: the pass and the
// blocks' sum.
void first_layer_run(const ExecContext& ctx, const Tensor& gw, const Tensor& gb, const Tensor& x, const Tensor& y,
                     const Tensor& gy, int act, const FirstLayer& g);

}  // namespace loupe::conv_direct
