#include "nn/arena.h"

#include <unordered_map>

#include "autograd/node.h"
#include "core/copy.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "ops/view.h"

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
    Tensor dst = reshape(slice(values_, 0, off, off + p.numel()), p.shape());
    copy_(dst, to(p, d));
    rebind(p, values_, off);
    Tensor grad = as_strided(grads_, p.shape(), contiguous_strides(p.shape()), off);
    p.impl()->grad = grad.impl_ptr();
    off += round_up(p.numel());
  }
}

void ParameterArena::zero_grad() { fill_(grads_, 0.0); }

namespace {
// Parameter -> its compute-copy view (parameters outlive their arena's registrations: the arena
// removes them when it goes).
std::unordered_map<const TensorImpl*, Tensor>& views() {
  static std::unordered_map<const TensorImpl*, Tensor> m;
  return m;
}
}  // namespace

ParameterArena::~ParameterArena() {
  for (const Tensor& p : params_) views().erase(p.impl());
}

void ParameterArena::enable_compute_copy(DType t, const std::vector<Tensor>& float32_only) {
  LOUPE_CHECK(t == DType::f16 || t == DType::bf16, "the compute copy is float16 or bfloat16, not ", dtype_name(t));
  if (compute_.defined() && compute_.dtype() == t) return refresh_compute_copy();
  auto kept = [&](const Tensor& p) {
    for (const Tensor& k : float32_only)
      if (k.impl() == p.impl()) return true;
    return false;
  };
  int64_t total = 0;
  for (const Tensor& p : params_)
    if (!kept(p)) total += round_up(p.numel());
  for (const Tensor& p : params_) views().erase(p.impl());
  compute_params_.clear();
  compute_runs_.clear();
  compute_ = empty(Shape{total}, t, values_.device());
  int64_t src = 0, dst = 0;
  for (const Tensor& p : params_) {
    int64_t n = round_up(p.numel());
    if (!kept(p)) {
      Tensor v = as_strided(compute_, p.shape(), contiguous_strides(p.shape()), dst);
      v.requires_grad_(true);
      v.impl()->grad = p.impl()->grad;  // the float32 gradient slice
      compute_params_.push_back(v);
      views()[p.impl()] = v;
      Run* last = compute_runs_.empty() ? nullptr : &compute_runs_.back();
      if (last && last->src + last->n == src)
        last->n += n;
      else
        compute_runs_.push_back({src, dst, n});
      dst += n;
    }
    src += n;
  }
  refresh_compute_copy();
}

void ParameterArena::disable_compute_copy() {
  for (const Tensor& p : params_) views().erase(p.impl());
  compute_params_.clear();
  compute_runs_.clear();
  compute_ = Tensor();
}

void ParameterArena::refresh_compute_copy() {
  if (!compute_.defined()) return;
  const CopyKernels& k = kernels<CopyKernels>(compute_.device());
  const ExecContext ctx = current_context();
  for (const Run& r : compute_runs_)  // usually one: only float32-only parameters split the arena
    k.cast(ctx, slice(compute_, 0, r.dst, r.dst + r.n), slice(values_, 0, r.src, r.src + r.n));
}

Tensor compute_view(const Tensor& p, DType t) {
  auto it = views().find(p.impl());
  return it != views().end() && it->second.dtype() == t ? it->second : Tensor();
}

}  // namespace loupe::nn
