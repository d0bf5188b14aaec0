// The fused MLP (ops/fused/mlp.h) on CUDA, in float16 and bfloat16, against the same stack in float32
// (linear_act per layer, from the same 16-bit values): the output and every parameter's gradient,
// to a few 16-bit half-ulps of the largest magnitude or twice the unfused 16-bit stack's own error,
// whichever is larger. With dropout in training (the same draws give the same masks: a mask off by
// one unit is an error of the order of the values) and without; batches that fill their clusters
// and partial ones; one to three hidden layers, widths 128-512 (384: an odd number of 8-column
// tiles a warp); heads of 1, 10 and 16 outputs; wide inputs (the CNNs' dense heads, 2304 and 9216,
// and 1088, whose eighth is not a whole chunk) with the input's gradient. Each case must take the
// fused kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "loupe.h"
#include "models/registry.h"
#include "ops/fused/linear_act.h"
#include "ops/fused/mlp.h"

using namespace loupe;

namespace {

struct Case {
  int rows, in;
  std::vector<int> widths;  // hidden layers, then the head
  double p;
  bool training;
  bool x_grad = false;  // x needs a gradient (a dense head's input)
};

struct Result {
  std::vector<float> out;
  std::vector<std::vector<float>> grads;  // w0, b0, w1, b1, ..., then x's if it needs one
};

// Inputs of case c rounded to dt, on CUDA in `run_dt` (dt itself, or float32).
struct Inputs {
  Tensor x;
  std::vector<Tensor> params;
  Tensor r;  // the output's gradient
};
Inputs inputs(const Case& c, DType dt, DType run_dt) {
  auto make = [&](Shape s, uint64_t seed, double lo, double hi, bool grad) {
    std::vector<float> v(size_t(s.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(lo + (hi - lo) * philox_uniform(seed, 0, i));
    Tensor t = to(to(to(from_vector(v, s), kCUDA), dt), run_dt).detach();
    if (grad) t.requires_grad_(true);
    return t;
  };
  Inputs in;
  in.x = make(Shape{c.rows, c.in}, 1, 0.0, 1.0, c.x_grad);
  int64_t k = c.in;
  for (size_t l = 0; l < c.widths.size(); ++l) {
    const double a = std::sqrt(6.0 / double(k + c.widths[l]));
    in.params.push_back(make(Shape{c.widths[l], k}, 10 + l, -a, a, true));
    in.params.push_back(make(Shape{c.widths[l]}, 20 + l, -0.1, 0.1, true));
    k = c.widths[l];
  }
  in.r = make(Shape{c.rows, c.widths.back()}, 3, -1.0, 1.0, false);
  return in;
}

std::vector<MlpLayer> stack(const Case& c, const std::vector<Tensor>& p) {
  std::vector<MlpLayer> s;
  for (size_t l = 0; l < c.widths.size(); ++l) {
    const bool head = l + 1 == c.widths.size();
    s.push_back(MlpLayer{p[2 * l], p[2 * l + 1], !head, head ? 0.0 : c.p});
  }
  return s;
}

Result collect(const Tensor& out, const Inputs& in) {
  backward(sum(mul(out, in.r)));
  Result res{to(out, DType::f32).to_vector<float>(), {}};
  for (const Tensor& t : in.params) res.grads.push_back(to(t.grad(), DType::f32).to_vector<float>());
  if (in.x.requires_grad()) res.grads.push_back(to(in.x.grad(), DType::f32).to_vector<float>());
  return res;
}

enum class Path { Fused, Unfused };
Result run(const Case& c, DType dt, DType run_dt, Path path) {
  Inputs in = inputs(c, dt, run_dt);
  const std::vector<MlpLayer> s = stack(c, in.params);
  manual_seed(42);
  if (path == Path::Fused) {
    EXPECT_TRUE(mlp_fused_fits(in.x, s)) << "the fused kernels must take this case";
    return collect(mlp(in.x, s, c.training), in);
  }
  Tensor y = in.x;
  for (const MlpLayer& m : s)
    y = linear_act(y, m.w, m.b, m.relu ? std::optional<Act>(Act::Relu) : std::nullopt, m.p, c.training);
  return collect(y, in);
}

double rel_err(const std::vector<float>& got, const std::vector<float>& ref) {
  double e = 0, m = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    e = std::max(e, double(std::fabs(got[i] - ref[i])));
    m = std::max(m, double(std::fabs(ref[i])));
  }
  return m > 0 ? e / m : e;
}

void check(const Case& c) {
  for (DType dt : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)) + " rows " + std::to_string(c.rows));
    const Result ref = run(c, dt, DType::f32, Path::Unfused);
    const Result unfused = run(c, dt, dt, Path::Unfused);
    const Result fused = run(c, dt, dt, Path::Fused);
    const double ulps = dt == DType::f16 ? 1.0 / 2048 : 1.0 / 256;
    std::vector<std::pair<std::string, std::pair<double, double>>> errs{
        {"out", {rel_err(fused.out, ref.out), rel_err(unfused.out, ref.out)}}};
    for (size_t k = 0; k < ref.grads.size(); ++k)
      errs.push_back({k == 2 * c.widths.size() ? std::string("x") : (k % 2 ? "b" : "w") + std::to_string(k / 2),
                      {rel_err(fused.grads[k], ref.grads[k]), rel_err(unfused.grads[k], ref.grads[k])}});
    for (const auto& [name, e] : errs) {
      std::printf("%s %s: fused %.2f half-ulps, unfused %.2f\n", dtype_name(dt), name.c_str(), e.first / ulps,
                  e.second / ulps);
      EXPECT_LE(e.first, std::max(4 * ulps, 2 * e.second)) << name;
    }
  }
}

