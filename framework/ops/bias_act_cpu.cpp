#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "core/dropout_mask.h"
#include "ops/bias_act.h"

namespace loupe {
namespace {

template <class T>
T act_or_identity_fwd(int act, T v) {
  switch (act) {
    case int(Act::Relu): return v > T(0) ? v : T(0);
    case int(Act::Sigmoid): return T(1) / (T(1) + std::exp(-v));
    case int(Act::Tanh): return std::tanh(v);
    default: return v;
  }
}

// From the activation's output y.
template <class T>
T act_or_identity_bwd(int act, T y, T g) {
  switch (act) {
    case int(Act::Relu): return y > T(0) ? g : T(0);
    case int(Act::Sigmoid): return g * y * (T(1) - y);
    case int(Act::Tanh): return g * (T(1) - y * y);
    default: return g;
  }
}

// The layout [outer, C, inner] walked as rows that share one bias value (inner > 1: a
// convolution's channel planes) or rows of all C channels (inner == 1: a dense layer), so the
// inner loops are plain and the activation (a template argument) is not re-chosen per element.
template <class RowFn>
void rows(const BiasActArgs& a, int64_t n, RowFn&& row) {
  const int64_t inner = std::max<int64_t>(a.inner, 1), C = std::max<int64_t>(a.C, 1);
  const bool planes = inner > 1;
  const int64_t len = planes ? inner : C, count = n / len;
  // A Philox block per four elements costs more than the arithmetic: smaller chunks then.
  const int64_t work = a.dropout ? 2048 : cpu::kGrain;
  parallel_for(0, count, std::max<int64_t>(1, work / len), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) row(r * len, len, planes ? r % C : -1);
  });
}

template <class T, int ACT, bool DROP>
void forward_as(const Tensor& y, const Tensor& x, const Tensor& b, const BiasActArgs& a) {
  T* py = y.data<T>();
  const T* px = x.data<T>();
  const T* pb = b.defined() ? b.data<T>() : nullptr;
  const T scale = DROP ? T(1) / (T(1) - T(a.p)) : T(1);
  rows(a, x.numel(), [&](int64_t i0, int64_t len, int64_t c) {
    DropoutMask m(a.rng.seed, a.rng.offset, a.p);
    for (int64_t j = 0; j < len; ++j) {
      const T bias = !pb ? T(0) : c >= 0 ? pb[c] : pb[j];
      const T v = act_or_identity_fwd(ACT, px[i0 + j] + bias);
      py[i0 + j] = DROP ? (m.keep(uint64_t(i0 + j)) ? v * scale : T(0)) : v;
    }
  });
}

template <class T, int ACT, bool DROP>
void backward_as(const Tensor& gx, const Tensor& y, const Tensor& gy, const BiasActArgs& a) {
  T* pgx = gx.data<T>();
  const T* py = y.data<T>();
  const T* pgy = gy.data<T>();
  const T scale = DROP ? T(1) / (T(1) - T(a.p)) : T(1);
  rows(a, y.numel(), [&](int64_t i0, int64_t len, int64_t) {
    DropoutMask m(a.rng.seed, a.rng.offset, a.p);
    for (int64_t j = 0; j < len; ++j) {
      const int64_t i = i0 + j;
      if (DROP)  // relu or none: the kept output is positive exactly where relu passed
        pgx[i] = m.keep(uint64_t(i)) && (ACT < 0 || py[i] > T(0)) ? pgy[i] * scale : T(0);
      else
        pgx[i] = act_or_identity_bwd(ACT, py[i], pgy[i]);
    }
  });
}

// f(act, drop) with the run's activation and dropout as compile-time constants.
template <class F>
void with_act(const BiasActArgs& a, F&& f) {
  auto drop = [&](auto act) {
    if (a.dropout) f(act, std::true_type());
    else f(act, std::false_type());
  };
  switch (a.act) {
    case int(Act::Relu): return drop(std::integral_constant<int, int(Act::Relu)>());
    case int(Act::Sigmoid): return drop(std::integral_constant<int, int(Act::Sigmoid)>());
    case int(Act::Tanh): return drop(std::integral_constant<int, int(Act::Tanh)>());
    default: return drop(std::integral_constant<int, -1>());
  }
}

void bias_act_forward(const ExecContext&, const Tensor& y, const Tensor& x, const Tensor& b, const BiasActArgs& a) {
  LOUPE_CHECK(!a.rng.base, "bias_act on the CPU: a draw relative to a device word (CUDA graphs are GPU-only)");
  cpu::dispatch_floating(x.dtype(), "bias_act", [&](auto tag) {
    using T = decltype(tag);
    with_act(a, [&](auto act, auto drop) { forward_as<T, decltype(act)::value, decltype(drop)::value>(y, x, b, a); });
  });
}

void bias_act_backward(const ExecContext&, const Tensor& gx, const Tensor& gb, const Tensor& y, const Tensor& gy,
                       const BiasActArgs& a) {
  LOUPE_CHECK(!a.rng.base, "bias_act on the CPU: a draw relative to a device word (CUDA graphs are GPU-only)");
  cpu::dispatch_floating(y.dtype(), "bias_act backward", [&](auto tag) {
    using T = decltype(tag);
    with_act(a, [&](auto act, auto drop) { backward_as<T, decltype(act)::value, decltype(drop)::value>(gx, y, gy, a); });
    T* pgx = gx.data<T>();
    if (!gb.defined()) return;
    // The bias gradient: rows of C channels (inner == 1), summed in row order per channel.
    T* pgb = gb.data<T>();
    const int64_t C = a.C, rows = a.outer;
    parallel_for(0, C, std::max<int64_t>(1, cpu::kGrain / std::max<int64_t>(rows, 1)), [&](int64_t c0, int64_t c1) {
      std::vector<T> acc(size_t(c1 - c0), T(0));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = c0; c < c1; ++c) acc[size_t(c - c0)] += pgx[r * C + c];
      for (int64_t c = c0; c < c1; ++c) pgb[c] = acc[size_t(c - c0)];
    });
  });
}

const BiasActKernels table{bias_act_forward, bias_act_backward};
const RegisterBackend<BiasActKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
