#include "train/profile_window.h"

#include "core/cuda_runtime.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "instrument/busy_tracker.h"
#include "instrument/monitor.h"
#include "train/trainer.h"

namespace loupe::train {

ProfileWindow::ProfileWindow(instrument::EpochMonitor& monitor, Device device, int64_t first, int64_t last)
    : monitor_(monitor), device_(device), first_(first), last_(last) {}

ProfileWindow::~ProfileWindow() {
  if (!open_) return;
  op_records_enable(false);
  op_records_take();
  if (instrument::BusyTracker* bt = monitor_.busy_tracker()) {
    try {
      bt->correlate(false);
    } catch (...) {  // a destructor: the run is ending anyway
    }
  }
}

void ProfileWindow::step_begin(const StepInfo& info, Control&) {
  if (info.step == first_) begin();
}

void ProfileWindow::step_end(const StepInfo& info, Control&) {
  if (info.step == last_ && open_) end();
}

void ProfileWindow::begin() {
  instrument::BusyTracker* bt = device_.is_cuda() ? monitor_.busy_tracker() : nullptr;
  if (device_.is_cuda()) cuda_runtime()->synchronize();  // earlier steps' work stays out of the window
  if (bt) {
    bt->correlate(true);
    gpu_t0_ = bt->now_ns();
  }
  host_t0_ = now_s();
  flops0_ = flops_counted();
  op_records_enable(true);
  open_ = true;
}

void ProfileWindow::end() {
  if (device_.is_cuda()) cuda_runtime()->synchronize();  // the window's work, finished
  op_records_enable(false);
  open_ = false;
  complete_ = true;
  in_.ops = op_records_take(&in_.unscoped_flops);
  in_.counted_flops = flops_counted() - flops0_;
  in_.steps = last_ - first_ + 1;
  in_.gpu = device_.is_cuda();
  in_.wall_seconds = now_s() - host_t0_;
  instrument::BusyTracker* bt = device_.is_cuda() ? monitor_.busy_tracker() : nullptr;
  if (bt) {
    const uint64_t t1 = bt->now_ns();
    bt->flush();
    in_.activity = bt->records(gpu_t0_, t1);
    in_.busy_seconds = double(bt->busy_ns(gpu_t0_, t1)) * 1e-9;
    in_.wall_seconds = double(t1 - gpu_t0_) * 1e-9;
    bt->correlate(false);
  } else {
    for (const OpRecord& o : in_.ops) in_.busy_seconds += o.host_end - o.host_begin;
  }
}

}  // namespace loupe::train
