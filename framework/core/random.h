// The global generator: a seed and a running offset into its Philox stream. Each draw of n numbers
// takes the next ceil(n / 4) counters, so results depend only on the seed and the order of draws.
#pragma once
#include <cstdint>

namespace loupe {

struct Generator {
  uint64_t seed = 0x5eed;
  uint64_t offset = 0;
  // Reserves counters for n numbers and returns the offset the draw starts at.
  uint64_t take(uint64_t n) {
    uint64_t o = offset;
    offset += (n + 3) / 4;
    return o;
  }
};

Generator& default_generator();
void manual_seed(uint64_t seed);  // also resets the offset

}  // namespace loupe
