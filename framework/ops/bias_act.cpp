#include "ops/bias_act.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace loupe {

bool check_epilogue(const char* op, const Tensor& x, const Tensor& b, int64_t C, std::optional<Act> act, double p,
                    bool training) {
  LOUPE_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == C && b.dtype() == x.dtype() && b.device() == x.device()),
              op, ": the bias must be [", C, "] in the input's dtype and device, got ",
              b.defined() ? b.shape().str() + " " + dtype_name(b.dtype()) : std::string("none"));
  LOUPE_CHECK(p >= 0 && p < 1, "dropout probability must be in [0, 1), got ", p);
  const bool dropout = training && p > 0;
  LOUPE_CHECK(!dropout || !act || *act == Act::Relu, op, ": dropout fuses after relu or no activation only");
  return dropout;
}

BiasActArgs bias_act_args(const Tensor& x, std::optional<Act> act, bool dropout, double p) {
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
  if (dropout) a.rng = default_generator().draw(uint64_t(x.numel()));
  return a;
}

Tensor bias_act_apply(const Tensor& x, const Tensor& b, const BiasActArgs& a) {
  Tensor y = empty_like(x);
  if (y.numel() > 0) kernels<BiasActKernels>(x.device()).forward(current_context(), y, x, b, a);
  add_flops(double(y.numel()) * ((b.defined() ? 1 : 0) + (a.act >= 0 ? (a.act == int(Act::Relu) ? 1 : 4) : 0) +
                                 (a.dropout ? 1 : 0)));
  return y;
}

BiasActGrads bias_act_grad(const Tensor& y, const Tensor& gy_in, const BiasActArgs& a, bool bias_grad) {
  Tensor gy = contiguous(gy_in, y.memory_format());
  BiasActGrads r;
  r.gx = empty_like(y);
  const bool fused = bias_grad && bias_act_fuses_bias_grad(a.C, a.inner);
  if (fused) r.gb = empty(Shape{a.C}, y.dtype(), y.device());
  kernels<BiasActKernels>(y.device()).backward(current_context(), r.gx, r.gb, y, gy, a);
  if (bias_grad && !fused) r.gb = sum_except(r.gx, 1);
  // (sum_except counts its own FLOPs where it runs)
  add_flops(double(y.numel()) *
            ((a.act >= 0 ? (a.act == int(Act::Relu) ? 1 : 3) : 0) + (a.dropout ? 1 : 0) + (fused ? 1 : 0)));
  return r;
}

namespace {
struct BiasActBackward : autograd::Node {
  Tensor y;  // the output
  BiasActArgs a;
  bool need_x = false, need_b = false;
  const char* name() const override { return "BiasActBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    BiasActGrads r = bias_act_grad(y, g[0], a, need_b);
    return {need_x ? r.gx : Tensor(), r.gb};
  }
  void release() override { y = Tensor(); }
};
}  // namespace

Tensor bias_act(const Tensor& x, const Tensor& b, std::optional<Act> act, double p, bool training) {
  OpScope scope_("bias_act", {&x, &b});
  LOUPE_CHECK(is_floating(x.dtype()) && x.dim() >= 2, "bias_act needs a floating [N, C, ...] input, got ",
              x.shape().str(), " ", dtype_name(x.dtype()));
  const bool dropout = check_epilogue("bias_act", x, b, x.size(1), act, p, training);
  Tensor xc = dense(x), bc = b.defined() ? contiguous(b) : Tensor();
  BiasActArgs a = bias_act_args(xc, act, dropout, p);
  Tensor y = bias_act_apply(xc, bc, a);
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
