// What watches an epoch's steps from outside the step itself (docs/plans/heart_on_one_screen.md):
// the trainer calls each observer at named points, in order, so that its epoch loop stays a short
// loop. Built in (epoch_observers, below): the profiler window, the running loss read from the
// device without waiting, the divergence watch, the ranks' weight check and the progress callback.
// The step's own parts (the reducer, the loss scaler) are device work inside the step: train/step_parts.h.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace loupe::train {

struct EpochStats;

class StepObserver {
 public:
  virtual ~StepObserver() = default;
  // Before global step `step` (counted from 1 across epochs) fetches its batch.
  virtual void before_step(int64_t step) { (void)step; }
  // After the step is issued (the device may still be running it) and counted in `st`. True ends
  // the epoch now: the observers after this one are not called for the step.
  virtual bool after_step(EpochStats& st, int64_t step) {
    (void)st;
    (void)step;
    return false;
  }
  // After the epoch's last step, before its one read-back.
  virtual void steps_end() {}
};

// What the built-in observers read.
struct ObserverSetup {
  Device device;
  const Tensor* loss_sum = nullptr;  // the epoch's loss sum on the device (scalar, float32)
  // Pinned host memory for the loss peek (scalar, float32), owned by the trainer: freeing pinned
  // memory waits for the device, which never finishes where a peer stopped a step early (Ctrl-C).
  Tensor peek_buffer;
  int64_t total = 0;                 // the epoch's steps
  // Global steps [first, last] bracketed by the profiler, and the callback told of both ends.
  std::pair<int64_t, int64_t> profile_steps{-1, -1};
  std::function<void(bool)> on_profile;
  // A non-finite running loss ends the epoch (one process only: ranks see their losses at
  // different steps, and the world's sums are judged at the epoch's end).
  bool stop_on_divergence = true;
  bool single_process = true;
  std::function<void()> check_ranks;  // LOUPE_DDP_CHECK: after every step; empty when off
  std::function<void(int64_t step, int64_t total, int64_t samples, std::optional<double> loss)> on_step;
};

// The built-in observers, in the order they run: profiler window, loss peek, divergence, rank
// check, progress.
std::vector<std::unique_ptr<StepObserver>> epoch_observers(const ObserverSetup& s);

}  // namespace loupe::train
