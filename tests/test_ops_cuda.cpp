// Every op in the table: CPU vs CUDA parity, forward and every input gradient, on random inputs.
// Skips with a message where there is no GPU (or no CUDA build).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "core/cuda_runtime.h"
#include "core/dispatch.h"
#include "core/exec_context.h"
#include "core/flops.h"
#include "core/knobs.h"
#include "ops/bias_act.h"
#include "ops/conv.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/linalg.h"
#include "ops/fused/linear_act.h"
#include "ops/mask.h"
#include "ops/norm.h"
#include "ops/pool.h"
#include "op_cases.h"

using namespace loupe;

// A macro: GTEST_SKIP must run in the test body itself to end the test.
#define REQUIRE_GPU() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (or a CPU-only build): GPU parity not run"

namespace {

void expect_close(const std::vector<float>& a, const std::vector<float>& b, const std::string& what,
                  double atol = 1e-5, double rtol = 1e-4) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    float tol = float(atol + rtol * std::abs(a[i]));
    ASSERT_NEAR(a[i], b[i], tol) << what << " element " << i;
  }
}

// Runs f on one device: returns the output and the gradients of sum(out * r); stores the FLOPs the
// library counted for f's forward and backward in *flops when given.
std::vector<std::vector<float>> run_case(const test::OpCase& c, Device d, test::Flops* flops = nullptr) {
  std::vector<Tensor> xs = test::make_inputs(c, DType::f32, 11);
  std::vector<Tensor> on;
  for (Tensor& x : xs) {
    Tensor t = to(x, d).detach();
    if (x.requires_grad()) t.requires_grad_(true);
    on.push_back(t);
  }
  const double f0 = flops_counted();
  Tensor out = c.f(on);
  const double f1 = flops_counted();
  std::vector<float> r(static_cast<size_t>(out.numel()));
  for (size_t i = 0; i < r.size(); ++i) r[i] = 0.5f + philox_uniform(99, 0, i);
  backward(out, from_vector(r, out.shape(), d));  // the gradient of sum(out * r)
  if (flops) {
    flops->forward = f1 - f0;
    flops->backward = flops_counted() - f1;
  }
  std::vector<std::vector<float>> res{out.to_vector<float>()};
  for (Tensor& t : on)
    if (t.requires_grad()) res.push_back(t.grad().to_vector<float>());
  return res;
}
}  // namespace

class OpParity : public ::testing::TestWithParam<test::OpCase> {};

