// Numerical gradient check: compares autograd's gradients with central differences.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace loupe::autograd {

struct GradcheckResult {
  bool ok = true;
  double max_abs_err = 0;
  std::string message;  // the worst mismatch, when not ok
};

// f maps the inputs to a tensor; the check compares d(sum(f * r))/d(input) for a fixed random r
// against central differences (eps) for every input that requires grad. Inputs should be float64
// CPU tensors; an element passes when |analytic - numeric| <= atol + rtol * |numeric|.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, double eps = 1e-6, double atol = 1e-6,
                          double rtol = 1e-4);

}  // namespace loupe::autograd
