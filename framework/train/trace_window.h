// --trace FILE: a Chrome/Perfetto trace of the trainer's profiled steps (TrainHooks::profile_steps):
// the host's NVTX ranges always, and the GPU's kernels, copies and memsets when the monitor
// measures busy time with CUPTI (--busy). Written when the window closes, with one line saying so.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "train/trainer.h"

namespace loupe::instrument { class EpochMonitor; }

namespace loupe::train {

class TraceWindow {
 public:
  TraceWindow(std::string path, instrument::EpochMonitor& monitor, Device device);
  // Installs the window as the trainer's on_profile hook; the trainer's profile_steps bound it.
  void attach(Trainer& trainer);

 private:
  void begin();
  void end(const Trainer& trainer);

  std::string path_;
  instrument::EpochMonitor& monitor_;
  Device device_;
  double host_t0_ = 0;
  uint64_t gpu_t0_ = 0;
};

}  // namespace loupe::train
