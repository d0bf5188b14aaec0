// The convolution's kernels outside cuDNN (ops/backend/conv_direct.h).
#include <algorithm>

#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "core/knobs.h"
#include "ops/activation.h"
#include "ops/backend/channel_sums.cuh"
#include "ops/backend/conv_direct.h"
#include "ops/linalg.h"

namespace loupe::conv_direct {

// ---- Small filters in 16 bits: im2col + GEMM ----------------------------------------------------

namespace {

constexpr int64_t kGemmMaxK = 16;

}  // namespace

bool nhwc(const Tensor& t) { return t.is_contiguous(MemoryFormat::ChannelsLast); }

bool small_filter(const Tensor& x, const Tensor& w, const Tensor& y) {
  static const bool on = knobs::flag("LOUPE_CONV_GEMM");
  return on && x.dtype() == DType::bf16 && w.size(1) * w.size(2) * w.size(3) <= kGemmMaxK && nhwc(x) && nhwc(w) &&
         nhwc(y);
}

namespace {

// The im2col row: C*R*S values in the filter's KRSC order, zero-padded to a multiple of 8 (16-byte
// rows for tensor cores).
int64_t row_length(const Tensor& w) { return (w.size(1) * w.size(2) * w.size(3) + 7) / 8 * 8; }

struct Im2col {
  int C, H, W, R, S, P, Q, sh, sw, ph, pw, Kc;
};

// cols [N*P*Q, Kc]: row (n, p, q) holds x's window at output (p, q) of image n. A thread makes
// 8 values (one 16-byte store) with 32-bit index arithmetic: the first version, a thread a value
// with 64-bit divisions, was slow enough to cancel the GEMMs' gain (lab/benchmarks.md, "The step
// as one CUDA graph, and fewer kernels").
template <class T>
__global__ void im2col_kernel(T* cols, const T* x, int chunks_total, Im2col g) {
  const int chunks = g.Kc / 8, RSC = g.R * g.S * g.C;
  const T zero = cuda::from_float<T>(0.f);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < chunks_total; i += blockDim.x * gridDim.x) {
    const int row = i / chunks, j = i - row * chunks;
    const int q = row % g.Q, pq = row / g.Q, p = pq % g.P, n = pq / g.P;
    const int h0 = p * g.sh - g.ph, w0 = q * g.sw - g.pw;
    const T* xn = x + int64_t(n) * g.H * g.W * g.C;
    alignas(16) T v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int k = j * 8 + e;
      T val = zero;
      if (k < RSC) {
        const int c = k % g.C, rs = k / g.C, s = rs % g.S, r = rs / g.S, h = h0 + r, w = w0 + s;
        if (h >= 0 && h < g.H && w >= 0 && w < g.W) val = xn[(h * g.W + w) * g.C + c];
      }
      v[e] = val;
    }
    *reinterpret_cast<uint4*>(cols + int64_t(i) * 8) = *reinterpret_cast<const uint4*>(v);
  }
}

// dst [rows, ld_dst] <- src [rows, ld_src], the first `n` columns, zeros after them (to ld_dst).
template <class T>
__global__ void copy_cols_kernel(T* dst, int64_t ld_dst, const T* src, int64_t ld_src, int64_t n, int64_t total) {
  LOUPE_KERNEL_LOOP(i, total) {
    const int64_t r = i / ld_dst, k = i % ld_dst;
    dst[i] = k < n ? src[r * ld_src + k] : cuda::from_float<T>(0.f);
  }
}

Im2col im2col_geometry(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dParams& p) {
  return Im2col{int(x.size(1)), int(x.size(2)), int(x.size(3)), int(w.size(2)), int(w.size(3)), int(y.size(2)),
                int(y.size(3)), p.stride_h, p.stride_w, p.pad_h, p.pad_w, int(row_length(w))};
}

Tensor im2col_matrix(const Tensor& x, const Im2col& g, int64_t rows, cudaStream_t stream) {
  Tensor cols = empty(Shape{rows, g.Kc}, x.dtype(), x.device());
  const int64_t chunks = rows * (g.Kc / 8);
  LOUPE_CHECK(chunks < INT32_MAX, "conv2d: ", rows, " output positions are too many for one im2col");
  cuda::dispatch_float(x.dtype(), "conv2d", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (sizeof(T) == 2)  // 16-bit only (small_filter): 8 values a 16-byte store
      cuda::launch(im2col_kernel<T>, cuda::blocks_for(chunks), cuda::kThreads, 0, stream, cols.data<T>(), x.data<T>(),
                   int(chunks), g);
  });
  LOUPE_CUDA_CHECK(cudaGetLastError());
  return cols;
}

