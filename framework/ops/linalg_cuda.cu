#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "core/exec_context.h"
#include "ops/linalg.h"

namespace loupe {
namespace {

// cuBLAS is column-major: the row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T,
// so we pass B first and swap M and N; no data moves.
// cuBLAS's math mode follows --precision: TF32 tensor ops for float32 GEMMs only with tf32. The
// mode does not affect float16/bfloat16 GEMMs, which use tensor cores in every mode. The mode is
// each lane's handle's own, so it is read from the handle (a host-side getter) rather than cached.
void set_math_mode(cublasHandle_t h, Precision p) {
  cublasMath_t want = p == Precision::TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH, current{};
  LOUPE_CUBLAS_CHECK(cublasGetMathMode(h, &current));
  if (want != current) LOUPE_CUBLAS_CHECK(cublasSetMathMode(h, want));
}

// float16 and bfloat16 (mixed precision): 16-bit A, B and C, float32 accumulation and float
// alpha/beta (CUBLAS_COMPUTE_32F); cuBLAS runs these on tensor cores in its default math mode.
void gemm_16bit(cublasHandle_t h, const GemmArgs& g, cublasOperation_t opA, cublasOperation_t opB) {
  cudaDataType t = g.dtype == DType::f16 ? CUDA_R_16F : CUDA_R_16BF;
  float alpha = float(g.alpha), beta = float(g.beta);
  LOUPE_CUBLAS_CHECK(cublasGemmEx(h, opB, opA, int(g.N), int(g.M), int(g.K), &alpha, g.B, t, int(g.ldb),
                                  g.A, t, int(g.lda), &beta, g.C, t, int(g.ldc), CUBLAS_COMPUTE_32F,
                                  CUBLAS_GEMM_DEFAULT));
}

void gemm_cublas(const ExecContext& ctx, const GemmArgs& g) {
  const cublasHandle_t h = cuda::cublas(ctx);
  set_math_mode(h, ctx.precision);
  cublasOperation_t opA = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opB = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (g.dtype == DType::f32) {
    float alpha = float(g.alpha), beta = float(g.beta);
    LOUPE_CUBLAS_CHECK(cublasSgemm(h, opB, opA, int(g.N), int(g.M), int(g.K), &alpha,
                                   static_cast<const float*>(g.B), int(g.ldb), static_cast<const float*>(g.A),
                                   int(g.lda), &beta, static_cast<float*>(g.C), int(g.ldc)));
  } else if (g.dtype == DType::f64) {
    double alpha = g.alpha, beta = g.beta;
    LOUPE_CUBLAS_CHECK(cublasDgemm(h, opB, opA, int(g.N), int(g.M), int(g.K), &alpha,
                                   static_cast<const double*>(g.B), int(g.ldb), static_cast<const double*>(g.A),
                                   int(g.lda), &beta, static_cast<double*>(g.C), int(g.ldc)));
  } else if (g.dtype == DType::f16 || g.dtype == DType::bf16) {
    gemm_16bit(h, g, opA, opB);
  } else {
    LOUPE_FAIL("matmul on CUDA supports float32, float64, float16 and bfloat16, got ", dtype_name(g.dtype));
  }
}

const LinalgKernels table{gemm_cublas};
const RegisterBackend<LinalgKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
