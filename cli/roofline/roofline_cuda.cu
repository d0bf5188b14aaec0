// The GPU half of `loupe roofline`: y = A x (A n x n float32, row-major) by cuBLAS sgemv, by a
// naive kernel and by ours, each timed with CUDA events; and the copy bandwidth they are judged by.
#include <algorithm>
#include <functional>

#include "core/cuda_runtime.h"
#include "core/cuda_util.cuh"
#include "cli/roofline/roofline.h"

namespace loupe::cli {
namespace {

// Naive: one thread per row, walking it. Neighbouring threads read addresses n floats apart, so
// every load is its own memory transaction (as in the 2017 study's baseline).
__global__ void gemv_naive(const float* A, const float* x, float* y, int64_t n) {
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.f;
  for (int64_t j = 0; j < n; ++j) s += A[i * n + j] * x[j];
  y[i] = s;
}

// Ours: one warp per row. Lanes read consecutive 16-byte pieces of the row (each warp load is 512
// contiguous bytes), A with streaming loads (read once: no point keeping it in L2, where x
// stays), several loads in flight per lane; then a shuffle reduction. n % 4 == 0 and 16-byte
// aligned rows; the scalar loop covers any other n.
__global__ void gemv_warp(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ y,
                          int64_t n) {
  int64_t row = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  int lane = threadIdx.x % 32;
  if (row >= n) return;
  const float* a = A + row * n;
  float s = 0.f;
  if (n % 4 == 0) {
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* x4 = reinterpret_cast<const float4*>(x);
    int64_t n4 = n / 4;
#pragma unroll 4
    for (int64_t k = lane; k < n4; k += 32) {
      float4 v = __ldcs(a4 + k), w = __ldg(x4 + k);
      s += v.x * w.x + v.y * w.y + v.z * w.z + v.w * w.w;
    }
  } else {
    for (int64_t k = lane; k < n; k += 32) s += a[k] * x[k];
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if (lane == 0) y[row] = s;
}

// Milliseconds per call of f on the stream: a warm-up, then repetitions for at least min_seconds
// in batches timed by events; the median batch.
double time_call(cudaStream_t st, const std::function<void()>& f, double min_seconds) {
  cudaEvent_t a, b;
  LOUPE_CUDA_CHECK(cudaEventCreate(&a));
  LOUPE_CUDA_CHECK(cudaEventCreate(&b));
  f();
  LOUPE_CUDA_CHECK(cudaStreamSynchronize(st));
  std::vector<double> per;
  double total = 0;
  int reps = 1;
  while (total < min_seconds * 1e3 || per.size() < 3) {
    LOUPE_CUDA_CHECK(cudaEventRecord(a, st));
    for (int i = 0; i < reps; ++i) f();
    LOUPE_CUDA_CHECK(cudaEventRecord(b, st));
    LOUPE_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    LOUPE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    per.push_back(double(ms) / reps);
    total += ms;
    if (ms < 1.f) reps *= 2;  // small products: batch them so event resolution does not matter
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

double copy_bandwidth() {
  const size_t bytes = size_t(1) << 30;
  float *src = nullptr, *dst = nullptr;
  LOUPE_CUDA_CHECK(cudaMalloc(&src, bytes));
  LOUPE_CUDA_CHECK(cudaMalloc(&dst, bytes));
  LOUPE_CUDA_CHECK(cudaMemset(src, 0, bytes));
  const cudaStream_t st = cuda::stream();
  double ms = time_call(st, [&] { LOUPE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, st)); },
                        0.1);
  cudaFree(src);
  cudaFree(dst);
  return 2.0 * double(bytes) / (ms * 1e-3);
}

std::vector<GpuGemvResult> run(int64_t n, const float* A, const float* x, double min_seconds) {
  const size_t nn = size_t(n) * size_t(n);
  float *dA = nullptr, *dx = nullptr, *dy = nullptr;
  LOUPE_CUDA_CHECK(cudaMalloc(&dA, nn * sizeof(float)));
  LOUPE_CUDA_CHECK(cudaMalloc(&dx, size_t(n) * sizeof(float)));
  LOUPE_CUDA_CHECK(cudaMalloc(&dy, size_t(n) * sizeof(float)));
  LOUPE_CUDA_CHECK(cudaMemcpy(dA, A, nn * sizeof(float), cudaMemcpyHostToDevice));
  LOUPE_CUDA_CHECK(cudaMemcpy(dx, x, size_t(n) * sizeof(float), cudaMemcpyHostToDevice));
  const cudaStream_t st = cuda::stream();
  cublasHandle_t h = cuda::cublas();
  LOUPE_CUBLAS_CHECK(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
  struct Impl {
    const char* name;
    std::function<void()> f;
  };
  const float one = 1.f, zero = 0.f;
  const unsigned warp_blocks = unsigned((n * 32 + 255) / 256);
  Impl impls[] = {
      // Row-major A is column-major A^T: y = (A^T)^T x.
      {"cublas_sgemv", [&] { LOUPE_CUBLAS_CHECK(cublasSgemv(h, CUBLAS_OP_T, int(n), int(n), &one, dA, int(n), dx, 1, &zero, dy, 1)); }},
      {"gpu_naive", [&] { gemv_naive<<<cuda::blocks_for(n), cuda::kThreads, 0, st>>>(dA, dx, dy, n); }},
      {"gpu_ours", [&] { gemv_warp<<<warp_blocks, 256, 0, st>>>(dA, dx, dy, n); }},
  };
  std::vector<GpuGemvResult> out;
  for (const Impl& im : impls) {
    LOUPE_CUDA_CHECK(cudaMemsetAsync(dy, 0, size_t(n) * sizeof(float), st));
    GpuGemvResult r;
    r.impl = im.name;
    r.seconds = time_call(st, im.f, min_seconds) * 1e-3;
    LOUPE_CUDA_LAUNCH_CHECK();
    r.y.resize(size_t(n));
    LOUPE_CUDA_CHECK(cudaMemcpyAsync(r.y.data(), dy, size_t(n) * sizeof(float), cudaMemcpyDeviceToHost, st));
    LOUPE_CUDA_CHECK(cudaStreamSynchronize(st));
    out.push_back(std::move(r));
  }
  cudaFree(dA);
  cudaFree(dx);
  cudaFree(dy);
  return out;
}

std::optional<GpuRoofline> make() {
  if (!cuda_available()) return std::nullopt;
  GpuRoofline g;
  g.device_name = cuda_runtime()->device_name();
  g.copy_bandwidth = copy_bandwidth;
  g.run = run;
  return g;
}

struct Registrar {
  Registrar() { register_gpu_roofline(make); }
} g_registrar;

}  // namespace
}  // namespace loupe::cli
