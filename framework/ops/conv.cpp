#include "ops/conv.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/knobs.h"
#include "core/op_record.h"
#include "ops/bias_act.h"
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
  // The gradients of x and w from the output's, gy.
  std::vector<Tensor> grads(const Tensor& gy_in) const {
    Tensor gy = contiguous(gy_in, format);
    Tensor gx = need_x ? empty(x.shape(), x.dtype(), x.device(), format) : Tensor();
    Tensor gw = need_w ? empty(w.shape(), w.dtype(), w.device(), format) : Tensor();
    kernels<ConvKernels>(x.device()).backward(ctx, gx, gw, x, w, gy, p);
    double macs = double(gy.numel()) * double(w.size(1) * w.size(2) * w.size(3));
    add_flops(2 * macs * ((need_x ? 1 : 0) + (need_w ? 1 : 0)));
    return {gx, gw};
  }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override { return grads(g[0]); }
  void release() override { x = w = Tensor(); }
};

// The fused forward's backward: bias_act's (from the saved output), then the convolution's.
struct Conv2dBiasActBackward : Conv2dBackward {
  Tensor y;
  BiasActArgs a;
  bool need_b = false;
  const char* name() const override { return "Conv2dBiasActBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    const ConvKernels& k = kernels<ConvKernels>(x.device());
    if (!need_x && need_w && k.filter_bias_act_backward) {  // a first layer: one pass, where faster
      Tensor gy = contiguous(g[0], format);
      Tensor gw = empty(w.shape(), w.dtype(), w.device(), format);
      Tensor gb = need_b ? empty(Shape{w.size(0)}, y.dtype(), y.device()) : Tensor();
      if (k.filter_bias_act_backward(ctx, gw, gb, x, w, y, gy, a.act, p, false)) {
        // as bias_act's backward and the filter gradient count them
        const double n = double(y.numel());
        add_flops(n * ((a.act == int(Act::Relu) ? 1 : 0) + (need_b ? 1 : 0)) + 2 * n * double(w.size(1) * w.size(2) * w.size(3)));
        return {Tensor(), gw, gb};
      }
    }
    BiasActGrads r = bias_act_grad(y, g[0], a, need_b);
    std::vector<Tensor> out = need_x || need_w ? grads(r.gx) : std::vector<Tensor>{Tensor(), Tensor()};
    out.push_back(r.gb);
    return out;
  }
  void release() override {
    Conv2dBackward::release();
    y = Tensor();
  }
};

// The output's shape, after the checks every convolution makes.
Shape conv_output_shape(const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  LOUPE_CHECK(x.dim() == 4 && w.dim() == 4, "conv2d needs x [N, C, H, W] and w [K, C, R, S], got ", x.shape().str(),
              " and ", w.shape().str());
  LOUPE_CHECK(x.size(1) == w.size(1), "conv2d: x has ", x.size(1), " channels but the filters expect ", w.size(1));
  LOUPE_CHECK(x.device() == w.device() && x.dtype() == w.dtype(), "conv2d: x and w differ in device or dtype");
  LOUPE_CHECK(p.stride_h > 0 && p.stride_w > 0 && p.pad_h >= 0 && p.pad_w >= 0, "conv2d: bad stride or padding");
  int64_t P = (x.size(2) + 2 * p.pad_h - w.size(2)) / p.stride_h + 1;
  int64_t Q = (x.size(3) + 2 * p.pad_w - w.size(3)) / p.stride_w + 1;
  LOUPE_CHECK(x.size(2) + 2 * p.pad_h >= w.size(2) && x.size(3) + 2 * p.pad_w >= w.size(3), "conv2d: a ",
              w.size(2), "x", w.size(3), " kernel does not fit the padded ", x.size(2), "x", x.size(3), " input");
  return Shape{x.size(0), w.size(0), P, Q};
}

// x and w dense in x's memory format (channels-last filters are KRSC: w restrided or copied), b
// contiguous (or undefined), without a record: the convolution's node records x and w themselves.
struct DenseOperands {
  Tensor x, w, b;
  MemoryFormat f;
  DenseOperands(const Tensor& x0, const Tensor& w0, const Tensor& b0 = Tensor()) : f(x0.memory_format()) {
    NoGradGuard g;
    x = contiguous(x0, f);
    w = contiguous(w0, f);
    if (b0.defined()) b = contiguous(b0);
  }
};

