// CUPTI's own words for a failed call, "CALL failed: CUPTI_ERROR_X (n)": each user of CUPTI (the
// busy tracker, the counters, the graph-node map) follows it with the hint that fits its use. And
// a kernel's name as launched (mangled), as the activity records and the counters' ranges show it.
#pragma once
#include <cupti.h>
#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace loupe::instrument {

inline std::string cupti_failed(CUptiResult r, const char* call) {
  const char* s = nullptr;
  if (cuptiGetResultString(r, &s) != CUPTI_SUCCESS || !s) s = "unknown CUPTI error";
  return std::string(call) + " failed: " + s + " (" + std::to_string(int(r)) + ")";
}

inline std::string demangle(const char* raw) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(raw, nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(raw);
}

}  // namespace loupe::instrument
