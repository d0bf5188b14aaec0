// Recurrent layers over batch-first sequences: LSTM (its own op, ops/lstm/lstm.h), and Keras's GRU and
// SimpleRNN composed of loupe's ops step by step.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "nn/module.h"
#include "ops/lstm/lstm.h"

namespace loupe::nn {

// An LSTM (ops/lstm/lstm.h) with one parameter, "weight": the flat vector in cuDNN's layout. Zero
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
  // Every option of ops/lstm/lstm.h's LstmParams (the gates' hard_slope, single_bias).
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

// Keras's GRU, SimpleRNN and LSTM (docs/keras.md, "Recurrent layers"), in Keras's layouts: "kernel"
// [in, G u], "recurrent_kernel" [u, G u], "bias" [G u] (G gates: GRU's z, r, h; LSTM's i, f, c, o;
// SimpleRNN's one),
// a GRU with reset_after [2, G u] (the input's bias, then the recurrent one's). Each step is
// loupe's ops (matmul, the activations, elementwise products), so the gradients are autograd's and
// every device runs them; the step's CUDA graph holds the whole loop. Initialised as Keras's
// defaults: glorot_uniform kernel, orthogonal recurrent kernel, zero bias (an LSTM's forget gate's
// block 1, unit_forget_bias). An LSTM runs here only for what nn::LSTM's kernels lack (dropout).
struct RnnParams {
  enum class Cell { Gru, Simple, Lstm };  // an LSTM here is Keras's (gates i, f, c, o; one bias)
  Cell cell = Cell::Gru;
  int64_t input_size = 0, units = 0;
  bool reset_after = true;         // GRU: r multiplies h U + b_R (Keras 2.3+, cuDNN's); false: Keras 2's r * h before U
  float hard_slope = 0;            // GRU's gates: 0 the sigmoid, else hard_sigmoid clip(slope x + 0.5, 0, 1)
  Act activation = Act::Tanh;      // the candidate's (GRU) or the state's (SimpleRNN): tanh or relu
  bool use_bias = true;
  bool go_backwards = false;       // the sequence from its last step to its first
  bool return_sequences = false;   // every step's output [N, T, u] (in the order processed), else the last [N, u]
  bool time_order = false;         // go_backwards' sequence in the input's order (Keras's Bidirectional reverses it so)
  bool return_state = false;       // the final states too (Keras's return_state): h, and an LSTM's carry c
  bool initial_state = false;      // the first step's states are inputs (Keras's initial_state), else zeros
  // Keras's dropout of the inputs and of the state fed back, in training: masks drawn once a
  // sequence, one per gate where `mask_per_gate` (Keras's implementation 1), else one for all.
  double dropout = 0, recurrent_dropout = 0;
  bool mask_per_gate = false;
  int gates() const { return cell == Cell::Gru ? 3 : cell == Cell::Lstm ? 4 : 1; }
  int states() const { return cell == Cell::Lstm ? 2 : 1; }  // h, and an LSTM's c
};

// The layer's function of x [N, T, in] and its three tensors (bias undefined without use_bias), of
// any one dtype and device: [N, T, u] with return_sequences, else [N, u]. `mask` (Keras's mask:
// an Embedding's mask_zero): [N, T] of 1 for a step read and 0 for one skipped, whose state is
// the step before's (and so is its output in a returned sequence), as Keras's RNN carries it.
Tensor rnn(const Tensor& x, const Tensor& kernel, const Tensor& recurrent_kernel, const Tensor& bias, const RnnParams& p,
           bool training = false, const Tensor& mask = Tensor());
// rnn()'s output and its final states h and (an LSTM's) c [N, u], the last step's (a skipped
// step's: the one before's), started from `initial` (h, and an LSTM's c, [N, u]) or zeros.
struct RnnResult {
  Tensor y, h, c;
};
RnnResult rnn_states(const Tensor& x, const Tensor& kernel, const Tensor& recurrent_kernel, const Tensor& bias,
                     const RnnParams& p, bool training = false, const Tensor& mask = Tensor(),
                     const std::vector<Tensor>& initial = {});

// Whether a Recurrent runs as cuDNN's GRU on x (ops/lstm/lstm.h, LstmParams::gru): on the GPU, a GRU
// with reset_after, the sigmoid and tanh, a bias, no dropout, without a mask or an initial state
// (read backwards: on the sequence reversed); the rest is rnn()'s composition of loupe's ops,
// which is also the CPU's.
bool cudnn_gru(const RnnParams& p, const Tensor& x, bool masked);

class Recurrent : public Module {
 public:
  explicit Recurrent(const RnnParams& p);
  Tensor forward(const Tensor& x) override;
  // A node of nn::Graph: x, with initial_state the states (h, an LSTM's c), then the sequence's
  // mask [N, T] (rnn's) where it has one.
  bool takes(size_t n) const override;
  Tensor forward_many(const std::vector<Tensor>& xs) override { return forward_outputs(xs)[0]; }
  // With return_state: the output, h and (an LSTM's) c.
  int outputs() const override { return p_.return_state ? 1 + p_.states() : 1; }
  std::vector<Tensor> forward_outputs(const std::vector<Tensor>& xs) override;
  std::string type_name() const override;
  const RnnParams& params() const { return p_; }
  Tensor kernel, recurrent_kernel, bias;

 private:
  std::vector<Tensor> cudnn_forward(const Tensor& x);  // as cuDNN's GRU (cudnn_gru): y, and h with return_state
  Tensor flip_time(const Tensor& x);
  RnnParams p_;
  std::map<int64_t, Tensor> flip_ids_;  // flip_time's step order, by length
};

}  // namespace loupe::nn
