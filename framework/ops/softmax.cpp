#include "ops/softmax.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/view.h"

namespace loupe {

namespace {
struct SoftmaxBackward : autograd::Node {
  bool log;
  Tensor y;
  const char* name() const override { return log ? "LogSoftmaxBackward" : "SoftmaxBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    int64_t cols = y.size(-1), rows = y.numel() / cols;
    Tensor gx = empty(y.shape(), y.dtype(), y.device());
    kernels<SoftmaxKernels>(y.device()).backward(current_context(), log, gx, y, contiguous(g[0]), rows, cols);
    add_flops(4.0 * double(y.numel()));
    return {gx};
  }
  void release() override { y = Tensor(); }
};

Tensor softmax_impl(const Tensor& x, bool log) {
  OpScope scope_(log ? "log_softmax" : "softmax", {&x});
  LOUPE_CHECK(x.dim() >= 1 && is_floating(x.dtype()), "softmax needs a floating-point tensor of at least 1 dimension");
  Tensor xc = contiguous(x);
  int64_t cols = x.size(-1), rows = cols ? x.numel() / cols : 0;
  Tensor y = empty(x.shape(), x.dtype(), x.device());
  if (y.numel() > 0) kernels<SoftmaxKernels>(x.device()).forward(current_context(), log, y, xc, rows, cols);
  add_flops(4.0 * double(y.numel()));
  if (autograd::needs_grad({&x})) {
    auto n = std::make_shared<SoftmaxBackward>();
    n->log = log;
    n->y = y.detach();
    autograd::record(n, {&x}, {&y});
  }
  return scope_.result(y);
}
}  // namespace

Tensor softmax(const Tensor& x) { return softmax_impl(x, false); }
Tensor log_softmax(const Tensor& x) { return softmax_impl(x, true); }

}  // namespace loupe