template <class N>
std::shared_ptr<N> conv_node(const DenseOperands& o, const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  auto n = std::make_shared<N>();
  n->x = o.x.detach();
  n->w = o.w.detach();
  n->p = p;
  n->ctx = current_context();
  n->format = o.f;
  n->need_x = x.requires_grad();
  n->need_w = w.requires_grad();
  return n;
}

}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Conv2dParams& p) {
  OpScope scope_("conv2d", {&x, &w});
  const Shape out = conv_output_shape(x, w, p);
  const DenseOperands o(x, w);  // the output keeps the input's memory format
  Tensor y = empty(out, x.dtype(), x.device(), o.f);
  kernels<ConvKernels>(x.device()).forward(current_context(), y, o.x, o.w, p);
  add_flops(2.0 * double(y.numel()) * double(w.size(1) * w.size(2) * w.size(3)));
  if (autograd::needs_grad({&x, &w})) autograd::record(conv_node<Conv2dBackward>(o, x, w, p), {&x, &w}, {&y});
  return scope_.result(y);
}

namespace {
// y = act(conv(xc, wc) + bc) (xc, wc dense in format f, bc contiguous; no autograd record): one
// kernel where the backend has a faster one, else the convolution's and bias_act's. Counts the
// FLOPs as the separate ops do; a: bias_act's arguments for the backward.
Tensor conv_bias_act_forward(const ConvKernels& k, const Tensor& xc, const Tensor& wc, const Tensor& bc,
                             std::optional<Act> act, const Conv2dParams& p, const Shape& out, MemoryFormat f,
                             BiasActArgs& a) {
  Tensor y = empty(out, xc.dtype(), xc.device(), f);
  const ExecContext ctx = current_context();
  const double macs = double(y.numel()) * double(wc.size(1) * wc.size(2) * wc.size(3));
  a = bias_act_args(y, act, false, 0);
  if (k.forward_bias_act(ctx, y, xc, wc, bc, act ? int(*act) : -1, p)) {
    add_flops(2.0 * macs + double(y.numel()) * (act ? 2 : 1));  // as conv2d and bias_act count them
    return y;
  }
  Tensor z = empty(out, xc.dtype(), xc.device(), f);  // no faster kernel: the two, as the separate ops
  k.forward(ctx, z, xc, wc, p);
  add_flops(2.0 * macs);
  return bias_act_apply(z, bc, a);
}

bool fuses_epilogue(const ConvKernels& k, const Tensor& x, const Tensor& w, const Tensor& b, std::optional<Act> act) {
  static const bool fuse = knobs::flag("LOUPE_FUSE");
  return fuse && k.forward_bias_act && b.defined() && (!act || *act == Act::Relu) && x.dim() == 4 && w.dim() == 4 &&
         b.dtype() == x.dtype() && b.dim() == 1 && b.size(0) == w.size(0) && b.device() == x.device();
}
}  // namespace

Tensor conv2d_bias_act(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p,
                       std::optional<Act> act, double dropout, bool training) {
  const ConvKernels& k = kernels<ConvKernels>(x.device());
  // On the CPU, and where the epilogue does not fuse: the two ops, each with its own record.
  if (!fuses_epilogue(k, x, w, b, act) || (training && dropout > 0))
    return bias_act(conv2d(x, w, p), b, act, dropout, training);
  OpScope scope_("conv2d", {&x, &w, &b});
  const Shape out = conv_output_shape(x, w, p);
  const DenseOperands o(x, w, b);
  BiasActArgs a;
  Tensor y = conv_bias_act_forward(k, o.x, o.w, o.b, act, p, out, o.f, a);
  if (autograd::needs_grad({&x, &w, &b})) {
    auto n = conv_node<Conv2dBiasActBackward>(o, x, w, p);
    n->need_b = b.requires_grad();
    n->y = y.detach();
    n->a = a;
    autograd::record(n, {&x, &w, &b}, {&y});
  }
  return scope_.result(y);
}

bool conv2d_relu_max_pool_fits(const Tensor& x, const Tensor& w, const Tensor& b, const Pool2dParams& pp) {
  return fuses_epilogue(kernels<ConvKernels>(x.device()), x, w, b, Act::Relu) &&
         x.memory_format() == MemoryFormat::ChannelsLast && max_pool2d_of_relu_fits(x.device(), x.dtype(), w.size(0), pp);
}

Tensor conv2d_relu_max_pool(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& cp,
                            const Pool2dParams& pp, double dropout, bool training) {
  const ConvKernels& k = kernels<ConvKernels>(x.device());
  if (!conv2d_relu_max_pool_fits(x, w, b, pp)) return Tensor();
  Tensor y;
  {
    OpScope scope_("conv2d", {&x, &w, &b});
    const Shape out = conv_output_shape(x, w, cp);
    const DenseOperands o(x, w, b);
    BiasActArgs a;
    y = conv_bias_act_forward(k, o.x, o.w, o.b, Act::Relu, cp, out, o.f, a);
    // The convolution's node takes the gradient at its sum, z's (max_pool2d_of_relu's backward
    // gives it, and b's).
    if (autograd::needs_grad({&x, &w})) autograd::record(conv_node<Conv2dBackward>(o, x, w, cp), {&x, &w}, {&y});
    scope_.result(y);
  }
  return max_pool2d_of_relu(y, b, pp, dropout, training);
}

}  // namespace loupe
