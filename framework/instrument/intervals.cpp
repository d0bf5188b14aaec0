#include "instrument/intervals.h"

#include <algorithm>
#include <utility>

namespace loupe::instrument {

TimeSplit split_time(std::vector<Interval> v, uint64_t clip_begin, uint64_t clip_end, uint64_t boundary_max) {
  TimeSplit s;
  if (clip_end <= clip_begin) return s;
  // Clip, dropping what is empty after clipping, then sweep in order of begin.
  size_t n = 0;
  for (const Interval& i : v) {
    Interval c{std::max(i.begin, clip_begin), std::min(i.end, clip_end)};
    if (c.begin < c.end) v[n++] = c;
  }
  v.resize(n);
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  uint64_t last_end = 0;  // of the union's previous stretch
  bool after_one = false;
  size_t k = 0;
  while (k < v.size()) {
    uint64_t b = v[k].begin, e = v[k].end;
    for (++k; k < v.size() && v[k].begin <= e; ++k) e = std::max(e, v[k].end);
    s.busy += e - b;
    if (after_one && b - last_end < boundary_max) {
      s.boundary += b - last_end;
      ++s.boundaries;
    }
    last_end = e;
    after_one = true;
  }
  s.idle = (clip_end - clip_begin) - s.busy - s.boundary;
  return s;
}

uint64_t union_length(std::vector<Interval> v, uint64_t clip_begin, uint64_t clip_end) {
  return split_time(std::move(v), clip_begin, clip_end, 0).busy;
}

}  // namespace loupe::instrument
