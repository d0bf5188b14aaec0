// The LSTM op on the CPU against the gate equations and a naive reference, its dropout, its errors,
// and the nn::LSTM module's Keras-style initialisation.
#include <gtest/gtest.h>

#include <cmath>

#include "loupe.h"
#include "core/thread_pool.h"
#include "nn/recurrent.h"
#include "ops/lstm/lstm.h"
#include "ops/lstm/lstm_gates_cpu.h"

using namespace loupe;

namespace {

// Deterministic values in [-scale, scale].
std::vector<double> values(int64_t n, uint64_t seed, double scale = 1.0) {
  std::vector<double> v(size_t(n), 0.0);
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = scale * (2.0 * philox_uniform(seed, 0, uint64_t(i)) - 1.0);
  return v;
}

double sigm(double a) { return 1.0 / (1.0 + std::exp(-a)); }
// The gates i, f, o as ops/lstm/lstm.h defines them: the sigmoid, or Keras's hard_sigmoid.
double gate(double a, double slope) { return slope == 0 ? sigm(a) : std::min(1.0, std::max(0.0, slope * a + 0.5)); }
double gate_slope(double y, double slope) { return slope == 0 ? y * (1 - y) : y > 0 && y < 1 ? slope : 0.0; }

// A naive LSTM straight from the equations in ops/lstm/lstm.h (no dropout), in double.
struct Ref {
  std::vector<double> y, h, c;
};
Ref reference(const std::vector<double>& x, const std::vector<double>& w, const LstmParams& p, int64_t N, int64_t T) {
  const int64_t H = p.hidden_size, D = p.directions(), LD = p.num_layers * D;
  Ref r;
  r.h.assign(size_t(LD * N * H), 0.0);
  r.c.assign(size_t(LD * N * H), 0.0);
  std::vector<double> in = x;
  int64_t in_size = p.input_size;
  for (int l = 0; l < p.num_layers; ++l) {
    std::vector<double> out(size_t(N * T * D * H), 0.0);
    for (int d = 0; d < D; ++d) {
      LstmLayerOffsets o = lstm_layer_offsets(p, l, d);
      for (int64_t n = 0; n < N; ++n) {
        std::vector<double> h(size_t(H), 0.0), c(size_t(H), 0.0), a(size_t(4 * H), 0.0);
        for (int64_t s = 0; s < T; ++s) {
          int64_t t = d == 0 ? s : T - 1 - s;
          for (int64_t k = 0; k < 4 * H; ++k) {
            double v = w[size_t(o.b_w + k)] + w[size_t(o.b_r + k)];
            for (int64_t j = 0; j < in_size; ++j)
              v += w[size_t(o.w + k * in_size + j)] * in[size_t((n * T + t) * in_size + j)];
            for (int64_t j = 0; j < H; ++j) v += w[size_t(o.r + k * H + j)] * h[size_t(j)];
            a[size_t(k)] = v;
          }
          for (int64_t j = 0; j < H; ++j) {
            const double k = p.hard_slope;
            double ig = gate(a[size_t(j)], k), fg = gate(a[size_t(H + j)], k), gg = std::tanh(a[size_t(2 * H + j)]),
                   og = gate(a[size_t(3 * H + j)], k);
            c[size_t(j)] = fg * c[size_t(j)] + ig * gg;
            h[size_t(j)] = og * std::tanh(c[size_t(j)]);
            out[size_t((n * T + t) * D * H + d * H + j)] = h[size_t(j)];
          }
        }
        for (int64_t j = 0; j < H; ++j) {
          r.h[size_t(((l * D + d) * N + n) * H + j)] = h[size_t(j)];
          r.c[size_t(((l * D + d) * N + n) * H + j)] = c[size_t(j)];
        }
      }
    }
    in = out;
    in_size = D * H;
  }
  r.y = in;
  return r;
}

double max_diff(const Tensor& t, const std::vector<double>& v) {
  std::vector<double> a = t.to_vector<double>();
  EXPECT_EQ(a.size(), v.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < v.size(); ++i) m = std::max(m, std::abs(a[i] - v[i]));
  return m;
}

double max_diff(const Tensor& a, const Tensor& b) { return max_diff(a, b.to_vector<double>()); }

}  // namespace

