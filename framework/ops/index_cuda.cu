#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/index.h"

namespace loupe {
namespace {

template <class S, class D>
__global__ void gather_kernel(D* out, const S* src, const int32_t* idx, int64_t n, int64_t row, float scale) {
  LOUPE_KERNEL_LOOP(k, n * row) {
    int64_t i = k / row, j = k % row;
    out[k] = D(float(src[int64_t(idx[i]) * row + j]) * scale);
  }
}

template <class S, class D>
void launch(const Tensor& out, const Tensor& src, const Tensor& idx, int64_t n, int64_t row, double scale) {
  gather_kernel<S, D><<<cuda::blocks_for(n * row), cuda::kThreads, 0, cuda::stream()>>>(
      out.data<D>(), src.data<S>(), idx.data<int32_t>(), n, row, float(scale));
  LOUPE_CUDA_LAUNCH_CHECK();
}

void gather(const Tensor& out, const Tensor& src, const Tensor& idx, int64_t n, int64_t row, double scale) {
  DType s = src.dtype(), d = out.dtype();
  if (s == DType::u8 && d == DType::f32) launch<uint8_t, float>(out, src, idx, n, row, scale);
  else if (s == DType::u8 && d == DType::i32) launch<uint8_t, int32_t>(out, src, idx, n, row, scale);
  else if (s == DType::i32 && d == DType::i32) launch<int32_t, int32_t>(out, src, idx, n, row, scale);
  else if (s == DType::i32 && d == DType::f32) launch<int32_t, float>(out, src, idx, n, row, scale);  // token ids
  else if (s == DType::f32 && d == DType::f32) launch<float, float>(out, src, idx, n, row, scale);
  else LOUPE_FAIL("index_select on CUDA: ", dtype_name(s), " -> ", dtype_name(d), " is not supported");
}

const IndexKernels table{gather};
const RegisterBackend<IndexKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
