// `loupe peak`: what this GPU really reaches in fp32, by an FMA loop (arithmetic only) and by a
// large cuBLAS SGEMM, timed with CUDA events.
#include "core/cuda_util.cuh"
#include "core/gpu_timer.h"
#include "instrument/peak.h"

namespace loupe::instrument {
namespace {

constexpr int kIters = 4096;

// Eight independent FMA chains per thread keep the pipelines full; the result is stored so the
// compiler cannot drop the loop.
__global__ void fma_loop(float* out, float a, float b) {
  float x[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) x[k] = threadIdx.x * 1e-3f + k;
  for (int i = 0; i < kIters; ++i) {
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = fmaf(x[k], a, b);
  }
  float s = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += x[k];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// Milliseconds per call of f after one warm-up call, events around `reps` calls (no hold before
// them: the launches are few and long).
double time_ms(cudaStream_t s, const std::function<void()>& f, int reps) {
  f();  // warm-up
  const auto queue = [&] {
    f();
    return true;
  };
  return cuda::time_on_gpu(s, reps, 0, queue) / 1000.0;
}

MeasuredPeak measure_peak() {
  const cudaStream_t s = cuda::stream();
  int sms = 0, dev = 0;
  LOUPE_CUDA_CHECK(cudaGetDevice(&dev));
  LOUPE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  unsigned blocks = unsigned(sms) * 8, threads = 256;
  float* out = nullptr;
  LOUPE_CUDA_CHECK(cudaMallocAsync(&out, size_t(blocks) * threads * sizeof(float), s));
  MeasuredPeak p;
  double ms = time_ms(s, [&] { fma_loop<<<blocks, threads, 0, s>>>(out, 0.999f, 0.001f); }, 10);
  LOUPE_CUDA_LAUNCH_CHECK();
  p.fma_tflops = 2.0 * 8 * kIters * double(blocks) * threads / (ms * 1e-3) / 1e12;
  LOUPE_CUDA_CHECK(cudaFreeAsync(out, s));

  const int n = 8192;
  float *A, *B, *C;
  size_t bytes = size_t(n) * n * sizeof(float);
  LOUPE_CUDA_CHECK(cudaMallocAsync(&A, bytes, s));
  LOUPE_CUDA_CHECK(cudaMallocAsync(&B, bytes, s));
  LOUPE_CUDA_CHECK(cudaMallocAsync(&C, bytes, s));
  LOUPE_CUDA_CHECK(cudaMemsetAsync(A, 0x3c, bytes, s));  // ~0.01 in every element: no denormals
  LOUPE_CUDA_CHECK(cudaMemsetAsync(B, 0x3c, bytes, s));
  float alpha = 1, beta = 0;
  ms = time_ms(
      s,
      [&] {
        LOUPE_CUBLAS_CHECK(
            cublasSgemm(cuda::cublas(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, A, n, B, n, &beta, C, n));
      },
      5);
  p.sgemm_tflops = 2.0 * double(n) * n * n / (ms * 1e-3) / 1e12;
  cudaFreeAsync(A, s);
  cudaFreeAsync(B, s);
  cudaFreeAsync(C, s);
  LOUPE_CUDA_CHECK(cudaStreamSynchronize(s));
  return p;
}

struct Registrar {
  Registrar() { register_gpu_peak_measurer(measure_peak); }
} g_registrar;

}  // namespace
}  // namespace loupe::instrument
