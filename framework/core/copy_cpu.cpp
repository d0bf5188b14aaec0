#include <cstring>

#include "core/copy.h"
#include "core/cpu_util.h"
#include "core/dispatch.h"

namespace loupe {
namespace {

// Element by element in row-major order: the reference the GPU's kernels are tested against, so
// it stays this simple. Typed by element size (a memcpy call per element ran at 0.5 GB/s) and
// split over the thread pool.
template <class E>
void copy_elements(const Tensor& dst, const Tensor& src) {
  E* d = static_cast<E*>(dst.data_ptr());
  const E* s = static_cast<const E*>(src.data_ptr());
  Shape st[2] = {dst.strides(), src.strides()};
  parallel_for(0, dst.numel(), cpu::kGrain, [&](int64_t b, int64_t e) {
    cpu::strided_loop<2>(dst.shape(), st, b, e, [&](int64_t, int64_t od, int64_t os, int64_t) { d[od] = s[os]; });
  });
}

void copy_strided(const ExecContext&, const Tensor& dst, const Tensor& src) {
  switch (dst.element_size()) {  // the copy moves bits: the element size is all that matters
    case 1: copy_elements<uint8_t>(dst, src); break;
    case 2: copy_elements<uint16_t>(dst, src); break;
    case 4: copy_elements<uint32_t>(dst, src); break;
    default: copy_elements<uint64_t>(dst, src); break;
  }
}

// Element conversion through float/double, with fp16/bf16 as bit patterns.
double load(DType t, const void* p, int64_t i) {
  switch (t) {
    case DType::f32: return static_cast<const float*>(p)[i];
    case DType::f64: return static_cast<const double*>(p)[i];
    case DType::f16: return half_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::bf16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::i32: return static_cast<const int32_t*>(p)[i];
    case DType::u8: return static_cast<const uint8_t*>(p)[i];
  }
  return 0;
}
void store(DType t, void* p, int64_t i, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = float(v); break;
    case DType::f64: static_cast<double*>(p)[i] = v; break;
    case DType::f16: static_cast<uint16_t*>(p)[i] = float_to_half(float(v)); break;
    case DType::bf16: static_cast<uint16_t*>(p)[i] = float_to_bf16(float(v)); break;
    case DType::i32: static_cast<int32_t*>(p)[i] = int32_t(v); break;
    case DType::u8: static_cast<uint8_t*>(p)[i] = uint8_t(v); break;
  }
}

void cast(const ExecContext&, const Tensor& dst, const Tensor& src) {
  DType dt = dst.dtype(), stp = src.dtype();
  void* d = dst.data_ptr();
  const void* s = src.data_ptr();
  parallel_for(0, dst.numel(), cpu::kGrain, [&](int64_t b, int64_t e) {
    if (dt == DType::f32 && stp == DType::f64) {
      for (int64_t i = b; i < e; ++i) static_cast<float*>(d)[i] = float(static_cast<const double*>(s)[i]);
    } else {
      for (int64_t i = b; i < e; ++i) store(dt, d, i, load(stp, s, i));
    }
  });
}

void fill(const ExecContext&, const Tensor& dst, double v) {
  void* d = dst.data_ptr();
  DType t = dst.dtype();
  if (t == DType::f32) {
    float f = float(v);
    float* p = static_cast<float*>(d);
    for (int64_t i = 0; i < dst.numel(); ++i) p[i] = f;
    return;
  }
  for (int64_t i = 0; i < dst.numel(); ++i) store(t, d, i, v);
}

void add_into(const ExecContext&, const Tensor& dst, const Tensor& a, const Tensor& b) {
  DType t = dst.dtype(), tb = b.dtype();
  void* d = dst.data_ptr();
  const void *x = a.data_ptr(), *y = b.data_ptr();
  parallel_for(0, dst.numel(), cpu::kGrain, [&](int64_t lo, int64_t hi) {
    if (t == DType::f32 && tb == DType::f32) {
      for (int64_t i = lo; i < hi; ++i)
        static_cast<float*>(d)[i] = static_cast<const float*>(x)[i] + static_cast<const float*>(y)[i];
    } else if (t == DType::f64) {
      for (int64_t i = lo; i < hi; ++i) static_cast<double*>(d)[i] = load(t, x, i) + load(tb, y, i);
    } else {  // float32 or 16-bit dst: in float32, rounded once
      for (int64_t i = lo; i < hi; ++i) store(t, d, i, double(float(load(t, x, i)) + float(load(tb, y, i))));
    }
  });
}

void add_many(const ExecContext& ctx, const std::vector<std::pair<Tensor, Tensor>>& pairs, bool write) {
  for (const auto& [dst, src] : pairs) write ? cast(ctx, dst, src) : add_into(ctx, dst, dst, src);
}

const CopyKernels table{copy_strided, cast, fill, add_into, add_many};
const RegisterBackend<CopyKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
