// What to change, from one epoch's measured figures. Each rule fires only when the figures it
// needs were measured (an unmeasured figure never counts as 0), and the likely bottleneck comes first.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "instrument/report.h"

namespace loupe::instrument {

// What the report alone does not say: the device kind and the run's settings.
struct AdviceInputs {
  bool cuda = false;          // ran on a CUDA device
  bool tensor_cores = false;  // the device has tensor cores (compute capability >= 7.0)
  std::string precision;      // "fp32", "tf32", "fp16", "bf16"; empty: use the report's
  int64_t batch = 0;          // 0: unknown
};

std::vector<std::string> advise(const EpochReport& r, const AdviceInputs& in);

}  // namespace loupe::instrument
