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

__global__ void binary_contig(BinaryOp op, float* o, const float* a, const float* b, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) o[i] = op_apply(op, a[i], b[i]);
}

__global__ void binary_bcast(BinaryOp op, float* o, const float* a, const float* b, int64_t n, cuda::StridedPair g) {
  LOUPE_KERNEL_LOOP(i, n) {
    int64_t oa, ob;
    g.offsets(i, oa, ob);
    o[i] = op_apply(op, a[oa], b[ob]);
  }
}

void binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
  cuda::require_f32(out, "elementwise arithmetic");
  int64_t n = out.numel();
  if (a.is_contiguous() && b.is_contiguous()) {
    binary_contig<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(op, out.data<float>(), a.data<float>(),
                                                                              b.data<float>(), n);
  } else {
    cuda::StridedPair g(out.shape(), a.strides(), b.strides());
    binary_bcast<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(op, out.data<float>(), a.data<float>(),
                                                                             b.data<float>(), n, g);
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

__global__ void affine_kernel(float* o, const float* a, float m, float c, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) o[i] = a[i] * m + c;
}

void affine(const Tensor& out, const Tensor& a, double m, double c) {
  cuda::require_f32(out, "scalar arithmetic");
  int64_t n = out.numel();
  affine_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(out.data<float>(), a.data<float>(),
                                                                           float(m), float(c), n);
  LOUPE_CUDA_LAUNCH_CHECK();
}

__global__ void axpy_kernel(float* y, float alpha, const float* x, int64_t n) {
  LOUPE_KERNEL_LOOP(i, n) y[i] += alpha * x[i];
}

void axpy(const Tensor& y, double alpha, const Tensor& x) {
  cuda::require_f32(y, "add_");
  int64_t n = y.numel();
  axpy_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(y.data<float>(), float(alpha),
                                                                         x.data<float>(), n);
  LOUPE_CUDA_LAUNCH_CHECK();
}

__global__ void bias_add_kernel(float* o, const float* x, const float* b, int64_t n, int64_t C, int64_t inner) {
  LOUPE_KERNEL_LOOP(i, n) o[i] = x[i] + b[(i / inner) % C];
}

// n < 2^31: 32-bit division is several times cheaper than 64-bit.
__global__ void bias_add_kernel32(float* o, const float* x, const float* b, uint32_t n, uint32_t C, uint32_t inner) {
  LOUPE_KERNEL_LOOP(i, n) o[i] = x[i] + b[(uint32_t(i) / inner) % C];
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

void bias_add(const Tensor& out, const Tensor& x, const Tensor& b, int64_t outer, int64_t C, int64_t inner) {
  cuda::require_f32(out, "bias_add");
  int64_t n = outer * C * inner;
  if (inner == 1 && C % 4 == 0 && n < (int64_t(1) << 31) &&
      cuda::vec4_ok(n, {out.data_ptr(), x.data_ptr(), b.data_ptr()})) {
    bias_add_rows4<<<cuda::blocks_for(n / 4), cuda::kThreads, 0, cuda::stream()>>>(
        static_cast<float4*>(out.data_ptr()), static_cast<const float4*>(x.data_ptr()),
        static_cast<const float4*>(b.data_ptr()), uint32_t(n / 4), uint32_t(C / 4));
    LOUPE_CUDA_LAUNCH_CHECK();
    return;
  }
  if (inner % 4 == 0 && n < (int64_t(1) << 31) && cuda::vec4_ok(n, {out.data_ptr(), x.data_ptr()})) {
    bias_add_kernel4<<<cuda::blocks_for(n / 4), cuda::kThreads, 0, cuda::stream()>>>(
        static_cast<float4*>(out.data_ptr()), static_cast<const float4*>(x.data_ptr()), b.data<float>(),
        uint32_t(n / 4), uint32_t(C), uint32_t(inner));
    LOUPE_CUDA_LAUNCH_CHECK();
    return;
  }
  if (n < (int64_t(1) << 31)) {
    bias_add_kernel32<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(
        out.data<float>(), x.data<float>(), b.data<float>(), uint32_t(n), uint32_t(C), uint32_t(inner));
    LOUPE_CUDA_LAUNCH_CHECK();
    return;
  }
  bias_add_kernel<<<cuda::blocks_for(n), cuda::kThreads, 0, cuda::stream()>>>(out.data<float>(), x.data<float>(),
                                                                             b.data<float>(), n, C, inner);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const ElementwiseKernels table{binary, affine, axpy, bias_add};
const RegisterBackend<ElementwiseKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