TEST(Lstm, SingleStepMatchesTheGateEquations) {
  LstmParams p{3, 2};
  ASSERT_EQ(lstm_weight_count(p), 4 * 2 * (3 + 2) + 8 * 2);
  std::vector<double> xv{0.5, -1.0, 0.25}, wv = values(lstm_weight_count(p), 11);
  LstmResult r = lstm(from_vector(xv, Shape{1, 1, 3}), from_vector(wv, Shape{lstm_weight_count(p)}), p, false);
  // By hand: gate row k = W[k] . x + b_W[k] + b_R[k] (h_0 = 0, so R plays no part); c_0 = 0.
  const int64_t in = 3, H = 2, bw = 4 * H * in + 4 * H * H, br = bw + 4 * H;
  auto pre = [&](int64_t k) {
    double v = wv[size_t(bw + k)] + wv[size_t(br + k)];
    for (int64_t j = 0; j < in; ++j) v += wv[size_t(k * in + j)] * xv[size_t(j)];
    return v;
  };
  std::vector<double> h(2), c(2);
  for (int64_t j = 0; j < H; ++j) {
    double i = sigm(pre(j)), g = std::tanh(pre(2 * H + j)), o = sigm(pre(3 * H + j));
    c[size_t(j)] = i * g;  // + f * c_0 = 0
    h[size_t(j)] = o * std::tanh(c[size_t(j)]);
  }
  EXPECT_LT(max_diff(r.y, h), 1e-12);
  EXPECT_LT(max_diff(r.h, h), 1e-12);
  EXPECT_LT(max_diff(r.c, c), 1e-12);
  EXPECT_EQ(r.y.shape(), (Shape{1, 1, 2}));
  EXPECT_EQ(r.h.shape(), (Shape{1, 1, 2}));
}

TEST(Lstm, MatchesANaiveReference) {
  for (float slope : {0.f, 0.2f, 1.f / 6})
  for (bool bi : {false, true})
    for (int layers : {1, 2, 3}) {
      LstmParams p{5, 3, layers, bi};
      p.hard_slope = slope;
      const int64_t N = 2, T = 4;
      // hard_sigmoid's corners (|x| = 2.5 and 3) are passed only by larger weights.
      std::vector<double> xv = values(N * T * 5, 3), wv = values(lstm_weight_count(p), 4, slope ? 2.5 : 0.8);
      Ref ref = reference(xv, wv, p, N, T);
      for (DType dt : {DType::f64, DType::f32}) {
        Tensor x = to(from_vector(xv, Shape{N, T, 5}), dt), w = to(from_vector(wv, Shape{lstm_weight_count(p)}), dt);
        for (bool training : {false, true}) {
          LstmResult r = lstm(x, w, p, training);
          double tol = dt == DType::f64 ? 1e-12 : 2e-6;
          EXPECT_LT(max_diff(r.y, ref.y), tol) << layers << " layers, bidirectional " << bi << ", slope " << slope;
          EXPECT_LT(max_diff(r.h, ref.h), tol);
          EXPECT_LT(max_diff(r.c, ref.c), tol);
        }
      }
    }
}

TEST(Lstm, FinalStatesAreTheOutputsAtEachDirectionsLastStep) {
  LstmParams p{4, 3, 2, true};
  const int64_t N = 3, T = 5, H = 3;
  Tensor x = from_vector(values(N * T * 4, 5), Shape{N, T, 4});
  Tensor w = from_vector(values(lstm_weight_count(p), 6), Shape{lstm_weight_count(p)});
  LstmResult r = lstm(x, w, p, false);
  EXPECT_EQ(r.y.shape(), (Shape{N, T, 2 * H}));
  EXPECT_EQ(r.h.shape(), (Shape{4, N, H}));
  EXPECT_EQ(r.c.shape(), (Shape{4, N, H}));
  // The last layer's pseudo-layers are 2 (forward) and 3 (backward).
  Tensor fwd_last = reshape(slice(slice(r.y, 1, T - 1, T), 2, 0, H), Shape{N, H});
  Tensor bwd_first = reshape(slice(slice(r.y, 1, 0, 1), 2, H, 2 * H), Shape{N, H});
  EXPECT_EQ(max_diff(fwd_last, reshape(slice(r.h, 0, 2, 3), Shape{N, H})), 0.0);
  EXPECT_EQ(max_diff(bwd_first, reshape(slice(r.h, 0, 3, 4), Shape{N, H})), 0.0);
  // And not the other way round (the test can tell the directions apart).
  EXPECT_GT(max_diff(reshape(slice(slice(r.y, 1, 0, 1), 2, 0, H), Shape{N, H}), reshape(slice(r.h, 0, 2, 3), Shape{N, H})),
            1e-3);
}

