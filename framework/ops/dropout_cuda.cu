#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "core/philox.h"
#include "ops/dropout.h"

namespace loupe {
namespace {

// One thread per group of four elements: one Philox call serves all four, as on the CPU.
__global__ void dropout_kernel(float* o, const float* x, int64_t n, float p, float scale, uint64_t seed,
                               uint64_t offset) {
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
__global__ void dropout_kernel4(float4* o, const float4* x, int64_t n4, float p, float scale, uint64_t seed,
                                uint64_t offset) {
  LOUPE_KERNEL_LOOP(c, n4) {
    Philox4 r = philox(seed, offset + uint64_t(c), 0);
    float4 v = x[c];
    o[c] = make_float4(uniform01(r.v[0]) >= p ? v.x * scale : 0.f, uniform01(r.v[1]) >= p ? v.y * scale : 0.f,
                       uniform01(r.v[2]) >= p ? v.z * scale : 0.f, uniform01(r.v[3]) >= p ? v.w * scale : 0.f);
  }
}

void apply(const Tensor& out, const Tensor& in, float p, uint64_t seed, uint64_t offset) {
  cuda::require_f32(in, "dropout");
  int64_t n = in.numel();
  if (cuda::vec4_ok(n, {out.data_ptr(), in.data_ptr()})) {
    dropout_kernel4<<<cuda::blocks_for(n / 4), cuda::kThreads, 0, cuda::stream()>>>(
        static_cast<float4*>(out.data_ptr()), static_cast<const float4*>(in.data_ptr()), n / 4, p, 1.f / (1.f - p),
        seed, offset);
    LOUPE_CUDA_LAUNCH_CHECK();
    return;
  }
  dropout_kernel<<<cuda::blocks_for((n + 3) / 4), cuda::kThreads, 0, cuda::stream()>>>(
      out.data<float>(), in.data<float>(), n, p, 1.f / (1.f - p), seed, offset);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const DropoutKernels table{apply};
const RegisterBackend<DropoutKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
