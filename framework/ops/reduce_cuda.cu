#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/reduce.h"

namespace loupe {
namespace {

constexpr int kBlock = 256;

// One block per row of length n (inner == 1). Rows can be split across `splits` blocks whose
// partial sums land in `partial` (for one long row such as a full reduction).
__global__ void sum_rows_kernel(float* out, const float* x, int64_t n, float scale, int splits) {
  int64_t row = blockIdx.x / splits;
  int part = blockIdx.x % splits;
  int64_t chunk = (n + splits - 1) / splits;
  int64_t begin = part * chunk, end = min(n, begin + chunk);
  float acc = 0.f;
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) acc += x[row * n + j];
  acc = cuda::block_sum(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = acc * scale;
}

// inner > 1: one thread per output element walks the reduced dimension (coalesced across inner).
__global__ void sum_strided_kernel(float* out, const float* x, int64_t outer, int64_t n, int64_t inner, float scale) {
  LOUPE_KERNEL_LOOP(k, outer * inner) {
    int64_t o = k / inner, i = k % inner;
    const float* p = x + o * n * inner + i;
    float acc = 0.f;
    for (int64_t j = 0; j < n; ++j) acc += p[j * inner];
    out[k] = acc * scale;
  }
}

void sum_dim(const Tensor& out, const Tensor& x, int64_t outer, int64_t n, int64_t inner, double scale) {
  cuda::require_f32(x, "sum");
  auto s = cuda::stream();
  if (inner == 1) {
    // Split long rows so that a full reduction still fills the GPU; then reduce the partials.
    int splits = outer >= 132 ? 1 : int(std::min<int64_t>(256, (n + 8191) / 8192));
    if (splits <= 1) {
      sum_rows_kernel<<<unsigned(outer), kBlock, 0, s>>>(out.data<float>(), x.data<float>(), n, float(scale), 1);
    } else {
      Tensor partial = empty(Shape{outer * splits}, DType::f32, x.device());
      sum_rows_kernel<<<unsigned(outer * splits), kBlock, 0, s>>>(partial.data<float>(), x.data<float>(), n, 1.f, splits);
      sum_rows_kernel<<<unsigned(outer), kBlock, 0, s>>>(out.data<float>(), partial.data<float>(), splits,
                                                         float(scale), 1);
    }
  } else {
    sum_strided_kernel<<<cuda::blocks_for(outer * inner), cuda::kThreads, 0, s>>>(out.data<float>(), x.data<float>(),
                                                                                 outer, n, inner, float(scale));
  }
  LOUPE_CUDA_LAUNCH_CHECK();
}

__global__ void argmax_kernel(int32_t* out, const float* x, int64_t rows, int64_t cols) {
  LOUPE_KERNEL_LOOP(r, rows) {
    const float* p = x + r * cols;
    int64_t best = 0;
    for (int64_t c = 1; c < cols; ++c)
      if (p[c] > p[best]) best = c;
    out[r] = int32_t(best);
  }
}

void argmax_rows(const Tensor& out, const Tensor& x, int64_t rows, int64_t cols) {
  cuda::require_f32(x, "argmax");
  argmax_kernel<<<cuda::blocks_for(rows), cuda::kThreads, 0, cuda::stream()>>>(out.data<int32_t>(), x.data<float>(),
                                                                              rows, cols);
  LOUPE_CUDA_LAUNCH_CHECK();
}

const ReduceKernels table{sum_dim, argmax_rows};
const RegisterBackend<ReduceKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
