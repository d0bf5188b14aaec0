// The fused MLP on CUDA (ops/fused/mlp.h): three kernels on tensor cores (mma.sync m16n8k16, core/mma.cuh).
//
// forward, one launch: a cluster of 8 blocks per 16 batch rows. Block c of a cluster owns columns
// [c S, c S + S) of every hidden layer (S = width / 8): it computes its 16 x S slice from the
// layer's whole input and its S rows of the weights, streamed through shared memory in chunks of
// 128 along k, each of its 8 warps taking one k16 step of a chunk for all S columns (the rows are
// one m16 tile, so k is what there is to split); the warps' partial sums are added in a fixed order,
// then each thread applies bias, ReLU and dropout to four outputs (one Philox block) and writes them
// into the block's shared-memory copy of the layer's output (and to global memory, saved for the
// backward). After a cluster barrier each block copies the other seven slices from its peers'
// shared memory (distributed shared memory), so the next layer reads its whole input on chip. The
// narrow head takes 2 rows a block, each over four warps' quarters of k.
// A wide input (over 1024: a CNN's flattened features) would have every block stream all of x; there
// the first layer's k is split across the cluster instead: block c multiplies x's and W0's columns
// [c in / 8, (c + 1) in / 8) for all of the layer's outputs, each warp 16 of every 128, and the 8
// float32 partial sums meet through distributed shared memory, each block adding its S columns'
// in a fixed order; x is read once in all and W0 once a cluster.
// backward, two launches. The data gradients in clusters as the forward: dz of the last hidden
// layer from gy and the head's weights (FMAs), masked by the saved output; then each layer down,
// dz_l = mask(dz_{l+1} W_{l+1}) with dz_{l+1} gathered from the peers and W_{l+1}'s column slice
// streamed; each dz written out. Then the weights' gradients, dW_l = dz_l^T in_l over the whole
// batch, one 64 x 64 tile a block for every layer at once (and each bias as its tile row 0 blocks'
// column sums), so no partial sums cross blocks and the result is the same every run; where x needs
// a gradient, dx = dz0 W0 as more tiles of the same kernel.
// A batch takes the fused kernels only if its clusters fit on the GPU at once (one block an SM:
// 15 clusters, 240 rows, on an H200); past that a second wave runs after the first, and cuBLAS's
// GEMMs over the whole GPU do better (mnist_mlp at 512 and 1024 rows: lab/benchmarks.md, "The fused
// MLP").
#include <cooperative_groups.h>

#include <algorithm>
#include <mutex>
#include <type_traits>
#include <utility>

#include "core/cuda_runtime.h"
#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "core/mma.cuh"
#include "core/philox.h"
#include "ops/fused/mlp.h"

namespace loupe {
namespace {

namespace cg = cooperative_groups;
using cuda::cp_async16;

constexpr int kThreads = 256;  // 8 warps

template <class T>
__device__ __forceinline__ T rnd(float v) {
  return cuda::from_float<T>(v);
}
template <class T>
__device__ __forceinline__ float f(T v) {
  return cuda::to_float(v);
}

// Copies the [ROWS][8 SEGS] tile at src (leading dimension ld) to dst (leading dimension LD) in
// 16-byte pieces, asynchronously; rows from `rows_valid` on and columns from `cols_valid` (a
// multiple of 8) on read as zeros. Every thread of the block takes the same number of pieces, so
// the loop unrolls and its row offsets stay in registers across a product's chunks.
template <int ROWS, int SEGS, int LD, class T>
__device__ __forceinline__ void load_tile(T* dst, const T* src, int64_t ld, int rows_valid, int cols_valid) {
  static_assert(ROWS * SEGS % kThreads == 0, "whole pieces a thread");
#pragma unroll
  for (int q = 0; q < ROWS * SEGS / kThreads; ++q) {
    const int i = int(threadIdx.x) + q * kThreads, r = i / SEGS, s = (i % SEGS) * 8;
    const bool ok = r < rows_valid && s < cols_valid;
    cp_async16(dst + r * LD + s, ok ? src + int64_t(r) * ld + s : src, ok);
  }
}

// ---- the weights' gradients: 64 x 64 tiles, a warp 16 rows x 32 columns --------------------------
constexpr int kWKc = 64;                      // the k extent of a streamed chunk (batch rows)
constexpr int kWLdc = kWKc + 8;               // a chunk's leading dimension, padded (ldmatrix rows in distinct banks)
constexpr int kWStages = 3;                   // chunks in flight
constexpr int kWStageElems = 2 * 64 * kWLdc;  // one stage: an A and a B chunk
constexpr size_t kWeightSmem = size_t(kWStages) * kWStageElems * 2;

// acc[j] += the warp's 16 rows x 8 columns (n tile j < 4) of A B over one chunk of kWKc along k:
// A k-major [k][m] at a, or with A_ROW row-major [m][k] (the warp's rows from a_row), B k-major
// [k][n] at b (its columns from n0), leading dimension kWLdc.
template <class T, bool A_ROW>
__device__ __forceinline__ void mma_chunk(float (&acc)[4][4], const T* a, int a_row, const T* b, int n0) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < kWKc; kk += 16) {
    uint32_t af[4];
    if constexpr (A_ROW)
      cuda::ldmatrix<4>(af, a + (a_row + lane % 16) * kWLdc + kk + 8 * (lane / 16));
    else
      cuda::ldmatrix_trans(af, a + (kk + lane % 8 + 8 * (lane / 16)) * kWLdc + a_row + 8 * ((lane / 8) % 2));
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      uint32_t bf[4];
      cuda::ldmatrix_trans(bf, b + (kk + lane % 8 + 8 * ((lane / 8) % 2)) * kWLdc + n0 + 16 * p + 8 * (lane / 16));
      cuda::mma16816(acc[2 * p], af, bf[0], bf[1], T{});
      cuda::mma16816(acc[2 * p + 1], af, bf[2], bf[3], T{});
    }
  }
}

