#include <cmath>

#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "ops/loss.h"

namespace loupe {
namespace {

template <class T>
T row_logsumexp(const T* x, int64_t C) {
  T m = x[0];
  for (int64_t c = 1; c < C; ++c) m = std::max(m, x[c]);
  T z = 0;
  for (int64_t c = 0; c < C; ++c) z += std::exp(x[c] - m);
  return std::log(z) + m;
}

void check_label(int32_t y, int64_t C, int64_t row) {
  LOUPE_CHECK(y >= 0 && y < C, "label ", y, " in row ", row, " is outside [0, ", C, ")");
}

void ce_forward(const ExecContext&, const Tensor& loss, const Tensor& logits, const Tensor& labels, int64_t N,
                int64_t C) {
  cpu::dispatch_floating(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const int32_t* y = labels.data<int32_t>();
    double acc = 0;
    for (int64_t r = 0; r < N; ++r) {
      check_label(y[r], C, r);
      acc += double(row_logsumexp(x + r * C, C) - x[r * C + y[r]]);
    }
    *loss.data<T>() = T(N ? acc / double(N) : 0.0);
  });
}

void ce_backward(const ExecContext&, const Tensor& gx, const Tensor& logits, const Tensor& labels, const Tensor& gloss,
                 int64_t N, int64_t C) {
  cpu::dispatch_floating(logits.dtype(), "cross_entropy backward", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const int32_t* y = labels.data<int32_t>();
    T* g = gx.data<T>();
    T scale = *gloss.data<T>() / T(N);
    for (int64_t r = 0; r < N; ++r) {
      T lse = row_logsumexp(x + r * C, C);
      for (int64_t c = 0; c < C; ++c) g[r * C + c] = (std::exp(x[r * C + c] - lse) - (c == y[r] ? T(1) : T(0))) * scale;
    }
  });
}

void bce_forward(const ExecContext&, const Tensor& loss, const Tensor& logits, const Tensor& targets, int64_t n) {
  cpu::dispatch_floating(logits.dtype(), "binary_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const T* t = targets.data<T>();
    double acc = 0;
    for (int64_t i = 0; i < n; ++i)  // log(1 + e^-|x|) form: no overflow for large |x|
      acc += double(std::max(x[i], T(0)) - x[i] * t[i] + std::log1p(std::exp(-std::abs(x[i]))));
    *loss.data<T>() = T(n ? acc / double(n) : 0.0);
  });
}

void bce_backward(const ExecContext&, const Tensor& gx, const Tensor& logits, const Tensor& targets,
                  const Tensor& gloss, int64_t n) {
  cpu::dispatch_floating(logits.dtype(), "binary_cross_entropy_with_logits backward", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const T* t = targets.data<T>();
    T* g = gx.data<T>();
    T scale = *gloss.data<T>() / T(n);
    for (int64_t i = 0; i < n; ++i) g[i] = (T(1) / (T(1) + std::exp(-x[i])) - t[i]) * scale;
  });
}

void count_correct(const ExecContext&, const Tensor& out, const Tensor& logits, const Tensor& labels, int64_t N,
                   int64_t C, bool accumulate) {
  cpu::dispatch_floating(logits.dtype(), "count_correct", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    int64_t correct = 0;
    for (int64_t r = 0; r < N; ++r) {
      if (C == 1) {
        correct += (x[r] > T(0)) == (labels.data<T>()[r] > T(0.5));
      } else {
        int64_t best = 0;
        for (int64_t c = 1; c < C; ++c)
          if (x[r * C + c] > x[r * C + best]) best = c;
        correct += best == labels.data<int32_t>()[r];
      }
    }
    float* o = out.data<float>();
    *o = accumulate ? *o + float(correct) : float(correct);
  });
}

const LossKernels table{ce_forward, ce_backward, bce_forward, bce_backward, count_correct};
const RegisterBackend<LossKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
