#include "ops/nonlinearity.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/view.h"

namespace loupe {

namespace {
// Per element, forward and backward alike (core/flops.h).
constexpr double kNonlinFlops = 4;

struct NonlinearityBackward : autograd::Node {
  Nonlin f;
  float slope;
  Tensor x;
  const char* name() const override {
    static const char* names[] = {"EluBackward",         "SeluBackward",     "GeluBackward",    "SiluBackward",
                                  "HardSigmoidBackward", "SoftplusBackward", "SoftsignBackward"};
    return names[int(f)];
  }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gx = empty_like(x);
    if (x.numel() > 0)
      kernels<NonlinKernels>(x.device()).backward(current_context(), f, slope, gx, x, contiguous(g[0], x.memory_format()));
    add_flops(double(x.numel()) * kNonlinFlops);
    return {gx};
  }
  void release() override { x = Tensor(); }
};
}  // namespace

Tensor nonlinearity(Nonlin f, const Tensor& x, float slope) {
  static const char* names[] = {"elu", "selu", "gelu", "silu", "hard_sigmoid", "softplus", "softsign"};
  OpScope scope_(names[int(f)], {&x});
  LOUPE_CHECK(is_floating(x.dtype()), names[int(f)], " needs floating-point input, got ", dtype_name(x.dtype()));
  Tensor xc = dense(x);  // elementwise: any dense layout, kept
  Tensor y = empty_like(xc);
  if (y.numel() > 0) kernels<NonlinKernels>(x.device()).forward(current_context(), f, slope, y, xc);
  add_flops(double(y.numel()) * kNonlinFlops);
  if (autograd::needs_grad({&x})) {
    auto n = std::make_shared<NonlinearityBackward>();
    n->f = f;
    n->slope = slope;
    n->x = xc.detach();
    autograd::record(n, {&x}, {&y});
  }
  return scope_.result(y);
}

}  // namespace loupe
