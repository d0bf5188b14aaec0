// --trace FILE: a Chrome/Perfetto trace of global steps first..last (--profile-steps), an observer:
// the host's NVTX ranges always, and the GPU's kernels, copies and memsets when the monitor
// measures busy time with CUPTI (--busy). Written when the window closes, with one line saying so;
// finish() at the run's end says what became of it when the run stopped before the window closed.
#pragma once
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "train/observer.h"
#include "train/trainer.h"

namespace loupe::instrument { class EpochMonitor; }

namespace loupe::train {

class TraceWindow final : public Observer {
 public:
  TraceWindow(std::string path, instrument::EpochMonitor& monitor, Device device, int64_t first, int64_t last);
  void step_begin(const StepInfo& info, Control&) override;
  void step_end(const StepInfo& info, Control&) override;
  // At the run's end, however it ended, after `steps_run` steps (its last global step is the
  // trainer's): a window still open is closed and written with the steps it saw; a window the run
  // never reached gets one line saying so, with the window, the run's steps and how to change it.
  void finish(const Trainer& trainer, int64_t steps_run);

 private:
  void begin();
  void end(int64_t last, const std::string& note = "");

  std::string path_;
  instrument::EpochMonitor& monitor_;
  Device device_;
  int64_t first_, last_;
  double host_t0_ = 0;
  uint64_t gpu_t0_ = 0;
  bool open_ = false, written_ = false;
};

}  // namespace loupe::train
