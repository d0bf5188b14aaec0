// loupe's persistent LSTM (ops/lstm/lstm_persist.h): per layer, one GEMM for every step's input
// projections, one kernel for the whole recurrence of both directions, and GEMMs for the weight
// and input gradients.
//
// Recurrence kernels: a block owns ROWS (8 or 16) batch rows of one direction and walks every time
// step; rows of a batch never interact, so blocks never wait for each other. Its H/8 warps keep
// their part of R in registers as tensor-core fragments for the whole sequence (mma.sync
// m16n8k16). A forward step is: R h_{t-1}^T on tensor cores (h_{t-1} in shared memory), plus the
// step's input projection and both biases, the gate nonlinearities and the cell update in float32
// straight from the accumulators, h_t back to shared memory; one __syncthreads per step. The
// backward walks the other way: gate gradients from the saved activations and cell states (loaded
// a step ahead), then dh_{t-1}^T = R^T dgates^T on tensor cores (two syncs per step).
//
// Layouts: everything between the layers is sequence-major [T, N, F] (x is transposed once), so
// that "every row at t >= 1" and "every row at t <= T-2" are plain matrices for dR's GEMM. Saved
// for the backward, per layer and direction: the gate activations [T, N, H, 4] (a cell's i, f, g, o
// side by side: one 8-byte store in the forward and one load in the backward), overwritten by the
// gate gradients [T, N, 4H] in the backward (the weight GEMMs read that layout); the cell states
// [T, N, H] in float32; the layers' outputs. Each rewrites a step's region of the buffer only after
// a barrier that follows every load from it (the loads run a step ahead).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "autograd/node.h"
#include "core/cuda_runtime.h"
#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "core/mma.cuh"
#include "ops/linalg.h"
#include "ops/lstm/lstm_persist.h"
#include "ops/view.h"

