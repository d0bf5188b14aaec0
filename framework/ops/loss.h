// Losses with their activation fused in (numerically stable, one kernel each way), and the
// correct-prediction count. Losses are means over the batch; results stay on the device.
#pragma once
#include "core/exec_context.h"
#include "core/tensor.h"

namespace loupe {

// logits [N, C] float, labels [N] int32 in [0, C): mean of -log softmax(logits)[label]. On CUDA
// the logits may be float16 or bfloat16: the loss is float32 then, the same bits as from the
// logits' float32 cast, and their gradient comes in their type (no casts around the loss).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels);
// logits of any shape, targets float of the same numel in [0, 1]: mean of BCE(sigmoid(logits), t).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets);
// pred float of any shape, target float of the same numel: mean of (pred - target)^2 over every
// element (Keras' mean_squared_error: the mean over the outputs, then over the batch). Composed of
// sub, mul and mean, whose gradients and kernels are checked one by one.
Tensor mean_squared_error(const Tensor& pred, const Tensor& target);
// How many rows are classified correctly, as a float32 scalar on logits' device; no autograd.
// logits [N, C] with C > 1: argmax == label (16-bit logits too, on CUDA); logits [N] or [N, 1]:
// (logit > 0) == (label > 0.5).
Tensor count_correct(const Tensor& logits, const Tensor& labels);
// acc (a float32 scalar on logits' device) += count_correct(logits, labels), in the count's own
// kernels: a running count without an add after each step's.
void count_correct_into(const Tensor& acc, const Tensor& logits, const Tensor& labels);

// Cross-entropy with a training step's running sums in its kernels: the loss, as cross_entropy
// returns it (with its autograd node, and the same bits), while loss_sum += weight * the loss and
// correct += count_correct(logits, labels); both float32 scalars on logits' device. On CUDA that is
// one pass over the logits for the loss and the count and one launch for the three sums: two
// kernels where the separate ops take five (a graphed step's loss head). Elsewhere, the separate ops.
// seed (optional): the float32 scalar that backward will be seeded with (the scaler's scale, or a
// one); the forward pass then also writes the logits' gradient, and the backward hands it on when
// its incoming gradient is that tensor (its value must not change in between), without a kernel.
Tensor cross_entropy_counted(const Tensor& logits, const Tensor& labels, const Tensor& loss_sum, const Tensor& correct,
                             double weight, const Tensor& seed = Tensor());

struct LossKernels {
  // loss: scalar; logits [N, C]; labels int32 [N].
  void (*ce_forward)(const ExecContext& ctx, const Tensor& loss, const Tensor& logits, const Tensor& labels, int64_t N,
                     int64_t C);
  // gx = (softmax(logits) - onehot(label)) * gloss / N; gloss is a device scalar.
  void (*ce_backward)(const ExecContext& ctx, const Tensor& gx, const Tensor& logits, const Tensor& labels,
                      const Tensor& gloss, int64_t N, int64_t C);
  void (*bce_forward)(const ExecContext& ctx, const Tensor& loss, const Tensor& logits, const Tensor& targets,
                      int64_t n);
  void (*bce_backward)(const ExecContext& ctx, const Tensor& gx, const Tensor& logits, const Tensor& targets,
                       const Tensor& gloss, int64_t n);
  // out: float32 scalar, the count written or (accumulate) added to it; C == 1 means binary.
  void (*count_correct)(const ExecContext& ctx, const Tensor& out, const Tensor& logits, const Tensor& labels,
                        int64_t N, int64_t C, bool accumulate);
  // ce_forward's loss, then loss_sum += weight * loss and correct += the count (cross_entropy_counted);
  // with gx defined also ce_backward's gradient for gloss = seed. Null where the backend has none.
  void (*ce_forward_counted)(const ExecContext& ctx, const Tensor& loss, const Tensor& loss_sum, const Tensor& correct,
                             const Tensor& gx, const Tensor& seed, const Tensor& logits, const Tensor& labels,
                             int64_t N, int64_t C, float weight) = nullptr;
};

}  // namespace loupe
