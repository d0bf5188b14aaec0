#include "core/cuda_util.cuh"
#include "core/dispatch.h"
#include "ops/mask.h"

namespace loupe {
namespace {

// One thread a row: the rows are a batch's steps, their features few.
template <class T>
__global__ void any_not_equal_kernel(T* out, const T* x, int64_t rows, int64_t features, float value) {
  const float v = cuda::to_float(cuda::from_float<T>(value));  // the padding value as T holds it
  LOUPE_KERNEL_LOOP(r, rows) {
    bool any = false;
    for (int64_t f = 0; f < features && !any; ++f) any = !(cuda::to_float(x[r * features + f]) == v);
    out[r] = cuda::from_float<T>(any ? 1.f : 0.f);
  }
}

void any_not_equal_cuda(const ExecContext& ctx, const Tensor& out, const Tensor& x, int64_t features, double value) {
  cuda::require_float(x, "any_not_equal");
  const cudaStream_t s = cuda::stream(ctx);
  const int64_t rows = out.numel();
  cuda::dispatch_float(x.dtype(), "any_not_equal", [&](auto tag) {
    using T = decltype(tag);
    cuda::launch(any_not_equal_kernel<T>, cuda::blocks_for(rows), cuda::kThreads, 0, s, out.data<T>(), x.data<T>(), rows,
                 features, float(value));
  });
  LOUPE_CUDA_LAUNCH_CHECK();
}

const MaskKernels table{any_not_equal_cuda};
const RegisterBackend<MaskKernels> reg(DeviceType::CUDA, &table);

}  // namespace
}  // namespace loupe
