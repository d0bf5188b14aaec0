// Matrix products: cuBLAS on the GPU, BLAS (or the built-in GEMM) on the CPU. Transposed views
// are passed to the GEMM as transpose flags, never copied.
#pragma once
#include <cstdint>

#include "core/exec_context.h"
#include "core/tensor.h"

namespace loupe {

// a [M, K] @ b [K, N] -> [M, N].
Tensor matmul(const Tensor& a, const Tensor& b);
// x [N, in] @ w[out, in]^T + b[out]: a Linear layer (b may be undefined).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b);

struct GemmArgs {
  bool ta = false, tb = false;
  int64_t M = 0, N = 0, K = 0;
  double alpha = 1, beta = 0;
  const void* A = nullptr;
  int64_t lda = 0;
  const void* B = nullptr;
  int64_t ldb = 0;
  void* C = nullptr;
  int64_t ldc = 0;
  DType dtype = DType::f32;
};

struct LinalgKernels {
  // Row-major C = alpha * op(A) op(B) + beta * C (float32 data on TF32 tensor cores under tf32).
  void (*gemm)(const ExecContext& ctx, const GemmArgs& g);
};

// Row-major C = op(A) op(B) (+ C with `accumulate`) on raw pointers to elements of dtype t, through
// device d's backend (kernels that carve matrices out of their own buffers: the LSTM, im2col).
// `ctx`: the calling kernel's context.
void gemm_raw(const ExecContext& ctx, Device d, DType t, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
              const void* A, int64_t lda, const void* B, int64_t ldb, void* C, int64_t ldc, bool accumulate = false);

}  // namespace loupe
