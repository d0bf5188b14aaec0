// The recorded graph: each op that needs gradients creates a Node holding what its backward
// needs; edges point to the nodes that produced its inputs (or to a leaf's accumulator).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace loupe::autograd {

struct Node;
struct Edge {
  std::shared_ptr<Node> fn;  // null: that input needs no gradient
  int input_nr = 0;          // which output of fn the input was
};

struct Node {
  virtual ~Node() = default;
  virtual const char* name() const = 0;
  // Gradients of the inputs (one per next_edges entry; undefined where none) from the gradients
  // of the outputs (undefined where an output received none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>& grad_outputs) = 0;
  // Frees saved tensors once backward has run (nothing is retained after backward).
  virtual void release() {}
  // Leaves' accumulators stay usable across steps; every other node runs backward once.
  virtual bool reusable() const { return false; }
  // Input gradients in two rounds. A node whose inputs' gradients differ in cost (an LSTM: its
  // input's gradient is short, its weights' are long GEMMs) names here the indices into
  // next_edges that apply() leaves undefined and finish() returns (a vector as long as
  // next_edges; the others undefined there). Empty (the default): one round. When someone waits
  // for finished gradients (a GradReadyHook: data parallelism), the engine runs everything below
  // the first round's gradients before finish(), so the layer below (an embedding, the largest
  // gradient) is all-reduced while the long GEMMs run; otherwise finish() follows apply() at once.
  virtual std::vector<int> later_inputs() const { return {}; }
  virtual std::vector<Tensor> finish() { return {}; }
  std::vector<Edge> next_edges;
  bool released = false;
  int num_outputs = 1;
  // Where the node was recorded, for `loupe profile` (core/op_record.h); -1 when not recording.
  int op_site = -1;
  double op_input_bytes = 0;
};

// Leaves: adds the incoming gradient into the tensor's .grad.
struct AccumulateGrad : Node {
  explicit AccumulateGrad(std::weak_ptr<TensorImpl> v) : var(std::move(v)) {}
  const char* name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override;
  bool reusable() const override { return true; }
  std::weak_ptr<TensorImpl> var;
};

// Told when a leaf's gradient for this backward pass is complete (its AccumulateGrad has run),
// with that .grad (for a parameter, its view into the gradient arena; a 16-bit compute view's
// .grad is the same view): data parallelism starts a bucket's all-reduce as soon as its last
// gradient is in (parallel/ddp.h). Per thread, like grad mode; null (the default) costs one test.
struct GradReadyHook {
  virtual ~GradReadyHook() = default;
  virtual void ready(const Tensor& grad) = 0;
  // Before a node's second round (Node::later_inputs): the gradients in so far are all there will
  // be for a while, so a bucket holding them should go now rather than wait for the next ones.
  virtual void pause() {}
  // Whether nodes with two rounds should take them apart (false: both at once, as without a hook).
  virtual bool wants_rounds() const { return true; }
};
GradReadyHook* grad_ready_hook();
void set_grad_ready_hook(GradReadyHook* h);

// Gradients that must read zero before the next backward pass, zeroed without a pass of their own
// where that pass writes every one of them. While a FreshGrads lives (per thread: the trainer's step,
// from where zero_grad was through the backward pass), the pass's deferred additions into the
// leaves' .grad become writes (one launch that never reads the old values) when they cover exactly
// `leaves`, each once: mnist_mlp's gradient memset and half of its additions' reads go. Otherwise
// `zero` runs first: before a pass that covers less or more, before anything adds in place (an
// embedding's rows; an addition that is not deferred) and, if nothing was written, at the end.
class FreshGrads {
 public:
  FreshGrads(std::function<void()> zero, const std::vector<Tensor>& leaves);  // leaves: their .grad
  ~FreshGrads();
  FreshGrads(const FreshGrads&) = delete;
  FreshGrads& operator=(const FreshGrads&) = delete;
  // zero() now, unless it ran or the gradients were written.
  void materialize();
  // Whether `dsts` are the leaves' gradients, each once; if so, they count as written.
  bool take(const std::vector<const void*>& dsts);

 private:
  std::function<void()> zero_;
  std::vector<const void*> grads_;  // sorted data pointers of the leaves' .grad
  bool pending_ = true;
  FreshGrads* outer_;
};
FreshGrads* fresh_grads();  // the thread's innermost, or null

// Grad mode: while a NoGradGuard lives (per thread), ops record nothing.
bool grad_enabled();
void set_grad_enabled(bool on);

// True when any input needs a gradient and grad mode is on.
bool needs_grad(std::initializer_list<const Tensor*> inputs);
// Connects node to the inputs and makes it the grad_fn of the outputs.
void record(const std::shared_ptr<Node>& node, std::initializer_list<const Tensor*> inputs,
            std::initializer_list<Tensor*> outputs);

// Runs backward from `roots` with the given output gradients.
void run_backward(const Tensor& root, const Tensor& grad_output);

}  // namespace loupe::autograd

namespace loupe {
// Gradients of `root` with respect to every leaf that requires grad, added into their .grad;
// without grad_output, root must hold one element (its gradient is 1).
void backward(const Tensor& root, const Tensor& grad_output = Tensor());

struct NoGradGuard {
  NoGradGuard() : prev_(autograd::grad_enabled()) { autograd::set_grad_enabled(false); }
  ~NoGradGuard() { autograd::set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
 private:
  bool prev_;
};
}  // namespace loupe
