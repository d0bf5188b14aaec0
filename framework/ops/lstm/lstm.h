// LSTM over a whole batch-first sequence: several layers, optionally bidirectional, zero initial
// state. On the GPU through cuDNN's RNN API, on the CPU a GEMM-based loop; both read the same flat
// weight vector, so a parameter arena slice serves either backend unchanged.
//
// Gates (cuDNN's, PyTorch's and Keras' order): i (input), f (forget), g (cell candidate), o (output):
//   gates = x_t W^T + h_{t-1} R^T + b_W + b_R          [N, 4H], split into i, f, g, o
//   i, f, o = sigmoid(.), g = tanh(.)       (or i, f, o = hard_sigmoid(.): LstmParams::hard_slope)
//   c_t = f * c_{t-1} + i * g,   h_t = o * tanh(c_t)
//
// Weight layout: one flat vector, pseudo-layers in order p = layer * D + direction (D = 2 when
// bidirectional, direction 1 runs from t = T-1 down to 0), each holding, contiguously:
//   W   [4H, in_l]   rows: the i rows (H of them), then f, g, o; row-major (a GRU: 3H, r, z, n)
//   R   [4H, H]      same row order
//   b_W [4H]         same order
//   b_R [4H]
// with in_0 = input_size and in_l = D * H for l > 0 (the previous layer's concatenated output).
// This is cuDNN's canonical layout (cudnnGetRNNWeightParams) and PyTorch's weight_ih/weight_hh/
// bias_ih/bias_hh per layer; Keras' LSTM has one bias vector (b_W + b_R plays its role), so the
// parameter count is 4H more per pseudo-layer than Keras reports.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/exec_context.h"
#include "core/tensor.h"

namespace loupe {

struct LstmParams {
  int64_t input_size = 0, hidden_size = 0;
  int num_layers = 1;
  bool bidirectional = false;
  double dropout = 0;  // on the outputs of every layer but the last, in training only
  // The gates i, f, o: the logistic sigmoid (0), or Keras's hard_sigmoid clip(slope x + 0.5, 0, 1)
  // with this slope (Keras 2: 0.2; Keras 3: 1/6; docs/keras.md). cuDNN has only the sigmoid:
  // ops/lstm/lstm_cuda.cu runs a hard one on loupe's kernels.
  float hard_slope = 0;
  // Keras's one bias per gate: b_R is held at zero (its gradient is zero), so b_W is the bias and
  // the trained parameters are Keras's.
  bool single_bias = false;
  // cuDNN's GRU instead of the LSTM (CUDA only; the CPU's GRU is nn::Recurrent's composition):
  // three gates r, z, n in that order, no cell state (c stays zero),
  //   r, z = sigmoid(x W + b_W + h R + b_R),  n = tanh(x W_n + b_Wn + r * (h R_n + b_Rn)),
  //   h_t = (1 - z) * n + z * h_{t-1}
  // (Keras's GRU with reset_after and the sigmoid, its gates z, r, h reordered).
  bool gru = false;
  int directions() const { return bidirectional ? 2 : 1; }
  int gates() const { return gru ? 3 : 4; }
};

// Elements of the flat weight vector.
int64_t lstm_weight_count(const LstmParams& p);

// Where pseudo-layer (layer, direction)'s pieces start in the flat weight vector, and its input size.
struct LstmLayerOffsets {
  int64_t w = 0, r = 0, b_w = 0, b_r = 0;
  int64_t in = 0;
};
LstmLayerOffsets lstm_layer_offsets(const LstmParams& p, int layer, int direction);

struct LstmResult {
  Tensor y;     // [N, T, D*H]: every step's output of the last layer (both directions concatenated)
  Tensor h, c;  // [L*D, N, H]: the final hidden and cell state of every pseudo-layer
};

// x [N, T, input_size] (batch-first), w the flat weights. Autograd flows to x and w from y and h
// (and c). With dropout > 0 and training, masks come from the global generator on the CPU and
// from cuDNN's dropout on the GPU (so the two backends agree only without dropout).
LstmResult lstm(const Tensor& x, const Tensor& w, const LstmParams& p, bool training);

// How the CUDA LSTM runs each problem it has planned, in the order planned: "standard batch",
// "small_h seq", "loupe16 seq", ... (the algorithm: cuDNN's standard, small_h, static, dynamic, or
// loupe's persistent kernels with 16 or 8 rows a block; then the layout x reaches it in). Empty on
// the CPU. The tests that force a choice (LOUPE_LSTM_ALGO, LOUPE_LSTM_LAYOUT) read it to check that
// the forced one is what ran.
std::vector<std::string> lstm_cuda_plans();
void note_lstm_cuda_plan(const std::string& plan);  // called by the CUDA backend when it plans

struct LstmKernels {
  // Forward: fills y, h, c (allocated by the caller, contiguous) and returns what backward needs
  // (backend-specific: the CPU's gate activations and cell states, cuDNN's reserve space); it is
  // undefined when `training` is false (no backward will follow). seed/offset: dropout masks. A
  // backend whose kernels write y in another memory order may instead set y to a view of its own
  // buffer (same shape, other strides: cuDNN's sequence-major output, transposed by strides alone).
  // `ctx`: the forward op's, and the backward's the same (its node keeps it).
  Tensor (*forward)(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, Tensor& y, const Tensor& h,
                    const Tensor& c, bool training, uint64_t seed, uint64_t offset);
  // Backward: from dy [N, T, D*H] and dh, dc [L*D, N, H] (each may be undefined: zero; dy may be
  // strided) computes dx [N, T, input_size] (when defined) and dw (flat), both overwritten (not
  // accumulated). y is what forward left in it. With `weights_later` (only where backward_weights
  // is set) the first layer's W and R gradients, its long GEMMs, are left out of dw for...
  void (*backward)(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, const Tensor& y, const Tensor& saved,
                   const Tensor& dy, const Tensor& dh, const Tensor& dc, const Tensor& dx, const Tensor& dw,
                   uint64_t seed, uint64_t offset, bool weights_later);
  // ...this, later, on the same saved state (autograd's second round, Node::later_inputs: the layer
  // below runs between the two). Null where a backend has one round only (the CPU).
  void (*backward_weights)(const ExecContext& ctx, const LstmParams& p, const Tensor& x, const Tensor& w, const Tensor& y,
                           const Tensor& saved, const Tensor& dw);
};

}  // namespace loupe
