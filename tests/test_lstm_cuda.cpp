// The LSTM on the GPU (ops/lstm/lstm_cuda.cu: cuDNN's algorithms, loupe's persistent and stepwise
// kernels) against the CPU's, in float32 and 16-bit, with sigmoid and hard_sigmoid gates. Skips
// with a message where there is no GPU (or no CUDA build).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "core/knobs.h"
#include "loupe.h"
#include "ops/lstm/lstm.h"

using namespace loupe;

// A macro: GTEST_SKIP must run in the test body itself to end the test.
#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (or a CPU-only build): GPU parity not run"

// cuDNN's LSTM against the CPU's: every output and both input gradients (x and the flat weights),
// small shapes and the reference models' sizes (imdb_bilstm: 128 -> 64 bidirectional; char_lstm:
// 57 -> 128). The algorithm and layout are those timed fastest, or forced by LOUPE_LSTM_ALGO and
// LOUPE_LSTM_LAYOUT (CTest runs this once per forced choice, see tests/CMakeLists.txt).
// What LOUPE_LSTM_ALGO and LOUPE_LSTM_LAYOUT force (CTest runs the LSTM parity once per choice)
// is what ran: every plan the process made (ops/lstm/lstm.h's lstm_cuda_plans). Without the check a
// choice that was silently ignored, or refused and replaced, passed its test under the other's name.
namespace {
void expect_forced_plans() {
  const std::vector<std::string> plans = lstm_cuda_plans();
  ASSERT_FALSE(plans.empty()) << "no CUDA LSTM was planned";
  const std::optional<std::string> algo_knob = knobs::choice("LOUPE_LSTM_ALGO"),
                                   layout_knob = knobs::choice("LOUPE_LSTM_LAYOUT");
  const char* algo = algo_knob ? algo_knob->c_str() : nullptr;
  const char* layout = layout_knob ? layout_knob->c_str() : nullptr;
  std::string all;
  for (const std::string& p : plans) all += " [" + p + "]";
  std::printf("lstm plans:%s\n", all.c_str());
  bool eight = false;
  for (const std::string& p : plans) {
    const std::string a = p.substr(0, p.find(' ')), l = p.substr(p.find(' ') + 1);
    eight = eight || a == "loupe8";
    if (algo) {
      const std::string want = algo;
      if (want == "loupe" || want == "loupe8") EXPECT_TRUE(a == "loupe16" || a == "loupe8") << p;
      else EXPECT_EQ(a, want) << p;
    }
    if (layout) EXPECT_EQ(l, layout) << p;
  }
  // loupe8 falls back to 16 rows only where 8 cannot run (hidden size 16): the other shapes take 8.
  if (algo && std::string(algo) == "loupe8") EXPECT_TRUE(eight) << "loupe8 forced, no plan of 8 rows:" << all;
}

// The largest |got - want| relative to the largest |want|: the error measure of the tests below.
double error_vs(const std::vector<double>& got, const std::vector<double>& want) {
  double mag = 0, err = 0;
  for (double v : want) mag = std::max(mag, std::abs(v));
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::abs(got[i] - want[i]) / mag);
  return err;
}
}  // namespace

