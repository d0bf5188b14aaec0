#include "core/flops.h"

#include <atomic>

#include "core/op_record.h"

namespace loupe {

namespace {
// Outside every FlopScope (a library user's own loop, tests): the process's count, kept with
// relaxed atomics since any thread may add to it.
std::atomic<double> g_flops{0.0};
thread_local FlopCounter* t_counter = nullptr;  // the innermost FlopScope's, owned by its run
}  // namespace

void add_flops(double f) {
  detail::op_record_flops(f);
  if (t_counter) {
    t_counter->total += f;
    return;
  }
  double cur = g_flops.load(std::memory_order_relaxed);
  while (!g_flops.compare_exchange_weak(cur, cur + f, std::memory_order_relaxed)) {
  }
}

double flops_counted() { return t_counter ? t_counter->total : g_flops.load(std::memory_order_relaxed); }

FlopScope::FlopScope(FlopCounter& c) : prev_(t_counter) { t_counter = &c; }
FlopScope::~FlopScope() { t_counter = prev_; }

}  // namespace loupe
