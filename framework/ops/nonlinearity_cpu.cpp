#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "ops/nonlinearity.h"

namespace loupe {
namespace {

// e^-|x| never overflows: the sigmoid of any finite x (silu, softplus's derivative).
template <class T>
inline T nl_sigmoid(T x) {
  T e = std::exp(-std::abs(x));
  return x >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
}

template <Nonlin F, class T>
inline T nl_forward_of(T x, T slope) {
  if constexpr (F == Nonlin::Elu) return x > T(0) ? x : std::expm1(x);
  else if constexpr (F == Nonlin::Selu) return T(kSeluScale) * (x > T(0) ? x : T(kSeluAlpha) * std::expm1(x));
  else if constexpr (F == Nonlin::Gelu) return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
  else if constexpr (F == Nonlin::Silu) return x * nl_sigmoid(x);
  else if constexpr (F == Nonlin::HardSigmoid) return std::min(std::max(slope * x + T(0.5), T(0)), T(1));
  else if constexpr (F == Nonlin::Softplus) return std::max(x, T(0)) + std::log1p(std::exp(-std::abs(x)));
  else return x / (T(1) + std::abs(x));
}

// dy/dx times g, from the input x.
template <Nonlin F, class T>
inline T nl_backward_of(T x, T g, T slope) {
  if constexpr (F == Nonlin::Elu) return x > T(0) ? g : g * std::exp(x);
  else if constexpr (F == Nonlin::Selu) return g * T(kSeluScale) * (x > T(0) ? T(1) : T(kSeluAlpha) * std::exp(x));
  else if constexpr (F == Nonlin::Gelu) {
    // Phi(x) + x phi(x), phi the standard normal density.
    T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
    return g * (cdf + x * T(0.39894228040143267794) * std::exp(T(-0.5) * x * x));
  } else if constexpr (F == Nonlin::Silu) {
    T s = nl_sigmoid(x);
    return g * s * (T(1) + x * (T(1) - s));
  } else if constexpr (F == Nonlin::HardSigmoid) {
    T v = slope * x + T(0.5);
    return v > T(0) && v < T(1) ? g * slope : T(0);
  } else if constexpr (F == Nonlin::Softplus) {
    return g * nl_sigmoid(x);
  } else {
    T d = T(1) + std::abs(x);
    return g / (d * d);
  }
}

// Calls fn with the function as a compile-time constant, so that each loop is one function's.
template <class Fn>
void with_nonlin(Nonlin f, Fn&& fn) {
  using K = Nonlin;
  switch (f) {
    case K::Elu: fn(std::integral_constant<K, K::Elu>{}); break;
    case K::Selu: fn(std::integral_constant<K, K::Selu>{}); break;
    case K::Gelu: fn(std::integral_constant<K, K::Gelu>{}); break;
    case K::Silu: fn(std::integral_constant<K, K::Silu>{}); break;
    case K::HardSigmoid: fn(std::integral_constant<K, K::HardSigmoid>{}); break;
    case K::Softplus: fn(std::integral_constant<K, K::Softplus>{}); break;
    case K::Softsign: fn(std::integral_constant<K, K::Softsign>{}); break;
  }
}

void nonlinearity_forward(const ExecContext&, Nonlin f, float slope, const Tensor& y, const Tensor& x) {
  cpu::dispatch_floating(x.dtype(), "nonlinearity", [&](auto tag) {
    using T = decltype(tag);
    T* py = y.data<T>();
    const T* px = x.data<T>();
    const T a = T(slope);
    with_nonlin(f, [&](auto fc) {
      constexpr Nonlin F = decltype(fc)::value;
      parallel_for(0, x.numel(), cpu::kGrain, [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i) py[i] = nl_forward_of<F>(px[i], a);
      });
    });
  });
}

void nonlinearity_backward(const ExecContext&, Nonlin f, float slope, const Tensor& gx, const Tensor& x,
                           const Tensor& gy) {
  cpu::dispatch_floating(x.dtype(), "nonlinearity backward", [&](auto tag) {
    using T = decltype(tag);
    T* pg = gx.data<T>();
    const T* px = x.data<T>();
    const T* pgy = gy.data<T>();
    const T a = T(slope);
    with_nonlin(f, [&](auto fc) {
      constexpr Nonlin F = decltype(fc)::value;
      parallel_for(0, x.numel(), cpu::kGrain, [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i) pg[i] = nl_backward_of<F>(px[i], pgy[i], a);
      });
    });
  });
}

const NonlinKernels table{nonlinearity_forward, nonlinearity_backward};
const RegisterBackend<NonlinKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
