#include "ops/reduce.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/elementwise.h"
#include "ops/view.h"

namespace loupe {

namespace {
// Gradient of a reduction: g (shaped like the kept dimensions), scaled, then broadcast back to the
// input shape as a view with stride 0 along the reduced dimension: never written out at the input's
// size (for mean(embedding(ids), 1), [N, T, E]: 82 MB per step in imdb_fasttext). Consumers that
// need it dense copy it (contiguous()), the embedding backward reads it in place.
struct SumBackward : autograd::Node {
  Shape in_shape, kept_shape;  // kept_shape: the output with the reduced dimension kept as 1
  double scale = 1.0;
  const char* name() const override { return "SumBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gs = scale == 1.0 ? g[0] : g[0] * scale;  // the same product per element, on the small side
    return {reshape(gs, kept_shape).expand(in_shape)};
  }
};

Tensor reduce_dim(const Tensor& x, int dim, bool keepdim, bool mean_of) {
  OpScope scope_(mean_of ? "mean" : "sum", {&x});
  LOUPE_CHECK(is_floating(x.dtype()), "sum/mean need floating-point input");
  Tensor xc = contiguous(x);
  int d = wrap_dim(dim, x.dim());
  int64_t outer = 1, inner = 1, n = x.size(d);
  for (int i = 0; i < d; ++i) outer *= x.size(i);
  for (int i = d + 1; i < x.dim(); ++i) inner *= x.size(i);
  Shape kept = x.shape(), out_shape;
  kept[d] = 1;
  for (int i = 0; i < x.dim(); ++i)
    if (i != d || keepdim) out_shape.push_back(kept[i]);
  double scale = mean_of ? 1.0 / double(n) : 1.0;
  Tensor out = empty(out_shape, x.dtype(), x.device());
  if (out.numel() > 0) kernels<ReduceKernels>(x.device()).sum_dim(current_context(), out, xc, outer, n, inner, scale);
  add_flops(double(x.numel()));
  if (autograd::needs_grad({&x})) {
    auto node = std::make_shared<SumBackward>();
    node->in_shape = x.shape();
    node->kept_shape = kept;
    node->scale = scale;
    autograd::record(node, {&x}, {&out});
  }
  return scope_.result(out);
}

Tensor reduce_all(const Tensor& x, bool mean_of) {
  Tensor flat = reshape(x, Shape{x.numel()});
  return reduce_dim(flat, 0, false, mean_of);
}
}  // namespace

Tensor sum(const Tensor& x) { return reduce_all(x, false); }
Tensor mean(const Tensor& x) { return reduce_all(x, true); }
Tensor sum(const Tensor& x, int dim, bool keepdim) { return reduce_dim(x, dim, keepdim, false); }
Tensor mean(const Tensor& x, int dim, bool keepdim) { return reduce_dim(x, dim, keepdim, true); }

Tensor sum_except(const Tensor& x, int dim) {
  OpScope scope_("sum_except", {&x});
  LOUPE_CHECK(is_floating(x.dtype()), "sum_except needs floating-point input");
  int d = wrap_dim(dim, x.dim());
  // Channels-last stays as it is for the channel sum (a bias gradient); anything else is read NCHW.
  Tensor xc = d == 1 && x.memory_format() == MemoryFormat::ChannelsLast ? x : contiguous(x);
  int64_t outer = 1, inner = 1, n = x.size(d);
  for (int i = 0; i < d; ++i) outer *= x.size(i);
  for (int i = d + 1; i < x.dim(); ++i) inner *= x.size(i);
  if (d == 1 && xc.memory_format() == MemoryFormat::ChannelsLast) {  // NHWC: [N*H*W, C, 1]
    outer = x.numel() / n;
    inner = 1;
  }
  Tensor out = empty(Shape{n}, x.dtype(), x.device());
  if (n > 0) {
    if (outer * inner == 0) fill_(out, 0.0);
    else kernels<ReduceKernels>(x.device()).sum_keep_middle(current_context(), out, xc, outer, n, inner, 1.0);
  }
  add_flops(double(x.numel()));
  if (autograd::needs_grad({&x})) {
    auto node = std::make_shared<SumBackward>();
    node->in_shape = x.shape();
    Shape kept;
    for (int i = 0; i < x.dim(); ++i) kept.push_back(i == d ? n : 1);
    node->kept_shape = kept;
    autograd::record(node, {&x}, {&out});
  }
  return scope_.result(out);
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  Tensor r = g;
  int lead = g.dim() - shape.size();
  for (int i = 0; i < lead; ++i) r = sum(r, 0);  // dimensions broadcasting added in front
  for (int i = 0; i < shape.size(); ++i)
    if (shape[i] == 1 && r.size(i) != 1) r = sum(r, i, true);
  return r;
}

Tensor argmax(const Tensor& x) {
  OpScope scope_("argmax", {&x});
  LOUPE_CHECK(x.dim() >= 1 && x.size(-1) > 0, "argmax needs a non-empty last dimension");
  Tensor xc = contiguous(x);
  int64_t cols = x.size(-1), rows = x.numel() / cols;
  Shape s;
  for (int i = 0; i + 1 < x.dim(); ++i) s.push_back(x.size(i));
  Tensor out = empty(s, DType::i32, x.device());
  if (rows > 0) kernels<ReduceKernels>(x.device()).argmax_rows(current_context(), out, xc, rows, cols);
  add_flops(double(x.numel()));
  return scope_.result(out);
}

}  // namespace loupe