TEST(Lstm, WeightLayoutFollowsTheFormula) {
  LstmParams p{5, 3, 2, true};
  const int64_t H = 3, per0 = 4 * H * (5 + H) + 8 * H, per1 = 4 * H * (2 * H + H) + 8 * H;
  EXPECT_EQ(lstm_weight_count(p), 2 * per0 + 2 * per1);
  LstmLayerOffsets a = lstm_layer_offsets(p, 0, 1), b = lstm_layer_offsets(p, 1, 0), c = lstm_layer_offsets(p, 1, 1);
  EXPECT_EQ(a.w, per0);
  EXPECT_EQ(a.in, 5);
  EXPECT_EQ(a.r, per0 + 4 * H * 5);
  EXPECT_EQ(a.b_w, a.r + 4 * H * H);
  EXPECT_EQ(a.b_r, a.b_w + 4 * H);
  EXPECT_EQ(b.w, 2 * per0);
  EXPECT_EQ(b.in, 2 * H);
  EXPECT_EQ(b.r, 2 * per0 + 4 * H * 2 * H);
  EXPECT_EQ(c.w, 2 * per0 + per1);
  EXPECT_EQ(c.b_r + 4 * H, lstm_weight_count(p));
  EXPECT_THROW(lstm_layer_offsets(p, 2, 0), Error);
  EXPECT_THROW(lstm_layer_offsets(p, 0, 2), Error);
}

TEST(Lstm, DropoutZeroIgnoresTraining) {
  LstmParams p{4, 3, 2, true};
  Tensor x = to(from_vector(values(2 * 3 * 4, 7), Shape{2, 3, 4}), DType::f32);
  Tensor w = to(from_vector(values(lstm_weight_count(p), 8), Shape{lstm_weight_count(p)}), DType::f32);
  LstmResult a = lstm(x, w, p, true), b = lstm(x, w, p, false);
  EXPECT_EQ(max_diff(a.y, b.y), 0.0);
  EXPECT_EQ(max_diff(a.h, b.h), 0.0);
  EXPECT_EQ(max_diff(a.c, b.c), 0.0);
}

TEST(Lstm, DropoutActsBetweenLayersInTrainingOnly) {
  LstmParams p{4, 6, 2, true, 0.5};
  Tensor x = to(from_vector(values(3 * 5 * 4, 9), Shape{3, 5, 4}), DType::f32);
  Tensor w = to(from_vector(values(lstm_weight_count(p), 10), Shape{lstm_weight_count(p)}), DType::f32);
  LstmParams none = p;
  none.dropout = 0;
  LstmResult eval = lstm(x, w, p, false), plain = lstm(x, w, none, true);
  EXPECT_EQ(max_diff(eval.y, plain.y), 0.0);
  manual_seed(123);
  LstmResult a = lstm(x, w, p, true), a2 = lstm(x, w, p, true);
  manual_seed(123);
  LstmResult b = lstm(x, w, p, true);
  EXPECT_GT(max_diff(a.y, eval.y), 1e-3);
  EXPECT_EQ(max_diff(a.y, b.y), 0.0);
  EXPECT_EQ(max_diff(a.h, b.h), 0.0);
  EXPECT_GT(max_diff(a.y, a2.y), 1e-3);  // the generator moved on
  // The same masks whether or not a backward pass will follow (the kernel keeps its state or not).
  Tensor wg = clone(w.detach());
  wg.requires_grad_(true);
  manual_seed(123);
  EXPECT_EQ(max_diff(lstm(x, wg, p, true).y, a.y), 0.0);
  // The first layer sees no dropout: its final states match evaluation's.
  EXPECT_EQ(max_diff(slice(a.h, 0, 0, 2), slice(eval.h, 0, 0, 2)), 0.0);
  // A single layer has nowhere to drop.
  LstmParams one = p;
  one.num_layers = 1;
  Tensor w1 = to(from_vector(values(lstm_weight_count(one), 10), Shape{lstm_weight_count(one)}), DType::f32);
  EXPECT_EQ(max_diff(lstm(x, w1, one, true).y, lstm(x, w1, one, false).y), 0.0);
}

