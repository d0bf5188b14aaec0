#include "ops/bias_act.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace loupe {

namespace {
BiasActArgs args_for(const Tensor& x, std::optional<Act> act, bool dropout, double p) {
  BiasActArgs a;
  a.C = x.size(1);
  a.outer = x.size(0);
  a.inner = a.C ? x.numel() / (a.outer * a.C) : 0;
  if (x.memory_format() == MemoryFormat::ChannelsLast) {  // NHWC: [N*H*W, C], the channel innermost
    a.outer = x.numel() / a.C;
    a.inner = 1;
  }
  a.act = act ? int(*act) : -1;
  a.dropout = dropout;
  a.p = float(p);
  return a;
}

struct BiasActBackward : autograd::Node {
  Tensor y;  // the output
  BiasActArgs a;
  bool need_x = false, need_b = false;
  const char* name() const override { return "BiasActBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gy = contiguous(g[0], y.memory_format());
    Tensor gx = empty_like(y), gb;
    const bool fused = need_b && bias_act_fuses_bias_grad(a.C, a.inner);
    if (fused) gb = empty(Shape{a.C}, y.dtype(), y.device());
    kernels<BiasActKernels>(y.device()).backward(current_context(), gx, gb, y, gy, a);
    if (need_b && !fused) gb = sum_except(gx, 1);
    // (sum_except counts its own FLOPs where it runs)
    add_flops(double(y.numel()) *
                          ((a.act >= 0 ? (a.act == int(Act::Relu) ? 1 : 3) : 0) + (a.dropout ? 1 : 0) + (fused ? 1 : 0)));
    return {need_x ? gx : Tensor(), gb};
  }
  void release() override { y = Tensor(); }
};
}  // namespace

Tensor bias_act(const Tensor& x, const Tensor& b, std::optional<Act> act, double p, bool training) {
  OpScope scope_("bias_act", {&x, &b});
  LOUPE_CHECK(is_floating(x.dtype()) && x.dim() >= 2, "bias_act needs a floating [N, C, ...] input, got ",
              x.shape().str(), " ", dtype_name(x.dtype()));
  LOUPE_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == x.size(1) && b.dtype() == x.dtype() &&
                               b.device() == x.device()),
              "bias_act: the bias must be [", x.size(1), "] in the input's dtype and device, got ",
              b.defined() ? b.shape().str() + " " + dtype_name(b.dtype()) : std::string("none"));
  LOUPE_CHECK(p >= 0 && p < 1, "dropout probability must be in [0, 1), got ", p);
  const bool dropout = training && p > 0;
  LOUPE_CHECK(!dropout || !act || *act == Act::Relu, "bias_act: dropout fuses after relu or no activation only");
  Tensor xc = dense(x), bc = b.defined() ? contiguous(b) : Tensor();
  Tensor y = empty_like(xc);
  BiasActArgs a = args_for(xc, act, dropout, p);
  if (dropout) a.rng = default_generator().draw(uint64_t(xc.numel()));
  if (y.numel() > 0) kernels<BiasActKernels>(x.device()).forward(current_context(), y, xc, bc, a);
  add_flops(double(y.numel()) *
                        ((bc.defined() ? 1 : 0) + (act ? (*act == Act::Relu ? 1 : 4) : 0) + (dropout ? 1 : 0)));
  if (autograd::needs_grad({&x, &b})) {
    auto n = std::make_shared<BiasActBackward>();
    n->y = y.detach();
    n->a = a;
    n->need_x = x.requires_grad();
    n->need_b = b.defined() && b.requires_grad();
    autograd::record(n, {&x, &b}, {&y});
  }
  return scope_.result(y);
}

}  // namespace loupe
