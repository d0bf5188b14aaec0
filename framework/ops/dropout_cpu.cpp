#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "core/dropout_mask.h"
#include "ops/dropout.h"

namespace loupe {
namespace {

void apply(const ExecContext&, const Tensor& out, const Tensor& in, float p, const RngDraw& r) {
  LOUPE_CHECK(!r.base, "dropout on the CPU: a draw relative to a device word (CUDA graphs are GPU-only)");
  const uint64_t seed = r.seed, offset = r.offset;
  cpu::dispatch_floating(in.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T* x = in.data<T>();
    T scale = T(1) / (T(1) - T(p));
    const int64_t n = in.numel();
    parallel_for(0, n, cpu::kGrain, [&](int64_t s, int64_t e) {
      DropoutMask mask(seed, offset, p);
      for (int64_t i = s; i < e; ++i) o[i] = mask.keep(uint64_t(i)) ? x[i] * scale : T(0);
    });
  });
}

const DropoutKernels table{apply};
const RegisterBackend<DropoutKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
