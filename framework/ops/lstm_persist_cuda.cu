// loupe's persistent LSTM (ops/lstm_persist.h): per layer, one GEMM for every step's input
// projections, one kernel for the whole recurrence of both directions, and GEMMs for the weight
// and input gradients.
//
// Recurrence kernels: a block owns 16 batch rows of one direction and walks every time step. Its
// H/8 warps each own 8 hidden units, i.e. the 32 gate columns i, f, g, o of those units (R's rows
// are permuted so that a warp's tensor-core tiles hold exactly its units' gates), and keep their
// part of R in registers as WMMA fragments for the whole sequence. A forward step is: h_{t-1} (16
// rows, in shared memory) times R^T on tensor cores, plus the step's input projection and both
// biases, the gate nonlinearities and the cell update in float32, h_t back to shared memory; one
// __syncthreads per step. The backward walks the other way: gate gradients from the saved
// activations and cell states, then dh_{t-1} = dgates R on tensor cores (two syncs per step).
// Rows of a batch never interact, so blocks never wait for each other.
//
// Layouts: everything between the layers is sequence-major [T, N, F] (x is transposed once), so
// that "every row at t >= 1" and "every row at t <= T-2" are plain matrices for dR's GEMM. Saved
// for the backward, per layer and direction: the gate activations [T, N, 4H] (overwritten by the
// gate gradients in the backward) and the cell states [T, N, H] in float32; the layers' outputs.
#include <mma.h>

#include <algorithm>

#include "autograd/node.h"
#include "core/cuda_runtime.h"
#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/linalg.h"
#include "ops/lstm_persist.h"
#include "ops/view.h"