// Gradients where the op's own cases (test_ops_grad) do not reach: dropout masks regenerated in
// backward, and outputs that receive no gradient at all.
TEST(Lstm, GradientsWithDropoutAndUnusedOutputs) {
  LstmParams p{3, 4, 2, true, 0.4};
  Tensor x = from_vector(values(2 * 4 * 3, 12), Shape{2, 4, 3});
  Tensor w = from_vector(values(lstm_weight_count(p), 13, 0.9), Shape{lstm_weight_count(p)});
  x.requires_grad_(true);
  w.requires_grad_(true);
  using V = const std::vector<Tensor>&;
  auto dropped = [&](V in) {
    manual_seed(5);
    return lstm(in[0], in[1], p, true).y;
  };
  autograd::GradcheckResult r = autograd::gradcheck(dropped, {x, w});
  EXPECT_TRUE(r.ok) << r.message;
  LstmParams q = p;
  q.dropout = 0;
  auto only_h = [&](V in) { return lstm(in[0], in[1], q, true).h; };
  r = autograd::gradcheck(only_h, {x, w});
  EXPECT_TRUE(r.ok) << r.message;
  auto only_c = [&](V in) { return lstm(in[0], in[1], q, true).c; };
  r = autograd::gradcheck(only_c, {x, w});
  EXPECT_TRUE(r.ok) << r.message;
  // Only the weights need a gradient.
  Tensor xc = x.detach();
  auto weights_only = [&](V in) { return lstm(xc, in[0], q, true).y; };
  r = autograd::gradcheck(weights_only, {w});
  EXPECT_TRUE(r.ok) << r.message;
}

// Keras's LSTM: hard_sigmoid gates of either slope (the pre-activations spread over [-4, 4] so
// that the gates cross both of its corners; the check's steps rarely straddle one), and one bias:
// b_R's gradient zero, so that it stays at zero under any optimizer, every other one unchanged.
TEST(Lstm, HardSigmoidAndOneBiasGradients) {
  for (float slope : {0.2f, 1.f / 6}) {
    LstmParams p{3, 4, 2, true};
    p.hard_slope = slope;
    Tensor x = from_vector(values(2 * 5 * 3, 41, 2.0), Shape{2, 5, 3});
    Tensor w = from_vector(values(lstm_weight_count(p), 42, 1.5), Shape{lstm_weight_count(p)});
    x.requires_grad_(true);
    w.requires_grad_(true);
    for (int out = 0; out < 3; ++out) {
      autograd::GradcheckResult r = autograd::gradcheck(
          [&](const std::vector<Tensor>& in) {
            LstmResult y = lstm(in[0], in[1], p, true);
            return out == 0 ? y.y : out == 1 ? y.h : y.c;
          },
          {x, w});
      EXPECT_TRUE(r.ok) << "slope " << slope << ", output " << out << ": " << r.message;
    }
    auto grads = [&](bool single) {
      LstmParams q = p;
      q.single_bias = single;
      Tensor wq = w.detach().requires_grad_(true);
      LstmResult y = lstm(x.detach(), wq, q, true);
      backward(sum(y.y) + sum(y.h));
      return wq.grad().to_vector<double>();
    };
    const std::vector<double> two = grads(false), one = grads(true);
    std::vector<bool> is_b_r(two.size(), false);
    for (int l = 0; l < 2; ++l)
      for (int d = 0; d < 2; ++d)
        for (int64_t k = 0, at = lstm_layer_offsets(p, l, d).b_r; k < 16; ++k) is_b_r[size_t(at + k)] = true;
    for (size_t i = 0; i < two.size(); ++i) {
      if (is_b_r[i]) EXPECT_EQ(one[i], 0.0) << "b_R has a gradient at " << i;
      else EXPECT_EQ(one[i], two[i]) << "element " << i;
    }
  }
}