TEST_P(OpParity, CpuAndCudaAgree) {
  REQUIRE_GPU();
  const test::OpCase& c = GetParam();
  test::Flops counted;
  auto cpu = run_case(c, kCPU), gpu = run_case(c, kCUDA, &counted);
  ASSERT_EQ(cpu.size(), gpu.size());
  for (size_t k = 0; k < cpu.size(); ++k)
    expect_close(cpu[k], gpu[k], c.name + (k ? " grad " + std::to_string(k) : " output"), c.tol.f32_atol, c.tol.f32_rtol);
  // The CUDA path counts what the CPU's does (test_flops checks the CPU against the formula).
  test::Flops want = c.flops(c.shapes());
  EXPECT_DOUBLE_EQ(counted.forward, want.forward) << c.name << " forward FLOPs on CUDA";
  EXPECT_DOUBLE_EQ(counted.backward, want.backward) << c.name << " backward FLOPs on CUDA";
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpParity, ::testing::ValuesIn(test::op_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(CudaLarge, BigShapesAgree) {
  REQUIRE_GPU();
  // Shapes past one block / one warp: large reductions, long softmax rows, a big GEMM.
  manual_seed(5);
  std::vector<float> v(static_cast<size_t>(300000));
  for (size_t i = 0; i < v.size(); ++i) v[i] = philox_uniform(3, 0, i) - 0.5f;
  Tensor x = from_vector(v, Shape{600, 500});
  Tensor xg = to(x, kCUDA);
  EXPECT_NEAR(sum(x).item(), sum(xg).item(), 1e-2);
  expect_close(sum(x, 0).to_vector<float>(), sum(xg, 0).to_vector<float>(), "sum dim 0");
  expect_close(softmax(x).to_vector<float>(), softmax(xg).to_vector<float>(), "softmax 500 cols");
  Tensor w = slice(x, 0, 0, 500);
  std::vector<float> a = matmul(x, w).to_vector<float>(), b = matmul(xg, to(w, kCUDA)).to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-3 + 1e-4 * std::abs(a[i])) << i;
  EXPECT_EQ(argmax(x).to_vector<int32_t>(), argmax(xg).to_vector<int32_t>());
  Tensor labels = argmax(x);
  EXPECT_EQ(count_correct(x, labels).item(), 600.0);
  EXPECT_EQ(count_correct(xg, to(labels, kCUDA)).item(), 600.0);
  // A running count: the count added to what the scalar held, on both devices.
  for (Device d : {kCPU, kCUDA}) {
    Tensor acc = full(Shape{}, 7.0, DType::f32, d);
    count_correct_into(acc, d == kCPU ? x : xg, to(labels, d));
    count_correct_into(acc, d == kCPU ? x : xg, to(labels, d));
    EXPECT_EQ(acc.item(), 1207.0) << d.str();
  }
}

// cross_entropy_counted (the trainer's loss head) is cross_entropy, add_ and count_correct_into:
// the same loss bits, the same running sums, the same gradient (made in the forward pass when the
// seed is the one backward gets, else in the backward pass), on both devices, for 16-bit logits on
// CUDA too, and rows past one block.
TEST(CudaLoss, CountedCrossEntropyIsTheSeparateOps) {
  REQUIRE_GPU();
  for (int64_t N : {5, 300, 1024})
    for (int64_t C : {10, 57})
      for (DType dt : {DType::f32, DType::f16, DType::bf16})
        for (Device d : {kCPU, kCUDA}) {
          if (d == kCPU && dt != DType::f32) continue;
          SCOPED_TRACE(std::to_string(N) + "x" + std::to_string(C) + " " + dtype_name(dt) + " " + d.str());
          std::vector<float> v(size_t(N * C));
          for (size_t i = 0; i < v.size(); ++i) v[i] = 4.f * (philox_uniform(11, 0, i) - 0.5f);
          std::vector<int32_t> lab(static_cast<size_t>(N));
          for (size_t i = 0; i < lab.size(); ++i) lab[i] = int32_t(philox_uniform(12, 0, i) * float(C)) % int32_t(C);
          Tensor labels = to(from_vector(lab, Shape{N}), d);
          Tensor x[2], loss[2], sums[2];
          for (int k = 0; k < 2; ++k) {
            x[k] = to(to(from_vector(v, Shape{N, C}), d), dt).detach().requires_grad_(true);
            sums[k] = from_vector(std::vector<float>{1.5f, 3.f}, Shape{2}, d);
          }
          Tensor loss_sum[2] = {as_strided(sums[0], Shape{}, Shape{}, 0), as_strided(sums[1], Shape{}, Shape{}, 0)};
          Tensor correct[2] = {as_strided(sums[0], Shape{}, Shape{}, 1), as_strided(sums[1], Shape{}, Shape{}, 1)};
          // The gradient made in the forward pass for this seed (0.75, and a scaler's 65536), or in
          // the backward pass for another tensor of the same value.
          Tensor seed = full(Shape{}, N == 300 ? 65536.0 : 0.75, DType::f32, d);
          Tensor given = (C == 57) ? seed : full(Shape{}, N == 300 ? 65536.0 : 0.75, DType::f32, d);
          loss[0] = cross_entropy_counted(x[0], labels, loss_sum[0], correct[0], double(N), seed);
          loss[1] = cross_entropy(x[1], labels);
          {
            NoGradGuard g;
            add_(loss_sum[1], loss[1], double(N));
            count_correct_into(correct[1], x[1].detach(), labels);
          }
          EXPECT_EQ(loss[0].item(), loss[1].item());
          EXPECT_EQ(sums[0].to_vector<float>(), sums[1].to_vector<float>());
          for (int k = 0; k < 2; ++k) backward(loss[k], given);
          EXPECT_EQ(to(x[0].grad(), DType::f32).to_vector<float>(), to(x[1].grad(), DType::f32).to_vector<float>());
        }
}

// Ties for the largest logit count as the first largest class on the GPU, as argmax and the CPU
// count do, in every precision and in the fused counted loss: ties within a warp's lanes and across
// them (57 classes: classes 3 and 40), labelled with the first and with the second of the tied.
TEST(CudaLoss, TiesGoToTheFirstLargestClassAsOnTheCpu) {
  REQUIRE_GPU();
  for (int64_t C : {3, 57}) {
    const int64_t N = 6;
    std::vector<float> v(size_t(N * C), -1.f);
    std::vector<int32_t> lab(static_cast<size_t>(N));
    const int64_t a = C == 3 ? 0 : 3, b = C == 3 ? 1 : 40;
    for (int64_t i = 0; i < N; ++i) {
      v[size_t(i * C + a)] = v[size_t(i * C + b)] = 2.f;  // rows 4 and 5: all equal instead
      if (i >= 4) std::fill(v.begin() + i * C, v.begin() + (i + 1) * C, 0.5f);
      lab[size_t(i)] = int32_t(i % 2 == 0 ? a : b);  // even rows right where the first tied class wins
    }
    lab[5] = 0;  // all equal: class 0 is the first
    const Tensor labels_cpu = from_vector(lab, Shape{N});
    const double want = count_correct(from_vector(v, Shape{N, C}), labels_cpu).item();
    EXPECT_EQ(want, C == 3 ? 4.0 : 3.0) << "rows 0, 2 and 5, and 4 where its label is class 0";
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      SCOPED_TRACE(std::to_string(C) + " classes, " + dtype_name(dt));
      const Tensor logits = to(to(from_vector(v, Shape{N, C}), kCUDA), dt), labels = to(labels_cpu, kCUDA);
      EXPECT_EQ(count_correct(logits, labels).item(), want);
      Tensor sums = zeros(Shape{2}, DType::f32, kCUDA);
      Tensor loss_sum = as_strided(sums, Shape{}, Shape{}, 0), correct = as_strided(sums, Shape{}, Shape{}, 1);
      cross_entropy_counted(logits, labels, loss_sum, correct, double(N), full(Shape{}, 1.0, DType::f32, kCUDA));
      EXPECT_EQ(correct.item(), want);
    }
  }
}

// Keras's Masking's mask (ops/mask.h): a step is kept where any feature differs from the value,
// as on the CPU, in every float type; the value as the type holds it (0.1 in bfloat16 is not
// float32's 0.1).
TEST(CudaMask, AnyNotEqualIsTheCpus) {
  REQUIRE_GPU();
  const float v = 0.1f, q = std::nanf("");
  const std::vector<float> x{v, v, v, 0.5f, v, v, v, v, 2.f, q, v, v, -v, v, v, v, v, v};  // steps of 3
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Tensor cpu = from_vector(x, Shape{2, 3, 3});
    const Tensor gpu = any_not_equal(to(to(from_vector(x, Shape{2, 3, 3}), kCUDA), dt), 0.1);
    EXPECT_EQ(gpu.shape(), (Shape{2, 3}));
    EXPECT_EQ(to(to(gpu, DType::f32), kCPU).to_vector<float>(), (std::vector<float>{0, 1, 1, 1, 1, 0}));
    EXPECT_EQ(any_not_equal(cpu, 0.1).to_vector<float>(), (std::vector<float>{0, 1, 1, 1, 1, 0}));
  }
}

