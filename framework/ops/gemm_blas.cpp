// gemm() through OpenBLAS, compiled when the build finds it (CMake picks this file or
// gemm_default.cpp). OpenBLAS runs its own threads; it is several times faster than the builtin
// kernel because its micro-kernels are hand-written per CPU and chosen at run time.
#include <cblas.h>

#include <climits>

#include "core/error.h"
#include "ops/gemm_cpu.h"

namespace loupe::cpu {
namespace {

void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
               const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha,
               const double* A, int lda, const double* B, int ldb, double beta, double* C,
               int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace

template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  // Checked here so that bad arguments raise loupe::Error instead of OpenBLAS printing a
  // message from xerbla and returning with C untouched.
  detail::check_gemm_args(ta, tb, M, N, K, lda, ldb, ldc);
  for (int64_t v : {M, N, K, lda, ldb, ldc})
    LOUPE_CHECK(v <= INT_MAX, "gemm: size or stride ", v, " exceeds the 32-bit BLAS interface");
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == T(0)) {
    // BLAS says A and B are not read then, but some OpenBLAS kernels still multiply 0 by them
    // (0 * NaN = NaN; seen with OpenBLAS on a Sapphire Rapids host): scale C ourselves.
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
    return;
  }
  blas_gemm(ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N),
            int(K), alpha, A, int(lda), B, int(ldb), beta, C, int(ldc));
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);

const char* gemm_backend_name() { return "OpenBLAS"; }

}  // namespace loupe::cpu
