// Host cost of issuing single ops on the GPU: microseconds of host time per call, with inputs small
// enough that the GPU keeps up (so the launch queue never fills and the host never waits). This is
// what bounds a launch-bound step (mnist_cnn and cifar10_cnn at batch 128).
//   bench_host [iterations]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "loupe.h"

using namespace loupe;

namespace {
double host_us(const std::function<void()>& f, int iters) {
  for (int i = 0; i < 20; ++i) f();  // warm up: algorithm choice, pool growth
  cuda_runtime()->synchronize();
  double total = 0;
  for (int done = 0; done < iters; done += 100) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 100; ++i) f();
    total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    cuda_runtime()->synchronize();  // outside the timed part: the queue never fills
  }
  return total / iters;
}
}  // namespace

int main(int argc, char** argv) {
  if (!cuda_available()) {
    std::puts("bench_host: no CUDA device");
    return 0;
  }
  int iters = argc > 1 ? std::atoi(argv[1]) : 2000;
  Device d = kCUDA;
  Tensor x = full(Shape{4, 32, 16, 16}, 0.5, DType::f32, d), w = full(Shape{32, 32, 3, 3}, 0.01, DType::f32, d);
  Tensor b = zeros(Shape{32}, DType::f32, d), a = full(Shape{4, 256}, 0.5, DType::f32, d);
  Tensor wl = full(Shape{128, 256}, 0.01, DType::f32, d), bl = zeros(Shape{128}, DType::f32, d);
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  // The raw library calls, on their own handles and the legacy default stream, for comparison.
  cublasHandle_t blas;
  cublasCreate(&blas);
  Tensor out = empty(Shape{4, 128}, DType::f32, d), y = empty(Shape{4, 32, 16, 16}, DType::f32, d);
  Tensor ws = empty(Shape{64 << 20}, DType::u8, d);
  cudnnHandle_t dnn;
  cudnnCreate(&dnn);
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  cudnnCreateTensorDescriptor(&xd);
  cudnnCreateTensorDescriptor(&yd);
  cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 4, 32, 16, 16);
  cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 4, 32, 16, 16);
  cudnnCreateFilterDescriptor(&wd);
  cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 32, 32, 3, 3);
  cudnnCreateConvolutionDescriptor(&cd);
  cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
  cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH);
  struct Case {
    const char* name;
    std::function<void()> f;
  };
  Case cases[] = {
      {"empty 64 KiB (pool alloc + free)", [&] { Tensor t = empty(Shape{16384}, DType::f32, d); }},
      {"fill_ 0 (memset)", [&] { fill_(b, 0.0); }},
      {"relu", [&] { NoGradGuard g; relu(x); }},
      {"relu, recording autograd", [&] { Tensor xr = x.detach().requires_grad_(true); relu(xr); }},
      {"bias_add", [&] { NoGradGuard g; bias_add(x, b); }},
      {"max_pool2d 2x2 (cuDNN)", [&] { NoGradGuard g; max_pool2d(x, Pool2dParams{}); }},
      {"conv2d forward (cuDNN)", [&] { NoGradGuard g; conv2d(x, w, p); }},
      {"conv2d forward + backward", [&] {
         Tensor xr = x.detach().requires_grad_(true), wr = w.detach().requires_grad_(true);
         backward(sum(conv2d(xr, wr, p)));
       }},
      {"linear forward (cuBLAS + bias)", [&] { NoGradGuard g; linear(a, wl, bl); }},
      {"sum_except (bias gradient)", [&] { NoGradGuard g; sum_except(x, 1); }},
      {"matmul [4,256] x [256,128]", [&] { NoGradGuard g; matmul(a, transpose(wl, 0, 1)); }},
      {"raw cublasSgemm, same shape", [&] {
         float one = 1, zero = 0;
         cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, 128, 4, 256, &one, wl.data<float>(), 256, a.data<float>(), 256, &zero,
                     out.data<float>(), 128);
       }},
      {"raw cudaLaunch of an empty memset (cudaMemsetAsync 4 B)", [&] { cudaMemsetAsync(out.data_ptr(), 0, 4, nullptr); }},
      {"raw cudnnConvolutionForward (IMPLICIT_PRECOMP_GEMM)", [&] {
         float one = 1, zero = 0;
         cudnnConvolutionForward(dnn, &one, xd, x.data_ptr(), wd, w.data_ptr(), cd,
                                 CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, ws.data_ptr(), 64 << 20, &zero, yd,
                                 y.data_ptr());
       }},
  };
  std::printf("host microseconds per call on %s (%d calls each, GPU kept idle-ready)\n",
              cuda_runtime()->device_name().c_str(), iters);
  for (const Case& c : cases) std::printf("%8.2f us  %s\n", host_us(c.f, iters), c.name);
  return 0;
}