TEST(CudaLstm, CudnnMatchesCpu) {
  REQUIRE_GPU();
  // input size, hidden size, layers, bidirectional
  const LstmParams configs[] = {{16, 24, 1, false}, {16, 24, 2, false}, {16, 24, 1, true}, {16, 24, 2, true},
                                {128, 64, 1, true}, {57, 128, 1, false}, {2, 3, 2, true}};
  for (const LstmParams& p : configs) {
    const int64_t N = 8, T = 30, I = p.input_size;
    std::vector<float> xv(size_t(N * T * I)), wv(size_t(lstm_weight_count(p)));
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = philox_uniform(1, 0, i) - 0.5f;
    // Weights of the size Keras' initialisers give (about 1 / sqrt(fan-in)), so gates do not saturate.
    const float scale = 0.4f * std::sqrt(24.f / float(p.input_size + p.hidden_size));
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = scale * (philox_uniform(2, 0, i) - 0.5f);
    // Outputs and gradients as doubles, from device d in dtype t.
    auto run = [&](Device d, DType t) {
      Tensor x = to(to(from_vector(xv, Shape{N, T, I}), t), d).detach().requires_grad_(true);
      Tensor w = to(to(from_vector(wv, Shape{int64_t(wv.size())}), t), d).detach().requires_grad_(true);
      LstmResult r = lstm(x, w, p, true);
      backward(sum(r.y * r.y));  // through y only: h and c get no gradient (the zero-dh path)
      Tensor x2 = to(to(from_vector(xv, Shape{N, T, I}), t), d).detach().requires_grad_(true);
      LstmResult r2 = lstm(x2, w.detach().requires_grad_(true), p, true);
      backward(sum(r2.h));  // through h only: y gets zeros
      return std::vector<std::vector<double>>{r.y.to_vector<double>(),      r.h.to_vector<double>(),
                                              r.c.to_vector<double>(),      x.grad().to_vector<double>(),
                                              w.grad().to_vector<double>(), x2.grad().to_vector<double>()};
    };
    auto ref = run(kCPU, DType::f64), a = run(kCPU, DType::f32), b = run(kCUDA, DType::f32);
    const char* what[] = {"y", "h", "c", "dx", "dw", "dx via h"};
    for (size_t k = 0; k < a.size(); ++k) {
      ASSERT_EQ(a[k].size(), b[k].size());
      for (size_t i = 0; i < a[k].size(); ++i)
        ASSERT_NEAR(a[k][i], b[k][i], 2e-4 + 2e-4 * std::abs(a[k][i]))
            << what[k] << " element " << i << " (input " << p.input_size << ", hidden " << p.hidden_size << ", layers "
            << p.num_layers << ", bidirectional " << p.bidirectional << ")";
      // Against float64, relative to the largest magnitude. The CPU's float32 is off by ~5e-7 here;
      // cuDNN's STANDARD algorithm as little, its persistent SMALL_H kernel by up to ~1e-5 (measured
      // on an H200, cuDNN 9.14). A reduced-precision path (TF32: ~1e-3) would fail this bound.
      const double e_cpu = error_vs(a[k], ref[k]), e_gpu = error_vs(b[k], ref[k]);
      std::printf("lstm in %3lld hidden %3lld layers %d bi %d %-8s error vs float64: cpu %.2e  cuda %.2e\n",
                  (long long)p.input_size, (long long)p.hidden_size, p.num_layers, int(p.bidirectional), what[k], e_cpu, e_gpu);
      EXPECT_LE(e_gpu, std::max(20 * e_cpu, 3e-5)) << what[k] << ": cuDNN far less accurate than float32 on the CPU";
    }
  }
  expect_forced_plans();
}

// The LSTM in float16 and bfloat16 against float64 on the CPU: outputs, final states and both
// input gradients, with gradients reaching it through y and c (dy strided batch-first, dc) and
// through h alone. Batch 37 leaves a partial 16-row tile for loupe's kernels. Whichever way the
// LSTM runs (the fastest; CTest also forces loupe's kernels and cuDNN's STANDARD algorithm) must
// stay within 4 half-ulps at 1 of the format (both measured at most 1.8 on an H100): printed per run.
TEST(CudaLstm, HalfMatchesCpu) {
  REQUIRE_GPU();
  // input size, hidden size, layers, bidirectional
  const LstmParams configs[] = {{16, 16, 1, false}, {16, 32, 2, true}, {128, 64, 1, true}, {57, 128, 1, false},
                                {8, 16, 3, false}};
  for (DType dt : {DType::f16, DType::bf16}) {
    for (const LstmParams& p : configs) {
      const int64_t N = 37, T = 23, I = p.input_size;
      std::vector<float> xv(size_t(N * T * I)), wv(size_t(lstm_weight_count(p)));
      for (size_t i = 0; i < xv.size(); ++i) xv[i] = philox_uniform(3, 0, i) - 0.5f;
      const float scale = 0.8f * std::sqrt(24.f / float(p.input_size + p.hidden_size));
      for (size_t i = 0; i < wv.size(); ++i) wv[i] = scale * (philox_uniform(4, 0, i) - 0.5f);
      // The 16-bit inputs rounded once, so that the reference sees the same values.
      auto rounded = [&](const std::vector<float>& v) {
        return to(to(from_vector(v, Shape{int64_t(v.size())}), dt), DType::f64).to_vector<double>();
      };
      std::vector<double> xr = rounded(xv), wr = rounded(wv);
      auto run = [&](Device d, DType t) {
        Tensor x = to(to(from_vector(xr, Shape{N, T, I}), t), d).detach().requires_grad_(true);
        Tensor w = to(to(from_vector(wr, Shape{int64_t(wr.size())}), t), d).detach().requires_grad_(true);
        LstmResult r = lstm(x, w, p, true);
        backward(sum(r.y * r.y) + sum(r.c));
        Tensor x2 = to(to(from_vector(xr, Shape{N, T, I}), t), d).detach().requires_grad_(true);
        Tensor w2 = w.detach().requires_grad_(true);
        LstmResult r2 = lstm(x2, w2, p, true);
        backward(sum(r2.h));
        return std::vector<std::vector<double>>{r.y.to_vector<double>(),      r.h.to_vector<double>(),
                                                r.c.to_vector<double>(),      x.grad().to_vector<double>(),
                                                w.grad().to_vector<double>(), x2.grad().to_vector<double>(),
                                                w2.grad().to_vector<double>()};
      };
      auto ref = run(kCPU, DType::f64), b = run(kCUDA, dt);
      const char* what[] = {"y", "h", "c", "dx", "dw", "dx via h", "dw via h"};
      const double unit = dt == DType::f16 ? 1.0 / 2048 : 1.0 / 256;  // half an ulp at 1
      for (size_t k = 0; k < b.size(); ++k) {
        ASSERT_EQ(ref[k].size(), b[k].size());
        const double err = error_vs(b[k], ref[k]);
        std::printf("lstm %s in %3lld hidden %3lld layers %d bi %d %-8s error vs float64 %.2e (%.1f units)\n",
                    dtype_name(dt), (long long)p.input_size, (long long)p.hidden_size, p.num_layers, int(p.bidirectional), what[k], err,
                    err / unit);
        EXPECT_LE(err, 4 * unit) << dtype_name(dt) << " " << what[k] << " (input " << p.input_size << ", hidden "
                                 << p.hidden_size << ", layers " << p.num_layers << ", bidirectional " << p.bidirectional << ")";
      }
    }
  }
  expect_forced_plans();
}