// The CPU kernel gives each thread its own rows of the batch for the whole sequence: a batch that
// splits unevenly over threads must give the same outputs and gradients as one thread, and pass
// the gradient check while split.
TEST(Lstm, ThreadsSplittingTheBatchChangeNothing) {
  const int before = num_threads();
  LstmParams p{3, 5, 2, true, 0.3};
  const int64_t N = 9, T = 6;  // 3 threads: chunks of 5 and 4 rows (at least 4 rows a thread)
  Tensor x0 = from_vector(values(N * T * 3, 21), Shape{N, T, 3});
  Tensor w0 = from_vector(values(lstm_weight_count(p), 22, 0.8), Shape{lstm_weight_count(p)});
  auto run = [&](int threads) {
    set_num_threads(threads);
    Tensor x = x0.detach(), w = w0.detach();
    x.requires_grad_(true);
    w.requires_grad_(true);
    manual_seed(9);
    LstmResult r = lstm(x, w, p, true);
    backward(sum(r.y) + sum(r.h) * 0.5 + sum(r.c) * 0.25);
    return std::vector<Tensor>{r.y, r.h, r.c, x.grad(), w.grad()};
  };
  std::vector<Tensor> one = run(1), three = run(3);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_LT(max_diff(one[i], three[i]), 1e-13) << "output " << i;
  set_num_threads(3);
  Tensor x = x0.detach(), w = w0.detach();
  x.requires_grad_(true);
  w.requires_grad_(true);
  autograd::GradcheckResult g = autograd::gradcheck(
      [&](const std::vector<Tensor>& in) {
        manual_seed(9);
        return lstm(in[0], in[1], p, true).y;
      },
      {x, w});
  EXPECT_TRUE(g.ok) << g.message;
  set_num_threads(before);
}

