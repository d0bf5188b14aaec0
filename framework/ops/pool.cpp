#include "ops/pool.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/bias_act.h"
#include "ops/dropout.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace loupe {

namespace {
struct PoolBackward : autograd::Node {
  PoolMode mode;
  Tensor x, y;
  Pool2dParams p;
  const char* name() const override { return mode == PoolMode::Max ? "MaxPool2dBackward" : "AvgPool2dBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gx = empty_like(x);
    kernels<PoolKernels>(x.device()).backward(current_context(), mode, gx, x, y, contiguous(g[0], y.memory_format()),
                                              p);
    add_flops(double(y.numel()) * p.kernel_h * p.kernel_w);
    return {gx};
  }
  void release() override { x = y = Tensor(); }
};

// Max pooling and its dropout through the backend's fused kernels (see PoolKernels).
struct MaxPoolFusedBackward : autograd::Node {
  Tensor x;
  Pool2dParams p;
  PoolDropout d;
  int64_t y_numel = 0;
  const char* name() const override { return "MaxPool2dBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gx = empty_like(x);
    LOUPE_CHECK(kernels<PoolKernels>(x.device())
                    .max_backward_fused(current_context(), gx, x, contiguous(g[0], x.memory_format()), p, d),
                "max pooling: the fused backward refused the shapes its forward took");
    add_flops(double(y_numel) * (p.kernel_h * p.kernel_w + (d.on ? 1 : 0)));
    return {gx};
  }
  void release() override { x = Tensor(); }
};

// max_pool2d_of_relu's: the pooling's fused backward through the relu before it and into the bias.
struct MaxPoolOfReluBackward : MaxPoolFusedBackward {
  bool need_x = false, need_b = false;
  const char* name() const override { return "MaxPool2dOfReluBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    const Tensor gy = contiguous(g[0], x.memory_format());
    Tensor gz = empty_like(x), gb = empty(Shape{x.size(1)}, x.dtype(), x.device());
    const double n = double(x.numel());
    if (kernels<PoolKernels>(x.device()).max_backward_relu_bias(current_context(), gz, gb, x, gy, p, d)) {
      add_flops(double(y_numel) * (p.kernel_h * p.kernel_w + (d.on ? 1 : 0)) + 2 * n);  // + relu's and the sum's
    } else {  // the pooling's backward, then bias_act's (relu's mask and the channel sums)
      std::vector<Tensor> gx = MaxPoolFusedBackward::apply(g);
      BiasActGrads r = bias_act_grad(x, gx[0], bias_act_args(x, Act::Relu, false, 0), true);
      gz = r.gx, gb = r.gb;
    }
    return {need_x ? gz : Tensor(), need_b ? gb : Tensor()};
  }
};

bool fused_pool_fits(DType t, int64_t channels, const Pool2dParams& p) {
  const int64_t size = t == DType::f32 ? 4 : 2;
  return (t == DType::f32 || t == DType::f16 || t == DType::bf16) && channels * size % 16 == 0 &&
         p.kernel_h == p.stride_h && p.kernel_w == p.stride_w && p.pad_h == 0 && p.pad_w == 0;
}

Tensor pool2d(PoolMode mode, const Tensor& x, const Pool2dParams& p, double drop = 0, bool training = false) {
  OpScope scope_(mode == PoolMode::Max ? "max_pool2d" : "avg_pool2d", {&x});
  LOUPE_CHECK(x.dim() == 4, "pooling needs x [N, C, H, W], got ", x.shape().str());
  LOUPE_CHECK(p.kernel_h > 0 && p.kernel_w > 0 && p.stride_h > 0 && p.stride_w > 0 && p.pad_h >= 0 && p.pad_w >= 0 &&
                  p.pad_h < p.kernel_h && p.pad_w < p.kernel_w,
              "pooling: bad kernel, stride or padding (padding must be smaller than the kernel)");
  int64_t P = (x.size(2) + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
  int64_t Q = (x.size(3) + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
  // Not P > 0: C++ divides toward zero, so a window past the input by less than a stride gave P = 1.
  LOUPE_CHECK(x.size(2) + 2 * p.pad_h >= p.kernel_h && x.size(3) + 2 * p.pad_w >= p.kernel_w, "pooling: a ", p.kernel_h,
              "x", p.kernel_w, " window does not fit a ", x.size(2), "x", x.size(3), " input");
  LOUPE_CHECK(drop >= 0 && drop < 1, "dropout probability must be in [0, 1), got ", drop);
  // The output keeps the input's memory format (NCHW or channels-last).
  MemoryFormat f = x.memory_format();
  Tensor xc = contiguous(x, f);
  Tensor y = empty(Shape{x.size(0), x.size(1), P, Q}, x.dtype(), x.device(), f);
  const PoolKernels& k = kernels<PoolKernels>(x.device());
  const ExecContext ctx = current_context();
  if (mode == PoolMode::Max && k.max_forward_fused) {
    PoolDropout d;
    d.on = training && drop > 0;
    d.p = float(drop);
    // The draw is taken only when the fused kernel runs; otherwise dropout() takes the same one.
    Generator& gen = default_generator();
    const uint64_t offset0 = gen.offset;
    if (d.on) d.rng = gen.draw(uint64_t(y.numel()));
    if (k.max_forward_fused(ctx, y, xc, p, d)) {
      add_flops(double(y.numel()) * (p.kernel_h * p.kernel_w + (d.on ? 1 : 0)));
      if (autograd::needs_grad({&x})) {
        auto n = std::make_shared<MaxPoolFusedBackward>();
        n->x = xc.detach();
        n->p = p;
        n->d = d;
        n->y_numel = y.numel();
        autograd::record(n, {&x}, {&y});
      }
      return scope_.result(y);
    }
    gen.offset = offset0;
  }
  k.forward(ctx, mode, y, xc, p);
  add_flops(double(y.numel()) * p.kernel_h * p.kernel_w);
  if (autograd::needs_grad({&x})) {
    auto n = std::make_shared<PoolBackward>();
    n->mode = mode;
    n->x = xc.detach();
    n->y = y.detach();
    n->p = p;
    autograd::record(n, {&x}, {&y});
  }
  return scope_.result(training && drop > 0 ? dropout(y, drop, true) : y);
}
}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dParams& p) { return pool2d(PoolMode::Max, x, p); }
Tensor max_pool2d(const Tensor& x, const Pool2dParams& p, double drop, bool training) {
  return pool2d(PoolMode::Max, x, p, drop, training);
}
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p) { return pool2d(PoolMode::Avg, x, p); }