// The reductions' split paths and the float4 paths only run on big tensors.
TEST(CudaLarge, ReductionsAndVectorPathsAgree) {
  REQUIRE_GPU();
  auto random = [](Shape s, uint64_t seed) {
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = philox_uniform(seed, 0, i) - 0.5f;
    return from_vector(v, s);
  };
  auto close = [](const Tensor& a, const Tensor& b, double tol, const char* what) {
    std::vector<float> x = a.to_vector<float>(), y = to(b, kCPU).to_vector<float>();
    ASSERT_EQ(x.size(), y.size()) << what;
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], tol * (1 + std::abs(x[i]))) << what << " " << i;
  };
  // A bias gradient: [1024, 128] over the batch (split over n), and [300, 77] (odd, a partial tile).
  for (Shape s : {Shape{1024, 128}, Shape{300, 77}, Shape{5, 3000, 40}}) {
    Tensor x = random(s, s.numel());
    close(sum(x, s.size() == 3 ? 1 : 0), sum(to(x, kCUDA), s.size() == 3 ? 1 : 0), 1e-4, "sum strided");
  }
  // A conv bias gradient: [N, C, H*W] over N and H*W, and an odd one.
  for (Shape s : {Shape{256, 64, 24, 24}, Shape{7, 5, 3, 11}, Shape{2048, 10}}) {
    Tensor x = random(s, 7 + s.numel());
    close(sum_except(x, 1), sum_except(to(x, kCUDA), 1), 1e-4, "sum_except");
  }
  // float4 paths (aligned, n % 4 == 0) and the scalar ones (an odd offset view) give the same.
  Tensor x = random(Shape{64, 32, 12, 12}, 3), b = random(Shape{32}, 4);
  Tensor xg = to(x, kCUDA), bg = to(b, kCUDA);
  close(relu(bias_add(x, b)), relu(bias_add(xg, bg)), 1e-6, "bias_add + relu");
  Tensor odd = slice(flatten(x, 0), 0, 1, 1 + 64 * 32 * 144 - 4), oddg = slice(flatten(xg, 0), 0, 1, 1 + 64 * 32 * 144 - 4);
  close(relu(odd), relu(oddg), 1e-6, "relu, unaligned");
  manual_seed(3);
  Tensor d4 = dropout(xg, 0.4, true);
  manual_seed(3);
  Tensor d1 = dropout(x, 0.4, true);
  close(d1, d4, 1e-6, "dropout float4 vs CPU");
}

// --precision tf32: convolutions and GEMMs on tensor cores with TF32 inputs (10-bit mantissa), so
// parity with the CPU's fp32 holds to about 1e-3 relative, not 1e-5; fp32 is strict again after.
TEST(CudaPrecision, Tf32ConvAndGemmCloseToFp32) {
  REQUIRE_GPU();
  auto random = [](Shape s, uint64_t seed) {
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = philox_uniform(seed, 0, i) - 0.5f;
    return from_vector(v, s);
  };
  Tensor x = random(Shape{64, 16, 20, 20}, 1), w = random(Shape{32, 16, 3, 3}, 2);
  Tensor a = random(Shape{256, 512}, 3), b = random(Shape{512, 128}, 4);
  Conv2dParams p;
  p.pad_h = p.pad_w = 1;
  std::vector<float> yc = conv2d(x, w, p).to_vector<float>(), mc = matmul(a, b).to_vector<float>();
  std::vector<float> yt, mt;
  {
    PrecisionScope tf32(Precision::TF32);
    yt = conv2d(to(x, kCUDA), to(w, kCUDA), p).to_vector<float>();
    mt = matmul(to(a, kCUDA), to(b, kCUDA)).to_vector<float>();
  }
  std::vector<float> ys = conv2d(to(x, kCUDA), to(w, kCUDA), p).to_vector<float>();
  double max_t = 0, max_s = 0;
  for (size_t i = 0; i < yc.size(); ++i) {
    max_t = std::max(max_t, double(std::abs(yt[i] - yc[i])));
    max_s = std::max(max_s, double(std::abs(ys[i] - yc[i])));
  }
  double max_g = 0;
  for (size_t i = 0; i < mc.size(); ++i) max_g = std::max(max_g, double(std::abs(mt[i] - mc[i])));
  // Outputs are sums of 144 (conv) and 512 (GEMM) products of magnitude <= 0.25, so |y| <~ 3.
  EXPECT_LT(max_t, 2e-2) << "tf32 conv drifted further than TF32 rounding explains";
  EXPECT_LT(max_g, 2e-2) << "tf32 GEMM drifted further than TF32 rounding explains";
  // Strict fp32 GEMM agrees to ~1e-6 here; TF32 rounding shows (cuBLAS really used tensor cores).
  EXPECT_GT(max_g, 1e-5) << "--precision tf32 did not reach cuBLAS";
  EXPECT_LT(max_s, 1e-4) << "fp32 after tf32 must be strict fp32 again (the algorithm cache is per precision)";
}

// The fused epilogue gives the separate ops' output and input gradient bit for bit, in every
// precision and layout, at real sizes (the vector paths, the [rows, C] kernel that reduces the bias
// gradient, the odd-channel fallback); the bias gradient differs only in summation order.
TEST(CudaFusion, BiasActMatchesTheSeparateOps) {
  REQUIRE_GPU();
  const MemoryFormat CL = MemoryFormat::ChannelsLast;
  struct Case {
    Shape shape;
    bool cl;
    std::optional<Act> act;
    double p;
  };
  const Case cases[] = {{{1024, 512}, false, Act::Relu, 0.5},    {{256, 32, 12, 12}, true, Act::Relu, 0.0},
                        {{64, 64, 24, 24}, true, Act::Relu, 0.25}, {{100, 10}, false, std::nullopt, 0.0},
                        {{8, 3, 5, 5}, false, Act::Tanh, 0.0},    {{33, 7}, false, Act::Sigmoid, 0.0},
                        {{129, 128}, false, Act::Relu, 0.2}};
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (const Case& k : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + k.shape.str() + (k.cl ? " channels-last" : ""));
      auto input = [&](const Shape& s, uint64_t seed) {
        std::vector<float> v(size_t(s.numel()));
        for (size_t i = 0; i < v.size(); ++i) v[i] = philox_uniform(seed, 0, i) * 2.f - 1.f;
        Tensor t = to(from_vector(v, s, kCUDA), dt);
        return (k.cl && s.size() == 4 ? contiguous(t, CL) : t).detach().requires_grad_(true);
      };
      Tensor x1 = input(k.shape, 1), b1 = input(Shape{k.shape[1]}, 2), gy = input(k.shape, 3).detach();
      Tensor x2 = x1.detach().requires_grad_(true), b2 = b1.detach().requires_grad_(true);
      manual_seed(5);
      Tensor y1 = bias_act(x1, b1, k.act, k.p, true);
      manual_seed(5);
      Tensor y2 = bias_add(x2, b2);
      if (k.act) y2 = activation(*k.act, y2);
      if (k.p > 0) y2 = dropout(y2, k.p, true);
      EXPECT_EQ(y1.memory_format(), y2.memory_format());
      EXPECT_EQ(to(y1, DType::f32).to_vector<float>(), to(y2, DType::f32).to_vector<float>());
      backward(sum(mul(y1, gy)));
      backward(sum(mul(y2, gy)));
      EXPECT_EQ(to(x1.grad(), DType::f32).to_vector<float>(), to(x2.grad(), DType::f32).to_vector<float>());
      std::vector<float> g1 = to(b1.grad(), DType::f32).to_vector<float>(), g2 = to(b2.grad(), DType::f32).to_vector<float>();
      double rel = dt == DType::f32 ? 1e-4 : 2e-2;
      for (size_t i = 0; i < g1.size(); ++i) ASSERT_NEAR(g1[i], g2[i], rel * (1 + std::abs(g2[i]))) << "bias grad " << i;
    }
}

