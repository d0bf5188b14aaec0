// The backward engine: a topological walk of the recorded graph from the root.
#include <algorithm>
#include <exception>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/node.h"
#include "autograd/source_check.h"
#include "core/copy.h"
#include "core/dispatch.h"
#include "core/error.h"
#include "core/flops.h"
#include "core/op_record.h"

namespace loupe::autograd {

namespace {
thread_local bool g_grad_enabled = true;
thread_local GradReadyHook* g_grad_ready = nullptr;

std::shared_ptr<Node> grad_accumulator(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (!impl->grad_accumulator) impl->grad_accumulator = std::make_shared<AccumulateGrad>(t.impl_ptr());
  return impl->grad_accumulator;
}

// Adds g into slot (taking g itself when the slot is empty).
void accumulate(Tensor& slot, const Tensor& g) {
  if (!g.defined()) return;
  if (!slot.defined()) slot = g;
  else {  // out of place: g may be shared with another slot
    Tensor sum = empty_like(slot);
    add_out(sum, slot, g);
    slot = sum;
  }
}
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
GradReadyHook* grad_ready_hook() { return g_grad_ready; }
void set_grad_ready_hook(GradReadyHook* h) { g_grad_ready = h; }
void set_grad_enabled(bool on) { g_grad_enabled = on; }

bool needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor* t : inputs)
    if (t && t->defined() && t->requires_grad()) return true;
  return false;
}

void record(const std::shared_ptr<Node>& node, std::initializer_list<const Tensor*> inputs,
            std::initializer_list<Tensor*> outputs) {
  node->next_edges.clear();
  if (op_records_on()) {
    OpSite site = op_site_here(node->name());
    node->op_site = site.site;
    node->op_input_bytes = site.input_bytes;
  }
  for (const Tensor* t : inputs) {
    Edge e;
    if (t && t->defined() && t->requires_grad()) {
      if (t->grad_fn()) e = Edge{t->grad_fn(), t->impl()->output_nr};
      else e = Edge{grad_accumulator(*t), 0};
    }
    node->next_edges.push_back(e);
  }
  int nr = 0;
  for (Tensor* out : outputs) {
    out->impl()->requires_grad = true;
    out->impl()->grad_fn = node;
    out->impl()->output_nr = nr++;
  }
  node->num_outputs = nr;
}

namespace {
thread_local FreshGrads* g_fresh = nullptr;
}  // namespace

FreshGrads::FreshGrads(std::function<void()> zero, const std::vector<Tensor>& leaves)
    : zero_(std::move(zero)), outer_(g_fresh) {
  for (const Tensor& t : leaves) grads_.push_back(t.grad().defined() ? t.grad().data_ptr() : nullptr);
  std::sort(grads_.begin(), grads_.end());
  g_fresh = this;
}

FreshGrads::~FreshGrads() {
  g_fresh = outer_;
  if (pending_ && std::uncaught_exceptions() == 0) zero_();
}

void FreshGrads::materialize() {
  if (!pending_) return;
  pending_ = false;
  zero_();
}

bool FreshGrads::take(const std::vector<const void*>& dsts) {
  if (!pending_) return false;
  std::vector<const void*> d = dsts;
  std::sort(d.begin(), d.end());
  if (d != grads_) return false;  // a leaf without .grad (null here) is never among the additions
  pending_ = false;
  return true;
}

FreshGrads* fresh_grads() { return g_fresh; }

