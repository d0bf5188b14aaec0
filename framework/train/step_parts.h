// What takes part in the training step itself, between the loss and the update: device work that
// a captured step's graph holds, unlike the observers (train/observer.h), which watch steps
// from outside. The trainer calls each part at named points, in order; a step with none is the
// plain one (backward, optimizer). Built in: the data-parallel reducer (its buckets open before
// backward, the averaged gradients joined after it) and the fp16 loss scaler (the scaled backward,
// the gradient check before the update, the scale's update after it).
#pragma once
#include <memory>

#include "core/tensor.h"

namespace loupe::nn { class ParameterArena; }
namespace loupe::optim { class GradScaler; }
namespace loupe::parallel { class GradReducer; }

namespace loupe::train {

class StepPart {
 public:
  virtual ~StepPart() = default;
  virtual void before_backward() {}
  // The loss's backward pass, where this part runs it (the scaler: the scaled loss's); false leaves
  // it to the next part, or to the plain backward.
  virtual bool backward(const Tensor& loss) {
    (void)loss;
    return false;
  }
  virtual void after_backward() {}
  virtual void before_update() {}
  virtual void after_update() {}
};

// The reducer's part; `scaler` (or null) is told when the all-reduce has made its checks at the
// gradients' source stale.
std::unique_ptr<StepPart> reducer_part(parallel::GradReducer& reducer, optim::GradScaler* scaler);
std::unique_ptr<StepPart> scaler_part(optim::GradScaler& scaler, nn::ParameterArena& arena);

}  // namespace loupe::train
