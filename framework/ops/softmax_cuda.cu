#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/softmax.h"

namespace loupe {
namespace {

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One warp per row.
__global__ void softmax_fwd(bool log, float* y, const float* x, int64_t rows, int64_t cols) {
  int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;
  float m = -INFINITY;
  for (int64_t c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
  m = warp_max(m);
  float z = 0.f;
  for (int64_t c = lane; c < cols; c += 32) z += expf(xr[c] - m);
  z = warp_sum(z);
  float lz = logf(z) + m;
  for (int64_t c = lane; c < cols; c += 32) yr[c] = log ? xr[c] - lz : expf(xr[c] - m) / z;
}

__global__ void softmax_bwd(bool log, float* gx, const float* y, const float* gy, int64_t rows, int64_t cols) {
  int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const float* yr = y + row * cols;
  const float* gr = gy + row * cols;
  float* out = gx + row * cols;
  float dot = 0.f;
  for (int64_t c = lane; c < cols; c += 32) dot += log ? gr[c] : gr[c] * yr[c];
  dot = warp_sum(dot);
  for (int64_t c = lane; c < cols; c += 32) out[c] = log ? gr[c] - expf(yr[c]) * dot : yr[c] * (gr[c] - dot);
}

unsigned warp_blocks(int64_t rows) { return unsigned((rows * 32 + cuda::kThreads - 1) / cuda::kThreads); }

void forward(bool log, const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) {
  cuda::require_f32(x, "softmax");
  softmax_fwd<<<warp_blocks(rows), cuda::kThreads, 0, cuda::stream()>>>(log, y.data<float>(), x.data<float>(), rows, cols);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void backward(bool log, const Tensor& gx, const Tensor& y, const Tensor& gy, int64_t rows, int64_t cols) {
  cuda::require_f32(y, "softmax backward");
  softmax_bwd<<<warp_blocks(rows), cuda::kThreads, 0, cuda::stream()>>>(log, gx.data<float>(), y.data<float>(),
                                                                       gy.data<float>(), rows, cols);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const SoftmaxKernels table{forward, backward};
const RegisterBackend<SoftmaxKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
