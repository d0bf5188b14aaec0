// Fused optimizer updates: one launch over the whole parameter arena.
#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "optim/optimizer.h"

namespace loupe::optim {
namespace {

__global__ void sgd_kernel(float* p, const float* g, float* buf, int64_t n, float lr, float momentum, bool nesterov,
                           float wd) {
  LOUPE_KERNEL_LOOP(i, n) {
    float gi = g[i] + wd * p[i];
    if (momentum != 0.f) {
      buf[i] = momentum * buf[i] + gi;
      gi = nesterov ? gi + momentum * buf[i] : buf[i];
    }
    p[i] -= lr * gi;
  }
}

__global__ void rmsprop_kernel(float* p, const float* g, float* v, int64_t n, float lr, float rho, float eps) {
  LOUPE_KERNEL_LOOP(i, n) {
    float gi = g[i];
    float vi = rho * v[i] + (1.f - rho) * gi * gi;
    v[i] = vi;
    p[i] -= lr * gi / (sqrtf(vi) + eps);
  }
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, float lr, float b1, float b2,
                            float eps, float bias1, float bias2, float wd) {
  LOUPE_KERNEL_LOOP(i, n) {
    float gi = g[i];
    float mi = b1 * m[i] + (1.f - b1) * gi;
    float vi = b2 * v[i] + (1.f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * ((mi / bias1) / (sqrtf(vi / bias2) + eps) + wd * p[i]);
  }
}

void sgd(const Tensor& p, const Tensor& g, const Tensor& buf, float lr, float momentum, bool nesterov, float wd) {
  int64_t n = p.numel();
  sgd_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(p.data<float>(), g.data<float>(),
                                                                        buf.data<float>(), n, lr, momentum, nesterov, wd);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void rmsprop(const Tensor& p, const Tensor& g, const Tensor& v, float lr, float rho, float eps) {
  int64_t n = p.numel();
  rmsprop_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(p.data<float>(), g.data<float>(),
                                                                            v.data<float>(), n, lr, rho, eps);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void adam(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, float lr, float b1, float b2, float eps,
          float bias1, float bias2, float wd) {
  int64_t n = p.numel();
  adam_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
      p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), n, lr, b1, b2, eps, bias1, bias2, wd);
  LOUPE_CUDA_LAUNCH_CHECK();
}

__global__ void adadelta_kernel(float* p, const float* g, float* acc, float* delta, int64_t n, float lr, float rho,
                                float eps) {
  LOUPE_KERNEL_LOOP(i, n) {
    float gi = g[i];
    float a = rho * acc[i] + (1.f - rho) * gi * gi;
    float u = gi * sqrtf(delta[i] + eps) / sqrtf(a + eps);
    acc[i] = a;
    delta[i] = rho * delta[i] + (1.f - rho) * u * u;
    p[i] -= lr * u;
  }
}

void adadelta(const Tensor& p, const Tensor& g, const Tensor& acc, const Tensor& delta, float lr, float rho, float eps) {
  int64_t n = p.numel();
  adadelta_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
      p.data<float>(), g.data<float>(), acc.data<float>(), delta.data<float>(), n, lr, rho, eps);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const OptimKernels table{sgd, rmsprop, adam, adadelta};
const RegisterBackend<OptimKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe::optim
