// CUPTI's own words for a failed call, "CALL failed: CUPTI_ERROR_X (n)": each user of CUPTI (the
// busy tracker, the counters, the graph-node map) follows it with the hint that fits its use.
#pragma once
#include <cupti.h>

#include <string>

namespace loupe::instrument {

inline std::string cupti_failed(CUptiResult r, const char* call) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) s = "unknown CUPTI error";
  return std::string(call) + " failed: " + s + " (" + std::to_string(int(r)) + ")";
}

}  // namespace loupe::instrument
