// Losses in one launch each: the batch is small, so one block walks all rows and reduces; the
// result stays on the device (no read-back inside a step).
#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/loss.h"

namespace loupe {
namespace {

constexpr int kBlock = 512;

__device__ float row_lse(const float* x, int64_t C) {
  float m = x[0];
  for (int64_t c = 1; c < C; ++c) m = fmaxf(m, x[c]);
  float z = 0.f;
  for (int64_t c = 0; c < C; ++c) z += expf(x[c] - m);
  return logf(z) + m;
}

__global__ void ce_fwd(float* loss, const float* x, const int32_t* y, int64_t N, int64_t C) {
  float acc = 0.f;
  for (int64_t r = threadIdx.x; r < N; r += blockDim.x) {
    int32_t label = y[r];
    // An out-of-range label cannot throw here; it makes the loss NaN, which the epoch report shows.
    acc += (label >= 0 && label < C) ? row_lse(x + r * C, C) - x[r * C + label] : NAN;
  }
  acc = cuda::block_sum(acc);
  if (threadIdx.x == 0) *loss = N ? acc / float(N) : 0.f;
}

__global__ void ce_bwd(float* gx, const float* x, const int32_t* y, const float* gloss, int64_t N, int64_t C) {
  float scale = *gloss / float(N);
  LOUPE_KERNEL_LOOP(r, N) {
    const float* xr = x + r * C;
    float lse = row_lse(xr, C);
    for (int64_t c = 0; c < C; ++c) gx[r * C + c] = (expf(xr[c] - lse) - (c == y[r] ? 1.f : 0.f)) * scale;
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

__global__ void correct_kernel(float* out, const float* x, const void* labels, int64_t N, int64_t C) {
  float acc = 0.f;
  for (int64_t r = threadIdx.x; r < N; r += blockDim.x) {
    if (C == 1) {
      acc += (x[r] > 0.f) == (static_cast<const float*>(labels)[r] > 0.5f) ? 1.f : 0.f;
    } else {
      const float* xr = x + r * C;
      int64_t best = 0;
      for (int64_t c = 1; c < C; ++c)
        if (xr[c] > xr[best]) best = c;
      acc += best == static_cast<const int32_t*>(labels)[r] ? 1.f : 0.f;
    }
  }
  acc = cuda::block_sum(acc);
  if (threadIdx.x == 0) *out = acc;
}

void ce_forward(const Tensor& loss, const Tensor& logits, const Tensor& labels, int64_t N, int64_t C) {
  cuda::require_f32(logits, "cross_entropy");
  ce_fwd<<<1, kBlock, 0, cuda::stream()>>>(loss.data<float>(), logits.data<float>(), labels.data<int32_t>(), N, C);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void ce_backward(const Tensor& gx, const Tensor& logits, const Tensor& labels, const Tensor& gloss, int64_t N,
                 int64_t C) {
  ce_bwd<<<cuda::blocks_for(N), cuda::kThreads, 0, cuda::stream()>>>(gx.data<float>(), logits.data<float>(),
                                                                    labels.data<int32_t>(), gloss.data<float>(), N, C);
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
  correct_kernel<<<1, kBlock, 0, cuda::stream()>>>(out.data<float>(), logits.data<float>(), labels.data_ptr(), N, C);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const LossKernels table{ce_forward, ce_backward, bce_forward, bce_backward, count_correct};
const RegisterBackend<LossKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