namespace loupe::lstm_persist {
namespace {

using cuda::ldmatrix;
using cuda::mma16816;
using cuda::pack2;

// Activations in float32 from the hardware's exp2 and reciprocal (a few instructions instead of
// expf's and tanhf's dozens: the pointwise part is most of a step's instructions). tanh as
// 2 sigmoid(2v) - 1 is accurate to ~1e-7 absolute, far below 16-bit storage's rounding.
__device__ __forceinline__ float sigmoid_fast(float v) { return __fdividef(1.f, 1.f + __expf(-v)); }
__device__ __forceinline__ float tanh_fast(float v) { return 2.f * sigmoid_fast(2.f * v) - 1.f; }
// The gates i, f, o: the sigmoid, or with Hard Keras's hard_sigmoid of slope `hard` (ops/lstm/lstm.h);
// and their derivative from their value. A template parameter, so that the sigmoid's kernels
// are the code they were without the option.
template <bool Hard>
__device__ __forceinline__ float gate_fast(float v, float hard) {
  if constexpr (Hard) return fminf(fmaxf(fmaf(hard, v, 0.5f), 0.f), 1.f);
  else return sigmoid_fast(v);
}
template <bool Hard>
__device__ __forceinline__ float gate_grad(float y, float hard) {
  if constexpr (Hard) return y > 0.f && y < 1.f ? hard : 0.f;
  else return y * (1.f - y);
}

// Leading dimensions (in elements) of the kernels' shared-memory tiles, padded so that ldmatrix's
// rows and the partial sums' stores fall into different banks. The kernels and their
// shared-memory sizes (forward_smem, backward_smem) both read them.
template <int H>
struct Pad {
  static constexpr int h = H + 8;          // the forward's h [ROWS][H]: 16 bytes past each row
  static constexpr int gates = 4 * H + 8;  // the backward's gate gradients [ROWS][4H]: 16 bytes
  static constexpr int dh = H + 4;         // the backward's dh partial sums [2][ROWS][H], float32
};

template <class T>
struct FwdDir {
  const T* R;                // [4H, H]
  const T *b_w, *b_r;        // [4H]
  T* gates;                  // the input projections [T, N, 4H] in, the activations [T, N, H, 4] out (if c)
  float* c;                  // [T, N, H]: the cell states (training), or null
  T* y;                      // h_t at y + (t * N + n) * y_ld (already at the direction's column)
  int64_t y_ld;
  T *h_out, *c_out;          // [N, H]: the final states
  float hard;                // LstmParams::hard_slope
};
template <class T>
struct FwdArgs {
  FwdDir<T> dir[2];
  int N, steps;
};

// The forward's product per step, transposed: gates^T [4H, ROWS] = R [4H, H] h_{t-1}^T, R the A
// operand held in registers, h_{t-1} [ROWS, H] in shared memory the B operand, ROWS / 8 n tiles of
// 8 batch rows. Warp w owns units 8w .. 8w+7 and two m tiles of their gate rows: tile 0 holds gate
// i (rows 0-7) and f (rows 8-15), tile 1 g and o. The accumulator gives lane l the rows l / 4 and
// l / 4 + 8 at columns 2 (l % 4) and 2 (l % 4) + 1: so each lane holds i, f, g and o of unit
// 8w + l / 4 for two batch rows of each n tile.
template <class T, int H>
__device__ __forceinline__ void load_r_fragments(const T* R, uint32_t (&ra)[2][H / 16][4], int u, int q) {
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
#pragma unroll
    for (int kt = 0; kt < H / 16; ++kt) {
      const T* r0 = R + int64_t(2 * mt * H + u) * H + kt * 16 + 2 * q;  // gate 2 mt, this unit
      const T* r1 = r0 + int64_t(H) * H;                                 // gate 2 mt + 1
      ra[mt][kt][0] = pack2(r0[0], r0[1]);
      ra[mt][kt][1] = pack2(r1[0], r1[1]);
      ra[mt][kt][2] = pack2(r0[8], r0[9]);
      ra[mt][kt][3] = pack2(r1[8], r1[9]);
    }
}

template <class T, int H, int NT, int LH>
__device__ __forceinline__ void recurrent_product(float (&acc)[2][NT][4], const uint32_t (&ra)[2][H / 16][4], const T* hp,
                                                  int lane) {
  constexpr int KT = H / 16, X = KT >= 2 ? 4 : 2;
#pragma unroll
  for (int kt = 0; kt < KT; kt += X / 2)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint32_t b[4];  // k tile kt in b[0..1], kt + 1 in b[2..3] (X = 4)
      ldmatrix<X>(b, hp + (nt * 8 + lane % 8) * LH + kt * 16 + 8 * ((lane / 8) % X));
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        mma16816(acc[mt][nt], ra[mt][kt], b[0], b[1], T{});
        if constexpr (X == 4) mma16816(acc[mt][nt], ra[mt][kt + 1], b[2], b[3], T{});
      }
    }
}

// One step's cell updates for this lane's cells (batch rows nt * 8 + 2 q + e, unit u) from the
// product's accumulators, the step's input projections and the biases: h_t into shared memory (the
// next product's B operand) and y, and in training the activations (over the spent input
// projections) and c_t for the backward.
template <class T, int H, int NT, int LH, bool Hard>
__device__ __forceinline__ void forward_cells(const FwdDir<T>& d, const float (&acc)[2][NT][4], const T (&cur)[NT][2][4],
                                              const float (&bias)[4], float (&c)[NT][2], float (&h)[NT][2], T* hn, T zero,
                                              int t, int N, int n0, int q, int u) {
  constexpr int G = 4 * H;
  const int64_t at0 = int64_t(t) * N;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int row = nt * 8 + 2 * q + e, n = n0 + row;
      const float gi = gate_fast<Hard>(acc[0][nt][e] + cuda::to_float(cur[nt][e][0]) + bias[0], d.hard);
      const float gf = gate_fast<Hard>(acc[0][nt][2 + e] + cuda::to_float(cur[nt][e][1]) + bias[1], d.hard);
      const float gg = tanh_fast(acc[1][nt][e] + cuda::to_float(cur[nt][e][2]) + bias[2]);
      const float go = gate_fast<Hard>(acc[1][nt][2 + e] + cuda::to_float(cur[nt][e][3]) + bias[3], d.hard);
      c[nt][e] = gf * c[nt][e] + gi * gg;
      h[nt][e] = go * tanh_fast(c[nt][e]);
      const T ht = cuda::from_float<T>(h[nt][e]);
      hn[row * LH + u] = n < N ? ht : zero;
      if (n < N) {
        const int64_t at = at0 + n;
        d.y[at * d.y_ld + u] = ht;
        if (d.c) {
          *reinterpret_cast<uint2*>(d.gates + at * G + 4 * u) =
              make_uint2(pack2(cuda::from_float<T>(gi), cuda::from_float<T>(gf)),
                         pack2(cuda::from_float<T>(gg), cuda::from_float<T>(go)));
          d.c[at * H + u] = c[nt][e];
        }
      }
    }
}