namespace {
// A backward pass's additions into the leaves' .grad on a GPU, made at its end in one launch
// (CopyKernels::add_many) instead of one small kernel per leaf: mnist_mlp's six were a large share
// of its graphed step (lab/benchmarks.md, "A backward pass's gradient additions in one launch").
// Only where nobody waits for a leaf's gradient as it completes (data parallelism's buckets do) and
// the gradient is laid out as .grad.
thread_local std::vector<std::pair<Tensor, Tensor>> g_deferred;
thread_local int g_backward_depth = 0;

bool defer_add(const Tensor& grad, const Tensor& g) {
  // g in grad's layout, or a channels-last convolution's filter gradient for a contiguous filter.
  const bool layout = g.strides() == grad.strides() ||
                      (g.dim() == 4 && g.shape() == grad.shape() && g.is_contiguous(MemoryFormat::ChannelsLast));
  if (g_backward_depth == 0 || g_grad_ready || !grad.device().is_cuda() || grad.dtype() != DType::f32 ||
      g.device() != grad.device() || !is_floating(g.dtype()) || g.dtype() == DType::f64 || !layout ||
      !grad.is_contiguous() || grad.numel() == 0)
    return false;
  g_deferred.emplace_back(grad, g);  // its FLOPs are counted where the launch is, at the pass's end
  return true;
}

// Opened by run_backward: the outermost one adds what was deferred (also when the pass throws,
// so that no later pass adds a stale gradient).
struct DeferredAdds {
  DeferredAdds() { ++g_backward_depth; }
  ~DeferredAdds() noexcept(false) {
    if (--g_backward_depth > 0 || g_deferred.empty()) return;
    std::vector<std::pair<Tensor, Tensor>> pairs;
    pairs.swap(g_deferred);
    if (std::uncaught_exceptions() > 0) return;
    // Into gradients that are to read zero (FreshGrads), the additions are writes if they cover them.
    bool write = false;
    if (g_fresh) {
      std::vector<const void*> dsts;
      for (const auto& pr : pairs) dsts.push_back(pr.first.data_ptr());
      write = g_fresh->take(dsts);
      if (!write) g_fresh->materialize();
    }
    OpScope scope("accumulate_grads", {});
    for (const auto& pr : pairs) {
      scope.add_bytes((write ? 1.0 : 2.0) * double(pr.first.nbytes()) + double(pr.second.nbytes()));
      if (!write) add_flops(double(pr.first.numel()));  // as add_out counts it
    }
    kernels<CopyKernels>(pairs.front().first.device()).add_many(current_context(), pairs, write);
  }
};
}  // namespace

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor>& grads) {
  auto v = var.lock();
  if (!v || !grads[0].defined()) return {};
  NoGradGuard guard;
  Tensor g = grads[0];
  LOUPE_CHECK(g.shape() == v->shape, "gradient of shape ", g.shape().str(), " for a tensor of shape ",
              v->shape.str());
  if (!v->grad) {
    Tensor c = to_contiguous(g, g.device(), g.dtype());
    if (c.same(g)) {  // never alias a gradient that flows elsewhere
      c = empty(g.shape(), g.dtype(), g.device());
      copy_(c, g);
    }
    v->grad = c.impl_ptr();
  } else {
    Tensor grad(v->grad);  // parameters: .grad is a view into the gradient arena
    if (!defer_add(grad, g)) {
      if (g_fresh) g_fresh->materialize();  // an addition now: the old values must read zero first
      add_out(grad, grad, g);
    }
  }
  // Under a GradScaler: nothing checked what was added here, so the scaler's pass reads it all.
  if (SourceCheck* sc = current_source_check()) sc->add_dirty(Tensor(v->grad));
  if (g_grad_ready) g_grad_ready->ready(Tensor(v->grad));
  return {};
}

namespace {
// For each node below `root`, how many edges lead into it, so a node runs once all its gradients are in.
std::unordered_map<Node*, int> dependencies(Node* root) {
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack{root};
  deps[root] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges) {
      if (!e.fn) continue;
      auto it = deps.find(e.fn.get());
      if (it == deps.end()) {
        deps[e.fn.get()] = 1;
        stack.push_back(e.fn.get());
      } else {
        ++it->second;
      }
    }
  }
  return deps;
}

// One backward pass's state: what each node still waits for, the gradients it has so far, and
// the nodes ready to run (a stack: depth first).
struct Walk {
  // `second`: a node's second round (Node::later_inputs), pushed beneath what its first round made
  // ready, so that runs first.
  struct Item {
    std::shared_ptr<Node> n;
    bool second = false;
  };
  explicit Walk(Node* root) : deps(dependencies(root)) {}
  std::unordered_map<Node*, int> deps;
  std::unordered_map<Node*, std::vector<Tensor>> pending;
  std::vector<Item> ready;

