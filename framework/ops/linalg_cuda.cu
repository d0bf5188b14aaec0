#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "core/precision.h"
#include "ops/linalg.h"

namespace loupe {
namespace {

// cuBLAS is column-major: the row-major C = op(A) op(B) is the column-major C^T = op(B)^T op(A)^T,
// so we pass B first and swap M and N; no data moves.
// cuBLAS's math mode follows --precision: TF32 tensor ops for float32 GEMMs only with tf32.
void set_math_mode() {
  static cublasMath_t current = CUBLAS_DEFAULT_MATH;  // as cuda_runtime.cu creates the handle
  cublasMath_t want = precision() == Precision::TF32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
  if (want != current) {
    LOUPE_CUBLAS_CHECK(cublasSetMathMode(cuda::cublas(), want));
    current = want;
  }
}

void gemm(const GemmArgs& g) {
  set_math_mode();
  cublasOperation_t opA = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N, opB = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (g.dtype == DType::f32) {
    float alpha = float(g.alpha), beta = float(g.beta);
    LOUPE_CUBLAS_CHECK(cublasSgemm(cuda::cublas(), opB, opA, int(g.N), int(g.M), int(g.K), &alpha,
                                   static_cast<const float*>(g.B), int(g.ldb), static_cast<const float*>(g.A),
                                   int(g.lda), &beta, static_cast<float*>(g.C), int(g.ldc)));
  } else {
    double alpha = g.alpha, beta = g.beta;
    LOUPE_CUBLAS_CHECK(cublasDgemm(cuda::cublas(), opB, opA, int(g.N), int(g.M), int(g.K), &alpha,
                                   static_cast<const double*>(g.B), int(g.ldb), static_cast<const double*>(g.A),
                                   int(g.lda), &beta, static_cast<double*>(g.C), int(g.ldc)));
  }
}

const LinalgKernels table{gemm};
const RegisterBackend<LinalgKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
