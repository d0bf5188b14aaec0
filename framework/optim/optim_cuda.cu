// Fused optimizer updates: one launch over the whole parameter arena.
#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "optim/optimizer.h"

namespace loupe::optim {
namespace {

// With a GradScaler, a step whose gradients overflowed leaves everything untouched.
__device__ __forceinline__ bool skipped(const UpdateArgs& a) { return a.scaler && a.scaler[kFoundInf] != 0.f; }

// With a GradScaler, the gradients are still scaled: each is multiplied by 1 / scale as it is read
// (the one place the division happens; optim/grad_scaler.h).
__device__ __forceinline__ float inv_scale(const UpdateArgs& a) { return a.scaler ? 1.f / a.scaler[kScale] : 1.f; }

// The update's learning rate, with Keras' decay over the updates issued before it (device count).
__device__ __forceinline__ float lr_of(const UpdateArgs& a) {
  return float(a.decay != 0 ? a.lr / (1.0 + a.decay * *a.count) : a.lr);
}

__global__ void sgd_kernel(float* p, const float* g, float* buf, int64_t n, UpdateArgs a, float momentum,
                           bool nesterov, float wd) {
  if (skipped(a)) return;
  const float lr = lr_of(a), inv = inv_scale(a);
  LOUPE_KERNEL_LOOP(i, n) {
    float gi = g[i] * inv + wd * p[i];
    if (momentum != 0.f) {
      buf[i] = momentum * buf[i] + gi;
      gi = nesterov ? gi + momentum * buf[i] : buf[i];
    }
    p[i] -= lr * gi;
  }
}

__global__ void rmsprop_kernel(float* p, const float* g, float* v, int64_t n, UpdateArgs a, float rho, float eps) {
  if (skipped(a)) return;
  const float lr = lr_of(a), inv = inv_scale(a);
  LOUPE_KERNEL_LOOP(i, n) {
    float gi = g[i] * inv;
    float vi = rho * v[i] + (1.f - rho) * gi * gi;
    v[i] = vi;
    p[i] -= lr * gi / (sqrtf(vi) + eps);
  }
}

struct AdamStep {
  float lr, b1, b2, eps, bias1, bias2, wd, inv;  // inv: 1 / the GradScaler's scale (1 without one)
  __device__ __forceinline__ void operator()(float& p, float g, float& m, float& v) const {
    g *= inv;
    m = b1 * m + (1.f - b1) * g;
    v = b2 * v + (1.f - b2) * g * g;
    p -= lr * ((m / bias1) / (sqrtf(v / bias2) + eps) + wd * p);
  }
};

// The step's constants: the bias corrections for t = the updates applied so far, this one included
// (a GradScaler's skipped steps do not count), in double as the host computed them before.
__device__ __forceinline__ AdamStep adam_step(const UpdateArgs& a, double beta1, double beta2, float eps, float wd) {
  double t = *a.count + 1.0 - (a.scaler ? double(a.scaler[kSkipped]) : 0.0);
  return AdamStep{lr_of(a), float(beta1), float(beta2), eps, float(1.0 - pow(beta1, t)), float(1.0 - pow(beta2, t)),
                  wd, inv_scale(a)};
}

__global__ void adam_kernel(float* p, const float* g, float* m, float* v, int64_t n, UpdateArgs a, double beta1,
                            double beta2, float eps, float wd) {
  if (skipped(a)) return;
  const AdamStep op = adam_step(a, beta1, beta2, eps, wd);
  LOUPE_KERNEL_LOOP(i, n) op(p[i], g[i], m[i], v[i]);
}

// The same, four elements a thread through 16-byte loads (the update is memory-bound: imdb_fasttext
// moves 1.7 GB a step through it); the last n % 4 elements one a thread.
__global__ void adam_kernel4(float* p, const float* g, float* m, float* v, int64_t n, UpdateArgs a, double beta1,
                             double beta2, float eps, float wd) {
  if (skipped(a)) return;
  const AdamStep op = adam_step(a, beta1, beta2, eps, wd);
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

void sgd(const ExecContext& ctx, const Tensor& p, const Tensor& g, const Tensor& buf, const UpdateArgs& a,
         float momentum, bool nesterov, float wd) {
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = p.numel();
  sgd_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(p.data<float>(), g.data<float>(),
                                                           buf.data<float>(), n, a, momentum, nesterov, wd);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void rmsprop(const ExecContext& ctx, const Tensor& p, const Tensor& g, const Tensor& v, const UpdateArgs& a, float rho,
             float eps) {
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = p.numel();
  rmsprop_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(p.data<float>(), g.data<float>(),
                                                               v.data<float>(), n, a, rho, eps);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void adam(const ExecContext& ctx, const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
          const UpdateArgs& a, double beta1, double beta2, float eps, float wd) {
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = p.numel();
  if (cuda::vec4_ok(4, {p.data_ptr(), g.data_ptr(), m.data_ptr(), v.data_ptr()})) {
    adam_kernel4<<<cuda::blocks_for(std::max<int64_t>(n / 4, 1)), cuda::kThreads, 0, s>>>(
        p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), n, a, beta1, beta2, eps, wd);
  } else {
    adam_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(
        p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), n, a, beta1, beta2, eps, wd);
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

__global__ void adadelta_kernel(float* p, const float* g, float* acc, float* delta, int64_t n, UpdateArgs a, float rho,
                                float eps) {
  if (skipped(a)) return;
  const float lr = lr_of(a), inv = inv_scale(a);
  LOUPE_KERNEL_LOOP(i, n) {
    float gi = g[i] * inv;
    float ai = rho * acc[i] + (1.f - rho) * gi * gi;
    float u = gi * sqrtf(delta[i] + eps) / sqrtf(ai + eps);
    acc[i] = ai;
    delta[i] = rho * delta[i] + (1.f - rho) * u * u;
    p[i] -= lr * u;
  }
}

void adadelta(const ExecContext& ctx, const Tensor& p, const Tensor& g, const Tensor& acc, const Tensor& delta,
              const UpdateArgs& a, float rho, float eps) {
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = p.numel();
  adadelta_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(
      p.data<float>(), g.data<float>(), acc.data<float>(), delta.data<float>(), n, a, rho, eps);
  LOUPE_CUDA_LAUNCH_CHECK();
}

__global__ void count_kernel(double* c) { *c += 1.0; }

void count(const ExecContext& ctx, const Tensor& c) {
  const cudaStream_t s = cuda::stream(ctx);
  count_kernel<<<1, 1, 0, s>>>(c.data<double>());
  LOUPE_CUDA_LAUNCH_CHECK();
}

// GradScaler's check: read-only, it only raises found_inf. Four elements a thread through 16-byte
// loads where the range is aligned (an arena's ranges start so; GradScaler::check_), the last
// n % 4 one a thread; one a thread otherwise.
__global__ void check_kernel4(const float* g, int64_t n, float* state) {
  bool bad = false;
  int64_t n4 = n / 4;
  LOUPE_KERNEL_LOOP(i, n4) {
    float4 v = reinterpret_cast<const float4*>(g)[i];
    bad |= !isfinite(v.x) || !isfinite(v.y) || !isfinite(v.z) || !isfinite(v.w);
  }
  int64_t t = 4 * n4 + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n) bad |= !isfinite(g[t]);
  if (bad) state[kFoundInf] = 1.f;  // every writer writes the same value
}

__global__ void check_kernel(const float* g, int64_t n, float* state) {
  bool bad = false;
  LOUPE_KERNEL_LOOP(i, n) bad |= !isfinite(g[i]);
  if (bad) state[kFoundInf] = 1.f;
}

__global__ void update_kernel(float* s, float growth, float backoff, int interval) {
  scaler_update(s, growth, backoff, interval);
}

void check(const ExecContext& ctx, const Tensor& grads, const Tensor& state) {
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = grads.numel();
  if (cuda::vec4_ok(4, {grads.data_ptr()}))
    check_kernel4<<<cuda::blocks_for(n / 4 + 1), cuda::kThreads, 0, s>>>(grads.data<float>(), n, state.data<float>());
  else
    check_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(grads.data<float>(), n, state.data<float>());
  LOUPE_CUDA_LAUNCH_CHECK();
}

void update(const ExecContext& ctx, const Tensor& state, float growth, float backoff, int interval) {
  const cudaStream_t s = cuda::stream(ctx);
  update_kernel<<<1, 1, 0, s>>>(state.data<float>(), growth, backoff, interval);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const ScalerKernels scaler_table{check, update};
const RegisterBackend<ScalerKernels> scaler_reg(DeviceType::CUDA, &scaler_table);

const OptimKernels table{sgd, rmsprop, adam, adadelta, count};
const RegisterBackend<OptimKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe::optim