#define REQUIRE_SM90()                                                                              \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (or a CPU-only build): fused MLP not run"; \
  if (cuda_runtime()->compute_capability() < 90) GTEST_SKIP() << "the fused MLP needs compute capability 9.0"

}  // namespace

TEST(FusedMlp, MnistMlpTraining) {
  REQUIRE_SM90();
  check({128, 784, {512, 512, 10}, 0.2, true});
  check({192, 784, {512, 512, 10}, 0.2, true});  // 12 clusters: the most that one wave holds is 15 on an H200
}

TEST(FusedMlp, PartialClusterAndSixteenWideHead) {
  REQUIRE_SM90();
  check({70, 24, {128, 16}, 0.5, true, true});
}

// The CNNs' dense heads: k of the first layer split across the cluster, and the input's gradient.
TEST(FusedMlp, WideInputHeads) {
  REQUIRE_SM90();
  check({128, 9216, {128, 10}, 0.5, true, true});     // mnist_cnn's
  check({128, 2304, {512, 10}, 0.5, true, true});     // cifar10_cnn's
  check({70, 1088, {256, 128, 3}, 0.0, true, true});  // a block's 136 columns: a chunk and 8
  check({33, 2048, {384, 16}, 0.25, false, true});
}

TEST(FusedMlp, ThreeHiddenLayersOddTilesAndOneOutput) {
  REQUIRE_SM90();
  check({200, 200, {384, 256, 128, 1}, 0.0, true});
}

TEST(FusedMlp, EvalModeDropsNothing) {
  REQUIRE_SM90();
  check({64, 1024, {256, 10}, 0.3, false});
}

// The shipped mnist_mlp (its Keras file, models/keras/mnist_mlp.json) hands its layers to the fused
// op in 16 bits (the output's node is MlpBackward), and runs them one by one where the batch's
// clusters would not all be resident (512 rows: 32 clusters, past one wave on an H100 or H200) and
// in float32.
TEST(FusedMlp, SequentialRunsMnistMlpAsOneOpWhereItFits) {
  REQUIRE_SM90();
  std::shared_ptr<nn::Module> m = models::find_model("mnist_mlp").build();
  m->to(kCUDA);
  auto node = [&](int64_t rows) {
    Tensor y = (*m)(full(Shape{rows, 28, 28}, 0.5, DType::f32, kCUDA));
    return y.grad_fn() ? std::string(y.grad_fn()->name()) : std::string("none");
  };
  EXPECT_EQ(node(128), "LinearActBackward") << "float32: the unfused stack";
  for (Precision p : {Precision::BF16, Precision::FP16}) {
    PrecisionScope scope(p);
    EXPECT_EQ(node(128), "MlpBackward") << precision_name(p);
    EXPECT_EQ(node(70), "MlpBackward") << precision_name(p) << ": a partial cluster";
    EXPECT_EQ(node(512), "LinearActBackward") << precision_name(p) << ": more clusters than one wave";
  }
}

// The shipped CNNs hand their dense heads (Flatten's 9216 and 2304 features, Dense 128 or 512 ReLU,
// Dropout .5, Dense 10) to the fused op in 16 bits where the batch's clusters are resident, and the
// gradient goes on through it to the convolutions.
TEST(FusedMlp, SequentialRunsTheCnnsDenseHeadsAsOneOp) {
  REQUIRE_SM90();
  for (const char* name : {"mnist_cnn", "cifar10_cnn"}) {
    SCOPED_TRACE(name);
    std::shared_ptr<nn::Module> m = models::find_model(name).build();
    m->to(kCUDA);
    const Shape sample = std::string(name) == "cifar10_cnn" ? Shape{3, 32, 32} : Shape{28, 28};
    auto node = [&](int64_t rows) {
      Shape s{rows};
      for (int64_t d : sample) s.push_back(d);
      Tensor y = (*m)(full(s, 0.5, DType::f32, kCUDA));
      const std::string n = y.grad_fn() ? y.grad_fn()->name() : "none";
      backward(sum(to(y, DType::f32)));
      return n;
    };
    EXPECT_EQ(node(128), "LinearActBackward") << "float32: the unfused stack";
    for (Precision p : {Precision::BF16, Precision::FP16}) {
      PrecisionScope scope(p);
      for (Tensor& t : m->parameters()) t.set_grad(Tensor());
      EXPECT_EQ(node(128), "MlpBackward") << precision_name(p);
      const Tensor g = m->parameters().front().grad();  // the first convolution's weight
      ASSERT_TRUE(g.defined()) << precision_name(p);
      const Tensor g32 = to(g, DType::f32);
      EXPECT_GT(sum(mul(g32, g32)).item(), 0.0) << precision_name(p) << ": the gradient reached conv1";
      EXPECT_EQ(node(512), "LinearActBackward") << precision_name(p) << ": more clusters than one wave";
    }
  }
}
