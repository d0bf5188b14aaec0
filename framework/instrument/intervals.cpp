#include "instrument/intervals.h"

#include <algorithm>

namespace loupe::instrument {

uint64_t union_length(std::vector<Interval> v, uint64_t clip_begin, uint64_t clip_end) {
  if (clip_end <= clip_begin) return 0;
  // Clip, dropping what is empty after clipping, then sweep in order of begin.
  size_t n = 0;
  for (const Interval& i : v) {
    Interval c{std::max(i.begin, clip_begin), std::min(i.end, clip_end)};
    if (c.begin < c.end) v[n++] = c;
  }
  v.resize(n);
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  uint64_t total = 0;
  size_t k = 0;
  while (k < v.size()) {
    uint64_t b = v[k].begin, e = v[k].end;
    for (++k; k < v.size() && v[k].begin <= e; ++k) e = std::max(e, v[k].end);
    total += e - b;
  }
  return total;
}

}  // namespace loupe::instrument
