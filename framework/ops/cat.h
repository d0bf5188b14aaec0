// Concatenation along one dimension (device-independent: copies into slices of the output).
#pragma once
#include <vector>

#include "core/tensor.h"

namespace loupe {

// Joins xs along dim (negative counts from the end). All of the same dtype and device, with
// shapes equal except along dim. The result is a new contiguous tensor; each input's gradient is
// its slice of the output's gradient.
Tensor cat(const std::vector<Tensor>& xs, int dim);

}  // namespace loupe