namespace loupe::lstm_persist {
namespace {

using namespace nvcuda;

// Activations in float32 from the hardware's exp2 and reciprocal (a few instructions instead of
// expf's and tanhf's dozens: the pointwise part is most of a step's instructions). tanh as
// 2 sigmoid(2v) - 1 is accurate to ~1e-7 absolute, far below 16-bit storage's rounding.
__device__ __forceinline__ float sigmoid(float v) { return __fdividef(1.f, 1.f + __expf(-v)); }
__device__ __forceinline__ float tanh_fast(float v) { return 2.f * sigmoid(2.f * v) - 1.f; }

// The warp-permuted order of the gate columns: gate row j = gate * H + unit of R (and column of
// the gates) sits at column 32 * (unit / 8) + 8 * gate + unit % 8, so warp (unit / 8) owns columns
// [32 * warp, 32 * warp + 32), gate-major inside. The kernels need only the inverse: permuted
// column -> gate row of R.
__device__ __forceinline__ int unpermuted(int col, int H) {
  int warp = col / 32, gate = col % 32 / 8, unit = warp * 8 + col % 8;
  return gate * H + unit;
}

// A block carries ROWS batch rows (16, or 8 for twice the blocks where a batch gives too few):
// tensor-core tiles of ROWS x WN x 16 (m16n16k16 or m8n32k16). Leading dimensions of the
// shared-memory tiles are padded by 16 or 32 bytes so that the rows of a tile (and the pointwise
// code's rows) fall into different banks: unpadded, rows are a multiple of 128 bytes apart and
// every access is an 8- to 16-way bank conflict (measured: 86 % of the shared-memory wavefronts
// excessive, and the kernel bound by them).
template <int ROWS, int H>
struct Tile {
  static constexpr int WN = ROWS == 16 ? 16 : 32;  // the tile's n
  static constexpr int CELLS = ROWS / 4;           // (row, unit) cells per lane: rows r + 4k
  static constexpr int h16 = H + 8, g16 = 4 * H + 8, h32 = H + 8, g32 = 4 * H + 8;
  static_assert(ROWS == 16 || ROWS == 8, "16 or 8 rows a block");
};

template <class T>
struct FwdDir {
  const T* R;                // [4H, H]
  const T *b_w, *b_r;        // [4H]
  T* gates;                  // [T, N, 4H]: the input projections in, the activations out (if c)
  float* c;                  // [T, N, H]: the cell states (training), or null
  T* y;                      // h_t at y + (t * N + n) * y_ld (already at the direction's column)
  int64_t y_ld;
  T *h_out, *c_out;          // [N, H]: the final states
};
template <class T>
struct FwdArgs {
  FwdDir<T> dir[2];
  int N, steps;
};

// Parts of the kernels below, inlined into them so that each kernel reads on one screen. They are
// cut where the kernels' PTX stays as it was with this code written inside them, instruction for
// instruction and register for register (so ptxas gives the same SASS): a first split that also
// moved index arithmetic and the dh product reordered instructions and cost the kernels 0.5-0.8 %
// (docs/benchmarks.md). Keep it so when changing them: compare the PTX before and after.
template <class T, int ROWS, int WN>
using FragB = wmma::fragment<wmma::matrix_b, ROWS, WN, 16, T, wmma::row_major>;

// R^T [H, 4H] with permuted columns, staged once in shared memory to load the forward's B
// fragments (written in order: a strided shared-memory write is a 32-way bank conflict).
template <class T, int H, int ROWS, int WN, int NW, int KT>
__device__ __forceinline__ void stage_rt(const T* R, T* rt, FragB<T, ROWS, WN> (&b)[NW][KT], int warp) {
  constexpr int G = 4 * H;
  for (int i = threadIdx.x; i < G * H; i += blockDim.x) rt[i] = R[unpermuted(i % G, H) * H + i / G];
  __syncthreads();
#pragma unroll
  for (int nt = 0; nt < NW; ++nt)
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) wmma::load_matrix_sync(b[nt][kt], rt + kt * 16 * G + warp * 32 + nt * WN, G);
  __syncthreads();
}

// The final h and c of this lane's cells (rows n0 + r + 4k).
template <class T, int H, int CELLS>
__device__ __forceinline__ void store_final_states(const FwdDir<T>& d, const float (&h)[CELLS], const float (&c)[CELLS],
                                                   int n0, int r, int N, int u) {
#pragma unroll
  for (int k = 0; k < CELLS; ++k) {
    const int n = n0 + r + 4 * k;
    if (n < N) {
      d.h_out[int64_t(n) * H + u] = cuda::from_float<T>(h[k]);
      d.c_out[int64_t(n) * H + u] = cuda::from_float<T>(c[k]);
    }
  }
}

// One step's gates and cell update for this lane's cells (rows n0 + r + 4k, unit u): h_t into
// shared memory (the next product's A operand) and y, and in training the activations (over the
// spent input projections) and c_t for the backward.
template <class T, int H, int CELLS, int LH, int LP>
__device__ __forceinline__ void forward_cells(const FwdDir<T>& d, const float* pre, T* hn, const T (&cur)[CELLS][4],
                                              const float (&bias)[4], float (&c)[CELLS], float (&h)[CELLS], T zero,
                                              int t, int N, int n0, int r, int warp, int j, int u) {
  constexpr int G = 4 * H;
#pragma unroll
  for (int k = 0; k < CELLS; ++k) {
    const int row = r + 4 * k, n = n0 + row;
    const float* q = pre + row * LP + warp * 32 + j;
    float gi = sigmoid(q[0] + cuda::to_float(cur[k][0]) + bias[0]);
    float gf = sigmoid(q[8] + cuda::to_float(cur[k][1]) + bias[1]);
    float gg = tanh_fast(q[16] + cuda::to_float(cur[k][2]) + bias[2]);
    float go = sigmoid(q[24] + cuda::to_float(cur[k][3]) + bias[3]);
    c[k] = gf * c[k] + gi * gg;
    h[k] = go * tanh_fast(c[k]);
    const T ht = cuda::from_float<T>(h[k]);
    hn[row * LH + u] = n < N ? ht : zero;
    if (n < N) {
      const int64_t at = int64_t(t) * N + n;
      d.y[at * d.y_ld + u] = ht;
      if (d.c) {
        T* p = d.gates + at * G + u;
        p[0] = cuda::from_float<T>(gi);
        p[H] = cuda::from_float<T>(gf);
        p[2 * H] = cuda::from_float<T>(gg);
        p[3 * H] = cuda::from_float<T>(go);
        d.c[at * H + u] = c[k];
      }
    }
  }
}

template <class T, int H, int ROWS>
__global__ void __launch_bounds__(4 * H) lstm_forward_kernel(const FwdArgs<T> a) {
#if __CUDA_ARCH__ >= 800
  using Tl = Tile<ROWS, H>;
  constexpr int G = 4 * H, KT = H / 16, WN = Tl::WN, NW = 32 / WN, CELLS = Tl::CELLS;
  const FwdDir<T> d = blockIdx.y ? a.dir[1] : a.dir[0];
  const bool reverse = blockIdx.y == 1;
  const int N = a.N, steps = a.steps;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * ROWS;
  extern __shared__ __align__(128) unsigned char smem[];

  FragB<T, ROWS, WN> b[NW][KT];
  stage_rt<T, H, ROWS, WN, NW, KT>(d.R, reinterpret_cast<T*>(smem), b, warp);
  // Then: h double-buffered [2][ROWS][H] (the A operand), the pre-activations [ROWS][4H] in float32.
  constexpr int LH = Tl::h16, LP = Tl::g32;
  T* hs = reinterpret_cast<T*>(smem);
  float* pre = reinterpret_cast<float*>(smem + 2 * ROWS * LH * sizeof(T));

  // This lane: unit u, rows r + 4k for k < CELLS.
  const int j = lane % 8, u = warp * 8 + j, r = lane / 8;
  float bias[4], c[CELLS], h[CELLS];
#pragma unroll
  for (int k = 0; k < CELLS; ++k) c[k] = h[k] = 0.f;
#pragma unroll
  for (int g = 0; g < 4; ++g) bias[g] = cuda::to_float(d.b_w[g * H + u]) + cuda::to_float(d.b_r[g * H + u]);
  const T zero = cuda::from_float<T>(0.f);
  // The input projections of the next step are loaded while this one computes.
  T next[CELLS][4];
  auto load = [&](int t) {
#pragma unroll
    for (int k = 0; k < CELLS; ++k) {
      int n = n0 + r + 4 * k;
      const T* p = d.gates + (int64_t(t) * N + n) * G + u;
#pragma unroll
      for (int g = 0; g < 4; ++g) next[k][g] = n < N ? p[g * H] : zero;
    }
  };
  load(reverse ? steps - 1 : 0);
  for (int s = 0; s < steps; ++s) {
    const int t = reverse ? steps - 1 - s : s;
    T cur[CELLS][4];
#pragma unroll
    for (int k = 0; k < CELLS; ++k)
#pragma unroll
      for (int g = 0; g < 4; ++g) cur[k][g] = next[k][g];
    if (s + 1 < steps) load(reverse ? t - 1 : t + 1);
    const T* hp = hs + (s & 1) * ROWS * LH;  // h_{t-1}
    T* hn = hs + ((s + 1) & 1) * ROWS * LH;  // h_t
    wmma::fragment<wmma::accumulator, ROWS, WN, 16, float> acc[NW];
#pragma unroll
    for (int nt = 0; nt < NW; ++nt) wmma::fill_fragment(acc[nt], 0.f);
    if (s > 0) {
#pragma unroll
      for (int kt = 0; kt < KT; ++kt) {
        wmma::fragment<wmma::matrix_a, ROWS, WN, 16, T, wmma::row_major> fa;
        wmma::load_matrix_sync(fa, hp + kt * 16, LH);
#pragma unroll
        for (int nt = 0; nt < NW; ++nt) wmma::mma_sync(acc[nt], fa, b[nt][kt], acc[nt]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < NW; ++nt) wmma::store_matrix_sync(pre + warp * 32 + nt * WN, acc[nt], LP, wmma::mem_row_major);
    __syncwarp();
    forward_cells<T, H, CELLS, LH, LP>(d, pre, hn, cur, bias, c, h, zero, t, N, n0, r, warp, j, u);
    __syncthreads();
  }
  store_final_states<T, H, CELLS>(d, h, c, n0, r, N, u);
#endif
}

template <class T>
struct BwdDir {
  const T* R;            // [4H, H]
  T* gates;              // [T, N, 4H]: the activations in, the gate gradients out
  const float* c;        // [T, N, H]
  const T* dy;           // dL/dh_t at dy + t * dy_t + n * dy_n (the direction's column), or null
  int64_t dy_t, dy_n;
  const T *dh, *dc;      // [N, H]: the final states' gradients, or null
  float* db;             // [gridDim.x, 4H]: this block's bias-gradient sum over its rows and steps
};
template <class T>
struct BwdArgs {
  BwdDir<T> dir[2];
  int N, steps;
};

// R [4H, H] with permuted rows (the k dimension), staged once in shared memory for this warp's B
// fragments: its part of the k range, its n tile.
template <class T, int H, int ROWS, int WN, int KW, int NT>
__device__ __forceinline__ void stage_r(const T* R, T* rs, FragB<T, ROWS, WN> (&b)[KW], int warp) {
  constexpr int G = 4 * H;
  for (int i = threadIdx.x; i < G * H; i += blockDim.x) rs[i] = R[unpermuted(i / H, H) * H + i % H];
  __syncthreads();
  const int nt = warp % NT, part = warp / NT;
#pragma unroll
  for (int kk = 0; kk < KW; ++kk) wmma::load_matrix_sync(b[kk], rs + (part * KW + kk) * 16 * H + nt * WN, H);
  __syncthreads();
}

// The final states' gradients of this lane's cells, where given (dc carried back through the
// steps, dh the last step's): zero past the batch.
template <class T, int H, int CELLS>
__device__ __forceinline__ void final_state_grads(const BwdDir<T>& d, float (&dc)[CELLS], float (&dh0)[CELLS], int n0, int r,
                                                  int N, int u) {
#pragma unroll
  for (int k = 0; k < CELLS; ++k) {
    const int n = n0 + r + 4 * k;
    dc[k] = d.dc && n < N ? cuda::to_float(d.dc[int64_t(n) * H + u]) : 0.f;
    dh0[k] = d.dh && n < N ? cuda::to_float(d.dh[int64_t(n) * H + u]) : 0.f;
  }
}

// The bias gradient: this block's sum, rows r, r+4, ... folded across the lanes with this unit.
template <class T, int H>
__device__ __forceinline__ void store_bias_grad(const BwdDir<T>& d, const float (&db)[4], int lane, int u) {
  constexpr int G = 4 * H;
#pragma unroll
  for (int g = 0; g < 4; ++g) {
    float v = db[g];
    v += __shfl_xor_sync(0xffffffffu, v, 8);
    v += __shfl_xor_sync(0xffffffffu, v, 16);
    if (lane < 8) d.db[int64_t(blockIdx.x) * G + g * H + u] = v;
  }
}

// dh = dgates R: H / WN n tiles; the H / 8 warps split 4H (the k dimension) into SPLIT parts.
// Shared memory: R staged first; then the gate gradients [ROWS][4H] (permuted columns; the A
// operand), and dh's SPLIT partial sums [SPLIT][ROWS][H] in float32.
template <class T, int H, int ROWS>
__global__ void __launch_bounds__(4 * H) lstm_backward_kernel(const BwdArgs<T> a) {
#if __CUDA_ARCH__ >= 800
  using Tl = Tile<ROWS, H>;
  constexpr int G = 4 * H, WN = Tl::WN, NT = H / WN, SPLIT = (H / 8) / NT, KW = G / 16 / SPLIT;
  constexpr int CELLS = Tl::CELLS;
  const BwdDir<T> d = blockIdx.y ? a.dir[1] : a.dir[0];
  const bool forward_dir = blockIdx.y == 0;  // whose forward ran t = 0 .. T-1, so this runs T-1 .. 0
  const int N = a.N, steps = a.steps;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * ROWS;
  extern __shared__ __align__(128) unsigned char smem[];
  FragB<T, ROWS, WN> b[KW];
  stage_r<T, H, ROWS, WN, KW, NT>(d.R, reinterpret_cast<T*>(smem), b, warp);
  const int nt = warp % NT, part = warp / NT;
  constexpr int LG = Tl::g16, LD = Tl::h32;
  T* dg = reinterpret_cast<T*>(smem);
  float* dhp = reinterpret_cast<float*>(smem + ROWS * LG * sizeof(T));
  const int j = lane % 8, u = warp * 8 + j, r = lane / 8;
  float dc[CELLS], dh0[CELLS], db[4] = {0, 0, 0, 0}, cn[CELLS];
  final_state_grads<T, H, CELLS>(d, dc, dh0, n0, r, N, u);
  auto c_at = [&](int t, int n) { return n < N ? d.c[(int64_t(t) * N + n) * H + u] : 0.f; };
  const int t0 = forward_dir ? steps - 1 : 0;
#pragma unroll
  for (int k = 0; k < CELLS; ++k) cn[k] = c_at(t0, n0 + r + 4 * k);
  for (int s = 0; s < steps; ++s) {
    const int t = forward_dir ? steps - 1 - s : s;
    const int tp = forward_dir ? t - 1 : t + 1;  // the step before t in the forward's order
    const bool first = s == steps - 1;           // t is the forward's first step: c_{t-1} = 0
#pragma unroll
    for (int k = 0; k < CELLS; ++k) {
      const int row = r + 4 * k, n = n0 + row;
      const float ct = cn[k];
      cn[k] = first ? 0.f : c_at(tp, n);
      float dgate[4] = {0, 0, 0, 0};
      if (n < N) {
        const int64_t at = int64_t(t) * N + n;
        float dh = dh0[k];
        if (s > 0) {
          dh = 0.f;
#pragma unroll
          for (int q = 0; q < SPLIT; ++q) dh += dhp[(q * ROWS + row) * LD + u];
        }
        if (d.dy) dh += cuda::to_float(d.dy[int64_t(t) * d.dy_t + int64_t(n) * d.dy_n + u]);
        T* p = d.gates + at * G + u;
        const float gi = cuda::to_float(p[0]), gf = cuda::to_float(p[H]), gg = cuda::to_float(p[2 * H]),
                    go = cuda::to_float(p[3 * H]);
        const float tc = tanh_fast(ct);
        const float dcv = dc[k] + dh * go * (1.f - tc * tc);
        dgate[0] = dcv * gg * gi * (1.f - gi);
        dgate[1] = dcv * cn[k] * gf * (1.f - gf);
        dgate[2] = dcv * gi * (1.f - gg * gg);
        dgate[3] = dh * tc * go * (1.f - go);
        dc[k] = dcv * gf;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
          p[g * H] = cuda::from_float<T>(dgate[g]);
          db[g] += dgate[g];
        }
      }
#pragma unroll
      for (int g = 0; g < 4; ++g) dg[row * LG + warp * 32 + 8 * g + j] = cuda::from_float<T>(dgate[g]);
    }
    __syncthreads();  // the gate gradients are complete; dhp has been read
    if (!first) {
      wmma::fragment<wmma::accumulator, ROWS, WN, 16, float> acc;
      wmma::fill_fragment(acc, 0.f);
#pragma unroll
      for (int kk = 0; kk < KW; ++kk) {
        wmma::fragment<wmma::matrix_a, ROWS, WN, 16, T, wmma::row_major> fa;
        wmma::load_matrix_sync(fa, dg + (part * KW + kk) * 16, LG);
        wmma::mma_sync(acc, fa, b[kk], acc);
      }
      wmma::store_matrix_sync(dhp + part * ROWS * LD + nt * WN, acc, LD, wmma::mem_row_major);
    }
    __syncthreads();  // dh_{t-1} is complete; dg has been read
  }
  store_bias_grad<T, H>(d, db, lane, u);
#endif
}

// db [D][blocks][4H] summed over the blocks in a fixed order, into both bias gradients of each
// direction (b_W and b_R get the same gradient).
template <class T>
__global__ void bias_grad_kernel(const float* db, int blocks, int G, T* dw0, T* dw1, int64_t bias_w_at,
                                 int64_t bias_r_at, int D) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= D * G) return;
  const int dir = i / G, col = i % G;
  float s = 0;
  for (int b = 0; b < blocks; ++b) s += db[(int64_t(dir) * blocks + b) * G + col];
  T* dw = dir ? dw1 : dw0;
  dw[bias_w_at + col] = cuda::from_float<T>(s);
  dw[bias_r_at + col] = cuda::from_float<T>(s);
}

