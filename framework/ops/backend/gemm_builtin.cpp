// loupe's own GEMM: the classic Goto/BLIS scheme in plain C++. C is cut into MC x NC tiles that
// threads take one at a time; for each KC-deep slice a tile's A and B blocks are copied
// ("packed") into contiguous panels, and a register-blocked MR x NR micro-kernel sweeps the
// panels while its accumulators stay in registers. The kernel is compiled for SSE and for
// AVX2 + FMA, picked at run time. About 75 GFLOP/s per core for float on a Xeon with AVX2.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "core/cpu_util.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "ops/backend/gemm_cpu.h"

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
  int64_t mc, nc, tiles_n;  // C tile size and the number of tiles across N
};

// Register tile MR x NR for SIMD registers of VecBytes bytes: NR is two vectors and MR six rows,
// so the 12 accumulators, 2 B vectors and 1 broadcast A value fit the 16 registers of SSE and of
// AVX2. NR divides 16 for every type and ISA, so C tiles are cut at multiples of MR and of 16.
constexpr int kMR = 6, kNRMultiple = 16;
template <class T, int VecBytes>
constexpr int kNR = 2 * VecBytes / int(sizeof(T));

// Cache blocking: a KC x NR panel of B (16 KiB with AVX2) stays in L1, and a C tile's MC x KC
// block of A and KC x NC block of B in L2 (0.25 to 0.7 MiB together; in L3 where L2 is smaller).
constexpr int64_t kKC = 256, kMaxMC = 16 * kMR, kMaxNC = 256;

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
  // For loads from the panels: unaligned, and allowed to alias the T elements it reads.
  typedef T VecU __attribute__((vector_size(VecBytes), aligned(sizeof(T)), may_alias));
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
  constexpr int NR = kNR<T, VecBytes>;
  const int64_t i0 = t / pb.tiles_n * pb.mc, j0 = t % pb.tiles_n * pb.nc;
  const int64_t mc = std::min(pb.mc, pb.M - i0), nc = std::min(pb.nc, pb.N - j0);
  for (int64_t p0 = 0; p0 < pb.K; p0 += kKC) {
    const int64_t kc = std::min(kKC, pb.K - p0);
    pack<kMR>(pb.A + i0 * pb.ars + p0 * pb.acs, pb.ars, pb.acs, mc, kc, abuf);
    pack<NR>(pb.B + p0 * pb.brs + j0 * pb.bcs, pb.bcs, pb.brs, nc, kc, bbuf);
    const T beta = p0 == 0 ? pb.beta : T(1);  // later K slices accumulate onto the first
    for (int64_t jr = 0; jr < nc; jr += NR)
      for (int64_t ir = 0; ir < mc; ir += kMR)
        micro_kernel<T, VecBytes, kMR, NR>(kc, abuf + ir * kc, bbuf + jr * kc, pb.alpha, beta,
                                           pb.C + (i0 + ir) * pb.ldc + j0 + jr, pb.ldc,
                                           int(std::min<int64_t>(kMR, mc - ir)),
                                           int(std::min<int64_t>(NR, nc - jr)));
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

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Cuts C into tiles of near-equal size: the fewest within the cache limits, then more until
// their count is a multiple of the thread count, so that no thread waits for the others (3 tiles
// on 2 threads take as long as 4). Small products stay on the calling thread.
template <class T>
int64_t plan_tiles(Problem<T>& pb) {
  const bool small = double(pb.M) * double(pb.N) * double(pb.K) < double(1 << 17);
  const int64_t want = small ? 1 : num_threads();
  int64_t tm = ceil_div(pb.M, kMaxMC), tn = ceil_div(pb.N, kMaxNC);
  const int64_t target = ceil_div(tm * tn, want) * want;
  while (tm * tn < target) {
    const bool split_n = pb.N / tn >= pb.M / tm;  // halve the longer side of the tile
    if (split_n && pb.N >= (tn + 1) * kNRMultiple) ++tn;
    else if (pb.M >= (tm + 1) * kMR) ++tm;
    else if (pb.N >= (tn + 1) * kNRMultiple) ++tn;
    else break;
  }
  pb.mc = ceil_div(ceil_div(pb.M, tm), kMR) * kMR;
  pb.nc = ceil_div(ceil_div(pb.N, tn), kNRMultiple) * kNRMultiple;
  pb.tiles_n = ceil_div(pb.N, pb.nc);
  return ceil_div(pb.M, pb.mc) * pb.tiles_n;
}

std::atomic<bool> g_allow_avx2{true};

template <class T>
void run_tiles(Problem<T> pb) {
  static const bool has_avx2 = has_avx2_fma();
  const bool avx2 = has_avx2 && g_allow_avx2.load(std::memory_order_relaxed);
  const int64_t tiles = plan_tiles(pb);
  std::atomic<int64_t> next{0};
  // One task per thread; tasks take tiles one at a time, so uneven edge tiles or a core that is
  // busy with something else do not leave the other threads idle.
  parallel_for(0, std::min<int64_t>(tiles, num_threads()), 1, [&](int64_t, int64_t) {
    thread_local std::vector<T> abuf, bbuf;  // kept between calls: no allocation per gemm
    abuf.resize(kMaxMC * kKC);
    bbuf.resize(kMaxNC * kKC);
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
                       tb ? ldb : 1, C, ldc, 0, 0, 0});
}

template void gemm_builtin<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*,
                                  int64_t, const float*, int64_t, float, float*, int64_t);
template void gemm_builtin<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*,
                                   int64_t, const double*, int64_t, double, double*, int64_t);

}  // namespace loupe::cpu
