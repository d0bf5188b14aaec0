// gemm() without a BLAS library: the builtin kernel (CMake compiles this file or gemm_blas.cpp).
#include "ops/backend/gemm_cpu.h"

namespace loupe::cpu {

template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  gemm_builtin(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);

const char* gemm_backend_name() { return "builtin"; }

bool blas_sgemv(int64_t, int64_t, const float*, const float*, float*) { return false; }

bool lapack_orthonormalize(double*, int64_t, int64_t) { return false; }

}  // namespace loupe::cpu
