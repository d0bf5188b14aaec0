#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/node.h"
#include "core/denormals.h"
#include "core/error.h"
#include "core/philox.h"

namespace loupe::autograd {

namespace {
double project(const Tensor& out, const std::vector<double>& r) {
  std::vector<double> v = out.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < v.size(); ++i) s += v[i] * r[i];
  return s;
}
}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                          const std::vector<Tensor>& inputs, double eps, double atol, double rtol) {
  GradcheckResult res;
  DenormalScope exact(false);  // float64 differences must see every tiny value, whatever the process set
  for (const Tensor& x : inputs) x.impl()->grad.reset();
  Tensor out = f(inputs);
  std::vector<double> r(size_t(out.numel()));
  for (size_t i = 0; i < r.size(); ++i) r[i] = 0.5 + philox_uniform(1234, 0, i);  // never zero
  // The gradient of sum(out * r) with respect to out is r: backward from out with r.
  backward(out, to_contiguous(from_vector(r, out.shape()), out.device(), out.dtype()));

  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    LOUPE_CHECK(x.dtype() == DType::f64 && x.device().is_cpu() && x.is_contiguous(),
                "gradcheck wants contiguous float64 CPU inputs");
    std::vector<double> analytic = x.grad().defined() ? x.grad().to_vector<double>()
                                                      : std::vector<double>(size_t(x.numel()), 0.0);
    double* p = x.data<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double orig = p[i];
      double fp, fm;
      {
        NoGradGuard g;
        p[i] = orig + eps;
        fp = project(f(inputs), r);
        p[i] = orig - eps;
        fm = project(f(inputs), r);
        p[i] = orig;
      }
      double numeric = (fp - fm) / (2 * eps);
      double err = std::abs(analytic[size_t(i)] - numeric);
      res.max_abs_err = std::max(res.max_abs_err, err);
      if (!(err <= atol + rtol * std::abs(numeric)) && res.ok) {  // a NaN on either side fails too
        res.ok = false;
        std::ostringstream s;
        s << "input " << k << " element " << i << ": analytic " << analytic[size_t(i)] << " vs numeric " << numeric;
        res.message = s.str();
      }
    }
  }
  return res;
}

}  // namespace loupe::autograd
