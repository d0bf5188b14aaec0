#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/activation.h"

namespace loupe {
namespace {

__global__ void fwd_kernel(Act a, float* y, const float* x, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) {
    float v = x[i];
    y[i] = a == Act::Relu ? fmaxf(v, 0.f) : a == Act::Sigmoid ? 1.f / (1.f + expf(-v)) : tanhf(v);
  }
}

__global__ void bwd_kernel(Act a, float* gx, const float* y, const float* gy, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) {
    float v = y[i], g = gy[i];
    gx[i] = a == Act::Relu ? (v > 0.f ? g : 0.f) : a == Act::Sigmoid ? g * v * (1.f - v) : g * (1.f - v * v);
  }
}

void forward(Act a, const Tensor& y, const Tensor& x) {
  cuda::require_f32(x, "activation");
  int64_t n = x.numel();
  fwd_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(a, y.data<float>(), x.data<float>(), n);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void backward(Act a, const Tensor& gx, const Tensor& y, const Tensor& gy) {
  cuda::require_f32(y, "activation backward");
  int64_t n = y.numel();
  bwd_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(a, gx.data<float>(), y.data<float>(),
                                                                        gy.data<float>(), n);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const ActivationKernels table{forward, backward};
const RegisterBackend<ActivationKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
