#include "ops/elementwise.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace loupe {

using autograd::Node;

namespace {

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  LOUPE_CHECK(a.device() == b.device(), op, ": tensors on ", a.device().str(), " and ", b.device().str(),
              "; move one with .to()");
  LOUPE_CHECK(a.dtype() == b.dtype(), op, ": dtypes ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()), " differ");
}

struct BinaryBackward : Node {
  BinaryOp op;
  Tensor a, b;  // saved only where the gradient needs them
  Shape a_shape, b_shape;
  bool need_a = false, need_b = false;
  const char* name() const override {
    static const char* names[] = {"AddBackward", "SubBackward", "MulBackward", "DivBackward"};
    return names[int(op)];
  }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const Tensor& g = grads[0];
    Tensor ga, gb;
    switch (op) {
      case BinaryOp::Add: ga = g; gb = g; break;
      case BinaryOp::Sub: ga = g; gb = mul(g, -1.0); break;
      case BinaryOp::Mul:
        if (need_a) ga = mul(g, b);
        if (need_b) gb = mul(g, a);
        break;
      case BinaryOp::Div:
        if (need_a) ga = div(g, b);
        if (need_b) gb = mul(div(mul(g, a), mul(b, b)), -1.0);
        break;
    }
    if (need_a) ga = sum_to(ga, a_shape); else ga = Tensor();
    if (need_b) gb = sum_to(gb, b_shape); else gb = Tensor();
    return {ga, gb};
  }
  void release() override { a = Tensor(); b = Tensor(); }
};

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  OpScope scope_(name, {&a, &b});
  check_same_device(a, b, name);
  Shape s = broadcast_shapes(a.shape(), b.shape());
  Tensor out = empty(s, a.dtype(), a.device());
  if (out.numel() > 0)
    kernels<ElementwiseKernels>(a.device()).binary(current_context(), op, out, a.expand(s), b.expand(s));
  add_flops(double(out.numel()));
  if (autograd::needs_grad({&a, &b})) {
    auto n = std::make_shared<BinaryBackward>();
    n->op = op;
    n->a_shape = a.shape();
    n->b_shape = b.shape();
    n->need_a = a.requires_grad();
    n->need_b = b.requires_grad();
    if (op == BinaryOp::Mul || op == BinaryOp::Div) {
      if (n->need_b) n->a = a.detach();
      n->b = b.detach();
    }
    autograd::record(n, {&a, &b}, {&out});
  }
  return scope_.result(out);
}

struct AffineBackward : Node {
  double scale;
  const char* name() const override { return "ScalarBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override { return {scale == 1.0 ? g[0] : mul(g[0], scale)}; }
};

Tensor affine(const Tensor& a, double m, double c) {
  OpScope scope_(c == 0 ? "mul" : m == 1 ? "add" : "affine", {&a});
  Tensor src = contiguous(a);
  Tensor out = empty(a.shape(), a.dtype(), a.device());
  if (out.numel() > 0) kernels<ElementwiseKernels>(a.device()).affine(current_context(), out, src, m, c);
  add_flops(double(out.numel()));
  if (autograd::needs_grad({&a})) {
    auto n = std::make_shared<AffineBackward>();
    n->scale = m;
    autograd::record(n, {&a}, {&out});
  }
  return scope_.result(out);
}

struct BiasAddBackward : Node {
  const char* name() const override { return "BiasAddBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    const Tensor& g = grads[0];
    // db[c] = sum over every dimension but 1.
    return {g, sum_except(g, 1)};
  }
};

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Add, a, b, "add"); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Sub, a, b, "sub"); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Mul, a, b, "mul"); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::Div, a, b, "div"); }
Tensor mul(const Tensor& a, double s) { return affine(a, s, 0.0); }
Tensor add(const Tensor& a, double s) { return affine(a, 1.0, s); }

Tensor bias_add(const Tensor& x, const Tensor& b) {
  OpScope scope_("bias_add", {&x, &b});
  check_same_device(x, b, "bias_add");
  LOUPE_CHECK(x.dim() >= 2 && b.dim() == 1 && b.size(0) == x.size(1), "bias_add: bias of shape ", b.shape().str(),
              " does not match dimension 1 of ", x.shape().str());
  Tensor xc = dense(x), bc = contiguous(b);
  Tensor out = empty_like(xc);
  int64_t outer = x.size(0), C = x.size(1), inner = C ? x.numel() / (outer * C) : 0;
  if (xc.memory_format() == MemoryFormat::ChannelsLast) {  // NHWC: [N*H*W, C] with the channel innermost
    outer = x.numel() / C;
    inner = 1;
  }
  if (out.numel() > 0)
    kernels<ElementwiseKernels>(x.device()).bias_add(current_context(), out, xc, bc, outer, C, inner);
  add_flops(double(out.numel()));
  if (autograd::needs_grad({&x, &b})) autograd::record(std::make_shared<BiasAddBackward>(), {&x, &b}, {&out});
  return scope_.result(out);
}

void add_(const Tensor& dst, const Tensor& src, double alpha) {
  // On CUDA a float16/bfloat16 src may also go into a float32 dst (half gradients into float32 ones).
  bool widening = dst.is_cuda() && src.device() == dst.device() && dst.dtype() == DType::f32 &&
                  (src.dtype() == DType::f16 || src.dtype() == DType::bf16);
  if (!widening) check_same_device(dst, src, "add_");
  LOUPE_CHECK(dst.shape() == src.shape(), "add_: shapes ", dst.shape().str(), " and ", src.shape().str(), " differ");
  LOUPE_CHECK(dst.is_contiguous(), "add_ needs a contiguous destination");
  if (dst.numel() == 0) return;
  OpScope scope_("add_", {&dst, &src});
  scope_.result(dst);
  kernels<ElementwiseKernels>(dst.device()).axpy(current_context(), dst, alpha, contiguous(src));
  add_flops(double(dst.numel()));
}

}  // namespace loupe
