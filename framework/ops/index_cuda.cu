#include <type_traits>

#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/index.h"

namespace loupe {
namespace {

// Every element passes through float on its way from S to D (as before for the integer types;
// float16/bfloat16 load and store through cuda::to_float / cuda::from_float).
__device__ __forceinline__ float load_float(uint8_t v) { return float(v); }
__device__ __forceinline__ float load_float(int32_t v) { return float(v); }
template <class S>
__device__ __forceinline__ float load_float(S v) { return cuda::to_float(v); }

template <class D>
__device__ __forceinline__ D store_as(float v) { return cuda::from_float<D>(v); }
template <>
__device__ __forceinline__ int32_t store_as<int32_t>(float v) { return int32_t(v); }

// channels > 0: each row [channels, plane] stored transposed, element (c, p) at p * channels + c.
template <class S, class D>
__global__ void gather_kernel(D* out, const S* src, const int32_t* idx, int64_t n, int64_t row, float scale,
                              int64_t channels) {
  const int64_t plane = channels > 0 ? row / channels : 0;
  LOUPE_KERNEL_LOOP(k, n * row) {
    int64_t i = k / row, j = k % row;
    const D v = store_as<D>(load_float(src[int64_t(idx[i]) * row + j]) * scale);
    out[channels > 0 ? i * row + (j % plane) * channels + j / plane : k] = v;
  }
}

template <class S, class D>
void launch_gather(const Tensor& out, const Tensor& src, const Tensor& idx, int64_t n, int64_t row, double scale,
                   int64_t channels, cudaStream_t stream) {
  cuda::launch(gather_kernel<S, D>, cuda::blocks_for(n * row), cuda::kThreads, 0, stream, out.data<D>(), src.data<S>(),
               idx.data<int32_t>(), n, row, float(scale), channels);
  LOUPE_CUDA_LAUNCH_CHECK();
}

// Into float32, float16 or bfloat16 from any source type; into int32 from the integer ones.
template <class S>
bool launch_from(const Tensor& out, const Tensor& src, const Tensor& idx, int64_t n, int64_t row, double scale,
                 int64_t channels, cudaStream_t stream) {
  switch (out.dtype()) {
    case DType::f32: launch_gather<S, float>(out, src, idx, n, row, scale, channels, stream); return true;
    case DType::f16: launch_gather<S, __half>(out, src, idx, n, row, scale, channels, stream); return true;
    case DType::bf16: launch_gather<S, __nv_bfloat16>(out, src, idx, n, row, scale, channels, stream); return true;
    case DType::i32:
      if constexpr (std::is_integral_v<S>) {
        launch_gather<S, int32_t>(out, src, idx, n, row, scale, channels, stream);  // labels, token ids
        return true;
      } else {
        return false;
      }
    default: return false;
  }
}

void gather(const ExecContext& ctx, const Tensor& out, const Tensor& src, const Tensor& idx, int64_t n, int64_t row,
            double scale, int64_t channels) {
  const cudaStream_t s = cuda::stream(ctx);
  DType from = src.dtype(), to = out.dtype();
  bool ok = false;
  switch (from) {
    case DType::u8: ok = launch_from<uint8_t>(out, src, idx, n, row, scale, channels, s); break;
    case DType::i32: ok = launch_from<int32_t>(out, src, idx, n, row, scale, channels, s); break;
    case DType::f32: ok = launch_from<float>(out, src, idx, n, row, scale, channels, s); break;
    case DType::f16: ok = launch_from<__half>(out, src, idx, n, row, scale, channels, s); break;
    case DType::bf16: ok = launch_from<__nv_bfloat16>(out, src, idx, n, row, scale, channels, s); break;
    default: break;
  }
  if (!ok) LOUPE_FAIL("index_select on CUDA: ", dtype_name(from), " -> ", dtype_name(to), " is not supported");
}

const IndexKernels table{gather};
const RegisterBackend<IndexKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
