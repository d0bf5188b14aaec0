#include <type_traits>

#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/activation.h"

namespace loupe {
namespace {

__device__ __forceinline__ float act_fwd(Act a, float v) {
  return a == Act::Relu ? fmaxf(v, 0.f) : a == Act::Sigmoid ? 1.f / (1.f + expf(-v)) : tanhf(v);
}
// From the output y (all three derivatives are functions of it).
__device__ __forceinline__ float act_bwd(Act a, float y, float g) {
  return a == Act::Relu ? (y > 0.f ? g : 0.f) : a == Act::Sigmoid ? g * y * (1.f - y) : g * (1.f - y * y);
}

__global__ void fwd_kernel(Act a, float* y, const float* x, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) y[i] = act_fwd(a, x[i]);
}

__global__ void fwd_kernel4(Act a, float4* y, const float4* x, int64_t n4) {
  LOUPE_KERNEL_LOOP(i, n4) {
    float4 v = x[i];
    y[i] = make_float4(act_fwd(a, v.x), act_fwd(a, v.y), act_fwd(a, v.z), act_fwd(a, v.w));
  }
}

__global__ void bwd_kernel(Act a, float* gx, const float* y, const float* gy, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) gx[i] = act_bwd(a, y[i], gy[i]);
}

__global__ void bwd_kernel4(Act a, float4* gx, const float4* y, const float4* gy, int64_t n4) {
  LOUPE_KERNEL_LOOP(i, n4) {
    float4 v = y[i], g = gy[i];
    gx[i] = make_float4(act_bwd(a, v.x, g.x), act_bwd(a, v.y, g.y), act_bwd(a, v.z, g.z), act_bwd(a, v.w, g.w));
  }
}

// float16 / bfloat16: stored in T, computed in float. Four elements per 8-byte load and store
// where aligned (Pack4), one at a time otherwise.
template <class T>
struct alignas(4 * sizeof(T)) Pack4 {
  T v[4];
};

template <class T>
__global__ void fwd_kernel_t(Act a, T* y, const T* x, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) y[i] = cuda::from_float<T>(act_fwd(a, cuda::to_float(x[i])));
}

template <class T>
__global__ void fwd_kernel_p4(Act a, Pack4<T>* y, const Pack4<T>* x, int64_t n4) {
  LOUPE_KERNEL_LOOP(i, n4) {
    Pack4<T> v = x[i], r;
#pragma unroll
    for (int k = 0; k < 4; ++k) r.v[k] = cuda::from_float<T>(act_fwd(a, cuda::to_float(v.v[k])));
    y[i] = r;
  }
}

template <class T>
__global__ void bwd_kernel_t(Act a, T* gx, const T* y, const T* gy, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) gx[i] = cuda::from_float<T>(act_bwd(a, cuda::to_float(y[i]), cuda::to_float(gy[i])));
}

template <class T>
__global__ void bwd_kernel_p4(Act a, Pack4<T>* gx, const Pack4<T>* y, const Pack4<T>* gy, int64_t n4) {
  LOUPE_KERNEL_LOOP(i, n4) {
    Pack4<T> v = y[i], g = gy[i], r;
#pragma unroll
    for (int k = 0; k < 4; ++k)
      r.v[k] = cuda::from_float<T>(act_bwd(a, cuda::to_float(v.v[k]), cuda::to_float(g.v[k])));
    gx[i] = r;
  }
}

void activation_forward(const ExecContext& ctx, Act a, const Tensor& y, const Tensor& x) {
  cuda::require_float(x, "activation");
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = x.numel();
  cuda::dispatch_float(x.dtype(), "activation", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      if (cuda::vec4_ok(n, {y.data_ptr(), x.data_ptr()}))
        cuda::launch(fwd_kernel4, cuda::blocks_for(n / 4), cuda::kThreads, 0, s, a, static_cast<float4*>(y.data_ptr()),
                     static_cast<const float4*>(x.data_ptr()), n / 4);
      else
        cuda::launch(fwd_kernel, cuda::blocks_for(n), cuda::kThreads, 0, s, a, y.data<float>(), x.data<float>(), n);
    } else {
      if (cuda::vec4_ok(n, {y.data_ptr(), x.data_ptr()}))
        cuda::launch(fwd_kernel_p4<T>, cuda::blocks_for(n / 4), cuda::kThreads, 0, s, a,
                     static_cast<Pack4<T>*>(y.data_ptr()), static_cast<const Pack4<T>*>(x.data_ptr()), n / 4);
      else
        cuda::launch(fwd_kernel_t<T>, cuda::blocks_for(n), cuda::kThreads, 0, s, a, y.data<T>(), x.data<T>(), n);
    }
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

void activation_backward(const ExecContext& ctx, Act a, const Tensor& gx, const Tensor& y, const Tensor& gy) {
  cuda::require_float(y, "activation backward");
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = y.numel();
  cuda::dispatch_float(y.dtype(), "activation backward", [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, float>) {
      if (cuda::vec4_ok(n, {gx.data_ptr(), y.data_ptr(), gy.data_ptr()}))
        cuda::launch(bwd_kernel4, cuda::blocks_for(n / 4), cuda::kThreads, 0, s, a, static_cast<float4*>(gx.data_ptr()),
                     static_cast<const float4*>(y.data_ptr()), static_cast<const float4*>(gy.data_ptr()), n / 4);
      else
        cuda::launch(bwd_kernel, cuda::blocks_for(n), cuda::kThreads, 0, s, a, gx.data<float>(), y.data<float>(),
                     gy.data<float>(), n);
    } else {
      if (cuda::vec4_ok(n, {gx.data_ptr(), y.data_ptr(), gy.data_ptr()}))
        cuda::launch(bwd_kernel_p4<T>, cuda::blocks_for(n / 4), cuda::kThreads, 0, s, a,
                     static_cast<Pack4<T>*>(gx.data_ptr()), static_cast<const Pack4<T>*>(y.data_ptr()),
                     static_cast<const Pack4<T>*>(gy.data_ptr()), n / 4);
      else
        cuda::launch(bwd_kernel_t<T>, cuda::blocks_for(n), cuda::kThreads, 0, s, a, gx.data<T>(), y.data<T>(),
                     gy.data<T>(), n);
    }
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

const ActivationKernels table{activation_forward, activation_backward};
const RegisterBackend<ActivationKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