bool max_pool2d_of_relu_fits(Device d, DType t, int64_t channels, const Pool2dParams& p) {
  const PoolKernels& k = kernels<PoolKernels>(d);
  return d.is_cuda() && k.max_forward_fused && k.max_backward_relu_bias && fused_pool_fits(t, channels, p);
}

Tensor max_pool2d_of_relu(const Tensor& x, const Tensor& b, const Pool2dParams& p, double drop, bool training) {
  OpScope scope_("max_pool2d", {&x});
  LOUPE_CHECK(x.dim() == 4 && x.memory_format() == MemoryFormat::ChannelsLast &&
                  x.is_contiguous(MemoryFormat::ChannelsLast) && max_pool2d_of_relu_fits(x.device(), x.dtype(), x.size(1), p),
              "max_pool2d_of_relu: no fused pooling for x ", x.shape().str(), " ", dtype_name(x.dtype()));
  LOUPE_CHECK(b.defined() && b.dim() == 1 && b.size(0) == x.size(1) && b.dtype() == x.dtype(),
              "max_pool2d_of_relu: the bias must be [", x.size(1), "] in x's dtype");
  LOUPE_CHECK(x.size(2) >= p.kernel_h && x.size(3) >= p.kernel_w, "pooling: a ", p.kernel_h, "x", p.kernel_w,
              " window does not fit a ", x.size(2), "x", x.size(3), " input");
  LOUPE_CHECK(drop >= 0 && drop < 1, "dropout probability must be in [0, 1), got ", drop);
  Tensor y = empty(Shape{x.size(0), x.size(1), x.size(2) / p.kernel_h, x.size(3) / p.kernel_w}, x.dtype(), x.device(),
                   MemoryFormat::ChannelsLast);
  PoolDropout d;
  d.on = training && drop > 0;
  d.p = float(drop);
  if (d.on) d.rng = default_generator().draw(uint64_t(y.numel()));  // where max_pool2d draws it
  LOUPE_CHECK(kernels<PoolKernels>(x.device()).max_forward_fused(current_context(), y, x, p, d),
              "max_pool2d_of_relu: the fused pooling refused x ", x.shape().str());
  add_flops(double(y.numel()) * (p.kernel_h * p.kernel_w + (d.on ? 1 : 0)));
  if (autograd::needs_grad({&x, &b})) {
    auto n = std::make_shared<MaxPoolOfReluBackward>();
    n->x = x.detach();
    n->p = p;
    n->d = d;
    n->y_numel = y.numel();
    n->need_x = x.requires_grad();
    n->need_b = b.requires_grad();
    autograd::record(n, {&x, &b}, {&y});
  }
  return scope_.result(y);
}

Tensor global_avg_pool(const Tensor& x) {
  OpScope scope_("global_avg_pool", {&x});
  LOUPE_CHECK(x.dim() == 4, "global_avg_pool needs x [N, C, H, W], got ", x.shape().str());
  return scope_.result(mean(reshape(x, Shape{x.size(0), x.size(1), x.size(2) * x.size(3)}), 2));
}

}  // namespace loupe
