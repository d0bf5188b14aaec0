// Parameter and gradient arenas (DESIGN.md principle 4): all parameters of a model live in one
// contiguous buffer and all gradients in another, so that an optimizer step is one fused launch
// over the whole model and zeroing the gradients is one memset. Each parameter tensor becomes a
// view into the arena; its .grad a view into the gradient arena.
#pragma once
#include <vector>

#include "core/tensor.h"

namespace loupe::nn {

class ParameterArena {
 public:
  // Copies the parameters' current values into a new arena on `d` and rebinds them to it.
  ParameterArena(const std::vector<Tensor>& params, Device d);
  const Tensor& values() const { return values_; }  // 1-D, numel() elements (padding included)
  const Tensor& grads() const { return grads_; }
  int64_t numel() const { return values_.numel(); }
  int64_t num_parameters() const { return used_; }  // without the alignment padding
  Device device() const { return values_.device(); }
  const std::vector<Tensor>& params() const { return params_; }
  void zero_grad();

 private:
  std::vector<Tensor> params_;
  Tensor values_, grads_;
  int64_t used_ = 0;
};

}  // namespace loupe::nn