template <class T, int H, int ROWS>
size_t forward_smem() {
  using Tl = Tile<ROWS, H>;
  return std::max<size_t>(size_t(4 * H) * H * sizeof(T), 2 * ROWS * Tl::h16 * sizeof(T) + ROWS * Tl::g32 * sizeof(float));
}
template <class T, int H, int ROWS>
size_t backward_smem() {
  using Tl = Tile<ROWS, H>;
  constexpr int split = (H / 8) / (H / Tl::WN);
  return std::max<size_t>(size_t(4 * H) * H * sizeof(T),
                          ROWS * Tl::g16 * sizeof(T) + split * ROWS * Tl::h32 * sizeof(float));
}

template <class T, int H, int ROWS>
void launch_forward(const FwdArgs<T>& a, int D, cudaStream_t stream) {
  static const size_t smem = [] {
    size_t b = forward_smem<T, H, ROWS>();
    LOUPE_CUDA_CHECK(cudaFuncSetAttribute(lstm_forward_kernel<T, H, ROWS>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, int(b)));
    return b;
  }();
  dim3 grid(unsigned((a.N + ROWS - 1) / ROWS), unsigned(D));
  lstm_forward_kernel<T, H, ROWS><<<grid, 4 * H, smem, stream>>>(a);
  LOUPE_CUDA_CHECK(cudaGetLastError());
}

