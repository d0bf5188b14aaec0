// cuDNN for the .cu files: the handle bound to loupe's compute stream, checked calls, and small
// RAII descriptor wrappers.
#pragma once
#include <cudnn.h>

#include "core/cuda_util.cuh"

namespace loupe::cuda {

[[noreturn]] void fail_cudnn(cudnnStatus_t s, const char* call, const char* file, int line);
cudnnHandle_t cudnn();

struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc(int n, int c, int h, int w);
  // A 4-D tensor with its own strides (NCHW or NHWC alike: cuDNN reads the layout from them).
  explicit TensorDesc(const Tensor& t);
  TensorDesc(TensorDesc&& o) noexcept : d(o.d) { o.d = nullptr; }
  ~TensorDesc() {
    if (d) cudnnDestroyTensorDescriptor(d);
  }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};

}  // namespace loupe::cuda

#define LOUPE_CUDNN_CHECK(call)                                                                \
  do {                                                                                         \
    cudnnStatus_t s_ = (call);                                                                 \
    if (s_ != CUDNN_STATUS_SUCCESS) ::loupe::cuda::fail_cudnn(s_, #call, __FILE__, __LINE__);  \
  } while (0)
