// A layer's epilogue fused into one pass: y = dropout(act(x + b)). Separately, the bias add, the
// activation and dropout each read and write the whole activation (three passes forward, three
// backward plus the bias gradient's reduction); fused, the forward is one pass and the backward
// one pass that also reduces the bias gradient. This is what torch.compile's generated kernels do
// for these patterns. nn::Sequential applies it where a Linear or Conv2d is followed by an
// activation and/or dropout (nn/module.h, Epilogue).
//
// The result is the one the separate ops give, bit for bit: the sum is rounded to x's dtype
// before the activation, as bias_add stores it, and the dropout mask is dropout()'s (element i of
// the memory order is kept when philox_uniform(seed, offset, i) >= p, drawn from the default
// generator at the same point). Only the bias gradient's summation order differs.
#pragma once
#include <optional>

#include "core/exec_context.h"
#include "core/random.h"
#include "core/tensor.h"
#include "ops/activation.h"

namespace loupe {

// x [N, C, ...] in any dense layout (NCHW, channels-last, [N, C]); b [C] in x's dtype, or
// undefined (no bias). act: none, or one of Act. p: dropout probability, applied in training.
// Dropout follows only relu or no activation (the backward reads the saved output, from which
// relu's derivative, unlike sigmoid's or tanh's, survives the dropout's scaling).
Tensor bias_act(const Tensor& x, const Tensor& b, std::optional<Act> act, double p, bool training);

struct BiasActArgs {
  int64_t outer = 0, C = 0, inner = 0;  // x viewed as [outer, C, inner] in memory order
  int act = -1;                         // an Act, or -1 for none
  bool dropout = false;
  float p = 0;                          // the dropout probability
  RngDraw rng;                          // the dropout's draw
};

struct BiasActKernels {
  // y = drop(act(x + b[c])), c the channel of each element; all dense in one layout; b may be
  // undefined.
  void (*forward)(const ExecContext& ctx, const Tensor& y, const Tensor& x, const Tensor& b, const BiasActArgs& a);
  // gx = the gradient through dropout and the activation, from the saved output y; and when gb is
  // defined (only for inner == 1 with C a power of two in [4, 1024], see bias_act_fuses_bias_grad)
  // gb[c] = the sum of gx over channel c, in gb's dtype.
  void (*backward)(const ExecContext& ctx, const Tensor& gx, const Tensor& gb, const Tensor& y, const Tensor& gy,
                   const BiasActArgs& a);
};

// bias_act's parts without its autograd record, for an op that owns the backward of a product and
// its epilogue (ops/fused/linear_act.cpp). Each counts its FLOPs.
// The epilogue's checks, in `op`'s name: b [C] (or undefined) in x's dtype and device, p in [0, 1),
// dropout only after relu or no activation. Returns whether dropout applies (training and p > 0).
bool check_epilogue(const char* op, const Tensor& x, const Tensor& b, int64_t C, std::optional<Act> act, double p,
                    bool training);
// The arguments for x (dense), its activation and dropout (drawn here when `dropout`).
BiasActArgs bias_act_args(const Tensor& x, std::optional<Act> act, bool dropout, double p);
// The forward pass: y = drop(act(x + b)) for dense x; b contiguous or undefined.
Tensor bias_act_apply(const Tensor& x, const Tensor& b, const BiasActArgs& a);
// The gradient through dropout and the activation, gx, from the saved output y; with `bias_grad`
// also the bias's gradient gb (else gb is undefined).
struct BiasActGrads {
  Tensor gx, gb;
};
BiasActGrads bias_act_grad(const Tensor& y, const Tensor& gy, const BiasActArgs& a, bool bias_grad);

// Whether the backward kernels reduce the bias gradient themselves for this shape (else it is
// sum_except over gx).
inline bool bias_act_fuses_bias_grad(int64_t C, int64_t inner) {
  return inner == 1 && C >= 4 && C <= 1024 && (C & (C - 1)) == 0;
}

}  // namespace loupe
