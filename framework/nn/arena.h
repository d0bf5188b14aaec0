// Parameter and gradient arenas (docs/design.md principle 4): all parameters of a model live in one
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

  // Mixed precision: a 16-bit copy of the values (dtype t), refreshed by one cast kernel after
  // each optimizer step instead of one cast per weight per use. Each parameter gets a view into
  // it: a leaf whose .grad is the parameter's float32 gradient, so the 16-bit weight gradients
  // are added straight into the float32 gradient arena. nn::autocast hands layers these views.
  ~ParameterArena();
  ParameterArena(const ParameterArena&) = delete;
  ParameterArena& operator=(const ParameterArena&) = delete;
  // Parameters in `float32_only` (read in float32 by their layers) get no place in the copy.
  void enable_compute_copy(DType t, const std::vector<Tensor>& float32_only = {});
  void refresh_compute_copy();  // values() cast into the copy (after any change to the values)
  void disable_compute_copy();  // no copy (layers then cast on the fly, if they cast at all)
  const Tensor& compute_values() const { return compute_; }  // undefined when there is none

 private:
  std::vector<Tensor> params_;
  Tensor values_, grads_, compute_;
  std::vector<Tensor> compute_params_;
  struct Run {  // a stretch of parameters next to each other in both arenas: one cast each
    int64_t src, dst, n;
  };
  std::vector<Run> compute_runs_;
  int64_t used_ = 0;
};

// The compute-copy view of parameter p in dtype t, or an undefined tensor.
Tensor compute_view(const Tensor& p, DType t);

}  // namespace loupe::nn