// The pipelined product of a 64 x 64 tile over `chunks` chunks of kWKc along k, the 8 warps a 4 x 2
// grid of 16 x 32: load(stage, k0) queues a chunk's A and B (A at the stage, B 64 rows after it),
// and each(A chunk) sees every chunk once it is in. Ends with the stages free.
template <class T, bool A_ROW, class Load, class Each>
__device__ __forceinline__ void tile_product(float (&acc)[4][4], int chunks, T* stage, Load load, Each each) {
  const int warp = threadIdx.x / 32, rg = warp % 4, ch = warp / 4;
#pragma unroll
  for (int st = 0; st < kWStages - 1; ++st) {
    if (st < chunks) load(stage + st * kWStageElems, st * kWKc);
    cuda::cp_async_commit();
  }
  for (int kc = 0; kc < chunks; ++kc) {
    cuda::cp_async_wait<kWStages - 2>();
    __syncthreads();  // chunk kc is in for every thread; chunk kc - 1's buffer is free again
    const int nk = kc + kWStages - 1;
    if (nk < chunks) load(stage + (nk % kWStages) * kWStageElems, nk * kWKc);
    cuda::cp_async_commit();
    const T* sa = stage + (kc % kWStages) * kWStageElems;
    each(sa);
    mma_chunk<T, A_ROW>(acc, sa, 16 * rg, sa + 64 * kWLdc, 32 * ch);
  }
  cuda::cp_async_wait<0>();
  __syncthreads();
}

// The warps' tile of acc into out [M][N] at row m0, column n0; rows and columns past M, N left out.
template <class T>
__device__ __forceinline__ void store_tile(const float (&acc)[4][4], T* out, int M, int N, int m0, int n0) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, rg = warp % 4, ch = warp / 4;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int n = n0 + 32 * ch + 8 * j + 2 * (lane % 4);
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int m = m0 + 16 * rg + lane / 4 + 8 * e;
      if (m < M && n < N)
        *reinterpret_cast<uint32_t*>(out + int64_t(m) * N + n) =
            cuda::pack2(rnd<T>(acc[j][2 * e]), rnd<T>(acc[j][2 * e + 1]));
    }
  }
}

// Layer l's weight and bias gradients, one 64 x 64 tile of dW = dz^T in over the whole batch (dz:
// the head's gy or a hidden layer's dz; in: x or the previous layer's output); a tile in column 0
// also sums its 64 rows of the bias gradient.
template <class T>
__device__ void weight_tile(const MlpArgs& a, int l, int tile, int across, T* stage) {
  const int m0 = (tile / across) * 64, n0 = (tile % across) * 64;
  const int M = a.width[l], K = l ? a.width[l - 1] : a.in, head = l == a.layers - 1;
  const T* dz = static_cast<const T*>(head ? a.gy : a.dz[l]);
  const T* in = static_cast<const T*>(l ? a.h[l - 1] : a.x);
  float acc[4][4] = {};
  // A column-0 tile's bias gradient: thread t sums column t % 64 of rows 16 (t / 64) .. + 15 of each
  // chunk; the four partial sums are added in order at the end.
  float bias = 0.f;
  auto load = [&](T* sa, int k0) {
    const int rows = min(kWKc, a.rows - k0);
    if (M % 8 == 0) {
      load_tile<kWKc, 8, kWLdc>(sa, dz + int64_t(k0) * M + m0, M, rows, min(64, M - m0));
    } else {  // the head's gy [rows][M <= 16], rows not 16-byte aligned: plain loads, each thread's
              // four issued before its stores (published by the next barrier); columns past 16 unused
      const int r = threadIdx.x / 4, m = 4 * (threadIdx.x % 4);
      T v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = r < rows && m + k < M ? dz[int64_t(k0 + r) * M + m + k] : rnd<T>(0.f);
#pragma unroll
      for (int k = 0; k < 4; ++k) sa[r * kWLdc + m + k] = v[k];
    }
    load_tile<kWKc, 8, kWLdc>(sa + 64 * kWLdc, in + int64_t(k0) * K + n0, K, rows, min(64, K - n0));
  };
  auto each = [&](const T* sa) {
    if (n0 == 0)
#pragma unroll
      for (int r = 0; r < 16; ++r) bias += f(sa[(16 * (threadIdx.x / 64) + r) * kWLdc + threadIdx.x % 64]);
  };
  tile_product<T, false>(acc, (a.rows + kWKc - 1) / kWKc, stage, load, each);
  store_tile(acc, static_cast<T*>(a.gw[l]), M, K, m0, n0);
  if (n0 == 0) {
    float* part = reinterpret_cast<float*>(stage);  // [4][64]; the stages are free (product's last barrier)
    part[threadIdx.x] = bias;
    __syncthreads();
    const int m = int(threadIdx.x);
    if (m < 64 && m0 + m < M)
      static_cast<T*>(a.gb[l])[m0 + m] = rnd<T>(part[m] + part[64 + m] + part[128 + m] + part[192 + m]);
  }
}