// The float32 gate kernels (ops/lstm/lstm_gates_cpu.h), every variant this CPU runs, against the same
// math in float64: exp over its whole range, then one forward and one backward row with ordinary
// values, saturating values and (H = 37) a length that leaves a tail after every vector width.
TEST(LstmGates, EveryVariantMatchesFloat64) {
  auto variants = lstm_cpu::gate_kernel_variants();
  ASSERT_FALSE(variants.empty());
  EXPECT_STREQ(variants.back()->isa, "sse");
  EXPECT_EQ(&lstm_cpu::gate_kernels(), variants.front());
  for (const lstm_cpu::GateKernels* k : variants) {
    SCOPED_TRACE(k->isa);
    // exp: relative error within 2 ulps where the result is a normal float, clamped beyond.
    std::vector<float> x, y;
    for (double v = -87.0; v <= 88.0; v += 0.01) x.push_back(float(v));
    y.resize(x.size());
    k->exp(x.data(), y.data(), int64_t(x.size()));
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(y[i] / std::exp(double(x[i])) - 1.0));
    EXPECT_LT(worst, 2.5e-7);
    std::vector<float> ends{-1e30f, -1000.f, 1000.f, 1e30f, std::nanf("")}, ends_y(ends.size());
    k->exp(ends.data(), ends_y.data(), int64_t(ends.size()));
    EXPECT_LT(ends_y[0], 2e-38f);
    EXPECT_GT(ends_y[0], 0.f);
    EXPECT_LT(ends_y[1], 2e-38f);
    EXPECT_TRUE(std::isfinite(ends_y[2]) && ends_y[2] > 1e38f);
    EXPECT_TRUE(std::isfinite(ends_y[3]));
    EXPECT_TRUE(std::isnan(ends_y[4]));

    const int64_t H = 37;
    std::vector<double> pre = values(4 * H, 31, 6.0), bias = values(4 * H, 32), cp = values(H, 33, 2.0),
                        dy = values(H, 34), dh = values(H, 35), dc = values(H, 36);
    pre[0] = 200;  // saturated gates: sigmoid 1 and (nearly) 0, tanh -1
    pre[size_t(H)] = -200;
    pre[size_t(2 * H)] = -200;
    for (double slope : {0.0, 0.2})
    for (bool first : {false, true}) {
      SCOPED_TRACE(std::string(first ? "first step" : "later step") + (slope ? ", hard_sigmoid" : ""));
      // float64 reference of forward then backward, straight from the equations.
      std::vector<double> act(size_t(4 * H), 0.0), c(size_t(H), 0.0), h(size_t(H), 0.0), dg(size_t(4 * H), 0.0),
          dcp(size_t(H), 0.0);
      for (int64_t j = 0; j < H; ++j) {
        double i = gate(pre[size_t(j)] + bias[size_t(j)], slope), f = gate(pre[size_t(H + j)] + bias[size_t(H + j)], slope),
               u = std::tanh(pre[size_t(2 * H + j)] + bias[size_t(2 * H + j)]),
               o = gate(pre[size_t(3 * H + j)] + bias[size_t(3 * H + j)], slope);
        double cprev = first ? 0.0 : cp[size_t(j)];
        act[size_t(j)] = i, act[size_t(H + j)] = f, act[size_t(2 * H + j)] = u, act[size_t(3 * H + j)] = o;
        c[size_t(j)] = f * cprev + i * u;
        double tc = std::tanh(c[size_t(j)]);
        h[size_t(j)] = o * tc;
        double dhj = dy[size_t(j)] + dh[size_t(j)], dcj = dc[size_t(j)] + dhj * o * (1 - tc * tc);
        dg[size_t(j)] = dcj * u * gate_slope(i, slope);
        dg[size_t(H + j)] = dcj * cprev * gate_slope(f, slope);
        dg[size_t(2 * H + j)] = dcj * i * (1 - u * u);
        dg[size_t(3 * H + j)] = dhj * tc * gate_slope(o, slope);
        dcp[size_t(j)] = dcj * f;
      }
      auto f32 = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
      std::vector<float> g = f32(pre), b = f32(bias), cpf = f32(cp), cf(size_t(H), 0.f), hf(size_t(H), 0.f);
      k->forward(g.data(), b.data(), first ? nullptr : cpf.data(), cf.data(), hf.data(), H, float(slope));
      auto worst_of = [](const std::vector<float>& got, const std::vector<double>& want) {
        double m = 0;
        for (size_t i = 0; i < got.size(); ++i) m = std::max(m, std::abs(double(got[i]) - want[i]));
        return m;
      };
      EXPECT_LT(worst_of(g, act), 1e-6);
      EXPECT_LT(worst_of(cf, c), 1e-6);
      EXPECT_LT(worst_of(hf, h), 1e-6);
      EXPECT_EQ(g[0], 1.f);
      EXPECT_GE(g[size_t(H)], 0.f);  // 1 / (1 + e^88.3): a subnormal, not 0 (hard_sigmoid: 0)
      EXPECT_LT(g[size_t(H)], 1e-38f);
      EXPECT_EQ(g[size_t(2 * H)], -1.f);
      std::vector<float> dyf = f32(dy), dhf = f32(dh), dcf = f32(dc), dgf(size_t(4 * H), 0.f);
      k->backward(g.data(), cf.data(), first ? nullptr : cpf.data(), dyf.data(), dhf.data(), dcf.data(), dgf.data(), H,
                  float(slope));
      EXPECT_LT(worst_of(dgf, dg), 2e-6);
      EXPECT_LT(worst_of(dcf, dcp), 2e-6);
    }
  }
}

TEST(Lstm, RejectsBadArguments) {
  LstmParams p{4, 3};
  Tensor w = zeros(Shape{lstm_weight_count(p)});
  EXPECT_THROW(lstm(zeros(Shape{2, 4}), w, p, false), Error);          // not 3-D
  EXPECT_THROW(lstm(zeros(Shape{2, 3, 5}), w, p, false), Error);       // wrong input size
  EXPECT_THROW(lstm(zeros(Shape{2, 0, 4}), w, p, false), Error);       // no time steps
  EXPECT_THROW(lstm(zeros(Shape{2, 3, 4}), zeros(Shape{lstm_weight_count(p) + 1}), p, false), Error);
  EXPECT_THROW(lstm(zeros(Shape{2, 3, 4}), reshape(w, Shape{1, lstm_weight_count(p)}), p, false), Error);
  EXPECT_THROW(lstm(zeros(Shape{2, 3, 4}, DType::f64), w, p, false), Error);  // dtypes differ
  EXPECT_THROW(lstm(zeros(Shape{2, 3, 4}, DType::i32), zeros(Shape{lstm_weight_count(p)}, DType::i32), p, false),
               Error);
  LstmParams bad = p;
  bad.dropout = 1;
  EXPECT_THROW(lstm(zeros(Shape{2, 3, 4}), w, bad, true), Error);
  EXPECT_NO_THROW(lstm(zeros(Shape{2, 3, 4}), w, p, false));
}

