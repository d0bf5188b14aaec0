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

struct AdamStep {
  float lr, b1, b2, eps, bias1, bias2, wd;
  __device__ __forceinline__ void operator()(float& p, float g, float& m, float& v) const {
    m = b1 * m + (1.f - b1) * g;
    v = b2 * v + (1.f - b2) * g * g;
    p -= lr * ((m / bias1) / (sqrtf(v / bias2) + eps) + wd * p);
  }
};

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, AdamStep op) {
  LOUPE_KERNEL_LOOP(i, n) op(p[i], g[i], m[i], v[i]);
}

// The same, four elements a thread through 16-byte loads (the update is memory-bound: imdb_fasttext
// moves 1.7 GB a step through it); the last n % 4 elements one a thread.
__global__ void adam_kernel4(float* p, const float* g, float* m, float* v, int64_t n, AdamStep op) {
  int64_t n4 = n / 4;
  LOUPE_KERNEL_LOOP(i, n4) {
    float4 P = reinterpret_cast<float4*>(p)[i], M = reinterpret_cast<float4*>(m)[i];
    float4 V = reinterpret_cast<float4*>(v)[i];
    const float4 G = reinterpret_cast<const float4*>(g)[i];
    op(P.x, G.x, M.x, V.x);
    op(P.y, G.y, M.y, V.y);
    op(P.z, G.z, M.z, V.z);
    op(P.w, G.w, M.w, V.w);
    reinterpret_cast<float4*>(p)[i] = P;
    reinterpret_cast<float4*>(m)[i] = M;
    reinterpret_cast<float4*>(v)[i] = V;
  }
  int64_t t = 4 * n4 + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n) op(p[t], g[t], m[t], v[t]);
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
  AdamStep op{lr, b1, b2, eps, bias1, bias2, wd};
  if (cuda::vec4_ok(4, {p.data_ptr(), g.data_ptr(), m.data_ptr(), v.data_ptr()})) {
    adam_kernel4<<<cuda::blocks_for(std::max<int64_t>(n / 4, 1)), cuda::kThreads, 0, cuda::stream()>>>(
        p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), n, op);
  } else {
    adam_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(p.data<float>(), g.data<float>(),
                                                                           m.data<float>(), v.data<float>(), n, op);
  }
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
