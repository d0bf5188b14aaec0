// Layers and modules: dropout, the parameter arena, the fused bias + activation + dropout, BatchNorm2d,
// Keras's other activations (nn::Nonlinearity).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "loupe.h"
#include "core/dropout_mask.h"
#include "ops/bias_act.h"
#include "ops/fused/linear_act.h"

using namespace loupe;

TEST(Dropout, MaskRateAndScale) {
  manual_seed(3);
  Tensor x = ones(Shape{100000});
  std::vector<float> y = dropout(x, 0.2, true).to_vector<float>();
  int64_t kept = 0;
  for (float v : y) {
    if (v != 0) { ++kept; EXPECT_FLOAT_EQ(v, 1.25f); }
  }
  EXPECT_NEAR(double(kept) / 100000, 0.8, 0.01);
  EXPECT_TRUE(dropout(x, 0.2, false).same(x));
}

// The CPU's batched decisions are philox_uniform's, whatever the walk: unaligned starts, spans
// crossed, steps back, jumps far ahead, an offset past 2^32 (the counter's high word).
TEST(Dropout, CpuMaskIsPhiloxUniformAnyWalk) {
  for (uint64_t offset : {uint64_t(0), uint64_t(7), (uint64_t(1) << 32) - 3})
    for (float p : {0.0f, 0.3f, 0.5f}) {
      DropoutMask m(11, offset, p);
      std::vector<uint64_t> walk;
      for (uint64_t i = 3; i < 700; ++i) walk.push_back(i);
      for (uint64_t i : {uint64_t(2), uint64_t(1), uint64_t(0), uint64_t(255), uint64_t(256), uint64_t(1) << 40,
                         (uint64_t(1) << 40) + 1, uint64_t(5)})
        walk.push_back(i);
      for (uint64_t i : walk) ASSERT_EQ(m.keep(i), philox_uniform(11, offset, i) >= p) << "element " << i;
    }
}

TEST(Arena, ParametersAreViewsAndOneMemsetZeroesGrads) {
  manual_seed(1);
  nn::Sequential m;
  m.add("fc1", std::make_shared<nn::Linear>(4, 3)).add("act", std::make_shared<nn::ReLU>())
   .add("fc2", std::make_shared<nn::Linear>(3, 2));
  EXPECT_EQ(m.num_parameters(), 4 * 3 + 3 + 3 * 2 + 2);
  std::vector<float> w_before = m.parameters()[0].to_vector<float>();
  m.to(kCPU);
  nn::ParameterArena& a = m.arena();
  EXPECT_EQ(m.parameters()[0].to_vector<float>(), w_before);
  EXPECT_EQ(a.num_parameters(), m.num_parameters());
  // Every parameter lies inside the arena.
  for (const Tensor& p : m.parameters()) {
    const char* base = static_cast<const char*>(a.values().data_ptr());
    const char* pp = static_cast<const char*>(p.data_ptr());
    EXPECT_GE(pp, base);
    EXPECT_LE(pp + p.nbytes(), base + a.values().nbytes());
  }
  Tensor x = ones(Shape{5, 4});
  backward(sum(m(x)));
  EXPECT_NE(sum(a.grads()).item(), 0.0);
  a.zero_grad();
  EXPECT_EQ(sum(to(a.grads(), DType::f64)).item(), 0.0);
  EXPECT_EQ(sum(m.parameters()[0].grad()).item(), 0.0);
}

