#include "nn/arena.h"

#include "autograd/node.h"
#include "core/error.h"

namespace loupe::nn {

namespace {
// Each parameter starts on a 64-element boundary (256 bytes in fp32): aligned vector access.
constexpr int64_t kAlign = 64;
int64_t round_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

void rebind(const Tensor& param, const Tensor& arena, int64_t offset) {
  TensorImpl* p = param.impl();
  p->storage = arena.impl()->storage;
  p->offset = offset;
  p->strides = contiguous_strides(p->shape);
}
}  // namespace

ParameterArena::ParameterArena(const std::vector<Tensor>& params, Device d) : params_(params) {
  int64_t total = 0;
  for (const Tensor& p : params) {
    LOUPE_CHECK(p.dtype() == DType::f32, "parameters are float32 (master weights); ", p.name(), " is ",
                dtype_name(p.dtype()));
    total += round_up(p.numel());
    used_ += p.numel();
  }
  values_ = zeros(Shape{total}, DType::f32, d);
  grads_ = zeros(Shape{total}, DType::f32, d);
  NoGradGuard g;
  int64_t off = 0;
  for (const Tensor& p : params) {
    Tensor dst = values_.slice(0, off, off + p.numel()).reshape(p.shape());
    copy_(dst, p.to(d));
    rebind(p, values_, off);
    Tensor grad = as_strided(grads_, p.shape(), contiguous_strides(p.shape()), off);
    p.impl()->grad = grad.impl_ptr();
    off += round_up(p.numel());
  }
}

void ParameterArena::zero_grad() { fill_(grads_, 0.0); }

}  // namespace loupe::nn
