#include "core/dispatch.h"
#include "ops/backend/gemm_cpu.h"
#include "ops/linalg.h"

namespace loupe {
namespace {

// The CPU table's GEMM: cpu::gemm, the BLAS (gemm_blas.cpp) or the built-in blocked GEMM
// (gemm_default.cpp), whichever this build has; oneDNN's float32 path is inside gemm_blas.cpp.
// The precision is always fp32 or float64 here (the CPU refuses tf32 and the 16-bit modes).
void gemm_cpu(const ExecContext&, const GemmArgs& g) {
  if (g.dtype == DType::f32)
    cpu::gemm<float>(g.ta, g.tb, g.M, g.N, g.K, float(g.alpha), static_cast<const float*>(g.A), g.lda,
                     static_cast<const float*>(g.B), g.ldb, float(g.beta), static_cast<float*>(g.C), g.ldc);
  else
    cpu::gemm<double>(g.ta, g.tb, g.M, g.N, g.K, g.alpha, static_cast<const double*>(g.A), g.lda,
                      static_cast<const double*>(g.B), g.ldb, g.beta, static_cast<double*>(g.C), g.ldc);
}

const LinalgKernels table{gemm_cpu};
const RegisterBackend<LinalgKernels> reg(DeviceType::CPU, &table);

}  // namespace
}  // namespace loupe