// The final h and c of this lane's cells.
template <class T, int H, int NT>
__device__ __forceinline__ void store_final_states(const FwdDir<T>& d, const float (&h)[NT][2], const float (&c)[NT][2],
                                                   int N, int n0, int q, int u) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int n = n0 + nt * 8 + 2 * q + e;
      if (n < N) {
        d.h_out[int64_t(n) * H + u] = cuda::from_float<T>(h[nt][e]);
        d.c_out[int64_t(n) * H + u] = cuda::from_float<T>(c[nt][e]);
      }
    }
}

// A block carries ROWS batch rows (16, or 8 for twice the blocks where a batch gives too few) of
// one direction through every step: one product, the cell update from the registers, h_t into the
// other half of a double buffer in shared memory, one __syncthreads.
template <class T, int H, int ROWS, bool Hard>
__global__ void __launch_bounds__(4 * H) lstm_forward_kernel(const FwdArgs<T> a) {
#if __CUDA_ARCH__ >= 800
  constexpr int G = 4 * H, NT = ROWS / 8, LH = Pad<H>::h;
  const FwdDir<T> d = blockIdx.y ? a.dir[1] : a.dir[0];
  const bool reverse = blockIdx.y == 1;
  const int N = a.N, steps = a.steps;
  const int lane = threadIdx.x % 32, q = lane % 4, u = threadIdx.x / 32 * 8 + lane / 4;
  const int n0 = blockIdx.x * ROWS;
  extern __shared__ __align__(128) unsigned char smem[];
  T* hs = reinterpret_cast<T*>(smem);  // [2][ROWS][LH]
  uint32_t ra[2][H / 16][4];
  load_r_fragments<T, H>(d.R, ra, u, q);
  float bias[4], c[NT][2], h[NT][2];
#pragma unroll
  for (int g = 0; g < 4; ++g) bias[g] = cuda::to_float(d.b_w[g * H + u]) + cuda::to_float(d.b_r[g * H + u]);
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) c[nt][0] = c[nt][1] = h[nt][0] = h[nt][1] = 0.f;
  const T zero = cuda::from_float<T>(0.f);
  // This lane's cells: batch rows nt * 8 + 2 q + e. Their input projections for the next step are
  // loaded while this one computes.
  T next[NT][2][4];
  auto load = [&](int t) {
    const T* p = d.gates + int64_t(t) * N * G + u;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        // Rows past the batch read the last row's (no branch): their h is written as zero.
        const int n = min(n0 + nt * 8 + 2 * q + e, N - 1);
#pragma unroll
        for (int g = 0; g < 4; ++g) next[nt][e][g] = p[n * G + g * H];
      }
  };
  load(reverse ? steps - 1 : 0);
  for (int s = 0; s < steps; ++s) {
    const int t = reverse ? steps - 1 - s : s;
    T cur[NT][2][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 2; ++e)
#pragma unroll
        for (int g = 0; g < 4; ++g) cur[nt][e][g] = next[nt][e][g];
    if (s + 1 < steps) load(reverse ? t - 1 : t + 1);
    float acc[2][NT][4] = {};
    if (s > 0) recurrent_product<T, H, NT, LH>(acc, ra, hs + (s & 1) * ROWS * LH, lane);
    else __syncthreads();  // every lane's first loads precede the first step's activations, stored over them
    T* hn = hs + ((s + 1) & 1) * ROWS * LH;  // h_t
    forward_cells<T, H, NT, LH, Hard>(d, acc, cur, bias, c, h, hn, zero, t, N, n0, q, u);
    __syncthreads();
  }
  store_final_states<T, H, NT>(d, h, c, N, n0, q, u);
#endif
}

