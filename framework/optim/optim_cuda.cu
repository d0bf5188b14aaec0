// Fused optimizer updates: one launch over the whole parameter arena.
#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "optim/optimizer.h"

namespace loupe::optim {
namespace {

// With a GradScaler, a step whose gradients overflowed leaves everything untouched.
__device__ __forceinline__ bool skipped(const float* scaler) { return scaler && scaler[kFoundInf] != 0.f; }

__global__ void sgd_kernel(float* p, const float* g, float* buf, int64_t n, float lr, float momentum, bool nesterov,
                           float wd, const float* scaler) {
  if (skipped(scaler)) return;
  LOUPE_KERNEL_LOOP(i, n) {
    float gi = g[i] + wd * p[i];
    if (momentum != 0.f) {
      buf[i] = momentum * buf[i] + gi;
      gi = nesterov ? gi + momentum * buf[i] : buf[i];
    }
    p[i] -= lr * gi;
  }
}

__global__ void rmsprop_kernel(float* p, const float* g, float* v, int64_t n, float lr, float rho, float eps,
                               const float* scaler) {
  if (skipped(scaler)) return;
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

// The step's constants; with a scaler, the bias corrections for the steps actually applied.
__device__ __forceinline__ AdamStep adam_step(AdamStep op, const AdamArgs& a, const float* scaler) {
  if (scaler) {
    double t = double(a.step) - double(scaler[kSkipped]);
    op.bias1 = float(1.0 - pow(a.beta1_d, t));
    op.bias2 = float(1.0 - pow(a.beta2_d, t));
  }
  return op;
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, AdamStep op, AdamArgs a,
                            const float* scaler) {
  if (skipped(scaler)) return;
  op = adam_step(op, a, scaler);
  LOUPE_KERNEL_LOOP(i, n) op(p[i], g[i], m[i], v[i]);
}

// The same, four elements a thread through 16-byte loads (the update is memory-bound: imdb_fasttext
// moves 1.7 GB a step through it); the last n % 4 elements one a thread.
__global__ void adam_kernel4(float* p, const float* g, float* m, float* v, int64_t n, AdamStep op, AdamArgs a,
                             const float* scaler) {
  if (skipped(scaler)) return;
  op = adam_step(op, a, scaler);
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

void sgd(const Tensor& p, const Tensor& g, const Tensor& buf, float lr, float momentum, bool nesterov, float wd,
         const float* scaler) {
  int64_t n = p.numel();
  sgd_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
      p.data<float>(), g.data<float>(), buf.data<float>(), n, lr, momentum, nesterov, wd, scaler);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void rmsprop(const Tensor& p, const Tensor& g, const Tensor& v, float lr, float rho, float eps, const float* scaler) {
  int64_t n = p.numel();
  rmsprop_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(p.data<float>(), g.data<float>(),
                                                                            v.data<float>(), n, lr, rho, eps, scaler);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void adam(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, const AdamArgs& a,
          const float* scaler) {
  int64_t n = p.numel();
  AdamStep op{a.lr, a.beta1, a.beta2, a.eps, a.bias1, a.bias2, a.weight_decay};
  if (cuda::vec4_ok(4, {p.data_ptr(), g.data_ptr(), m.data_ptr(), v.data_ptr()})) {
    adam_kernel4<<<cuda::blocks_for(std::max<int64_t>(n / 4, 1)), cuda::kThreads, 0, cuda::stream()>>>(
        p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), n, op, a, scaler);
  } else {
    adam_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
        p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), n, op, a, scaler);
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

__global__ void adadelta_kernel(float* p, const float* g, float* acc, float* delta, int64_t n, float lr, float rho,
                                float eps, const float* scaler) {
  if (skipped(scaler)) return;
  LOUPE_KERNEL_LOOP(i, n) {
    float gi = g[i];
    float a = rho * acc[i] + (1.f - rho) * gi * gi;
    float u = gi * sqrtf(delta[i] + eps) / sqrtf(a + eps);
    acc[i] = a;
    delta[i] = rho * delta[i] + (1.f - rho) * u * u;
    p[i] -= lr * u;
  }
}

void adadelta(const Tensor& p, const Tensor& g, const Tensor& acc, const Tensor& delta, float lr, float rho, float eps,
              const float* scaler) {
  int64_t n = p.numel();
  adadelta_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
      p.data<float>(), g.data<float>(), acc.data<float>(), delta.data<float>(), n, lr, rho, eps, scaler);
  LOUPE_CUDA_LAUNCH_CHECK();
}

// GradScaler: unscale with the inf/NaN check in one pass, four elements a thread through 16-byte
// loads (it runs over every gradient: 240 MB for imdb_fasttext), the last n % 4 one a thread; and
// the one-thread state update.
__global__ void unscale_kernel(float* g, int64_t n, float* state) {
  const float inv = 1.f / state[kScale];
  bool bad = false;
  int64_t n4 = n / 4;
  LOUPE_KERNEL_LOOP(i, n4) {
    float4 v = reinterpret_cast<float4*>(g)[i];
    bad |= !isfinite(v.x) || !isfinite(v.y) || !isfinite(v.z) || !isfinite(v.w);
    reinterpret_cast<float4*>(g)[i] = make_float4(v.x * inv, v.y * inv, v.z * inv, v.w * inv);
  }
  int64_t t = 4 * n4 + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n) {
    bad |= !isfinite(g[t]);
    g[t] *= inv;
  }
  if (bad) state[kFoundInf] = 1.f;  // every writer writes the same value
}

__global__ void update_kernel(float* s, float growth, float backoff, int interval) {
  scaler_update(s, growth, backoff, interval);
}

void unscale(const Tensor& grads, const Tensor& state) {
  int64_t n = grads.numel();
  LOUPE_CHECK(cuda::vec4_ok(4, {grads.data_ptr()}), "unscale needs 16-byte aligned gradients (an arena)");
  unscale_kernel<<<cuda::blocks_for(n / 4 + 1), cuda::kThreads, 0, cuda::stream()>>>(grads.data<float>(), n,
                                                                                    state.data<float>());
  LOUPE_CUDA_LAUNCH_CHECK();
}

void update(const Tensor& state, float growth, float backoff, int interval) {
  update_kernel<<<1, 1, 0, cuda::stream()>>>(state.data<float>(), growth, backoff, interval);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const ScalerKernels scaler_table{unscale, update};
const RegisterBackend<ScalerKernels> scaler_reg(DeviceType::CUDA, &scaler_table);

const OptimKernels table{sgd, rmsprop, adam, adadelta};
const RegisterBackend<OptimKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe::optim
