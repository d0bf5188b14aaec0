// Dynamic loss scaling for float16 training, with the rule of PyTorch's GradScaler, kept entirely
// on the device so that no step waits for the host:
//   the loss is multiplied by `scale` before backward (backward() runs it so);
//   found_inf is raised if any float32 gradient is inf or NaN: by the ops that add into a
//   gradient in place, for what they write, while backward() runs (autograd/source_check.h), and
//   by check_(), a read-only pass over the rest of the gradient arena;
//   the optimizer (Optimizer::set_scaler) skips its update while found_inf is set, and otherwise
//   divides each gradient by the scale as it reads it (times 1 / scale, as PyTorch's unscale_):
//   the division happens there, not in a pass of its own;
//   update(): on found_inf, scale *= backoff (0.5), the growth tracker resets and the step counts
//   as skipped; otherwise the tracker counts clean steps and after growth_interval (2,000) of
//   them scale *= growth (2, unless that overflows float) and the tracker resets. It clears
//   found_inf for the next step.
// So .grad holds the *scaled* gradients from backward until the optimizer's step (nothing in
// loupe reads them in between: no gradient norms or clipping); the skip decision is PyTorch's,
// a step with any non-finite gradient is skipped and the scale backs off.
// The host reads the scale and the skipped count only when asked (once per epoch in the trainer).
#pragma once
#include <cstdint>
#include <optional>

#include "autograd/source_check.h"
#include "core/exec_context.h"
#include "core/philox.h"  // LOUPE_HD
#include "core/tensor.h"

namespace loupe::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int growth_interval = 2000;
};

// Slots of the state vector (float32 [4] on the device; counts are exact below 2^24).
enum ScalerSlot { kScale = 0, kFoundInf = 1, kGrowthTracker = 2, kSkipped = 3 };

class GradScaler {
 public:
  explicit GradScaler(Device d, GradScalerOptions o = {});
  // loss * scale, differentiable in loss (the scale is a constant).
  Tensor scale(const Tensor& loss) const;
  // scale(loss).backward() (a float32 scalar loss: backward seeded with the scale, the same
  // gradients) with checks at the source open (autograd/source_check.h): the ops that add into a
  // gradient in place check what they write and raise found_inf themselves. The next
  // check_() then skips the ranges they covered, unless something else added into them too
  // (several backward() calls before it add up their ranges).
  void backward(const Tensor& loss);
  // The tensor backward() seeds a float32 scalar loss with: a view of the scale in the state, whose
  // value holds from the forward pass to the backward (the update comes after the optimizer), so
  // a loss can make its gradient in its forward kernels (cross_entropy_counted).
  Tensor seed() const;
  // Raises found_inf when an element of grads (a contiguous float32 buffer on the scaler's device:
  // the gradient arena) is inf or NaN. Read-only: the gradients stay scaled (the optimizer
  // divides). The ranges checked at the source by the backward() calls since the last check_()
  // are not read again (the contract: such a range held finite values before those backward
  // passes: the trainer zeroes the gradients first); check_() then forgets them, so a check_()
  // with no backward() before it reads everything. A few launches, one per range left to read.
  void check_(const Tensor& grads);
  // The next check_() reads every gradient: data parallelism averages the gradients after the
  // checks at the source saw only this rank's part, and every rank must see the same inf or NaN
  // so that all of them skip the same steps.
  void distrust_source_checks() { source_.reset(); }
  void update();
  const Tensor& state() const { return state_; }
  const GradScalerOptions& options() const { return opt_; }
  // The found_inf flag on the device (state()[kFoundInf]), for checks at the source.
  float* found_inf_flag() const;
  // Host reads: each copies the state from the device (and so waits for it).
  double current_scale() const;
  int64_t skipped_steps() const;
  bool found_inf() const;  // before update() clears it

 private:
  GradScalerOptions opt_;
  Tensor state_;
  std::optional<autograd::SourceCheck> source_;  // backward()'s checks, until check_()
};

// The update rule on the state vector s (torch._amp_update_scale_), for both backends' kernels.
LOUPE_HD void scaler_update(float* s, float growth, float backoff, int interval) {
  if (s[kFoundInf] != 0.f) {
    s[kScale] *= backoff;
    s[kGrowthTracker] = 0.f;
    s[kSkipped] += 1.f;
  } else {
    float clean = s[kGrowthTracker] + 1.f;
    if (clean >= float(interval)) {
      float grown = s[kScale] * growth;
      if (grown - grown == 0.f) s[kScale] = grown;  // finite: inf - inf and NaN are NaN
      s[kGrowthTracker] = 0.f;
    } else {
      s[kGrowthTracker] = clean;
    }
  }
  s[kFoundInf] = 0.f;
}

struct ScalerKernels {
  // Sets state[kFoundInf] = 1 when an element of grads is inf or NaN; writes nothing else.
  // grads [n] float32 contiguous (any alignment); state float32 [4] on the same device.
  void (*check)(const ExecContext& ctx, const Tensor& grads, const Tensor& state);
  void (*update)(const ExecContext& ctx, const Tensor& state, float growth, float backoff, int interval);
};

}  // namespace loupe::optim
