#include "ops/pool.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "instrument/flops.h"
#include "ops/reduce.h"

namespace loupe {

namespace {
struct PoolBackward : autograd::Node {
  PoolMode mode;
  Tensor x, y;
  Pool2dParams p;
  const char* name() const override { return mode == PoolMode::Max ? "MaxPool2dBackward" : "AvgPool2dBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gx = empty_like(x);
    kernels<PoolKernels>(x.device()).backward(mode, gx, x, y, g[0].contiguous(y.memory_format()), p);
    instrument::add_flops(double(y.numel()) * p.kernel_h * p.kernel_w);
    return {gx};
  }
  void release() override { x = y = Tensor(); }
};

Tensor pool(PoolMode mode, const Tensor& x, const Pool2dParams& p) {
  LOUPE_CHECK(x.dim() == 4, "pooling needs x [N, C, H, W], got ", x.shape().str());
  LOUPE_CHECK(p.kernel_h > 0 && p.kernel_w > 0 && p.stride_h > 0 && p.stride_w > 0 && p.pad_h >= 0 && p.pad_w >= 0 &&
                  p.pad_h < p.kernel_h && p.pad_w < p.kernel_w,
              "pooling: bad kernel, stride or padding (padding must be smaller than the kernel)");
  int64_t P = (x.size(2) + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1;
  int64_t Q = (x.size(3) + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1;
  LOUPE_CHECK(P > 0 && Q > 0, "pooling: a ", p.kernel_h, "x", p.kernel_w, " window does not fit a ", x.size(2), "x",
              x.size(3), " input");
  // The output keeps the input's memory format (NCHW or channels-last).
  MemoryFormat f = x.memory_format();
  Tensor xc = x.contiguous(f);
  Tensor y = empty(Shape{x.size(0), x.size(1), P, Q}, x.dtype(), x.device(), f);
  kernels<PoolKernels>(x.device()).forward(mode, y, xc, p);
  instrument::add_flops(double(y.numel()) * p.kernel_h * p.kernel_w);
  if (autograd::needs_grad({&x})) {
    auto n = std::make_shared<PoolBackward>();
    n->mode = mode;
    n->x = xc.detach();
    n->y = y.detach();
    n->p = p;
    autograd::record(n, {&x}, {&y});
  }
  return y;
}
}  // namespace

Tensor max_pool2d(const Tensor& x, const Pool2dParams& p) { return pool(PoolMode::Max, x, p); }
Tensor avg_pool2d(const Tensor& x, const Pool2dParams& p) { return pool(PoolMode::Avg, x, p); }

Tensor global_avg_pool(const Tensor& x) {
  LOUPE_CHECK(x.dim() == 4, "global_avg_pool needs x [N, C, H, W], got ", x.shape().str());
  return mean(x.reshape(Shape{x.size(0), x.size(1), x.size(2) * x.size(3)}), 2);
}

}  // namespace loupe
