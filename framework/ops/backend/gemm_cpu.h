// CPU matrix multiply, the routine the CPU linear, conv and rnn ops end in.
// Two backends: OpenBLAS (gemm_blas.cpp) when the build finds it, else the builtin blocked kernel
// (gemm_default.cpp). CMake compiles exactly one of them; gemm_builtin is always there, so tests
// and benchmarks can compare the two.
#pragma once
#include <cstdint>

namespace loupe::cpu {

// Row-major C[M,N] = alpha * op(A) * op(B) + beta * C, where op(X) = X^T when ta / tb is set.
// A is stored M x K (K x M when ta), B is K x N (N x K when tb); lda / ldb / ldc are the row
// strides, in elements, of the stored matrices. beta == 0 never reads C (it may hold NaN), and
// K == 0 or alpha == 0 leave C = beta * C. Instantiated for float and double.
template <class T>
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// Same contract; loupe's own cache-blocked kernel, multi-threaded over tiles of C.
template <class T>
void gemm_builtin(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                  int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// y = A x for a row-major float A [M, N] through the BLAS (cblas_sgemv); false, doing nothing,
// when the build has no BLAS. For the roofline study (`loupe roofline`).
bool blas_sgemv(int64_t M, int64_t N, const float* A, const float* x, float* y);

// Replaces the column-major a [rows, cols] (rows >= cols, leading dimension rows) by the Q of its QR
// decomposition whose R has a positive diagonal (the sign-fixed Q of an orthogonal initialiser),
// through LAPACK's Householder dgeqrf and dorgqr, which OpenBLAS carries; false, doing nothing,
// when the build has no BLAS or its library lacks them (the caller then orthonormalises itself).
bool lapack_orthonormalize(double* a, int64_t rows, int64_t cols);

// "OpenBLAS" or "builtin": which backend gemm() uses (printed by `loupe bench` and the report).
const char* gemm_backend_name();

namespace detail {
// Throws loupe::Error unless the sizes and strides describe valid matrices (shared by backends).
void check_gemm_args(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda,
                     int64_t ldb, int64_t ldc);

// For tests and benchmarks: false makes gemm_builtin use its baseline (SSE) kernel even on CPUs
// with AVX2 + FMA, so both code paths can be checked on one machine.
void gemm_builtin_allow_avx2(bool allow);
}  // namespace detail

}  // namespace loupe::cpu