namespace {
// Uniform in [-1, 1) on the GPU, in dtype dt: the fused Linear's tests' operands.
Tensor uniform_on_gpu(const Shape& s, uint64_t seed, DType dt) {
  std::vector<float> v(size_t(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = philox_uniform(seed, 0, i) * 2.f - 1.f;
  return to(from_vector(v, s, kCUDA), dt).detach();
}

// a against the reference r, element by element, within rel of 1 + |r| (the dtype's tolerance).
void expect_close_to(const Tensor& a, const Tensor& r, double rel, const char* what) {
  std::vector<float> av = to(a, DType::f32).to_vector<float>(), rv = to(r, DType::f32).to_vector<float>();
  ASSERT_EQ(av.size(), rv.size()) << what;
  for (size_t i = 0; i < av.size(); ++i) ASSERT_NEAR(av[i], rv[i], rel * (1 + std::abs(rv[i]))) << what << " " << i;
}
}  // namespace

// linear_act on CUDA (the bias in cuBLASLt's epilogues: BIAS forward with no activation, BGRADB in
// the weight-gradient GEMM) against matmul and bias_act, at the reference models' shapes and odd
// ones, in every precision: the input's gradient is the same GEMM of the same values, bit for bit;
// the output (bias added before rounding), the weight's and the bias's gradients (other kernels,
// other summation orders) agree to the dtype's tolerance.
TEST(CudaFusion, LinearActMatchesMatmulAndBiasAct) {
  REQUIRE_GPU();
  struct Case {
    int64_t rows, in, out;
    std::optional<Act> act;
    double p;
    bool bias;
  };
  const Case cases[] = {{128, 784, 512, Act::Relu, 0.2, true}, {1024, 512, 10, std::nullopt, 0.0, true},
                        {128, 512, 512, Act::Relu, 0.0, true}, {33, 7, 5, Act::Tanh, 0.0, true},
                        {100, 64, 10, std::nullopt, 0.0, false}, {7, 20, 1, Act::Sigmoid, 0.0, true}};
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (const Case& k : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + std::to_string(k.rows) + "x" + std::to_string(k.in) + " -> " +
                   std::to_string(k.out));
      auto input = [&](const Shape& s, uint64_t seed) { return uniform_on_gpu(s, seed, dt); };
      Tensor x0 = input(Shape{k.rows, k.in}, 1), w0 = input(Shape{k.out, k.in}, 2), b0 = input(Shape{k.out}, 3);
      Tensor gy = input(Shape{k.rows, k.out}, 4);
      Tensor x[2], w[2], b[2], y[2];
      for (int j = 0; j < 2; ++j) {
        x[j] = x0.detach().requires_grad_(true);
        w[j] = w0.detach().requires_grad_(true);
        b[j] = k.bias ? b0.detach().requires_grad_(true) : Tensor();
      }
      manual_seed(5);
      y[0] = linear_act(x[0], w[0], b[0], k.act, k.p, true);
      manual_seed(5);
      y[1] = matmul(x[1], transpose(w[1], 0, 1));
      if (k.bias || k.act || k.p > 0) y[1] = bias_act(y[1], b[1], k.act, k.p, true);
      for (int j = 0; j < 2; ++j) backward(sum(mul(y[j], gy)));
      const double rel = dt == DType::f32 ? 1e-4 : 2e-2;
      auto near = [&](const Tensor& a, const Tensor& r, const char* what) { expect_close_to(a, r, rel, what); };
      near(y[0], y[1], "output");
      near(x[0].grad(), x[1].grad(), "the input's gradient");  // a narrow head's (out <= 16) is not cuBLAS's
      near(w[0].grad(), w[1].grad(), "weight grad");
      if (k.bias) near(b[0].grad(), b[1].grad(), "bias grad");
    }
}

// conv2d_bias_act on CUDA (one cuDNN kernel with the bias and relu in its epilogue, where runtime
// fusion has one that times faster; else the two kernels) against conv2d and bias_act, at the
// reference models' convolutions and odd ones, in every precision and both layouts: the output
// (rounded once rather than twice) and the gradients agree to the dtype's tolerance.
TEST(CudaFusion, Conv2dBiasActMatchesConvAndBiasAct) {
  REQUIRE_GPU();
  struct Case {
    Shape x;
    int64_t K;
    int k, pad;
    std::optional<Act> act;
  };
  const Case cases[] = {{{16, 3, 32, 32}, 32, 3, 1, Act::Relu},  {{16, 32, 32, 32}, 32, 3, 0, Act::Relu},
                        {{16, 32, 16, 16}, 64, 3, 1, Act::Relu}, {{16, 64, 16, 16}, 64, 3, 0, Act::Relu},
                        {{8, 1, 28, 28}, 32, 3, 0, Act::Relu},   {{8, 32, 26, 26}, 64, 3, 0, std::nullopt},
                        {{5, 8, 9, 7}, 24, 5, 2, Act::Relu},     {{3, 16, 6, 6}, 8, 1, 0, std::nullopt}};
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (bool cl : {true, false})
      for (const Case& k : cases) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + k.x.str() + " K " + std::to_string(k.K) +
                     (cl ? " channels-last" : " NCHW"));
        auto input = [&](const Shape& s, uint64_t seed) {
          Tensor t = uniform_on_gpu(s, seed, dt);
          return cl && s.size() == 4 ? contiguous(t, MemoryFormat::ChannelsLast) : t;
        };
        Conv2dParams p;
        p.pad_h = p.pad_w = k.pad;
        Tensor x0 = input(k.x, 1), w0 = input(Shape{k.K, k.x[1], k.k, k.k}, 2), b0 = input(Shape{k.K}, 3);
        Tensor x[2], w[2], b[2], y[2];
        for (int j = 0; j < 2; ++j) {
          x[j] = x0.detach().requires_grad_(true);
          w[j] = w0.detach().requires_grad_(true);
          b[j] = b0.detach().requires_grad_(true);
        }
        y[0] = conv2d_bias_act(x[0], w[0], b[0], p, k.act, 0.0, true);
        y[1] = bias_act(conv2d(x[1], w[1], p), b[1], k.act, 0.0, true);
        EXPECT_EQ(y[0].memory_format(), y[1].memory_format());
        const double rel = dt == DType::f32 ? 1e-4 : 2e-2;
        auto near = [&](const Tensor& a, const Tensor& r, const char* what) { expect_close_to(a, r, rel, what); };
        near(y[0], y[1], "output");
        // The gradients: an output that rounds to either side of zero on the two paths passes the
        // gradient on one only, so the separate ops' relu takes the fused output's mask.
        if (k.act) {
          std::vector<float> m = to(y[0], DType::f32).to_vector<float>();
          for (float& v : m) v = v > 0 ? 1.f : 0.f;
          Tensor mask = to(from_vector(m, y[0].shape(), kCUDA), dt);
          y[1] = mul(bias_act(conv2d(x[1], w[1], p), b[1], std::nullopt, 0.0, true), mask);
        }
        Tensor gy = input(y[1].shape(), 4);
        for (int j = 0; j < 2; ++j) backward(sum(mul(y[j], gy)));
        near(x[0].grad(), x[1].grad(), "the input's gradient");
        near(w[0].grad(), w[1].grad(), "weight grad");
        near(b[0].grad(), b[1].grad(), "bias grad");
      }
}

