// A test op whose backward comes in two rounds (autograd/node.h, Node::later_inputs), as the LSTM's
// on a GPU: y = x * w elementwise; apply() hands on dx = g w, finish() dw = g x. `log`, when given,
// says what ran when. For the engine's and the data-parallel reducer's tests on the CPU, where the
// LSTM runs in one round.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "loupe.h"

namespace loupe::test_ops {

struct TwoRoundMul : autograd::Node {
  Tensor x, w, g;
  std::vector<std::string>* log = nullptr;
  const char* name() const override { return "TwoRoundMul"; }
  std::vector<int> later_inputs() const override { return {1}; }
  std::vector<Tensor> apply(std::vector<Tensor>& grads) override {
    if (log) log->push_back("apply");
    g = grads[0];
    return {g * w, Tensor()};
  }
  std::vector<Tensor> finish() override {
    if (log) log->push_back("finish");
    return {Tensor(), g * x};
  }
  void release() override { x = w = g = Tensor(); }
};

inline Tensor two_round_mul(const Tensor& x, const Tensor& w, std::vector<std::string>* log = nullptr) {
  auto n = std::make_shared<TwoRoundMul>();
  n->x = x.detach();
  n->w = w.detach();
  n->log = log;
  Tensor y;
  {
    NoGradGuard guard;
    y = x * w;
  }
  autograd::record(n, {&x, &w}, {&y});
  return y;
}

}  // namespace loupe::test_ops