template <class T, int H, int ROWS>
void launch_backward(const BwdArgs<T>& a, int D, cudaStream_t stream) {
  static const size_t smem = [] {
    size_t b = backward_smem<T, H, ROWS>();
    LOUPE_CUDA_CHECK(cudaFuncSetAttribute(lstm_backward_kernel<T, H, ROWS>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, int(b)));
    return b;
  }();
  dim3 grid(unsigned((a.N + ROWS - 1) / ROWS), unsigned(D));
  lstm_backward_kernel<T, H, ROWS><<<grid, 4 * H, smem, stream>>>(a);
  LOUPE_CUDA_CHECK(cudaGetLastError());
}

// Calls f with a value of T (__half or __nv_bfloat16) and std::integral_constant<int, H>.
template <class F>
void dispatch(DType t, int64_t H, F&& f) {
  auto by_h = [&](auto v) {
    using T = decltype(v);
    switch (H) {
      case 16: f(T{}, std::integral_constant<int, 16>{}); break;
      case 32: f(T{}, std::integral_constant<int, 32>{}); break;
      case 64: f(T{}, std::integral_constant<int, 64>{}); break;
      case 128: f(T{}, std::integral_constant<int, 128>{}); break;
      default: LOUPE_FAIL("lstm: loupe's kernels take hidden sizes 16, 32, 64 and 128, got ", H);
    }
  };
  if (t == DType::f16) by_h(__half{});
  else if (t == DType::bf16) by_h(__nv_bfloat16{});
  else LOUPE_FAIL("lstm: loupe's kernels take float16 and bfloat16, got ", dtype_name(t));
}

