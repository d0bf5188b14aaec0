// `loupe profile`'s window: between the trainer's profiled steps (TrainHooks::profile_steps), op
// records on (core/op_record.h) and, on a GPU, CUPTI's activity records tied to them (the
// monitor's busy tracker, correlating); at the window's end, everything instrument/op_profile.h
// needs. The GPU is synchronised once at each end of the window, never inside it.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "instrument/op_profile.h"
#include "train/trainer.h"

namespace loupe::instrument { class EpochMonitor; }

namespace loupe::train {

class ProfileWindow {
 public:
  ProfileWindow(instrument::EpochMonitor& monitor, Device device);
  ~ProfileWindow();
  // Installs the window as the trainer's on_profile hook.
  void attach(Trainer& trainer);
  bool complete() const { return complete_; }
  // What the window saw (ceilings left for the caller to fill).
  const instrument::ProfileInput& input() const { return in_; }

 private:
  void begin();
  void end();

  instrument::EpochMonitor& monitor_;
  Device device_;
  Trainer* trainer_ = nullptr;
  instrument::ProfileInput in_;
  double host_t0_ = 0, flops0_ = 0;
  uint64_t gpu_t0_ = 0;
  bool open_ = false, complete_ = false;
};

}  // namespace loupe::train
