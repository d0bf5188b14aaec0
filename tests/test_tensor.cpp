// Tensor basics: views, copies, dtypes, autograd bookkeeping, RNG and the parameter arena.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "loupe.h"
#include "models/registry.h"
#include "ops/bias_act.h"

using namespace loupe;

TEST(Tensor, ViewsShareStorage) {
  Tensor x = from_vector(std::vector<float>{0, 1, 2, 3, 4, 5}, Shape{2, 3});
  Tensor t = transpose(x, 0, 1);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(contiguous(t).to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  Tensor s = slice(x, 1, 1, 3);
  EXPECT_EQ(contiguous(s).to_vector<float>(), (std::vector<float>{1, 2, 4, 5}));
  Tensor r = reshape(x, Shape{3, 2});
  EXPECT_EQ(r.data_ptr(), x.data_ptr());
  EXPECT_EQ(flatten(x, 0).shape(), (Shape{6}));
}

TEST(Tensor, DtypeConversionsRoundTrip) {
  Tensor x = from_vector(std::vector<float>{0.5f, -2.25f, 1024.f, 3.1415926f, 1e-5f}, Shape{5});
  std::vector<float> h = to(to(x, DType::f16), DType::f32).to_vector<float>();
  EXPECT_FLOAT_EQ(h[0], 0.5f);
  EXPECT_FLOAT_EQ(h[1], -2.25f);
  EXPECT_FLOAT_EQ(h[2], 1024.f);
  EXPECT_NEAR(h[3], 3.1415926f, 2e-3);
  EXPECT_NEAR(h[4], 1e-5f, 1e-7);
  std::vector<float> b = to(to(x, DType::bf16), DType::f32).to_vector<float>();
  EXPECT_NEAR(b[3], 3.1415926f, 2e-2);
  EXPECT_EQ(to(x, DType::i32).to_vector<int32_t>(), (std::vector<int32_t>{0, -2, 1024, 3, 0}));
  EXPECT_EQ(half_to_float(float_to_half(65504.f)), 65504.f);
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
}

TEST(Tensor, BroadcastErrorsAreClear) {
  Tensor a = zeros(Shape{2, 3}), b = zeros(Shape{4});
  try {
    (void)(a + b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[2, 3] and [4] do not broadcast"), std::string::npos) << e.what();
  }
}

TEST(Autograd, AccumulatesAndReleases) {
  Tensor x = from_vector(std::vector<float>{1, 2, 3}, Shape{3});
  x.requires_grad_(true);
  Tensor y = sum(x * x);
  backward(y);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_THROW(backward(y), Error);  // the graph was freed
  backward(sum(x));                  // gradients accumulate across backward calls
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{3, 5, 7}));
}

TEST(Autograd, NoGradGuardRecordsNothing) {
  Tensor x = ones(Shape{2});
  x.requires_grad_(true);
  NoGradGuard g;
  Tensor y = x * 2.0;
  EXPECT_FALSE(y.requires_grad());
  EXPECT_FALSE(y.grad_fn());
}

TEST(Autograd, TensorUsedTwiceGetsBothGradients) {
  Tensor x = from_vector(std::vector<float>{1, -2}, Shape{2});
  x.requires_grad_(true);
  Tensor y = sum(relu(x) + x * 3.0);
  backward(y);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{4, 3}));
}

TEST(Random, PhiloxIsDeterministicAndUniform) {
  double s = 0;
  for (uint64_t i = 0; i < 40000; ++i) s += philox_uniform(7, 0, i);
  EXPECT_NEAR(s / 40000, 0.5, 0.01);
  EXPECT_EQ(philox_uniform(7, 3, 5), philox_uniform(7, 3, 5));
  EXPECT_NE(philox_uniform(7, 3, 5), philox_uniform(8, 3, 5));
}

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