// Elements of type t from p.
const void* at(const void* p, int64_t elements, DType t) {
  return static_cast<const char*>(p) + elements * int64_t(dtype_size(t));
}
void* at(void* p, int64_t elements, DType t) { return static_cast<char*>(p) + elements * int64_t(dtype_size(t)); }

// The saved buffer: x transposed [T, N, in] | the outputs of every layer but the last [T, N, D*H] |
// per layer and direction the gates [T, N, 4H] | per layer and direction the cell states [T, N, H]
// in float32 (training only). Offsets in bytes, each 256-aligned.
struct Layout {
  size_t xs = 0, ys = 0, gates = 0, cells = 0, total = 0;
  size_t ys_bytes = 0, gates_bytes = 0, cell_bytes = 0;
  Layout(const LstmParams& p, int64_t N, int64_t T, DType t, bool training) {
    auto up = [](size_t n) { return (n + 255) / 256 * 256; };
    const size_t e = dtype_size(t), H = size_t(p.hidden_size), D = size_t(p.directions()), L = size_t(p.num_layers);
    const size_t rows = size_t(N * T);
    ys = up(rows * size_t(p.input_size) * e);
    ys_bytes = up(rows * D * H * e);
    gates = ys + (L - 1) * ys_bytes;
    gates_bytes = up(rows * 4 * H * e);
    cells = gates + L * D * gates_bytes;
    cell_bytes = training ? up(rows * H * sizeof(float)) : 0;
    total = cells + L * D * cell_bytes;
  }
};


}  // namespace

