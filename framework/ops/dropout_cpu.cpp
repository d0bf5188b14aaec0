#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "core/philox.h"
#include "ops/dropout.h"

namespace loupe {
namespace {

void apply(const Tensor& out, const Tensor& in, float p, const RngDraw& r) {
  LOUPE_CHECK(!r.base, "dropout on the CPU: a draw relative to a device word (CUDA graphs are GPU-only)");
  const uint64_t seed = r.seed, offset = r.offset;
  cpu::dispatch_floating(in.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    T* o = out.data<T>();
    const T* x = in.data<T>();
    T scale = T(1) / (T(1) - T(p));
    // Chunks start at multiples of 4 so each Philox call serves four elements.
    int64_t n = in.numel();
    parallel_for(0, (n + 3) / 4, cpu::kGrain / 4, [&](int64_t s, int64_t e) {
      for (int64_t c = s; c < e; ++c) {
        Philox4 r = philox(seed, offset + uint64_t(c), 0);
        for (int k = 0; k < 4 && c * 4 + k < n; ++k) {
          int64_t i = c * 4 + k;
          o[i] = uniform01(r.v[k]) >= p ? x[i] * scale : T(0);
        }
      }
    });
  });
}

const DropoutKernels table{apply};
const RegisterBackend<DropoutKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