TEST(Optim, SgdMatchesTheFormula) {
  nn::Sequential m;
  m.add("fc", std::make_shared<nn::Linear>(2, 1, false));
  m.to(kCPU);
  Tensor w = m.parameters()[0];
  std::vector<float> w0 = w.to_vector<float>();
  optim::SGD opt(m.arena(), 0.1, 0.9, true);
  Tensor x = from_vector(std::vector<float>{1, 2}, Shape{1, 2});
  backward(sum(m(x)));  // grad = x
  opt.step();
  // buf = g; nesterov: g + 0.9 * buf = 1.9 g
  std::vector<float> w1 = w.to_vector<float>();
  EXPECT_NEAR(w1[0], w0[0] - 0.1f * 1.9f * 1, 1e-6);
  EXPECT_NEAR(w1[1], w0[1] - 0.1f * 1.9f * 2, 1e-6);
}

TEST(Optim, RmspropAndAdamFirstStep) {
  for (int which = 0; which < 2; ++which) {
    nn::Sequential m;
    m.add("fc", std::make_shared<nn::Linear>(1, 1, false));
    m.to(kCPU);
    Tensor w = m.parameters()[0];
    float w0 = w.to_vector<float>()[0];
    std::unique_ptr<optim::Optimizer> opt;
    if (which == 0) opt = std::make_unique<optim::RMSprop>(m.arena(), 0.01, 0.9, 1e-7);
    else opt = std::make_unique<optim::Adam>(m.arena(), 0.01);
    backward(sum(m(from_vector(std::vector<float>{2}, Shape{1, 1}))));  // g = 2
    opt->step();
    float expect = which == 0 ? w0 - 0.01f * 2 / (std::sqrt(0.1f * 4) + 1e-7f)  // v = 0.1 g^2
                              : w0 - 0.01f;                                   // Adam: mhat / sqrt(vhat) = 1
    EXPECT_NEAR(w.to_vector<float>()[0], expect, 1e-5) << opt->name();
  }
}

TEST(Optim, AdadeltaFirstStepMatchesKeras) {
  nn::Sequential m;
  m.add("fc", std::make_shared<nn::Linear>(1, 1, false));
  m.to(kCPU);
  Tensor w = m.parameters()[0];
  float w0 = w.to_vector<float>()[0];
  optim::Adadelta opt(m.arena(), 1.0, 0.95, 1e-7);
  backward(sum(m(from_vector(std::vector<float>{2}, Shape{1, 1}))));  // g = 2
  opt.step();
  // a = 0.05 * 4 = 0.2; u = 2 * sqrt(1e-7) / sqrt(0.2 + 1e-7)
  float u = 2.f * std::sqrt(1e-7f) / std::sqrt(0.2f + 1e-7f);
  EXPECT_NEAR(w.to_vector<float>()[0], w0 - u, 1e-7);
}