void copy_cols(void* dst, int64_t ld_dst, const void* src, int64_t ld_src, int64_t n, int64_t rows, DType t,
               cudaStream_t stream) {
  const int64_t total = rows * ld_dst;
  cuda::dispatch_float(t, "conv2d", [&](auto tag) {
    using T = decltype(tag);
    cuda::launch(copy_cols_kernel<T>, cuda::blocks_for(total), cuda::kThreads, 0, stream, static_cast<T*>(dst), ld_dst,
                 static_cast<const T*>(src), ld_src, n, total);
  });
  LOUPE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

// y [N*P*Q, K] (NHWC) = cols [N*P*Q, Kc] x w_pad^T, w_pad [K, Kc] the filters with zero columns.
void forward_gemm(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Tensor& w, const Conv2dParams& p,
                  cudaStream_t stream) {
  const Im2col g = im2col_geometry(x, w, y, p);
  const int64_t rows = y.size(0) * y.size(2) * y.size(3), K = w.size(0), RSC = int64_t(g.R) * g.S * g.C;
  Tensor cols = im2col_matrix(x, g, rows, stream);
  Tensor wp = empty(Shape{K, g.Kc}, w.dtype(), w.device());
  copy_cols(wp.data_ptr(), g.Kc, w.data_ptr(), RSC, RSC, K, w.dtype(), stream);
  gemm_raw(ctx, kCUDA, x.dtype(), false, true, rows, K, g.Kc, cols.data_ptr(), g.Kc, wp.data_ptr(), g.Kc, y.data_ptr(), K);
}

// gw [K, RSC] = the first RSC columns of gy^T [K, N*P*Q] x cols [N*P*Q, Kc] (cols made again: a
// few microseconds, against keeping them from the forward).
void filter_gemm(const ExecContext& ctx, const Tensor& gw, const Tensor& x, const Tensor& w, const Tensor& gy,
                 const Conv2dParams& p, cudaStream_t stream) {
  const Im2col g = im2col_geometry(x, w, gy, p);
  const int64_t rows = gy.size(0) * gy.size(2) * gy.size(3), K = w.size(0), RSC = int64_t(g.R) * g.S * g.C;
  Tensor cols = im2col_matrix(x, g, rows, stream);
  Tensor gp = empty(Shape{K, g.Kc}, w.dtype(), w.device());
  gemm_raw(ctx, kCUDA, x.dtype(), true, false, K, g.Kc, rows, gy.data_ptr(), K, cols.data_ptr(), g.Kc, gp.data_ptr(), g.Kc);
  copy_cols(gw.data_ptr(), RSC, gp.data_ptr(), g.Kc, RSC, K, w.dtype(), stream);
}


// ---- A first layer's filter and bias gradients in one pass --------------------------------------
//
// A network's first convolution needs no data gradient, and its 3x3 filter over 1-4 channels is
// a poor fit for cuDNN's filter-gradient kernels (their reduction runs over C*R*S = 27 values
// on tensor cores built for multiples of 16, at a few per cent of the memory bandwidth), while
// bias_act's backward first writes the relu-masked gradient for them to read back. Here one pass
// reads gy and y once: each warp takes an output row, its lane k one output channel, and adds
// z = gy * (y > 0) and z times each of the pixel's 9*C input values (broadcast from a tile of x
// in shared memory) into float32 sums; the blocks' sums go to partial[block][K*9*C + K], and
// cuda::sum_blocks adds them in a fixed order into gw (KRSC) and gb.

namespace {

constexpr int kFirstWarps = 8;     // a block's output rows, one a warp
constexpr int kFirstPixels = 8;    // a warp's pixels in flight: their loads issue together
constexpr int kFirstMaxSmem = 48 << 10;


template <int C>
constexpr int padded_channels() {
  return C == 3 ? 4 : C;  // a tile position is one 4-, 8- or 16-byte shared load
}

template <int CP>
__device__ __forceinline__ void load_channels(float (&v)[CP], const float* t) {
  if constexpr (CP == 4) {
    const float4 a = *reinterpret_cast<const float4*>(t);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  } else if constexpr (CP == 2) {
    const float2 a = *reinterpret_cast<const float2*>(t);
    v[0] = a.x, v[1] = a.y;
  } else {
    v[0] = t[0];
  }
}

template <class T, int C, bool kRelu>
__global__ void __launch_bounds__(kFirstWarps * 32, 3) first_layer_grads(float* partial, const T* x, const T* y,
                                                                       const T* gy, FirstLayer g) {
  constexpr int CP = padded_channels<C>(), J = 9 * C;
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, k = blockIdx.y * 32 + lane;
  const bool mine = k < g.K;
  float acc[J], accb = 0.f;
#pragma unroll
  for (int j = 0; j < J; ++j) acc[j] = 0.f;
  // A warp's pixels come kFirstPixels at a time; the next group's loads are issued before this
  // group's sums, so that they arrive meanwhile (a load waited for at once left the pass bound by
  // the memory's latency, not its bandwidth).
  T gv[kFirstPixels], yv[kFirstPixels];
  auto fetch = [&](int slab, int q0) {
    const int n = slab / g.row_blocks, p = (slab - n * g.row_blocks) * kFirstWarps + warp;
    const bool ok = slab < g.slabs && p < g.P && mine;
    const int64_t o = ((int64_t(n) * g.P + p) * g.Q + q0) * g.K + k;
#pragma unroll
    for (int e = 0; e < kFirstPixels; ++e) {
      const bool in = ok && q0 + e < g.Q;
      gv[e] = in ? gy[o + int64_t(e) * g.K] : cuda::from_float<T>(0.f);
      if constexpr (kRelu) yv[e] = in ? y[o + int64_t(e) * g.K] : cuda::from_float<T>(0.f);
    }
  };
  fetch(blockIdx.x, 0);
  for (int slab = blockIdx.x; slab < g.slabs; slab += gridDim.x) {
    const int n = slab / g.row_blocks, p0 = (slab - n * g.row_blocks) * kFirstWarps;
    const int h0 = p0 * g.sh - g.ph;
    __syncthreads();  // the last slab's tile is read
    for (int i = threadIdx.x; i < g.TH * g.TW * CP; i += blockDim.x) {
      const int c = i % CP, hw = i / CP, tw = hw % g.TW, h = h0 + hw / g.TW, w = tw - g.pw;
      float v = 0.f;
      if (c < C && h >= 0 && h < g.H && w >= 0 && w < g.W) v = cuda::to_float(x[((int64_t(n) * g.H + h) * g.W + w) * C + c]);
      sm[i] = v;
    }
    __syncthreads();
    const bool active = p0 + warp < g.P && mine;
    const float* rows = sm + warp * g.sh * g.TW * CP;
    for (int q0 = 0; q0 < g.Q; q0 += kFirstPixels) {
      float z[kFirstPixels];
#pragma unroll
      for (int e = 0; e < kFirstPixels; ++e) {
        z[e] = cuda::to_float(gv[e]);
        if constexpr (kRelu) z[e] = cuda::to_float(yv[e]) > 0.f ? z[e] : 0.f;
      }
      const bool last = q0 + kFirstPixels >= g.Q;
      fetch(last ? slab + int(gridDim.x) : slab, last ? 0 : q0 + kFirstPixels);
      if (!active) continue;
#pragma unroll
      for (int e = 0; e < kFirstPixels; ++e) {
        if (q0 + e >= g.Q) break;
        accb += z[e];
#pragma unroll
        for (int r = 0; r < 3; ++r)
#pragma unroll
          for (int s = 0; s < 3; ++s) {
            float v[CP];
            load_channels<CP>(v, rows + (r * g.TW + (q0 + e) * g.sw + s) * CP);
#pragma unroll
            for (int c = 0; c < C; ++c) acc[(r * 3 + s) * C + c] = fmaf(z[e], v[c], acc[(r * 3 + s) * C + c]);
          }
      }
    }
  }
  // The warps' sums, then the block's: sm as [J + 1][kFirstWarps][32].
  __syncthreads();
#pragma unroll
  for (int j = 0; j < J; ++j) sm[(j * kFirstWarps + warp) * 32 + lane] = acc[j];
  sm[(J * kFirstWarps + warp) * 32 + lane] = accb;
  __syncthreads();
  const int64_t row = int64_t(blockIdx.x) * g.K * (J + 1);
  for (int i = threadIdx.x; i < (J + 1) * 32; i += blockDim.x) {
    const int j = i / 32, l = i % 32, kk = blockIdx.y * 32 + l;
    if (kk >= g.K) continue;
    float t = 0.f;
    for (int w = 0; w < kFirstWarps; ++w) t += sm[(j * kFirstWarps + w) * 32 + l];
    partial[row + (j < J ? int64_t(kk) * J + j : int64_t(g.K) * J + kk)] = t;
  }
}

// The kernel's shared memory for a problem: the tile, or the warps' sums where larger.
size_t first_layer_smem(const FirstLayer& g, int C) {
  const int CP = C == 3 ? 4 : C;
  return std::max(size_t(g.TH) * g.TW * CP, size_t(9 * C + 1) * kFirstWarps * 32) * sizeof(float);
}

}  // namespace

bool first_layer_fits(const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& gy, int act,
                      const Conv2dParams& p, FirstLayer& g) {
  g.sh = p.stride_h, g.sw = p.stride_w, g.ph = p.pad_h, g.pw = p.pad_w;
  const int64_t C = x.size(1);
  if (C < 1 || C > 4 || w.size(2) != 3 || w.size(3) != 3 || (act >= 0 && act != int(Act::Relu)) || !nhwc(x) ||
      !nhwc(y) || !nhwc(gy) || y.dtype() != x.dtype() || gy.dtype() != x.dtype() || y.numel() >= INT32_MAX ||
      x.numel() >= INT32_MAX)
    return false;
  g.H = int(x.size(2)), g.W = int(x.size(3)), g.P = int(y.size(2)), g.Q = int(y.size(3)), g.K = int(y.size(1));
  g.row_blocks = (g.P + kFirstWarps - 1) / kFirstWarps;
  g.slabs = int(x.size(0)) * g.row_blocks;
  g.TH = (kFirstWarps - 1) * g.sh + 3;
  g.TW = (g.Q - 1) * g.sw + 3;
  return first_layer_smem(g, int(C)) <= size_t(kFirstMaxSmem);
}

void first_layer_run(const ExecContext& ctx, const Tensor& gw, const Tensor& gb, const Tensor& x, const Tensor& y,
                     const Tensor& gy, int act, const FirstLayer& g) {
  static const int sms = [] {
    int dev = 0, n = 0;
    LOUPE_CUDA_CHECK(cudaGetDevice(&dev));
    LOUPE_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
  }();
  const int C = int(x.size(1)), J = 9 * C;
  const cudaStream_t s = cuda::stream(ctx);
  const int64_t sums = int64_t(g.K) * (J + 1);
  Tensor sink = gb.defined() ? Tensor() : empty(Shape{int64_t(g.K)}, x.dtype(), x.device());
  const size_t smem = first_layer_smem(g, C);
  cuda::dispatch_float(x.dtype(), "conv2d backward", [&](auto tag) {
    using T = decltype(tag);
    Tensor partial;
    dim3 grid;
    auto launch = [&](auto kernel) {  // as many blocks as are resident at once, each over several slabs
      int per_sm = 0;
      LOUPE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kFirstWarps * 32, smem));
      grid = dim3(unsigned(std::min(g.slabs, std::max(1, per_sm) * sms)), unsigned((g.K + 31) / 32));
      partial = empty(Shape{int64_t(grid.x) * sums}, DType::f32, x.device());
      cuda::launch(kernel, grid, kFirstWarps * 32, smem, s, partial.data<float>(), x.data<T>(), y.data<T>(),
                   gy.data<T>(), g);
    };
    const bool relu = act == int(Act::Relu);
    switch (C * 2 + (relu ? 1 : 0)) {
      case 2: launch(first_layer_grads<T, 1, false>); break;
      case 3: launch(first_layer_grads<T, 1, true>); break;
      case 4: launch(first_layer_grads<T, 2, false>); break;
      case 5: launch(first_layer_grads<T, 2, true>); break;
      case 6: launch(first_layer_grads<T, 3, false>); break;
      case 7: launch(first_layer_grads<T, 3, true>); break;
      case 8: launch(first_layer_grads<T, 4, false>); break;
      default: launch(first_layer_grads<T, 4, true>); break;
    }
    LOUPE_CUDA_LAUNCH_CHECK();
    cuda::launch(cuda::sum_blocks<T>, unsigned(sums), cuda::kSumThreads, 0, s, gw.data<T>(), partial.data<float>(),
                 int(grid.x), sums, int64_t(g.K) * J, (gb.defined() ? gb : sink).data<T>());
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

}  // namespace loupe::conv_direct
