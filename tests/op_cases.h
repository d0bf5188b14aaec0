// One table of ops, after ggml's test-backend-ops. Each case carries its inputs, the op, its
// tolerances per dtype, its expected FLOP count and a larger shape for timing, and every test that
// walks the table reads them from here:
//   test_ops_grad   float64 gradient check on the CPU                      (tol.f64_*), and a
//                   float32 pass whose output and gradients must be finite
//   test_ops_cuda   CPU-vs-CUDA parity in float32, output and gradients     (tol.f32_*)
//   test_ops_half   float16 and bfloat16 on CUDA against float32 on CUDA    (tol.f16, tol.bf16)
//   test_flops      the library's FLOP count, forward and backward, on the CPU (and test_ops_cuda
//                   on the GPU) against `flops`, the analytic count by framework/core/flops.h
//   ops_perf        time, GB/s and GFLOP/s per op, device and dtype at the `perf` shapes
//                   (`bytes`: ggml's op_size, every input read once and the output written once)
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "loupe.h"
#include "ops/bias_act.h"
#include "ops/fused/linear_act.h"
#include "ops/lstm/lstm.h"
#include "ops/fused/mlp.h"
#include "nn/graph.h"

namespace loupe::test {

enum class Kind { Float, Positive, Labels, Targets01 };

struct InputSpec {
  Shape shape;
  Kind kind = Kind::Float;
  int classes = 0;  // Labels: values in [0, classes)
  bool keep_f32 = false;  // stays float32 where the others run in 16 bits (batch norm's scale and shift)
};

// Tolerances per dtype.
struct Tolerances {
  // float64 gradient check on the CPU (autograd/gradcheck.h): central differences with step eps; an
  // element passes when |analytic - numeric| <= atol + rtol * |numeric|.
  double f64_eps = 1e-6, f64_atol = 1e-6, f64_rtol = 1e-4;
  // float32, CPU against CUDA, output and every input gradient, per element:
  // |cpu - cuda| <= atol + rtol * |cpu|.
  double f32_atol = 1e-5, f32_rtol = 1e-4;
  // float16 and bfloat16 on CUDA against float32 on CUDA, both from the same inputs rounded to the
  // 16-bit type (test_ops_half.cpp): the largest error relative to the largest magnitude of the
  // float32 result. Four half-ulps at 1 of the format: 4 * 2^-11 (float16, 10-bit mantissa) and
  // 4 * 2^-8 (bfloat16, 7 bits), as for the LSTM in test_ops_cuda. Measured on an H200 (cuDNN 9.14)
  // over every case: at most 2.4 half-ulps in float16 (lstm_2layer_bidirectional's gradient, 1.2e-3)
  // and 1.9 in bfloat16 (lstm_1layer's, 7.3e-3); most ops 1 or less (the output's own rounding).
  // A kernel off by a factor, or one that drops a term, is far outside. nullopt: the op runs in
  // float32 in mixed precision (losses, on a cast of the logits; the embedding lookup, whose table
  // stays float32) and has no 16-bit case.
  std::optional<double> f16 = 4.0 / 2048, bf16 = 4.0 / 256;
};

// FLOPs of one call: the forward pass, and the backward pass from a dense gradient of the output
// into every input that requires one (gradients accumulated by the engine included).
struct Flops {
  double forward = 0, backward = 0;
};
inline Flops operator+(Flops a, Flops b) { return {a.forward + b.forward, a.backward + b.backward}; }
using Shapes = std::vector<Shape>;

struct OpCase {
  std::string name;
  std::vector<InputSpec> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> f;
  Tolerances tol;
  // The analytic FLOP count at the given input shapes (the test's or the perf ones).
  std::function<Flops(const Shapes&)> flops;
  // Input shapes for the perf mode (same kinds and classes as `inputs`); empty: the test's shapes.
  Shapes perf;
  // Bytes one forward call moves at the given input shapes, output shape and element size; null:
  // every input read once and the output written once (op_bytes below).
  std::function<double(const Shapes&, const Shape& out, double elem)> bytes;
  // Float inputs are drawn this many times larger (make_inputs): hard_sigmoid's, across its clip
  // edges, and the large-magnitude variants at the end of op_cases().
  double scale = 1;
  // Changes the drawn values (float inputs as doubles, labels as their integers) before they become
  // tensors: relu_margin below.
  std::function<void(std::vector<std::vector<double>>&)> adjust;

  // Builders, for the table below.
  OpCase& with_flops(std::function<Flops(const Shapes&)> fn) { flops = std::move(fn); return *this; }
  OpCase& with_perf(Shapes s) { perf = std::move(s); return *this; }
  OpCase& with_tol(const Tolerances& t) { tol = t; return *this; }
  OpCase& with_scale(double s) { scale = s; return *this; }
  OpCase& with_bytes(std::function<double(const Shapes&, const Shape&, double)> fn) { bytes = std::move(fn); return *this; }
  OpCase& with_adjust(std::function<void(std::vector<std::vector<double>>&)> fn) { adjust = std::move(fn); return *this; }

  Shapes shapes() const {
    Shapes s;
    for (const InputSpec& i : inputs) s.push_back(i.shape);
    return s;
  }
  // This case with its inputs at the perf shapes.
  OpCase at_perf_shape() const {
    OpCase c = *this;
    for (size_t k = 0; k < perf.size() && k < c.inputs.size(); ++k) c.inputs[k].shape = perf[k];
    return c;
  }
};

inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

// Bytes one forward call moves: the case's own count, or every input read once (ids and inputs
// kept in float32 at 4 bytes) plus the output written once.
inline double op_bytes(const OpCase& c, const Shape& out, double elem) {
  Shapes s = c.shapes();
  if (c.bytes) return c.bytes(s, out, elem);
  double b = double(out.numel()) * elem;
  for (const InputSpec& i : c.inputs) b += double(i.shape.numel()) * (i.kind == Kind::Labels || i.keep_f32 ? 4.0 : elem);
  return b;
}

// Random inputs, never zero: floats in +-[0.1, 1.1] (times the case's scale), positives in
// [0.5, 1.5].
inline std::vector<Tensor> make_inputs(const OpCase& c, DType dt, uint64_t seed) {
  std::vector<std::vector<double>> vs;
  uint64_t off = 0;
  for (const InputSpec& s : c.inputs) {
    int64_t n = s.shape.numel();
    std::vector<double>& v = vs.emplace_back(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      if (s.kind == Kind::Labels) {
        v[size_t(i)] = double(philox(seed, off + uint64_t(i), 7).v[0] % uint32_t(s.classes));
        continue;
      }
      double u = philox_uniform(seed, off, uint64_t(i));
      double sign = philox(seed, off + uint64_t(i), 9).v[1] & 1 ? 1.0 : -1.0;
      v[size_t(i)] = s.kind == Kind::Float ? sign * (0.1 + u) * c.scale : s.kind == Kind::Positive ? 0.5 + u : u;
    }
    off += uint64_t(n);
  }
  if (c.adjust) c.adjust(vs);
  std::vector<Tensor> xs;
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const InputSpec& s = c.inputs[k];
    if (s.kind == Kind::Labels) {
      std::vector<int32_t> v(vs[k].begin(), vs[k].end());
      xs.push_back(from_vector(v, s.shape));
      continue;
    }
    Tensor t = to(from_vector(vs[k], s.shape), dt);
    if (s.kind != Kind::Targets01) t.requires_grad_(true);
    xs.push_back(t);
  }
  return xs;
}

