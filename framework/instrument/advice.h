// What to change, from one epoch's measured figures. Each rule fires only when the figures it
// needs were measured (an unmeasured figure never counts as 0), and the likely bottleneck comes first.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "instrument/report.h"
#include "instrument/straggler.h"

namespace loupe::instrument {

// What the report alone does not say: the device kind and the run's settings.
struct AdviceInputs {
  bool cuda = false;          // ran on a CUDA device
  bool tensor_cores = false;  // the device has tensor cores (compute capability >= 7.0)
  std::optional<Precision> precision;  // none: the report's
  int64_t batch = 0;          // 0: unknown
  // Data parallelism: the world's verdict on its slowest rank (judge_straggler over every rank's
  // figures of the epoch, as run/world.h's World::fill judged it once); none judged for
  // one process.
  Straggler straggler;
};

std::vector<std::string> advise(const EpochReport& r, const AdviceInputs& in);

// The rank the others wait for (straggler.h), from every rank's figures; its thresholds are
// advice.cpp's. Pure: the same figures give every rank the same verdict. data_wait_host_time: a
// step's data wait is its host's own time (resident data: the batch is a slice on the host), not
// also a wait for its GPU (the loader refills a slot only once the GPU has finished the step that
// read it, so a rank held back by a peer waits for its batches too).
Straggler judge_straggler(const std::vector<RankFigures>& ranks, bool data_wait_host_time);

}  // namespace loupe::instrument
