// Interval arithmetic on timestamps: how long the GPU was busy is the length of the union of its
// activity intervals (kernels on different streams overlap; counting them twice would overstate).
#pragma once
#include <cstdint>
#include <vector>

namespace loupe::instrument {

struct Interval {
  uint64_t begin, end;  // nanoseconds, [begin, end); end <= begin is empty
};

// Total length of the union of the intervals, each clipped to [clip_begin, clip_end).
// Takes the vector by value because it sorts it; O(n log n).
uint64_t union_length(std::vector<Interval> v, uint64_t clip_begin, uint64_t clip_end);

}  // namespace loupe::instrument
