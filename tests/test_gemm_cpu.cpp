// The CPU GEMM (builtin kernel, both of its ISA paths, and whichever backend gemm() links)
// against a double-precision triple loop, and the thread pool underneath it.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/backend/gemm_cpu.h"

namespace loupe {
namespace {

// Restores the pool size a test changed.
struct ThreadsGuard {
  int saved = num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

// ---------------------------------------------------------------------------------------------
// GEMM

template <class T>
using GemmFn = void (*)(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*,
                        int64_t, T, T*, int64_t);

struct Case {
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad_a, pad_b, pad_c;  // extra elements per stored row: lda = columns + pad
  double alpha, beta;
};

std::string describe(const Case& c) {
  return detail::concat("ta=", c.ta, " tb=", c.tb, " M=", c.M, " N=", c.N, " K=", c.K,
                        " pads=", c.pad_a, ",", c.pad_b, ",", c.pad_c, " alpha=", c.alpha,
                        " beta=", c.beta);
}

// Runs one case and checks every element of C against a triple loop in double, within the
// rounding bound of a K-term dot product; C's padding must be left alone, and with beta == 0
// C starts as NaN, which must not leak into the result.
template <class T>
void check_case(GemmFn<T> gemm, const Case& c, unsigned seed) {
  SCOPED_TRACE(describe(c));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  const int64_t a_rows = c.ta ? c.K : c.M, a_cols = c.ta ? c.M : c.K;
  const int64_t b_rows = c.tb ? c.N : c.K, b_cols = c.tb ? c.K : c.N;
  const int64_t lda = a_cols + c.pad_a, ldb = b_cols + c.pad_b, ldc = c.N + c.pad_c;
  const T sentinel = T(1234.5);
  std::vector<T> A(a_rows * lda + 1, sentinel), B(b_rows * ldb + 1, sentinel);
  std::vector<T> C(c.M * ldc + 1, sentinel);
  for (int64_t r = 0; r < a_rows; ++r)
    for (int64_t k = 0; k < a_cols; ++k) A[r * lda + k] = T(uni(rng));
  for (int64_t r = 0; r < b_rows; ++r)
    for (int64_t k = 0; k < b_cols; ++k) B[r * ldb + k] = T(uni(rng));
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j)
      C[i * ldc + j] = c.beta == 0 ? std::numeric_limits<T>::quiet_NaN() : T(uni(rng));
  const std::vector<T> C0 = C;

  gemm(c.ta, c.tb, c.M, c.N, c.K, T(c.alpha), A.data(), lda, B.data(), ldb, T(c.beta), C.data(),
       ldc);

  const double eps = std::numeric_limits<T>::epsilon();
  int failures = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      const T got = C[i * ldc + j];
      if (j >= c.N) {  // padding
        if (got != sentinel && ++failures <= 3) ADD_FAILURE() << "padding written at " << i << "," << j;
        continue;
      }
      double sum = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double a = c.ta ? A[k * lda + i] : A[i * lda + k];
        const double b = c.tb ? B[j * ldb + k] : B[k * ldb + j];
        sum += a * b, mag += std::abs(a * b);
      }
      const double c0 = c.beta == 0 ? 0.0 : double(C0[i * ldc + j]);
      const double want = c.alpha * sum + c.beta * c0;
      const double tol = (c.K + 3) * eps * (std::abs(c.alpha) * mag + std::abs(c.beta * c0)) +
                         std::numeric_limits<T>::min();
      if (!(std::abs(got - want) <= tol) && ++failures <= 3)
        ADD_FAILURE() << "C[" << i << "," << j << "] = " << got << ", want " << want
                      << " (tolerance " << tol << ")";
    }
  }
  EXPECT_EQ(C[c.M * ldc], sentinel) << "wrote past the end of C";
}

