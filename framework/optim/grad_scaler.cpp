#include "autograd/node.h"
#include "ops/view.h"
#include "optim/grad_scaler.h"

#include <cmath>
#include <vector>

#include "core/dispatch.h"
#include "ops/elementwise.h"

namespace loupe::optim {

GradScaler::GradScaler(Device d, GradScalerOptions o) : opt_(o) {
  LOUPE_CHECK(o.init_scale > 0 && std::isfinite(o.init_scale), "GradScaler: the initial scale must be positive, got ",
              o.init_scale);
  LOUPE_CHECK(o.growth_factor > 1, "GradScaler: growth_factor must be above 1, got ", o.growth_factor);
  LOUPE_CHECK(o.backoff_factor > 0 && o.backoff_factor < 1, "GradScaler: backoff_factor must be in (0, 1), got ",
              o.backoff_factor);
  LOUPE_CHECK(o.growth_interval >= 1, "GradScaler: growth_interval must be at least 1, got ", o.growth_interval);
  state_ = from_vector(std::vector<float>{float(o.init_scale), 0.f, 0.f, 0.f}, Shape{4}, d);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  LOUPE_CHECK(loss.device() == state_.device(), "GradScaler: the loss is on ", loss.device().str(),
              ", the scaler on ", state_.device().str());
  Tensor s = slice(state_, 0, kScale, kScale + 1);
  if (loss.dtype() != DType::f32) s = to(s, loss.dtype());
  return mul(loss, loss.dim() == 0 ? reshape(s, Shape{}) : s);
}

float* GradScaler::found_inf_flag() const { return state_.data<float>() + kFoundInf; }

Tensor GradScaler::seed() const { return reshape(slice(state_, 0, kScale, kScale + 1), Shape{}); }

void GradScaler::backward(const Tensor& loss) {
  // Several backward() calls before a check_() (gradients accumulated over micro-batches) add up
  // their ranges: a range trusted by one and dirtied by another is read.
  if (!source_) source_.emplace(found_inf_flag(), state_.device());
  try {
    autograd::SourceCheckScope open(*source_);
    // A float32 scalar loss: the backward pass is seeded with the scale itself (a view of the
    // state), the gradient of loss * scale without the product, the ones and the product's backward
    // (three small kernels of a graphed step). 1 * scale is scale, so the gradients are the same bits.
    if (loss.dtype() == DType::f32 && loss.numel() == 1 && loss.requires_grad() && loss.device() == state_.device())
      loupe::backward(loss, reshape(seed(), loss.shape()));
    else
      loupe::backward(scale(loss));
  } catch (...) {
    source_.reset();  // a backward cut short vouches for nothing
    throw;
  }
}

void GradScaler::check_(const Tensor& grads) {
  LOUPE_CHECK(grads.device() == state_.device() && grads.dtype() == DType::f32 && grads.is_contiguous(),
              "GradScaler::check_ needs contiguous float32 gradients on ", state_.device().str(), ", got ",
              dtype_name(grads.dtype()), " on ", grads.device().str());
  Tensor flat = reshape(grads, Shape{grads.numel()});
  // What the last backward() checked at the source is not read again. Trusted ranges are shrunk
  // to multiples of 4 elements, so that each range read starts 16-byte aligned in an arena.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  if (source_) ranges = source_->unchecked_ranges(flat, 4);
  else ranges.emplace_back(0, flat.numel());
  source_.reset();
  const ScalerKernels& k = kernels<ScalerKernels>(grads.device());
  const ExecContext ctx = current_context();
  for (const auto& [b, e] : ranges)
    if (e > b) k.check(ctx, slice(flat, 0, b, e), state_);
}

void GradScaler::update() {
  kernels<ScalerKernels>(state_.device())
      .update(current_context(), state_, float(opt_.growth_factor), float(opt_.backoff_factor), opt_.growth_interval);
}

double GradScaler::current_scale() const { return state_.to_vector<float>()[kScale]; }
int64_t GradScaler::skipped_steps() const { return int64_t(state_.to_vector<float>()[kSkipped]); }
bool GradScaler::found_inf() const { return state_.to_vector<float>()[kFoundInf] != 0.f; }

}  // namespace loupe::optim