// One 64 x 64 tile of the input's gradient dx = dz0 W0 ([rows][in]; k over the first layer's width):
// dz0 row-major, W0 [width][in] k-major.
template <class T>
__device__ void input_grad_tile(const MlpArgs& a, int tile, int across, T* stage) {
  const int m0 = (tile / across) * 64, n0 = (tile % across) * 64, N0 = a.width[0];
  const T* dz = static_cast<const T*>(a.dz[0]);
  const T* W = static_cast<const T*>(a.w[0]);
  float acc[4][4] = {};
  auto load = [&](T* sa, int k0) {
    load_tile<64, 8, kWLdc>(sa, dz + int64_t(m0) * N0 + k0, N0, a.rows - m0, min(64, N0 - k0));
    load_tile<64, 8, kWLdc>(sa + 64 * kWLdc, W + int64_t(k0) * a.in + n0, a.in, N0 - k0, min(64, a.in - n0));
  };
  tile_product<T, true>(acc, (N0 + kWKc - 1) / kWKc, stage, load, [](const T*) {});
  store_tile(acc, static_cast<T*>(a.gx), a.rows, a.in, m0, n0);
}

// Block t takes tile t of the list: each layer's weight tiles, then (with a.gx) the input's.
struct WeightTiles {
  int first[kMlpMaxLayers + 2];   // each layer's first tile, then the input's; first[layers + 1] is the count
  int across[kMlpMaxLayers + 1];  // tiles along each output's rows
};

template <class T>
__global__ void __launch_bounds__(kThreads) mlp_weight_grad_kernel(MlpArgs a, WeightTiles t) {
  extern __shared__ __align__(16) unsigned char smem[];
  T* stage = reinterpret_cast<T*>(smem);
  // The tile's list entry, found with fixed indices (a loop over a parameter array with a variable
  // index would copy the array to local memory first).
  int l = 0, first = 0, across = t.across[0];
#pragma unroll
  for (int i = 1; i <= kMlpMaxLayers; ++i)
    if (int(blockIdx.x) >= t.first[i]) l = i, first = t.first[i], across = t.across[i];
  const int tile = int(blockIdx.x) - first;
  if (l == a.layers)
    input_grad_tile<T>(a, tile, across, stage);
  else
    weight_tile<T>(a, l, tile, across, stage);
}

// ---- the cluster kernels: 16 rows a cluster, k split across the warps ----------------------------
constexpr int kCluster = 8;    // blocks a cluster: each owns an eighth of a hidden layer's columns
constexpr int kRows = 16;      // batch rows a cluster: one m16 tile
constexpr int kKc = 128;       // the k extent of a streamed chunk: one k16 step a warp
constexpr int kLda = kKc + 8;  // a chunk of A [16][k], or of B [n][k], padded
constexpr int kLdbT = 64 + 8;  // a chunk of B k-major [k][n <= 64], padded
constexpr int kAElems = kRows * kLda;
constexpr int kBnElems = 64 * kLda;    // B n-major: [64][kLda]
constexpr int kBkElems = kKc * kLdbT;  // B k-major: [kKc][kLdbT]
constexpr int kBElems = kBnElems > kBkElems ? kBnElems : kBkElems;
constexpr int kStageElems = kAElems + kBElems;
constexpr int kStages = 4;     // chunks in flight
constexpr int kLdh = 512 + 8;  // the on-chip activations' [kRows][width <= 512], padded
constexpr int kLdr = 64 + 8;   // the warps' partial sums [8][kRows][64], float32, padded
constexpr size_t kClusterSmem =
    (size_t(16) * kLdh + size_t(2) * kRows * kLdh + size_t(kStages) * kStageElems) * 2 + size_t(8) * kRows * kLdr * 4;
// A wide first layer's chunk: x [16][128 k] and 128 of W0's rows [128][128 k]; its partial sums
// [kRows][width <= 512] float32 (padded: 16-byte rows in distinct banks).
constexpr int kWideStageElems = kAElems + 128 * kLda;
constexpr int kLdp = 512 + 4;
constexpr size_t kWideSmem =
    (size_t(16) * kLdh + size_t(kRows) * kLdh + size_t(kStages) * kWideStageElems) * 2 + size_t(kRows) * kLdp * 4;
static_assert(kWideSmem <= 227 * 1024, "a block's shared memory on sm_90");

// Shared memory of a cluster kernel's block. A wide first layer uses everything after layer 0's
// buffer (its partial sums, then its stages): the later layers' buffer, stages and partial sums
// take it over once the cluster is past the layer.
template <class T>
struct Smem {
  T* wh;             // [16][kLdh]: the head's weights (forward)
  T* buf;            // [2][kRows][kLdh]: a layer's whole output (forward) or dz (backward), alternating
  T* stage;          // [kStages][kStageElems]
  float* part;       // [8][kRows][kLdr]: each warp's partial sums
  float* wide_part;  // [kRows][kLdp]
  T* wide_stage;     // [kStages][kWideStageElems]
  __device__ explicit Smem(unsigned char* p)
      : wh(reinterpret_cast<T*>(p)),
        buf(wh + 16 * kLdh),
        stage(buf + 2 * kRows * kLdh),
        part(reinterpret_cast<float*>(stage + kStages * kStageElems)),
        wide_part(reinterpret_cast<float*>(buf + kRows * kLdh)),
        wide_stage(reinterpret_cast<T*>(wide_part + kRows * kLdp)) {}
  __device__ T* layer(int l) const { return buf + (l % 2) * kRows * kLdh; }
};

