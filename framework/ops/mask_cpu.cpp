#include "core/cpu_util.h"
#include "core/dispatch.h"
#include "ops/mask.h"

namespace loupe {
namespace {

void any_not_equal_cpu(const ExecContext&, const Tensor& out, const Tensor& x, int64_t features, double value) {
  cpu::dispatch_floating(x.dtype(), "any_not_equal", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    const T v = T(value);
    parallel_for(0, out.numel(), cpu::kGrain, [&](int64_t s, int64_t e) {
      for (int64_t r = s; r < e; ++r) {
        bool any = false;
        for (int64_t f = 0; f < features && !any; ++f) any = !(px[r * features + f] == v);
        po[r] = any ? T(1) : T(0);
      }
    });
  });
}

const MaskKernels table{any_not_equal_cpu};
const RegisterBackend<MaskKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
