#include <cmath>

#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "ops/activation.h"

namespace loupe {
namespace {

void activation_forward(const ExecContext&, Act a, const Tensor& y, const Tensor& x) {
  cpu::dispatch_floating(x.dtype(), "activation", [&](auto tag) {
    using T = decltype(tag);
    T* py = y.data<T>();
    const T* px = x.data<T>();
    parallel_for(0, x.numel(), cpu::kGrain, [&](int64_t s, int64_t e) {
      switch (a) {
        case Act::Relu: for (int64_t i = s; i < e; ++i) py[i] = px[i] > T(0) ? px[i] : T(0); break;
        case Act::Sigmoid: for (int64_t i = s; i < e; ++i) py[i] = T(1) / (T(1) + std::exp(-px[i])); break;
        case Act::Tanh: for (int64_t i = s; i < e; ++i) py[i] = std::tanh(px[i]); break;
      }
    });
  });
}

void activation_backward(const ExecContext&, Act a, const Tensor& gx, const Tensor& y, const Tensor& gy) {
  cpu::dispatch_floating(y.dtype(), "activation backward", [&](auto tag) {
    using T = decltype(tag);
    T* pg = gx.data<T>();
    const T* py = y.data<T>();
    const T* pgy = gy.data<T>();
    parallel_for(0, y.numel(), cpu::kGrain, [&](int64_t s, int64_t e) {
      switch (a) {
        case Act::Relu: for (int64_t i = s; i < e; ++i) pg[i] = py[i] > T(0) ? pgy[i] : T(0); break;
        case Act::Sigmoid: for (int64_t i = s; i < e; ++i) pg[i] = pgy[i] * py[i] * (T(1) - py[i]); break;
        case Act::Tanh: for (int64_t i = s; i < e; ++i) pg[i] = pgy[i] * (T(1) - py[i] * py[i]); break;
      }
    });
  });
}

const ActivationKernels table{activation_forward, activation_backward};
const RegisterBackend<ActivationKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
