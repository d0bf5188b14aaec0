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

// The update's learning rate: the curve at the updates issued before it (the device count), from
// the base rate on the device (optim/lr_curve.h; the count is there whenever the curve is not constant).
__device__ __forceinline__ float lr_of(const UpdateArgs& a) {
  return float(curve_rate(a.curve, *a.lr, a.count ? *a.count : 0.0));
}

// Each optimizer's arithmetic on one element: its parameter, its gradient and up to two states
// (S of them). bind() reads, on the device, what changes from step to step.
struct SgdStep {
  float momentum, wd;
  bool nesterov;
  float lr = 0, inv = 1;
  __device__ __forceinline__ void bind(const UpdateArgs& a) { lr = lr_of(a), inv = inv_scale(a); }
  __device__ __forceinline__ void operator()(float& p, float g, float& buf, float&) const {
    float gi = g * inv + wd * p;
    if (momentum != 0.f) {
      buf = momentum * buf + gi;
      gi = nesterov ? gi + momentum * buf : buf;
    }
    p -= lr * gi;
  }
};

struct RmspropStep {
  float rho, eps;
  float lr = 0, inv = 1;
  __device__ __forceinline__ void bind(const UpdateArgs& a) { lr = lr_of(a), inv = inv_scale(a); }
  __device__ __forceinline__ void operator()(float& p, float g, float& v, float&) const {
    const float gi = g * inv;
    v = rho * v + (1.f - rho) * gi * gi;
    p -= lr * gi / (sqrtf(v) + eps);
  }
};

// The bias corrections for t = the updates applied so far, this one included (a GradScaler's
// skipped steps do not count), in double as the host computed them before.
struct AdamStep {
  double beta1, beta2;
  float eps, wd;
  float lr = 0, b1 = 0, b2 = 0, bias1 = 1, bias2 = 1, inv = 1;
  __device__ __forceinline__ void bind(const UpdateArgs& a) {
    const double t = *a.count + 1.0 - (a.scaler ? double(a.scaler[kSkipped]) : 0.0);
    lr = lr_of(a), b1 = float(beta1), b2 = float(beta2), bias1 = float(1.0 - pow(beta1, t));
    bias2 = float(1.0 - pow(beta2, t)), inv = inv_scale(a);
  }
  __device__ __forceinline__ void operator()(float& p, float g, float& m, float& v) const {
    g *= inv;
    m = b1 * m + (1.f - b1) * g;
    v = b2 * v + (1.f - b2) * g * g;
    p -= lr * ((m / bias1) / (sqrtf(v / bias2) + eps) + wd * p);
  }
};

struct AdadeltaStep {
  float rho, eps;
  float lr = 0, inv = 1;
  __device__ __forceinline__ void bind(const UpdateArgs& a) { lr = lr_of(a), inv = inv_scale(a); }
  __device__ __forceinline__ void operator()(float& p, float g, float& acc, float& delta) const {
    const float gi = g * inv;
    acc = rho * acc + (1.f - rho) * gi * gi;
    const float u = gi * sqrtf(delta + eps) / sqrtf(acc + eps);
    delta = rho * delta + (1.f - rho) * u * u;
    p -= lr * u;
  }
};

// One element: the states that exist are read and written, the others are a register.
template <int S, class Step>
__device__ __forceinline__ void update_one(const Step& op, float* p, const float* g, float* s0, float* s1, int64_t i) {
  float a = S > 0 ? s0[i] : 0.f, b = S > 1 ? s1[i] : 0.f;
  op(p[i], g[i], a, b);
  if (S > 0) s0[i] = a;
  if (S > 1) s1[i] = b;
}

// The update over the whole arena, four elements a thread through 16-byte accesses (the updates are
// memory-bound, and one element a thread left much of the bandwidth unused: lab/benchmarks.md,
// "The optimizer in 16-byte accesses"), the last n % 4 one a thread.
template <int S, class Step>
__global__ void update4_kernel(float* p, const float* g, float* s0, float* s1, int64_t n, UpdateArgs a, Step op) {
  if (skipped(a)) return;
  op.bind(a);
  const int64_t n4 = n / 4;
  LOUPE_KERNEL_LOOP(i, n4) {
    float4 P = reinterpret_cast<float4*>(p)[i], A{}, B{};
    const float4 G = reinterpret_cast<const float4*>(g)[i];
    if (S > 0) A = reinterpret_cast<float4*>(s0)[i];
    if (S > 1) B = reinterpret_cast<float4*>(s1)[i];
    op(P.x, G.x, A.x, B.x);
    op(P.y, G.y, A.y, B.y);
    op(P.z, G.z, A.z, B.z);
    op(P.w, G.w, A.w, B.w);
    reinterpret_cast<float4*>(p)[i] = P;
    if (S > 0) reinterpret_cast<float4*>(s0)[i] = A;
    if (S > 1) reinterpret_cast<float4*>(s1)[i] = B;
  }
  const int64_t t = 4 * n4 + int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t < n) update_one<S>(op, p, g, s0, s1, t);
}

