#include "instrument/busy_tracker.h"

namespace loupe::instrument {

namespace {
BusyTrackerFactory& factory_slot() {
  static BusyTrackerFactory f = nullptr;
  return f;
}
}  // namespace

void register_busy_tracker_factory(BusyTrackerFactory f) { factory_slot() = f; }

std::unique_ptr<BusyTracker> make_busy_tracker(std::string* why) {
  std::string local;
  std::string& w = why ? *why : local;
  if (!factory_slot()) {
    w = "this loupe was built without CUDA, so there is no CUPTI to measure GPU busy time";
    return nullptr;
  }
  std::unique_ptr<BusyTracker> t = factory_slot()(&w);
  if (!t && w.empty()) w = "CUPTI could not start (no reason given)";
  return t;
}

}  // namespace loupe::instrument
