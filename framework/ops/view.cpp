#include "ops/view.h"

#include <utility>

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/op_record.h"

namespace loupe {

using autograd::Node;

namespace {
struct ReshapeBackward : Node {
  Shape in_shape;
  const char* name() const override { return "ReshapeBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override { return {reshape(g[0], in_shape)}; }
};
struct TransposeBackward : Node {
  int d0, d1;
  const char* name() const override { return "TransposeBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override { return {transpose(g[0], d0, d1)}; }
};
struct SliceBackward : Node {
  Shape in_shape;
  int dim;
  int64_t start, end;
  const char* name() const override { return "SliceBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gx = zeros(in_shape, g[0].dtype(), g[0].device());
    copy_(slice(gx, dim, start, end), g[0]);
    return {gx};
  }
};
struct IdentityBackward : Node {  // contiguous(), clone()
  const char* name() const override { return "CopyBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override { return {g[0]}; }
};
struct ToDeviceBackward : Node {
  Device from;
  const char* name() const override { return "ToDeviceBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override { return {to(g[0], from)}; }
};
struct ToDtypeBackward : Node {
  DType from;
  const char* name() const override { return "ToDtypeBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override { return {to(g[0], from)}; }
};

// contiguous() and clone(): the gradient passes through unchanged.
void record_identity(const Tensor& x, Tensor& out) {
  if (autograd::needs_grad({&x})) autograd::record(std::make_shared<IdentityBackward>(), {&x}, {&out});
}
}  // namespace

Tensor reshape(const Tensor& x, const Shape& s) {
  LOUPE_CHECK(s.numel() == x.numel(), "cannot reshape ", x.shape().str(), " (", x.numel(), " elements) to ", s.str());
  Tensor src = to_contiguous(x, x.device(), x.dtype());  // the node below links out to x itself
  Tensor out = as_strided(src, s, contiguous_strides(s), src.impl()->offset);
  if (autograd::needs_grad({&x})) {
    auto n = std::make_shared<ReshapeBackward>();
    n->in_shape = x.shape();
    autograd::record(n, {&x}, {&out});
  }
  return out;
}

Tensor flatten(const Tensor& x, int start_dim) {
  int sd = wrap_dim(start_dim, x.dim());
  Shape s;
  for (int i = 0; i < sd; ++i) s.push_back(x.shape()[i]);
  int64_t rest = 1;
  for (int i = sd; i < x.dim(); ++i) rest *= x.shape()[i];
  s.push_back(rest);
  return reshape(x, s);
}

Tensor transpose(const Tensor& x, int d0, int d1) {
  d0 = wrap_dim(d0, x.dim());
  d1 = wrap_dim(d1, x.dim());
  Shape s = x.shape(), st = x.strides();
  std::swap(s[d0], s[d1]);
  std::swap(st[d0], st[d1]);
  Tensor out = as_strided(x, s, st, x.impl()->offset);
  if (autograd::needs_grad({&x})) {
    auto n = std::make_shared<TransposeBackward>();
    n->d0 = d0;
    n->d1 = d1;
    autograd::record(n, {&x}, {&out});
  }
  return out;
}

Tensor slice(const Tensor& x, int d, int64_t start, int64_t end) {
  d = wrap_dim(d, x.dim());
  LOUPE_CHECK(0 <= start && start <= end && end <= x.shape()[d], "slice [", start, ", ", end,
              ") is out of range for size ", x.shape()[d], " of dimension ", d);
  Shape s = x.shape();
  s[d] = end - start;
  Tensor out = as_strided(x, s, x.strides(), x.impl()->offset + start * x.strides()[d]);
  if (autograd::needs_grad({&x})) {
    auto n = std::make_shared<SliceBackward>();
    n->in_shape = x.shape();
    n->dim = d;
    n->start = start;
    n->end = end;
    autograd::record(n, {&x}, {&out});
  }
  return out;
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : clone(x); }

// The result's memory_format() is f in both directions: with one channel (or one pixel) a tensor's
// memory order fits both formats, and its exact strides name the one it was made in (a permuted
// one-channel image keeps channels-last's), so such a tensor is restrided rather than returned.
Tensor contiguous(const Tensor& x, MemoryFormat f) {
  if (x.memory_format() == f && x.is_contiguous(f)) return x;
  if (f == MemoryFormat::Contiguous && !x.is_contiguous()) return clone(x);
  Tensor out;
  if (x.is_contiguous(f)) {  // already in that memory order (C or H*W is 1): the same data, restrided
    out = as_strided(x, x.shape(), strides_for(x.shape(), f), x.impl()->offset);
  } else {
    OpScope scope_("copy", {&x});
    out = empty(x.shape(), x.dtype(), x.device(), f);
    copy_(out, x);
    scope_.result(out);
  }
  record_identity(x, out);
  return out;
}

Tensor dense(const Tensor& x) {
  return x.is_contiguous() || x.is_contiguous(MemoryFormat::ChannelsLast) ? x : contiguous(x);
}

Tensor clone(const Tensor& x) {
  OpScope scope_("copy", {&x});
  Tensor out = empty(x.shape(), x.dtype(), x.device());
  copy_(out, x);
  record_identity(x, out);
  return scope_.result(out);
}

Tensor to(const Tensor& x, Device d) {
  if (d == x.device()) return x;
  OpScope scope_(d.is_cuda() ? "copy to GPU" : "copy to CPU", {&x});
  Tensor out = empty(x.shape(), x.dtype(), d);
  copy_(out, x);
  if (autograd::needs_grad({&x})) {
    auto n = std::make_shared<ToDeviceBackward>();
    n->from = x.device();
    autograd::record(n, {&x}, {&out});
  }
  return out;
}

Tensor to(const Tensor& x, DType t) {
  if (t == x.dtype()) return x;
  OpScope scope_("cast", {&x});
  Tensor out = to_contiguous(x, x.device(), t);
  scope_.result(out);
  if (autograd::needs_grad({&x}) && is_floating(t)) {
    auto n = std::make_shared<ToDtypeBackward>();
    n->from = x.dtype();
    autograd::record(n, {&x}, {&out});
  }
  return out;
}

}  // namespace loupe
