// cuDNN pooling (max: padding ignored; average: padding excluded from the count).
#include "core/dispatch.h"
#include "ops/cudnn_util.cuh"
#include "ops/pool.h"

namespace loupe {
namespace {

struct PoolDesc {
  cudnnPoolingDescriptor_t d = nullptr;
  PoolDesc(PoolMode m, const Pool2dParams& p) {
    LOUPE_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d));
    cudnnPoolingMode_t mode = m == PoolMode::Max ? CUDNN_POOLING_MAX_DETERMINISTIC
                                                 : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    LOUPE_CUDNN_CHECK(cudnnSetPooling2dDescriptor(d, mode, CUDNN_NOT_PROPAGATE_NAN, p.kernel_h, p.kernel_w, p.pad_h,
                                                  p.pad_w, p.stride_h, p.stride_w));
  }
  ~PoolDesc() { cudnnDestroyPoolingDescriptor(d); }
};

cuda::TensorDesc desc(const Tensor& t) {
  return cuda::TensorDesc(int(t.size(0)), int(t.size(1)), int(t.size(2)), int(t.size(3)));
}

void forward(PoolMode m, const Tensor& y, const Tensor& x, const Pool2dParams& p) {
  cuda::require_f32(x, "pooling");
  PoolDesc pd(m, p);
  cuda::TensorDesc xd = desc(x), yd = desc(y);
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnPoolingForward(cuda::cudnn(), pd.d, &one, xd.d, x.data_ptr(), &zero, yd.d, y.data_ptr()));
}

void backward(PoolMode m, const Tensor& gx, const Tensor& x, const Tensor& y, const Tensor& gy,
              const Pool2dParams& p) {
  cuda::require_f32(x, "pooling backward");
  PoolDesc pd(m, p);
  cuda::TensorDesc xd = desc(x), yd = desc(y);
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnPoolingBackward(cuda::cudnn(), pd.d, &one, yd.d, y.data_ptr(), yd.d, gy.data_ptr(), xd.d,
                                         x.data_ptr(), &zero, xd.d, gx.data_ptr()));
}

const PoolKernels table{forward, backward};
const RegisterBackend<PoolKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
