#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/softmax.h"

namespace loupe {
namespace {

using cuda::warp_max;
using cuda::warp_sum;

// One warp per row. T: float, __half or __nv_bfloat16; the max, the sum and the dot product are
// float whatever T is.
template <class T>
__global__ void softmax_fwd(bool log, T* y, const T* x, int64_t rows, int64_t cols) {
  int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float m = -INFINITY;
  for (int64_t c = lane; c < cols; c += 32) m = fmaxf(m, cuda::to_float(xr[c]));
  m = warp_max(m);
  float z = 0.f;
  for (int64_t c = lane; c < cols; c += 32) z += expf(cuda::to_float(xr[c]) - m);
  z = warp_sum(z);
  float lz = logf(z) + m;
  for (int64_t c = lane; c < cols; c += 32) {
    float v = cuda::to_float(xr[c]);
    yr[c] = cuda::from_float<T>(log ? v - lz : expf(v - m) / z);
  }
}

template <class T>
__global__ void softmax_bwd(bool log, T* gx, const T* y, const T* gy, int64_t rows, int64_t cols) {
  int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const T* yr = y + row * cols;
  const T* gr = gy + row * cols;
  T* out = gx + row * cols;
  float dot = 0.f;
  for (int64_t c = lane; c < cols; c += 32) {
    float g = cuda::to_float(gr[c]);
    dot += log ? g : g * cuda::to_float(yr[c]);
  }
  dot = warp_sum(dot);
  for (int64_t c = lane; c < cols; c += 32) {
    float g = cuda::to_float(gr[c]), v = cuda::to_float(yr[c]);
    out[c] = cuda::from_float<T>(log ? g - expf(v) * dot : v * (g - dot));
  }
}

unsigned warp_blocks(int64_t rows) { return unsigned((rows * 32 + cuda::kThreads - 1) / cuda::kThreads); }

void softmax_forward(const ExecContext& ctx, bool log, const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) {
  cuda::require_float(x, "softmax");
  const cudaStream_t s = cuda::stream(ctx);
  cuda::dispatch_float(x.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    cuda::launch(softmax_fwd<T>, warp_blocks(rows), cuda::kThreads, 0, s, log, y.data<T>(), x.data<T>(), rows, cols);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

void softmax_backward(const ExecContext& ctx, bool log, const Tensor& gx, const Tensor& y, const Tensor& gy, int64_t rows,
                      int64_t cols) {
  cuda::require_float(y, "softmax backward");
  const cudaStream_t s = cuda::stream(ctx);
  cuda::dispatch_float(y.dtype(), "softmax backward", [&](auto tag) {
    using T = decltype(tag);
    cuda::launch(softmax_bwd<T>, warp_blocks(rows), cuda::kThreads, 0, s, log, gx.data<T>(), y.data<T>(), gy.data<T>(),
                 rows, cols);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

const SoftmaxKernels table{softmax_forward, softmax_backward};
const RegisterBackend<SoftmaxKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
