// `loupe profile`'s window, an observer: from global step first to last (--profile-steps), op
// records on (core/op_record.h) and, on a GPU, CUPTI's activity records tied to them (the
// monitor's busy tracker, correlating); at the window's end, everything instrument/op_profile.h
// needs. The GPU is synchronised once at each end of the window, never inside it.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "instrument/op_profile.h"
#include "train/observer.h"

namespace loupe::instrument { class EpochMonitor; }

namespace loupe::train {

class ProfileWindow final : public Observer {
 public:
  ProfileWindow(instrument::EpochMonitor& monitor, Device device, int64_t first, int64_t last);
  ~ProfileWindow() override;
  void step_begin(const StepInfo& info, Control&) override;
  void step_end(const StepInfo& info, Control&) override;
  bool complete() const { return complete_; }
  // What the window saw (ceilings left for the caller to fill).
  const instrument::ProfileInput& input() const { return in_; }

 private:
  void begin();
  void end();

  instrument::EpochMonitor& monitor_;
  Device device_;
  int64_t first_, last_;
  instrument::ProfileInput in_;
  double host_t0_ = 0, flops0_ = 0;
  uint64_t gpu_t0_ = 0;
  bool open_ = false, complete_ = false;
};

}  // namespace loupe::train
