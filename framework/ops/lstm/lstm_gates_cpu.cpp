// The LSTM's gate math (ops/lstm/lstm_gates_cpu.h): one body, compiled for three instruction sets in
// float32 and once, through std::exp, in float64.
#include "ops/lstm/lstm_gates_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/cpu_util.h"

namespace loupe::lstm_cpu {
namespace {

#define LOUPE_INLINE [[gnu::always_inline]] inline

// exp(x) as Cephes' expf computes it: x = n ln2 + r with |r| <= ln2 / 2, e^r by a degree-7
// polynomial (about 1 ulp), 2^n put straight into the exponent bits. No branch and no call, so the
// loops below vectorise. x is clamped so that 2^n stays a normal float (e^88.3 ~ 2e38,
// e^-87.3 ~ 1e-38): the sigmoid and tanh built on it saturate at exactly 1 and +-1, and within
// 1e-38 of 0. A NaN passes both comparisons untouched and comes out NaN.
LOUPE_INLINE float exp_poly(float x) {
  x = std::min(x, 88.3f);  // (88.3 < x) ? 88.3 : x, so a NaN stays
  x = std::max(x, -87.3f);
  // n = round(x / ln2): adding 1.5 * 2^23 leaves n in the low mantissa bits of `shifted`.
  const float shifted = x * 1.44269504088896341f + 12582912.f;
  const float n = shifted - 12582912.f;
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // ln2 in two parts: n * C1 is exact
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.f;
  // (bits(shifted) + 127) << 23 in unsigned arithmetic: the high bits of shifted's pattern fall off
  // the top, n + 127 (1..254) lands in the exponent field.
  const uint32_t scale = (__builtin_bit_cast(uint32_t, shifted) << 23) + (127u << 23);
  return p * __builtin_bit_cast(float, scale);
}

// The exp the gates use: the polynomial for float32 (vectorised), std::exp for float64 (the
// gradient checks want its accuracy).
LOUPE_INLINE float exp_of(float x) { return exp_poly(x); }
LOUPE_INLINE double exp_of(double x) { return std::exp(x); }

template <class T>
LOUPE_INLINE T sigmoid_of(T a) { return T(1) / (T(1) + exp_of(-a)); }
// Through exp: glibc's tanhf (via expm1f) took about a quarter of a CPU training step; this loses
// only relative accuracy near 0 (absolute error a few ulps of 1), and saturates at exactly +-1.
template <class T>
LOUPE_INLINE T tanh_(T a) { return T(2) / (T(1) + exp_of(T(-2) * a)) - T(1); }

// The gates i, f, o: the sigmoid, or with Hard Keras's hard_sigmoid clip(slope a + 0.5, 0, 1)
// (ops/lstm/lstm.h), whose derivative is read from its value as the sigmoid's is.
template <class T, bool Hard>
LOUPE_INLINE T gate_of(T a, T slope) {
  if constexpr (Hard) return std::min(std::max(slope * a + T(0.5), T(0)), T(1));
  else return sigmoid_of(a);
}
template <class T, bool Hard>
LOUPE_INLINE T gate_slope(T y, T slope) {
  if constexpr (Hard) return y > T(0) && y < T(1) ? slope : T(0);
  else return y * (T(1) - y);
}

// The cell's equations, the one copy of them (ops/lstm/lstm.h); First: the first step, c_{t-1} = 0.
template <class T, bool First, bool Hard>
LOUPE_INLINE void forward_loop(T* g, const T* bias, const T* cp, T* c, T* h, int64_t H, T slope) {
  T* gi = g;
  T* gf = g + H;
  T* gg = g + 2 * H;
  T* go = g + 3 * H;
#pragma GCC ivdep  // the four gate blocks, c and h never overlap
  for (int64_t j = 0; j < H; ++j) {
    const T i = gate_of<T, Hard>(gi[j] + bias[j], slope);
    const T f = gate_of<T, Hard>(gf[j] + bias[H + j], slope);
    const T u = tanh_(gg[j] + bias[2 * H + j]);
    const T o = gate_of<T, Hard>(go[j] + bias[3 * H + j], slope);
    gi[j] = i;
    gf[j] = f;
    gg[j] = u;
    go[j] = o;
    const T cj = (First ? T(0) : f * cp[j]) + i * u;
    c[j] = cj;
    h[j] = o * tanh_(cj);
  }
}

template <class T>
LOUPE_INLINE void forward_body(T* g, const T* bias, const T* cp, T* c, T* h, int64_t H, T slope) {
  if (slope != T(0)) {
    if (cp) forward_loop<T, false, true>(g, bias, cp, c, h, H, slope);
    else forward_loop<T, true, true>(g, bias, cp, c, h, H, slope);
  } else {
    if (cp) forward_loop<T, false, false>(g, bias, cp, c, h, H, slope);
    else forward_loop<T, true, false>(g, bias, cp, c, h, H, slope);
  }
}

template <class T, bool First, bool Hard>
LOUPE_INLINE void backward_loop(const T* g, const T* c, const T* cp, const T* dy, const T* dh, T* dc, T* dg,
                                int64_t H, T slope) {
  const T* gi = g;
  const T* gf = g + H;
  const T* gg = g + 2 * H;
  const T* go = g + 3 * H;
  T* dgi = dg;
  T* dgf = dg + H;
  T* dgg = dg + 2 * H;
  T* dgo = dg + 3 * H;
#pragma GCC ivdep  // no output overlaps an input
  for (int64_t j = 0; j < H; ++j) {
    const T i = gi[j], f = gf[j], u = gg[j], o = go[j];
    const T tc = tanh_(c[j]);
    const T dhj = dy[j] + dh[j];
    const T dcj = dc[j] + dhj * o * (T(1) - tc * tc);
    dgi[j] = dcj * u * gate_slope<T, Hard>(i, slope);
    dgf[j] = (First ? T(0) : dcj * cp[j]) * gate_slope<T, Hard>(f, slope);
    dgg[j] = dcj * i * (T(1) - u * u);
    dgo[j] = dhj * tc * gate_slope<T, Hard>(o, slope);
    dc[j] = dcj * f;
  }
}

template <class T>
LOUPE_INLINE void backward_body(const T* g, const T* c, const T* cp, const T* dy, const T* dh, T* dc, T* dg,
                                int64_t H, T slope) {
  if (slope != T(0)) {
    if (cp) backward_loop<T, false, true>(g, c, cp, dy, dh, dc, dg, H, slope);
    else backward_loop<T, true, true>(g, c, cp, dy, dh, dc, dg, H, slope);
  } else {
    if (cp) backward_loop<T, false, false>(g, c, cp, dy, dh, dc, dg, H, slope);
    else backward_loop<T, true, false>(g, c, cp, dy, dh, dc, dg, H, slope);
  }
}

LOUPE_INLINE void exp_body(const float* x, float* __restrict y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = exp_poly(x[j]);
}

// One variant per instruction set: the same bodies, compiled for each target.
#define LOUPE_GATE_VARIANT(NAME, TARGET)                                                                      \
  TARGET void forward_##NAME(float* g, const float* bias, const float* cp, float* c, float* h, int64_t H,       \
                             float slope) {                                                                   \
    forward_body(g, bias, cp, c, h, H, slope);                                                                \
  }                                                                                                           \
  TARGET void backward_##NAME(const float* g, const float* c, const float* cp, const float* dy, const float* dh, \
                              float* dc, float* dg, int64_t H, float slope) {                                 \
    backward_body(g, c, cp, dy, dh, dc, dg, H, slope);                                                        \
  }                                                                                                           \
  TARGET void exp_##NAME(const float* x, float* y, int64_t n) { exp_body(x, y, n); }                            \
  const GateKernels k_##NAME{#NAME, forward_##NAME, backward_##NAME, exp_##NAME};

LOUPE_GATE_VARIANT(sse, )
LOUPE_GATE_VARIANT(avx2, [[gnu::target("avx2,fma")]])
LOUPE_GATE_VARIANT(avx512, [[gnu::target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma,prefer-vector-width=512")]])

}  // namespace

std::vector<const GateKernels*> gate_kernel_variants() {
  std::vector<const GateKernels*> v;
  if (cpu::has_avx512()) v.push_back(&k_avx512);
  if (cpu::has_avx2_fma()) v.push_back(&k_avx2);
  v.push_back(&k_sse);
  return v;
}

const GateKernels& gate_kernels() {
  static const GateKernels* best = gate_kernel_variants().front();
  return *best;
}

void gates_forward(double* g, const double* bias, const double* cp, double* c, double* h, int64_t H, double slope) {
  forward_body(g, bias, cp, c, h, H, slope);
}
void gates_backward(const double* g, const double* c, const double* cp, const double* dy, const double* dh,
                    double* dc, double* dg, int64_t H, double slope) {
  backward_body(g, c, cp, dy, dh, dc, dg, H, slope);
}

}  // namespace loupe::lstm_cpu
