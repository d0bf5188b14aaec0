// Copy family: strided copies, dtype casts and fills (the kernels behind views and .to()).
#pragma once
#include "core/tensor.h"

namespace loupe {

struct CopyKernels {
  // dst and src: same device, shape and element size; any strides.
  void (*copy_strided)(const Tensor& dst, const Tensor& src);
  // Both contiguous, same numel, any two dtypes (float rounding to nearest even).
  void (*cast)(const Tensor& dst, const Tensor& src);
  // dst contiguous.
  void (*fill)(const Tensor& dst, double value);
};

}  // namespace loupe
