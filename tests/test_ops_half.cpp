// Mixed precision: every op of the table (op_cases.h) that a model runs in float16 or bfloat16,
// on CUDA, against the same op in float32 on CUDA: the output and every input gradient, each to
// the case's tolerance (tol.f16, tol.bf16: the largest error relative to the largest magnitude of
// the float32 result; op_cases.h says why each is what it is, and which ops stay float32).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "op_cases.h"

using namespace loupe;

namespace {

// Output and input gradients (as float32 vectors) of case c on CUDA with float inputs in dt, the
// inputs and the output's gradient first rounded to `rounded` (the 16-bit type under test). The
// float32 reference is run on the same rounded values, so the comparison measures the op's own
// arithmetic in 16 bits, not the rounding of its inputs: rounding x and b separately had flipped the
// sign of x + b near zero for relu (an error of 0.65 that no kernel caused), and tolerances wide
// enough for that passed a kernel that returned half the right values.
std::vector<std::vector<float>> run(const test::OpCase& c, DType dt, DType rounded) {
  std::vector<Tensor> xs = test::make_inputs(c, DType::f32, 11), on;
  for (size_t k = 0; k < xs.size(); ++k) {
    const Tensor& x = xs[k];
    Tensor t = to(x, kCUDA);
    if (is_floating(x.dtype()) && x.requires_grad() && !c.inputs[k].keep_f32) t = to(to(t, rounded), dt);
    // An input without a gradient (targets, a first layer's image) keeps float32, on the rounded
    // values too: the op may cast it to its own dtype, as a model's first layer does.
    else if (is_floating(x.dtype()) && !x.requires_grad()) t = to(to(t, rounded), DType::f32);
    t = t.detach();
    if (x.requires_grad()) t.requires_grad_(true);
    on.push_back(t);
  }
  Tensor out = c.f(on);
  std::vector<float> r(static_cast<size_t>(out.numel()));
  for (size_t i = 0; i < r.size(); ++i) r[i] = 0.5f + philox_uniform(99, 0, i);
  backward(sum(mul(out, to(to(from_vector(r, out.shape(), kCUDA), rounded), out.dtype()))));
  std::vector<std::vector<float>> res{to(out, DType::f32).to_vector<float>()};
  for (Tensor& t : on)
    if (t.requires_grad()) res.push_back(to(t.grad(), DType::f32).to_vector<float>());
  return res;
}

class HalfParity : public ::testing::TestWithParam<test::OpCase> {};

TEST_P(HalfParity, MatchesFloat32) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (or a CPU-only build): half parity not run";
  const test::OpCase& c = GetParam();
  for (DType dt : {DType::f16, DType::bf16}) {
    const std::optional<double> t = dt == DType::f16 ? c.tol.f16 : c.tol.bf16;
    if (!t) continue;
    const double tol = *t;
    const std::vector<std::vector<float>> ref = run(c, DType::f32, dt);
    std::vector<std::vector<float>> got;
    try {
      got = run(c, dt, dt);
    } catch (const Error& e) {
      ADD_FAILURE() << c.name << " in " << dtype_name(dt) << ": " << e.what();
      continue;
    }
    ASSERT_EQ(got.size(), ref.size());
    for (size_t k = 0; k < ref.size(); ++k) {
      ASSERT_EQ(got[k].size(), ref[k].size());
      double scale = 1e-6, err = 0;
      for (float v : ref[k]) scale = std::max(scale, double(std::abs(v)));
      for (size_t i = 0; i < ref[k].size(); ++i) err = std::max(err, std::abs(double(got[k][i]) - ref[k][i]) / scale);
      std::printf("%-36s %-8s %s error %.2e\n", c.name.c_str(), dtype_name(dt), k ? "grad  " : "output", err);
      EXPECT_LE(err, tol) << c.name << " " << dtype_name(dt) << (k ? " gradient " + std::to_string(k) : " output");
    }
  }
}

// The ops a model runs in 16 bits: the others (tol.f16 and tol.bf16 both nullopt) have no case here,
// rather than a case that skips.
std::vector<test::OpCase> half_cases() {
  std::vector<test::OpCase> r;
  for (const test::OpCase& c : test::op_cases())
    if (c.tol.f16 || c.tol.bf16) r.push_back(c);
  return r;
}

