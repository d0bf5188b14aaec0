// The LSTM's float32 gate math, one body compiled for three instruction sets (ops/lstm_gates_cpu.h).
#include "ops/lstm_gates_cpu.h"

#include <algorithm>
#include <cstdint>

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

LOUPE_INLINE float sigmoid(float a) { return 1.f / (1.f + exp_poly(-a)); }
// As in ops/lstm_cpu.cpp's float64 path: through exp, exact at the ends, a few ulps of 1 near 0.
LOUPE_INLINE float tanh_(float a) { return 2.f / (1.f + exp_poly(-2.f * a)) - 1.f; }

template <bool First>
LOUPE_INLINE void forward_loop(float* g, const float* bias, const float* cp, float* c, float* h,
                               int64_t H) {
  float* gi = g;
  float* gf = g + H;
  float* gg = g + 2 * H;
  float* go = g + 3 * H;
#pragma GCC ivdep  // the four gate blocks, c and h never overlap
  for (int64_t j = 0; j < H; ++j) {
    const float i = sigmoid(gi[j] + bias[j]);
    const float f = sigmoid(gf[j] + bias[H + j]);
    const float u = tanh_(gg[j] + bias[2 * H + j]);
    const float o = sigmoid(go[j] + bias[3 * H + j]);
    gi[j] = i;
    gf[j] = f;
    gg[j] = u;
    go[j] = o;
    const float cj = (First ? 0.f : f * cp[j]) + i * u;
    c[j] = cj;
    h[j] = o * tanh_(cj);
  }
}

LOUPE_INLINE void forward_body(float* g, const float* bias, const float* cp, float* c, float* h, int64_t H) {
  if (cp) forward_loop<false>(g, bias, cp, c, h, H);
  else forward_loop<true>(g, bias, cp, c, h, H);
}

template <bool First>
LOUPE_INLINE void backward_loop(const float* g, const float* c, const float* cp, const float* dy, const float* dh,
                                float* dc, float* dg, int64_t H) {
  const float* gi = g;
  const float* gf = g + H;
  const float* gg = g + 2 * H;
  const float* go = g + 3 * H;
  float* dgi = dg;
  float* dgf = dg + H;
  float* dgg = dg + 2 * H;
  float* dgo = dg + 3 * H;
#pragma GCC ivdep  // no output overlaps an input
  for (int64_t j = 0; j < H; ++j) {
    const float i = gi[j], f = gf[j], u = gg[j], o = go[j];
    const float tc = tanh_(c[j]);
    const float dhj = dy[j] + dh[j];
    const float dcj = dc[j] + dhj * o * (1.f - tc * tc);
    dgi[j] = dcj * u * i * (1.f - i);
    dgf[j] = (First ? 0.f : dcj * cp[j]) * f * (1.f - f);
    dgg[j] = dcj * i * (1.f - u * u);
    dgo[j] = dhj * tc * o * (1.f - o);
    dc[j] = dcj * f;
  }
}

LOUPE_INLINE void backward_body(const float* g, const float* c, const float* cp, const float* dy, const float* dh,
                                float* dc, float* dg, int64_t H) {
  if (cp) backward_loop<false>(g, c, cp, dy, dh, dc, dg, H);
  else backward_loop<true>(g, c, cp, dy, dh, dc, dg, H);
}

LOUPE_INLINE void exp_body(const float* x, float* __restrict y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = exp_poly(x[j]);
}

// One variant per instruction set: the same bodies, compiled for each target.
#define LOUPE_GATE_VARIANT(NAME, TARGET)                                                                      \
  TARGET void forward_##NAME(float* g, const float* bias, const float* cp, float* c, float* h, int64_t H) {    \
    forward_body(g, bias, cp, c, h, H);                                                                       \
  }                                                                                                           \
  TARGET void backward_##NAME(const float* g, const float* c, const float* cp, const float* dy, const float* dh, \
                              float* dc, float* dg, int64_t H) {                                              \
    backward_body(g, c, cp, dy, dh, dc, dg, H);                                                               \
  }                                                                                                           \
  TARGET void exp_##NAME(const float* x, float* y, int64_t n) { exp_body(x, y, n); }                            \
  const GateKernels k_##NAME{#NAME, forward_##NAME, backward_##NAME, exp_##NAME};

LOUPE_GATE_VARIANT(sse, )
LOUPE_GATE_VARIANT(avx2, [[gnu::target("avx2,fma")]])
LOUPE_GATE_VARIANT(avx512, [[gnu::target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma,prefer-vector-width=512")]])

bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
bool has_avx512() {
  return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}

}  // namespace

std::vector<const GateKernels*> gate_kernel_variants() {
  std::vector<const GateKernels*> v;
  if (has_avx512()) v.push_back(&k_avx512);
  if (has_avx2()) v.push_back(&k_avx2);
  v.push_back(&k_sse);
  return v;
}

const GateKernels& gate_kernels() {
  static const GateKernels* best = gate_kernel_variants().front();
  return *best;
}

}  // namespace loupe::lstm_cpu
