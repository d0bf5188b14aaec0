#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "core/philox.h"
#include "ops/dropout.h"

namespace loupe {
namespace {

// One thread per group of four elements: one Philox call serves all four, as on the CPU.
__global__ void dropout_kernel(float* o, const float* x, int64_t n, float p, float scale, RngDraw rng) {
  const uint64_t seed = rng.seed, offset = cuda::first_counter(rng);
  LOUPE_KERNEL_LOOP(c, (n + 3) / 4) {
    Philox4 r = philox(seed, offset + uint64_t(c), 0);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      int64_t i = c * 4 + k;
      if (i < n) o[i] = uniform01(r.v[k]) >= p ? x[i] * scale : 0.f;
    }
  }
}

// The same mask as dropout_kernel, with one float4 load and store per group (aligned, n % 4 == 0).
__global__ void dropout_kernel4(float4* o, const float4* x, int64_t n4, float p, float scale, RngDraw rng) {
  const uint64_t seed = rng.seed, offset = cuda::first_counter(rng);
  LOUPE_KERNEL_LOOP(c, n4) {
    Philox4 r = philox(seed, offset + uint64_t(c), 0);
    float4 v = x[c];
    o[c] = make_float4(uniform01(r.v[0]) >= p ? v.x * scale : 0.f, uniform01(r.v[1]) >= p ? v.y * scale : 0.f,
                       uniform01(r.v[2]) >= p ? v.z * scale : 0.f, uniform01(r.v[3]) >= p ? v.w * scale : 0.f);
  }
}

// float16 / bfloat16, computed in float: the same keep test on the same Philox words as the float32
// kernels, so every precision drops the same elements. Four elements per 8-byte load and store
// where aligned (Pack4, n % 4 == 0), one group of four per thread otherwise.
template <class T>
struct alignas(4 * sizeof(T)) Pack4 {
  T v[4];
};

template <class T>
__global__ void dropout_kernel_t(T* o, const T* x, int64_t n, float p, float scale, RngDraw rng) {
  const uint64_t seed = rng.seed, offset = cuda::first_counter(rng);
  LOUPE_KERNEL_LOOP(c, (n + 3) / 4) {
    Philox4 r = philox(seed, offset + uint64_t(c), 0);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      int64_t i = c * 4 + k;
      if (i < n) o[i] = cuda::from_float<T>(uniform01(r.v[k]) >= p ? cuda::to_float(x[i]) * scale : 0.f);
    }
  }
}

template <class T>
__global__ void dropout_kernel_p4(Pack4<T>* o, const Pack4<T>* x, int64_t n4, float p, float scale, RngDraw rng) {
  const uint64_t seed = rng.seed, offset = cuda::first_counter(rng);
  LOUPE_KERNEL_LOOP(c, n4) {
    Philox4 r = philox(seed, offset + uint64_t(c), 0);
    Pack4<T> v = x[c], w;
#pragma unroll
    for (int k = 0; k < 4; ++k)
      w.v[k] = cuda::from_float<T>(uniform01(r.v[k]) >= p ? cuda::to_float(v.v[k]) * scale : 0.f);
    o[c] = w;
  }
}

template <class T>
void apply_t(const Tensor& out, const Tensor& in, float p, const RngDraw& rng, cudaStream_t stream) {
  int64_t n = in.numel();
  float scale = 1.f / (1.f - p);
  if (cuda::vec4_ok(n, {out.data_ptr(), in.data_ptr()}))
    cuda::launch(dropout_kernel_p4<T>, cuda::blocks_for(n / 4), cuda::kThreads, 0, stream,
                 static_cast<Pack4<T>*>(out.data_ptr()), static_cast<const Pack4<T>*>(in.data_ptr()), n / 4, p, scale,
                 rng);
  else
    cuda::launch(dropout_kernel_t<T>, cuda::blocks_for((n + 3) / 4), cuda::kThreads, 0, stream, out.data<T>(),
                 in.data<T>(), n, p, scale, rng);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void apply(const ExecContext& ctx, const Tensor& out, const Tensor& in, float p, const RngDraw& rng) {
  cuda::require_float(in, "dropout");
  const cudaStream_t s = cuda::stream(ctx);
  if (in.dtype() == DType::f16) return apply_t<__half>(out, in, p, rng, s);
  if (in.dtype() == DType::bf16) return apply_t<__nv_bfloat16>(out, in, p, rng, s);
  int64_t n = in.numel();
  if (cuda::vec4_ok(n, {out.data_ptr(), in.data_ptr()})) {
    cuda::launch(dropout_kernel4, cuda::blocks_for(n / 4), cuda::kThreads, 0, s, static_cast<float4*>(out.data_ptr()),
                 static_cast<const float4*>(in.data_ptr()), n / 4, p, 1.f / (1.f - p), rng);
    LOUPE_CUDA_LAUNCH_CHECK();
    return;
  }
  cuda::launch(dropout_kernel, cuda::blocks_for((n + 3) / 4), cuda::kThreads, 0, s, out.data<float>(), in.data<float>(),
               n, p, 1.f / (1.f - p), rng);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const DropoutKernels table{apply};
const RegisterBackend<DropoutKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