// Keras' lr decay and Adam's bias corrections are computed by the update kernels from the
// optimizer's step count on its device (what a captured step replays): they follow the host's
// formulas step by step, and a restored count (a checkpoint's) takes effect at the next update.
TEST(Optim, DecayAndAdamCorrectionsFollowTheStepCount) {
  for (int which = 0; which < 2; ++which) {
    nn::Sequential m;
    m.add("fc", std::make_shared<nn::Linear>(1, 1, false));
    m.to(kCPU);
    Tensor w = m.parameters()[0];
    float wf = w.to_vector<float>()[0], s1 = 0, s2 = 0;  // the expected weight and the optimizer's state
    std::unique_ptr<optim::Optimizer> opt;
    if (which == 0) opt = std::make_unique<optim::RMSprop>(m.arena(), 0.01, 0.9, 1e-7);
    else opt = std::make_unique<optim::Adam>(m.arena(), 0.01, 0.9, 0.999, 1e-7);
    opt->set_decay(0.5);
    opt->set_steps(3);  // resumed after 3 updates
    Tensor x = from_vector(std::vector<float>{2}, Shape{1, 1});
    for (int k = 3; k < 8; ++k) {
      opt->zero_grad();
      backward(sum(m(x)));  // g = 2
      opt->step();
      const float g = 2, lr = float(0.01 / (1.0 + 0.5 * k));
      if (which == 0) {
        s1 = 0.9f * s1 + 0.1f * g * g;
        wf -= lr * g / (std::sqrt(s1) + 1e-7f);
      } else {
        const double t = k + 1;  // Adam counts this update too
        s1 = 0.9f * s1 + 0.1f * g;
        s2 = 0.999f * s2 + (1.f - 0.999f) * g * g;
        const float b1 = float(1.0 - std::pow(0.9, t)), b2 = float(1.0 - std::pow(0.999, t));
        wf -= lr * ((s1 / b1) / (std::sqrt(s2 / b2) + 1e-7f));
      }
      EXPECT_NEAR(w.to_vector<float>()[0], wf, 1e-6 * (1 + std::abs(wf))) << opt->name() << " update " << k;
    }
    EXPECT_EQ(opt->steps(), 8);
    EXPECT_NEAR(opt->current_lr(), 0.01 / 5.0, 1e-12);
  }
  nn::Sequential m;
  m.add("fc", std::make_shared<nn::Linear>(1, 1, false));
  m.to(kCPU);
  optim::RMSprop opt(m.arena(), 0.01);
  EXPECT_THROW(opt.set_decay(-1), Error);
  EXPECT_THROW(opt.set_steps(-2), Error);
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
  EXPECT_STREQ(out.grad_fn()->name(), "BiasActBackward") << "the last Linear's bias";
  // fc + relu + drop is one node: the second Linear's input comes straight from it.
  auto into_out = out.grad_fn()->next_edges[0].fn;  // MatmulBackward of `out`
  ASSERT_TRUE(into_out);
  EXPECT_STREQ(into_out->next_edges[0].fn->name(), "BiasActBackward");
}

TEST(Models, ParameterCountsMatchTheReference) {
  for (const auto& info : models::all_models()) {
    auto m = info.build();
    EXPECT_EQ(m->num_parameters(), info.expected_parameters) << info.name;
  }
}

TEST(Models, MnistCnnOutputShape) {
  auto m = models::find_model("mnist_cnn").build();
  m->eval();
  NoGradGuard g;
  EXPECT_EQ((*m)(full(Shape{2, 28, 28}, 0.5)).shape(), (Shape{2, 10}));
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
  m.eval();
  NoGradGuard g;
  EXPECT_EQ(m(x).shape(), x.shape());
}

TEST(Precision, ParseAndRefuse) {
  EXPECT_EQ(parse_precision("fp32"), Precision::FP32);
  EXPECT_EQ(parse_precision("tf32"), Precision::TF32);
  EXPECT_STREQ(precision_name(Precision::TF32), "tf32");
  EXPECT_EQ(parse_precision("fp16"), Precision::FP16);
  EXPECT_EQ(parse_precision("bf16"), Precision::BF16);
  EXPECT_THROW(parse_precision("double"), Error);
  EXPECT_EQ(precision(), Precision::FP32);  // the default
  EXPECT_EQ(compute_dtype(), DType::f32);
  // The CPU has no tensor cores: every mode but fp32 is refused there, never run as fp32.
  EXPECT_EQ(precision_unsupported(Precision::FP32, kCPU), "");
  for (Precision p : {Precision::TF32, Precision::FP16, Precision::BF16})
    EXPECT_NE(precision_unsupported(p, kCPU).find("GPU mode"), std::string::npos) << precision_name(p);
  {
    PrecisionScope bf16(Precision::BF16);
    EXPECT_EQ(compute_dtype(), DType::bf16);
    {
      PrecisionScope fp16(Precision::FP16);  // scopes nest
      EXPECT_EQ(compute_dtype(), DType::f16);
    }
    EXPECT_EQ(precision(), Precision::BF16);
    Precision other = Precision::FP32;
    std::thread([&] { other = precision(); }).join();  // per thread: another thread is unaffected
    EXPECT_EQ(other, Precision::FP32);
  }
  EXPECT_EQ(precision(), Precision::FP32);
}