// A first layer's filter and bias gradients in one pass (ConvKernels::filter_bias_act_backward,
// run whether or not it timed faster) against bias_act's backward and cuDNN's filter gradient,
// at the reference models' first layers and odd ones (strides, an output height not a multiple
// of the block's rows, more than 32 and fewer than 32 filters, 1, 2 and 4 channels, no
// activation), in every precision: the same sums in another order, to the dtype's tolerance.
TEST(CudaFusion, FirstLayerGradientsMatchTheSeparateOps) {
  REQUIRE_GPU();
  struct Case {
    Shape x;
    int64_t K;
    int pad, stride;
    std::optional<Act> act;
  };
  const Case cases[] = {{{64, 3, 32, 32}, 32, 1, 1, Act::Relu}, {{32, 1, 28, 28}, 32, 0, 1, Act::Relu},
                        {{4, 3, 17, 13}, 48, 1, 2, Act::Relu},  {{3, 2, 9, 40}, 8, 0, 1, std::nullopt},
                        {{2, 4, 70, 50}, 64, 1, 1, Act::Relu},  {{5, 3, 11, 7}, 20, 0, 2, std::nullopt}};
  const MemoryFormat CL = MemoryFormat::ChannelsLast;
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (const Case& k : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + k.x.str() + " K " + std::to_string(k.K));
      Conv2dParams p;
      p.pad_h = p.pad_w = k.pad;
      p.stride_h = p.stride_w = k.stride;
      const Tensor x = contiguous(uniform_on_gpu(k.x, 1, dt), CL);
      const Tensor w0 = contiguous(uniform_on_gpu(Shape{k.K, k.x[1], 3, 3}, 2, dt), CL);
      const Tensor b0 = uniform_on_gpu(Shape{k.K}, 3, dt);
      const Tensor w = w0.detach().requires_grad_(true), b = b0.detach().requires_grad_(true);
      Tensor y;
      {
        NoGradGuard g;
        y = bias_act(conv2d(x, w0, p), b0, k.act, 0.0, true);
      }
      const Tensor gy = contiguous(uniform_on_gpu(y.shape(), 4, dt), CL);
      Tensor gw = empty(w0.shape(), dt, kCUDA, CL), gb = empty(Shape{k.K}, dt, kCUDA);
      ASSERT_TRUE(kernels<ConvKernels>(kCUDA).filter_bias_act_backward(current_context(), gw, gb, x, w0, y, gy,
                                                                     k.act ? int(*k.act) : -1, p, true));
      // The reference: the separate ops' backward, the relu's mask taken from y.
      std::vector<float> m = to(y, DType::f32).to_vector<float>();
      for (float& v : m) v = !k.act || v > 0 ? 1.f : 0.f;
      const Tensor mask = contiguous(to(from_vector(m, y.shape(), kCUDA), dt), CL);
      backward(sum(mul(mul(bias_act(conv2d(x, w, p), b, std::nullopt, 0.0, true), mask), gy)));
      const double rel = dt == DType::f32 ? 1e-4 : 2e-2;
      expect_close_to(gw, w.grad(), rel, "the filter's gradient");
      expect_close_to(gb, b.grad(), rel, "the bias's gradient");
      Tensor none;  // without the bias's
      ASSERT_TRUE(kernels<ConvKernels>(kCUDA).filter_bias_act_backward(current_context(), gw, none, x, w0, y, gy,
                                                                     k.act ? int(*k.act) : -1, p, true));
      expect_close_to(gw, w.grad(), rel, "the filter's gradient, no bias");
    }
}

// index_select into a first layer's input on CUDA (the trainer's resident gather, Module::input_layout):
// 16-bit and channels-last at once, bit for bit the cast of the float32 gather that the layer's
// autocast and copy made before.
TEST(CudaGather, WritesTheFirstLayersDtypeAndLayout) {
  REQUIRE_GPU();
  std::vector<uint8_t> v(40 * 3 * 9 * 7);
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint8_t((i * 131) % 256);
  const Tensor src = to(from_vector(v, Shape{40, 3, 9, 7}), kCUDA);
  std::vector<int32_t> ids(33);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 7) % 40);
  const Tensor idx = to(from_vector(ids, Shape{33}), kCUDA);
  const Tensor ref = index_select(src, idx, DType::f32, 1 / 255.0);
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    const Tensor got = index_select(src, idx, dt, 1 / 255.0, MemoryFormat::ChannelsLast);
    EXPECT_EQ(got.dtype(), dt);
    EXPECT_TRUE(got.is_contiguous(MemoryFormat::ChannelsLast));
    EXPECT_EQ(to(contiguous(got), DType::f32).to_vector<float>(), to(to(ref, dt), DType::f32).to_vector<float>())
        << dtype_name(dt);
  }
}

