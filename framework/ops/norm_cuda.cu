// cuDNN batch normalisation, spatial mode: x [N, C, ...] is described as [N, C, HW, 1]. x, y and
// their gradients are float32, float16 or bfloat16; the weight, bias, running and saved statistics
// and their gradients are float32 whatever x is (cuDNN's rule for half data).
#include "core/dispatch.h"
#include "ops/backend/cudnn_util.cuh"
#include "ops/norm.h"

namespace loupe {
namespace {

// x [N, C, HW, 1] in x's storage type (cuda::TensorDesc describes float32: re-set for the others).
cuda::TensorDesc data_desc(const Tensor& x, int64_t N, int64_t C, int64_t HW) {
  cuda::TensorDesc d(int(N), int(C), int(HW), 1);
  if (x.dtype() != DType::f32) {
    cudnnDataType_t t = x.dtype() == DType::f16 ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16;
    LOUPE_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.d, CUDNN_TENSOR_NCHW, t, int(N), int(C), int(HW), 1));
  }
  return d;
}

void check_types(const Tensor& x, std::initializer_list<const Tensor*> params, const char* op) {
  cuda::require_float(x, op);
  for (const Tensor* p : params)
    LOUPE_CHECK(p->dtype() == DType::f32, op, " on CUDA: weight, bias and statistics must be float32 (also for ",
                dtype_name(x.dtype()), " input), got ", dtype_name(p->dtype()));
}

void forward_train(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                   const Tensor& rmean, const Tensor& rvar, const Tensor& save_mean, const Tensor& save_invstd,
                   double momentum, double eps, int64_t N, int64_t C, int64_t HW) {
  check_types(x, {&w, &b, &rmean, &rvar, &save_mean, &save_invstd}, "batch_norm");
  cuda::TensorDesc xd = data_desc(x, N, C, HW), pd(1, int(C), 1, 1);
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      cuda::cudnn(ctx), CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd.d, x.data_ptr(), xd.d, y.data_ptr(), pd.d,
      w.data_ptr(), b.data_ptr(), momentum, rmean.data_ptr(), rvar.data_ptr(), eps, save_mean.data_ptr(),
      save_invstd.data_ptr()));
}

void forward_eval(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                  const Tensor& rmean, const Tensor& rvar, double eps, int64_t N, int64_t C, int64_t HW) {
  check_types(x, {&w, &b, &rmean, &rvar}, "batch_norm");
  cuda::TensorDesc xd = data_desc(x, N, C, HW), pd(1, int(C), 1, 1);
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(cuda::cudnn(ctx), CUDNN_BATCHNORM_SPATIAL, &one, &zero,
                                                            xd.d, x.data_ptr(), xd.d, y.data_ptr(), pd.d,
                                                            w.data_ptr(), b.data_ptr(), rmean.data_ptr(),
                                                            rvar.data_ptr(), eps));
}

void norm_backward(const ExecContext& ctx, const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& x,
                   const Tensor& w, const Tensor& save_mean, const Tensor& save_invstd, const Tensor& gy, double eps,
                   int64_t N, int64_t C, int64_t HW) {
  check_types(x, {&gw, &gb, &w, &save_mean, &save_invstd}, "batch_norm backward");
  LOUPE_CHECK(gy.dtype() == x.dtype(), "batch_norm backward on CUDA: gradient ", dtype_name(gy.dtype()), " for ",
              dtype_name(x.dtype()), " input");
  cuda::TensorDesc xd = data_desc(x, N, C, HW), pd(1, int(C), 1, 1);
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnBatchNormalizationBackward(cuda::cudnn(ctx), CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one,
                                                    &zero, xd.d, x.data_ptr(), xd.d, gy.data_ptr(), xd.d, gx.data_ptr(),
                                                    pd.d, w.data_ptr(), gw.data_ptr(), gb.data_ptr(), eps,
                                                    save_mean.data_ptr(), save_invstd.data_ptr()));
}

const NormKernels table{forward_train, forward_eval, norm_backward};
const RegisterBackend<NormKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
