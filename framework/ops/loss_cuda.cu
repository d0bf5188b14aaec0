// Losses in one launch each: the batch is small, so one block walks all rows and reduces; the
// result stays on the device (no read-back inside a step). Rows of several classes go one warp a
// row, lanes over the classes (char_lstm's 1024 x 57 logits took 20-40 us a kernel with a thread a
// row), and the block's warps meet in a fixed order: the sums are the same run after run.
#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/loss.h"

namespace loupe {
namespace {

constexpr int kBlock = 512;

// Warp-wide max and sum (every lane gets the result).
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// log sum exp of row x, by the calling warp.
__device__ __forceinline__ float warp_lse(const float* x, int64_t C) {
  float m = -INFINITY;
  for (int64_t c = threadIdx.x % 32; c < C; c += 32) m = fmaxf(m, x[c]);
  m = warp_max(m);
  float z = 0.f;
  for (int64_t c = threadIdx.x % 32; c < C; c += 32) z += expf(x[c] - m);
  return logf(warp_sum(z)) + m;
}

constexpr int kWarpBlock = 1024;  // one block: 32 warps, a row each at a time

__global__ void ce_fwd(float* loss, const float* x, const int32_t* y, int64_t N, int64_t C) {
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  float acc = 0.f;
  for (int64_t r = warp; r < N; r += warps) {
    int32_t label = y[r];
    float lse = warp_lse(x + r * C, C);
    // An out-of-range label cannot throw here; it makes the loss NaN, which the epoch report shows.
    acc += (label >= 0 && label < C) ? lse - x[r * C + label] : NAN;
  }
  __shared__ float per_warp[32];
  if (threadIdx.x % 32 == 0) per_warp[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < warps; ++w) t += per_warp[w];
    *loss = N ? t / float(N) : 0.f;
  }
}

// One warp a row.
__global__ void ce_bwd(float* gx, const float* x, const int32_t* y, const float* gloss, int64_t N, int64_t C) {
  const float scale = *gloss / float(N);
  const int64_t warps = int64_t(gridDim.x) * blockDim.x / 32;
  for (int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; r < N; r += warps) {
    const float* xr = x + r * C;
    float lse = warp_lse(xr, C);
    for (int64_t c = threadIdx.x % 32; c < C; c += 32) gx[r * C + c] = (expf(xr[c] - lse) - (c == y[r] ? 1.f : 0.f)) * scale;
  }
}

__global__ void bce_fwd(float* loss, const float* x, const float* t, int64_t n) {
  float acc = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    acc += fmaxf(x[i], 0.f) - x[i] * t[i] + log1pf(expf(-fabsf(x[i])));
  acc = cuda::block_sum(acc);
  if (threadIdx.x == 0) *loss = n ? acc / float(n) : 0.f;
}

__global__ void bce_bwd(float* gx, const float* x, const float* t, const float* gloss, int64_t n) {
  float scale = *gloss / float(n);
  LOUPE_KERNEL_LOOP(i, n) gx[i] = (1.f / (1.f + expf(-x[i])) - t[i]) * scale;
}

__global__ void correct_binary(float* out, const float* x, const float* labels, int64_t N) {
  float acc = 0.f;
  for (int64_t r = threadIdx.x; r < N; r += blockDim.x) acc += (x[r] > 0.f) == (labels[r] > 0.5f) ? 1.f : 0.f;
  acc = cuda::block_sum(acc);
  if (threadIdx.x == 0) *out = acc;
}

// Classes: one warp a row finds the first index of the row's largest value (a NaN never wins).
__global__ void correct_classes(float* out, const float* x, const int32_t* labels, int64_t N, int64_t C) {
  const int warp = threadIdx.x / 32, warps = blockDim.x / 32;
  float acc = 0.f;
  for (int64_t r = warp; r < N; r += warps) {
    const float* xr = x + r * C;
    float best = -INFINITY;
    int64_t at = C;  // none yet
    for (int64_t c = threadIdx.x % 32; c < C; c += 32)
      if (xr[c] > best || (at == C && !isnan(xr[c]))) best = xr[c], at = c;
    for (int o = 16; o > 0; o >>= 1) {
      float b = __shfl_xor_sync(0xffffffffu, best, o);
      int64_t a = __shfl_xor_sync(0xffffffffu, at, o);
      if (b > best || (b == best && a < at)) best = b, at = a;
    }
    acc += at == labels[r] ? 1.f : 0.f;  // every lane holds the same answer; lane 0's counts
  }
  __shared__ float per_warp[32];
  if (threadIdx.x % 32 == 0) per_warp[warp] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < warps; ++w) t += per_warp[w];
    *out = t;
  }
}

void ce_forward(const Tensor& loss, const Tensor& logits, const Tensor& labels, int64_t N, int64_t C) {
  cuda::require_f32(logits, "cross_entropy");
  ce_fwd<<<1, kWarpBlock, 0, cuda::stream()>>>(loss.data<float>(), logits.data<float>(), labels.data<int32_t>(), N, C);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void ce_backward(const Tensor& gx, const Tensor& logits, const Tensor& labels, const Tensor& gloss, int64_t N,
                 int64_t C) {
  ce_bwd<<<cuda::blocks_for(N * 32), cuda::kThreads, 0, cuda::stream()>>>(
      gx.data<float>(), logits.data<float>(), labels.data<int32_t>(), gloss.data<float>(), N, C);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void bce_forward(const Tensor& loss, const Tensor& logits, const Tensor& targets, int64_t n) {
  cuda::require_f32(logits, "binary_cross_entropy_with_logits");
  bce_fwd<<<1, kBlock, 0, cuda::stream()>>>(loss.data<float>(), logits.data<float>(), targets.data<float>(), n);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void bce_backward(const Tensor& gx, const Tensor& logits, const Tensor& targets, const Tensor& gloss, int64_t n) {
  bce_bwd<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(gx.data<float>(), logits.data<float>(),
                                                                     targets.data<float>(), gloss.data<float>(), n);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void count_correct(const Tensor& out, const Tensor& logits, const Tensor& labels, int64_t N, int64_t C) {
  cuda::require_f32(logits, "count_correct");
  if (C == 1)
    correct_binary<<<1, kBlock, 0, cuda::stream()>>>(out.data<float>(), logits.data<float>(), labels.data<float>(), N);
  else
    correct_classes<<<1, kWarpBlock, 0, cuda::stream()>>>(out.data<float>(), logits.data<float>(),
                                                          labels.data<int32_t>(), N, C);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const LossKernels table{ce_forward, ce_backward, bce_forward, bce_backward, count_correct};
const RegisterBackend<LossKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