// conv2d_relu_max_pool (the relu's and the bias's backward in the pooling's pass) against
// conv2d_bias_act and max_pool2d with its dropout, at the reference models' conv + pool pairs
// (cifar10_cnn's second leaves a row and a column no window covers): the output and the input's
// gradient bit for bit (the same kernels see the same values); the filter's too in 16 bits, and
// to float32's tolerance in float32, where cuDNN's filter-gradient kernels on an H200 add their
// parts in an order that varies from run to run; the bias's to the dtype's tolerance (another
// summation order).
TEST(CudaFusion, Conv2dReluMaxPoolMatchesTheSeparateOps) {
  REQUIRE_GPU();
  struct Case {
    Shape x;
    int64_t K;
    double p;
  };
  const Case cases[] = {{{16, 32, 32, 32}, 32, 0.25}, {{16, 64, 15, 15}, 64, 0.25}, {{8, 32, 26, 26}, 64, 0.0},
                        {{4, 8, 10, 12}, 16, 0.5}};
  const MemoryFormat CL = MemoryFormat::ChannelsLast;
  Pool2dParams pp;
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (const Case& k : cases) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " x " + k.x.str() + " K " + std::to_string(k.K));
      Tensor x0 = contiguous(uniform_on_gpu(k.x, 1, dt), CL), w0 = uniform_on_gpu(Shape{k.K, k.x[1], 3, 3}, 2, dt);
      Tensor b0 = uniform_on_gpu(Shape{k.K}, 3, dt);
      Tensor x[2], w[2], b[2], y[2];
      for (int j = 0; j < 2; ++j) {
        x[j] = x0.detach().requires_grad_(true);
        w[j] = w0.detach().requires_grad_(true);
        b[j] = b0.detach().requires_grad_(true);
      }
      ASSERT_TRUE(conv2d_relu_max_pool_fits(x[0], w[0], b[0], pp));
      manual_seed(5);
      y[0] = conv2d_relu_max_pool(x[0], w[0], b[0], Conv2dParams{}, pp, k.p, true);
      manual_seed(5);
      y[1] = max_pool2d(conv2d_bias_act(x[1], w[1], b[1], Conv2dParams{}, Act::Relu, 0.0, true), pp, k.p, true);
      ASSERT_TRUE(y[0].defined());
      EXPECT_EQ(y[0].memory_format(), CL);
      auto bits = [](const Tensor& t) { return to(t, DType::f32).to_vector<float>(); };
      EXPECT_EQ(bits(y[0]), bits(y[1]));
      Tensor gy = contiguous(uniform_on_gpu(y[1].shape(), 4, dt), CL);
      for (int j = 0; j < 2; ++j) backward(sum(mul(y[j], gy)));
      EXPECT_EQ(bits(x[0].grad()), bits(x[1].grad())) << "the input's gradient";
      const double rel = dt == DType::f32 ? 1e-4 : 2e-2;
      auto near = [&](const Tensor& a, const Tensor& r, const char* what) { expect_close_to(a, r, rel, what); };
      if (dt == DType::f32)
        near(w[0].grad(), w[1].grad(), "the filter's gradient");
      else
        EXPECT_EQ(bits(w[0].grad()), bits(w[1].grad())) << "the filter's gradient";
      near(b[0].grad(), b[1].grad(), "bias grad");
    }
}

// In 16 bits the fused path must be as accurate as the unfused one: against float64 products of
// the same rounded operands, its output and its input's, weight's and bias's gradients may be no
// further off than matmul + bias_act's (each error is the tensor's largest, over its largest value).
// A GEMM whose split-K parts or bias sums were added in 16 bits would be several roundings off where
// the unfused path is one. The cases with up to 16 outputs and 256 rows take the narrow backward
// (LinalgKernels::narrow_backward; those past either bound do not), the others cuBLAS(Lt).
// test_ops_cuda_lt_on runs this with LOUPE_GEMM_EPILOGUE=on: every case through cuBLASLt's
// epilogues, which the default may leave to cuBLAS where they time slower.
TEST(CudaFusion, LinearActIsAsAccurateAsTheUnfusedPath) {
  REQUIRE_GPU();
  struct Case {
    int64_t rows, in, out;
  };
  const Case cases[] = {{1024, 784, 512}, {1024, 512, 10}, {64, 784, 256}, {128, 256, 10}, {128, 784, 512},
                        {256, 130, 16},   {256, 130, 8},   {33, 7, 1},     {257, 64, 3},   {5, 3, 17}};
  for (DType dt : {DType::f16, DType::bf16})
    for (const Case& k : cases) {
      const std::string name = std::string(dtype_name(dt)) + " " + std::to_string(k.rows) + "x" + std::to_string(k.in) +
                               " -> " + std::to_string(k.out);
      SCOPED_TRACE(name);
      auto input = [&](const Shape& s, uint64_t seed) { return uniform_on_gpu(s, seed, dt); };
      Tensor x0 = input(Shape{k.rows, k.in}, 1), w0 = input(Shape{k.out, k.in}, 2), b0 = input(Shape{k.out}, 3);
      Tensor gy = input(Shape{k.rows, k.out}, 4);
      auto host = [](const Tensor& t) { return to(t, DType::f32).to_vector<float>(); };
      const std::vector<float> X = host(x0), W = host(w0), B = host(b0), G = host(gy);
      // float64 references from the rounded operands.
      std::vector<double> y(size_t(k.rows * k.out)), gw(size_t(k.out * k.in), 0.0), gb(size_t(k.out), 0.0),
          gx(size_t(k.rows * k.in), 0.0);
      for (int64_t r = 0; r < k.rows; ++r)
        for (int64_t o = 0; o < k.out; ++o) {
          double acc = B[size_t(o)];
          for (int64_t i = 0; i < k.in; ++i) acc += double(X[size_t(r * k.in + i)]) * W[size_t(o * k.in + i)];
          y[size_t(r * k.out + o)] = acc;
          const double g = G[size_t(r * k.out + o)];
          gb[size_t(o)] += g;
          for (int64_t i = 0; i < k.in; ++i) {
            gw[size_t(o * k.in + i)] += g * X[size_t(r * k.in + i)];
            gx[size_t(r * k.in + i)] += g * W[size_t(o * k.in + i)];
          }
        }
      auto error = [](const std::vector<float>& got, const std::vector<double>& ref) {
        double worst = 0, scale = 0;
        for (size_t i = 0; i < ref.size(); ++i)
          worst = std::max(worst, std::abs(got[i] - ref[i])), scale = std::max(scale, std::abs(ref[i]));
        return worst / scale;
      };
      double err[2][4];
      for (int j = 0; j < 2; ++j) {
        Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true);
        Tensor b = b0.detach().requires_grad_(true);
        Tensor out = j == 0 ? linear_act(x, w, b, std::nullopt, 0.0, true)
                            : bias_act(matmul(x, transpose(w, 0, 1)), b, std::nullopt, 0.0, true);
        backward(sum(mul(out, gy)));
        err[j][0] = error(host(out), y), err[j][1] = error(host(x.grad()), gx);
        err[j][2] = error(host(w.grad()), gw), err[j][3] = error(host(b.grad()), gb);
      }
      const char* what[4] = {"output", "input gradient", "weight gradient", "bias gradient"};
      for (int q = 0; q < 4; ++q)
        EXPECT_LE(err[0][q], 1.5 * err[1][q] + 1e-7) << what[q] << ": fused " << err[0][q] << ", unfused " << err[1][q];
      std::printf("[%s] error over the largest, fused / unfused: output %.3g / %.3g, input grad %.3g / %.3g, weight "
                  "grad %.3g / %.3g, bias grad %.3g / %.3g\n", name.c_str(), err[0][0], err[1][0], err[0][1],
                  err[1][1], err[0][2], err[1][2], err[0][3], err[1][3]);
    }
}