// Under data parallelism (a GradReadyHook listening) the LSTM's backward runs in two rounds: the
// input's gradient, then, after what lies below has run, the first layer's weight GEMMs (cuDNN: all
// of its weight gradient), so an embedding's all-reduce overlaps them. The gradients must be those
// of one round, whichever way the LSTM runs (CTest forces each), and the order must be x's, a
// pause, then w's.
TEST(CudaLstm, TwoRoundsMatchOneRound) {
  REQUIRE_GPU();
  struct Order : autograd::GradReadyHook {
    const Tensor *x = nullptr, *w = nullptr;
    std::string log;
    void ready(const Tensor& g) override { log += g.same(x->grad()) ? "x " : g.same(w->grad()) ? "w " : "? "; }
    void pause() override { log += "| "; }
  };
  const LstmParams configs[] = {{128, 64, 1, true}, {16, 32, 2, true}, {57, 128, 1, false}};
  // loupe's kernels (when forced) are 16-bit only; cuDNN's forced choices run both.
  const std::optional<std::string> algo = knobs::choice("LOUPE_LSTM_ALGO");
  std::vector<DType> dtypes{DType::f16};
  if (!algo || algo->rfind("loupe", 0) != 0) dtypes.insert(dtypes.begin(), DType::f32);
  for (DType dt : dtypes)
    for (const LstmParams& p : configs) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " input " + std::to_string(p.input_size) + " hidden " +
                   std::to_string(p.hidden_size) + " layers " + std::to_string(p.num_layers));
      const int64_t N = 37, T = 23, I = p.input_size;
      std::vector<float> xv(size_t(N * T * I)), wv(size_t(lstm_weight_count(p)));
      for (size_t i = 0; i < xv.size(); ++i) xv[i] = philox_uniform(5, 0, i) - 0.5f;
      const float scale = 0.8f * std::sqrt(24.f / float(p.input_size + p.hidden_size));
      for (size_t i = 0; i < wv.size(); ++i) wv[i] = scale * (philox_uniform(6, 0, i) - 0.5f);
      auto run = [&](Order* hook) {
        Tensor x = to(to(from_vector(xv, Shape{N, T, I}), dt), kCUDA).detach().requires_grad_(true);
        Tensor w = to(to(from_vector(wv, Shape{int64_t(wv.size())}), dt), kCUDA).detach().requires_grad_(true);
        LstmResult r = lstm(x, w, p, true);
        Tensor loss = sum(to(r.y, DType::f32) * to(r.y, DType::f32)) + sum(to(r.h, DType::f32));
        if (hook) hook->x = &x, hook->w = &w, autograd::set_grad_ready_hook(hook);
        backward(loss);
        autograd::set_grad_ready_hook(nullptr);
        return std::vector<std::vector<double>>{x.grad().to_vector<double>(), w.grad().to_vector<double>()};
      };
      Order order;
      const auto one = run(nullptr), two = run(&order);
      EXPECT_EQ(order.log, "x | w ");
      const char* what[] = {"dx", "dw"};
      for (size_t k = 0; k < 2; ++k) {
        const double err = error_vs(two[k], one[k]);
        std::printf("lstm two rounds %s in %3lld hidden %3lld layers %d %s: max |two - one| %.2e of the largest\n",
                    dtype_name(dt), (long long)p.input_size, (long long)p.hidden_size, p.num_layers, what[k], err);
        EXPECT_LE(err, dt == DType::f32 ? 1e-6 : 1e-3) << what[k];
      }
    }
  expect_forced_plans();
}