// Every transpose combination over odd sizes, with padded strides and varied alpha / beta
// (beta == 0 with NaN-filled C among them).
template <class T>
void sweep_small(GemmFn<T> gemm) {
  const int64_t sizes[] = {1, 3, 17, 65, 130};
  const double alpha_beta[][2] = {{1, 0}, {0.5, -1.25}, {-2, 1}, {1, 1}, {-0.75, 0}, {3, 0.5}};
  const int64_t pads[] = {0, 1, 7};
  unsigned n = 0;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t M : sizes)
        for (int64_t N : sizes)
          for (int64_t K : sizes) {
            const double* ab = alpha_beta[n % 6];
            check_case<T>(gemm, {ta, tb, M, N, K, pads[n % 3], pads[(n / 3) % 3],
                                 pads[(n / 9) % 3], ab[0], ab[1]}, n);
            ++n;
          }
}

// Several C tiles, several K slices, edge tiles in every direction, and 1 to 3 threads.
template <class T>
void sweep_large(GemmFn<T> gemm) {
  ThreadsGuard guard;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    SCOPED_TRACE(detail::concat(threads, " threads"));
    unsigned n = 1000;
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check_case<T>(gemm, {ta, tb, 150, 280, 530, 3, 0, 5, 0.5, n % 2 ? 0.0 : -1.0}, n);
        ++n;
      }
  }
}

template <class T>
class GemmCpu : public ::testing::Test {};
using Types = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GemmCpu, Types);

TYPED_TEST(GemmCpu, BuiltinMatchesReference) { sweep_small<TypeParam>(cpu::gemm_builtin<TypeParam>); }
TYPED_TEST(GemmCpu, BuiltinLargeMatchesReference) { sweep_large<TypeParam>(cpu::gemm_builtin<TypeParam>); }

TYPED_TEST(GemmCpu, BuiltinBaselineKernelMatchesReference) {
  cpu::detail::gemm_builtin_allow_avx2(false);  // the SSE path, as on CPUs without AVX2
  sweep_small<TypeParam>(cpu::gemm_builtin<TypeParam>);
  sweep_large<TypeParam>(cpu::gemm_builtin<TypeParam>);
  cpu::detail::gemm_builtin_allow_avx2(true);
}

TYPED_TEST(GemmCpu, BackendMatchesReference) {
  SCOPED_TRACE(cpu::gemm_backend_name());
  sweep_small<TypeParam>(cpu::gemm<TypeParam>);
  sweep_large<TypeParam>(cpu::gemm<TypeParam>);
}

// M or N == 0: nothing happens; K == 0 or alpha == 0: C = beta * C without touching A and B.
TYPED_TEST(GemmCpu, DegenerateSizes) {
  using T = TypeParam;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  for (GemmFn<T> gemm : {cpu::gemm_builtin<T>, cpu::gemm<T>}) {
    std::vector<T> A(12, nan), B(12, nan), C(12, T(2));
    gemm(false, false, 0, 3, 4, T(1), A.data(), 4, B.data(), 3, T(0), C.data(), 3);
    gemm(false, false, 3, 0, 4, T(1), A.data(), 4, B.data(), 1, T(0), C.data(), 1);
    for (T c : C) EXPECT_EQ(c, T(2));
    gemm(false, false, 3, 4, 0, T(1), A.data(), 1, B.data(), 4, T(0.5), C.data(), 4);
    for (T c : C) EXPECT_EQ(c, T(1));
    gemm(true, true, 3, 4, 2, T(0), A.data(), 3, B.data(), 2, T(3), C.data(), 4);
    for (T c : C) EXPECT_EQ(c, T(3));
    std::fill(C.begin(), C.end(), nan);
    gemm(false, true, 3, 4, 0, T(1), A.data(), 1, B.data(), 1, T(0), C.data(), 4);
    for (T c : C) EXPECT_EQ(c, T(0));
  }
}

