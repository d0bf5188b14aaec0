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
// a [M, K] @ b [K, N] with no autograd record: the GEMM that matmul and its backward run (for ops
// that own their backward, ops/fused/linear_act.cpp). Counts its FLOPs.
Tensor matmul_nograd(const Tensor& a, const Tensor& b);

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

// A Linear layer's product with the bias in the GEMM's epilogue; all row-major and contiguous, all
// of `dtype`, `rows` the batch:
//   forward:  d = y [rows, out] = a = x [rows, in] @ b = w [out, in]^T + bias [out]
//   backward: d = the weight's gradient [out, in] = b = gy [rows, out]^T @ a = x [rows, in], and
//             bias = the bias's gradient [out], the sums of gy's rows.
struct BiasGemmArgs {
  int64_t rows = 0, in = 0, out = 0;
  DType dtype = DType::f32;
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  void* bias = nullptr;
};

// A narrow layer's backward (LinalgKernels::narrow_backward), all row-major and contiguous, of one
// dtype: gx [rows, in] = gy [rows, out] w [out, in]; gw [out, in] = gy^T x [rows, in]; gb [out] =
// gy's column sums. Each output is computed where its pointer is set. `work`: float32 scratch of
// narrow_backward_work(rows, in, out) elements, for the sums of each kNarrowShareRows rows.
struct NarrowBackwardArgs {
  int64_t rows = 0, in = 0, out = 0;
  DType dtype = DType::f32;
  const void* gy = nullptr;
  const void* x = nullptr;
  const void* w = nullptr;
  void* gx = nullptr;
  void* gw = nullptr;
  void* gb = nullptr;
  float* work = nullptr;
};
constexpr int64_t kNarrowShareRows = 32;
inline int64_t narrow_backward_work(int64_t rows, int64_t in, int64_t out) {
  return (rows + kNarrowShareRows - 1) / kNarrowShareRows * out * (in + 1);
}
// The cases narrow_backward takes: up to 16 outputs and 1024 rows (the most measured). There it
// beats or ties cuBLAS on mnist_mlp's fc3 (512 -> 10), and at 1024 rows beats it well on the CNNs'
// heads (128 -> 10, 512 -> 10), where cuBLASLt's bias-gradient GEMM is slow (lab/benchmarks.md,
// "A classifier head's backward up to 1024 rows").
inline bool narrow_backward_fits(int64_t rows, int64_t in, int64_t out) {
  return out >= 1 && out <= 16 && rows >= 1 && rows <= 1024 && in >= 1;
}

struct LinalgKernels {
  // Row-major C = alpha * op(A) op(B) + beta * C (float32 data on TF32 tensor cores under tf32).
  void (*gemm)(const ExecContext& ctx, const GemmArgs& g);
  // The bias in the GEMM's epilogue (BiasGemmArgs), or null where the backend has no such GEMM.
  // Each returns false, having done nothing, when the library has no kernel for the case; the
  // caller then does the bias its own way.
  bool (*linear_bias)(const ExecContext& ctx, const BiasGemmArgs& g) = nullptr;
  bool (*weight_grad_bias)(const ExecContext& ctx, const BiasGemmArgs& g) = nullptr;
  // A classifier head's backward (out <= 16) in one launch instead of two GEMMs and a sum, or null;
  // false, having done nothing, where the case does not fit.
  bool (*narrow_backward)(const ExecContext& ctx, const NarrowBackwardArgs& g) = nullptr;
};

// Row-major C = op(A) op(B) (+ C with `accumulate`) on raw pointers to elements of dtype t, through
// device d's backend (kernels that carve matrices out of their own buffers: the LSTM, im2col).
// `ctx`: the calling kernel's context.
void gemm_raw(const ExecContext& ctx, Device d, DType t, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
              const void* A, int64_t lda, const void* B, int64_t ldb, void* C, int64_t ldc, bool accumulate = false);

}  // namespace loupe