// The fused epilogue on the CPU: the separate ops' output and gradients, bit for bit, and a
// Sequential with Linear + ReLU + Dropout fuses them (one range, one autograd node).
TEST(Fusion, BiasActIsTheSeparateOpsOnTheCpu) {
  Tensor x1 = from_vector(std::vector<float>{-1.5f, 0.5f, 2.f, -0.25f, 1.f, 3.f, -2.f, 0.75f}, Shape{2, 4});
  Tensor b1 = from_vector(std::vector<float>{0.25f, -0.5f, 1.f, 0.f}, Shape{4});
  x1.requires_grad_(true);
  b1.requires_grad_(true);
  Tensor x2 = x1.detach().requires_grad_(true), b2 = b1.detach().requires_grad_(true);
  manual_seed(3);
  Tensor y1 = bias_act(x1, b1, Act::Relu, 0.4, true);
  manual_seed(3);
  Tensor y2 = dropout(relu(bias_add(x2, b2)), 0.4, true);
  EXPECT_EQ(y1.to_vector<float>(), y2.to_vector<float>());
  EXPECT_EQ(default_generator().offset, 2u) << "8 draws: two Philox counters, as dropout takes";
  backward(sum(y1 * y1));
  backward(sum(y2 * y2));
  EXPECT_EQ(x1.grad().to_vector<float>(), x2.grad().to_vector<float>());
  EXPECT_EQ(b1.grad().to_vector<float>(), b2.grad().to_vector<float>());
  EXPECT_THROW(bias_act(x1, b1, Act::Sigmoid, 0.5, true), Error) << "dropout after sigmoid is not fused";
  EXPECT_THROW(bias_act(x1, from_vector(std::vector<float>{1, 2}, Shape{2}), std::nullopt, 0, true), Error);

  nn::Sequential m;
  m.add("fc", std::make_shared<nn::Linear>(4, 3)).add("relu", std::make_shared<nn::ReLU>())
      .add("drop", std::make_shared<nn::Dropout>(0.5)).add("out", std::make_shared<nn::Linear>(3, 2));
  m.to(kCPU);
  Tensor out = m(x1.detach());
  ASSERT_TRUE(out.grad_fn());
  EXPECT_STREQ(out.grad_fn()->name(), "LinearActBackward") << "the last Linear: its product and bias, one node";
  // fc + relu + drop is one node too: the second Linear's input comes straight from it.
  auto into_out = out.grad_fn()->next_edges[0].fn;
  ASSERT_TRUE(into_out);
  EXPECT_STREQ(into_out->name(), "LinearActBackward");
}

// linear_act on the CPU is matmul and bias_act, bit for bit: output and every gradient, with and
// without an epilogue (the CPU's table has no GEMM with a bias epilogue).
TEST(Fusion, LinearActIsMatmulAndBiasActOnTheCpu) {
  for (bool epilogue : {true, false}) {
    SCOPED_TRACE(epilogue ? "relu + dropout" : "bias only");
    std::vector<float> v(6 * 5 + 8 * 5 + 8);
    for (size_t i = 0; i < v.size(); ++i) v[i] = philox_uniform(9, 0, i) * 2.f - 1.f;
    auto part = [&](size_t at, Shape s) {
      return from_vector(std::vector<float>(v.begin() + long(at), v.begin() + long(at + size_t(s.numel()))), s);
    };
    Tensor x[2], w[2], b[2], y[2];
    for (int k = 0; k < 2; ++k) {
      x[k] = part(0, Shape{6, 5}).requires_grad_(true);
      w[k] = part(30, Shape{8, 5}).requires_grad_(true);
      b[k] = part(70, Shape{8}).requires_grad_(true);
    }
    const std::optional<Act> act = epilogue ? std::optional<Act>(Act::Relu) : std::nullopt;
    const double p = epilogue ? 0.4 : 0.0;
    manual_seed(7);
    y[0] = linear_act(x[0], w[0], b[0], act, p, true);
    manual_seed(7);
    y[1] = bias_act(matmul(x[1], transpose(w[1], 0, 1)), b[1], act, p, true);
    EXPECT_EQ(y[0].to_vector<float>(), y[1].to_vector<float>());
    for (int k = 0; k < 2; ++k) backward(sum(y[k] * y[k]));
    EXPECT_EQ(x[0].grad().to_vector<float>(), x[1].grad().to_vector<float>());
    EXPECT_EQ(w[0].grad().to_vector<float>(), w[1].grad().to_vector<float>());
    std::vector<float> g0 = b[0].grad().to_vector<float>(), g1 = b[1].grad().to_vector<float>();
    for (size_t i = 0; i < g0.size(); ++i) EXPECT_NEAR(g0[i], g1[i], 1e-6f) << "bias grad " << i << " (summation order)";
  }
}

