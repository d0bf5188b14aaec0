#include "ops/mask.h"

#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/view.h"

namespace loupe {

Tensor any_not_equal(const Tensor& x, double value) {
  OpScope scope_("any_not_equal", {&x});
  LOUPE_CHECK(is_floating(x.dtype()), "a mask of values needs floating-point input, got ", dtype_name(x.dtype()));
  LOUPE_CHECK(x.dim() >= 1, "a mask of values needs features along a last dimension");
  const Tensor xc = contiguous(x);
  const int64_t features = x.size(x.dim() - 1);
  Shape s;
  for (int d = 0; d + 1 < x.dim(); ++d) s.push_back(x.size(d));
  Tensor out = empty(s, x.dtype(), x.device());
  if (out.numel() > 0) kernels<MaskKernels>(x.device()).any_not_equal(current_context(), out, xc, features, value);
  add_flops(double(x.numel()));
  return scope_.result(out);
}

}  // namespace loupe