template <class T>
struct BwdDir {
  const T* R;            // [4H, H]
  T* gates;              // the activations [T, N, H, 4] in, the gate gradients [T, N, 4H] out
  const float* c;        // [T, N, H]
  const T* dy;           // dL/dh_t at dy + t * dy_t + n * dy_n (the direction's column), or null
  int64_t dy_t, dy_n;
  const T *dh, *dc;      // [N, H]: the final states' gradients, or null
  float* db;             // [gridDim.x, 4H]: this block's bias-gradient sum over its rows and steps
  float hard;            // LstmParams::hard_slope
};
template <class T>
struct BwdArgs {
  BwdDir<T> dir[2];
  int N, steps;
};

// The backward's product per step, transposed like the forward's: dh^T [H, ROWS] = R^T [H, 4H]
// dgates^T [4H, ROWS]. R^T is the A operand in registers; warp w owns the m tile of units
// 16 (w / 2) .. +15 and half of the k range (w % 2), so the two halves' partial sums meet in
// shared memory. The gate gradients [ROWS, 4H] (gate rows in R's order) are the B operand.
template <class T, int H>
__device__ __forceinline__ void load_rt_fragments(const T* R, uint32_t (&ra)[H / 8][4], int warp, int lane) {
  const int m = warp / 2 * 16 + lane / 4, q = lane % 4;
#pragma unroll
  for (int kk = 0; kk < H / 8; ++kk) {
    const T* r = R + int64_t((warp % 2 * (H / 8) + kk) * 16 + 2 * q) * H + m;  // R[k][m] = R^T[m][k]
    ra[kk][0] = pack2(r[0], r[H]);
    ra[kk][1] = pack2(r[8], r[H + 8]);
    ra[kk][2] = pack2(r[8 * H], r[9 * H]);
    ra[kk][3] = pack2(r[8 * H + 8], r[9 * H + 8]);
  }
}

// This block's dh partial sums [2][ROWS][LD] in float32 from the gate gradients dg [ROWS][LG].
template <class T, int H, int NT, int LG, int LD>
__device__ __forceinline__ void dh_product(float* dhp, const T* dg, const uint32_t (&ra)[H / 8][4], int warp, int lane) {
  constexpr int KH = H / 8;
  const int part = warp % 2, m = warp / 2 * 16 + lane / 4, q = lane % 4;
  float acc[NT][4] = {};
#pragma unroll
  for (int kk = 0; kk < KH; kk += 2)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      uint32_t b[4];  // k tile kk in b[0..1], kk + 1 in b[2..3]
      ldmatrix<4>(b, dg + (nt * 8 + lane % 8) * LG + (part * KH + kk) * 16 + 8 * (lane / 8));
      mma16816(acc[nt], ra[kk], b[0], b[1], T{});
      mma16816(acc[nt], ra[kk + 1], b[2], b[3], T{});
    }
  float* o = dhp + part * (NT * 8) * LD;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int row = nt * 8 + 2 * q;
    o[row * LD + m] = acc[nt][0];
    o[(row + 1) * LD + m] = acc[nt][1];
    o[row * LD + m + 8] = acc[nt][2];
    o[(row + 1) * LD + m + 8] = acc[nt][3];
  }
}

