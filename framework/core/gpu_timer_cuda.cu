#include "core/gpu_timer.h"

#include "core/cuda_util.cuh"

namespace loupe::cuda {
namespace {
__global__ void hold(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
}  // namespace

float time_on_gpu(cudaStream_t s, int runs, long long hold_cycles, const std::function<bool()>& run) {
  cudaEvent_t e0, e1;
  LOUPE_CUDA_CHECK(cudaEventCreate(&e0));
  LOUPE_CUDA_CHECK(cudaEventCreate(&e1));
  hold<<<1, 1, 0, s>>>(hold_cycles);
  LOUPE_CUDA_LAUNCH_CHECK();
  LOUPE_CUDA_CHECK(cudaEventRecord(e0, s));
  bool ok = true;
  for (int i = 0; i < runs && ok; ++i) ok = run();
  LOUPE_CUDA_CHECK(cudaEventRecord(e1, s));
  LOUPE_CUDA_CHECK(cudaEventSynchronize(e1));
  float ms = 0;
  LOUPE_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return ok ? 1000.f * ms / float(runs) : -1.f;
}

}  // namespace loupe::cuda