INSTANTIATE_TEST_SUITE_P(AllOps, HalfParity, ::testing::ValuesIn(half_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace

// The arena's 16-bit compute copy (nn::ParameterArena::enable_compute_copy): layers read views
// into it, their gradients land in the float32 gradient arena exactly as through the per-use
// cast, and the optimizer keeps the copy equal to the cast of the updated float32 weights. The
// embedding table, read in float32, has no place in the copy.
TEST(ComputeCopy, MatchesTheCastOnTheFlyAndFollowsTheOptimizer) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (or a CPU-only build)";
  PrecisionScope fp16(Precision::FP16);
  std::vector<float> grads[2], values[2];
  for (int copy = 0; copy < 2; ++copy) {
    manual_seed(3);
    nn::Sequential m;
    auto emb = std::make_shared<nn::Embedding>(10, 5);
    // fc1 wide enough for 16 bits (8 outputs); fc2 narrower, but fed 16 bits, so 16-bit too.
    m.add("emb", emb).add("fc1", std::make_shared<nn::Linear>(5, 8)).add("fc2", std::make_shared<nn::Linear>(8, 3));
    m.to(kCUDA);
    ASSERT_EQ(m.float32_parameters().size(), 1u);
    EXPECT_EQ(m.float32_parameters()[0].impl(), emb->weight.impl());
    if (copy) {
      m.arena().enable_compute_copy(DType::f16, m.float32_parameters());
      EXPECT_FALSE(nn::compute_view(emb->weight, DType::f16).defined()) << "the table is read in float32";
      EXPECT_EQ(m.arena().compute_values().numel(), 4 * 64) << "fc1 and fc2's weights and biases, 64-aligned";
    }
    optim::SGD opt(m.arena(), 0.1);
    Tensor ids = from_vector(std::vector<int32_t>{1, 7, 7}, Shape{3}, kCUDA);
    opt.zero_grad();
    Tensor y = m(ids);
    EXPECT_EQ(y.dtype(), DType::f16);
    backward(sum(to(y, DType::f32)));
    grads[copy] = m.arena().grads().to_vector<float>();
    opt.step();
    values[copy] = m.arena().values().to_vector<float>();
    if (copy) {
      for (const Tensor& p : m.parameters()) {
        Tensor v = nn::compute_view(p, DType::f16);
        if (!v.defined()) continue;
        EXPECT_EQ(to(v, DType::f32).to_vector<float>(), to(to(p, DType::f16), DType::f32).to_vector<float>())
            << "the copy must follow the update";
      }
    }
  }
  EXPECT_EQ(grads[0], grads[1]);
  EXPECT_EQ(values[0], values[1]);
}

// Mixed precision casts a Linear into 16 bits only where tensor cores can take its GEMM (8
// outputs or more) or where its input is 16-bit already: a narrow layer fed float32 stays float32.
TEST(ComputeCopy, NarrowLinearFedFloat32StaysFloat32) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (or a CPU-only build)";
  PrecisionScope fp16(Precision::FP16);
  manual_seed(4);
  nn::Linear narrow(50, 1), wide(50, 8);
  narrow.to(kCUDA);
  wide.to(kCUDA);
  Tensor x = ones(Shape{16, 50}, DType::f32, kCUDA);
  const int64_t before = nn::autocasts_16bit();
  EXPECT_EQ(narrow(x).dtype(), DType::f32);
  EXPECT_EQ(nn::autocasts_16bit(), before) << "nothing was cast to 16 bits";
  EXPECT_EQ(narrow(to(x, DType::f16)).dtype(), DType::f16);
  EXPECT_EQ(wide(x).dtype(), DType::f16);
  EXPECT_GT(nn::autocasts_16bit(), before);
}

