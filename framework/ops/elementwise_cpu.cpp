#include <algorithm>

#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "ops/elementwise.h"

namespace loupe {
namespace {

template <class T>
inline T apply_op(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
  }
  return T(0);
}

// b is a transposed matrix (strides {1, rows}) and a contiguous: a weight's gradient from a
// matmul, added into its .grad. Square tiles let both sides stream from cache instead of b
// jumping a row per element.
bool transposed_rhs(const Tensor& out, const Tensor& a, const Tensor& b) {
  return out.dim() == 2 && b.shape() == out.shape() && out.is_contiguous() && a.is_contiguous() && b.strides()[0] == 1 &&
         b.strides()[1] == out.size(0) && out.size(0) > 1 && out.size(1) > 1;
}

template <class T>
void binary_transposed(BinaryOp op, T* o, const T* pa, const T* pb, int64_t rows, int64_t cols) {
  constexpr int64_t kTile = 32;
  parallel_for(0, (rows + kTile - 1) / kTile, std::max<int64_t>(1, cpu::kGrain / (kTile * cols)), [&](int64_t t0, int64_t t1) {
    for (int64_t r0 = t0 * kTile; r0 < std::min(rows, t1 * kTile); r0 += kTile)
      for (int64_t c0 = 0; c0 < cols; c0 += kTile)
        for (int64_t r = r0; r < std::min(rows, r0 + kTile); ++r)
          for (int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
            o[r * cols + c] = apply_op(op, pa[r * cols + c], pb[c * rows + r]);
  });
}

void binary(const ExecContext&, BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  cpu::dispatch_floating(out.dtype(), "elementwise arithmetic", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    if (a.is_contiguous() && b.is_contiguous()) {  // the common same-shape case
      parallel_for(0, out.numel(), cpu::kGrain, [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i) o[i] = apply_op(op, pa[i], pb[i]);
      });
      return;
    }
    if (transposed_rhs(out, a, b)) {
      binary_transposed(op, o, pa, pb, out.size(0), out.size(1));
      return;
    }
    Shape st[2] = {a.strides(), b.strides()};
    parallel_for(0, out.numel(), cpu::kGrain, [&](int64_t s, int64_t e) {
      cpu::strided_loop<2>(out.shape(), st, s, e, [&](int64_t i, int64_t oa, int64_t ob, int64_t) {
        o[i] = apply_op(op, pa[oa], pb[ob]);
      });
    });
  });
}

void affine(const ExecContext&, const Tensor& out, const Tensor& a, double m, double c) {
  cpu::dispatch_floating(out.dtype(), "scalar arithmetic", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T* x = a.data<T>();
    T tm = T(m), tc = T(c);
    parallel_for(0, out.numel(), cpu::kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) o[i] = x[i] * tm + tc;
    });
  });
}

void axpy(const ExecContext&, const Tensor& y, double alpha, const Tensor& x) {
  cpu::dispatch_floating(y.dtype(), "add_", [&](auto tag) {
    using T = decltype(tag);
    T* py = y.data<T>();
    const T* px = x.data<T>();
    T al = T(alpha);
    parallel_for(0, y.numel(), cpu::kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) py[i] += al * px[i];
    });
  });
}

void bias_add(const ExecContext&, const Tensor& out, const Tensor& x, const Tensor& b, int64_t outer, int64_t C,
              int64_t inner) {
  cpu::dispatch_floating(out.dtype(), "bias_add", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T* px = x.data<T>();
    const T* pb = b.data<T>();
    parallel_for(0, outer * C, cpu::kGrain / (inner + 1) + 1, [&](int64_t s, int64_t e) {
      for (int64_t r = s; r < e; ++r) {
        T bv = pb[r % C];
        for (int64_t i = 0; i < inner; ++i) o[r * inner + i] = px[r * inner + i] + bv;
      }
    });
  });
}

const ElementwiseKernels table{binary, affine, axpy, bias_add};
const RegisterBackend<ElementwiseKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