Tensor typed_view(const Tensor& buf, size_t at, const Shape& s, DType t) {
  Tensor v = as_strided(buf, s, contiguous_strides(s), 0);
  v.impl()->dtype = t;
  v.impl()->offset = int64_t(at / dtype_size(t));
  return v;
}

void swap01_into(const Tensor& dst, const Tensor& src) {
  NoGradGuard g;
  copy_(dst, transpose(src, 0, 1));
}

bool supports(const LstmParams& p, DType dtype, int rows, std::string* why) {
  auto no = [&](const std::string& w) {
    if (why) *why = w;
    return false;
  };
  if (dtype != DType::f16 && dtype != DType::bf16) return no("loupe's LSTM kernels take float16 and bfloat16");
  const int64_t H = p.hidden_size;
  if (H != 16 && H != 32 && H != 64 && H != 128) return no("loupe's LSTM kernels take hidden sizes 16, 32, 64, 128");
  if (p.dropout > 0 && p.num_layers > 1) return no("loupe's LSTM kernels have no dropout between layers");
  if (rows != 16 && (rows != 8 || H < 32)) return no("loupe's LSTM kernels take 16 rows a block, or 8 from hidden size 32");
  if (cuda_runtime()->compute_capability() < 80) return no("loupe's LSTM kernels need compute capability 8.0");
  return true;
}

Tensor forward(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, Tensor& y, const Tensor& h,
               const Tensor& c, bool training, int rows, cudaStream_t stream) {
  std::string why;
  LOUPE_CHECK(supports(p, x.dtype(), rows, &why), "lstm: ", why);
  const DType t = x.dtype();
  const int64_t N = x.size(0), T = x.size(1), H = p.hidden_size, D = p.directions(), L = p.num_layers, G = 4 * H;
  const Layout lay(p, N, T, t, training);
  Tensor buf = empty(Shape{int64_t(lay.total)}, DType::u8, kCUDA);
  Tensor xs = typed_view(buf, 0, Shape{T, N, p.input_size}, t);
  swap01_into(xs, x);
  Tensor ytop = empty(Shape{T, N, D * H}, t, kCUDA);
  for (int l = 0; l < L; ++l) {
    const void* in = l == 0 ? xs.data_ptr() : static_cast<const char*>(buf.data_ptr()) + lay.ys + size_t(l - 1) * lay.ys_bytes;
    void* out = l == L - 1 ? ytop.data_ptr() : static_cast<char*>(buf.data_ptr()) + lay.ys + size_t(l) * lay.ys_bytes;
    dispatch(t, H, [&](auto tv, auto hv) {
      using TT = decltype(tv);
      constexpr int HH = decltype(hv)::value;
      FwdArgs<TT> a{};
      a.N = int(N), a.steps = int(T);
      for (int dir = 0; dir < D; ++dir) {
        const LstmLayerOffsets o = lstm_layer_offsets(p, l, dir);
        void* gates = static_cast<char*>(buf.data_ptr()) + lay.gates + size_t(l * D + dir) * lay.gates_bytes;
        // Every step's input projection at once: [T*N, in] x W^T.
        gemm_raw(ctx, kCUDA, t, false, true, N * T, G, o.in, in, o.in, at(w.data_ptr(), o.w, t), o.in, gates, G);
        FwdDir<TT>& fd = a.dir[dir];
        fd.R = static_cast<const TT*>(at(w.data_ptr(), o.r, t));
        fd.b_w = static_cast<const TT*>(at(w.data_ptr(), o.b_w, t));
        fd.b_r = static_cast<const TT*>(at(w.data_ptr(), o.b_r, t));
        fd.gates = static_cast<TT*>(gates);
        fd.c = training ? reinterpret_cast<float*>(static_cast<char*>(buf.data_ptr()) + lay.cells +
                                                   size_t(l * D + dir) * lay.cell_bytes)
                        : nullptr;
        fd.y = static_cast<TT*>(out) + dir * H;
        fd.y_ld = D * H;
        fd.h_out = h.data<TT>() + (l * D + dir) * N * H;
        fd.c_out = c.data<TT>() + (l * D + dir) * N * H;
      }
      if constexpr (HH >= 32) {
        if (rows == 8) return launch_forward<TT, HH, 8>(a, int(D), stream);
      }
      launch_forward<TT, HH, 16>(a, int(D), stream);
    });
  }
  y = transpose(ytop, 0, 1);
  return training ? buf : Tensor();
}

