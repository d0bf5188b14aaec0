#include <algorithm>
#include <atomic>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <type_traits>
#include <vector>

#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "ops/embedding.h"

namespace loupe {
namespace {

// "[1, 2]": where flat element i sits in a tensor of shape s.
std::string position_str(int64_t i, const Shape& s) {
  std::vector<int64_t> idx(static_cast<size_t>(s.size()));
  for (int d = s.size() - 1; d >= 0; --d) {
    idx[size_t(d)] = s[d] ? i % s[d] : 0;
    i = s[d] ? i / s[d] : 0;
  }
  std::ostringstream o;
  o << "[";
  for (size_t d = 0; d < idx.size(); ++d) o << (d ? ", " : "") << idx[d];
  o << "]";
  return o.str();
}

// The row each id selects; throws on the first id that is not an integer in [0, V).
template <class I>
std::vector<int64_t> rows_of(const I* ids, const Shape& shape, int64_t V) {
  int64_t n = shape.numel();
  std::vector<int64_t> rows(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    I v = ids[i];
    bool ok = v >= I(0) && v < I(V);  // false for NaN too
    if constexpr (std::is_floating_point_v<I>) ok = ok && std::floor(v) == v;
    if (!ok) {
      std::ostringstream val;
      val << std::setprecision(10) << v;
      LOUPE_FAIL("embedding: id ", val.str(), " at position ", position_str(i, shape), " of ids ", shape.str(),
                 " is not an integer in [0, ", V, ")", V ? "" : " (the embedding table has no rows)");
    }
    rows[size_t(i)] = int64_t(v);
  }
  return rows;
}

std::vector<int64_t> checked_rows(const Tensor& ids, int64_t V) {
  switch (ids.dtype()) {
    case DType::i32: return rows_of(ids.data<int32_t>(), ids.shape(), V);
    case DType::f32: return rows_of(ids.data<float>(), ids.shape(), V);
    case DType::f64: return rows_of(ids.data<double>(), ids.shape(), V);
    default: LOUPE_FAIL("embedding: ids of type ", dtype_name(ids.dtype()), " are not supported");
  }
}

void embedding_forward(const ExecContext&, const Tensor& out, const Tensor& ids, const Tensor& weight, int64_t n, int64_t E) {
  std::vector<int64_t> rows = checked_rows(ids, weight.size(0));
  cpu::dispatch_floating(weight.dtype(), "embedding", [&](auto tag) {
    using T = decltype(tag);
    const T* w = weight.data<T>();
    T* o = out.data<T>();
    parallel_for(0, n, cpu::kGrain / (E + 1) + 1, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) std::copy_n(w + rows[size_t(i)] * E, E, o + i * E);
    });
  });
}

void embedding_backward(const ExecContext&, const Tensor& gw, const Tensor& ids, const Tensor& gy,
                        const EmbeddingGradRows& rows_of_gy, int64_t n, int64_t E, bool accumulate, float* found_inf) {
  int64_t V = gw.size(0);
  std::vector<int64_t> rows = checked_rows(ids, V);
  // Positions grouped by row, in position order (a stable counting sort): each row of gw then
  // sums its gradient rows in one fixed order, whatever the number of threads.
  std::vector<int64_t> start(static_cast<size_t>(V) + 1, 0), order(static_cast<size_t>(n));
  for (int64_t r : rows) ++start[size_t(r) + 1];
  for (int64_t v = 0; v < V; ++v) start[size_t(v) + 1] += start[size_t(v)];
  std::vector<int64_t> next(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i) order[size_t(next[size_t(rows[size_t(i)])]++)] = i;
  const bool check = accumulate && found_inf;
  std::atomic<bool> bad{false};
  cpu::dispatch_floating(gw.dtype(), "embedding backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = gy.data<T>();
    T* w = gw.data<T>();
    int64_t per_row = (n / std::max<int64_t>(V, 1) + 1) * E;  // elements touched per row, on average
    parallel_for(0, V, cpu::kGrain / (per_row + 1) + 1, [&](int64_t s, int64_t e) {
      std::vector<T> sum(static_cast<size_t>(accumulate ? E : 0));
      for (int64_t v = s; v < e; ++v) {
        if (accumulate && start[size_t(v)] == start[size_t(v) + 1]) continue;  // no id selects v
        // The row's sum first, then added to the gradient already there (as the dense path's
        // accumulation into .grad would add it).
        T* dst = accumulate ? sum.data() : w + v * E;
        std::fill_n(dst, E, T(0));
        for (int64_t k = start[size_t(v)]; k < start[size_t(v) + 1]; ++k) {
          const T* src = g + rows_of_gy.offset(order[size_t(k)]);
          for (int64_t j = 0; j < E; ++j) dst[j] += src[j];
        }
        if (accumulate)
          for (int64_t j = 0; j < E; ++j) w[v * E + j] += sum[size_t(j)];
        if (check) {  // the values written: an inf in gy or an overflow of the sum
          bool local = false;
          for (int64_t j = 0; j < E; ++j) local |= !std::isfinite(w[v * E + j]);
          if (local) bad = true;
        }
      }
    });
  });
  if (bad) *found_inf = 1.f;
}

void one_hot(const ExecContext&, const Tensor& out, const Tensor& ids, int64_t n, int64_t C) {
  std::vector<int64_t> rows = checked_rows(ids, C);
  cpu::dispatch_floating(out.dtype(), "one_hot", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    parallel_for(0, n, cpu::kGrain / (C + 1) + 1, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) {
        std::fill_n(o + i * C, C, T(0));
        o[i * C + rows[size_t(i)]] = T(1);
      }
    });
  });
}

const EmbeddingKernels table{embedding_forward, embedding_backward, one_hot};
const RegisterBackend<EmbeddingKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
