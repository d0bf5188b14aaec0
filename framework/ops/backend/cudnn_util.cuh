// cuDNN for the .cu files: a lane's handle, checked calls, and small
// RAII descriptor wrappers.
#pragma once
#include <cudnn.h>

#include "core/cuda_util.cuh"

namespace loupe::cuda {

[[noreturn]] void fail_cudnn(cudnnStatus_t s, const char* call, const char* file, int line);
// The context's lane's cuDNN handle, bound to its stream (made at the lane's first call).
cudnnHandle_t cudnn(const ExecContext& ctx);

// cuDNN's name for a floating dtype: CUDNN_DATA_FLOAT, _DOUBLE, _HALF or _BFLOAT16 (else an Error
// naming `op`).
cudnnDataType_t cudnn_dtype(DType t, const char* op = "cuDNN");

struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  // NCHW, packed; dt float32 unless told (batch norm's per-channel parameters stay float32 for
  // float16/bfloat16 data, as cuDNN requires).
  TensorDesc(int n, int c, int h, int w, DType dt = DType::f32);
  // A 4-D tensor with its own strides (NCHW or NHWC alike: cuDNN reads the layout from them) and
  // its own dtype.
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