// An incoming gradient at an unaligned offset (a view) still gets the fused bias gradient, from an
// aligned copy: the same result as from a contiguous gradient.
TEST(CudaFusion, BiasActTakesAnUnalignedGradient) {
  REQUIRE_GPU();
  std::vector<float> v(64 * 32 + 1);
  for (size_t i = 0; i < v.size(); ++i) v[i] = philox_uniform(6, 0, i) - 0.5f;
  Tensor buf = to(from_vector(v, Shape{int64_t(v.size())}, kCUDA), DType::f16);
  Tensor g_odd = reshape(slice(buf, 0, 1, int64_t(v.size())), Shape{64, 32});  // 2 bytes past 16-byte alignment
  Tensor g_even = contiguous(g_odd);
  std::vector<float> grads[2];
  for (int k = 0; k < 2; ++k) {
    Tensor x = contiguous(reshape(slice(buf, 0, 0, 64 * 32), Shape{64, 32})).detach().requires_grad_(true);
    Tensor b = zeros(Shape{32}, DType::f16, kCUDA).requires_grad_(true);
    backward(bias_act(x, b, Act::Relu, 0.0, true), k ? g_odd : g_even);
    grads[k] = to(b.grad(), DType::f32).to_vector<float>();
    std::vector<float> gx = to(x.grad(), DType::f32).to_vector<float>();
    grads[k].insert(grads[k].end(), gx.begin(), gx.end());
  }
  EXPECT_EQ(grads[0], grads[1]);
}

