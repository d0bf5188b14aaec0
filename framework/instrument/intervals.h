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

// A window's time split three ways from the device's activity intervals: busy (their union), the
// boundaries (the gaps shorter than `boundary_max` between two stretches of work: the device
// going from one kernel to the next, already queued) and idle (longer gaps, and the window's
// head and tail: the device waited for the host, the data or a peer). busy + boundary + idle is
// the window's length.
struct TimeSplit {
  uint64_t busy = 0, boundary = 0, idle = 0;
  uint64_t boundaries = 0;  // how many gaps counted as boundaries
};
TimeSplit split_time(std::vector<Interval> v, uint64_t clip_begin, uint64_t clip_end, uint64_t boundary_max);

// The threshold between a boundary and an idle gap: above nearly all the gaps between kernels inside
// a replayed graph and between an eager step's queued kernels, and at or below the device's wait for
// the host's next launch between two replays (`--busy --trace` of five models, graphed and eager:
// lab/benchmarks.md, "The graphed step's boundaries, measured").
constexpr uint64_t kBoundaryMaxNs = 5000;

}  // namespace loupe::instrument
