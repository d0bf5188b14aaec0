#include <cmath>

#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "ops/softmax.h"

namespace loupe {
namespace {

void softmax_forward(const ExecContext&, bool log, const Tensor& y, const Tensor& x, int64_t rows, int64_t cols) {
  cpu::dispatch_floating(x.dtype(), "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    parallel_for(0, rows, cpu::kGrain / (cols + 1) + 1, [&](int64_t s, int64_t e) {
      for (int64_t r = s; r < e; ++r) {
        const T* xr = px + r * cols;
        T* yr = py + r * cols;
        T m = xr[0];
        for (int64_t c = 1; c < cols; ++c) m = std::max(m, xr[c]);
        T z = 0;
        for (int64_t c = 0; c < cols; ++c) z += std::exp(xr[c] - m);
        if (log) {
          T lz = std::log(z) + m;
          for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] - lz;
        } else {
          for (int64_t c = 0; c < cols; ++c) yr[c] = std::exp(xr[c] - m) / z;
        }
      }
    });
  });
}

void softmax_backward(const ExecContext&, bool log, const Tensor& gx, const Tensor& y, const Tensor& gy, int64_t rows,
                      int64_t cols) {
  cpu::dispatch_floating(y.dtype(), "softmax backward", [&](auto tag) {
    using T = decltype(tag);
    const T* py = y.data<T>();
    const T* pgy = gy.data<T>();
    T* pgx = gx.data<T>();
    parallel_for(0, rows, cpu::kGrain / (cols + 1) + 1, [&](int64_t s, int64_t e) {
      for (int64_t r = s; r < e; ++r) {
        const T* yr = py + r * cols;
        const T* gr = pgy + r * cols;
        T* out = pgx + r * cols;
        T dot = 0;
        if (log) {
          for (int64_t c = 0; c < cols; ++c) dot += gr[c];
          for (int64_t c = 0; c < cols; ++c) out[c] = gr[c] - std::exp(yr[c]) * dot;
        } else {
          for (int64_t c = 0; c < cols; ++c) dot += gr[c] * yr[c];
          for (int64_t c = 0; c < cols; ++c) out[c] = yr[c] * (gr[c] - dot);
        }
      }
    });
  });
}

const SoftmaxKernels table{softmax_forward, softmax_backward};
const RegisterBackend<SoftmaxKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
