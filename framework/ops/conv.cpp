#include "ops/conv.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/view.h"

namespace loupe {

namespace {
struct Conv2dBackward : autograd::Node {
  Tensor x, w;  // in the forward pass's memory format
  Conv2dParams p;
  ExecContext ctx;  // the forward's: the backward's math and plans follow it
  MemoryFormat format = MemoryFormat::Contiguous;
  bool need_x = false, need_w = false;
  const char* name() const override { return "Conv2dBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gy = contiguous(g[0], format);
    Tensor gx = need_x ? empty(x.shape(), x.dtype(), x.device(), format) : Tensor();
    Tensor gw = need_w ? empty(w.shape(), w.dtype(), w.device(), format) : Tensor();
    kernels<ConvKernels>(x.device()).backward(ctx, gx, gw, x, w, gy, p);
    double macs = double(gy.numel()) * double(w.size(1) * w.size(2) * w.size(3));
    add_flops(2 * macs * ((need_x ? 1 : 0) + (need_w ? 1 : 0)));
    return {gx, gw};
  }
  void release() override { x = w = Tensor(); }
};
}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  OpScope scope_("conv2d", {&x, &w});
  LOUPE_CHECK(x.dim() == 4 && w.dim() == 4, "conv2d needs x [N, C, H, W] and w [K, C, R, S], got ", x.shape().str(),
              " and ", w.shape().str());
  LOUPE_CHECK(x.size(1) == w.size(1), "conv2d: x has ", x.size(1), " channels but the filters expect ", w.size(1));
  LOUPE_CHECK(x.device() == w.device() && x.dtype() == w.dtype(), "conv2d: x and w differ in device or dtype");
  LOUPE_CHECK(p.stride_h > 0 && p.stride_w > 0 && p.pad_h >= 0 && p.pad_w >= 0, "conv2d: bad stride or padding");
  int64_t P = (x.size(2) + 2 * p.pad_h - w.size(2)) / p.stride_h + 1;
  int64_t Q = (x.size(3) + 2 * p.pad_w - w.size(3)) / p.stride_w + 1;
  LOUPE_CHECK(x.size(2) + 2 * p.pad_h >= w.size(2) && x.size(3) + 2 * p.pad_w >= w.size(3), "conv2d: a ",
              w.size(2), "x", w.size(3), " kernel does not fit the padded ", x.size(2), "x", x.size(3), " input");
  // The output keeps the input's memory format; channels-last filters are KRSC (w restrided or copied).
  MemoryFormat f = x.memory_format();
  Tensor xc, wc;
  {
    NoGradGuard g;  // the node below records x and w themselves
    xc = contiguous(x, f);
    wc = contiguous(w, f);
  }
  Tensor y = empty(Shape{x.size(0), w.size(0), P, Q}, x.dtype(), x.device(), f);
  const ExecContext ctx = current_context();
  kernels<ConvKernels>(x.device()).forward(ctx, y, xc, wc, p);
  add_flops(2.0 * double(y.numel()) * double(w.size(1) * w.size(2) * w.size(3)));
  if (autograd::needs_grad({&x, &w})) {
    auto n = std::make_shared<Conv2dBackward>();
    n->x = xc.detach();
    n->w = wc.detach();
    n->p = p;
    n->ctx = ctx;
    n->format = f;
    n->need_x = x.requires_grad();
    n->need_w = w.requires_grad();
    autograd::record(n, {&x, &w}, {&y});
  }
  return scope_.result(y);
}

}  // namespace loupe
