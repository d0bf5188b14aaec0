#include "train/trace_window.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/nvtx.h"
#include "instrument/busy_tracker.h"
#include "instrument/chrome_trace.h"
#include "instrument/monitor.h"

namespace loupe::train {

TraceWindow::TraceWindow(std::string path, instrument::EpochMonitor& monitor, Device device)
    : path_(std::move(path)), monitor_(monitor), device_(device) {}

void TraceWindow::attach(Trainer& trainer) {
  trainer.hooks.on_profile = [this, &trainer](bool begin_window) {
    if (begin_window) begin();
    else end(trainer);
  };
}

void TraceWindow::begin() {
  instrument::BusyTracker* bt = monitor_.busy_tracker();
  // Once, at the window's start: GPU work of earlier steps must not land in the window.
  if (bt && device_.is_cuda()) cuda_runtime()->synchronize();
  host_t0_ = now_seconds();
  if (bt) gpu_t0_ = bt->now_ns();
  host_trace_enable(true);
}

void TraceWindow::end(const Trainer& trainer) {
  host_trace_enable(false);
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
  std::printf("trace of steps %lld..%lld written to %s (%zu events%s)\n", (long long)trainer.hooks.profile_steps.first,
              (long long)trainer.hooks.profile_steps.second, path_.c_str(), ev.size(),
              bt ? "" : "; host ranges only: add --busy for GPU activity");
}

}  // namespace loupe::train
