#include "ops/loss.h"

#include "autograd/node.h"
#include "core/dispatch.h"
#include "core/flops.h"
#include "core/op_record.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace loupe {

namespace {
struct CrossEntropyBackward : autograd::Node {
  Tensor logits, labels;
  // The gradient made in the forward pass for an incoming gradient that is `seed`'s storage
  // (cross_entropy_counted), else undefined.
  Tensor ready;
  const void* seed = nullptr;
  const char* name() const override { return "CrossEntropyBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    if (ready.defined() && g[0].data_ptr() == seed && g[0].dtype() == DType::f32 && g[0].numel() == 1)
      return {ready, Tensor()};
    Tensor gx = empty(logits.shape(), logits.dtype(), logits.device());
    kernels<LossKernels>(logits.device())
        .ce_backward(current_context(), gx, logits, labels, g[0], logits.size(0), logits.size(1));
    add_flops(4.0 * double(logits.numel()));
    return {gx, Tensor()};
  }
  void release() override { logits = labels = ready = Tensor(); }
};

struct BceBackward : autograd::Node {
  Tensor logits, targets;
  const char* name() const override { return "BinaryCrossEntropyWithLogitsBackward"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor gx = empty(logits.shape(), logits.dtype(), logits.device());
    kernels<LossKernels>(logits.device()).bce_backward(current_context(), gx, logits, targets, g[0], logits.numel());
    add_flops(4.0 * double(logits.numel()));
    return {gx, Tensor()};
  }
  void release() override { logits = targets = Tensor(); }
};
}  // namespace

namespace {
void check_cross_entropy(const Tensor& logits, const Tensor& labels) {
  LOUPE_CHECK(logits.dim() == 2 && is_floating(logits.dtype()), "cross_entropy needs float logits [N, C], got ",
              logits.shape().str());
  LOUPE_CHECK(labels.dtype() == DType::i32 && labels.dim() == 1 && labels.size(0) == logits.size(0),
              "cross_entropy needs int32 labels [N] matching logits ", logits.shape().str(), ", got ",
              labels.shape().str(), " ", dtype_name(labels.dtype()));
  LOUPE_CHECK(labels.device() == logits.device(), "cross_entropy: logits and labels are on different devices");
  LOUPE_CHECK(logits.device().is_cuda() || logits.dtype() == DType::f32 || logits.dtype() == DType::f64,
              "cross_entropy of ", dtype_name(logits.dtype()), " logits runs on CUDA only");
}

void record_cross_entropy(const Tensor& logits, const Tensor& labels, const Tensor& lc, const Tensor& yc, Tensor& loss,
                          const Tensor& ready = Tensor(), const Tensor& seed = Tensor()) {
  if (!autograd::needs_grad({&logits})) return;
  auto n = std::make_shared<CrossEntropyBackward>();
  n->logits = lc.detach();
  n->labels = yc;
  if (ready.defined()) n->ready = ready, n->seed = seed.data_ptr();
  autograd::record(n, {&logits, &labels}, {&loss});
}
}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& labels) {
  OpScope scope_("cross_entropy", {&logits, &labels});
  check_cross_entropy(logits, labels);
  Tensor lc = contiguous(logits), yc = contiguous(labels);
  // 16-bit logits (a mixed-precision model's last layer, uncast): the loss in float32, computed from
  // them as from their float32 cast, and their gradient in their own type.
  const DType loss_type = logits.dtype() == DType::f64 ? DType::f64 : DType::f32;
  Tensor loss = empty(Shape{}, loss_type, logits.device());
  kernels<LossKernels>(logits.device()).ce_forward(current_context(), loss, lc, yc, logits.size(0), logits.size(1));
  add_flops(4.0 * double(logits.numel()));
  record_cross_entropy(logits, labels, lc, yc, loss);
  return scope_.result(loss);
}