// acc[j] += the block's 16 rows x 8 columns (n tile j < NT) of A B over warp w's k16 step of a
// chunk (k = 16 w .. 16 w + 15). A: row-major [16][k] at a (leading dimension lda). B: n-major
// [n][k] at b (kLda), or with B_T k-major [k][n] (kLdbT).
template <class T, bool B_T>
__device__ __forceinline__ void splitk_chunk(float (&acc)[8][4], const T* a, int lda, const T* b, int NT) {
  const int lane = threadIdx.x % 32, kk = 16 * (threadIdx.x / 32);
  uint32_t af[4];
  cuda::ldmatrix<4>(af, a + (lane % 16) * lda + kk + 8 * (lane / 16));
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    if (2 * p >= NT) break;
    uint32_t bf[4];
    if constexpr (B_T)
      cuda::ldmatrix_trans(bf, b + (kk + lane % 8 + 8 * ((lane / 8) % 2)) * kLdbT + 16 * p + 8 * (lane / 16));
    else
      cuda::ldmatrix<4>(bf, b + (16 * p + lane % 8 + 8 * (lane / 16)) * kLda + kk + 8 * ((lane / 8) % 2));
    cuda::mma16816(acc[2 * p], af, bf[0], bf[1], T{});
    if (2 * p + 1 < NT) cuda::mma16816(acc[2 * p + 1], af, bf[2], bf[3], T{});
  }
}

// The warp's share of [16 rows] x [8 NT columns] = A B over K, k split across the warps: chunks of
// kKc streamed through the stages by load(stage's A buffer, its B buffer, k0) (cp.async copies).
// With a resident A (a_res: row-major, leading dimension kLdh) only B is streamed.
template <class T, bool B_T, class Load>
__device__ __forceinline__ void splitk_product(float (&acc)[8][4], int K, T* stage, const T* a_res, int NT, Load load) {
  const int chunks = (K + kKc - 1) / kKc;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) load(stage + s * kStageElems, stage + s * kStageElems + kAElems, s * kKc);
    cuda::cp_async_commit();
  }
  for (int kc = 0; kc < chunks; ++kc) {
    cuda::cp_async_wait<kStages - 2>();
    __syncthreads();  // chunk kc is in for every thread; chunk kc - 1's buffer is free again
    const int nk = kc + kStages - 1;
    if (nk < chunks) {
      T* s = stage + (nk % kStages) * kStageElems;
      load(s, s + kAElems, nk * kKc);
    }
    cuda::cp_async_commit();
    const T* sa = stage + (kc % kStages) * kStageElems;
    if (a_res)
      splitk_chunk<T, B_T>(acc, a_res + kc * kKc, kLdh, sa + kAElems, NT);
    else
      splitk_chunk<T, B_T>(acc, sa, kLda, sa + kAElems, NT);
  }
  cuda::cp_async_wait<0>();
}

// Each warp's partial sums into part, then thread t's four sums of row t / 16, columns 4 (t % 16)
// .. + 3, added over the warps in order (the same every run); false where those columns are past S.
__device__ __forceinline__ bool sum_warps(const float (&acc)[8][4], float* part, int NT, int S, float (&v)[4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* mine = part + warp * kRows * kLdr;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    if (j >= NT) break;
    const int col = 8 * j + 2 * (lane % 4);
    *reinterpret_cast<float2*>(mine + (lane / 4) * kLdr + col) = make_float2(acc[j][0], acc[j][1]);
    *reinterpret_cast<float2*>(mine + (lane / 4 + 8) * kLdr + col) = make_float2(acc[j][2], acc[j][3]);
  }
  __syncthreads();  // the stages are free too (the product's last reads were before this)
  const int r = threadIdx.x / 16, c4 = 4 * (threadIdx.x % 16);
  v[0] = v[1] = v[2] = v[3] = 0.f;
  if (c4 >= S) return false;
#pragma unroll
  for (int w = 0; w < 8; ++w) {
    const float4 q = *reinterpret_cast<const float4*>(part + (w * kRows + r) * kLdr + c4);
    v[0] += q.x, v[1] += q.y, v[2] += q.z, v[3] += q.w;
  }
  return true;
}

// Four 16-bit values as 8 bytes, and back.
template <class T>
__device__ __forceinline__ uint2 pack4(const float (&v)[4]) {
  return make_uint2(cuda::pack2(rnd<T>(v[0]), rnd<T>(v[1])), cuda::pack2(rnd<T>(v[2]), rnd<T>(v[3])));
}
template <class T>
__device__ __forceinline__ void unpack4(uint2 u, float (&v)[4]) {
  T t[4];
  memcpy(t, &u, sizeof t);
  for (int k = 0; k < 4; ++k) v[k] = f(t[k]);
}

// Copies the other blocks' slices [16][c' S, c' S + S) of buf (each block's own copy, [kRows][kLdh])
// from their shared memory into this block's, after a cluster barrier that published them. Thread t
// takes the 16-byte piece t % 8 of row (t / 8) % 16 from peers t / 128, + 2, + 4, + 6: its loads
// all issued before the first store (one round trip to the peers).
template <class T>
__device__ __forceinline__ void gather_from_peers(cg::cluster_group& cluster, T* buf, int S) {
  static_assert(kThreads == 256 && kRows == 16, "the pieces below assume 256 threads and 16 rows");
  const int c = int(cluster.block_rank()), s = (threadIdx.x % 8) * 8, r = (threadIdx.x / 8) % 16, g = threadIdx.x / 128;
  if (s < S) {
    uint4 v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int q = g + 2 * i, p = q + (q >= c);
      if (q < kCluster - 1)
        v[i] = *reinterpret_cast<const uint4*>(cluster.map_shared_rank(buf + r * kLdh + p * S + s, p));
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int q = g + 2 * i, p = q + (q >= c);
      if (q < kCluster - 1) *reinterpret_cast<uint4*>(buf + r * kLdh + p * S + s) = v[i];
    }
  }
  __syncthreads();
}