TEST(MemoryFormat, ChannelsLastStridesConversionAndOps) {
  const MemoryFormat CL = MemoryFormat::ChannelsLast;
  EXPECT_EQ(strides_for(Shape{2, 3, 4, 5}, CL), (Shape{60, 1, 15, 3}));
  std::vector<float> v(120);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  Tensor x = from_vector(v, Shape{2, 3, 4, 5});
  EXPECT_EQ(x.memory_format(), MemoryFormat::Contiguous);
  Tensor y = contiguous(x, CL);
  EXPECT_EQ(y.memory_format(), CL);
  EXPECT_FALSE(y.is_contiguous());
  EXPECT_TRUE(y.is_contiguous(CL));
  // Element (n, c, h, w) keeps its value; memory holds it at ((n*H + h)*W + w)*C + c.
  const float* raw = y.data<float>();
  EXPECT_EQ(raw[((1 * 4 + 2) * 5 + 3) * 3 + 1], v[((1 * 3 + 1) * 4 + 2) * 5 + 3]);
  EXPECT_EQ(y.to_vector<float>(), v);
  EXPECT_TRUE(contiguous(y, CL).same(y));
  EXPECT_EQ(contiguous(y).to_vector<float>(), v);
  // One channel: the memory order is the same, so the conversion restrides without copying.
  Tensor one = from_vector(std::vector<float>(8, 1.f), Shape{2, 1, 2, 2});
  Tensor one_cl = contiguous(one, CL);
  EXPECT_EQ(one_cl.memory_format(), CL);
  EXPECT_EQ(one_cl.data_ptr(), one.data_ptr());
  // Ops with a channels-last path keep the format; a reshape reads it as NCHW.
  Tensor w = full(Shape{2, 3, 1, 1}, 0.5);
  Tensor c = conv2d(y, w, Conv2dParams{});
  EXPECT_EQ(c.memory_format(), CL);
  EXPECT_EQ(c.to_vector<float>(), conv2d(x, w, Conv2dParams{}).to_vector<float>());
  EXPECT_EQ(relu(c).memory_format(), CL);
  EXPECT_EQ(max_pool2d(c, Pool2dParams{}).memory_format(), CL);
  EXPECT_EQ(flatten(c, 1).to_vector<float>(), flatten(conv2d(x, w, Conv2dParams{}), 1).to_vector<float>());
  EXPECT_THROW(strides_for(Shape{2, 3}, CL), Error);
}

// A whole model in channels-last gives the NCHW model's outputs and gradients (float32: equal up
// to summation order).
TEST(MemoryFormat, Cifar10CnnChannelsLastMatchesNchw) {
  const models::ModelInfo& info = models::find_model("cifar10_cnn");
  auto run = [&](MemoryFormat f) {
    manual_seed(3);
    auto m = info.build();
    m->to(kCPU);
    m->set_memory_format(f);
    m->eval();  // no dropout: the masks follow memory order, so they differ between layouts
    std::vector<float> v(2 * 3 * 32 * 32);
    for (size_t i = 0; i < v.size(); ++i) v[i] = philox_uniform(5, 0, i);
    Tensor y = (*m)(from_vector(v, Shape{2, 3, 32, 32}));
    backward(sum(y * y));
    return std::make_pair(y.to_vector<float>(), m->arena().grads().to_vector<float>());
  };
  auto a = run(MemoryFormat::Contiguous), b = run(MemoryFormat::ChannelsLast);
  ASSERT_EQ(a.first.size(), b.first.size());
  for (size_t i = 0; i < a.first.size(); ++i) EXPECT_NEAR(a.first[i], b.first[i], 1e-5) << i;
  ASSERT_EQ(a.second.size(), b.second.size());
  for (size_t i = 0; i < a.second.size(); ++i) ASSERT_NEAR(a.second[i], b.second[i], 1e-5 + 1e-4 * std::abs(a.second[i])) << i;
}
