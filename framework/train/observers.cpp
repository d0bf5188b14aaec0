#include "train/observers.h"

#include "core/cuda_runtime.h"
#include "instrument/monitor.h"

namespace loupe::train {

void MonitorObserver::epoch_begin(const StepInfo&, Control&) { m_.begin_epoch(); }
void MonitorObserver::fetch_begin(const StepInfo&) { m_.step_begin(); }
void MonitorObserver::batch_ready(const StepInfo& info) { m_.data_ready(info.data_gpu_wait_ms); }
void MonitorObserver::step_issued(const StepInfo& info) { m_.step_issued(info.flops); }
void MonitorObserver::train_end(const EpochStats&) { m_.end_train(); }

void ProfilerRange::step_begin(const StepInfo& info, Control&) {
  if (info.step == first_ && device_.is_cuda()) cuda_runtime()->profiler_start();
}

void ProfilerRange::step_end(const StepInfo& info, Control&) {
  if (info.step == last_ && device_.is_cuda()) cuda_runtime()->profiler_stop();
}

}  // namespace loupe::train
