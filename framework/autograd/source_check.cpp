#include "autograd/source_check.h"

#include <algorithm>

#include "core/error.h"

namespace loupe::autograd {

namespace {
thread_local SourceCheck* g_current = nullptr;
}  // namespace

SourceCheck* current_source_check() { return g_current; }

SourceCheckScope::SourceCheckScope(SourceCheck& c) : prev_(g_current) { g_current = &c; }
SourceCheckScope::~SourceCheckScope() { g_current = prev_; }

SourceCheck::Range SourceCheck::range_of(const Tensor& t) {
  if (!t.defined() || t.numel() == 0) return {0, 0};
  // The span from the first element to one past the last (strides are never negative).
  int64_t last = 0;
  for (int d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.strides()[d];
  uintptr_t b = reinterpret_cast<uintptr_t>(t.data_ptr());
  return {b, b + uintptr_t(last + 1) * t.element_size()};
}

void SourceCheck::add_checked(const Tensor& grad) {
  Range r = range_of(grad);
  if (r.begin < r.end) checked_.push_back(r);
}

void SourceCheck::add_dirty(const Tensor& grad) {
  Range r = range_of(grad);
  if (r.begin < r.end) dirty_.push_back(r);
}

std::vector<std::pair<int64_t, int64_t>> SourceCheck::unchecked_ranges(const Tensor& buffer, int64_t align) const {
  LOUPE_CHECK(buffer.dim() == 1 && buffer.is_contiguous() && align >= 1,
              "SourceCheck::unchecked_ranges takes a contiguous 1-D buffer");
  const int64_t n = buffer.numel(), es = int64_t(buffer.element_size());
  const intptr_t base = intptr_t(buffer.data_ptr());
  // The trusted ranges: checked, less every dirty range (in bytes), ...
  std::vector<Range> trusted;
  for (const Range& c : checked_) {
    std::vector<Range> parts{c};
    for (const Range& d : dirty_) {
      std::vector<Range> left;
      for (const Range& p : parts) {
        if (d.end <= p.begin || d.begin >= p.end) {
          left.push_back(p);
          continue;
        }
        if (p.begin < d.begin) left.push_back({p.begin, d.begin});
        if (d.end < p.end) left.push_back({d.end, p.end});
      }
      parts = std::move(left);
    }
    trusted.insert(trusted.end(), parts.begin(), parts.end());
  }
  // ... as whole elements of the buffer, shrunk inward to multiples of align, sorted and merged.
  std::vector<std::pair<int64_t, int64_t>> el;
  for (const Range& r : trusted) {
    int64_t b = intptr_t(r.begin) - base, e = intptr_t(r.end) - base;  // bytes from the buffer's start
    if (e <= 0 || b >= n * es) continue;
    b = std::max<int64_t>(b, 0);
    e = std::min<int64_t>(e, n * es);
    int64_t eb = (b + es - 1) / es, ee = e / es;  // whole elements inside
    eb = (eb + align - 1) / align * align;
    if (ee < n) ee = ee / align * align;  // the buffer's end needs no rounding
    if (eb < ee) el.emplace_back(eb, ee);
  }
  std::sort(el.begin(), el.end());
  // The complement in [0, n).
  std::vector<std::pair<int64_t, int64_t>> out;
  int64_t at = 0;
  for (const auto& [b, e] : el) {
    if (b > at) out.emplace_back(at, b);
    at = std::max(at, e);
  }
  if (at < n) out.emplace_back(at, n);
  return out;
}

}  // namespace loupe::autograd
