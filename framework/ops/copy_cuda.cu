#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/copy.h"

namespace loupe {
namespace {

template <class E>
__global__ void copy_strided_kernel(E* dst, const E* src, int64_t n, cuda::StridedPair a) {
  LOUPE_KERNEL_LOOP(i, n) {
    int64_t od, os;
    a.offsets(i, od, os);
    dst[od] = src[os];
  }
}

void copy_strided(const Tensor& dst, const Tensor& src) {
  cuda::StridedPair a(dst.shape(), dst.strides(), src.strides());
  int64_t n = dst.numel();
  auto s = cuda::stream();
  switch (dst.element_size()) {  // the copy moves bits: the element size is all that matters
    case 1: copy_strided_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(dst.data<uint8_t>(), src.data<uint8_t>(), n, a); break;
    case 2: copy_strided_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(dst.data<uint16_t>(), src.data<uint16_t>(), n, a); break;
    case 4: copy_strided_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(dst.data<uint32_t>(), src.data<uint32_t>(), n, a); break;
    default: copy_strided_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, s>>>(dst.data<uint64_t>(), src.data<uint64_t>(), n, a); break;
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

// Element load/store through float (or double for float64).
template <class T> __device__ double ld(const T* p, int64_t i) { return double(p[i]); }
template <> __device__ double ld(const __half* p, int64_t i) { return double(__half2float(p[i])); }
template <> __device__ double ld(const __nv_bfloat16* p, int64_t i) { return double(__bfloat162float(p[i])); }
template <class T> __device__ void st(T* p, int64_t i, double v) { p[i] = T(v); }
template <> __device__ void st(__half* p, int64_t i, double v) { p[i] = __float2half_rn(float(v)); }
template <> __device__ void st(__nv_bfloat16* p, int64_t i, double v) { p[i] = __float2bfloat16_rn(float(v)); }
template <> __device__ void st(float* p, int64_t i, double v) { p[i] = float(v); }

template <class D, class S>
__global__ void cast_kernel(D* dst, const S* src, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) st(dst, i, ld(src, i));
}

template <class D>
__global__ void fill_kernel(D* dst, double v, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) st(dst, i, v);
}

template <class F>
void with_type(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); break;
    case DType::f64: f(double{}); break;
    case DType::f16: f(__half{}); break;
    case DType::bf16: f(__nv_bfloat16{}); break;
    case DType::i32: f(int32_t{}); break;
    case DType::u8: f(uint8_t{}); break;
  }
}

void cast(const Tensor& dst, const Tensor& src) {
  int64_t n = dst.numel();
  with_type(dst.dtype(), [&](auto d) {
    with_type(src.dtype(), [&](auto s) {
      using D = decltype(d);
      using S = decltype(s);
      cast_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
          static_cast<D*>(dst.data_ptr()), static_cast<const S*>(src.data_ptr()), n);
    });
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

void fill(const Tensor& dst, double v) {
  int64_t n = dst.numel();
  with_type(dst.dtype(), [&](auto d) {
    using D = decltype(d);
    fill_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(static_cast<D*>(dst.data_ptr()), v, n);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

const CopyKernels table{copy_strided, cast, fill};
const RegisterBackend<CopyKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
