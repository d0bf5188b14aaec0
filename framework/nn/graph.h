// A model whose layers form a directed acyclic graph (docs/keras.md, "Functional models"): a
// ResNet's shortcut, an Inception block's branches. nn::Sequential is its chain case.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"

namespace loupe::nn {

// Keras's merge layers: Add, Subtract (two inputs), Multiply, Average, Maximum, Minimum of tensors
// of one shape, and Concatenate along a dimension of loupe's layout.
enum class MergeOp { Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate };

// A node of a Graph that reads several inputs. Maximum is a + relu(b - a) (the gradient of a tie
// goes to the first, as TensorFlow's does); inputs of the 16-bit compute type and float32 (an
// embedding's rows) are cast to the compute type first.
class Merge : public Module {
 public:
  explicit Merge(MergeOp op, int dim = 1) : op_(op), dim_(dim) {}
  Tensor forward(const Tensor& x) override;  // one input: an Error (a merge takes two or more)
  bool takes(size_t n) const override { return op_ == MergeOp::Subtract ? n == 2 : n >= 2; }
  // The merged tensor (call_many: inside the node's NVTX range, named for its layer).
  Tensor forward_many(const std::vector<Tensor>& xs) override;
  std::string type_name() const override;

 private:
  MergeOp op_;
  int dim_;
};

// Nodes in topological order, each a module (a child of the graph, named as added) reading the
// outputs of earlier nodes or the graph's input (kInput); the last node's output is the graph's.
// forward keeps each output until its last reader has run, and folds the activation and dropout
// nodes that follow a layer into its pass (Module::accepts) where each node of the run is the one
// reader of the one before, as nn::Sequential does (LOUPE_FUSE=0 turns it off).
class Graph : public Module {
 public:
  static constexpr int kInput = -1;
  // Adds a node; `inputs` are earlier nodes (or kInput), as many as the module takes (one; two or
  // more for a Merge; a recurrent layer's second, its mask). `outputs`: which output of each it
  // reads (Module::outputs; the first where not given). Returns its index.
  int add(const std::string& name, std::shared_ptr<Module> m, std::vector<int> inputs, std::vector<int> outputs = {});
  Tensor forward(const Tensor& x) override;
  std::string type_name() const override { return "Graph"; }
  const std::vector<int>& inputs_of(int node) const { return inputs_.at(size_t(node)); }
  const std::vector<int>& outputs_read_by(int node) const { return outputs_.at(size_t(node)); }

 private:
  size_t epilogue_after(size_t i, Epilogue& e) const;
  std::vector<std::vector<int>> inputs_, outputs_;  // each node's inputs, and which output of each
  std::vector<int> readers_;  // how many inputs name each node
};

}  // namespace loupe::nn
