// The CPU LSTM's gate math, one row (H units) of one time step at a time; float32 vectorised.
// At one thread this elementwise work took about 40 % of imdb_bilstm's and char_lstm's training
// step through glibc's scalar expf (perf, lab/benchmarks.md); here exp is a polynomial the
// compiler vectorises, compiled for SSE (the x86-64-v2 baseline), AVX2 + FMA and AVX-512, the
// widest the CPU runs chosen at run time. float64 (the gradient checks) keeps std::exp.
#pragma once
#include <cstdint>
#include <vector>

namespace loupe::lstm_cpu {

struct GateKernels {
  const char* isa;  // "avx512", "avx2", "sse"
  // g: the 4H pre-activations of the gates i, f, g, o without the bias, overwritten with the
  // activations; c_t = f * cp + i * g (cp: c_{t-1}, or null at the first step: zero); h = o tanh(c).
  // slope: LstmParams::hard_slope (0: i, f, o are sigmoids; else hard sigmoids of this slope).
  void (*forward)(float* g, const float* bias, const float* cp, float* c, float* h, int64_t H, float slope);
  // From the saved activations g, c_t and c_{t-1} (cp, null at the first step), the gradient dy
  // reaching h_t from above and dh, dc reaching h_t and c_t from the step after: dg (4H) and dc
  // (overwritten with the gradient reaching c_{t-1}).
  void (*backward)(const float* g, const float* c, const float* cp, const float* dy, const float* dh, float* dc,
                   float* dg, int64_t H, float slope);
  // y = exp(x) elementwise (what the gates use; for tests).
  void (*exp)(const float* x, float* y, int64_t n);
};

// The widest variant this CPU runs.
const GateKernels& gate_kernels();
// Every variant this CPU runs, widest first (tests compare each with a float64 reference).
std::vector<const GateKernels*> gate_kernel_variants();

// One row of one step, as GateKernels' forward and backward say: float32 through the widest
// variant, float64 (the gradient checks) through the same equations with std::exp.
inline void gates_forward(float* g, const float* bias, const float* cp, float* c, float* h, int64_t H, float slope) {
  gate_kernels().forward(g, bias, cp, c, h, H, slope);
}
inline void gates_backward(const float* g, const float* c, const float* cp, const float* dy, const float* dh,
                           float* dc, float* dg, int64_t H, float slope) {
  gate_kernels().backward(g, c, cp, dy, dh, dc, dg, H, slope);
}
void gates_forward(double* g, const double* bias, const double* cp, double* c, double* h, int64_t H, double slope);
void gates_backward(const double* g, const double* c, const double* cp, const double* dy, const double* dh,
                    double* dc, double* dg, int64_t H, double slope);

}  // namespace loupe::lstm_cpu