TEST(Modules, BatchNorm2dBuffersMoveTrainAndCheckpoint) {
  nn::Sequential m;
  m.add("bn", std::make_shared<nn::BatchNorm2d>(2));
  m.to(kCPU);
  ASSERT_EQ(m.named_buffers().size(), 2u);
  EXPECT_EQ(m.named_buffers()[0].first, "bn.running_mean");
  EXPECT_EQ(m.num_parameters(), 4);
  Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8}, Shape{2, 2, 2, 1});
  backward(sum(m(x) * x));  // training: batch statistics, running ones updated
  std::vector<float> rm = m.named_buffers()[0].second.to_vector<float>();
  // channel 0 holds 1, 2, 5, 6 (mean 3.5); running = 0.9 * 0 + 0.1 * 3.5
  EXPECT_NEAR(rm[0], 0.35f, 1e-6);
  // and the unbiased variance: squares 6.25 + 2.25 + 2.25 + 6.25 = 17 over n - 1 = 3 (Keras and
  // PyTorch keep the unbiased one; dividing by n passed here before the mutation check).
  std::vector<float> rv = m.named_buffers()[1].second.to_vector<float>();
  EXPECT_EQ(m.named_buffers()[1].first, "bn.running_var");
  EXPECT_NEAR(rv[0], 0.9f + 0.1f * 17.f / 3.f, 1e-5);
  m.eval();
  NoGradGuard g;
  Tensor y = m(x);
  EXPECT_EQ(y.shape(), x.shape());
  // Evaluation normalises with the running statistics (weight 1, bias 0, eps 1e-5).
  EXPECT_NEAR(y.to_vector<float>()[0], (1.f - rm[0]) / std::sqrt(rv[0] + 1e-5f), 1e-5);
}

// nn::Nonlinearity at four points against Keras's formulas (ops/nonlinearity.h), evaluated in
// Python's math module: the op table checks the gradients against these functions, not the
// functions themselves. Both clip edges of hard_sigmoid, at Keras 2's slope and Keras 3's.
TEST(Modules, NonlinearityIsKerasFormulas) {
  const std::vector<double> x{-3.5, -1.0, 0.5, 2.0};
  struct Want {
    Nonlin f;
    float slope;
    const char* type;
    std::vector<double> y;
  };
  const std::vector<Want> wants{
      {Nonlin::Elu, 0.2f, "ELU", {-0.9698026165776815, -0.6321205588285577, 0.5, 2.0}},
      {Nonlin::Selu, 0.2f, "SELU", {-1.705009340957283, -1.1113307378125625, 0.5253504936777402, 2.101401974710961}},
      {Nonlin::Gelu, 0.2f, "GELU", {-0.0008142017766243903, -0.15865525393145707, 0.34573123063700656, 1.9544997361036416}},
      {Nonlin::Silu, 0.2f, "SiLU", {-0.10259280762974712, -0.2689414213699951, 0.3112296656009273, 1.7615941559557646}},
      {Nonlin::HardSigmoid, 0.2f, "HardSigmoid(0.2)", {0, 0.3, 0.6, 0.9}},
      {Nonlin::HardSigmoid, 1.f / 6, "HardSigmoid(0.166667)", {0, 1.0 / 3, 0.5833333333333334, 0.8333333333333333}},
      {Nonlin::Softplus, 0.2f, "Softplus", {0.029750418272620566, 0.31326168751822286, 0.9740769841801067, 2.1269280110429727}},
      {Nonlin::Softsign, 0.2f, "Softsign", {-0.7777777777777778, -0.5, 1.0 / 3, 2.0 / 3}},
  };
  NoGradGuard g;
  for (const Want& w : wants) {
    nn::Sequential m;
    m.add("act", std::make_shared<nn::Nonlinearity>(w.f, w.slope));
    EXPECT_EQ(m.children()[0].second->type_name(), w.type);
    for (DType dt : {DType::f64, DType::f32}) {
      const std::vector<double> y = to(m(to(from_vector(x, Shape{4}), dt)), DType::f64).to_vector<double>();
      // The output's rounding, and hard_sigmoid's slope is a float (0.2 and 1/6 rounded) in float64 too.
      const double tol = dt == DType::f32 ? 1e-6 : w.f == Nonlin::HardSigmoid ? 1e-8 : 1e-14;
      for (size_t i = 0; i < x.size(); ++i)
        EXPECT_NEAR(y[i], w.y[i], tol) << w.type << " " << dtype_name(dt) << " x=" << x[i];
    }
  }
  // Large inputs stay finite (softplus is x there, not log(1 + inf)).
  const Tensor xb = from_vector(std::vector<float>{1e4f, -1e4f}, Shape{2});
  const std::vector<float> big = nonlinearity(Nonlin::Softplus, xb).to_vector<float>();
  EXPECT_EQ(big[0], 1e4f);
  EXPECT_EQ(big[1], 0.f);
}

