// Helpers shared by the CPU kernels: dtype dispatch and strided iteration.
#pragma once
#include <cstdint>

#include "core/error.h"
#include "core/tensor.h"
#include "core/thread_pool.h"

namespace loupe::cpu {

// Calls f(T{}) with T = float or double for the tensor's dtype.
template <class F>
void dispatch_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    default: LOUPE_FAIL(op, " on the CPU supports float32 and float64, not ", dtype_name(t));
  }
}

// What the CPU runs beyond the x86-64-v2 baseline the library is built for: the kernels compiled
// for wider vectors (ops/backend/gemm_builtin.cpp, ops/lstm/lstm_gates_cpu.cpp) are chosen by these.
inline bool has_avx2_fma() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
inline bool has_avx512() {
  return has_avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}

// Elements below this count run on the calling thread (threads cost more than they save).
constexpr int64_t kGrain = 32768;

// Visits the n-th element of up to three same-shaped strided views in row-major order; calls
// f(i, off0, off1, off2) with element offsets, over [begin, end).
template <int K, class F>
void strided_loop(const Shape& shape, const Shape* strides, int64_t begin, int64_t end, F&& f) {
  int nd = shape.size();
  int64_t idx[kMaxDims] = {0};
  int64_t off[3] = {0, 0, 0};
  int64_t rem = begin;
  for (int d = nd - 1; d >= 0; --d) {
    idx[d] = shape[d] ? rem % shape[d] : 0;
    rem = shape[d] ? rem / shape[d] : 0;
    for (int k = 0; k < K; ++k) off[k] += idx[d] * strides[k][d];
  }
  for (int64_t i = begin; i < end; ++i) {
    f(i, off[0], off[1], off[2]);
    for (int d = nd - 1; d >= 0; --d) {  // increment the multi-index with carries
      ++idx[d];
      for (int k = 0; k < K; ++k) off[k] += strides[k][d];
      if (idx[d] < shape[d]) break;
      for (int k = 0; k < K; ++k) off[k] -= idx[d] * strides[k][d];
      idx[d] = 0;
    }
  }
}

}  // namespace loupe::cpu
