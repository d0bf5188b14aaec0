// gemm() through OpenBLAS, compiled when the build finds it (CMake picks this file or
// gemm_default.cpp). OpenBLAS is several times faster than the builtin kernel because its
// micro-kernels are hand-written per CPU and chosen at run time.
//
// Threads: OpenBLAS runs single-threaded and loupe's own pool (parallel_for, sized by --threads)
// splits a large GEMM into row or column blocks, one OpenBLAS call each. With OpenBLAS's own
// threads, which wait for work by spinning and yielding, a machine whose cores were busy with
// another process made every small GEMM wait for time slices: imdb_bilstm on two cores beside two
// busy loops ran many times slower than with OPENBLAS_NUM_THREADS=1.
#include <cblas.h>
#if LOUPE_WITH_DNNL
#include <oneapi/dnnl/dnnl.h>

#include "ops/backend/dnnl_threads.h"
#endif

#include <algorithm>
#include <climits>
#include <mutex>
#include <type_traits>
#include <vector>

#include "core/thread_pool.h"

extern "C" void openblas_set_num_threads(int num_threads);  // OpenBLAS' own, beside the CBLAS API
// LAPACK's QR (Fortran calling convention), which Debian's OpenBLAS exports. Weak: a BLAS built
// without LAPACK leaves them null, and lapack_orthonormalize says so instead of failing to link.
extern "C" void dgeqrf_(const int* m, const int* n, double* a, const int* lda, double* tau, double* work,
                        const int* lwork, int* info) __attribute__((weak));
extern "C" void dorgqr_(const int* m, const int* n, const int* k, double* a, const int* lda, const double* tau,
                        double* work, const int* lwork, int* info) __attribute__((weak));

#include "core/error.h"
#include "ops/backend/gemm_cpu.h"

namespace loupe::cpu {
namespace {

// OpenBLAS runs one thread per call: loupe's pool does the splitting (above).
void single_threaded_blas() {
  static std::once_flag single;
  std::call_once(single, [] { openblas_set_num_threads(1); });
}

void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
               const float* A, int lda, const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

#if LOUPE_WITH_DNNL
// float32 through oneDNN's sgemm where the build has oneDNN: its JIT kernels use the CPU's widest
// vectors (AVX-512 here), where Debian's OpenBLAS ran its AVX2 kernels on the same VM: 2.0-2.9x
// single-threaded at the models' shapes (lab/benchmarks.md). oneDNN threads the whole product
// itself (ops/backend/dnnl_threads.h).
bool dnnl_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  match_dnnl_threads();
  return dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) == dnnl_success;
}
#endif
void blas_gemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, double alpha,
               const double* A, int lda, const double* B, int ldb, double beta, double* C,
               int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// Work below this many multiply-adds per thread is not worth a hand-off to another thread.
constexpr double kMinMacsPerThread = 1 << 20;

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
#if LOUPE_WITH_DNNL
  if constexpr (std::is_same_v<T, float>) {
    LOUPE_CHECK(dnnl_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), "gemm: oneDNN's sgemm refused ", M,
                " x ", N, " x ", K);
    return;
  }
#endif
  single_threaded_blas();
  const CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans, opb = tb ? CblasTrans : CblasNoTrans;
  const int64_t chunks = std::clamp<int64_t>(int64_t(double(M) * double(N) * double(K) / kMinMacsPerThread), 1,
                                             num_threads());
  if (M >= N) {  // blocks of rows of C: rows of A (columns of A when transposed)
    parallel_for(0, M, std::max<int64_t>(1, M / chunks), [&](int64_t m0, int64_t m1) {
      blas_gemm(opa, opb, int(m1 - m0), int(N), int(K), alpha, A + (ta ? m0 : m0 * lda), int(lda), B, int(ldb), beta,
                C + m0 * ldc, int(ldc));
    });
  } else {  // blocks of columns of C: columns of B (rows of B when transposed)
    parallel_for(0, N, std::max<int64_t>(1, N / chunks), [&](int64_t n0, int64_t n1) {
      blas_gemm(opa, opb, int(M), int(n1 - n0), int(K), alpha, A, int(lda), B + (tb ? n0 * ldb : n0), int(ldb), beta,
                C + n0, int(ldc));
    });
  }
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                           const double*, int64_t, double, double*, int64_t);

#if LOUPE_WITH_DNNL
const char* gemm_backend_name() { return "oneDNN (float32), OpenBLAS (float64)"; }
#else
const char* gemm_backend_name() { return "OpenBLAS"; }
#endif

bool blas_sgemv(int64_t M, int64_t N, const float* A, const float* x, float* y) {
  LOUPE_CHECK(M <= INT_MAX && N <= INT_MAX, "blas_sgemv: ", M, " x ", N, " is past the BLAS's int sizes");
  single_threaded_blas();
  cblas_sgemv(CblasRowMajor, CblasNoTrans, int(M), int(N), 1.f, A, int(N), x, 1, 0.f, y, 1);
  return true;
}

bool lapack_orthonormalize(double* a, int64_t rows, int64_t cols) {
  if (!dgeqrf_ || !dorgqr_ || rows > INT_MAX || cols > rows || rows * cols > INT_MAX) return false;
  single_threaded_blas();
  const int m = int(rows), n = int(cols);
  int info = 0, query = -1;
  double size = 0;
  std::vector<double> tau(static_cast<size_t>(n));
  dgeqrf_(&m, &n, a, &m, tau.data(), &size, &query, &info);  // the workspace it wants
  double size2 = 0;
  dorgqr_(&m, &n, &n, a, &m, tau.data(), &size2, &query, &info);
  const int lwork = std::max({int(size), int(size2), n});
  std::vector<double> work(static_cast<size_t>(lwork));
  dgeqrf_(&m, &n, a, &m, tau.data(), work.data(), &lwork, &info);
  LOUPE_CHECK(info == 0, "LAPACK dgeqrf failed (info ", info, ")");
  std::vector<bool> negative(static_cast<size_t>(n));  // R's diagonal, in a's upper triangle until dorgqr
  for (int j = 0; j < n; ++j) negative[size_t(j)] = a[size_t(j) * size_t(m) + size_t(j)] < 0;
  dorgqr_(&m, &n, &n, a, &m, tau.data(), work.data(), &lwork, &info);
  LOUPE_CHECK(info == 0, "LAPACK dorgqr failed (info ", info, ")");
  for (int j = 0; j < n; ++j)  // Q diag(sign(R)): the Q whose R has a positive diagonal
    if (negative[size_t(j)])
      for (int i = 0; i < m; ++i) a[size_t(j) * size_t(m) + size_t(i)] = -a[size_t(j) * size_t(m) + size_t(i)];
  return true;
}

}  // namespace loupe::cpu
