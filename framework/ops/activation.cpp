#include "ops/activation.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/view.h"

namespace loupe {

namespace {
struct ActivationBackward : autograd::Node {
  Act act;
  Tensor y;
  const char* name() const override {
    static const char* names[] = {"ReluBackward", "SigmoidBackward", "TanhBackward"};
    return names[int(act)];
  }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gx = empty_like(y);
    kernels<ActivationKernels>(y.device()).backward(current_context(), act, gx, y, contiguous(g[0], y.memory_format()));
    add_flops(double(y.numel()) * (act == Act::Relu ? 1 : 3));
    return {gx};
  }
  void release() override { y = Tensor(); }
};
}  // namespace

Tensor activation(Act a, const Tensor& x) {
  OpScope scope_(a == Act::Relu ? "relu" : a == Act::Sigmoid ? "sigmoid" : "tanh", {&x});
  LOUPE_CHECK(is_floating(x.dtype()), "activations need floating-point input, got ", dtype_name(x.dtype()));
  Tensor xc = dense(x);  // elementwise: any dense layout, kept
  Tensor y = empty_like(xc);
  if (y.numel() > 0) kernels<ActivationKernels>(x.device()).forward(current_context(), a, y, xc);
  add_flops(double(y.numel()) * (a == Act::Relu ? 1 : 4));
  if (autograd::needs_grad({&x})) {
    auto n = std::make_shared<ActivationBackward>();
    n->act = a;
    n->y = y.detach();
    autograd::record(n, {&x}, {&y});
  }
  return scope_.result(y);
}

Tensor relu(const Tensor& x) { return activation(Act::Relu, x); }
Tensor sigmoid(const Tensor& x) { return activation(Act::Sigmoid, x); }
Tensor tanh(const Tensor& x) { return activation(Act::Tanh, x); }

}  // namespace loupe
