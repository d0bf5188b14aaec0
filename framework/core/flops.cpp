#include "core/flops.h"

#include <atomic>

#include "core/op_record.h"

namespace loupe {

namespace {
// Ops are dispatched from the training thread; relaxed atomics keep other threads safe too.
std::atomic<double> g_flops{0.0};
}  // namespace

void add_flops(double f) {
  detail::op_record_flops(f);
  double cur = g_flops.load(std::memory_order_relaxed);
  while (!g_flops.compare_exchange_weak(cur, cur + f, std::memory_order_relaxed)) {
  }
}

double flops_counted() { return g_flops.load(std::memory_order_relaxed); }

}  // namespace loupe
