// Dynamic loss scaling for float16 training, with the rule of PyTorch's GradScaler, kept entirely
// on the device so that no step waits for the host:
//   the loss is multiplied by `scale` before backward;
//   check_(), a read-only pass over the gradient arena, raises found_inf if any float32 gradient
//   is inf or NaN;
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
  // Raises found_inf when an element of grads (a contiguous float32 buffer on the scaler's device:
  // the gradient arena) is inf or NaN. Read-only: the gradients stay scaled (the optimizer
  // divides).
  void check_(const Tensor& grads);
  void update();
  const Tensor& state() const { return state_; }
  const GradScalerOptions& options() const { return opt_; }
  // Host reads: each copies the state from the device (and so waits for it).
  double current_scale() const;
  int64_t skipped_steps() const;
  bool found_inf() const;  // before update() clears it

 private:
  GradScalerOptions opt_;
  Tensor state_;
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
  void (*check)(const Tensor& grads, const Tensor& state);
  void (*update)(const Tensor& state, float growth, float backoff, int interval);
};

}  // namespace loupe::optim