// One element a thread: for ranges that are not 16-byte aligned.
template <int S, class Step>
__global__ void update1_kernel(float* p, const float* g, float* s0, float* s1, int64_t n, UpdateArgs a, Step op) {
  if (skipped(a)) return;
  op.bind(a);
  LOUPE_KERNEL_LOOP(i, n) update_one<S>(op, p, g, s0, s1, i);
}

template <int S, class Step>
void launch_update(const ExecContext& ctx, const Tensor& p, const Tensor& g, const Tensor* s0, const Tensor* s1,
                   const UpdateArgs& a, const Step& op) {
  const cudaStream_t s = cuda::stream(ctx);
  const int64_t n = p.numel();
  float* st0 = S > 0 ? s0->data<float>() : nullptr;
  float* st1 = S > 1 ? s1->data<float>() : nullptr;
  // vec4_ok needs n % 4 == 0; the kernel's tail takes the rest, so only the pointers are checked.
  if (cuda::vec4_ok(4, {p.data_ptr(), g.data_ptr(), st0, st1}))
    cuda::launch(update4_kernel<S, Step>, cuda::blocks_for(std::max<int64_t>(n / 4, 1)), cuda::kThreads, 0, s,
                 p.data<float>(), g.data<float>(), st0, st1, n, a, op);
  else
    cuda::launch(update1_kernel<S, Step>, cuda::blocks_for(n), cuda::kThreads, 0, s, p.data<float>(), g.data<float>(), st0,
                 st1, n, a, op);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void sgd(const ExecContext& ctx, const Tensor& p, const Tensor& g, const Tensor& buf, const UpdateArgs& a,
         float momentum, bool nesterov, float wd) {
  const SgdStep op{momentum, wd, nesterov};
  if (momentum != 0.f) launch_update<1>(ctx, p, g, &buf, nullptr, a, op);
  else launch_update<0>(ctx, p, g, nullptr, nullptr, a, op);
}

void rmsprop(const ExecContext& ctx, const Tensor& p, const Tensor& g, const Tensor& v, const UpdateArgs& a, float rho,
             float eps) {
  launch_update<1>(ctx, p, g, &v, nullptr, a, RmspropStep{rho, eps});
}

void adam(const ExecContext& ctx, const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v,
          const UpdateArgs& a, double beta1, double beta2, float eps, float wd) {
  launch_update<2>(ctx, p, g, &m, &v, a, AdamStep{beta1, beta2, eps, wd});
}

void adadelta(const ExecContext& ctx, const Tensor& p, const Tensor& g, const Tensor& acc, const Tensor& delta,
              const UpdateArgs& a, float rho, float eps) {
  launch_update<2>(ctx, p, g, &acc, &delta, a, AdadeltaStep{rho, eps});
}

__global__ void count_kernel(double* c) {
  *c += 1.0;
}

void count(const ExecContext& ctx, const Tensor& c) {
  const cudaStream_t s = cuda::stream(ctx);
  cuda::launch(count_kernel, 1, 1, 0, s, c.data<double>());
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
    cuda::launch(check_kernel4, cuda::blocks_for(n / 4 + 1), cuda::kThreads, 0, s, grads.data<float>(), n,
                 state.data<float>());
  else
    cuda::launch(check_kernel, cuda::blocks_for(n), cuda::kThreads, 0, s, grads.data<float>(), n, state.data<float>());
  LOUPE_CUDA_LAUNCH_CHECK();
}

void update(const ExecContext& ctx, const Tensor& state, float growth, float backoff, int interval) {
  const cudaStream_t s = cuda::stream(ctx);
  cuda::launch(update_kernel, 1, 1, 0, s, state.data<float>(), growth, backoff, interval);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const ScalerKernels scaler_table{check, update};
const RegisterBackend<ScalerKernels> scaler_reg(DeviceType::CUDA, &scaler_table);

const OptimKernels table{sgd, rmsprop, adam, adadelta, count};
const RegisterBackend<OptimKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe::optim