namespace {
// The values of a [rows, cols] tensor near those of another, elementwise.
void expect_near(const Tensor& a, const Tensor& b, const char* what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5f * std::max(1.f, std::fabs(y[i]))) << what << " " << i;
}
}  // namespace

// nn::Graph runs its nodes as the modules would be called by hand: a residual Add, a layer read by
// two nodes (its relu must not fold into it, or the other reader would see relu's output), and a
// Concatenate; the gradients reach every parameter through both branches.
TEST(Graph, NodesComputeWhatTheModulesDoByHand) {
  manual_seed(3);
  auto fc1 = std::make_shared<nn::Linear>(5, 4), fc2 = std::make_shared<nn::Linear>(4, 4);
  auto fc3 = std::make_shared<nn::Linear>(4, 4);
  auto relu = std::make_shared<nn::ReLU>();
  nn::Graph g;
  const int a = g.add("fc1", fc1, {nn::Graph::kInput});
  const int r = g.add("relu", relu, {a});                    // fc1 has two readers: not folded
  const int b = g.add("fc2", fc2, {r});
  const int s = g.add("sum", std::make_shared<nn::Merge>(nn::MergeOp::Add), {a, b});
  const int c = g.add("fc3", fc3, {s});
  g.add("cat", std::make_shared<nn::Merge>(nn::MergeOp::Concatenate, 1), {c, r});
  EXPECT_EQ(g.inputs_of(s), (std::vector<int>{a, b}));
  g.to(kCPU);
  Tensor x = empty(Shape{3, 5});
  nn::uniform_(x, -1, 1);
  Tensor y = g(x);
  backward(sum(y * y));
  std::vector<std::vector<float>> grads;
  for (const Tensor& p : g.parameters()) grads.push_back(p.grad().to_vector<float>());
  g.arena().zero_grad();
  Tensor h1 = (*fc1)(x), hr = relu->forward(h1), want = cat({(*fc3)(h1 + (*fc2)(hr)), hr}, 1);
  expect_near(y, want, "output");
  backward(sum(want * want));
  const std::vector<Tensor> ps = g.parameters();
  for (size_t i = 0; i < ps.size(); ++i) expect_near(from_vector(grads[i], ps[i].shape()), ps[i].grad(), "gradient");
}

namespace {
// A node of two outputs, x and 2 x (as a recurrent layer's output and its state).
class TwoOutputs : public nn::Module {
 public:
  Tensor forward(const Tensor& x) override { return x; }
  int outputs() const override { return 2; }
  std::vector<Tensor> forward_outputs(const std::vector<Tensor>& xs) override { return {xs[0], xs[0] * 2.0}; }
  std::string type_name() const override { return "TwoOutputs"; }
};
}  // namespace