// Max pooling's channels-last kernels against cuDNN's NCHW forward and the NCHW backward (the same
// values in another memory order), at real sizes in every precision; with dropout, against pooling
// then dropout() in the same memory order.
TEST(CudaFusion, ChannelsLastMaxPoolMatchesNchwAndDropout) {
  REQUIRE_GPU();
  const MemoryFormat CL = MemoryFormat::ChannelsLast;
  for (DType dt : {DType::f32, DType::f16, DType::bf16})
    for (Shape s : {Shape{256, 32, 24, 24}, Shape{64, 64, 13, 11}}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " " + s.str());
      std::vector<float> v(size_t(s.numel()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = std::round((philox_uniform(4, 0, i) * 2.f - 1.f) * 64.f) / 16.f;  // ties
      Tensor base = to(from_vector(v, s, kCUDA), dt);
      Pool2dParams p;
      Tensor xn = base.detach().requires_grad_(true), xc = contiguous(base, CL).detach().requires_grad_(true);
      Tensor yn = max_pool2d(xn, p), yc = max_pool2d(xc, p);
      EXPECT_EQ(yc.memory_format(), CL);
      EXPECT_EQ(to(yn, DType::f32).to_vector<float>(), to(contiguous(yc), DType::f32).to_vector<float>());
      Tensor gy = to(from_vector(std::vector<float>(size_t(yn.numel()), 0.5f), yn.shape(), kCUDA), dt);
      backward(sum(mul(yn, gy)));
      backward(sum(mul(yc, contiguous(gy, CL))));
      EXPECT_EQ(to(xn.grad(), DType::f32).to_vector<float>(), to(contiguous(xc.grad()), DType::f32).to_vector<float>());
      // With dropout: one pass against pooling then dropout, both channels-last.
      Tensor x1 = contiguous(base, CL).detach().requires_grad_(true), x2 = x1.detach().requires_grad_(true);
      manual_seed(8);
      Tensor y1 = max_pool2d(x1, p, 0.4, true);
      manual_seed(8);
      Tensor y2 = dropout(max_pool2d(x2, p), 0.4, true);
      EXPECT_EQ(to(y1, DType::f32).to_vector<float>(), to(y2, DType::f32).to_vector<float>());
      backward(sum(mul(y1, contiguous(gy, CL))));
      backward(sum(mul(y2, contiguous(gy, CL))));
      EXPECT_EQ(to(x1.grad(), DType::f32).to_vector<float>(), to(x2.grad(), DType::f32).to_vector<float>());
    }
}

TEST(CudaOptim, FusedUpdatesMatchCpu) {
  REQUIRE_GPU();
  // 58 parameters: fourteen elements a thread by four, the last two one a thread.
  for (int which = 0; which < 5; ++which) {
    std::vector<float> results[2];
    for (int dev = 0; dev < 2; ++dev) {
      manual_seed(4);
      nn::Sequential m;
      m.add("fc1", std::make_shared<nn::Linear>(7, 5)).add("fc2", std::make_shared<nn::Linear>(5, 3));
      Device d = dev ? kCUDA : kCPU;
      m.to(d);
      std::unique_ptr<optim::Optimizer> opt;
      if (which == 0) opt = std::make_unique<optim::SGD>(m.arena(), 0.1, 0.9, true);
      if (which == 1) opt = std::make_unique<optim::RMSprop>(m.arena(), 0.01);
      if (which == 2) opt = std::make_unique<optim::Adam>(m.arena(), 0.01);
      if (which == 3) opt = std::make_unique<optim::Adadelta>(m.arena());
      if (which == 4) opt = std::make_unique<optim::SGD>(m.arena(), 0.1, 0.0, false, 0.01);  // no momentum
      Tensor x = full(Shape{4, 7}, 0.3, DType::f32, d);
      for (int s = 0; s < 3; ++s) {
        opt->zero_grad();
        backward(sum(relu(m(x))));
        opt->step();
      }
      results[dev] = m.arena().values().to_vector<float>();
    }
    expect_close(results[0], results[1], "optimizer " + std::to_string(which));
  }
}

TEST(CudaBatchNorm, RunningStatisticsAndEvalMatchCpu) {
  REQUIRE_GPU();
  std::vector<float> v(static_cast<size_t>(2 * 3 * 4 * 5));
  for (size_t i = 0; i < v.size(); ++i) v[i] = philox_uniform(8, 0, i) * 2 - 1;
  std::vector<std::vector<float>> stats[2];
  for (int dev = 0; dev < 2; ++dev) {
    Device d = dev ? kCUDA : kCPU;
    Tensor x = from_vector(v, Shape{2, 3, 4, 5}, d);
    Tensor w = full(Shape{3}, 1.5, DType::f32, d), b = full(Shape{3}, 0.25, DType::f32, d);
    Tensor rm = zeros(Shape{3}, DType::f32, d), rv = ones(Shape{3}, DType::f32, d);
    NoGradGuard g;
    batch_norm(x, w, b, rm, rv, true, 0.1, 1e-5);
    Tensor y = batch_norm(x, w, b, rm, rv, false, 0.1, 1e-5);
    stats[dev] = {rm.to_vector<float>(), rv.to_vector<float>(), y.to_vector<float>()};
  }
  for (size_t k = 0; k < 3; ++k) expect_close(stats[0][k], stats[1][k], "batch_norm stats/eval " + std::to_string(k));
}

// The kernels go on the lane their context names (core/exec_context.h), for loupe's own
// kernels, cuBLAS and cuDNN alike. The proof is the compute stream's capture: work on the default
// lane is recorded into the graph and does not run; the same calls on a lane of their own are not
// recorded and do run. The tables are called directly, on tensors allocated beforehand, so that
// nothing else touches the compute stream inside the capture.
TEST(CudaLane, TheKernelsGoOnTheLaneOfTheirContext) {
  REQUIRE_GPU();
  CudaRuntime* rt = cuda_runtime();
  ExecLane* own = rt->lane_create();
  std::vector<float> va(64 * 64), vb(64 * 64);
  for (size_t i = 0; i < va.size(); ++i) va[i] = philox_uniform(3, 0, i), vb[i] = philox_uniform(4, 0, i);
  Tensor a = from_vector(va, Shape{64, 64}, kCUDA), b = from_vector(vb, Shape{64, 64}, kCUDA);
  Tensor sum_ab = empty(Shape{64, 64}, DType::f32, kCUDA), prod = empty(Shape{64, 64}, DType::f32, kCUDA);
  Tensor x = from_vector(va, Shape{4, 16, 8, 8}, kCUDA), y = empty(Shape{4, 16, 8, 8}, DType::f32, kCUDA);
  Tensor w = ones(Shape{16}, DType::f32, kCUDA), bias = zeros(Shape{16}, DType::f32, kCUDA);
  Tensor rm = zeros(Shape{16}, DType::f32, kCUDA), rv = ones(Shape{16}, DType::f32, kCUDA);
  Tensor mean = empty(Shape{16}, DType::f32, kCUDA), invstd = empty(Shape{16}, DType::f32, kCUDA);
  auto issue = [&](ExecLane* lane) {
    const ExecContext ctx{Precision::FP32, lane};
    kernels<ElementwiseKernels>(kCUDA).binary(ctx, BinaryOp::Add, sum_ab, a, b);  // loupe's kernel
    GemmArgs g;
    g.M = g.N = g.K = 64, g.A = a.data_ptr(), g.B = b.data_ptr(), g.C = prod.data_ptr();
    g.lda = g.ldb = g.ldc = 64;
    kernels<LinalgKernels>(kCUDA).gemm(ctx, g);  // cuBLAS
    kernels<NormKernels>(kCUDA).forward_train(ctx, y, x, w, bias, rm, rv, mean, invstd, 0.1, 1e-5, 4, 16, 64);  // cuDNN
  };
  auto clear = [&] {
    for (const Tensor* t : {&sum_ab, &prod, &y}) fill_(*t, 0.0);
    rt->synchronize();
  };
  auto all_zero = [](const Tensor& t) {
    for (float v : t.to_vector<float>())
      if (v != 0.f) return false;
    return true;
  };
  issue(own);  // the lane's handles made, and cuBLAS's and cuDNN's first-call work done, outside a capture
  issue(nullptr);
  rt->event_synchronize(rt->event_record_on(rt->lane_stream(own)));
  rt->synchronize();

  clear();
  rt->capture_begin();
  issue(own);
  GraphCapture c = rt->capture_end();
  EXPECT_EQ(c.kernels, 0) << "a kernel of a context with a lane of its own went to the compute stream";
  if (c.exec) rt->graph_destroy(c.exec);
  rt->event_synchronize(rt->event_record_on(rt->lane_stream(own)));
  EXPECT_FALSE(all_zero(sum_ab) || all_zero(prod) || all_zero(y)) << "the lane's kernels did not run";

  clear();
  rt->capture_begin();
  issue(nullptr);
  c = rt->capture_end();
  ASSERT_TRUE(c.exec) << c.error;
  EXPECT_GE(c.kernels, 3) << "the default lane's kernels were not recorded on the compute stream";
  rt->synchronize();
  EXPECT_TRUE(all_zero(sum_ab) && all_zero(prod) && all_zero(y)) << "a default-lane kernel ran outside the graph";
  rt->graph_launch(c.exec);
  rt->synchronize();
  EXPECT_FALSE(all_zero(sum_ab) || all_zero(prod) || all_zero(y));
  rt->graph_destroy(c.exec);
}
