// The recorded graph: each op that needs gradients creates a Node holding what its backward
// needs; edges point to the nodes that produced its inputs (or to a leaf's accumulator).
#pragma once
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
// gradient is in (train/ddp.h). Per thread, like grad mode; null (the default) costs one test.
struct GradReadyHook {
  virtual ~GradReadyHook() = default;
  virtual void ready(const Tensor& grad) = 0;
};
GradReadyHook* grad_ready_hook();
void set_grad_ready_hook(GradReadyHook* h);

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
