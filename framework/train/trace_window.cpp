#include "train/trace_window.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/nvtx.h"
#include "instrument/busy_tracker.h"
#include "instrument/chrome_trace.h"
#include "instrument/monitor.h"

namespace loupe::train {

TraceWindow::TraceWindow(std::string path, instrument::EpochMonitor& monitor, Device device, int64_t first,
                         int64_t last)
    : path_(std::move(path)), monitor_(monitor), device_(device), first_(first), last_(last) {}

void TraceWindow::step_begin(const StepInfo& info, Control&) {
  if (info.step == first_) begin();
}

void TraceWindow::step_end(const StepInfo& info, Control&) {
  if (info.step == last_ && open_) end(last_);
}

void TraceWindow::begin() {
  instrument::BusyTracker* bt = monitor_.busy_tracker();
  // Once, at the window's start: GPU work of earlier steps must not land in the window.
  if (bt && device_.is_cuda()) cuda_runtime()->synchronize();
  host_t0_ = now_s();
  if (bt) gpu_t0_ = bt->now_ns();
  host_trace_enable(true);
  open_ = true;
}

void TraceWindow::end(int64_t last, const std::string& note) {
  host_trace_enable(false);
  open_ = false;
  written_ = true;
  instrument::BusyTracker* bt = monitor_.busy_tracker();
  std::vector<instrument::TraceEvent> ev;
  for (const auto& r : host_trace_take())
    ev.push_back({r.name, "host", (r.begin - host_t0_) * 1e6, (std::max(r.end, r.begin) - r.begin) * 1e6, 1, 1, ""});
  if (bt) {
    if (device_.is_cuda()) cuda_runtime()->synchronize();  // once, at the window's end: its GPU work must finish
    bt->flush();
    for (const auto& r : bt->records(gpu_t0_, bt->now_ns()))
      ev.push_back({r.name, r.kind == 0 ? "kernel" : r.kind == 1 ? "memcpy" : "memset",
                    double(int64_t(r.begin_ns - gpu_t0_)) / 1e3, double(r.end_ns - r.begin_ns) / 1e3, 1,
                    int(100 + r.stream), ""});
  }
  instrument::write_chrome_trace(path_, ev);
  std::printf("trace of steps %lld..%lld written to %s (%zu events%s%s)\n", (long long)first_, (long long)last,
              path_.c_str(), ev.size(), bt ? "" : "; host ranges only: add --busy for GPU activity", note.c_str());
}

void TraceWindow::finish(const Trainer& trainer, int64_t steps_run) {
  const int64_t first = first_, last = last_;
  const int64_t end_step = trainer.global_step();
  if (open_) {  // the run stopped inside the window: what it saw
    if (device_.is_cuda()) cuda_runtime()->profiler_stop();
    end(end_step, "; the run ended inside the window " + std::to_string(first) + ".." + std::to_string(last));
    return;
  }
  if (written_) return;
  const int64_t start = end_step - steps_run + 1;
  std::string ran = steps_run <= 0 ? std::string("no steps")
                                   : std::to_string(steps_run) + (steps_run == 1 ? " step" : " steps") +
                                         (start == 1 ? "" : ", global steps " + std::to_string(start) + ".." +
                                                                std::to_string(end_step));
  std::string example = steps_run <= 0 ? std::string("")
                                       : ", e.g. --profile-steps " + std::to_string(start) + ":" +
                                             std::to_string(std::min(end_step, start + 9));
  std::printf("trace: nothing written to %s: the run had %s, and the trace window is steps %lld..%lld; "
              "--profile-steps A:B sets the window%s\n",
              path_.c_str(), ran.c_str(), (long long)first, (long long)last, example.c_str());
}

}  // namespace loupe::train
