#include "train/step_parts.h"

#include "core/op_record.h"
#include "parallel/ddp.h"
#include "nn/arena.h"
#include "optim/grad_scaler.h"

namespace loupe::train {
namespace {

class ReducerPart final : public StepPart {
 public:
  ReducerPart(parallel::GradReducer& r, optim::GradScaler* s) : reducer_(r), scaler_(s) {}
  void before_backward() override { reducer_.begin(); }
  void after_backward() override {
    reducer_.end();  // the compute stream now waits for the averaged gradients
    if (scaler_) scaler_->distrust_source_checks();
  }

 private:
  parallel::GradReducer& reducer_;
  optim::GradScaler* scaler_;
};

class ScalerPart final : public StepPart {
 public:
  ScalerPart(optim::GradScaler& s, nn::ParameterArena& a) : scaler_(s), arena_(a) {}
  // The scaled loss, with the ops that add into a gradient in place checking what they write for
  // inf and NaN (an embedding's few selected rows of its whole table).
  bool backward(const Tensor& loss) override {
    scaler_.backward(loss);
    return true;
  }
  // A read-only pass over the gradients nothing checked at the source; the optimizer unscales as it
  // reads them, or skips the step on the device if an inf or NaN was found.
  void before_update() override {
    OpScope s("gradient check", {&arena_.grads()});
    scaler_.check_(arena_.grads());
  }
  void after_update() override {
    OpScope s("loss scale update");
    scaler_.update();
  }

 private:
  optim::GradScaler& scaler_;
  nn::ParameterArena& arena_;
};

}  // namespace

std::unique_ptr<StepPart> reducer_part(parallel::GradReducer& reducer, optim::GradScaler* scaler) {
  return std::make_unique<ReducerPart>(reducer, scaler);
}

std::unique_ptr<StepPart> scaler_part(optim::GradScaler& scaler, nn::ParameterArena& arena) {
  return std::make_unique<ScalerPart>(scaler, arena);
}

}  // namespace loupe::train
