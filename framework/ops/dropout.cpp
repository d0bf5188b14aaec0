#include "ops/dropout.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "core/random.h"
#include "ops/view.h"

namespace loupe {

namespace {
struct DropoutBackward : autograd::Node {
  float p;
  RngDraw rng;
  MemoryFormat format;  // the mask follows the forward input's memory order
  const char* name() const override { return "DropoutBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gy = contiguous(g[0], format);
    Tensor gx = empty_like(gy);
    kernels<DropoutKernels>(gy.device()).apply(current_context(), gx, gy, p, rng);  // the same mask, regenerated
    add_flops(double(gy.numel()));
    return {gx};
  }
};
}  // namespace

Tensor dropout(const Tensor& x, double p, bool training) {
  OpScope scope_("dropout", {&x});
  LOUPE_CHECK(p >= 0 && p < 1, "dropout probability must be in [0, 1), got ", p);
  if (!training || p == 0) return scope_.result(x);
  RngDraw rng = default_generator().draw(uint64_t(x.numel()));
  Tensor xc = dense(x);  // the mask is drawn in memory order: any dense layout, kept
  Tensor y = empty_like(xc);
  if (y.numel() > 0) kernels<DropoutKernels>(x.device()).apply(current_context(), y, xc, float(p), rng);
  add_flops(double(y.numel()));
  if (autograd::needs_grad({&x})) {
    auto n = std::make_shared<DropoutBackward>();
    n->p = float(p);
    n->rng = rng;
    n->format = y.memory_format();
    autograd::record(n, {&x}, {&y});
  }
  return scope_.result(y);
}

}  // namespace loupe