// Thread t's four outputs of hidden layer l in block c's slice: row t / 16, columns col .. col + 3,
// its own while 4 (t % 16) < S. Their bias and the dropout's first counter (a device word inside a
// graph) are loaded before the product.
struct HiddenOut {
  int r, col;
  bool owned;
  uint2 bias;
  uint64_t counter0;
};
template <class T>
__device__ __forceinline__ HiddenOut hidden_out(const MlpArgs& a, int l, int c) {
  const int S = a.width[l] / kCluster;
  HiddenOut o;
  o.r = int(threadIdx.x) / 16;
  o.col = c * S + 4 * int(threadIdx.x % 16);
  o.owned = 4 * int(threadIdx.x % 16) < S;
  o.bias = o.owned ? *reinterpret_cast<const uint2*>(static_cast<const T*>(a.b[l]) + o.col) : make_uint2(0, 0);
  o.counter0 = a.p[l] > 0 ? cuda::first_counter(a.rng[l]) : 0;
  return o;
}

// Bias, ReLU and dropout on an owned output's four sums v, rounding where the separate ops store
// (the product, the biased sum, the output); into out_buf and a.h[l].
template <class T>
__device__ __forceinline__ void hidden_epilogue(const MlpArgs& a, int l, int row0, const HiddenOut& o, float (&v)[4],
                                                T* out_buf) {
  const bool drop = a.p[l] > 0;
  float b[4];
  unpack4<T>(o.bias, b);
  Philox4 ph{};
  const int64_t i = int64_t(row0 + o.r) * a.width[l] + o.col;  // i % 4 == 0: one Philox block for the four
  if (drop) ph = philox(a.rng[l].seed, o.counter0 + uint64_t(i / 4), 0);
  const float scale = drop ? 1.f / (1.f - a.p[l]) : 1.f;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    v[k] = fmaxf(f(rnd<T>(f(rnd<T>(v[k])) + b[k])), 0.f);
    if (drop) v[k] = uniform01(ph.v[k]) >= a.p[l] ? v[k] * scale : 0.f;
  }
  const uint2 out = pack4<T>(v);
  *reinterpret_cast<uint2*>(out_buf + o.r * kLdh + o.col) = out;
  if (row0 + o.r < a.rows) *reinterpret_cast<uint2*>(static_cast<T*>(a.h[l]) + i) = out;
}

// The forward of hidden layer l's slice [16][c S, c S + S) from its input (x streamed, or the
// previous layer's output on chip at in_buf) into out_buf and a.h[l].
template <class T>
__device__ void hidden_forward(const MlpArgs& a, int l, int c, int row0, const T* in_buf, T* out_buf,
                               const Smem<T>& sm) {
  const int K = l ? a.width[l - 1] : a.in, S = a.width[l] / kCluster;
  const T* W = static_cast<const T*>(a.w[l]) + int64_t(c) * S * K;
  const T* x = static_cast<const T*>(a.x) + int64_t(row0) * a.in;
  const int rows_valid = min(kRows, a.rows - row0);
  const HiddenOut o = hidden_out<T>(a, l, c);
  float acc[8][4] = {};
  auto load = [&](T* sa, T* sb, int k0) {
    if (!in_buf) load_tile<kRows, 16, kLda>(sa, x + k0, a.in, rows_valid, min(kKc, K - k0));
    load_tile<64, 16, kLda>(sb, W + k0, K, S, min(kKc, K - k0));  // rows past S: zeros
  };
  splitk_product<T, false>(acc, K, sm.stage, in_buf, S / 8, load);
  float v[4];
  if (sum_warps(acc, sm.part, S / 8, S, v)) hidden_epilogue<T>(a, l, row0, o, v, out_buf);
}

