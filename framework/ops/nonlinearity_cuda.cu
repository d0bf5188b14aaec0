#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/nonlinearity.h"

namespace loupe {
namespace {

// e^-|x| never overflows: the sigmoid of any finite x (silu, softplus's derivative).
__device__ __forceinline__ float nl_sigmoid(float x) {
  float e = expf(-fabsf(x));
  return x >= 0.f ? 1.f / (1.f + e) : e / (1.f + e);
}

// The function is the same for every thread of a launch: the switch never diverges.
__device__ __forceinline__ float nl_fwd(Nonlin f, float x, float slope) {
  switch (f) {
    case Nonlin::Elu: return x > 0.f ? x : expm1f(x);
    case Nonlin::Selu: return float(kSeluScale) * (x > 0.f ? x : float(kSeluAlpha) * expm1f(x));
    case Nonlin::Gelu: return 0.5f * x * (1.f + erff(x * 0.70710678118654752440f));
    case Nonlin::Silu: return x * nl_sigmoid(x);
    case Nonlin::HardSigmoid: return fminf(fmaxf(slope * x + 0.5f, 0.f), 1.f);
    case Nonlin::Softplus: return fmaxf(x, 0.f) + log1pf(expf(-fabsf(x)));
    default: return x / (1.f + fabsf(x));  // Softsign
  }
}

// dy/dx times g, from the input x.
__device__ __forceinline__ float nl_bwd(Nonlin f, float x, float g, float slope) {
  switch (f) {
    case Nonlin::Elu: return x > 0.f ? g : g * expf(x);
    case Nonlin::Selu: return g * float(kSeluScale) * (x > 0.f ? 1.f : float(kSeluAlpha) * expf(x));
    case Nonlin::Gelu: {  // Phi(x) + x phi(x), phi the standard normal density
      float cdf = 0.5f * (1.f + erff(x * 0.70710678118654752440f));
      return g * (cdf + x * 0.39894228040143267794f * expf(-0.5f * x * x));
    }
    case Nonlin::Silu: {
      float s = nl_sigmoid(x);
      return g * s * (1.f + x * (1.f - s));
    }
    case Nonlin::HardSigmoid: {
      float v = slope * x + 0.5f;
      return v > 0.f && v < 1.f ? g * slope : 0.f;
    }
    case Nonlin::Softplus: return g * nl_sigmoid(x);
    default: {  // Softsign
      float d = 1.f + fabsf(x);
      return g / (d * d);
    }
  }
}

// Stored in T (float, float16, bfloat16), computed in float; one element per thread.
template <class T>
__global__ void nl_fwd_kernel(Nonlin f, float slope, T* y, const T* x, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) y[i] = cuda::from_float<T>(nl_fwd(f, cuda::to_float(x[i]), slope));
}

template <class T>
__global__ void nl_bwd_kernel(Nonlin f, float slope, T* gx, const T* x, const T* gy, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) gx[i] = cuda::from_float<T>(nl_bwd(f, cuda::to_float(x[i]), cuda::to_float(gy[i]), slope));
}

void nonlinearity_forward(const ExecContext& ctx, Nonlin f, float slope, const Tensor& y, const Tensor& x) {
  cuda::require_float(x, "nonlinearity");
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = x.numel();
  cuda::dispatch_float(x.dtype(), "nonlinearity", [&](auto tag) {
    using T = decltype(tag);
    cuda::launch(nl_fwd_kernel<T>, cuda::blocks_for(n), cuda::kThreads, 0, s, f, slope, y.data<T>(), x.data<T>(), n);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

void nonlinearity_backward(const ExecContext& ctx, Nonlin f, float slope, const Tensor& gx, const Tensor& x,
                           const Tensor& gy) {
  cuda::require_float(x, "nonlinearity backward");
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = x.numel();
  cuda::dispatch_float(x.dtype(), "nonlinearity backward", [&](auto tag) {
    using T = decltype(tag);
    cuda::launch(nl_bwd_kernel<T>, cuda::blocks_for(n), cuda::kThreads, 0, s, f, slope, gx.data<T>(), x.data<T>(),
                 gy.data<T>(), n);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

const NonlinKernels table{nonlinearity_forward, nonlinearity_backward};
const RegisterBackend<NonlinKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
