// loupe's own GEMM: the classic Goto/BLIS scheme in plain C++. C is cut into MC x NC tiles that
// threads take one at a time; for each KC-deep slice a tile's A and B blocks are copied
// ("packed") into contiguous panels, and a register-blocked MR x NR micro-kernel, written as
// plain loops the compiler vectorises, sweeps the panels while its accumulators stay in registers.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/gemm_cpu.h"

namespace loupe::cpu {
namespace {

// One call's operands. op(A)(i, p) = A[i*ars + p*acs] and op(B)(p, j) = B[p*brs + j*bcs], so
// the transposes are just swapped strides and only packing ever looks at them.
template <class T>
struct Problem {
  int64_t M, N, K;
  T alpha, beta;
  const T* A;
  int64_t ars, acs;
  const T* B;
  int64_t brs, bcs;
  T* C;
  int64_t ldc;
};

// Block sizes for SIMD registers of VecBytes bytes. NR is two vectors and MR six rows, so the 12
// accumulators, 2 B vectors and 1 broadcast A value fit the 16 registers of SSE and of AVX2.
// A KC x NR panel of B (16 KiB) stays in L1, an MC x KC block of A in L2.
template <class T, int VecBytes>
struct Blocking {
  static constexpr int MR = 6, NR = 2 * VecBytes / int(sizeof(T));
  static constexpr int64_t KC = 256, MC = 16 * MR, NC = 256;
};

// Packs the rows x depth matrix X(r, p) = X[r*rs + p*cs] into W-row panels stored depth-major
// (W values for each p), zero-padding the last panel so the micro-kernel needs no edge checks.
template <int W, class T>
[[gnu::always_inline]] inline void pack(const T* X, int64_t rs, int64_t cs, int64_t rows,
                                        int64_t depth, T* dst) {
  for (int64_t r0 = 0; r0 < rows; r0 += W, dst += W * depth) {
    const int w = int(std::min<int64_t>(W, rows - r0));
    for (int64_t p = 0; p < depth; ++p)
      for (int r = 0; r < W; ++r) dst[p * W + r] = r < w ? X[(r0 + r) * rs + p * cs] : T(0);
  }
}

// C[0:m, 0:n] = alpha * (MR-panel of A x NR-panel of B) + beta * C, m <= MR, n <= NR.
// The accumulators are GCC/Clang vector-extension values (portable C++, not intrinsics): with
// plain scalar loops GCC 12 vectorises across k instead and spills every accumulator.
template <class T, int VecBytes, int MR, int NR>
[[gnu::always_inline]] inline void micro_kernel(int64_t kc, const T* a, const T* b, T alpha,
                                                T beta, T* C, int64_t ldc, int m, int n) {
  typedef T Vec __attribute__((vector_size(VecBytes)));
  typedef T VecU __attribute__((vector_size(VecBytes), aligned(sizeof(T))));  // unaligned
  constexpr int L = VecBytes / int(sizeof(T)), NV = NR / L;  // lanes, vectors per row
  Vec acc[MR][NV] = {};
  for (int64_t p = 0; p < kc; ++p, a += MR, b += NR) {
    for (int r = 0; r < MR; ++r)
      for (int v = 0; v < NV; ++v)  // scalar a[r] is broadcast to all lanes
        acc[r][v] += a[r] * *reinterpret_cast<const VecU*>(b + v * L);
  }
  T out[MR][NR];
  std::memcpy(out, acc, sizeof out);
  const bool full = m == MR && n == NR;  // constant bounds let the compiler vectorise this too
  for (int r = 0; r < (full ? MR : m); ++r)
    for (int j = 0; j < (full ? NR : n); ++j) {
      T& c = C[r * ldc + j];  // beta == 0 must not read C: it may hold NaN
      c = beta == T(0) ? alpha * out[r][j] : alpha * out[r][j] + beta * c;
    }
}

// Computes C tile t (row-major over the tile grid) using the caller's pack buffers.
template <class T, int VecBytes>
[[gnu::always_inline]] inline void compute_tile(const Problem<T>& pb, int64_t t, T* abuf,
                                                T* bbuf) {
  using Bl = Blocking<T, VecBytes>;
  const int64_t tiles_n = (pb.N + Bl::NC - 1) / Bl::NC;
  const int64_t i0 = t / tiles_n * Bl::MC, j0 = t % tiles_n * Bl::NC;
  const int64_t mc = std::min(Bl::MC, pb.M - i0), nc = std::min(Bl::NC, pb.N - j0);
  for (int64_t p0 = 0; p0 < pb.K; p0 += Bl::KC) {
    const int64_t kc = std::min(Bl::KC, pb.K - p0);
    pack<Bl::MR>(pb.A + i0 * pb.ars + p0 * pb.acs, pb.ars, pb.acs, mc, kc, abuf);
    pack<Bl::NR>(pb.B + p0 * pb.brs + j0 * pb.bcs, pb.bcs, pb.brs, nc, kc, bbuf);
    const T beta = p0 == 0 ? pb.beta : T(1);  // later K slices accumulate onto the first
    for (int64_t jr = 0; jr < nc; jr += Bl::NR)
      for (int64_t ir = 0; ir < mc; ir += Bl::MR)
        micro_kernel<T, VecBytes, Bl::MR, Bl::NR>(kc, abuf + ir * kc, bbuf + jr * kc, pb.alpha, beta,
                                        pb.C + (i0 + ir) * pb.ldc + j0 + jr, pb.ldc,
                                        int(std::min<int64_t>(Bl::MR, mc - ir)),
                                        int(std::min<int64_t>(Bl::NR, nc - jr)));
  }
}

// The same code compiled twice: for the x86-64-v2 baseline (SSE, 16-byte vectors) and, chosen at
// run time, for AVX2 + FMA (32-byte vectors). Binaries stay portable, and the CPUs that have AVX2
// (nearly all since 2013) get twice the vector width and fused multiply-adds.
template <class T>
void tile_sse(const Problem<T>& pb, int64_t t, T* abuf, T* bbuf) {
  compute_tile<T, 16>(pb, t, abuf, bbuf);
}
template <class T>
[[gnu::target("avx2,fma")]] void tile_avx2(const Problem<T>& pb, int64_t t, T* abuf, T* bbuf) {
  compute_tile<T, 32>(pb, t, abuf, bbuf);
}

std::atomic<bool> g_allow_avx2{true};

template <class T>
void run_tiles(const Problem<T>& pb) {
  static const bool has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx2 = has_avx2 && g_allow_avx2.load(std::memory_order_relaxed);
  constexpr int64_t MC = Blocking<T, 32>::MC, NC = Blocking<T, 32>::NC;  // same for both ISAs
  const int64_t tiles = ((pb.M + MC - 1) / MC) * ((pb.N + NC - 1) / NC);
  // Waking workers costs tens of microseconds: small products run on the calling thread.
  const bool small = double(pb.M) * double(pb.N) * double(pb.K) < double(1 << 20);
  const int64_t tasks = small ? 1 : std::min<int64_t>(tiles, num_threads());
  std::atomic<int64_t> next{0};
  parallel_for(0, tasks, 1, [&](int64_t, int64_t) {
    // Each thread keeps its pack buffers between calls; tiles are handed out one at a time so
    // uneven edge tiles or a busy core do not leave other threads idle.
    thread_local std::vector<T> abuf, bbuf;
    abuf.resize(MC * Blocking<T, 32>::KC);
    bbuf.resize(NC * Blocking<T, 32>::KC);
    for (int64_t t; (t = next++) < tiles;) {
      if (avx2) tile_avx2(pb, t, abuf.data(), bbuf.data());
      else tile_sse(pb, t, abuf.data(), bbuf.data());
    }
  });
}

}  // namespace

namespace detail {
void gemm_builtin_allow_avx2(bool allow) { g_allow_avx2 = allow; }

void check_gemm_args(bool ta, bool tb, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                     int64_t ldc) {
  LOUPE_CHECK(M >= 0 && N >= 0 && K >= 0, "gemm: sizes must not be negative, got M=", M,
              " N=", N, " K=", K);
  const int64_t a_cols = ta ? M : K, b_cols = tb ? K : N;
  LOUPE_CHECK(lda >= std::max<int64_t>(1, a_cols), "gemm: lda=", lda, " is less than the ",
              a_cols, " columns of A", ta ? " (stored K x M, transposed)" : " (stored M x K)");
  LOUPE_CHECK(ldb >= std::max<int64_t>(1, b_cols), "gemm: ldb=", ldb, " is less than the ",
              b_cols, " columns of B", tb ? " (stored N x K, transposed)" : " (stored K x N)");
  LOUPE_CHECK(ldc >= std::max<int64_t>(1, N), "gemm: ldc=", ldc, " is less than the ", N,
              " columns of C");
}
}  // namespace detail

template <class T>
void gemm_builtin(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                  int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  detail::check_gemm_args(ta, tb, M, N, K, lda, ldb, ldc);
  if (M == 0 || N == 0) return;
  if (K == 0 || alpha == T(0)) {  // nothing to multiply: C = beta * C, as BLAS defines it
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
    return;
  }
  run_tiles(Problem<T>{M, N, K, alpha, beta, A, ta ? 1 : lda, ta ? lda : 1, B, tb ? 1 : ldb,
                       tb ? ldb : 1, C, ldc});
}

template void gemm_builtin<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*,
                                  int64_t, const float*, int64_t, float, float*, int64_t);
template void gemm_builtin<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*,
                                   int64_t, const double*, int64_t, double, double*, int64_t);

}  // namespace loupe::cpu
