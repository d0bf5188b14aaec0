// loupe's stepwise CUDA LSTM (ops/lstm/lstm_step_cuda.cu): the CPU's algorithm (ops/lstm/lstm_cpu.cpp) on the
// GPU, one GEMM and one pointwise kernel per time step and direction, in float32, float16 or bfloat16.
//
// Why: cuDNN's LSTM has only the logistic sigmoid for the gates i, f, o, so an LSTM with Keras's
// hard_sigmoid (LstmParams::hard_slope) runs on loupe's kernels; the persistent ones
// (ops/lstm/lstm_persist.h) take 16-bit data and hidden sizes 16..128 only. This is the fallback that
// takes every other such LSTM (float32, any hidden size) without dropout between layers.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "ops/lstm/lstm.h"

namespace loupe::lstm_step {

// Whether the stepwise kernels run this LSTM in this dtype (float32, float16, bfloat16); not with
// dropout between layers (p.dropout > 0 && p.num_layers > 1). If not, *why (when non-null) says why.
bool step_supports(const LstmParams& p, DType dtype, std::string* why);

// LstmKernels' forward (ops/lstm/lstm.h): y [N, T, D*H] batch-first contiguous is written in place (never
// re-seated), h, c [L*D, N, H]; returns what the backward needs (undefined unless training).
Tensor step_forward(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, Tensor& y,
                    const Tensor& h, const Tensor& c, bool training, cudaStream_t stream);

// LstmKernels' backward in one round: dy [N, T, D*H] (undefined: zero; any strides, read in place),
// dh, dc [L*D, N, H] (undefined: zero), dx (undefined: not wanted), dw the whole flat gradient,
// overwritten: W, R, b_W, and b_R = b_W's gradient (they enter the gates identically; with
// p.single_bias the op, ops/lstm/lstm.cpp, zeroes b_R's).
void step_backward(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, const Tensor& y,
                   const Tensor& saved, const Tensor& dy, const Tensor& dh, const Tensor& dc, const Tensor& dx,
                   const Tensor& dw, cudaStream_t stream);

}  // namespace loupe::lstm_step
