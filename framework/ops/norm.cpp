#include "ops/norm.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/view.h"

namespace loupe {

namespace {
struct BatchNormBackward : autograd::Node {
  Tensor x, w, save_mean, save_invstd;
  double eps = 0;
  int64_t N = 0, C = 0, HW = 0;
  const char* name() const override { return "BatchNormBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gx = empty(x.shape(), x.dtype(), x.device());
    Tensor gw = empty(w.shape(), w.dtype(), w.device()), gb = empty(w.shape(), w.dtype(), w.device());
    kernels<NormKernels>(x.device()).backward(current_context(), gx, gw, gb, x, w, save_mean, save_invstd,
                                              contiguous(g[0]), eps, N, C, HW);
    add_flops(8.0 * double(x.numel()));
    return {gx, gw, gb};
  }
  void release() override { x = w = save_mean = save_invstd = Tensor(); }
};
}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                  const Tensor& running_var, bool training, double momentum, double eps) {
  OpScope scope_("batch_norm", {&x, &weight, &bias});
  LOUPE_CHECK(x.dim() >= 2, "batch_norm needs x [N, C, ...], got ", x.shape().str());
  int64_t N = x.size(0), C = x.size(1), HW = C ? x.numel() / (N * C) : 0;
  // Parameters and statistics: x's dtype, float32 for a float16/bfloat16 x (the saved ones too).
  bool half = x.dtype() == DType::f16 || x.dtype() == DType::bf16;
  DType stat = half ? DType::f32 : x.dtype();
  for (const Tensor* t : {&weight, &bias, &running_mean, &running_var}) {
    LOUPE_CHECK(t->dim() == 1 && t->size(0) == C && t->device() == x.device() && t->is_contiguous(),
                "batch_norm: parameters and statistics must be contiguous [", C, "] on ", x.device().str());
    LOUPE_CHECK(t->dtype() == stat, "batch_norm: parameters and statistics must be ", dtype_name(stat), " for ",
                dtype_name(x.dtype()), " input, got ", dtype_name(t->dtype()));
  }
  LOUPE_CHECK(eps >= 1e-5, "batch_norm: eps must be at least 1e-5 (cuDNN's minimum), got ", eps);
  Tensor xc = contiguous(x);
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  if (!training) {
    LOUPE_CHECK(!autograd::needs_grad({&x, &weight, &bias}),
                "batch_norm in evaluation mode records no gradients; call it under NoGradGuard or in training mode");
    kernels<NormKernels>(x.device()).forward_eval(current_context(), y, xc, weight, bias, running_mean, running_var,
                                                  eps, N, C, HW);
    add_flops(2.0 * double(x.numel()));
    return scope_.result(y);
  }
  LOUPE_CHECK(N * HW > 1, "batch_norm in training needs more than one value per channel, got ", x.shape().str());
  Tensor mean = empty(Shape{C}, stat, x.device()), invstd = empty(Shape{C}, stat, x.device());
  kernels<NormKernels>(x.device()).forward_train(current_context(), y, xc, weight, bias, running_mean, running_var,
                                                 mean, invstd, momentum, eps, N, C, HW);
  add_flops(6.0 * double(x.numel()));
  if (autograd::needs_grad({&x, &weight, &bias})) {
    auto n = std::make_shared<BatchNormBackward>();
    n->x = xc.detach();
    n->w = weight.detach();
    n->save_mean = mean;
    n->save_invstd = invstd;
    n->eps = eps;
    n->N = N;
    n->C = C;
    n->HW = HW;
    autograd::record(n, {&x, &weight, &bias}, {&y});
  }
  return scope_.result(y);
}

}  // namespace loupe