TEST(LstmModule, KerasInitialisation) {
  manual_seed(21);
  nn::LSTM m(7, 5, 2, true);
  const int64_t H = 5;
  const LstmParams& p = m.params();
  EXPECT_EQ(m.num_parameters(), lstm_weight_count(p));
  // Keras counts one bias per pseudo-layer: 4H fewer each.
  int64_t keras = 2 * (4 * H * (7 + H) + 4 * H) + 2 * (4 * H * (2 * H + H) + 4 * H);
  EXPECT_EQ(m.num_parameters() - keras, 4 * 4 * H);
  EXPECT_EQ(m.type_name(), "LSTM(7 -> 5, 2 layers, bidirectional)");
  EXPECT_EQ(nn::LSTM(128, 64, 1, true).type_name(), "LSTM(128 -> 64, 1 layer, bidirectional)");
  EXPECT_EQ(m.named_parameters()[0].first, "weight");
  std::vector<float> w = m.weight.to_vector<float>();
  for (int l = 0; l < 2; ++l)
    for (int d = 0; d < 2; ++d) {
      LstmLayerOffsets o = lstm_layer_offsets(p, l, d);
      for (int64_t k = 0; k < 4 * H; ++k) {
        EXPECT_EQ(w[size_t(o.b_w + k)], k >= H && k < 2 * H ? 1.f : 0.f);
        EXPECT_EQ(w[size_t(o.b_r + k)], 0.f);
      }
      double a = std::sqrt(6.0 / double(o.in + 4 * H));
      double wmax = 0;
      for (int64_t k = 0; k < 4 * H * o.in; ++k) wmax = std::max(wmax, std::abs(double(w[size_t(o.w + k)])));
      EXPECT_LE(wmax, a);
      EXPECT_GT(wmax, 0.5 * a);
      // R [4H, H]: orthonormal columns.
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < H; ++j) {
          double dot = 0;
          for (int64_t k = 0; k < 4 * H; ++k) dot += double(w[size_t(o.r + k * H + i)]) * w[size_t(o.r + k * H + j)];
          EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-5) << "pseudo-layer " << l * 2 + d << " columns " << i << ", " << j;
        }
    }
  // Deterministic under manual_seed, different under another seed.
  manual_seed(21);
  nn::LSTM same(7, 5, 2, true);
  EXPECT_EQ(same.weight.to_vector<float>(), w);
  manual_seed(22);
  nn::LSTM other(7, 5, 2, true);
  EXPECT_NE(other.weight.to_vector<float>(), w);
}

TEST(LstmModule, RunsAndTrains) {
  manual_seed(3);
  nn::LSTM m(4, 6, 2, true, 0.3);
  Tensor x = to(from_vector(values(3 * 5 * 4, 16), Shape{3, 5, 4}), DType::f32);
  LstmResult r = m.run(x);
  EXPECT_EQ(r.y.shape(), (Shape{3, 5, 12}));
  EXPECT_EQ(r.h.shape(), (Shape{4, 3, 6}));
  EXPECT_EQ(r.c.shape(), (Shape{4, 3, 6}));
  m.eval();
  Tensor y0 = m.run(x).y, y1 = m(x);
  EXPECT_EQ(max_diff(y0, y1), 0.0);  // no dropout in evaluation
  m.train();
  backward(sum(m.run(x).h));
  ASSERT_TRUE(m.weight.grad().defined());
  EXPECT_EQ(m.weight.grad().shape(), m.weight.shape());
  std::vector<float> g = m.weight.grad().to_vector<float>();
  double norm = 0;
  for (float v : g) norm += double(v) * v;
  EXPECT_GT(norm, 0.0);
}