// A node's other outputs: each reader gets the one it names, an activation after a node of several
// outputs is not folded into it (its pass gives the first alone), and the outputs live until their
// last reader has run.
TEST(Graph, ANodeOfSeveralOutputsGivesEachItsReader) {
  nn::Graph g;
  const int two = g.add("two", std::make_shared<TwoOutputs>(), {nn::Graph::kInput});
  const int relu = g.add("relu", std::make_shared<nn::ReLU>(), {two}, {1});
  g.add("sum", std::make_shared<nn::Merge>(nn::MergeOp::Add), {two, relu, two}, {0, 0, 1});
  EXPECT_EQ(g.outputs_read_by(relu), std::vector<int>{1});
  const Tensor x = from_vector(std::vector<float>{-1, 2}, Shape{1, 2});
  EXPECT_EQ(g(x).to_vector<float>(), (std::vector<float>{-3, 10}));  // x + relu(2 x) + 2 x
  EXPECT_THROW(g.add("three", std::make_shared<nn::ReLU>(), {two}, {2}), Error);  // it has two
  EXPECT_THROW(g.add("of_relu", std::make_shared<nn::ReLU>(), {relu}, {1}), Error);
  EXPECT_THROW(g.add("many", std::make_shared<nn::ReLU>(), {two}, {0, 1}), Error);
}

// A node reads earlier nodes only, a module one input and a merge two or more.
TEST(Graph, RefusesNodesThatAreNotAGraph) {
  nn::Graph g;
  EXPECT_THROW(g.add("fc", std::make_shared<nn::Linear>(2, 2), {0}), Error);  // no node 0 yet
  const int a = g.add("fc", std::make_shared<nn::Linear>(2, 2), {nn::Graph::kInput});
  EXPECT_THROW(g.add("two", std::make_shared<nn::Linear>(2, 2), {a, a}), Error);
  EXPECT_THROW(g.add("one", std::make_shared<nn::Merge>(nn::MergeOp::Add), {a}), Error);
  EXPECT_THROW(nn::Merge(nn::MergeOp::Add).forward(zeros(Shape{1, 2})), Error);
  EXPECT_THROW(nn::Merge(nn::MergeOp::Subtract).forward_many({zeros(Shape{1, 2}), zeros(Shape{1, 2}), zeros(Shape{1, 2})}), Error);
  EXPECT_THROW(nn::Merge(nn::MergeOp::Add).forward_many({zeros(Shape{1, 2}), zeros(Shape{1, 3})}), Error);
}

// Keras's VarianceScaling: the variance is scale / n for each distribution, the truncated normal
// never past two of its (corrected) deviations, the uniform within sqrt(3 variance).
TEST(VarianceScaling, MomentsAndBoundsAreKeras) {
  using D = nn::Distribution;
  const int64_t fan_in = 300, fan_out = 500;
  for (const auto& [v, n] : std::vector<std::pair<nn::VarianceScaling, double>>{
           {{2, nn::FanMode::In, D::TruncatedNormal}, 300.0},
           {{1, nn::FanMode::Average, D::TruncatedNormal}, 400.0},
           {{2, nn::FanMode::Out, D::Normal}, 500.0},
           {{1, nn::FanMode::In, D::Uniform}, 300.0}}) {
    manual_seed(5);
    Tensor t = empty(Shape{fan_out, fan_in});
    nn::variance_scaling_(t, fan_in, fan_out, v);
    const std::vector<float> w = t.to_vector<float>();
    double mean = 0, sq = 0, biggest = 0;
    for (float x : w) mean += x, sq += double(x) * x, biggest = std::max(biggest, double(std::fabs(x)));
    mean /= double(w.size());
    const double var = sq / double(w.size()) - mean * mean, want = v.scale / n;
    SCOPED_TRACE("distribution " + std::to_string(int(v.distribution)));
    EXPECT_NEAR(mean, 0, 0.02 * std::sqrt(want));
    EXPECT_NEAR(var, want, 0.03 * want);
    if (v.distribution == D::TruncatedNormal) EXPECT_LE(biggest, 2 * std::sqrt(want) / 0.87962566103423978 * (1 + 1e-6));
    if (v.distribution == D::Uniform) EXPECT_LE(biggest, std::sqrt(3 * want) * (1 + 1e-6));
    if (v.distribution == D::Normal) EXPECT_GT(biggest, 3 * std::sqrt(want));  // the tails are there
  }
}

