// Non-finite checks at the source, for dynamic loss scaling (optim/grad_scaler.h).
//
// A GradScaler must know whether any gradient of a step is inf or NaN. The plain way is a pass
// over the whole gradient arena after backward; but an op that adds into a leaf's gradient in
// place, touching only part of it (EmbeddingBackward: the few thousand rows of a 1.2M-row table
// that a batch selects), can instead check what it writes, and spare that pass the rest of the
// table. While a SourceCheck is open on this thread (GradScaler::backward opens one around the
// backward pass), such an op
//   - raises *found_inf() (writes 1.f, on the flag's device, never reading it on the host) when a
//     value it writes into the gradient is not finite, and
//   - reports the gradient it covered with add_checked();
// and every unchecked contribution to a leaf's gradient (AccumulateGrad, autograd/engine.cpp)
// reports the gradient with add_dirty(). A checked range that also received an unchecked
// contribution is not trusted: dirty wins, whatever the order the two arrived in.
// The contract behind trusting a checked range: the gradient buffer held finite values before the
// backward (the trainer zeroes it), so the only values in it that can be non-finite are the ones
// written during the backward, and in a trusted range the op that wrote them checked them all.
// The bookkeeping is host-side and depends only on the graph's structure (the same every step),
// so a backward captured in a CUDA graph replays with the same ranges.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace loupe::autograd {

class SourceCheck {
 public:
  // found_inf: a float on `device` that ops set to 1 when they see a non-finite value.
  SourceCheck(float* found_inf, Device device) : found_inf_(found_inf), device_(device) {}
  float* found_inf() const { return found_inf_; }
  Device device() const { return device_; }
  // Every element of `grad` that may have changed during this backward was checked at the source.
  void add_checked(const Tensor& grad);
  // `grad` received a contribution that nobody checked.
  void add_dirty(const Tensor& grad);
  // The element ranges [begin, end) of `buffer` (a contiguous 1-D float32 tensor: the gradient
  // arena) that a check pass must still read: all of it, less the checked ranges that received no
  // unchecked contribution. Each trusted range is first shrunk inward to multiples of `align`
  // elements from the buffer's start, so every range returned starts on such a multiple (a check
  // pass may read a few elements of a trusted range again; never fewer than the untrusted ones).
  std::vector<std::pair<int64_t, int64_t>> unchecked_ranges(const Tensor& buffer, int64_t align = 1) const;

 private:
  struct Range {
    uintptr_t begin, end;  // bytes
  };
  static Range range_of(const Tensor& t);
  float* found_inf_;
  Device device_;
  std::vector<Range> checked_, dirty_;
};

// The SourceCheck open on this thread, or null.
SourceCheck* current_source_check();

// Opens `c` on this thread while it lives (and restores the one open before).
class SourceCheckScope {
 public:
  explicit SourceCheckScope(SourceCheck& c);
  ~SourceCheckScope();
  SourceCheckScope(const SourceCheckScope&) = delete;
  SourceCheckScope& operator=(const SourceCheckScope&) = delete;

 private:
  SourceCheck* prev_;
};

}  // namespace loupe::autograd