// Layer 0's slice [16][c S, c S + S) from a wide x: block c multiplies x's and W0's columns
// [c Kb, c Kb + Kb) for all N outputs, in passes of 128 (warp w: columns 16 w .. 16 w + 15 of the
// pass, over each chunk's whole k, its even and odd k16 steps in two accumulators: half the chain
// of dependent mma), and writes its float32 partial sums to sm.wide_part; after a cluster barrier
// it adds its S columns' over the 8 blocks in order, then the epilogue. A thread's copies are the
// same 16-byte piece of rows r, r + 16, ... of every chunk: their addresses are computed once.
template <class T>
__device__ void wide_forward(const MlpArgs& a, int c, int row0, T* out_buf, const Smem<T>& sm,
                             cg::cluster_group& cluster) {
  const int N = a.width[0], Kb = a.in / kCluster, chunks = (Kb + kKc - 1) / kKc, steps = chunks * (N / 128);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, pr = threadIdx.x / 16, ps = (threadIdx.x % 16) * 8;
  const T* x = static_cast<const T*>(a.x) + int64_t(row0 + pr) * a.in + int64_t(c) * Kb + ps;
  const T* W = static_cast<const T*>(a.w[0]) + int64_t(pr) * a.in + int64_t(c) * Kb + ps;
  const int64_t w16 = int64_t(16) * a.in, pass = int64_t(128) * a.in;
  const bool row_ok = row0 + pr < a.rows;
  const int dst = pr * kLda + ps;
  const HiddenOut o = hidden_out<T>(a, 0, c);
  int lg = 0, lk = 0;  // the next load's pass and k offset
  auto load = [&](int step) {
    T* s = sm.wide_stage + (step % kStages) * kWideStageElems + dst;
    const bool ok = ps < Kb - lk;  // past Kb: zeros
    const T* w = W + lg * pass + lk;
    cp_async16(s, ok && row_ok ? x + lk : static_cast<const T*>(a.x), ok && row_ok);
#pragma unroll
    for (int q = 0; q < 8; ++q) cp_async16(s + kAElems + 16 * q * kLda, ok ? w + q * w16 : w, ok);
    lk += kKc;
    if (lk >= Kb) lk = 0, ++lg;
  };
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (i < steps) load(i);
    cuda::cp_async_commit();
  }
  float acc[2][2][4] = {};
  int g = 0, kc = 0;  // this step's pass and chunk
  for (int i = 0; i < steps; ++i) {
    cuda::cp_async_wait<kStages - 2>();
    __syncthreads();  // step i is in for every thread; step i - 1's buffer is free again
    if (i + kStages - 1 < steps) load(i + kStages - 1);
    cuda::cp_async_commit();
    const T* sa = sm.wide_stage + (i % kStages) * kWideStageElems;
    const T* sb = sa + kAElems + 16 * warp * kLda;
#pragma unroll
    for (int kk = 0; kk < kKc; kk += 16) {
      uint32_t af[4], bf[4];
      cuda::ldmatrix<4>(af, sa + (lane % 16) * kLda + kk + 8 * (lane / 16));
      cuda::ldmatrix<4>(bf, sb + (lane % 8 + 8 * (lane / 16)) * kLda + kk + 8 * ((lane / 8) % 2));
      cuda::mma16816(acc[(kk / 16) % 2][0], af, bf[0], bf[1], T{});
      cuda::mma16816(acc[(kk / 16) % 2][1], af, bf[2], bf[3], T{});
    }
    if (++kc == chunks) {  // the pass's columns are done
      float* p = sm.wide_part + (lane / 4) * kLdp + 128 * g + 16 * warp + 2 * (lane % 4);
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        float* e = acc[0][j];
        const float* d = acc[1][j];
        *reinterpret_cast<float2*>(p + 8 * j) = make_float2(e[0] + d[0], e[1] + d[1]);
        *reinterpret_cast<float2*>(p + 8 * kLdp + 8 * j) = make_float2(e[2] + d[2], e[3] + d[3]);
      }
      for (auto& h : acc)
        for (auto& t : h) t[0] = t[1] = t[2] = t[3] = 0.f;
      kc = 0, ++g;
    }
  }
  cuda::cp_async_wait<0>();
  cluster.sync();  // every block's partial sums are written
  if (!o.owned) return;
  float4 q[kCluster];  // all eight loads issued before the first add
#pragma unroll
  for (int p = 0; p < kCluster; ++p)
    q[p] = *reinterpret_cast<const float4*>(cluster.map_shared_rank(sm.wide_part + o.r * kLdp + o.col, p));
  float v[4] = {};
#pragma unroll
  for (int p = 0; p < kCluster; ++p) v[0] += q[p].x, v[1] += q[p].y, v[2] += q[p].z, v[3] += q[p].w;
  hidden_epilogue<T>(a, 0, row0, o, v, out_buf);
}

// Stages the head's weights [NH][K] (NH <= 16) into wh with cp.async, a group of its own that the
// first product's waits cover; K is a multiple of 128.
template <class T>
__device__ __forceinline__ void stage_head(const MlpArgs& a, T* wh) {
  const int L = a.layers - 1, K = a.width[L - 1], NH = a.width[L], per_row = K / 8;
  const T* W = static_cast<const T*>(a.w[L]);
  for (int i = threadIdx.x; i < NH * per_row; i += kThreads) {
    const int n = i / per_row, k = (i % per_row) * 8;
    cp_async16(wh + n * kLdh + k, W + int64_t(n) * K + k, true);
  }
  cuda::cp_async_commit();
}

// The head on rows 2 c and 2 c + 1 of the cluster's: warp w takes row 2 c + w / 4 over a quarter of
// k (lanes over pairs), reduced across the warp (butterfly), then the quarters added in order.
template <class T>
__device__ void head_forward(const MlpArgs& a, int c, int row0, const T* in_buf, const Smem<T>& sm) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, L = a.layers - 1;
  const int K = a.width[L - 1], NH = a.width[L], r = 2 * c + warp / 4, k1 = (warp % 4 + 1) * (K / 4);
  const int t = int(threadIdx.x), rr = t / 16, on = t % 16;  // thread t < 32: output on of row 2 c + rr
  const float bias = t < 32 && on < NH ? f(static_cast<const T*>(a.b[L])[on]) : 0.f;  // loaded early
  float acc[16] = {};
  for (int k = (warp % 4) * (K / 4) + 2 * lane; k < k1; k += 64) {
    const float h0 = f(in_buf[r * kLdh + k]), h1 = f(in_buf[r * kLdh + k + 1]);
#pragma unroll
    for (int n = 0; n < 16; ++n)
      if (n < NH) acc[n] += h0 * f(sm.wh[n * kLdh + k]) + h1 * f(sm.wh[n * kLdh + k + 1]);
  }
