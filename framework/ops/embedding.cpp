#include "ops/embedding.h"

#include "autograd/node.h"
#include "autograd/source_check.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/view.h"

namespace loupe {

namespace {
// gy [..., E] as rows the kernels read in place: its position dimensions (all but the last) merged
// where they nest, two at most, the columns contiguous. The gradient of mean(embedding(ids), 1)
// arrives so, [N, T, E] with strides (E, 0, 1): read in place, never written out at N*T*E.
// False for any other layout (the caller copies it).
bool grad_rows(const Tensor& gy, EmbeddingGradRows& r) {
  int last = gy.dim() - 1;
  if (gy.numel() == 0) return true;  // nothing to read: the defaults do
  if (gy.size(last) > 1 && gy.strides()[last] != 1) return false;
  int64_t size[2] = {1, 1}, stride[2] = {0, 0};
  int k = 0;
  for (int d = last - 1; d >= 0; --d) {  // innermost first
    int64_t s = gy.size(d), st = gy.strides()[d];
    if (s == 1) continue;
    if (k > 0 && st == stride[k - 1] * size[k - 1]) {
      size[k - 1] *= s;
    } else {
      if (k == 2) return false;
      size[k] = s;
      stride[k++] = st;
    }
  }
  if (k == 2) r = {size[0], stride[1], stride[0]};
  else r = {1, stride[0], 0};
  return true;
}

struct EmbeddingBackward : autograd::Node {
  Tensor ids;  // contiguous, flat
  Shape weight_shape;
  DType dtype;
  // The weight, when it is a leaf: its gradient is then added in place into the .grad it already
  // has (a parameter's slice of the gradient arena), touching only the rows the ids select. A dense
  // [V, E] gradient would cost a zeroed table and a full add into .grad: for imdb_fasttext's 1.2M x
  // 50 table, 60 MB written and 720 MB moved per step for the few thousand rows a batch selects.
  std::weak_ptr<TensorImpl> leaf;
  const char* name() const override { return "EmbeddingBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    int64_t E = weight_shape[1], n = ids.numel();
    Tensor gy = g[0];
    const ExecContext ctx = current_context();
    EmbeddingGradRows rows;
    if (!grad_rows(gy, rows)) {
      gy = contiguous(gy);
      rows = {1, E, 0};
    }
    add_flops(double(n) * double(E));  // one add per gradient element
    if (auto v = leaf.lock(); v && v->grad) {
      Tensor grad(v->grad);
      if (grad.shape() == weight_shape && grad.dtype() == dtype && grad.device() == gy.device() &&
          grad.is_contiguous()) {
        // Under a GradScaler, the kernel checks the rows it writes and the scaler's pass skips
        // the rest of the table (autograd/source_check.h).
        if (autograd::FreshGrads* f = autograd::fresh_grads()) f->materialize();  // an addition in place
        autograd::SourceCheck* sc = autograd::current_source_check();
        float* found_inf = sc && sc->device() == grad.device() ? sc->found_inf() : nullptr;
        kernels<EmbeddingKernels>(gy.device()).backward(ctx, grad, ids, gy, rows, n, E, true, found_inf);
        if (found_inf) sc->add_checked(grad);
        // AccumulateGrad gets nothing to add, so it is here that the gradient is finished: data
        // parallelism sends its bucket now (without this, imdb_bilstm's 9.8 MiB went at the end).
        if (autograd::GradReadyHook* h = autograd::grad_ready_hook()) h->ready(grad);
        return {Tensor()};  // already in .grad
      }
    }
    // The dense gradient goes through AccumulateGrad, which leaves the check to the scaler's pass.
    Tensor gw = empty(weight_shape, dtype, gy.device());
    kernels<EmbeddingKernels>(gy.device()).backward(ctx, gw, ids, gy, rows, n, E, false, nullptr);
    return {gw};
  }
  void release() override { ids = Tensor(); }
};
}  // namespace

Tensor one_hot(const Tensor& ids, int64_t classes, DType dtype) {
  OpScope scope_("one_hot", {&ids});
  LOUPE_CHECK(classes >= 1, "one_hot needs at least one class, got ", classes);
  LOUPE_CHECK(is_floating(dtype), "one_hot produces a floating tensor, not ", dtype_name(dtype));
  LOUPE_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::f32 || ids.dtype() == DType::f64,
              "one_hot needs int32, float32 or float64 ids, got ", dtype_name(ids.dtype()));
  LOUPE_CHECK(ids.dim() < kMaxDims, "one_hot: ids ", ids.shape().str(), " have too many dimensions to add one");
  Shape s = ids.shape();
  s.push_back(classes);
  Tensor y = empty(s, dtype, ids.device());
  if (y.numel() > 0)
    kernels<EmbeddingKernels>(ids.device())
        .one_hot(current_context(), y, contiguous(ids).detach(), ids.numel(), classes);
  return scope_.result(y);
}

Tensor embedding(const Tensor& ids, const Tensor& weight) {
  LOUPE_CHECK(weight.dim() == 2 && is_floating(weight.dtype()), "embedding needs a floating weight [V, E], got ",
              weight.shape().str(), " ", dtype_name(weight.dtype()));
  LOUPE_CHECK(ids.dtype() == DType::i32 || ids.dtype() == DType::f32 || ids.dtype() == DType::f64,
              "embedding needs int32, float32 or float64 ids, got ", dtype_name(ids.dtype()));
  LOUPE_CHECK(ids.dim() < kMaxDims, "embedding: ids ", ids.shape().str(), " have too many dimensions to add one");
  LOUPE_CHECK(ids.device() == weight.device(), "embedding: ids on ", ids.device().str(), ", weight on ",
              weight.device().str());
  OpScope scope_("embedding");
  int64_t n = ids.numel(), E = weight.size(1);
  Shape s = ids.shape();
  s.push_back(E);
  Tensor ic = contiguous(ids).detach(), wc = contiguous(weight);
  Tensor y = empty(s, weight.dtype(), weight.device());
  if (y.numel() > 0) kernels<EmbeddingKernels>(weight.device()).forward(current_context(), y, ic, wc, n, E);
  if (autograd::needs_grad({&weight})) {  // ids are not differentiable
    auto node = std::make_shared<EmbeddingBackward>();
    node->ids = ic;
    node->weight_shape = weight.shape();
    node->dtype = weight.dtype();
    if (!weight.grad_fn()) node->leaf = weight.impl_ptr();
    autograd::record(node, {&weight}, {&y});
  }
  // It reads the ids and only the rows they select, and writes as many.
  scope_.set_bytes(double(ids.nbytes()) + 2.0 * double(y.nbytes()));
  return y;
}

}  // namespace loupe
