// Elementwise arithmetic with NumPy broadcasting, scalar arithmetic and the bias add.
#pragma once
#include "core/exec_context.h"
#include "core/tensor.h"

namespace loupe {

enum class BinaryOp : int { Add, Sub, Mul, Div };

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, double s);
Tensor add(const Tensor& a, double s);
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
inline Tensor operator-(const Tensor& a) { return mul(a, -1.0); }

// x [N, C, ...] + b [C]: the bias of Linear and (later) Conv2d layers.
Tensor bias_add(const Tensor& x, const Tensor& b);

// In place, no autograd: dst += alpha * src (same shape).
void add_(const Tensor& dst, const Tensor& src, double alpha = 1.0);

struct ElementwiseKernels {
  // out contiguous; a and b are views of out's shape (broadcast dimensions have stride 0).
  void (*binary)(const ExecContext& ctx, BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b);
  // out = a * mul + add; both contiguous.
  void (*affine)(const ExecContext& ctx, const Tensor& out, const Tensor& a, double mul, double add);
  // y += alpha * x; both contiguous, same numel.
  void (*axpy)(const ExecContext& ctx, const Tensor& y, double alpha, const Tensor& x);
  // out[n, c, i] = x[n, c, i] + b[c]; all contiguous.
  void (*bias_add)(const ExecContext& ctx, const Tensor& out, const Tensor& x, const Tensor& b, int64_t outer,
                   int64_t C, int64_t inner);
};

}  // namespace loupe
