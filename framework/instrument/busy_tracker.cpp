#include "instrument/busy_tracker.h"

#include "instrument/cuda_factory.h"

namespace loupe::instrument {

void register_busy_tracker_factory(BusyTrackerFactory f) { CudaFactory<BusyTracker>::set(f); }

std::unique_ptr<BusyTracker> make_busy_tracker(std::string* why) {
  return CudaFactory<BusyTracker>::make(why, "this loupe was built without CUDA, so there is no CUPTI to measure GPU "
                                        "busy time", "CUPTI could not start (no reason given)");
}

}  // namespace loupe::instrument