TYPED_TEST(GemmCpu, BadArgumentsRaiseError) {
  using T = TypeParam;
  std::vector<T> A(64), B(64), C(64);
  for (GemmFn<T> gemm : {cpu::gemm_builtin<T>, cpu::gemm<T>}) {
    EXPECT_THROW(gemm(false, false, -1, 2, 2, T(1), A.data(), 2, B.data(), 2, T(0), C.data(), 2), Error);
    EXPECT_THROW(gemm(false, false, 2, 3, 4, T(1), A.data(), 3, B.data(), 3, T(0), C.data(), 3), Error);  // lda < K
    EXPECT_THROW(gemm(true, false, 2, 3, 4, T(1), A.data(), 1, B.data(), 3, T(0), C.data(), 3), Error);   // lda < M
    EXPECT_THROW(gemm(false, true, 2, 3, 4, T(1), A.data(), 4, B.data(), 3, T(0), C.data(), 3), Error);   // ldb < K
    EXPECT_THROW(gemm(false, false, 2, 3, 4, T(1), A.data(), 4, B.data(), 3, T(0), C.data(), 2), Error);  // ldc < N
  }
}

TEST(GemmCpu, BackendName) {
  const std::string name = cpu::gemm_backend_name();
  EXPECT_TRUE(name == "OpenBLAS" || name == "builtin" || name == "oneDNN (float32), OpenBLAS (float64)") << name;
}

// LAPACK's QR for the orthogonal initialiser (nn::LSTM): where the build has OpenBLAS it returns
// the Q whose R has a positive diagonal, so it must equal Gram-Schmidt's Q (written out here) to
// rounding, and Q^T Q = I; a build without a BLAS declines and changes nothing.
TEST(GemmCpu, LapackQrIsGramSchmidtsQ) {
  const int64_t rows = 48, cols = 12;
  std::mt19937 gen(3);
  std::normal_distribution<double> normal;
  std::vector<double> a(size_t(rows * cols));
  for (double& v : a) v = normal(gen);
  std::vector<double> gs = a, q = a;
  for (int64_t j = 0; j < cols; ++j) {  // modified Gram-Schmidt, twice, column-major
    double* v = &gs[size_t(j * rows)];
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t k = 0; k < j; ++k) {
        double dot = 0;
        for (int64_t i = 0; i < rows; ++i) dot += gs[size_t(k * rows + i)] * v[i];
        for (int64_t i = 0; i < rows; ++i) v[i] -= dot * gs[size_t(k * rows + i)];
      }
    double norm = 0;
    for (int64_t i = 0; i < rows; ++i) norm += v[i] * v[i];
    for (int64_t i = 0; i < rows; ++i) v[i] /= std::sqrt(norm);
  }
  if (!cpu::lapack_orthonormalize(q.data(), rows, cols)) {
    EXPECT_EQ(q, a) << "declined, yet changed the matrix";
    EXPECT_EQ(std::string(cpu::gemm_backend_name()), "builtin") << "a BLAS build whose library lacks LAPACK's QR";
    return;
  }
  double worst = 0, off_identity = 0;
  for (size_t i = 0; i < q.size(); ++i) worst = std::max(worst, std::fabs(q[i] - gs[i]));
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t k = 0; k < cols; ++k) {
      double dot = 0;
      for (int64_t i = 0; i < rows; ++i) dot += q[size_t(j * rows + i)] * q[size_t(k * rows + i)];
      off_identity = std::max(off_identity, std::fabs(dot - (j == k ? 1.0 : 0.0)));
    }
  EXPECT_LT(worst, 1e-12);
  EXPECT_LT(off_identity, 1e-13);
}

// ---------------------------------------------------------------------------------------------
// parallel_for

