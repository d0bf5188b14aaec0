// The host's monotonic clock, in seconds: for intervals and deadlines, never for a date.
#pragma once
#include <chrono>

namespace loupe {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace loupe
