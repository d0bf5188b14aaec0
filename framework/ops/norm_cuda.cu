// cuDNN batch normalisation, spatial mode: x [N, C, ...] is described as [N, C, HW, 1].
#include "core/dispatch.h"
#include "ops/cudnn_util.cuh"
#include "ops/norm.h"

namespace loupe {
namespace {

void forward_train(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rmean,
                   const Tensor& rvar, const Tensor& save_mean, const Tensor& save_invstd, double momentum, double eps,
                   int64_t N, int64_t C, int64_t HW) {
  cuda::require_f32(x, "batch_norm");
  cuda::TensorDesc xd(int(N), int(C), int(HW), 1), pd(1, int(C), 1, 1);
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
      cuda::cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, xd.d, x.data_ptr(), xd.d, y.data_ptr(), pd.d,
      w.data_ptr(), b.data_ptr(), momentum, rmean.data_ptr(), rvar.data_ptr(), eps, save_mean.data_ptr(),
      save_invstd.data_ptr()));
}

void forward_eval(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& rmean,
                  const Tensor& rvar, double eps, int64_t N, int64_t C, int64_t HW) {
  cuda::require_f32(x, "batch_norm");
  cuda::TensorDesc xd(int(N), int(C), int(HW), 1), pd(1, int(C), 1, 1);
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(cuda::cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero,
                                                            xd.d, x.data_ptr(), xd.d, y.data_ptr(), pd.d,
                                                            w.data_ptr(), b.data_ptr(), rmean.data_ptr(),
                                                            rvar.data_ptr(), eps));
}

void backward(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& x, const Tensor& w,
              const Tensor& save_mean, const Tensor& save_invstd, const Tensor& gy, double eps, int64_t N, int64_t C,
              int64_t HW) {
  cuda::require_f32(x, "batch_norm backward");
  cuda::TensorDesc xd(int(N), int(C), int(HW), 1), pd(1, int(C), 1, 1);
  float one = 1, zero = 0;
  LOUPE_CUDNN_CHECK(cudnnBatchNormalizationBackward(cuda::cudnn(), CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero,
                                                    xd.d, x.data_ptr(), xd.d, gy.data_ptr(), xd.d, gx.data_ptr(),
                                                    pd.d, w.data_ptr(), gw.data_ptr(), gb.data_ptr(), eps,
                                                    save_mean.data_ptr(), save_invstd.data_ptr()));
}

const NormKernels table{forward_train, forward_eval, backward};
const RegisterBackend<NormKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