// An adjust for a linear layer with relu, x [rows, K] @ w [N, K]^T + b [N]: shifts each b[j] by a
// multiple of `margin` so that no row's pre-activation lies within `margin` of zero. There, 16-bit
// arithmetic (which rounds the product, then the biased sum) may legitimately land on the other
// side of relu's kink than float32 does, and with few rows one such element moves a whole row of
// the weight's gradient: a difference of rounding, not of the kernels the tests compare.
inline std::function<void(std::vector<std::vector<double>>&)> relu_margin(size_t x, size_t w, size_t b,
                                                                          double margin = 0.1) {
  return [=](std::vector<std::vector<double>>& v) {
    const size_t N = v[b].size(), K = v[w].size() / N, rows = v[x].size() / K;
    for (size_t j = 0; j < N; ++j) {
      std::vector<double> h(rows, v[b][j]);
      for (size_t r = 0; r < rows; ++r)
        for (size_t k = 0; k < K; ++k) h[r] += v[x][r * K + k] * v[w][j * K + k];
      // Shifts 0, +m, -m, +2m, ...: each row rules out at most two of them (an open interval 2m wide).
      for (int i = 0; i < int(2 * rows + 1); ++i) {
        const double s = margin * ((i + 1) / 2) * (i % 2 ? 1 : -1);
        bool clear = true;
        for (double hr : h) clear = clear && std::abs(hr + s) >= margin;
        if (clear) { v[b][j] += s; break; }
      }
    }
  };
}

// ---- analytic FLOP counts (framework/core/flops.h's conventions) --------------------------
// A backward pass counts the ops it runs by the same conventions: a broadcast input's gradient is
// summed back to its shape (1 per element summed, per reduced dimension), a tensor that feeds two
// uses gets its gradients added (1 per element), views and copies count 0.
namespace fl {

inline double n(const Shape& s) { return double(s.numel()); }

// reduce.cpp's sum_to: the leading dimensions one at a time, then each dimension that is 1 in `to`.
inline double sum_to(Shape from, const Shape& to) {
  if (from == to) return 0;
  double f = 0;
  std::vector<int64_t> d = from.vec();
  while (d.size() > size_t(to.size())) {
    f += n(Shape(d));
    d.erase(d.begin());
  }
  for (int i = 0; i < to.size(); ++i)
    if (to[i] == 1 && d[size_t(i)] != 1) {
      f += n(Shape(d));
      d[size_t(i)] = 1;
    }
  return f;
}

enum class Bin { Add, Sub, Mul, Div };
// a op b with broadcasting, both inputs requiring gradients.
inline Flops binary(Bin op, const Shape& a, const Shape& b) {
  Shape o = broadcast_shapes(a, b);
  double no = n(o), bw = sum_to(o, a) + sum_to(o, b);
  switch (op) {
    case Bin::Add: break;
    case Bin::Sub: bw += no; break;                      // -g
    case Bin::Mul: bw += 2 * no; break;                  // g*b, g*a
    case Bin::Div: bw += no + 3 * no + n(b); break;      // g/b; -(g*a)/(b*b): b*b at b's size
  }
  return {no, bw};
}
// Elementwise ops of `fwd` and `bwd` FLOPs per element of input 0.
inline std::function<Flops(const Shapes&)> per_element(double fwd, double bwd) {
  return [=](const Shapes& s) { return Flops{fwd * n(s[0]), bwd * n(s[0])}; };
}
// GEMM [M, K] x [K, N]: forward 2MNK, backward 2MNK for each input's gradient.
inline Flops gemm(double M, double N, double K) { return {2 * M * N * K, 4 * M * N * K}; }
inline int64_t out_size(int64_t in, int k, int stride, int pad) { return (in + 2 * pad - k) / stride + 1; }
// conv2d: 2*N*K*P*Q*C*R*S forward, the same for each of the data and filter gradients.
inline Flops conv(const Shape& x, const Shape& w, const Conv2dParams& p, Shape* out = nullptr) {
  int64_t P = out_size(x[2], int(w[2]), p.stride_h, p.pad_h), Q = out_size(x[3], int(w[3]), p.stride_w, p.pad_w);
  if (out) *out = Shape{x[0], w[0], P, Q};
  double macs = double(x[0] * w[0] * P * Q) * double(w[1] * w[2] * w[3]);
  return {2 * macs, 4 * macs};
}
// Pooling: kernel_h*kernel_w per output, forward and backward; its dropout 1 per output each way.
inline Flops pool(const Shape& x, const Pool2dParams& p, bool dropout = false) {
  double y = double(x[0] * x[1] * out_size(x[2], p.kernel_h, p.stride_h, p.pad_h) *
                    out_size(x[3], p.kernel_w, p.stride_w, p.pad_w));
  double per = p.kernel_h * p.kernel_w + (dropout ? 1 : 0);
  return {per * y, per * y};
}
}  // namespace fl