// An l2 regularizer's penalty is l2 * sum(w^2) over the parameters it names, through the children;
// its gradient 2 * l2 * w.
TEST(Regularize, PenaltyIsL2TimesTheSquaresAndItsGradient) {
  manual_seed(2);
  auto fc = std::make_shared<nn::Linear>(3, 2);
  nn::Sequential m;
  m.add("fc", fc);
  EXPECT_FALSE(m.penalty().defined());
  fc->regularize("weight", 0.25);
  m.to(kCPU);
  const std::vector<float> w = fc->weight.to_vector<float>();
  double want = 0;
  for (float x : w) want += 0.25 * x * x;
  Tensor p = m.penalty();
  EXPECT_NEAR(p.item(), want, 1e-6);
  backward(p);
  const std::vector<float> g = fc->weight.grad().to_vector<float>();
  for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(g[i], 0.5f * w[i], 1e-6f);
  EXPECT_THROW(fc->regularize("kernel", 0.1), Error);
  EXPECT_THROW(fc->regularize("bias", -1), Error);
}

// A first layer says how it remakes its input (Module::input_layout), so the trainer's gather from
// resident data writes the batch so at once: index_select into channels-last holds the values the
// contiguous gather holds, in the order a channels-last convolution reads; one channel stays as it is.
TEST(InputLayout, ChannelsLastGatherHoldsTheContiguousGathersValues) {
  std::vector<uint8_t> v(5 * 3 * 4 * 6);
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint8_t((i * 37) % 251);
  const Tensor src = from_vector(v, Shape{5, 3, 4, 6});
  const Tensor idx = from_vector(std::vector<int32_t>{3, 0, 4}, Shape{3});
  const Tensor flat = index_select(src, idx, DType::f32, 1 / 255.0);
  const Tensor cl = index_select(src, idx, DType::f32, 1 / 255.0, MemoryFormat::ChannelsLast);
  EXPECT_TRUE(cl.is_contiguous(MemoryFormat::ChannelsLast));
  EXPECT_FALSE(cl.is_contiguous());
  EXPECT_EQ(contiguous(cl).to_vector<float>(), flat.to_vector<float>());
  // element (n, c, h, w) of the batch at ((n * 4 + h) * 6 + w) * 3 + c in memory
  const float* raw = cl.data<float>();
  EXPECT_EQ(raw[((1 * 4 + 2) * 6 + 5) * 3 + 2], float(double(v[((0 * 3 + 2) * 4 + 2) * 6 + 5]) / 255.0));
  const Tensor one = index_select(reshape(src, Shape{15, 1, 4, 6}), idx, DType::f32, 1.0, MemoryFormat::ChannelsLast);
  EXPECT_TRUE(one.is_contiguous());

  nn::Sequential m;
  auto conv = std::make_shared<nn::Conv2d>(3, 8, 3, 1, 1);
  m.add("conv1", conv).add("relu1", std::make_shared<nn::ReLU>());
  EXPECT_EQ(m.input_layout().dtype, DType::f32);
  EXPECT_EQ(m.input_layout().format, MemoryFormat::Contiguous);
  m.set_memory_format(MemoryFormat::ChannelsLast);
  EXPECT_EQ(m.input_layout().format, MemoryFormat::ChannelsLast);
  {
    PrecisionScope half(Precision::FP16);  // on the CPU mixed precision casts nothing
    EXPECT_EQ(m.input_layout().dtype, DType::f32);
  }
  nn::Sequential dense;
  dense.add("fc", std::make_shared<nn::Linear>(4, 2));
  EXPECT_EQ(dense.input_layout().format, MemoryFormat::Contiguous);
}