// Keras's hard_sigmoid gates (LstmParams::hard_slope: Keras 2's 0.2, Keras 3's 1/6) with one bias,
// against float64 on the CPU: in float32 on loupe's stepwise kernels, in 16-bit on whichever of
// loupe's kernels timed fastest; cuDNN has only the sigmoid and is never chosen. In float32 the
// weights are large enough that many gates sit past both of hard_sigmoid's corners; bound 1e-3
// of the largest magnitude (a gate whose pre-activation lands within rounding of a corner takes
// the other derivative; wrong gates are off by tens of percent). In 16-bit, where rounding moves
// a pre-activation by far more and many more gates would change sides, they are the usual size
// (HalfMatchesCpu's) and the bound is 8 half-ulps at 1.
TEST(CudaLstm, HardSigmoidMatchesCpu) {
  REQUIRE_GPU();
  const LstmParams shapes[] = {{16, 24, 1, false}, {16, 24, 2, true}, {128, 64, 1, true}, {57, 128, 1, false}};
  const size_t planned_before = lstm_cuda_plans().size();
  for (float slope : {0.2f, 1.f / 6})
    for (DType dt : {DType::f32, DType::f16, DType::bf16})
      for (LstmParams p : shapes) {
        p.hard_slope = slope;
        p.single_bias = true;
        const int64_t N = 13, T = 17, I = p.input_size;
        std::vector<float> xv(size_t(N * T * I)), wv(size_t(lstm_weight_count(p)));
        for (size_t i = 0; i < xv.size(); ++i) xv[i] = 2.f * (philox_uniform(7, 0, i) - 0.5f);
        const float scale = (dt == DType::f32 ? 2.f : 0.8f) * std::sqrt(24.f / float(p.input_size + p.hidden_size));
        for (size_t i = 0; i < wv.size(); ++i) wv[i] = scale * (philox_uniform(8, 0, i) - 0.5f);
        auto rounded = [&](const std::vector<float>& v) {
          return to(to(from_vector(v, Shape{int64_t(v.size())}), dt), DType::f64).to_vector<double>();
        };
        const std::vector<double> xr = rounded(xv), wr = rounded(wv);
        auto run = [&](Device d, DType t) {
          Tensor x = to(to(from_vector(xr, Shape{N, T, I}), t), d).detach().requires_grad_(true);
          Tensor w = to(to(from_vector(wr, Shape{int64_t(wr.size())}), t), d).detach().requires_grad_(true);
          LstmResult r = lstm(x, w, p, true);
          backward(sum(to(r.y, DType::f32) * to(r.y, DType::f32)) + sum(to(r.c, DType::f32)));
          return std::vector<std::vector<double>>{r.y.to_vector<double>(), r.h.to_vector<double>(),
                                                  r.c.to_vector<double>(), x.grad().to_vector<double>(),
                                                  w.grad().to_vector<double>()};
        };
        const auto ref = run(kCPU, DType::f64), b = run(kCUDA, dt);
        const char* what[] = {"y", "h", "c", "dx", "dw"};
        const double bound = dt == DType::f32 ? 1e-3 : 8.0 / (dt == DType::f16 ? 2048 : 256);
        for (size_t k = 0; k < b.size(); ++k) {
          ASSERT_EQ(ref[k].size(), b[k].size());
          const double err = error_vs(b[k], ref[k]);
          std::printf("lstm hard %.3f %s in %3lld hidden %3lld layers %d bi %d %-3s error vs float64 %.2e\n", slope,
                      dtype_name(dt), (long long)p.input_size, (long long)p.hidden_size, p.num_layers,
                      int(p.bidirectional), what[k], err);
          EXPECT_LE(err, bound) << "slope " << slope << " " << dtype_name(dt) << " " << what[k] << " (input "
                                << p.input_size << ", hidden " << p.hidden_size << ", layers " << p.num_layers
                                << ", bidirectional " << p.bidirectional << ")";
        }
      }
  const std::vector<std::string> plans = lstm_cuda_plans();
  ASSERT_GT(plans.size(), planned_before);
  for (size_t i = planned_before; i < plans.size(); ++i) {
    const std::string a = plans[i].substr(0, plans[i].find(' '));
    EXPECT_TRUE(a == "step" || a == "loupe16" || a == "loupe8") << "a hard_sigmoid LSTM ran on " << plans[i];
  }
}
