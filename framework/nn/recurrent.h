// Recurrent layers: LSTM over batch-first sequences.
#pragma once
#include <cstdint>
#include <string>

#include "nn/module.h"
#include "ops/lstm.h"

namespace loupe::nn {

// An LSTM (ops/lstm.h) with one parameter, "weight": the flat vector in cuDNN's layout. Zero
// initial state; dropout (PyTorch's semantics) acts between layers, in training only.
//
// Initialised like Keras' LSTM defaults, all from the global generator, pseudo-layer by
// pseudo-layer: W [4H, in] Glorot-uniform (fan_in = in, fan_out = 4H, as Keras' [in, 4H] kernel);
// R [4H, H] orthogonal (Keras' `orthogonal`: Q of a random normal [4H, H] matrix, signs fixed so
// that R of the QR has a positive diagonal, i.e. orthonormal columns); b_W zero but the forget gate's
// block, 1 (unit_forget_bias); b_R zero, so b_W + b_R is Keras' single bias. Keras has no b_R: its
// parameter count is 4H per pseudo-layer lower, unless the params say single_bias (b_R held at
// zero, not counted: Keras's LSTM exactly, as a model file builds it).
class LSTM : public Module {
 public:
  LSTM(int64_t input_size, int64_t hidden, int num_layers = 1, bool bidirectional = false, double dropout = 0);
  // Every option of ops/lstm.h's LstmParams (the gates' hard_slope, single_bias).
  explicit LSTM(const LstmParams& p);
  // All outputs: y [N, T, D*H] and the final states h, c [L*D, N, H].
  LstmResult run(const Tensor& x);
  Tensor forward(const Tensor& x) override { return run(x).y; }
  std::string type_name() const override;
  const LstmParams& params() const { return params_; }
  int64_t fixed_elements() const override;
  Tensor weight;

 private:
  LstmParams params_;
};

}  // namespace loupe::nn
