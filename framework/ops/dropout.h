// Inverted dropout. The mask is never stored: element i is kept when philox_uniform(seed, offset, i)
// >= p, so backward regenerates it, and the CPU and the GPU draw identical masks.
#pragma once
#include <cstdint>

#include "core/exec_context.h"
#include "core/random.h"
#include "core/tensor.h"

namespace loupe {

// In training, zeroes each element with probability p and scales the rest by 1 / (1 - p);
// otherwise returns x. Draws from the default generator.
Tensor dropout(const Tensor& x, double p, bool training);

struct DropoutKernels {
  // out = keep(i) ? in * scale : 0; contiguous. keep(i) reads counter r.offset (+ *r.base) + i / 4.
  void (*apply)(const ExecContext& ctx, const Tensor& out, const Tensor& in, float p, const RngDraw& r);
};

}  // namespace loupe
