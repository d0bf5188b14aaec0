#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/elementwise.h"

namespace loupe {
namespace {

__device__ __forceinline__ float op_apply(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    default: return a / b;
  }
}

// T: float, __half or __nv_bfloat16 (stored in T, computed in float; the identity for float).
template <class T>
__global__ void binary_contig(BinaryOp op, T* o, const T* a, const T* b, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) o[i] = cuda::from_float<T>(op_apply(op, cuda::to_float(a[i]), cuda::to_float(b[i])));
}

template <class T>
__global__ void binary_bcast(BinaryOp op, T* o, const T* a, const T* b, int64_t n, cuda::StridedPair g) {
  LOUPE_KERNEL_LOOP(i, n) {
    int64_t oa, ob;
    g.offsets(i, oa, ob);
    o[i] = cuda::from_float<T>(op_apply(op, cuda::to_float(a[oa]), cuda::to_float(b[ob])));
  }
}

void binary(const ExecContext& ctx, BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  cuda::require_float(out, "elementwise arithmetic");
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = out.numel();
  cuda::dispatch_float(out.dtype(), "elementwise arithmetic", [&](auto tag) {
    using T = decltype(tag);
    if (a.is_contiguous() && b.is_contiguous()) {
      cuda::launch(binary_contig<T>, cuda::blocks_for(n), cuda::kThreads, 0, s, op, out.data<T>(), a.data<T>(),
                   b.data<T>(), n);
    } else {
      cuda::StridedPair g(out.shape(), a.strides(), b.strides());
      cuda::launch(binary_bcast<T>, cuda::blocks_for(n), cuda::kThreads, 0, s, op, out.data<T>(), a.data<T>(),
                   b.data<T>(), n, g);
    }
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

template <class T>
__global__ void affine_kernel(T* o, const T* a, float m, float c, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) o[i] = cuda::from_float<T>(cuda::to_float(a[i]) * m + c);
}

void affine(const ExecContext& ctx, const Tensor& out, const Tensor& a, double m, double c) {
  cuda::require_float(out, "scalar arithmetic");
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = out.numel();
  cuda::dispatch_float(out.dtype(), "scalar arithmetic", [&](auto tag) {
    using T = decltype(tag);
    cuda::launch(affine_kernel<T>, cuda::blocks_for(n), cuda::kThreads, 0, s, out.data<T>(), a.data<T>(), float(m),
                 float(c), n);
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

__global__ void axpy_kernel(float* y, float alpha, const float* x, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) y[i] += alpha * x[i];
}

// y in Y, x in X: both the same low-precision type, or a float32 y taking a float16/bfloat16 x
// (half gradients added into float32 parameter gradients).
template <class Y, class X>
__global__ void axpy_kernel_t(Y* y, float alpha, const X* x, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) y[i] = cuda::from_float<Y>(cuda::to_float(y[i]) + alpha * cuda::to_float(x[i]));
}

template <class Y, class X>
void launch_axpy(const Tensor& y, float alpha, const Tensor& x, int64_t n, cudaStream_t stream) {
  cuda::launch(axpy_kernel_t<Y, X>, cuda::blocks_for(n), cuda::kThreads, 0, stream, y.data<Y>(), alpha, x.data<X>(), n);
}

void axpy(const ExecContext& ctx, const Tensor& y, double alpha, const Tensor& x) {
  cuda::require_float(y, "add_");
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = y.numel();
  DType dy = y.dtype(), dx = x.dtype();
  if (dy == DType::f32 && dx == DType::f32)
    cuda::launch(axpy_kernel, cuda::blocks_for(n), cuda::kThreads, 0, s, y.data<float>(), float(alpha), x.data<float>(),
                 n);
  else if (dy == DType::f32 && dx == DType::f16) launch_axpy<float, __half>(y, float(alpha), x, n, s);
  else if (dy == DType::f32 && dx == DType::bf16) launch_axpy<float, __nv_bfloat16>(y, float(alpha), x, n, s);
  else if (dy == DType::f16 && dx == DType::f16) launch_axpy<__half, __half>(y, float(alpha), x, n, s);
  else if (dy == DType::bf16 && dx == DType::bf16) launch_axpy<__nv_bfloat16, __nv_bfloat16>(y, float(alpha), x, n, s);
  else LOUPE_FAIL("add_ on CUDA cannot add ", dtype_name(dx), " into ", dtype_name(dy));
  LOUPE_CUDA_LAUNCH_CHECK();
}

template <class T>
__global__ void bias_add_kernel(T* o, const T* x, const T* b, int64_t n, int64_t C, int64_t inner) {
  LOUPE_KERNEL_LOOP(i, n) o[i] = cuda::from_float<T>(cuda::to_float(x[i]) + cuda::to_float(b[(i / inner) % C]));
}

// n < 2^31: 32-bit division is several times cheaper than 64-bit.
template <class T>
__global__ void bias_add_kernel32(T* o, const T* x, const T* b, uint32_t n, uint32_t C, uint32_t inner) {
  LOUPE_KERNEL_LOOP(i, n) {
    o[i] = cuda::from_float<T>(cuda::to_float(x[i]) + cuda::to_float(b[(uint32_t(i) / inner) % C]));
  }
}

// inner == 1 (channels-last, or a Linear's [N, C]) with C % 4 == 0: one float4 of x takes the
// float4 of four consecutive channels.
__global__ void bias_add_rows4(float4* o, const float4* x, const float4* b, uint32_t n4, uint32_t C4) {
  LOUPE_KERNEL_LOOP(i, n4) {
    float4 v = x[i], bv = b[uint32_t(i) % C4];
    o[i] = make_float4(v.x + bv.x, v.y + bv.y, v.z + bv.z, v.w + bv.w);
  }
}

// inner % 4 == 0 and n < 2^31: four elements share a channel, and 32-bit division is cheap.
__global__ void bias_add_kernel4(float4* o, const float4* x, const float* b, uint32_t n4, uint32_t C,
                                 uint32_t inner) {
  LOUPE_KERNEL_LOOP(i, n4) {
    float bv = b[(uint32_t(i) * 4 / inner) % C];
    float4 v = x[i];
    o[i] = make_float4(v.x + bv, v.y + bv, v.z + bv, v.w + bv);
  }
}

// float16 / bfloat16 (b in x's type): one element per thread.
template <class T>
void bias_add_t(const Tensor& out, const Tensor& x, const Tensor& b, int64_t n, int64_t C, int64_t inner,
                cudaStream_t stream) {
  if (n < (int64_t(1) << 31))
    cuda::launch(bias_add_kernel32<T>, cuda::blocks_for(n), cuda::kThreads, 0, stream, out.data<T>(), x.data<T>(),
                 b.data<T>(), uint32_t(n), uint32_t(C), uint32_t(inner));
  else
    cuda::launch(bias_add_kernel<T>, cuda::blocks_for(n), cuda::kThreads, 0, stream, out.data<T>(), x.data<T>(),
                 b.data<T>(), n, C, inner);
  LOUPE_CUDA_LAUNCH_CHECK();
}

void bias_add(const ExecContext& ctx, const Tensor& out, const Tensor& x, const Tensor& b, int64_t outer, int64_t C,
              int64_t inner) {
  cuda::require_float(out, "bias_add");
  LOUPE_CHECK(b.dtype() == out.dtype(), "bias_add on CUDA: bias ", dtype_name(b.dtype()), " and input ",
              dtype_name(out.dtype()), " differ");
  const cudaStream_t s = cuda::stream(ctx);
  int64_t n = outer * C * inner;
  if (out.dtype() == DType::f16) return bias_add_t<__half>(out, x, b, n, C, inner, s);
  if (out.dtype() == DType::bf16) return bias_add_t<__nv_bfloat16>(out, x, b, n, C, inner, s);
  if (inner == 1 && C % 4 == 0 && n < (int64_t(1) << 31) &&
      cuda::vec4_ok(n, {out.data_ptr(), x.data_ptr(), b.data_ptr()})) {
    cuda::launch(bias_add_rows4, cuda::blocks_for(n / 4), cuda::kThreads, 0, s, static_cast<float4*>(out.data_ptr()),
                 static_cast<const float4*>(x.data_ptr()), static_cast<const float4*>(b.data_ptr()), uint32_t(n / 4),
                 uint32_t(C / 4));
    LOUPE_CUDA_LAUNCH_CHECK();
    return;
  }
  if (inner % 4 == 0 && n < (int64_t(1) << 31) && cuda::vec4_ok(n, {out.data_ptr(), x.data_ptr()})) {
    cuda::launch(bias_add_kernel4, cuda::blocks_for(n / 4), cuda::kThreads, 0, s, static_cast<float4*>(out.data_ptr()),
                 static_cast<const float4*>(x.data_ptr()), b.data<float>(), uint32_t(n / 4), uint32_t(C),
                 uint32_t(inner));
    LOUPE_CUDA_LAUNCH_CHECK();
    return;
  }
  if (n < (int64_t(1) << 31)) {
    cuda::launch(bias_add_kernel32<float>, cuda::blocks_for(n), cuda::kThreads, 0, s, out.data<float>(),
                 x.data<float>(), b.data<float>(), uint32_t(n), uint32_t(C), uint32_t(inner));
    LOUPE_CUDA_LAUNCH_CHECK();
    return;
  }
  cuda::launch(bias_add_kernel<float>, cuda::blocks_for(n), cuda::kThreads, 0, s, out.data<float>(), x.data<float>(),
               b.data<float>(), n, C, inner);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const ElementwiseKernels table{binary, affine, axpy, bias_add};
const RegisterBackend<ElementwiseKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