namespace {
// Layer l's input to the backward GEMMs: x (kept in the buffer) for the first layer, else the
// layer below's outputs.
const void* layer_input(const Layout& lay, const char* base, int l) {
  return l == 0 ? base : base + lay.ys + size_t(l - 1) * lay.ys_bytes;
}

// Layer l's outputs: y itself for the last layer, else kept in the buffer.
const char* layer_output(const Layout& lay, const char* base, const Tensor& ytop, int l, int L) {
  return l == L - 1 ? static_cast<const char*>(ytop.data_ptr()) : base + lay.ys + size_t(l) * lay.ys_bytes;
}

// Pseudo-layer (l, dir)'s W and R gradients from its gate gradients (left in the buffer by the
// recurrence kernel): dW = dgates^T x over every row; dR = the sum over t of dgates_t^T h_{t-1},
// the rows after the direction's first step against the outputs one step earlier in its order.
void weight_gemms(const ExecContext& ctx, const LstmParams& p, const Layout& lay, const char* base, const char* out, int l, int dir,
                  int64_t N, int64_t T, DType t, const Tensor& dw, cudaStream_t stream) {
  const int64_t H = p.hidden_size, D = p.directions(), G = 4 * H, DH = D * H;
  const int64_t in_l = l == 0 ? p.input_size : DH;
  const LstmLayerOffsets o = lstm_layer_offsets(p, l, dir);
  const void* dg = base + lay.gates + size_t(l * D + dir) * lay.gates_bytes;
  gemm_raw(ctx, kCUDA, t, true, false, G, in_l, N * T, dg, G, layer_input(lay, base, l), in_l, at(dw.data_ptr(), o.w, t),
           in_l);
  if (T > 1) {
    const int64_t rows = (T - 1) * N;
    const void* a = dir == 0 ? at(dg, N * G, t) : dg;
    const void* hb = dir == 0 ? at(out, dir * H, t) : at(out, N * DH + dir * H, t);
    gemm_raw(ctx, kCUDA, t, true, false, G, H, rows, a, G, hb, DH, at(dw.data_ptr(), o.r, t), H);
  } else {
    LOUPE_CUDA_CHECK(cudaMemsetAsync(at(dw.data_ptr(), o.r, t), 0, size_t(G * H) * dtype_size(t), stream));
  }
}
}  // namespace

// The second round runs only under data parallelism, beside NCCL's all-reduce of the gradients
// before it (dist/ddp.h), whose kernels hold SMs of their own: cuBLAS plans these split-K GEMMs for
// the SMs left (cuda::comm_sms(): 24 beside NCCL, none beside the copy engines), or a grid sized for every SM runs a second, nearly empty
// wave (two H200s, imdb_bilstm: the weight GEMMs took 38 -> 56 and 50 -> 58 us a step beside
// NCCL's 24-channel kernel; carving out 24 SMs raised scaling from 91.9 % to 94.0 %, seven and
// eight alternating benches: docs/benchmarks.md).
// h: the handle the GEMMs run on (their context's lane's).
class SmCarveout {
 public:
  explicit SmCarveout(cublasHandle_t h) : h_(h) {
    const int carve = cuda::comm_sms();
    if (carve <= 0) return;
    int dev = 0, sms = 0;
    LOUPE_CUDA_CHECK(cudaGetDevice(&dev));
    LOUPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    LOUPE_CUBLAS_CHECK(cublasGetSmCountTarget(h_, &prev_));
    LOUPE_CUBLAS_CHECK(cublasSetSmCountTarget(h_, std::max(1, sms - carve)));
    on_ = true;
  }
  ~SmCarveout() {
    if (on_) cublasSetSmCountTarget(h_, prev_);
  }
  SmCarveout(const SmCarveout&) = delete;
  SmCarveout& operator=(const SmCarveout&) = delete;

 private:
  cublasHandle_t h_;
  int prev_ = 0;
  bool on_ = false;
};

void backward_weights(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& y, const Tensor& saved,
                      const Tensor& dw, cudaStream_t stream) {
  const SmCarveout carve(cuda::cublas(ctx));
  const DType t = x.dtype();
  const int64_t N = x.size(0), T = x.size(1);
  const Layout lay(p, N, T, t, true);
  LOUPE_CHECK(saved.defined() && size_t(saved.nbytes()) >= lay.total, "lstm backward: not this forward's buffer");
  Tensor ytop = transpose(y, 0, 1);
  const char* base = static_cast<const char*>(saved.data_ptr());
  for (int dir = 0; dir < p.directions(); ++dir)
    weight_gemms(ctx, p, lay, base, layer_output(lay, base, ytop, 0, p.num_layers), 0, dir, N, T, t, dw, stream);
}

