// loupe's own persistent LSTM kernels for float16 and bfloat16 (ops/lstm/lstm_persist_cuda.cu), one
// of the ways ops/lstm/lstm_cuda.cu times and picks from (the other ways are cuDNN's).
//
// Why: cuDNN (9.14, 9.19) has persistent RNN kernels for float16 and float32 but not bfloat16,
// where it falls back to a GEMM and a pointwise kernel per step, several times slower than in
// float16 (lab/benchmarks.md, "The step as one CUDA graph, and fewer kernels"). The recurrence is
// independent across batch rows, so one block can carry 16 rows through every time step with R in
// registers and no grid-wide synchronisation; the input projections and every weight gradient are
// large GEMMs.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "ops/lstm/lstm.h"

namespace loupe::lstm_persist {

// Whether these kernels run this LSTM with `rows` batch rows a block (16, or 8: twice the blocks,
// for batches that give too few to fill the GPU; hidden size 32 or more): float16 or bfloat16,
// hidden size 16, 32, 64 or 128, no dropout between layers, compute capability 8.0 or newer. If
// not, *why says why.
bool supports(const LstmParams& p, DType dtype, int rows, std::string* why);

// LstmKernels' forward and backward (ops/lstm/lstm.h), same contract: y becomes a sequence-major view;
// the returned buffer is what the backward needs (undefined unless training). The backward takes
// the forward's `rows`.
// `ctx`: the op's (ops/lstm/lstm.cpp), for the GEMMs around the recurrence.
Tensor persist_forward(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, Tensor& y, const Tensor& h,
                       const Tensor& c, bool training, int rows, cudaStream_t stream);
void persist_backward(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& saved,
                      const Tensor& dy, const Tensor& dh, const Tensor& dc, const Tensor& dx, const Tensor& dw, int rows,
                      bool weights_later, cudaStream_t stream);
// The first layer's W and R gradients, which backward left out with `weights_later`.
void persist_backward_weights(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& y, const Tensor& saved, const Tensor& dw,
                              cudaStream_t stream);

// Shared with ops/lstm/lstm_cuda.cu's cuDNN path, which keeps its buffers the same way:
// A tensor of shape s and dtype t at byte `at` of the byte buffer buf (at aligned to t).
Tensor typed_view(const Tensor& buf, size_t at, const Shape& s, DType t);
// [N, T, F] <-> [T, N, F] as a contiguous copy into dst (an existing buffer).
void swap01_into(const Tensor& dst, const Tensor& src);

}  // namespace loupe::lstm_persist