// bfloat16 channels-last convolutions with at most 16 filter values (C*R*S) run as im2col + GEMM
// (ops/conv_cuda.cu): output and both gradients as float32's on the CPU, strided and padded,
// with and without the data gradient (cuDNN's, beside the GEMM's filter gradient); float16 and
// the larger filters, through cuDNN, alike.
TEST(ConvSmallFilter, MatchesFloat32) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (or a CPU-only build)";
  const MemoryFormat CL = MemoryFormat::ChannelsLast;
  struct Case {
    int64_t C, R;
    int stride, pad;
  };
  for (DType dt : {DType::f16, DType::bf16}) {
    for (const Case& k : {Case{1, 3, 1, 0}, Case{1, 3, 2, 1}, Case{3, 2, 2, 0}, Case{4, 2, 1, 1}, Case{3, 3, 1, 1}}) {
      auto values = [&](const Shape& s, uint64_t seed) {
        std::vector<float> v(size_t(s.numel()));
        for (size_t i = 0; i < v.size(); ++i) v[i] = philox_uniform(seed, 0, i) - 0.5f;
        return to(to(from_vector(v, s), dt), DType::f32);  // exact in 16 bits
      };
      Tensor xv = values(Shape{5, k.C, 11, 9}, 5), wv = values(Shape{6, k.C, k.R, k.R}, 6);
      Conv2dParams p;
      p.stride_h = p.stride_w = k.stride;
      p.pad_h = p.pad_w = k.pad;
      const bool need_x = k.C != 1;  // C = 1 as a first layer: no data gradient
      auto run = [&](Device d, DType t, MemoryFormat f, std::vector<float>* out) {
        Tensor x = contiguous(to(to(xv, t), d), f).detach().requires_grad_(need_x);
        Tensor w = contiguous(to(to(wv, t), d), f).detach().requires_grad_(true);
        Tensor y = conv2d(x, w, p);
        EXPECT_EQ(y.memory_format(), f);
        backward(sum(to(y, DType::f32) * to(y, DType::f32)));
        out[0] = contiguous(to(to(y, DType::f32), kCPU)).to_vector<float>();
        out[1] = need_x ? contiguous(to(to(x.grad(), DType::f32), kCPU)).to_vector<float>() : std::vector<float>{};
        out[2] = contiguous(to(to(w.grad(), DType::f32), kCPU)).to_vector<float>();
      };
      std::vector<float> ref[3], got[3];
      run(kCPU, DType::f32, MemoryFormat::Contiguous, ref);
      run(kCUDA, dt, CL, got);
      for (int j = 0; j < 3; ++j) {
        ASSERT_EQ(ref[j].size(), got[j].size());
        double scale = 0, err = 0;
        for (float v : ref[j]) scale = std::max(scale, double(std::abs(v)));
        for (size_t i = 0; i < ref[j].size(); ++i) err = std::max(err, std::abs(double(got[j][i]) - ref[j][i]) / scale);
        EXPECT_LE(err, dt == DType::f16 ? 4e-3 : 2e-2)
            << dtype_name(dt) << " C " << k.C << " R " << k.R << " stride " << k.stride << " pad " << k.pad
            << (j == 0 ? " output" : j == 1 ? " dx" : " dw");
      }
    }
  }
}

// Cross-entropy and the count take 16-bit logits as they come (the trainer casts no more): the
// loss is the float32 loss of the logits' float32 cast, bit for bit, the gradient that loss's
// gradient rounded once to the logits' type, and the count the cast's count. Rows of 10 and of 57
// classes (mnist's, char_lstm's), 300 rows (several blocks), labels on every class.
TEST(HalfLoss, CrossEntropyReadsSixteenBitLogitsAsTheirCast) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (or a CPU-only build)";
  for (DType dt : {DType::f16, DType::bf16})
    for (int64_t C : {10, 57}) {
      const int64_t N = 300;
      std::vector<float> v(static_cast<size_t>(N * C));
      for (size_t i = 0; i < v.size(); ++i) v[i] = 8.f * (philox_uniform(21, 0, i) - 0.5f);
      std::vector<int32_t> y(static_cast<size_t>(N));
      for (size_t i = 0; i < y.size(); ++i) y[i] = int32_t((i * 7) % size_t(C));
      const Tensor labels = from_vector(y, Shape{N}, kCUDA);
      const Tensor half = to(from_vector(v, Shape{N, C}, kCUDA), dt).detach().requires_grad_(true);
      const Tensor wide = to(half.detach(), DType::f32).requires_grad_(true);
      const Tensor lh = cross_entropy(half, labels), lw = cross_entropy(wide, labels);
      ASSERT_EQ(lh.dtype(), DType::f32);
      const Tensor seed = full(Shape{}, 1024.0, DType::f32, kCUDA);  // as a loss scale seeds it
      backward(lh, seed);
      backward(lw, seed);
      const std::string what = std::string(dtype_name(dt)) + ", " + std::to_string(C) + " classes";
      EXPECT_EQ(lh.to_vector<float>(), lw.to_vector<float>()) << what;
      ASSERT_EQ(half.grad().dtype(), dt) << what;
      EXPECT_EQ(to(half.grad(), DType::f32).to_vector<float>(), to(to(wide.grad(), dt), DType::f32).to_vector<float>())
          << what;
      EXPECT_EQ(count_correct(half.detach(), labels).item(), count_correct(wide.detach(), labels).item()) << what;
    }
}