void backward(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, const Tensor& y,
              const Tensor& saved, const Tensor& dy, const Tensor& dh, const Tensor& dc, const Tensor& dx,
              const Tensor& dw, int rows, bool weights_later, cudaStream_t stream) {
  const DType t = x.dtype();
  const int64_t N = x.size(0), T = x.size(1), H = p.hidden_size, D = p.directions(), L = p.num_layers, G = 4 * H;
  const int64_t DH = D * H, blocks = (N + rows - 1) / rows;
  const Layout lay(p, N, T, t, true);
  LOUPE_CHECK(saved.defined() && size_t(saved.nbytes()) >= lay.total, "lstm backward: not this forward's buffer");
  Tensor ytop = transpose(y, 0, 1);
  LOUPE_CHECK(ytop.is_contiguous(), "lstm backward: y is not the forward's sequence-major output");
  char* base = static_cast<char*>(saved.data_ptr());
  Tensor db = empty(Shape{D, blocks, G}, DType::f32, kCUDA);
  // The incoming gradient of the layer's outputs: the caller's (batch-first, maybe strided), then
  // each layer's input gradient, sequence-major.
  Tensor dyc = dy.defined() && dy.strides()[2] != 1 ? contiguous(dy) : dy;
  const void* dyp = dyc.defined() ? dyc.data_ptr() : nullptr;
  int64_t dy_t = dyc.defined() ? dyc.strides()[1] : 0, dy_n = dyc.defined() ? dyc.strides()[0] : 0;
  Tensor din;  // [T, N, in_l]: this layer's input gradient
  for (int l = L - 1; l >= 0; --l) {
    const int64_t in_l = l == 0 ? p.input_size : DH;
    const char* out = layer_output(lay, base, ytop, l, int(L));
    dispatch(t, H, [&](auto tv, auto hv) {
      using TT = decltype(tv);
      constexpr int HH = decltype(hv)::value;
      BwdArgs<TT> a{};
      a.N = int(N), a.steps = int(T);
      for (int dir = 0; dir < D; ++dir) {
        const LstmLayerOffsets o = lstm_layer_offsets(p, l, dir);
        BwdDir<TT>& bd = a.dir[dir];
        bd.R = static_cast<const TT*>(at(w.data_ptr(), o.r, t));
        bd.gates = reinterpret_cast<TT*>(base + lay.gates + size_t(l * D + dir) * lay.gates_bytes);
        bd.c = reinterpret_cast<const float*>(base + lay.cells + size_t(l * D + dir) * lay.cell_bytes);
        bd.dy = dyp ? static_cast<const TT*>(dyp) + dir * H : nullptr;
        bd.dy_t = dy_t, bd.dy_n = dy_n;
        bd.dh = dh.defined() ? dh.data<TT>() + (l * D + dir) * N * H : nullptr;
        bd.dc = dc.defined() ? dc.data<TT>() + (l * D + dir) * N * H : nullptr;
        bd.db = db.data<float>() + dir * blocks * G;
      }
      if constexpr (HH >= 32) {
        if (rows == 8) launch_backward<TT, HH, 8>(a, int(D), stream);
        else launch_backward<TT, HH, 16>(a, int(D), stream);
      } else {
        launch_backward<TT, HH, 16>(a, int(D), stream);
      }
      const LstmLayerOffsets o0 = lstm_layer_offsets(p, l, 0);
      const int64_t dir_stride = D > 1 ? lstm_layer_offsets(p, l, 1).w - o0.w : 0;
      bias_grad_kernel<TT><<<unsigned((D * G + 255) / 256), 256, 0, stream>>>(
          db.data<float>(), int(blocks), int(G), dw.data<TT>(), dw.data<TT>() + dir_stride, o0.b_w, o0.b_r, int(D));
      LOUPE_CUDA_CHECK(cudaGetLastError());
    });
    const bool need_din = l > 0 || dx.defined();
    Tensor dnext = need_din ? empty(Shape{T, N, in_l}, t, kCUDA) : Tensor();
    // The input gradient first (the directions' dgates W summed): with `weights_later` the first
    // layer's weight GEMMs come in backward_weights, after the layer below has taken dx.
    for (int dir = 0; dir < D && need_din; ++dir) {
      const LstmLayerOffsets o = lstm_layer_offsets(p, l, dir);
      const void* dg = base + lay.gates + size_t(l * D + dir) * lay.gates_bytes;
      gemm_raw(ctx, kCUDA, t, false, false, N * T, in_l, G, dg, G, at(w.data_ptr(), o.w, t), in_l, dnext.data_ptr(), in_l,
               dir > 0);
    }
    if (l > 0 || !weights_later)
      for (int dir = 0; dir < D; ++dir) weight_gemms(ctx, p, lay, base, out, l, dir, N, T, t, dw, stream);
    if (l == 0) {
      if (dx.defined()) swap01_into(dx, dnext);
    } else {
      din = dnext;
      dyp = din.data_ptr();
      dy_t = N * DH, dy_n = DH;
    }
  }
}

}  // namespace loupe::lstm_persist
