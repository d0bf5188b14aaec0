// Observers (train/observer.h) that the trainer's users share: the epoch monitor's timing points,
// and the profiler's range over a window of steps.
#pragma once
#include <cstdint>

#include "core/dtype.h"
#include "train/observer.h"

namespace loupe::instrument { class EpochMonitor; }

namespace loupe::train {

// The monitor's step timings (instrument/monitor.h): the epoch's start, each step's start, its
// batch's arrival and its issue (with its FLOPs), the training's end.
class MonitorObserver final : public Observer {
 public:
  explicit MonitorObserver(instrument::EpochMonitor& m) : m_(m) {}
  void epoch_begin(const StepInfo&, Control&) override;
  void fetch_begin(const StepInfo&) override;
  void batch_ready(const StepInfo&) override;
  void step_issued(const StepInfo& info) override;
  void train_end(const EpochStats&) override;

 private:
  instrument::EpochMonitor& m_;
};

// cudaProfilerStart before global step `first` and cudaProfilerStop after step `last` (nsys and
// ncu capture that range: --profile-steps); nothing on the CPU.
class ProfilerRange final : public Observer {
 public:
  ProfilerRange(Device device, int64_t first, int64_t last) : device_(device), first_(first), last_(last) {}
  void step_begin(const StepInfo& info, Control&) override;
  void step_end(const StepInfo& info, Control&) override;

 private:
  Device device_;
  int64_t first_, last_;
};

}  // namespace loupe::train
