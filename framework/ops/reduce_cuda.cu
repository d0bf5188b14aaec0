#include <algorithm>
#include <type_traits>

#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/reduce.h"

namespace loupe {
namespace {

constexpr int kBlock = 256;

// Inputs X and outputs Y are float, __half or __nv_bfloat16; every sum accumulates in float, and
// partial sums between passes are float.

// One block per row of length n (inner == 1). Rows can be split across `splits` blocks whose
// partial sums land in `partial` (for one long row such as a full reduction).
template <class X, class Y>
__global__ void sum_rows_kernel(Y* out, const X* x, int64_t n, float scale, int splits) {
  int64_t row = blockIdx.x / splits;
  int part = blockIdx.x % splits;
  int64_t chunk = (n + splits - 1) / splits;
  int64_t begin = part * chunk, end = min(n, begin + chunk);
  float acc = 0.f;
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) acc += cuda::to_float(x[row * n + j]);
  acc = cuda::block_sum(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = cuda::from_float<Y>(acc * scale);
}

// inner > 1: a 32 x 8 block owns 32 adjacent columns (coalesced across inner) of one outer slice
// and a range of n split across gridDim.z blocks, so a short, wide reduction (a bias gradient:
// [1024, 128] summed over the batch) still fills the GPU instead of running 128 long serial loops.
// The 8 rows of partial sums meet in shared memory; with splits > 1 each block writes a partial
// that sum_splits_kernel adds up, in a fixed order (deterministic: no atomics).
constexpr int kTileX = 32, kTileY = 8;
template <class X, class Y>
__global__ void sum_strided_kernel(Y* out, const X* x, int64_t outer, int64_t n, int64_t inner, float scale,
                                   int64_t chunk) {
  __shared__ float tile[kTileY][kTileX + 1];
  int64_t col = int64_t(blockIdx.x) * kTileX + threadIdx.x;
  int64_t begin = int64_t(blockIdx.z) * chunk, end = min(n, begin + chunk);
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    float acc = 0.f;
    if (col < inner)
      for (int64_t j = begin + threadIdx.y; j < end; j += kTileY) acc += cuda::to_float(x[(o * n + j) * inner + col]);
    tile[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < inner) {
      float t = 0.f;
      for (int r = 0; r < kTileY; ++r) t += tile[r][threadIdx.x];
      out[(int64_t(blockIdx.z) * outer + o) * inner + col] = cuda::from_float<Y>(t * scale);
    }
    __syncthreads();
  }
}

// out[k] = sum over s of partial[s][k] (splits rows of m).
template <class Y>
__global__ void sum_splits_kernel(Y* out, const float* partial, int64_t m, int splits) {
  LOUPE_KERNEL_LOOP(k, m) {
    float acc = 0.f;
    for (int s = 0; s < splits; ++s) acc += partial[s * m + k];
    out[k] = cuda::from_float<Y>(acc);
  }
}

// Enough blocks in flight to fill an H100/H200 (132 SMs) a few times over.
constexpr int64_t kTargetBlocks = 4 * 132;

template <class X, class Y>
void sum_rows(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, double scale, cudaStream_t stream) {
  // Split long rows so that a full reduction still fills the GPU; then reduce the partials.
  int splits = outer >= 132 ? 1 : int(std::min<int64_t>(256, (n + 8191) / 8192));
  if (splits <= 1) {
    cuda::launch(sum_rows_kernel<X, Y>, unsigned(outer), kBlock, 0, stream, out.data<Y>(), x.data<X>(), n, float(scale),
                 1);
  } else {
    Tensor partial = empty(Shape{outer * splits}, DType::f32, x.device());
    cuda::launch(sum_rows_kernel<X, float>, unsigned(outer * splits), kBlock, 0, stream, partial.data<float>(),
                 x.data<X>(), n, 1.f, splits);
    cuda::launch(sum_rows_kernel<float, Y>, unsigned(outer), kBlock, 0, stream, out.data<Y>(), partial.data<float>(),
                 splits, float(scale), 1);
  }
}

template <class X, class Y>
void sum_dim_t(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, double scale,
               cudaStream_t stream) {
  if (inner == 1) {
    sum_rows<X, Y>(out, x, outer, n, scale, stream);
  } else {
    int64_t gx = (inner + kTileX - 1) / kTileX, gy = std::min<int64_t>(outer, 65535);
    // Split n only as far as needed to fill the GPU, and never below 64 rows per block.
    int64_t splits = std::clamp<int64_t>(kTargetBlocks / (gx * gy), 1, std::max<int64_t>(1, n / 64));
    splits = std::min<int64_t>(splits, 256);
    int64_t chunk = (n + splits - 1) / splits;
    splits = (n + chunk - 1) / chunk;
    dim3 grid{unsigned(gx), unsigned(gy), unsigned(splits)}, block{kTileX, kTileY};
    if (splits == 1) {
      cuda::launch(sum_strided_kernel<X, Y>, grid, block, 0, stream, out.data<Y>(), x.data<X>(), outer, n, inner,
                   float(scale), chunk);
    } else {
      Tensor partial = empty(Shape{splits * outer * inner}, DType::f32, x.device());
      cuda::launch(sum_strided_kernel<X, float>, grid, block, 0, stream, partial.data<float>(), x.data<X>(), outer, n,
                   inner, float(scale), chunk);
      cuda::launch(sum_splits_kernel<Y>, cuda::blocks_for(outer * inner), cuda::kThreads, 0, stream, out.data<Y>(),
                   partial.data<float>(), outer * inner, int(splits));
    }
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

// out has x's type, or float32 (sum_keep_middle's float intermediate, and its sum).
void launch_sum_dim(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, double scale,
                    cudaStream_t stream) {
  cuda::require_float(x, "sum");
  cuda::require_float(out, "sum");
  LOUPE_CHECK(out.dtype() == x.dtype() || out.dtype() == DType::f32 || x.dtype() == DType::f32, "sum on CUDA: ",
              dtype_name(x.dtype()), " into ", dtype_name(out.dtype()), " is not supported");
  cuda::dispatch_float(x.dtype(), "sum", [&](auto xtag) {
    cuda::dispatch_float(out.dtype(), "sum", [&](auto ytag) {
      using X = decltype(xtag);
      using Y = decltype(ytag);
      if constexpr (std::is_same_v<X, Y> || std::is_same_v<X, float> || std::is_same_v<Y, float>)
        sum_dim_t<X, Y>(out, x, outer, n, inner, scale, stream);
    });
  });
}

void sum_dim(const ExecContext& ctx, const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
             double scale) {
  const cudaStream_t s = cuda::stream(ctx);
  launch_sum_dim(out, x, outer, n, inner, scale, s);
}

// out[c] = scale * sum of x[o][c][k] over o and k (x [outer, C, inner], inner > 1): grid (C, splits),
// each block walks whole inner runs (coalesced) of a range of o, two independent loads per thread
// per iteration (the loop is latency-bound otherwise); one partial per block, then the partials of
// each channel are summed by sum_rows_kernel in a fixed order (deterministic: no atomics).
template <class X>
__global__ void sum_middle_kernel(float* partial, const X* x, uint32_t outer, uint32_t C, uint32_t inner,
                                  uint32_t chunk) {
  uint32_t c = blockIdx.x, split = blockIdx.y;
  uint32_t begin = split * chunk, end = min(outer, begin + chunk);
  uint32_t count = end > begin ? (end - begin) * inner : 0;
  const X* base = x + (int64_t(begin) * C + c) * inner;
  int64_t row = int64_t(C) * inner;  // from o to o + 1
  float a0 = 0.f, a1 = 0.f;
  uint32_t t = threadIdx.x;
  for (; t + blockDim.x < count; t += 2 * blockDim.x) {
    uint32_t u = t + blockDim.x;
    a0 += cuda::to_float(base[(t / inner) * row + t % inner]);
    a1 += cuda::to_float(base[(u / inner) * row + u % inner]);
  }
  if (t < count) a0 += cuda::to_float(base[(t / inner) * row + t % inner]);
  float acc = cuda::block_sum(a0 + a1);
  if (threadIdx.x == 0) partial[int64_t(c) * gridDim.y + split] = acc;
}

void sum_keep_middle(const ExecContext& ctx, const Tensor& out, const Tensor& x, int64_t outer, int64_t C,
                     int64_t inner, double scale) {
  cuda::require_float(x, "sum");
  LOUPE_CHECK(out.dtype() == x.dtype(), "sum on CUDA: ", dtype_name(x.dtype()), " into ", dtype_name(out.dtype()),
              " is not supported");
  const cudaStream_t s = cuda::stream(ctx);
  if (inner == 1 || outer * inner >= (int64_t(1) << 31)) {
    // [outer, C] summed over outer is sum_dim's strided case; very large slices take two passes.
    if (inner == 1) return launch_sum_dim(out, x, 1, outer, C, scale, s);
    Tensor t = empty(Shape{outer, C}, DType::f32, x.device());
    launch_sum_dim(t, x, outer * C, inner, 1, 1.0, s);
    return launch_sum_dim(out, t, 1, outer, C, scale, s);
  }
  // About 16 blocks per SM, each with at least 2048 elements.
  int64_t splits = std::clamp<int64_t>(16 * 132 / C, 1, outer);
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, outer * inner / 2048));
  int64_t chunk = (outer + splits - 1) / splits;
  splits = (outer + chunk - 1) / chunk;
  Tensor partial = empty(Shape{C * splits}, DType::f32, x.device());
  cuda::dispatch_float(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    cuda::launch(sum_middle_kernel<T>, dim3(unsigned(C), unsigned(splits)), kBlock, 0, s, partial.data<float>(),
                 x.data<T>(), uint32_t(outer), uint32_t(C), uint32_t(inner), uint32_t(chunk));
    cuda::launch(sum_rows_kernel<float, T>, unsigned(C), 32, 0, s, out.data<T>(), partial.data<float>(), splits,
                 float(scale), 1);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

template <class T>
__global__ void argmax_kernel(int32_t* out, const T* x, int64_t rows, int64_t cols) {
  LOUPE_KERNEL_LOOP(r, rows) {
    const T* p = x + r * cols;
    int64_t best = 0;
    for (int64_t c = 1; c < cols; ++c)
      if (cuda::to_float(p[c]) > cuda::to_float(p[best])) best = c;
    out[r] = int32_t(best);
  }
}

void argmax_rows(const ExecContext& ctx, const Tensor& out, const Tensor& x, int64_t rows, int64_t cols) {
  cuda::require_float(x, "argmax");
  const cudaStream_t s = cuda::stream(ctx);
  cuda::dispatch_float(x.dtype(), "argmax", [&](auto tag) {
    using T = decltype(tag);
    cuda::launch(argmax_kernel<T>, cuda::blocks_for(rows), cuda::kThreads, 0, s, out.data<int32_t>(), x.data<T>(), rows,
                 cols);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

const ReduceKernels table{sum_dim, sum_keep_middle, argmax_rows};
const RegisterBackend<ReduceKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
