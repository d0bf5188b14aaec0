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

void apply(const Tensor& out, const Tensor& in, float p, uint64_t seed, uint64_t offset) {
  cuda::require_f32(in, "dropout");
  int64_t n = in.numel();
  dropout_kernel<<<cuda::blocks_for((n + 3) / 4), cuda::kThreads, 0, cuda::stream()>>>(
      out.data<float>(), in.data<float>(), n, p, 1.f / (1.f - p), seed, offset);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const DropoutKernels table{apply};
const RegisterBackend<DropoutKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