  // Hands the gradients of node n's inputs on along its edges: those in `later` (the second
  // round's) when `second`, else the others (all of them when `later` is empty).
  void hand_on(Node& n, const std::vector<Tensor>& in_grads, const std::vector<int>& later, bool second) {
    for (size_t i = 0; i < n.next_edges.size(); ++i) {
      if ((std::find(later.begin(), later.end(), int(i)) != later.end()) != second) continue;
      const Edge& e = n.next_edges[i];
      if (!e.fn) continue;
      auto& slots = pending[e.fn.get()];
      if (slots.size() < size_t(e.fn->num_outputs)) slots.resize(e.fn->num_outputs);
      if (i < in_grads.size()) accumulate(slots[e.input_nr], in_grads[i]);
      if (--deps[e.fn.get()] == 0) ready.push_back({e.fn});
    }
  }
  // After a node's first round: everything when there is no second (and the node is done), else
  // the inputs not in `later`, above the second round on the stack.
  void hand_on_first(const std::shared_ptr<Node>& node, const std::vector<Tensor>& in_grads,
                     const std::vector<int>& later) {
    if (!later.empty()) ready.push_back({node, true});
    hand_on(*node, in_grads, later, false);
    if (later.empty()) retire(*node);
  }
  static void retire(Node& n) {
    if (n.reusable()) return;
    n.next_edges.clear();
    n.release();
    n.released = true;
  }
};
}  // namespace

void run_backward(const Tensor& root, const Tensor& grad_output) {
  LOUPE_CHECK(root.requires_grad(), "backward() on a tensor that does not require grad");
  NoGradGuard guard;  // the backward pass itself records nothing
  DeferredAdds adds;
  if (!root.grad_fn()) {  // a leaf: just accumulate
    std::vector<Tensor> g{grad_output};
    grad_accumulator(root)->apply(g);
    return;
  }
  Walk w(root.grad_fn().get());
  w.pending[root.grad_fn().get()].resize(root.grad_fn()->num_outputs);
  w.pending[root.grad_fn().get()][root.impl()->output_nr] = grad_output;
  w.ready.push_back({root.grad_fn()});
  while (!w.ready.empty()) {
    Walk::Item item = std::move(w.ready.back());
    w.ready.pop_back();
    Node& n = *item.n;
    // One op record per round, with the sums of the gradients it hands on (profile only).
    OpScope scope(OpScope::Backward{}, n.op_site, n.op_input_bytes, n.name());
    const bool moves = n.op_input_bytes >= 0;  // a view's gradient passes through without a copy
    if (item.second) {
      if (g_grad_ready) g_grad_ready->pause();  // what is in will be all for a while: send it
      std::vector<Tensor> in_grads = n.finish();
      if (moves)
        for (const Tensor& g : in_grads) scope.add_bytes(g);
      w.hand_on(n, in_grads, n.later_inputs(), true);
      Walk::retire(n);
      continue;
    }
    std::vector<Tensor> grads = std::move(w.pending[&n]);
    w.pending.erase(&n);
    grads.resize(n.num_outputs);
    LOUPE_CHECK(!n.released, "backward() through the same graph a second time: its saved tensors are freed "
                "after the first backward; run the forward pass again");
    if (moves)
      for (const Tensor& g : grads) scope.add_bytes(g);
    std::vector<Tensor> in_grads = n.apply(grads);
    std::vector<int> later = n.later_inputs();
    if (!later.empty() && (!g_grad_ready || !g_grad_ready->wants_rounds())) {  // both rounds now: nobody waits
      std::vector<Tensor> rest = n.finish();
      in_grads.resize(std::max(in_grads.size(), rest.size()));
      for (int i : later)
        if (size_t(i) < rest.size()) in_grads[size_t(i)] = rest[size_t(i)];
      later.clear();
    }
    if (moves)
      for (const Tensor& g : in_grads) scope.add_bytes(g);
    w.hand_on_first(item.n, in_grads, later);
  }
}

}  // namespace loupe::autograd

namespace loupe {
void backward(const Tensor& root, const Tensor& grad_output) {
  Tensor g = grad_output;
  if (!g.defined()) {
    LOUPE_CHECK(root.numel() == 1, "backward() without a gradient needs a scalar; this tensor has shape ",
                root.shape().str());
    OpScope scope("ones", {});  // the seed gradient
    g = scope.result(ones(root.shape(), root.dtype(), root.device()));
  }
  autograd::run_backward(root, g);
}
}  // namespace loupe
