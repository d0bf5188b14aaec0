// Keras's GRU and SimpleRNN (nn/recurrent.h): float64 gradient checks on the CPU of every variant
// (reset_after both ways, hard_sigmoid, relu, backwards, sequences, no bias) and CPU-vs-CUDA parity
// in float32. Their maths against Keras's formulas is test_keras_reference's (gru_*, simple_rnn).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "core/random.h"
#include "loupe.h"
#include "nn/recurrent.h"
#include "skip.h"

using namespace loupe;

namespace {
struct Variant {
  std::string name;
  nn::RnnParams p;
};

std::vector<Variant> variants() {
  using C = nn::RnnParams::Cell;
  auto gru = [](bool reset_after, float slope, bool back, bool seq, bool bias) {
    nn::RnnParams p;
    p.cell = C::Gru, p.input_size = 3, p.units = 4, p.reset_after = reset_after, p.hard_slope = slope;
    p.go_backwards = back, p.return_sequences = seq, p.use_bias = bias;
    return p;
  };
  nn::RnnParams simple = gru(false, 0, false, true, true), relu = gru(false, 0, true, false, true);
  simple.cell = relu.cell = C::Simple;
  relu.activation = Act::Relu;
  return {{"gru_reset_after", gru(true, 0, false, false, true)},
          {"gru_reset_before_hard_keras2", gru(false, 0.2f, false, true, true)},
          {"gru_reset_after_hard_keras3_backwards", gru(true, 1.f / 6, true, true, true)},
          {"gru_no_bias", gru(true, 0, false, false, false)},
          {"simple_rnn_tanh_sequences", simple},
          {"simple_rnn_relu_backwards", relu}};
}

// x [2, 5, 3] and the layer's tensors, uniform in [-scale, scale), of `dt` on `d`.
std::vector<Tensor> inputs(const nn::RnnParams& p, DType dt, Device d, uint64_t seed) {
  manual_seed(seed);
  const int64_t g = p.gates() * p.units;
  std::vector<Shape> shapes{{2, 5, p.input_size}, {p.input_size, g}, {p.units, g}};
  if (p.use_bias) shapes.push_back(p.cell == nn::RnnParams::Cell::Gru && p.reset_after ? Shape{2, g} : Shape{g});
  std::vector<Tensor> out;
  for (const Shape& s : shapes) {
    Tensor t = empty(s);
    nn::uniform_(t, -1.5, 1.5);  // past hard_sigmoid's corners, at +-2.5 for slope 0.2
    out.push_back(to(to(t, dt), d).detach().requires_grad_(true));
  }
  return out;
}

Tensor forward_of(const std::vector<Tensor>& x, const nn::RnnParams& p) {
  const Tensor y = nn::rnn(x[0], x[1], x[2], p.use_bias ? x[3] : Tensor(), p);
  return y;
}
}  // namespace

TEST(Rnn, GradientsInFloat64) {
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    const auto r = autograd::gradcheck([&](const std::vector<Tensor>& x) { return forward_of(x, v.p); },
                                       inputs(v.p, DType::f64, kCPU, 3), 1e-6, 1e-6, 1e-4);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

// The output's shape: the sequence with return_sequences, else the last state.
TEST(Rnn, ShapesAndRefusals) {
  for (const Variant& v : variants()) {
    const Tensor y = forward_of(inputs(v.p, DType::f32, kCPU, 1), v.p);
    EXPECT_EQ(y.shape(), v.p.return_sequences ? (Shape{2, 5, 4}) : (Shape{2, 4})) << v.name;
  }
  nn::RnnParams p = variants()[0].p;
  std::vector<Tensor> x = inputs(p, DType::f32, kCPU, 1);
  EXPECT_THROW(nn::rnn(reshape(x[0], Shape{10, 3}), x[1], x[2], x[3], p), Error);
  p.input_size = 2;
  EXPECT_THROW(nn::rnn(x[0], x[1], x[2], x[3], p), Error);
}

// CUDA against the CPU in float32: the output and every gradient.
TEST(RnnGpu, CudaMatchesTheCpu) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device";
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    std::vector<Tensor> cpu = inputs(v.p, DType::f32, kCPU, 9), gpu = inputs(v.p, DType::f32, kCUDA, 9);
    const Tensor yc = forward_of(cpu, v.p), yg = forward_of(gpu, v.p);
    backward(sum(yc * yc));
    backward(sum(yg * yg));
    auto near = [](const Tensor& a, const Tensor& b, const std::string& what) {
      const std::vector<float> x = a.to_vector<float>(), y = to(b, kCPU).to_vector<float>();
      ASSERT_EQ(x.size(), y.size()) << what;
      for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5 + 1e-4 * std::fabs(x[i])) << what << " " << i;
    };
    near(yc, yg, "output");
    for (size_t i = 0; i < cpu.size(); ++i) near(cpu[i].grad(), gpu[i].grad(), "gradient " + std::to_string(i));
  }
}
