// The running loss of an epoch for the step points (train/observer.h: StepInfo::loss) and the
// divergence watch, read about every 0.2 s without waiting for the device: an asynchronous copy
// of the device's loss sum into pinned memory, polled through an event (on the CPU a plain read).
// A NaN or inf loss makes the sum NaN or inf from that step on.
#pragma once
#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace loupe::train {

class LossPeek {
 public:
  // loss_sum: the epoch's sum on the device (scalar, float32). buffer: pinned host memory (scalar,
  // float32) owned by the trainer: freeing pinned memory waits for the device, which never
  // finishes where a peer stopped a step early (Ctrl-C).
  LossPeek(Device device, const Tensor& loss_sum, Tensor buffer);
  ~LossPeek() { end(); }
  LossPeek(const LossPeek&) = delete;
  LossPeek& operator=(const LossPeek&) = delete;
  // After each step, with the epoch's samples so far and the step's global number.
  void after_step(int64_t samples, int64_t step);
  // After the epoch's last step: no copy left in flight.
  void end();
  std::optional<double> loss() const { return loss_; }
  int64_t step() const { return step_; }  // the step whose running loss loss() is

 private:
  Device device_;
  const Tensor& sum_;
  Tensor peek_;
  void* event_ = nullptr;
  int64_t samples_ = 0, step_ = 0;
  double time_;
  std::optional<double> loss_;
};

}  // namespace loupe::train