#pragma unroll
  for (int n = 0; n < 16; ++n) acc[n] = cuda::warp_sum(acc[n]);
  if (lane < 16) {
    float v = 0.f;
#pragma unroll
    for (int n = 0; n < 16; ++n)
      if (n == lane) v = acc[n];
    sm.part[warp * 16 + lane] = v;
  }
  __syncthreads();
  if (t < 32 && on < NH && row0 + 2 * c + rr < a.rows) {
    const float* q = sm.part + 4 * rr * 16 + on;
    const float v = q[0] + q[16] + q[32] + q[48];
    static_cast<T*>(a.y)[int64_t(row0 + 2 * c + rr) * NH + on] = rnd<T>(v + bias);
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads, 1) mlp_forward_kernel(MlpArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char smem[];
  const Smem<T> sm(smem);
  cg::cluster_group cluster = cg::this_cluster();
  const int c = int(cluster.block_rank()), row0 = int(blockIdx.x / kCluster) * kRows;
  stage_head(a, sm.wh);  // in flight during the first layer
  for (int l = 0; l < a.layers - 1; ++l) {
    if (l == 0 && a.in > kMlpStreamedInMax)
      wide_forward<T>(a, c, row0, sm.layer(0), sm, cluster);
    else
      hidden_forward<T>(a, l, c, row0, l ? sm.layer(l - 1) : nullptr, sm.layer(l), sm);
    cluster.sync();  // every slice of layer l is written (and every peer is done reading layer l - 2's)
    gather_from_peers(cluster, sm.layer(l), a.width[l] / kCluster);
  }
  head_forward<T>(a, c, row0, sm.layer(a.layers - 2), sm);
  cluster.sync();  // no block leaves while a peer may still read its shared memory
#endif
}

// dz of the last hidden layer's slice: gy [16][NH] times the head's weights [NH][c S, c S + S),
// masked by the saved output; into out_buf and a.dz.
template <class T>
__device__ void head_backward(const MlpArgs& a, int c, int row0, T* out_buf, const Smem<T>& sm) {
  const int L = a.layers - 1, NH = a.width[L], N = a.width[L - 1], S = N / kCluster, t = int(threadIdx.x);
  float* gys = sm.part;              // [16][16]
  float* ws = sm.part + kRows * 16;  // [16][64]
  const T* gy = static_cast<const T*>(a.gy);
  const T* W = static_cast<const T*>(a.w[L]);
  const int r = t / 16, c4 = 4 * (t % 16), col = c * S + c4;
  const bool mine = c4 < S && row0 + r < a.rows;
  const int64_t i = int64_t(row0 + r) * N + col;
  const uint2 y = mine ? *reinterpret_cast<const uint2*>(static_cast<const T*>(a.h[L - 1]) + i) : make_uint2(0, 0);
  gys[t] = t % 16 < NH && row0 + t / 16 < a.rows ? f(gy[int64_t(row0 + t / 16) * NH + t % 16]) : 0.f;
  float wv[16 * 64 / kThreads];  // every load issued before the first store
#pragma unroll
  for (int q = 0; q < 16 * 64 / kThreads; ++q) {
    const int e = t + q * kThreads;
    wv[q] = e / 64 < NH && e % 64 < S ? f(W[int64_t(e / 64) * N + c * S + e % 64]) : 0.f;
  }
#pragma unroll
  for (int q = 0; q < 16 * 64 / kThreads; ++q) ws[t + q * kThreads] = wv[q];
  __syncthreads();
  if (c4 >= S) return;
  float g[4] = {}, yv[4];
  for (int n = 0; n < NH; ++n)
#pragma unroll
    for (int k = 0; k < 4; ++k) g[k] += gys[r * 16 + n] * ws[n * 64 + c4 + k];
  unpack4<T>(y, yv);
  const float scale = a.p[L - 1] > 0 ? 1.f / (1.f - a.p[L - 1]) : 1.f;
#pragma unroll
  for (int k = 0; k < 4; ++k) g[k] = yv[k] > 0.f ? f(rnd<T>(g[k])) * scale : 0.f;
  const uint2 d = pack4<T>(g);
  *reinterpret_cast<uint2*>(out_buf + r * kLdh + col) = d;
  if (mine) *reinterpret_cast<uint2*>(static_cast<T*>(a.dz[L - 1]) + i) = d;
}

// dz of hidden layer l's slice: dz_{l+1} (all of it on chip at in_buf) times W_{l+1}'s columns
// [c S, c S + S), masked by the saved output; into out_buf and a.dz[l].
template <class T>
__device__ void hidden_backward(const MlpArgs& a, int l, int c, int row0, const T* in_buf, T* out_buf,
                                const Smem<T>& sm) {
  const int K = a.width[l + 1], N = a.width[l], S = N / kCluster;
  const T* W = static_cast<const T*>(a.w[l + 1]) + c * S;  // [K][N]: rows k, this block's columns
  const int r = threadIdx.x / 16, col = c * S + 4 * (threadIdx.x % 16);
  const bool mine = 4 * int(threadIdx.x % 16) < S && row0 + r < a.rows;
  const int64_t i = int64_t(row0 + r) * N + col;
  const uint2 y = mine ? *reinterpret_cast<const uint2*>(static_cast<const T*>(a.h[l]) + i) : make_uint2(0, 0);
  float acc[8][4] = {};
  auto load = [&](T*, T* sb, int k0) { load_tile<kKc, 8, kLdbT>(sb, W + int64_t(k0) * N, N, K - k0, S); };
  splitk_product<T, true>(acc, K, sm.stage, in_buf, S / 8, load);
  float v[4], yv[4];
  if (!sum_warps(acc, sm.part, S / 8, S, v)) return;
  unpack4<T>(y, yv);
  const float scale = a.p[l] > 0 ? 1.f / (1.f - a.p[l]) : 1.f;
#pragma unroll
  for (int k = 0; k < 4; ++k) v[k] = yv[k] > 0.f ? f(rnd<T>(v[k])) * scale : 0.f;
  const uint2 d = pack4<T>(v);
  *reinterpret_cast<uint2*>(out_buf + r * kLdh + col) = d;
  if (mine) *reinterpret_cast<uint2*>(static_cast<T*>(a.dz[l]) + i) = d;
}