// The final cell state's gradient of this lane's cells, where given: zero past the batch.
template <class T, int H, int CELLS>
__device__ __forceinline__ void final_cell_grads(const BwdDir<T>& d, float (&dc)[CELLS], int n0, int r, int N, int u) {
#pragma unroll
  for (int k = 0; k < CELLS; ++k) {
    const int n = n0 + r + 4 * k;
    dc[k] = d.dc && n < N ? cuda::to_float(d.dc[int64_t(n) * H + u]) : 0.f;
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

// What a lane's cells read at one step of the backward, loaded a step ahead: the gate activations,
// the incoming gradient of h_t, and the cell state c_{t-1} (c_t is the previous step's).
template <class T, int CELLS>
struct BwdLoads {
  T gate[CELLS][4];
  T dy[CELLS];
  float c_before[CELLS];
};

// A block carries ROWS batch rows of one direction backwards through every step: the gate
// gradients of its cells (from the saved activations and cell states, and dh), then dh_{t-1}.
// Lane mapping of the cell updates: unit 8 warp + lane % 8, rows lane / 8 + 4 k.
template <class T, int H, int ROWS, bool Hard>
__global__ void __launch_bounds__(4 * H) lstm_backward_kernel(const BwdArgs<T> a) {
#if __CUDA_ARCH__ >= 800
  constexpr int G = 4 * H, NT = ROWS / 8, CELLS = ROWS / 4;
  constexpr int LG = Pad<H>::gates, LD = Pad<H>::dh;
  const BwdDir<T> d = blockIdx.y ? a.dir[1] : a.dir[0];
  const bool forward_dir = blockIdx.y == 0;  // whose forward ran t = 0 .. T-1, so this runs T-1 .. 0
  const int N = a.N, steps = a.steps;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int n0 = blockIdx.x * ROWS;
  extern __shared__ __align__(128) unsigned char smem[];
  T* dg = reinterpret_cast<T*>(smem);                                      // [ROWS][LG]
  float* dhp = reinterpret_cast<float*>(smem + ROWS * LG * sizeof(T));     // [2][ROWS][LD]
  uint32_t ra[H / 8][4];
  load_rt_fragments<T, H>(d.R, ra, warp, lane);
  const int j = lane % 8, u = warp * 8 + j, r = lane / 8;
  float dc[CELLS], db[4] = {0, 0, 0, 0}, ct[CELLS];
  final_cell_grads<T, H, CELLS>(d, dc, n0, r, N, u);
  auto time_of = [&](int s) { return forward_dir ? steps - 1 - s : s; };  // the forward's t at backward step s
  // Rows past the batch read the last row's (no branch); their gradients are zeroed below.
  auto c_at = [&](int s, int k) {
    return s < steps ? d.c[(int64_t(time_of(s)) * N + min(n0 + r + 4 * k, N - 1)) * H + u] : 0.f;
  };
  BwdLoads<T, CELLS> cur, next;
  auto load = [&](BwdLoads<T, CELLS>& l, int s) {
    const int t = time_of(s);
#pragma unroll
    for (int k = 0; k < CELLS; ++k) {
      const int n = min(n0 + r + 4 * k, N - 1);
      // The cell's activations, side by side (the forward's layout): one 8-byte load.
      const uint2 v = *reinterpret_cast<const uint2*>(d.gates + (int64_t(t) * N + n) * G + 4 * u);
      memcpy(l.gate[k], &v, sizeof v);
      if (d.dy) l.dy[k] = d.dy[int64_t(t) * d.dy_t + int64_t(n) * d.dy_n + u];
      l.c_before[k] = c_at(s + 1, k);
    }
  };
#pragma unroll
  for (int k = 0; k < CELLS; ++k) ct[k] = c_at(0, k);
  load(next, 0);
  __syncthreads();  // every lane's first loads precede the gate gradients stored over them
  for (int s = 0; s < steps; ++s) {
    const int t = time_of(s);
    cur = next;
    if (s + 1 < steps) load(next, s + 1);
#pragma unroll
    for (int k = 0; k < CELLS; ++k) {
      const int row = r + 4 * k, n = n0 + row;
      float dgate[4] = {0, 0, 0, 0};
      if (n < N) {
        // dh_t: the product of the step before, or at the last step the final state's gradient
        float dh = s > 0 ? dhp[row * LD + u] + dhp[(ROWS + row) * LD + u]
                         : d.dh ? cuda::to_float(d.dh[int64_t(n) * H + u]) : 0.f;
        if (d.dy) dh += cuda::to_float(cur.dy[k]);
        const float gi = cuda::to_float(cur.gate[k][0]), gf = cuda::to_float(cur.gate[k][1]),
                    gg = cuda::to_float(cur.gate[k][2]), go = cuda::to_float(cur.gate[k][3]);
        const float tc = tanh_fast(ct[k]);
        const float dcv = dc[k] + dh * go * (1.f - tc * tc);
        dgate[0] = dcv * gg * gate_grad<Hard>(gi, d.hard);
        dgate[1] = dcv * cur.c_before[k] * gate_grad<Hard>(gf, d.hard);
        dgate[2] = dcv * gi * (1.f - gg * gg);
        dgate[3] = dh * tc * gate_grad<Hard>(go, d.hard);
        dc[k] = dcv * gf;
        T* p = d.gates + (int64_t(t) * N + n) * G + u;
#pragma unroll
        for (int g = 0; g < 4; ++g) {
          p[g * H] = cuda::from_float<T>(dgate[g]);
          db[g] += dgate[g];
        }
      }
      ct[k] = cur.c_before[k];
#pragma unroll
      for (int g = 0; g < 4; ++g) dg[row * LG + g * H + u] = cuda::from_float<T>(dgate[g]);
    }
    __syncthreads();  // the gate gradients are complete; dhp has been read
    if (s + 1 < steps) dh_product<T, H, NT, LG, LD>(dhp, dg, ra, warp, lane);
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
  return 2 * ROWS * size_t(Pad<H>::h) * sizeof(T);
}
template <class T, int H, int ROWS>
size_t backward_smem() {
  return ROWS * size_t(Pad<H>::gates) * sizeof(T) + 2 * ROWS * size_t(Pad<H>::dh) * sizeof(float);
}

template <class T, int H, int ROWS, bool Hard>
void launch_forward_gates(const FwdArgs<T>& a, int D, cudaStream_t stream) {
  static const size_t smem = [] {
    size_t b = forward_smem<T, H, ROWS>();
    LOUPE_CUDA_CHECK(cudaFuncSetAttribute(lstm_forward_kernel<T, H, ROWS, Hard>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, int(b)));
    return b;
  }();
  dim3 grid(unsigned((a.N + ROWS - 1) / ROWS), unsigned(D));
  cuda::launch(lstm_forward_kernel<T, H, ROWS, Hard>, grid, 4 * H, smem, stream, a);
  LOUPE_CUDA_CHECK(cudaGetLastError());
}
template <class T, int H, int ROWS>
void launch_forward(const FwdArgs<T>& a, int D, cudaStream_t stream) {
  if (a.dir[0].hard > 0) launch_forward_gates<T, H, ROWS, true>(a, D, stream);
  else launch_forward_gates<T, H, ROWS, false>(a, D, stream);
}

template <class T, int H, int ROWS, bool Hard>
void launch_backward_gates(const BwdArgs<T>& a, int D, cudaStream_t stream) {
  static const size_t smem = [] {
    size_t b = backward_smem<T, H, ROWS>();
    LOUPE_CUDA_CHECK(cudaFuncSetAttribute(lstm_backward_kernel<T, H, ROWS, Hard>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, int(b)));
    return b;
  }();
  dim3 grid(unsigned((a.N + ROWS - 1) / ROWS), unsigned(D));
  cuda::launch(lstm_backward_kernel<T, H, ROWS, Hard>, grid, 4 * H, smem, stream, a);
  LOUPE_CUDA_CHECK(cudaGetLastError());
}
template <class T, int H, int ROWS>
void launch_backward(const BwdArgs<T>& a, int D, cudaStream_t stream) {
  if (a.dir[0].hard > 0) launch_backward_gates<T, H, ROWS, true>(a, D, stream);
  else launch_backward_gates<T, H, ROWS, false>(a, D, stream);
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

Tensor persist_forward(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, Tensor& y, const Tensor& h,
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
        fd.hard = p.hard_slope;
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
// before it (parallel/ddp.h), whose kernels hold SMs of their own: cuBLAS plans these split-K GEMMs
// for the SMs left (cuda::comm_sms(): 24 by default, LOUPE_DDP_SM_CARVEOUT), or a grid sized
// for every SM runs a second, nearly empty wave that slows the GEMMs and the world's scaling
// (imdb_bilstm on two H200s: lab/benchmarks.md, "imdb_bilstm on two GPUs: the weight GEMMs planned
// for the SMs NCCL leaves").
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

void persist_backward_weights(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& y, const Tensor& saved,
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

void persist_backward(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, const Tensor& y,
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
        bd.hard = p.hard_slope;
      }
      if constexpr (HH >= 32) {
        if (rows == 8) launch_backward<TT, HH, 8>(a, int(D), stream);
        else launch_backward<TT, HH, 16>(a, int(D), stream);
      } else {
        launch_backward<TT, HH, 16>(a, int(D), stream);
      }
      const LstmLayerOffsets o0 = lstm_layer_offsets(p, l, 0);
      const int64_t dir_stride = D > 1 ? lstm_layer_offsets(p, l, 1).w - o0.w : 0;
      cuda::launch(bias_grad_kernel<TT>, unsigned((D * G + 255) / 256), 256, 0, stream, db.data<float>(), int(blocks),
                   int(G), dw.data<TT>(), dw.data<TT>() + dir_stride, o0.b_w, o0.b_r, int(D));
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
