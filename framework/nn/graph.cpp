#include "nn/graph.h"

#include "core/error.h"
#include "core/knobs.h"
#include "ops/activation.h"
#include "ops/cat.h"
#include "ops/elementwise.h"

namespace loupe::nn {

namespace {
const char* merge_name(MergeOp op) {
  switch (op) {
    case MergeOp::Add: return "Add";
    case MergeOp::Subtract: return "Subtract";
    case MergeOp::Multiply: return "Multiply";
    case MergeOp::Average: return "Average";
    case MergeOp::Maximum: return "Maximum";
    case MergeOp::Minimum: return "Minimum";
    case MergeOp::Concatenate: return "Concatenate";
  }
  return "?";
}
}  // namespace

std::string Merge::type_name() const {
  return op_ == MergeOp::Concatenate ? "Concatenate(dim " + std::to_string(dim_) + ")" : merge_name(op_);
}

Tensor Merge::forward(const Tensor&) { LOUPE_FAIL(type_name(), " merges two or more inputs; it is a node of an nn::Graph"); }

Tensor Merge::forward_many(const std::vector<Tensor>& given) {
  LOUPE_CHECK(given.size() >= 2, type_name(), " merges two or more inputs, got ", given.size());
  LOUPE_CHECK(op_ != MergeOp::Subtract || given.size() == 2, "Subtract takes two inputs, got ", given.size());
  std::vector<Tensor> xs;
  for (const Tensor& x : given) xs.push_back(autocast(x));
  if (op_ == MergeOp::Concatenate) return cat(xs, dim_);
  for (size_t i = 1; i < xs.size(); ++i)
    LOUPE_CHECK(xs[i].shape() == xs[0].shape(), type_name(), " takes inputs of one shape, got ", xs[0].shape().str(),
                " and ", xs[i].shape().str());
  Tensor y = xs[0];
  for (size_t i = 1; i < xs.size(); ++i) {
    const Tensor& b = xs[i];
    switch (op_) {
      case MergeOp::Add:
      case MergeOp::Average: y = add(y, b); break;
      case MergeOp::Subtract: y = sub(y, b); break;
      case MergeOp::Multiply: y = mul(y, b); break;
      case MergeOp::Maximum: y = add(y, relu(sub(b, y))); break;
      case MergeOp::Minimum: y = sub(y, relu(sub(y, b))); break;
      case MergeOp::Concatenate: break;
    }
  }
  return op_ == MergeOp::Average ? mul(y, 1.0 / double(xs.size())) : y;
}

int Graph::add(const std::string& name, std::shared_ptr<Module> m, std::vector<int> inputs, std::vector<int> outputs) {
  const int index = int(inputs_.size());
  LOUPE_CHECK(m->takes(inputs.size()), "nn::Graph: node '", name, "' (", m->type_name(), ") cannot read ", inputs.size(),
              " inputs");
  LOUPE_CHECK(outputs.size() <= inputs.size(), "nn::Graph: node '", name, "' names the outputs of ", outputs.size(),
              " inputs, of ", inputs.size());
  outputs.resize(inputs.size(), 0);
  for (size_t r = 0; r < inputs.size(); ++r) {
    const int k = inputs[r];
    LOUPE_CHECK(k == kInput || (k >= 0 && k < index), "nn::Graph: node '", name, "' reads node ", k,
                ", which is not an earlier node");
    const int have = k == kInput ? 1 : children()[size_t(k)].second->outputs();
    LOUPE_CHECK(outputs[r] >= 0 && outputs[r] < have, "nn::Graph: node '", name, "' reads output ", outputs[r], " of node ",
                k, ", which has ", have);
    if (k != kInput) ++readers_[size_t(k)];
  }
  register_module(name, std::move(m));
  inputs_.push_back(std::move(inputs));
  outputs_.push_back(std::move(outputs));
  readers_.push_back(0);
  return index;
}

// The nodes after node i (of one input) that fold into its pass: each an epilogue step (an
// activation, a dropout) that node i accepts, reading only the node before it, which no other node
// reads.
size_t Graph::epilogue_after(size_t i, Epilogue& e) const {
  static const bool fuse = knobs::flag("LOUPE_FUSE");
  const auto& nodes = children();
  size_t j = i + 1;
  const bool one_output = nodes[i].second->outputs() == 1;
  while (fuse && inputs_[i].size() == 1 && one_output && j < nodes.size() && inputs_[j] == std::vector<int>{int(j) - 1} &&
         readers_[j - 1] == 1 && fold_epilogue(*nodes[i].second, *nodes[j].second, e))
    ++j;
  return j;
}

Tensor Graph::forward(const Tensor& x) {
  const auto& nodes = children();
  LOUPE_CHECK(!nodes.empty(), "nn::Graph: no nodes");
  std::vector<std::vector<Tensor>> value(nodes.size());  // each node's outputs
  std::vector<int> left = readers_;
  auto read = [&](int k, int output) {
    if (k == kInput) return x;
    const std::vector<Tensor>& v = value[size_t(k)];
    LOUPE_CHECK(size_t(output) < v.size() && v[size_t(output)].defined(), "nn::Graph: node ", k, " read before it ran");
    Tensor t = v[size_t(output)];
    if (--left[size_t(k)] == 0) value[size_t(k)].clear();  // its last reader: the memory can go
    return t;
  };
  for (size_t i = 0; i < nodes.size();) {
    std::vector<Tensor> in;
    for (size_t r = 0; r < inputs_[i].size(); ++r) in.push_back(read(inputs_[i][r], outputs_[i][r]));
    Module& m = *nodes[i].second;
    if (m.outputs() > 1) {
      value[i++] = m.call_outputs(in);
      continue;
    }
    Epilogue e;
    const size_t j = epilogue_after(i, e);
    if (in.size() > 1) value[j - 1] = {m.call_many(in)};
    else value[j - 1] = {e.absorbed ? m.call_fused(in[0], e) : m(in[0])};
    i = j;
  }
  return value.back().at(0);
}

}  // namespace loupe::nn
