#include "ops/cat.h"

#include "autograd/node.h"
#include "core/error.h"
#include "core/op_record.h"
#include "ops/view.h"

namespace loupe {

namespace {
struct CatBackward : autograd::Node {
  int dim;
  std::vector<int64_t> bounds;  // input k is [bounds[k], bounds[k + 1]) along dim
  std::vector<bool> needs;      // which inputs want a gradient
  const char* name() const override { return "CatBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    std::vector<Tensor> gx(needs.size());
    for (size_t k = 0; k < needs.size(); ++k)  // a copy only where the slice is not contiguous already
      if (needs[k]) gx[k] = contiguous(slice(g[0], dim, bounds[k], bounds[k + 1]));
    return gx;
  }
};
}  // namespace

Tensor cat(const std::vector<Tensor>& xs, int dim) {
  LOUPE_CHECK(!xs.empty(), "cat needs at least one tensor");
  const Tensor& x0 = xs[0];
  LOUPE_CHECK(x0.defined() && x0.dim() > 0, "cat needs tensors with at least one dimension");
  int d = wrap_dim(dim, x0.dim());
  Shape s = x0.shape();
  s[d] = 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    const Tensor& x = xs[k];
    LOUPE_CHECK(x.defined(), "cat: tensor ", k, " is undefined");
    LOUPE_CHECK(x.dtype() == x0.dtype(), "cat: tensor ", k, " is ", dtype_name(x.dtype()), " but tensor 0 is ",
                dtype_name(x0.dtype()));
    LOUPE_CHECK(x.device() == x0.device(), "cat: tensor ", k, " is on ", x.device().str(), " but tensor 0 is on ",
                x0.device().str());
    bool same = x.dim() == x0.dim();
    for (int i = 0; same && i < x.dim(); ++i) same = i == d || x.size(i) == x0.size(i);
    LOUPE_CHECK(same, "cat along dimension ", d, ": tensor ", k, " has shape ", x.shape().str(), " but tensor 0 has ",
                x0.shape().str(), "; shapes must match except along dimension ", d);
    s[d] += x.size(d);
  }
  OpScope scope_("cat");
  for (const Tensor& x : xs) scope_.add_bytes(x);
  Tensor y = empty(s, x0.dtype(), x0.device());
  std::vector<int64_t> bounds{0};
  for (const Tensor& x : xs) {
    int64_t at = bounds.back();
    copy_(slice(y, d, at, at + x.size(d)), x);  // no autograd: y has no history yet
    bounds.push_back(at + x.size(d));
  }
  bool any = false;
  std::vector<bool> needs;
  for (const Tensor& x : xs) {
    needs.push_back(autograd::needs_grad({&x}));
    any = any || needs.back();
  }
  if (any) {
    auto node = std::make_shared<CatBackward>();
    node->dim = d;
    node->bounds = std::move(bounds);
    node->needs = std::move(needs);
    // record() takes a fixed list of inputs: collect each input's edge with a one-input call, then
    // make the node y's grad_fn with all of them.
    std::vector<autograd::Edge> edges;
    for (const Tensor& x : xs) {
      autograd::record(node, {&x}, {});
      edges.push_back(node->next_edges[0]);
    }
    autograd::record(node, {}, {&y});
    node->next_edges = std::move(edges);
  }
  return scope_.result(y);
}

}  // namespace loupe