template <class T>
__global__ void __launch_bounds__(kThreads, 1) mlp_backward_data_kernel(MlpArgs a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(16) unsigned char smem[];
  const Smem<T> sm(smem);
  cg::cluster_group cluster = cg::this_cluster();
  const int c = int(cluster.block_rank()), row0 = int(blockIdx.x / kCluster) * kRows, H = a.layers - 1;
  head_backward<T>(a, c, row0, sm.layer(H - 1), sm);
  for (int l = H - 2; l >= 0; --l) {
    cluster.sync();  // every slice of dz_{l+1} is written (and every peer is done reading dz_{l+2}'s)
    gather_from_peers(cluster, sm.layer(l + 1), a.width[l + 1] / kCluster);
    hidden_backward<T>(a, l, c, row0, sm.layer(l + 1), sm.layer(l), sm);
  }
  cluster.sync();  // no block leaves while a peer may still read its shared memory
#endif
}

// ---- host side ----------------------------------------------------------------------------------

template <class T>
void set_smem_limits() {
  static std::once_flag once;
  std::call_once(once, [] {
    LOUPE_CUDA_CHECK(
        cudaFuncSetAttribute(mlp_forward_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kWideSmem)));
    LOUPE_CUDA_CHECK(cudaFuncSetAttribute(mlp_backward_data_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(kClusterSmem)));
    LOUPE_CUDA_CHECK(
        cudaFuncSetAttribute(mlp_weight_grad_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kWeightSmem)));
  });
}

// The forward's shared memory: more for a wide first layer's stages.
size_t mlp_forward_smem(const MlpArgs& a) { return a.in > kMlpStreamedInMax ? kWideSmem : kClusterSmem; }

// How many clusters of the two cluster kernels the device holds at once (8 SMs with their shared
// memory each; 0: none), asked once per dtype and forward size.
template <class T>
int resident_clusters(size_t fwd_smem) {
  auto count = [](size_t fwd) {
    if (cuda_runtime()->compute_capability() < 90) return 0;  // no clusters (nor these kernels' code)
    set_smem_limits<T>();
    int fewest = 1 << 30;
    const std::pair<void (*)(MlpArgs), size_t> kernels[] = {{mlp_forward_kernel<T>, fwd},
                                                            {mlp_backward_data_kernel<T>, kClusterSmem}};
    for (auto [kernel, smem] : kernels) {
      cudaLaunchAttribute attrs[1];
      const cudaLaunchConfig_t cfg = cuda::launch_config(dim3(kCluster), dim3(kThreads), smem, nullptr, kCluster, attrs);
      int n = 0;
      if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
        cudaGetLastError();  // clear it: the stack runs unfused
        n = 0;
      }
      fewest = std::min(fewest, n);
    }
    return fewest;
  };
  static const int streamed = count(kClusterSmem), wide = count(kWideSmem);
  return fwd_smem == kWideSmem ? wide : streamed;
}

// The batch must fit in one wave of clusters: a second wave runs after the first (an H200 holds
// 15 clusters, 240 rows), where cuBLAS's GEMMs over the whole GPU do better.
bool fits(const ExecContext&, const MlpArgs& a) {
  const int clusters = (a.rows + kRows - 1) / kRows;
  const size_t smem = mlp_forward_smem(a);
  return clusters <= (a.dtype == DType::f16 ? resident_clusters<__half>(smem) : resident_clusters<__nv_bfloat16>(smem));
}

dim3 cluster_grid(const MlpArgs& a) { return dim3(unsigned((a.rows + kRows - 1) / kRows * kCluster)); }

void mlp_forward(const ExecContext& ctx, const MlpArgs& a) {
  const cudaStream_t s = cuda::stream(ctx);
  cuda::dispatch_float(a.dtype, "mlp", [&](auto tv) {
    using T = decltype(tv);
    if constexpr (!std::is_same_v<T, float>) {
      set_smem_limits<T>();
      cuda::launch_clustered(mlp_forward_kernel<T>, kCluster, cluster_grid(a), dim3(kThreads), mlp_forward_smem(a), s, a);
    }
  });
}

void mlp_backward(const ExecContext& ctx, const MlpArgs& a) {
  const cudaStream_t s = cuda::stream(ctx);
  WeightTiles t{};
  for (int l = 0; l < a.layers; ++l) {
    const int K = l ? a.width[l - 1] : a.in;
    t.across[l] = (K + 63) / 64;
    t.first[l + 1] = t.first[l] + (a.width[l] + 63) / 64 * t.across[l];
  }
  t.across[a.layers] = (a.in + 63) / 64;  // the input's gradient [rows][in], if wanted
  t.first[a.layers + 1] = t.first[a.layers] + (a.gx ? (a.rows + 63) / 64 * t.across[a.layers] : 0);
  for (int l = a.layers + 2; l <= kMlpMaxLayers + 1; ++l) t.first[l] = t.first[a.layers + 1];
  cuda::dispatch_float(a.dtype, "mlp", [&](auto tv) {
    using T = decltype(tv);
    if constexpr (!std::is_same_v<T, float>) {
      set_smem_limits<T>();
      cuda::launch_clustered(mlp_backward_data_kernel<T>, kCluster, cluster_grid(a), dim3(kThreads), kClusterSmem, s,
                             a);
      cuda::launch(mlp_weight_grad_kernel<T>, dim3(unsigned(t.first[a.layers + 1])), dim3(kThreads), kWeightSmem, s, a,
                   t);
    }
  });
}

const MlpKernels table{fits, mlp_forward, mlp_backward};
const RegisterBackend<MlpKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
