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

// Dropout's mask comes from Philox four words at a time (element i is word i % 4 of counter
// offset + i / 4, as dropout() and the GPU draw it): chunks start on a multiple of 4, so each
// counter is computed once, not once per element. A chunk walks its elements' channels
// incrementally (no division per element).
struct Walk {
  int64_t inner, C, k, c;  // position within the inner run and the channel
  Walk(const BiasActArgs& a, int64_t i)
      : inner(std::max<int64_t>(a.inner, 1)), C(std::max<int64_t>(a.C, 1)), k(i % inner), c((i / inner) % C) {}
  void next() {
    if (++k == inner) {
      k = 0;
      if (++c == C) c = 0;
    }
  }
};

// Groups of 4 elements per parallel_for index; with dropout each costs a Philox block, so chunks
// are smaller and every core gets some.
int64_t group_grain(const BiasActArgs& a) { return a.dropout ? 1024 : cpu::kGrain / 4; }

// fn(i, keep) for every element of groups [g0, g1), in order.
template <class F>
void each_element(const BiasActArgs& a, int64_t n, int64_t g0, int64_t g1, F&& fn) {
  const int64_t end = std::min(n, g1 * 4);
  for (int64_t i = g0 * 4; i < end; i += 4) {
    Philox4 r{};
    if (a.dropout) r = philox(a.rng.seed, a.rng.offset + uint64_t(i / 4), 0);
    const int64_t m = std::min<int64_t>(4, end - i);
    for (int64_t j = 0; j < m; ++j) fn(i + j, !a.dropout || uniform01(r.v[j]) >= a.p);
  }
}

void forward(const Tensor& y, const Tensor& x, const Tensor& b, const BiasActArgs& a) {
  LOUPE_CHECK(!a.rng.base, "bias_act on the CPU: a draw relative to a device word (CUDA graphs are GPU-only)");
  cpu::dispatch_floating(x.dtype(), "bias_act", [&](auto tag) {
    using T = decltype(tag);
    T* py = y.data<T>();
    const T* px = x.data<T>();
    const T* pb = b.defined() ? b.data<T>() : nullptr;
    const T scale = a.dropout ? T(1) / (T(1) - T(a.p)) : T(1);
    const int64_t n = x.numel();
    parallel_for(0, (n + 3) / 4, group_grain(a), [&](int64_t g0, int64_t g1) {
      Walk w(a, g0 * 4);
      each_element(a, n, g0, g1, [&](int64_t i, bool keep) {
        T v = act_fwd(a.act, pb ? px[i] + pb[w.c] : px[i]);
        py[i] = keep ? v * scale : T(0);
        w.next();
      });
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
    const T scale = a.dropout ? T(1) / (T(1) - T(a.p)) : T(1);
    const int64_t n = y.numel();
    parallel_for(0, (n + 3) / 4, group_grain(a), [&](int64_t g0, int64_t g1) {
      each_element(a, n, g0, g1, [&](int64_t i, bool keep) {
        if (a.dropout)  // relu or none: the kept output is positive exactly where relu passed
          pgx[i] = keep && (a.act < 0 || py[i] > T(0)) ? pgy[i] * scale : T(0);
        else
          pgx[i] = act_bwd(a.act, py[i], pgy[i]);
      });
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
