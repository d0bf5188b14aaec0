#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "core/philox.h"
#include "ops/bias_act.h"

namespace loupe {
namespace {

template <class T>
T act_fwd(int act, T v) {
  switch (act) {
    case int(Act::Relu): return v > T(0) ? v : T(0);
    case int(Act::Sigmoid): return T(1) / (T(1) + std::exp(-v));
    case int(Act::Tanh): return std::tanh(v);
    default: return v;
  }
}

// From the activation's output y.
template <class T>
T act_bwd(int act, T y, T g) {
  switch (act) {
    case int(Act::Relu): return y > T(0) ? g : T(0);
    case int(Act::Sigmoid): return g * y * (T(1) - y);
    case int(Act::Tanh): return g * (T(1) - y * y);
    default: return g;
  }
}

// Whether dropout keeps element i (the mask dropout() draws).
inline bool keeps(const BiasActArgs& a, int64_t i) {
  return philox_uniform(a.rng.seed, a.rng.offset, uint64_t(i)) >= a.p;
}

inline int64_t channel(const BiasActArgs& a, int64_t i) { return a.inner == 1 ? i % a.C : (i / a.inner) % a.C; }

void forward(const Tensor& y, const Tensor& x, const Tensor& b, const BiasActArgs& a) {
  LOUPE_CHECK(!a.rng.base, "bias_act on the CPU: a draw relative to a device word (CUDA graphs are GPU-only)");
  cpu::dispatch_floating(x.dtype(), "bias_act", [&](auto tag) {
    using T = decltype(tag);
    T* py = y.data<T>();
    const T* px = x.data<T>();
    const T* pb = b.defined() ? b.data<T>() : nullptr;
    const T scale = T(1) / (T(1) - T(a.p));
    parallel_for(0, x.numel(), cpu::kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        T v = act_fwd(a.act, pb ? px[i] + pb[channel(a, i)] : px[i]);
        py[i] = a.dropout ? (keeps(a, i) ? v * scale : T(0)) : v;
      }
    });
  });
}

void backward(const Tensor& gx, const Tensor& gb, const Tensor& y, const Tensor& gy, const BiasActArgs& a) {
  LOUPE_CHECK(!a.rng.base, "bias_act on the CPU: a draw relative to a device word (CUDA graphs are GPU-only)");
  cpu::dispatch_floating(y.dtype(), "bias_act backward", [&](auto tag) {
    using T = decltype(tag);
    T* pgx = gx.data<T>();
    const T* py = y.data<T>();
    const T* pgy = gy.data<T>();
    const T scale = T(1) / (T(1) - T(a.p));
    parallel_for(0, y.numel(), cpu::kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        if (a.dropout)  // relu or none: the kept output is positive exactly where relu passed
          pgx[i] = keeps(a, i) && (a.act < 0 || py[i] > T(0)) ? pgy[i] * scale : T(0);
        else
          pgx[i] = act_bwd(a.act, py[i], pgy[i]);
      }
    });
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

const BiasActKernels table{forward, backward};
const RegisterBackend<BiasActKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
