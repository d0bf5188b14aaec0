#include <algorithm>

#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/reduce.h"

namespace loupe {
namespace {

constexpr int kBlock = 256;

// One block per row of length n (inner == 1). Rows can be split across `splits` blocks whose
// partial sums land in `partial` (for one long row such as a full reduction).
__global__ void sum_rows_kernel(float* out, const float* x, int64_t n, float scale, int splits) {
  int64_t row = blockIdx.x / splits;
  int part = blockIdx.x % splits;
  int64_t chunk = (n + splits - 1) / splits;
  int64_t begin = part * chunk, end = min(n, begin + chunk);
  float acc = 0.f;
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) acc += x[row * n + j];
  acc = cuda::block_sum(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = acc * scale;
}

// inner > 1: a 32 x 8 block owns 32 adjacent columns (coalesced across inner) of one outer slice
// and a range of n split across gridDim.z blocks, so a short, wide reduction (a bias gradient:
// [1024, 128] summed over the batch) still fills the GPU instead of running 128 long serial loops.
// The 8 rows of partial sums meet in shared memory; with splits > 1 each block writes a partial
// that sum_splits_kernel adds up, in a fixed order (deterministic: no atomics).
constexpr int kTileX = 32, kTileY = 8;
__global__ void sum_strided_kernel(float* out, const float* x, int64_t outer, int64_t n, int64_t inner, float scale,
                                   int64_t chunk) {
  __shared__ float tile[kTileY][kTileX + 1];
  int64_t col = int64_t(blockIdx.x) * kTileX + threadIdx.x;
  int64_t begin = int64_t(blockIdx.z) * chunk, end = min(n, begin + chunk);
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    float acc = 0.f;
    if (col < inner)
      for (int64_t j = begin + threadIdx.y; j < end; j += kTileY) acc += x[(o * n + j) * inner + col];
    tile[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < inner) {
      float t = 0.f;
      for (int r = 0; r < kTileY; ++r) t += tile[r][threadIdx.x];
      out[(int64_t(blockIdx.z) * outer + o) * inner + col] = t * scale;
    }
    __syncthreads();
  }
}

// out[k] = sum over s of partial[s][k] (splits rows of m).
__global__ void sum_splits_kernel(float* out, const float* partial, int64_t m, int splits) {
  LOUPE_KERNEL_LOOP(k, m) {
    float acc = 0.f;
    for (int s = 0; s < splits; ++s) acc += partial[s * m + k];
    out[k] = acc;
  }
}

// Enough blocks in flight to fill an H100/H200 (132 SMs) a few times over.
constexpr int64_t kTargetBlocks = 4 * 132;

void sum_rows(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, double scale) {
  auto s = cuda::stream();
  // Split long rows so that a full reduction still fills the GPU; then reduce the partials.
  int splits = outer >= 132 ? 1 : int(std::min<int64_t>(256, (n + 8191) / 8192));
  if (splits <= 1) {
    sum_rows_kernel<<<unsigned(outer), kBlock, 0, s>>>(out.data<float>(), x.data<float>(), n, float(scale), 1);
  } else {
    Tensor partial = empty(Shape{outer * splits}, DType::f32, x.device());
    sum_rows_kernel<<<unsigned(outer * splits), kBlock, 0, s>>>(partial.data<float>(), x.data<float>(), n, 1.f, splits);
    sum_rows_kernel<<<unsigned(outer), kBlock, 0, s>>>(out.data<float>(), partial.data<float>(), splits, float(scale), 1);
  }
}

void sum_dim(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, double scale) {
  cuda::require_f32(x, "sum");
  auto s = cuda::stream();
  if (inner == 1) {
    sum_rows(out, x, outer, n, scale);
  } else {
    int64_t gx = (inner + kTileX - 1) / kTileX, gy = std::min<int64_t>(outer, 65535);
    // Split n only as far as needed to fill the GPU, and never below 64 rows per block.
    int64_t splits = std::clamp<int64_t>(kTargetBlocks / (gx * gy), 1, std::max<int64_t>(1, n / 64));
    splits = std::min<int64_t>(splits, 256);
    int64_t chunk = (n + splits - 1) / splits;
    splits = (n + chunk - 1) / chunk;
    dim3 grid{unsigned(gx), unsigned(gy), unsigned(splits)}, block{kTileX, kTileY};
    if (splits == 1) {
      sum_strided_kernel<<<grid, block, 0, s>>>(out.data<float>(), x.data<float>(), outer, n, inner, float(scale), chunk);
    } else {
      Tensor partial = empty(Shape{splits * outer * inner}, DType::f32, x.device());
      sum_strided_kernel<<<grid, block, 0, s>>>(partial.data<float>(), x.data<float>(), outer, n, inner, float(scale),
                                                chunk);
      sum_splits_kernel<<<cuda::blocks_for(outer * inner), cuda::kThreads, 0, s>>>(
          out.data<float>(), partial.data<float>(), outer * inner, int(splits));
    }
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

// out[c] = scale * sum of x[o][c][k] over o and k (x [outer, C, inner], inner > 1): grid (C, splits),
// each block walks whole inner runs (coalesced) of a range of o, two independent loads per thread
// per iteration (the loop is latency-bound otherwise); one partial per block, then the partials of
// each channel are summed by sum_rows_kernel in a fixed order (deterministic: no atomics).
__global__ void sum_middle_kernel(float* partial, const float* x, uint32_t outer, uint32_t C, uint32_t inner,
                                  uint32_t chunk) {
  uint32_t c = blockIdx.x, split = blockIdx.y;
  uint32_t begin = split * chunk, end = min(outer, begin + chunk);
  uint32_t count = end > begin ? (end - begin) * inner : 0;
  const float* base = x + (int64_t(begin) * C + c) * inner;
  int64_t row = int64_t(C) * inner;  // from o to o + 1
  float a0 = 0.f, a1 = 0.f;
  uint32_t t = threadIdx.x;
  for (; t + blockDim.x < count; t += 2 * blockDim.x) {
    uint32_t u = t + blockDim.x;
    a0 += base[(t / inner) * row + t % inner];
    a1 += base[(u / inner) * row + u % inner];
  }
  if (t < count) a0 += base[(t / inner) * row + t % inner];
  float acc = cuda::block_sum(a0 + a1);
  if (threadIdx.x == 0) partial[int64_t(c) * gridDim.y + split] = acc;
}

void sum_keep_middle(const Tensor& out, const Tensor& x, int64_t outer, int64_t C, int64_t inner, double scale) {
  cuda::require_f32(x, "sum");
  if (inner == 1 || outer * inner >= (int64_t(1) << 31)) {
    // [outer, C] summed over outer is sum_dim's strided case; very large slices take two passes.
    if (inner == 1) return sum_dim(out, x, 1, outer, C, scale);
    Tensor t = empty(Shape{outer, C}, DType::f32, x.device());
    sum_dim(t, x, outer * C, inner, 1, 1.0);
    return sum_dim(out, t, 1, outer, C, scale);
  }
  // About 16 blocks per SM, each with at least 2048 elements.
  int64_t splits = std::clamp<int64_t>(16 * 132 / C, 1, outer);
  splits = std::min<int64_t>(splits, std::max<int64_t>(1, outer * inner / 2048));
  int64_t chunk = (outer + splits - 1) / splits;
  splits = (outer + chunk - 1) / chunk;
  Tensor partial = empty(Shape{C * splits}, DType::f32, x.device());
  auto s = cuda::stream();
  sum_middle_kernel<<<dim3(unsigned(C), unsigned(splits)), kBlock, 0, s>>>(
      partial.data<float>(), x.data<float>(), uint32_t(outer), uint32_t(C), uint32_t(inner), uint32_t(chunk));
  sum_rows_kernel<<<unsigned(C), 32, 0, s>>>(out.data<float>(), partial.data<float>(), splits, float(scale), 1);
  LOUPE_CUDA_LAUNCH_CHECK();
}

__global__ void argmax_kernel(int32_t* out, const float* x, int64_t rows, int64_t cols) {
  LOUPE_KERNEL_LOOP(r, rows) {
    const float* p = x + r * cols;
    int64_t best = 0;
    for (int64_t c = 1; c < cols; ++c)
      if (p[c] > p[best]) best = c;
    out[r] = int32_t(best);
  }
}

void argmax_rows(const Tensor& out, const Tensor& x, int64_t rows, int64_t cols) {
  cuda::require_f32(x, "argmax");
  argmax_kernel<<<cuda::blocks_for(rows), cuda::kThreads, 0, cuda::stream()>>>(out.data<int32_t>(), x.data<float>(),
                                                                              rows, cols);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const ReduceKernels table{sum_dim, sum_keep_middle, argmax_rows};
const RegisterBackend<ReduceKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