TEST(ParallelFor, CoversEveryIndexExactlyOnce) {
  ThreadsGuard guard;
  for (int threads : {1, 2, 3, 8}) {
    set_num_threads(threads);
    EXPECT_EQ(num_threads(), threads);
    for (int64_t begin : {int64_t(0), int64_t(-5), int64_t(1000)})
      for (int64_t n : {0, 1, 2, 7, 100, 1001})
        for (int64_t grain : {0, 1, 3, 64, 5000}) {
          SCOPED_TRACE(detail::concat(threads, " threads, [", begin, ", +", n, ") grain ", grain));
          std::vector<std::atomic<int>> hits(n);
          std::atomic<int> chunks{0};
          parallel_for(begin, begin + n, grain, [&](int64_t b, int64_t e) {
            ++chunks;
            EXPECT_LT(b, e);
            // Chunks are at least `grain` long unless the whole range is shorter.
            EXPECT_GE(e - b, std::min<int64_t>(std::max<int64_t>(grain, 1), n));
            for (int64_t i = b; i < e; ++i) ++hits[i - begin];
          });
          for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "index " << begin + i;
          EXPECT_LE(chunks, threads);
          EXPECT_EQ(chunks == 0, n == 0);
        }
  }
}

TEST(ParallelFor, RunsChunksOnSeveralThreadsAtOnce) {
  ThreadsGuard guard;
  set_num_threads(4);
  // Each chunk waits for the other three: that finishes only if four threads run them together.
  std::atomic<int> arrived{0};
  std::mutex m;
  std::set<std::thread::id> ids;
  parallel_for(0, 4, 1, [&](int64_t, int64_t) {
    {
      std::lock_guard<std::mutex> lock(m);
      ids.insert(std::this_thread::get_id());
    }
    ++arrived;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (arrived < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  });
  EXPECT_EQ(arrived, 4);
  EXPECT_EQ(ids.size(), 4u);
}

TEST(ParallelFor, RethrowsFirstExceptionAndStaysUsable) {
  ThreadsGuard guard;
  set_num_threads(3);
  for (int rep = 0; rep < 20; ++rep) {
    std::atomic<int> ran{0};
    EXPECT_THROW(parallel_for(0, 300, 1,
                              [&](int64_t b, int64_t) {
                                ++ran;
                                if (b >= 100) throw std::runtime_error("chunk failed");
                              }),
                 std::runtime_error);
    EXPECT_EQ(ran, 3);  // the other chunks still ran to the end before the rethrow
  }
  EXPECT_THROW(parallel_for(0, 10, 1, [](int64_t, int64_t) { LOUPE_FAIL("bad"); }), Error);
  std::atomic<int64_t> sum{0};
  parallel_for(0, 1000, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum, 999 * 1000 / 2);
}

TEST(ParallelFor, NestedCallsRunInline) {
  ThreadsGuard guard;
  set_num_threads(3);
  std::vector<std::atomic<int>> hits(30 * 40);
  parallel_for(0, 30, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const auto outer = std::this_thread::get_id();
      parallel_for(0, 40, 1, [&](int64_t b2, int64_t e2) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        EXPECT_EQ(b2, 0);
        EXPECT_EQ(e2, 40);
        for (int64_t j = b2; j < e2; ++j) ++hits[i * 40 + j];
      });
    }
  });
  for (auto& h : hits) ASSERT_EQ(h, 1);
}

TEST(ParallelFor, ConcurrentCallersBothFinish) {
  ThreadsGuard guard;
  set_num_threads(2);
  std::atomic<int64_t> total{0};
  auto work = [&] {
    for (int rep = 0; rep < 200; ++rep)
      parallel_for(0, 1000, 1, [&](int64_t b, int64_t e) { total += e - b; });
  };
  std::thread other(work);
  work();
  other.join();
  EXPECT_EQ(total, 2 * 200 * 1000);
}

TEST(ParallelFor, GemmInsideParallelFor) {
  // An op that calls gemm per batch item from a parallel_for: the inner gemm runs inline.
  ThreadsGuard guard;
  set_num_threads(2);
  const int64_t n = 64;
  std::vector<float> A(n * n, 1.0f), B(n * n, 2.0f), C(4 * n * n, -1.0f);
  parallel_for(0, 4, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      cpu::gemm_builtin<float>(false, false, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f,
                               C.data() + i * n * n, n);
  });
  for (float c : C) ASSERT_EQ(c, 2.0f * n);
}

TEST(ThreadPool, BadThreadCountRaisesError) { EXPECT_THROW(set_num_threads(0), Error); }

}  // namespace
}  // namespace loupe