inline std::vector<OpCase> op_cases() {
  using V = const std::vector<Tensor>&;
  using S = const Shapes&;
  using fl::n;
  std::vector<OpCase> c;
  auto add = [&c](std::string name, std::vector<InputSpec> in, std::function<Tensor(V)> f) -> OpCase& {
    c.push_back(OpCase{std::move(name), std::move(in), std::move(f)});
    return c.back();
  };
  auto bin = [](fl::Bin op) { return [op](S s) { return fl::binary(op, s[0], s[1]); }; };
  const Shape M{1024, 1024};  // 1M elements: the perf shape of most elementwise cases
  add("add_same", {{{3, 5}}, {{3, 5}}}, [](V x) { return x[0] + x[1]; }).with_flops(bin(fl::Bin::Add)).with_perf({M, M});
  add("add_broadcast_row", {{{4, 6}}, {{6}}}, [](V x) { return x[0] + x[1]; })
      .with_flops(bin(fl::Bin::Add)).with_perf({M, {1024}});
  add("sub_broadcast_col", {{{4, 6}}, {{4, 1}}}, [](V x) { return x[0] - x[1]; })
      .with_flops(bin(fl::Bin::Sub)).with_perf({M, {1024, 1}});
  add("mul_broadcast_3d", {{{2, 3, 4}}, {{3, 1}}}, [](V x) { return x[0] * x[1]; })
      .with_flops(bin(fl::Bin::Mul)).with_perf({{16, 256, 256}, {256, 1}});
  add("div", {{{3, 7}}, {{3, 7}, Kind::Positive}}, [](V x) { return x[0] / x[1]; })
      .with_flops(bin(fl::Bin::Div)).with_perf({M, M});
  add("div_broadcast", {{{5}, Kind::Float}, {{2, 5}, Kind::Positive}}, [](V x) { return x[0] / x[1]; })
      .with_flops(bin(fl::Bin::Div)).with_perf({{1024}, M});
  // Two scalar ops (1 each); the gradient of `+ 1.0` is g itself, of `* 2.5` one product.
  add("scalar_affine", {{{4, 3}}}, [](V x) { return x[0] * 2.5 + 1.0; }).with_flops(fl::per_element(2, 1)).with_perf({M});
  // bias_add: 1 per element; its bias gradient sums the output gradient over every dimension but 1.
  auto bias = fl::per_element(1, 1);
  add("bias_add_2d", {{{5, 7}}, {{7}}}, [](V x) { return bias_add(x[0], x[1]); }).with_flops(bias).with_perf({M, {1024}});
  add("bias_add_4d", {{{2, 3, 2, 2}}, {{3}}}, [](V x) { return bias_add(x[0], x[1]); })
      .with_flops(bias).with_perf({{32, 64, 32, 16}, {64}});
  add("bias_add_rows_vec4", {{{6, 8}}, {{8}}}, [](V x) { return bias_add(x[0], x[1]); }).with_flops(bias).with_perf({M, {1024}});
  add("bias_add_4d_vec4", {{{2, 3, 2, 4}}, {{3}}}, [](V x) { return bias_add(x[0], x[1]); })
      .with_flops(bias).with_perf({{32, 64, 32, 16}, {64}});
  add("relu", {{{6, 9}}}, [](V x) { return relu(x[0]); }).with_flops(fl::per_element(1, 1)).with_perf({M});
  add("relu_vec4", {{{4, 8}}}, [](V x) { return relu(x[0]); }).with_flops(fl::per_element(1, 1)).with_perf({M});
  add("sigmoid_vec4", {{{2, 6}}}, [](V x) { return sigmoid(x[0]); }).with_flops(fl::per_element(4, 3)).with_perf({M});
  add("sigmoid", {{{6, 9}}}, [](V x) { return sigmoid(x[0]); }).with_flops(fl::per_element(4, 3)).with_perf({M});
  add("tanh", {{{6, 9}}}, [](V x) { return tanh(x[0]); }).with_flops(fl::per_element(4, 3)).with_perf({M});
  // Keras's other activations (ops/nonlinearity.h), 4 per element each way. The inputs keep clear
  // of elu's and selu's kink at 0; hard_sigmoid's are drawn at +-[0.4, 4.4], across its clip edges
  // (+-2.5 at Keras 2's slope 0.2, +-3 at Keras 3's 1/6), so that both its flat and its linear
  // parts are checked.
  auto nonlin = [](Nonlin f, float slope = 0.2f) { return [f, slope](V x) { return nonlinearity(f, x[0], slope); }; };
  const auto nl_flops = fl::per_element(4, 4);
  add("elu", {{{6, 9}}}, nonlin(Nonlin::Elu)).with_flops(nl_flops).with_perf({M});
  add("selu", {{{6, 9}}}, nonlin(Nonlin::Selu)).with_flops(nl_flops).with_perf({M});
  add("gelu", {{{6, 9}}}, nonlin(Nonlin::Gelu)).with_flops(nl_flops).with_perf({M});
  add("silu", {{{6, 9}}}, nonlin(Nonlin::Silu)).with_flops(nl_flops).with_perf({M});
  add("hard_sigmoid", {{{6, 9}}}, nonlin(Nonlin::HardSigmoid)).with_flops(nl_flops).with_perf({M}).with_scale(4);
  add("hard_sigmoid_keras3", {{{6, 9}}}, nonlin(Nonlin::HardSigmoid, 1.f / 6))
      .with_flops(nl_flops).with_perf({M}).with_scale(4);
  add("softplus", {{{6, 9}}}, nonlin(Nonlin::Softplus)).with_flops(nl_flops).with_perf({M});
  add("softsign", {{{6, 9}}}, nonlin(Nonlin::Softsign)).with_flops(nl_flops).with_perf({M});
  add("dropout", {{{8, 33}}}, [](V x) { manual_seed(42); return dropout(x[0], 0.3, true); })
      .with_flops(fl::per_element(1, 1)).with_perf({M});
  // Reductions: 1 per element summed; the gradient broadcasts back as a view (0), a mean's scaled
  // on the small side (1 per output element).
  add("sum_all", {{{4, 5}}}, [](V x) { return sum(x[0]); }).with_flops(fl::per_element(1, 0)).with_perf({M});
  add("mean_all", {{{4, 5}}}, [](V x) { return mean(x[0]); })
      .with_flops([](S s) { return Flops{n(s[0]), 1}; }).with_perf({M});
  add("sum_dim0", {{{4, 5}}}, [](V x) { return sum(x[0], 0); }).with_flops(fl::per_element(1, 0)).with_perf({M});
  add("sum_dim1_keep", {{{3, 4, 5}}}, [](V x) { return sum(x[0], 1, true); })
      .with_flops(fl::per_element(1, 0)).with_perf({{64, 128, 128}});
  add("sum_except_dim1", {{{3, 4, 5}}}, [](V x) { return sum_except(x[0], 1); })
      .with_flops(fl::per_element(1, 0)).with_perf({{64, 128, 128}});
  add("sum_except_dim0", {{{4, 5}}}, [](V x) { return sum_except(x[0], 0); }).with_flops(fl::per_element(1, 0)).with_perf({M});
  add("mean_dim_last", {{{3, 4, 5}}}, [](V x) { return mean(x[0], -1); })
      .with_flops([](S s) { return Flops{n(s[0]), n(s[0]) / double(s[0][2])}; }).with_perf({{64, 128, 128}});
  add("softmax", {{{5, 7}}}, [](V x) { return softmax(x[0]); }).with_flops(fl::per_element(4, 4)).with_perf({{4096, 256}});
  add("log_softmax", {{{5, 7}}}, [](V x) { return log_softmax(x[0]); }).with_flops(fl::per_element(4, 4)).with_perf({{4096, 256}});
  add("cross_entropy", {{{6, 10}}, {{6}, Kind::Labels, 10}}, [](V x) { return cross_entropy(x[0], x[1]); })
      .with_flops(fl::per_element(4, 4)).with_perf({{4096, 256}, {4096}});
  add("bce_with_logits", {{{9}}, {{9}, Kind::Targets01}},
      [](V x) { return binary_cross_entropy_with_logits(x[0], x[1]); })
      .with_flops(fl::per_element(6, 4)).with_perf({{1 << 20}, {1 << 20}});
  // sub, mul and mean: forward 1 each per element; backward the mean's scale (1), the product's two
  // (g*d twice), the engine's sum of those two into d's gradient (1) and the target's -g (1).
  add("mean_squared_error", {{{6, 3}}, {{6, 3}}}, [](V x) { return mean_squared_error(x[0], x[1]); })
      .with_flops([](S s) { return Flops{3 * n(s[0]), 4 * n(s[0]) + 1}; }).with_perf({M, M});
  add("mean_squared_error_column", {{{7, 1}}, {{7}}}, [](V x) { return mean_squared_error(x[0], x[1]); })
      .with_flops([](S s) { return Flops{3 * n(s[0]), 4 * n(s[0]) + 1}; }).with_perf({{1 << 20, 1}, {1 << 20}});
  auto mm = [](S s) { return fl::gemm(double(s[0][0]), double(s[1][1]), double(s[0][1])); };
  const Shapes mm_perf{{512, 512}, {512, 512}};
  add("matmul", {{{5, 7}}, {{7, 3}}}, [](V x) { return matmul(x[0], x[1]); }).with_flops(mm).with_perf(mm_perf);
  add("matmul_transposed_views", {{{7, 5}}, {{3, 7}}}, [](V x) { return matmul(transpose(x[0], 0, 1), transpose(x[1], 0, 1)); })
      .with_flops([](S s) { return fl::gemm(double(s[0][1]), double(s[1][0]), double(s[0][0])); }).with_perf(mm_perf);
  add("matmul_odd", {{{1, 13}}, {{13, 1}}}, [](V x) { return matmul(x[0], x[1]); }).with_flops(mm).with_perf({{1, 4096}, {4096, 1}});
  // x [B, I] w [O, I] b [O]: a GEMM and a bias add.
  add("linear", {{{4, 6}}, {{3, 6}}, {{3}}}, [](V x) { return linear(x[0], x[1], x[2]); })
      .with_flops([](S s) {
        double B = double(s[0][0]), O = double(s[1][0]), I = double(s[0][1]);
        return fl::gemm(B, O, I) + Flops{B * O, B * O};
      })
      .with_perf({{512, 784}, {512, 784}, {512}});
  // x used twice: the two gradients of the product, and their sum into x's.
  add("reshape_flatten", {{{2, 3, 4}}}, [](V x) { return flatten(x[0], 1) * flatten(x[0], 1); })
      .with_flops(fl::per_element(1, 3)).with_perf({{256, 64, 64}});
  // A copy (0) then a scalar product (1, and 1 in the backward).
  auto copy_then_scale = fl::per_element(1, 1);
  add("transpose_contiguous", {{{3, 4}}}, [](V x) { return contiguous(transpose(x[0], 0, 1)) * 2.0; })
      .with_flops(copy_then_scale).with_perf({M});
  add("slice", {{{5, 4}}}, [](V x) { return slice(x[0], 0, 1, 4) * slice(x[0], 0, 2, 5); })
      .with_flops([](S s) {
        double o = 3 * double(s[0][1]);  // rows 1-3 times rows 2-4
        return Flops{o, 2 * o + n(s[0])};  // the two slices' gradients (zero-padded copies) added at x's size
      })
      .with_perf({{5, 1 << 18}});
  // Strided copies (ops/copy_plan.h): rows, and at these sizes the general kernel (test_copy
  // runs the tiled transposes at theirs); their gradients are strided copies too.
  add("transpose_rows_contiguous", {{{3, 4, 5}}}, [](V x) { return contiguous(transpose(x[0], 0, 1)) * 2.0; })
      .with_flops(copy_then_scale).with_perf({{64, 128, 128}});
  add("transpose_5d_contiguous", {{{2, 3, 2, 4, 3}}},
      [](V x) { return contiguous(transpose(transpose(x[0], 0, 3), 1, 4)) * 2.0; })
      .with_flops(copy_then_scale).with_perf({{8, 16, 8, 32, 16}});
  add("slice_transpose_contiguous", {{{4, 7}}}, [](V x) { return contiguous(transpose(slice(x[0], 1, 1, 6), 0, 1)) * 2.0; })
      .with_flops([](S s) { double o = double(s[0][0]) * 5; return Flops{o, o}; })
      .with_perf({{4096, 7}});
  // Embedding: int32 ids in [0, 6), more ids than rows so some repeat (their gradients add up);
  // E = 8 takes the float4 path on CUDA. A gather counts 0; its backward adds each gradient row
  // into the table's (1 per element). It moves the ids, the rows it reads and the rows it writes.
  auto emb = [](S s) { return Flops{0, n(s[0]) * double(s[1][1])}; };
  auto emb_bytes = [](S s, const Shape& out, double elem) { return 4 * n(s[0]) + 2 * n(out) * elem; };
  const Shapes emb_perf{{256, 256}, {50000, 64}};
  add("embedding_1d", {{{7}, Kind::Labels, 6}, {{6, 4}}}, [](V x) { return embedding(x[0], x[1]); })
      .with_flops(emb).with_bytes(emb_bytes).with_perf({{65536}, {50000, 64}});
  add("embedding_2d", {{{3, 5}, Kind::Labels, 6}, {{6, 4}}}, [](V x) { return embedding(x[0], x[1]); })
      .with_flops(emb).with_bytes(emb_bytes).with_perf(emb_perf);
  add("embedding_2d_vec4", {{{3, 5}, Kind::Labels, 6}, {{6, 8}}}, [](V x) { return embedding(x[0], x[1]); })
      .with_flops(emb).with_bytes(emb_bytes).with_perf(emb_perf);
  // fastText's pattern: the mean over positions, whose gradient reaches the embedding as a view with
  // stride 0 along them (read in place); E = 6 takes the float2 path on CUDA.
  add("embedding_mean_dim1_vec2", {{{3, 5}, Kind::Labels, 6}, {{6, 6}}}, [](V x) { return mean(embedding(x[0], x[1]), 1); })
      .with_flops([](S s) {
        double rows = n(s[0]) * double(s[1][1]);  // N*T*E
        return Flops{rows, double(s[0][0]) * double(s[1][1]) + rows};
      })
      .with_bytes([](S s, const Shape& out, double elem) { return 4 * n(s[0]) + n(s[0]) * double(s[1][1]) * elem + n(out) * elem; })
      .with_perf({{256, 256}, {50000, 50}});
  // cat copies (0); the product of two cats: 1 per element, 2 in the backward, and each input's
  // two gradients added.
  add("cat_dim0", {{{2, 3}}, {{4, 3}}}, [](V x) { return cat({x[0], x[1]}, 0); })
      .with_flops([](S) { return Flops{}; }).with_perf({{512, 1024}, {512, 1024}});
  add("cat_dim1_3d", {{{2, 3, 4}}, {{2, 1, 4}}}, [](V x) { return cat({x[0], x[1]}, 1); })
      .with_flops([](S) { return Flops{}; }).with_perf({{64, 96, 128}, {64, 32, 128}});
  // nn::Merge (nn/graph.h), a functional model's merges of three inputs: Maximum is a + relu(b - a)
  // per input after the first (3 forward; backward: relu's 1, the subtraction's negated gradient
  // and the first's two gradients added), Minimum a - relu(a - b) (one negation more), Average two
  // adds and a scale (the scale's gradient the only FLOP back).
  auto merge3 = [](nn::MergeOp op) {
    return [op](V x) { return nn::Merge(op).forward_many({x[0], x[1], x[2]}); };
  };
  add("merge_maximum", {{{4, 5}}, {{4, 5}}, {{4, 5}}}, merge3(nn::MergeOp::Maximum))
      .with_flops(fl::per_element(6, 6)).with_perf({M, M, M});
  add("merge_minimum", {{{4, 5}}, {{4, 5}}, {{4, 5}}}, merge3(nn::MergeOp::Minimum))
      .with_flops(fl::per_element(6, 8)).with_perf({M, M, M});
  add("merge_average", {{{3, 2, 4}}, {{3, 2, 4}}, {{3, 2, 4}}}, merge3(nn::MergeOp::Average))
      .with_flops(fl::per_element(3, 1)).with_perf({M, M, M});
  add("cat_three_last_dim", {{{3, 2}}, {{3, 4}}, {{3, 1}}},
      [](V x) { return cat({x[0], x[1], x[2]}, -1) * cat({x[2], x[1], x[0]}, 1); })
      .with_flops([](S s) {
        double o = n(s[0]) + n(s[1]) + n(s[2]);
        return Flops{o, 2 * o + o};
      })
      .with_perf({{4096, 64}, {4096, 128}, {4096, 64}});
  auto conv = [](int sh, int sw, int ph, int pw) {
    return [=](V x) {
      Conv2dParams p;
      p.stride_h = sh; p.stride_w = sw; p.pad_h = ph; p.pad_w = pw;
      return conv2d(x[0], x[1], p);
    };
  };
  auto conv_flops = [](int sh, int sw, int ph, int pw) {
    return [=](S s) {
      Conv2dParams p;
      p.stride_h = sh; p.stride_w = sw; p.pad_h = ph; p.pad_w = pw;
      return fl::conv(s[0], s[1], p);
    };
  };
  const Shapes conv_perf{{32, 32, 32, 32}, {64, 32, 3, 3}};
  add("conv2d_valid", {{{2, 3, 6, 5}}, {{4, 3, 3, 3}}}, conv(1, 1, 0, 0)).with_flops(conv_flops(1, 1, 0, 0)).with_perf(conv_perf);
  add("conv2d_same", {{{2, 2, 5, 5}}, {{3, 2, 3, 3}}}, conv(1, 1, 1, 1)).with_flops(conv_flops(1, 1, 1, 1)).with_perf(conv_perf);
  add("conv2d_stride2_odd", {{{1, 3, 7, 9}}, {{2, 3, 3, 2}}}, conv(2, 2, 1, 0)).with_flops(conv_flops(2, 2, 1, 0))
      .with_perf({{32, 32, 63, 65}, {64, 32, 3, 2}});
  add("conv2d_explicit_pad", {{{2, 1, 4, 6}}, {{2, 1, 1, 3}}}, conv(1, 2, 2, 1)).with_flops(conv_flops(1, 2, 2, 1))
      .with_perf({{64, 1, 64, 64}, {32, 1, 1, 3}});
  // conv, bias add and relu: the bias add and relu 1 per output element each way.
  auto conv_bias_relu = [](S s) {
    Conv2dParams p;
    p.pad_h = p.pad_w = 1;
    Shape y;
    Flops f = fl::conv(s[0], s[1], p, &y);
    return f + Flops{2 * n(y), 2 * n(y)};
  };
  add("conv2d_bias_relu", {{{2, 2, 5, 4}}, {{3, 2, 3, 3}}, {{3}}},
      [](V x) { Conv2dParams p; p.pad_h = p.pad_w = 1; return relu(bias_add(conv2d(x[0], x[1], p), x[2])); })
      .with_flops(conv_bias_relu).with_perf({{32, 32, 32, 32}, {64, 32, 3, 3}, {64}});
  // The same as one op (on CUDA one cuDNN kernel where its runtime fusion has one): NCHW and
  // channels-last, with relu and with the bias alone.
  add("conv2d_bias_act_relu", {{{2, 2, 5, 4}}, {{3, 2, 3, 3}}, {{3}}}, [](V x) {
        Conv2dParams p; p.pad_h = p.pad_w = 1; return conv2d_bias_act(x[0], x[1], x[2], p, Act::Relu, 0.0, true); })
      .with_flops(conv_bias_relu).with_perf({{32, 32, 32, 32}, {64, 32, 3, 3}, {64}});
  add("conv2d_bias_act_channels_last", {{{2, 4, 5, 6}}, {{8, 4, 3, 3}}, {{8}}}, [](V x) {
        Conv2dParams p; p.pad_h = p.pad_w = 1;
        return conv2d_bias_act(contiguous(x[0], MemoryFormat::ChannelsLast), x[1], x[2], p, Act::Relu, 0.0, true); })
      .with_flops(conv_bias_relu).with_perf({{32, 32, 32, 32}, {64, 32, 3, 3}, {64}});
  add("conv2d_bias_act_no_activation", {{{2, 3, 6, 5}}, {{4, 3, 3, 3}}, {{4}}}, [](V x) {
        Conv2dParams p; p.pad_h = 1;
        return conv2d_bias_act(contiguous(x[0], MemoryFormat::ChannelsLast), x[1], x[2], p, std::nullopt, 0.0, true); })
      .with_flops([=](S s) {
        Conv2dParams p;
        p.pad_h = 1;
        Shape y;
        Flops f = fl::conv(s[0], s[1], p, &y);
        return f + Flops{n(y), n(y)};
      }).with_perf({{32, 32, 32, 32}, {64, 32, 3, 3}, {64}});
  // A first layer: x (an image, [0, 1)) needs no gradient, so the backward is the filter's and the
  // bias's alone (on CUDA one pass over the output's gradient where it times faster).
  add("conv2d_bias_act_first_layer", {{{2, 3, 9, 10}, Kind::Targets01}, {{8, 3, 3, 3}}, {{8}}}, [](V x) {
        Conv2dParams p; p.pad_h = p.pad_w = 1;
        // the image in the layer's dtype, as a model's input is cast before its first layer
        const Tensor img = contiguous(to(x[0], x[1].dtype()), MemoryFormat::ChannelsLast);
        return conv2d_bias_act(img, x[1], x[2], p, Act::Relu, 0.0, true); })
      .with_flops([](S s) {
        Conv2dParams p;
        p.pad_h = p.pad_w = 1;
        Shape y;
        Flops f = fl::conv(s[0], s[1], p, &y);
        return Flops{f.forward + 2 * n(y), f.backward / 2 + 2 * n(y)};  // no data gradient
      }).with_perf({{128, 3, 32, 32}, {32, 3, 3, 3}, {32}});
  auto pool = [](bool max, int k, int s, int pad) {
    return [=](V x) {
      Pool2dParams p;
      p.kernel_h = p.kernel_w = k; p.stride_h = p.stride_w = s; p.pad_h = p.pad_w = pad;
      return max ? max_pool2d(x[0], p) : avg_pool2d(x[0], p);
    };
  };
  auto pool_flops = [](int k, int s, int pad, bool drop = false) {
    return [=](S sh) {
      Pool2dParams p;
      p.kernel_h = p.kernel_w = k; p.stride_h = p.stride_w = s; p.pad_h = p.pad_w = pad;
      return fl::pool(sh[0], p, drop);
    };
  };
  const Shapes pool_perf{{32, 64, 64, 64}};
  add("max_pool2d_2x2", {{{2, 3, 6, 6}}}, pool(true, 2, 2, 0)).with_flops(pool_flops(2, 2, 0)).with_perf(pool_perf);
  add("max_pool2d_2x2_odd_edge", {{{2, 2, 5, 7}}}, pool(true, 2, 2, 0)).with_flops(pool_flops(2, 2, 0))
      .with_perf({{32, 64, 63, 65}});
  add("max_pool2d_2x2_s3_gaps", {{{1, 2, 8, 8}}}, pool(true, 2, 3, 1)).with_flops(pool_flops(2, 3, 1)).with_perf(pool_perf);
  add("max_pool2d_3x3_s2_pad1_odd", {{{1, 2, 7, 5}}}, pool(true, 3, 2, 1)).with_flops(pool_flops(3, 2, 1))
      .with_perf({{32, 64, 63, 65}});
  add("avg_pool2d_2x2", {{{2, 2, 4, 6}}}, pool(false, 2, 2, 0)).with_flops(pool_flops(2, 2, 0)).with_perf(pool_perf);
  add("avg_pool2d_3x3_s1_pad1", {{{1, 2, 5, 5}}}, pool(false, 3, 1, 1)).with_flops(pool_flops(3, 1, 1)).with_perf(pool_perf);
  // A mean over H*W: 1 per element; its gradient scaled on the small side (1 per [N, C]).
  add("global_avg_pool", {{{2, 3, 4, 5}}}, [](V x) { return global_avg_pool(x[0]); })
      .with_flops([](S s) { return Flops{n(s[0]), double(s[0][0] * s[0][1])}; }).with_perf(pool_perf);
  // Channels-last (NHWC) inputs: the same values, another memory order, through every op that has
  // a channels-last path (conv, bias_add, activations, pooling, dropout, the channel sum).
  const MemoryFormat CL = MemoryFormat::ChannelsLast;
  add("conv2d_channels_last", {{{2, 3, 6, 5}}, {{4, 3, 3, 3}}}, [=](V x) {
        Conv2dParams p; p.pad_h = 1; return conv2d(contiguous(x[0], CL), x[1], p); })
      .with_flops(conv_flops(1, 1, 1, 0)).with_perf(conv_perf);
  add("conv2d_channels_last_one_channel", {{{2, 1, 5, 5}}, {{3, 1, 3, 3}}},
      [=](V x) { return conv2d(contiguous(x[0], CL), x[1], Conv2dParams{}); })
      .with_flops(conv_flops(1, 1, 0, 0)).with_perf({{64, 1, 64, 64}, {32, 1, 3, 3}});
  add("conv_bias_relu_pool_channels_last", {{{2, 3, 6, 6}}, {{4, 3, 3, 3}}, {{4}}}, [=](V x) {
        Conv2dParams p; p.pad_h = p.pad_w = 1;
        Pool2dParams q;
        return flatten(max_pool2d(relu(bias_add(conv2d(contiguous(x[0], CL), x[1], p), x[2])), q), 1); })
      .with_flops([=](S s) {
        Conv2dParams p;
        p.pad_h = p.pad_w = 1;
        Shape y;
        Flops f = conv_bias_relu(s);
        fl::conv(s[0], s[1], p, &y);
        return f + fl::pool(y, Pool2dParams{});
      })
      .with_perf({{32, 32, 32, 32}, {64, 32, 3, 3}, {64}});
  add("max_pool2d_channels_last_overlap", {{{2, 3, 7, 5}}}, [=](V x) {
        Pool2dParams q; q.kernel_h = q.kernel_w = 3; q.pad_h = q.pad_w = 1;
        return max_pool2d(contiguous(x[0], CL), q); })
      .with_flops(pool_flops(3, 2, 1)).with_perf({{32, 64, 63, 65}});
  add("avg_pool2d_channels_last", {{{2, 3, 4, 6}}}, [=](V x) { return avg_pool2d(contiguous(x[0], CL), Pool2dParams{}); })
      .with_flops(pool_flops(2, 2, 0)).with_perf(pool_perf);
  add("sigmoid_dropout_channels_last", {{{2, 4, 3, 3}}}, [=](V x) {
        manual_seed(42); return dropout(sigmoid(contiguous(x[0], CL)), 0.3, true); })
      .with_flops(fl::per_element(4 + 1, 3 + 1)).with_perf({{32, 64, 32, 16}});
  add("bias_add_channels_last_vec4", {{{2, 4, 3, 3}}, {{4}}}, [=](V x) { return bias_add(contiguous(x[0], CL), x[1]); })
      .with_flops(bias).with_perf({{32, 64, 32, 16}, {64}});
  add("sum_except_channels_last", {{{3, 4, 2, 5}}}, [=](V x) { return sum_except(contiguous(x[0], CL), 1); })
      .with_flops(fl::per_element(1, 0)).with_perf({{32, 64, 32, 16}});
  // The fused epilogue (ops/bias_act.h): [rows, C] with C a power of two (the bias gradient
  // reduced in its backward kernel), channels-last, NCHW and odd channel counts (sum_except).
  // The separate ops' counts: bias 1 (its gradient a sum, 1), relu 1 (1), sigmoid and tanh 4 (3),
  // dropout 1 (1).
  auto ba = [](std::optional<Act> act, double p, bool cl) {
    return [=](V x) {
      manual_seed(42);
      return bias_act(cl ? contiguous(x[0], MemoryFormat::ChannelsLast) : x[0], x.size() > 1 ? x[1] : Tensor(), act, p, true);
    };
  };
  auto ba_flops = [](std::optional<Act> act, double p, bool has_bias) {
    double fwd = (has_bias ? 1 : 0) + (p > 0 ? 1 : 0), bwd = fwd;
    if (act) {
      fwd += *act == Act::Relu ? 1 : 4;
      bwd += *act == Act::Relu ? 1 : 3;
    }
    return fl::per_element(fwd, bwd);
  };
  add("bias_act_relu_dropout_rows", {{{8, 16}}, {{16}}}, ba(Act::Relu, 0.3, false))
      .with_flops(ba_flops(Act::Relu, 0.3, true)).with_perf({{1024, 1024}, {1024}});
  add("bias_act_relu_channels_last", {{{2, 8, 3, 3}}, {{8}}}, ba(Act::Relu, 0.0, true))
      .with_flops(ba_flops(Act::Relu, 0.0, true)).with_perf({{32, 64, 32, 16}, {64}});
  add("bias_act_relu_dropout_channels_last", {{{2, 4, 3, 5}}, {{4}}}, ba(Act::Relu, 0.25, true))
      .with_flops(ba_flops(Act::Relu, 0.25, true)).with_perf({{32, 64, 32, 16}, {64}});
  add("bias_act_tanh_nchw", {{{2, 3, 2, 4}}, {{3}}}, ba(Act::Tanh, 0.0, false))
      .with_flops(ba_flops(Act::Tanh, 0.0, true)).with_perf({{32, 64, 32, 16}, {64}});
  add("bias_act_sigmoid_odd", {{{5, 7}}, {{7}}}, ba(Act::Sigmoid, 0.0, false))
      .with_flops(ba_flops(Act::Sigmoid, 0.0, true)).with_perf({{1023, 1023}, {1023}});
  add("bias_act_dropout_no_bias", {{{6, 9}}}, ba(std::nullopt, 0.4, false))
      .with_flops(ba_flops(std::nullopt, 0.4, false)).with_perf({M});
  // A Linear layer with its epilogue in one op (ops/fused/linear_act.h): the product, the bias (in the
  // GEMM's epilogue where the backend has one) and the activation and dropout; the counts are the
  // separate ops' (ba_flops above).
  auto la = [](std::optional<Act> act, double p) {
    return [=](V x) {
      manual_seed(42);
      return linear_act(x[0], x[1], x.size() > 2 ? x[2] : Tensor(), act, p, true);
    };
  };
  auto la_flops = [=](std::optional<Act> act, double p, bool has_bias) {
    return [=](S s) {
      double B = double(s[0][0]), O = double(s[1][0]), I = double(s[0][1]);
      Flops e = ba_flops(act, p, has_bias)(Shapes{Shape{int64_t(B), int64_t(O)}});
      return fl::gemm(B, O, I) + e;
    };
  };
  add("linear_act_relu_dropout", {{{6, 5}}, {{8, 5}}, {{8}}}, la(Act::Relu, 0.3))
      .with_flops(la_flops(Act::Relu, 0.3, true)).with_perf({{1024, 784}, {512, 784}, {512}});
  add("linear_act_odd_no_act", {{{5, 7}}, {{3, 7}}, {{3}}}, la(std::nullopt, 0.0))
      .with_flops(la_flops(std::nullopt, 0.0, true)).with_perf({{1024, 512}, {10, 512}, {10}});
  // A classifier head past 256 rows: on CUDA narrow_backward's row shares (10 of them, the last
  // partial) and their fixed-order sums.
  add("linear_act_narrow_300_rows", {{{300, 8}}, {{10, 8}}, {{10}}}, la(std::nullopt, 0.0))
      .with_flops(la_flops(std::nullopt, 0.0, true)).with_perf({{1024, 128}, {10, 128}, {10}});
  add("linear_act_tanh_no_bias", {{{4, 6}}, {{5, 6}}}, la(Act::Tanh, 0.0))
      .with_flops(la_flops(Act::Tanh, 0.0, false)).with_perf({{1024, 512}, {512, 512}});
  // A stack of Linear layers as one op (ops/fused/mlp.h): on CUDA in 16 bits the fused kernels (here x has
  // no gradient, as a model's input: Targets01, values in [0, 1) as images'; an input with one, a
  // dense head's, is test_mlp's), elsewhere linear_act per layer; the counts are linear_act's.
  // 3 rows: one cluster, partly empty.
  auto stack = [](V x) {
    manual_seed(42);
    // x in the weights' dtype (the 16-bit tests keep an input without a gradient float32)
    return mlp(to(x[0], x[1].dtype()), {MlpLayer{x[1], x[2], true, 0.3}, MlpLayer{x[3], x[4], false, 0.0}}, true);
  };
  add("mlp_relu_dropout_head", {{{3, 16}, Kind::Targets01}, {{128, 16}}, {{128}}, {{4, 128}}, {{4}}}, stack)
      .with_flops([=](S s) {
        const Shape h{s[0][0], s[1][0]};
        const Flops no_dx{0, -2.0 * double(s[0][0] * s[1][0] * s[0][1])};  // x needs no gradient
        return la_flops(Act::Relu, 0.3, true)({s[0], s[1]}) + no_dx + la_flops(std::nullopt, 0.0, true)({h, s[3]});
      })
      .with_perf({{1024, 784}, {512, 784}, {512}, {10, 512}, {10}}).with_adjust(relu_margin(0, 1, 2));
  // Max pooling with its dropout (the CUDA kernels for channels-last disjoint windows, the CPU's for
  // NCHW ones; elsewhere pool then dropout).
  auto pool_drop = [=](int C_last, double p) {
    return [=](V x) {
      manual_seed(42);
      Pool2dParams q;
      return max_pool2d(C_last ? contiguous(x[0], CL) : x[0], q, p, true);
    };
  };
  add("max_pool2d_dropout_channels_last", {{{2, 8, 6, 4}}}, pool_drop(1, 0.3))
      .with_flops(pool_flops(2, 2, 0, true)).with_perf(pool_perf);
  add("max_pool2d_channels_last_vec_odd_edge", {{{2, 8, 5, 7}}}, pool_drop(1, 0.0))
      .with_flops(pool_flops(2, 2, 0)).with_perf({{32, 64, 63, 65}});
  add("max_pool2d_dropout_nchw", {{{2, 3, 4, 4}}}, pool_drop(0, 0.3)).with_flops(pool_flops(2, 2, 0, true)).with_perf(pool_perf);
  add("max_pool2d_3x3_dropout_nchw_odd_edge", {{{2, 2, 7, 8}}}, [](V x) {
        Pool2dParams q; q.kernel_h = q.kernel_w = q.stride_h = q.stride_w = 3;
        manual_seed(42); return max_pool2d(x[0], q, 0.3, true); })
      .with_flops(pool_flops(3, 3, 0, true)).with_perf({{32, 64, 63, 65}});
  add("channels_last_round_trip", {{{3, 5, 4, 3}}}, [=](V x) { return contiguous(contiguous(x[0], CL)) * 2.0; })
      .with_flops(copy_then_scale).with_perf({{32, 64, 32, 16}});
  auto bn = [](V x) {
    int64_t C = x[0].size(1);
    // The running statistics in the parameters' dtype (float32 beside half activations).
    Tensor rm = zeros(Shape{C}, x[1].dtype(), x[1].device()), rv = ones(Shape{C}, x[1].dtype(), x[1].device());
    return batch_norm(x[0], x[1], x[2], rm, rv, true, 0.1, 1e-5);
  };
  // Batch norm in training: 6 per element forward, 8 backward (ops/norm.cpp; flops.h has no entry).
  // Its scale and shift are float32 parameters beside half activations.
  const InputSpec gamma3{{3}, Kind::Float, 0, true};
  add("batch_norm_2d", {{{5, 3}}, gamma3, gamma3}, bn).with_flops(fl::per_element(6, 8))
      .with_perf({{4096, 256}, {256}, {256}});
  add("batch_norm_4d", {{{2, 3, 4, 5}}, gamma3, gamma3}, bn).with_flops(fl::per_element(6, 8))
      .with_perf({{32, 64, 32, 16}, {64}, {64}});
  add("mlp_chain", {{{4, 6}}, {{5, 6}}, {{5}}, {{3, 5}}, {{4}, Kind::Labels, 3}},
      [](V x) {
        Tensor h = relu(linear(x[0], x[1], x[2]));
        return cross_entropy(matmul(h, transpose(x[3], 0, 1)), x[4]);
      })
      .with_flops([](S s) {
        double B = double(s[0][0]), I = double(s[0][1]), H = double(s[1][0]), O = double(s[3][0]);
        return fl::gemm(B, H, I) + Flops{2 * B * H, 2 * B * H} + fl::gemm(B, O, H) + Flops{4 * B * O, 4 * B * O};
      })
      .with_perf({{512, 784}, {512, 784}, {512}, {10, 512}, {512}});
  // LSTM: every output feeds the loss, so the gradient flows through y, h and c alike. flops.h
  // has no LSTM entry; ops/lstm/lstm.cpp counts by its conventions, per pseudo-layer (layer, direction):
  // the GEMMs 2*N*T*4H*(in + H), and 32H per row and step besides (30H in the backward, which
  // runs the GEMMs twice: the data and the weight gradients). The loss: y*y and c*c (1 each, 2 in
  // the backward and the two gradients added), three sums (1) and two scalar adds.
  auto lstm_case = [](LstmParams p) {
    return [p](V x) {
      LstmResult r = lstm(x[0], x[1], p, true);
      return sum(r.y * r.y) + sum(r.h) + sum(r.c * r.c);
    };
  };
  auto lstm_flops = [](LstmParams p) {
    return [p](S s) {
      double N = double(s[0][0]), T = double(s[0][1]), H = double(p.hidden_size), D = p.directions(), gemm = 0;
      for (int l = 0; l < p.num_layers; ++l) {
        double in = double(l == 0 ? p.input_size : p.directions() * p.hidden_size);
        gemm += D * 2 * N * T * 4 * H * (in + H);
      }
      double rows = p.num_layers * D * N * T * H;
      double ny = N * T * D * H, nhc = p.num_layers * D * N * H;
      return Flops{gemm + 32 * rows + 2 * ny + nhc + 2 * nhc + 2, 2 * gemm + 30 * rows + 3 * ny + 3 * nhc};
    };
  };
  // cuDNN's persistent LSTM kernel is accurate to ~1e-5 relative in float32 (test_ops_cuda's
  // CudaLstm measures it against float64): 4 times the default float32 tolerance.
  Tolerances lstm_tol;
  lstm_tol.f32_atol *= 4;
  lstm_tol.f32_rtol *= 4;
  LstmParams one{4, 5};
  add("lstm_1layer", {{{2, 3, 4}}, {{lstm_weight_count(one)}}}, lstm_case(one))
      .with_flops(lstm_flops(one)).with_tol(lstm_tol).with_perf({{64, 32, 4}, {lstm_weight_count(one)}});
  LstmParams two{2, 3, 2, true};
  add("lstm_2layer_bidirectional", {{{3, 4, 2}}, {{lstm_weight_count(two)}}}, lstm_case(two))
      .with_flops(lstm_flops(two)).with_tol(lstm_tol).with_perf({{64, 32, 2}, {lstm_weight_count(two)}});

  // Not run in 16 bits: losses (the trainer computes them in float32, cross-entropy reading 16-bit
  // logits as their float32 cast: test_ops_half's HalfLoss checks that bit for bit) and the
  // embedding lookup (the table stays float32; nn::Embedding casts its output).
  for (OpCase& k : c) {
    const std::string& nm = k.name;
    if (nm == "cross_entropy" || nm == "bce_with_logits" || nm.rfind("mean_squared_error", 0) == 0 || nm == "mlp_chain" ||
        nm.rfind("embedding_", 0) == 0)
      k.tol.f16 = k.tol.bf16 = std::nullopt;
  }
  // The ops with a path for large inputs, again at +-[80, 880]: the log-sum-exp's shift by the
  // row's max (softmax, log_softmax, cross_entropy), log(1 + e^-|x|) and a sigmoid through e^-x
  // (bce_with_logits, sigmoid, softplus, silu), saturation (sigmoid, tanh, elu, selu, gelu). e^x
  // overflows float32 past 88 and float64 past 709: an exp the stable form avoids makes an inf or
  // a NaN in test_ops_grad's float32 pass (OpFinite) and, for the largest inputs, its float64
  // gradient check (gelu's e^(-x^2/2) underflows to 0 instead, harmlessly). Central
  // differences take a wider step, as outputs reach 10^3. float32 holds a log-sum-exp near 10^3
  // to 2^-24 * 1024, which each probability carries relative to itself (and log_softmax's
  // gradient times its row's sum of output gradients): 10 times the default rtol for the parity.
  // The 16-bit cases stay as the ops' own (float16 and bfloat16 hold 880; the losses have none).
  for (const char* name : {"softmax", "log_softmax", "cross_entropy", "bce_with_logits", "sigmoid", "tanh", "softplus",
                           "elu", "selu", "silu", "gelu"}) {
    OpCase k = *std::find_if(c.begin(), c.end(), [&](const OpCase& o) { return o.name == name; });
    k.name += "_large";
    k.scale = 800;
    k.tol.f64_eps = 1e-4;
    k.tol.f32_rtol *= 10;
    c.push_back(std::move(k));
  }
  return c;
}

}  // namespace loupe::test
