#include <mutex>
#include <string>

#include "ops/backend/cudnn_util.cuh"

namespace loupe::cuda {

void fail_cudnn(cudnnStatus_t s, const char* call, const char* file, int line) {
  std::string msg = std::string("cuDNN error ") + cudnnGetErrorString(s) + " in " + call + " at " + file + ":" +
                    std::to_string(line);
  if (s == CUDNN_STATUS_ALLOC_FAILED) msg += "\nHINT: the GPU is out of memory; try a smaller --batch";
  if (s == CUDNN_STATUS_NOT_SUPPORTED) msg += "\nHINT: this shape or layout is not supported by this cuDNN";
  throw Error(msg);
}

cudnnHandle_t cudnn(const ExecContext& ctx) {
  ExecLane& l = lane(ctx);
  std::call_once(l.cudnn_once, [&l] {
    LOUPE_CUDNN_CHECK(cudnnCreate(&l.cudnn));
    LOUPE_CUDNN_CHECK(cudnnSetStream(l.cudnn, l.stream));
  });
  return l.cudnn;
}

cudnnDataType_t cudnn_dtype(DType t, const char* op) {
  switch (t) {
    case DType::f32: return CUDNN_DATA_FLOAT;
    case DType::f64: return CUDNN_DATA_DOUBLE;
    case DType::f16: return CUDNN_DATA_HALF;
    case DType::bf16: return CUDNN_DATA_BFLOAT16;
    default: LOUPE_FAIL(op, " on CUDA needs a floating dtype, got ", dtype_name(t));
  }
}

TensorDesc::TensorDesc(int n, int c, int h, int w, DType dt) {
  cudnnDataType_t t = cudnn_dtype(dt);  // before creating: a throw here leaks nothing
  LOUPE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
  LOUPE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, t, n, c, h, w));
}

TensorDesc::TensorDesc(const Tensor& t) {
  LOUPE_CHECK(t.dim() == 4, "cuDNN descriptor: a 4-D tensor, got ", t.shape().str());
  cudnnDataType_t dt = cudnn_dtype(t.dtype());
  LOUPE_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
  LOUPE_CUDNN_CHECK(cudnnSetTensor4dDescriptorEx(d, dt, int(t.size(0)), int(t.size(1)), int(t.size(2)),
                                                 int(t.size(3)), int(t.strides()[0]), int(t.strides()[1]),
                                                 int(t.strides()[2]), int(t.strides()[3])));
}

}  // namespace loupe::cuda
