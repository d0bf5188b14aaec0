// Analytic FLOP counting: each op adds the floating-point operations it performs when it is
// dispatched (host side, no device work). Conventions, per element unless stated:
//   GEMM 2*M*N*K; add/sub/mul/div, scalar affine, bias add, add_ 1; relu 1 (backward 1);
//   sigmoid and tanh 4 (backward 3); elu, selu, gelu, silu, hard sigmoid, softplus and softsign
//   4 (backward 4); dropout 1 (backward 1); sum and mean 1;
//   softmax and log-softmax 4 (backward 4); cross-entropy 4 per logit (backward 4);
//   BCE-with-logits 6 (backward 4); count_correct and argmax 1 per logit;
//   optimizer per parameter: SGD 2 (+2 with momentum, +1 with Nesterov, +2 with weight decay),
//   RMSprop 6, Adam 12, Adadelta 14.
//   conv2d 2*N*K*P*Q*C*R*S forward, the same for each of the data and filter gradients;
//   pooling kernel_h*kernel_w per output, forward and backward. Gathers and copies move data and count 0.
//   batch norm 6 (training) or 2 (evaluation) forward, 8 backward; an LSTM's GEMMs as GEMMs plus,
//   per row, time step and direction, 32H forward and 30H backward for its gates (ops/lstm/lstm.cpp).
//
// The count belongs to a run: a trainer holds a FlopCounter and opens a FlopScope on the thread
// that dispatches its ops (as it opens its PrecisionScope), so two trainers in one process, or a
// loader thread's casts, never add to each other's count. Outside every scope the ops add to the
// process's own counter.
#pragma once

namespace loupe {

struct FlopCounter {
  double total = 0;
};

// Adds f to the innermost live FlopScope's counter on this thread, else to the process's.
void add_flops(double f);
// That counter's total (the differences around a step are the step's FLOPs).
double flops_counted();

// Makes `c` this thread's counter while it lives (scopes nest; the previous one returns after it).
class FlopScope {
 public:
  explicit FlopScope(FlopCounter& c);
  ~FlopScope();
  FlopScope(const FlopScope&) = delete;
  FlopScope& operator=(const FlopScope&) = delete;

 private:
  FlopCounter* prev_;
};

}  // namespace loupe
