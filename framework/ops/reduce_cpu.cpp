#include <vector>

#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "ops/reduce.h"

namespace loupe {
namespace {

void sum_dim(const ExecContext&, const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner,
             double scale) {
  cpu::dispatch_floating(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T* px = x.data<T>();
    if (inner == 1) {  // reduce contiguous rows; accumulate in double for accuracy
      parallel_for(0, outer, cpu::kGrain / (n + 1) + 1, [&](int64_t s, int64_t e) {
        for (int64_t r = s; r < e; ++r) {
          double acc = 0;
          for (int64_t j = 0; j < n; ++j) acc += px[r * n + j];
          o[r] = T(acc * scale);
        }
      });
      return;
    }
    parallel_for(0, outer, 1, [&](int64_t s, int64_t e) {
      std::vector<double> acc(static_cast<size_t>(inner));
      for (int64_t r = s; r < e; ++r) {
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < n; ++j) {
          const T* row = px + (r * n + j) * inner;
          for (int64_t i = 0; i < inner; ++i) acc[size_t(i)] += row[i];
        }
        for (int64_t i = 0; i < inner; ++i) o[r * inner + i] = T(acc[size_t(i)] * scale);
      }
    });
  });
}

void sum_keep_middle(const ExecContext&, const Tensor& out, const Tensor& x, int64_t outer, int64_t C, int64_t inner,
                     double scale) {
  cpu::dispatch_floating(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* o = out.data<T>();
    parallel_for(0, C, 1, [&](int64_t s, int64_t e) {
      for (int64_t c = s; c < e; ++c) {
        double acc = 0;
        for (int64_t b = 0; b < outer; ++b) {
          const T* row = px + (b * C + c) * inner;
          for (int64_t k = 0; k < inner; ++k) acc += row[k];
        }
        o[c] = T(acc * scale);
      }
    });
  });
}

void argmax_rows(const ExecContext&, const Tensor& out, const Tensor& x, int64_t rows, int64_t cols) {
  cpu::dispatch_floating(x.dtype(), "argmax", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    int32_t* o = out.data<int32_t>();
    for (int64_t r = 0; r < rows; ++r) {
      int64_t best = 0;
      for (int64_t c = 1; c < cols; ++c)
        if (px[r * cols + c] > px[r * cols + best]) best = c;
      o[r] = int32_t(best);
    }
  });
}

const ReduceKernels table{sum_dim, sum_keep_middle, argmax_rows};
const RegisterBackend<ReduceKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