Tensor cross_entropy_counted(const Tensor& logits, const Tensor& labels, const Tensor& loss_sum, const Tensor& correct,
                             double weight, const Tensor& seed) {
  auto* fused = kernels<LossKernels>(logits.device()).ce_forward_counted;
  if (!fused || logits.dtype() == DType::f64) {
    Tensor loss = cross_entropy(logits, labels);
    NoGradGuard no_record;
    add_(loss_sum, to(loss, loss_sum.dtype()), weight);  // float64 logits' loss into the float32 sum
    count_correct_into(correct, logits.detach(), labels);
    return loss;
  }
  OpScope scope_("cross_entropy", {&logits, &labels});
  check_cross_entropy(logits, labels);
  for (const Tensor* t : {&loss_sum, &correct, &seed})
    LOUPE_CHECK(!t->defined() || (t->numel() == 1 && t->dtype() == DType::f32 && t->device() == logits.device()),
                "cross_entropy_counted: the sums and the seed are float32 scalars on ", logits.device().str(),
                ", got ", dtype_name(t->dtype()), " ", t->shape().str(), " on ", t->device().str());
  LOUPE_CHECK(loss_sum.defined() && correct.defined(), "cross_entropy_counted needs both sums");
  Tensor lc = contiguous(logits), yc = contiguous(labels);
  Tensor loss = empty(Shape{}, DType::f32, logits.device());
  // The gradient now, when backward will be seeded with `seed` (a kernel fewer in the backward pass).
  Tensor gx = seed.defined() && autograd::needs_grad({&logits}) ? empty(lc.shape(), lc.dtype(), lc.device()) : Tensor();
  fused(current_context(), loss, loss_sum, correct, gx, seed, lc, yc, logits.size(0), logits.size(1), float(weight));
  // the loss, the count (as count_correct counts it), the three adds, and the gradient's
  add_flops(5.0 * double(logits.numel()) + 3.0 + (gx.defined() ? 4.0 * double(logits.numel()) : 0.0));
  record_cross_entropy(logits, labels, lc, yc, loss, gx, seed);
  return scope_.result(loss);
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets) {
  OpScope scope_("bce_with_logits", {&logits, &targets});
  LOUPE_CHECK(is_floating(logits.dtype()) && targets.dtype() == logits.dtype() && targets.numel() == logits.numel(),
              "binary_cross_entropy_with_logits needs float logits and float targets of the same size, got ",
              logits.shape().str(), " and ", targets.shape().str());
  LOUPE_CHECK(targets.device() == logits.device(), "binary_cross_entropy_with_logits: tensors on different devices");
  Tensor lc = contiguous(logits), tc = contiguous(targets);
  Tensor loss = empty(Shape{}, logits.dtype(), logits.device());
  kernels<LossKernels>(logits.device()).bce_forward(current_context(), loss, lc, tc, logits.numel());
  add_flops(6.0 * double(logits.numel()));
  if (autograd::needs_grad({&logits})) {
    auto n = std::make_shared<BceBackward>();
    n->logits = lc.detach();
    n->targets = tc;
    autograd::record(n, {&logits, &targets}, {&loss});
  }
  return scope_.result(loss);
}

Tensor mean_squared_error(const Tensor& pred, const Tensor& target) {
  LOUPE_CHECK(is_floating(pred.dtype()) && target.dtype() == pred.dtype() && target.numel() == pred.numel(),
              "mean_squared_error needs float predictions and float targets of the same size and dtype, got ",
              pred.shape().str(), " ", dtype_name(pred.dtype()), " and ", target.shape().str(), " ",
              dtype_name(target.dtype()));
  LOUPE_CHECK(target.device() == pred.device(), "mean_squared_error: tensors on different devices");
  const Tensor d = sub(pred, target.shape() == pred.shape() ? target : reshape(target, pred.shape()));
  return mean(mul(d, d));
}

namespace {
void count_correct_to(const Tensor& out, const Tensor& logits, const Tensor& labels, bool accumulate) {
  const int64_t N = logits.size(0), C = logits.dim() == 2 ? logits.size(1) : 1;
  LOUPE_CHECK(logits.dim() <= 2 && labels.numel() == N, "count_correct: logits ", logits.shape().str(),
              " and labels ", labels.shape().str(), " do not match");
  LOUPE_CHECK(C > 1 ? labels.dtype() == DType::i32 : labels.dtype() == logits.dtype(),
              "count_correct: labels must be int32 for classes, float for binary outputs");
  kernels<LossKernels>(logits.device())
      .count_correct(current_context(), out, contiguous(logits), contiguous(labels), N, C, accumulate);
  add_flops(double(N * C));
}
}  // namespace

Tensor count_correct(const Tensor& logits, const Tensor& labels) {
  OpScope scope_("count_correct", {&logits, &labels});
  Tensor out = empty(Shape{}, DType::f32, logits.device());
  count_correct_to(out, logits, labels, false);
  return scope_.result(out);
}

void count_correct_into(const Tensor& acc, const Tensor& logits, const Tensor& labels) {
  OpScope scope_("count_correct", {&logits, &labels});
  LOUPE_CHECK(acc.numel() == 1 && acc.dtype() == DType::f32 && acc.device() == logits.device(),
              "count_correct_into: the count is a float32 scalar on ", logits.device().str(), ", got ",
              dtype_name(acc.dtype()), " ", acc.shape().str(), " on ", acc.device().str());
  count_correct_to(acc, logits, labels, true);
  add_flops(1.0);  // the add into the running count, which an add_ after it used to make
}

}  // namespace loupe
