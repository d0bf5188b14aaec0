// Keras's GRU, SimpleRNN and step-by-step LSTM (nn/recurrent.h): float64 gradient checks on the CPU
// of every variant (reset_after both ways, hard_sigmoid, relu, backwards, sequences, no bias,
// dropout with a mask per gate or one, Keras's mask of skipped steps) and CPU-vs-CUDA parity in float32,
// cuDNN's GRU included. Their maths against
// Keras's formulas is test_keras_reference's (gru_*, simple_rnn, lstm_backwards).
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
  bool masked = false;  // with Keras's mask (an Embedding's mask_zero): kMask's skipped steps
};
// [2, 5]: the first sample skips its steps 1 and 4, the second its first two (pre-padding).
const std::vector<float> kMask{1, 0, 1, 1, 0, 0, 0, 1, 1, 1};

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
  nn::RnnParams lstm = gru(false, 0.2f, true, true, true), dropped = gru(true, 0, false, false, true);
  lstm.cell = C::Lstm;
  dropped.dropout = 0.3, dropped.recurrent_dropout = 0.4, dropped.mask_per_gate = true;
  nn::RnnParams lstm_dropped = lstm;
  lstm_dropped.dropout = 0.25, lstm_dropped.recurrent_dropout = 0.5, lstm_dropped.mask_per_gate = false;
  // Keras's initial_state and return_state: the states in and out.
  auto stated = [](nn::RnnParams p, bool initial, bool returned) {
    p.initial_state = initial, p.return_state = returned;
    return p;
  };
  return {{"gru_reset_after", gru(true, 0, false, false, true)},
          {"gru_reset_before_hard_keras2", gru(false, 0.2f, false, true, true)},
          {"gru_reset_after_hard_keras3_backwards", gru(true, 1.f / 6, true, true, true)},
          {"gru_no_bias", gru(true, 0, false, false, false)},
          {"simple_rnn_tanh_sequences", simple},
          {"simple_rnn_relu_backwards", relu},
          {"lstm_hard_keras2_backwards_sequences", lstm},
          {"gru_dropout_per_gate", dropped},
          {"lstm_dropout_one_mask", lstm_dropped},
          {"gru_masked_sequences", gru(true, 0, false, true, true), true},
          {"gru_reset_before_masked_backwards", gru(false, 0.2f, true, false, true), true},
          {"simple_rnn_masked", simple, true},
          {"lstm_masked_backwards_sequences", lstm, true},
          {"lstm_initial_and_final_states_masked", stated(lstm, true, true), true},
          {"gru_initial_and_final_state_backwards", stated(gru(true, 0, true, true, true), true, true)},
          {"gru_reset_before_final_state", stated(gru(false, 0, false, false, true), false, true)},
          {"simple_rnn_initial_state", stated(simple, true, false)}};
}

// x [2, 5, 3], the layer's tensors and its initial states, uniform in [-scale, scale), of `dt` on `d`.
std::vector<Tensor> inputs(const nn::RnnParams& p, DType dt, Device d, uint64_t seed) {
  manual_seed(seed);
  const int64_t g = p.gates() * p.units;
  std::vector<Shape> shapes{{2, 5, p.input_size}, {p.input_size, g}, {p.units, g}};
  if (p.use_bias) shapes.push_back(p.cell == nn::RnnParams::Cell::Gru && p.reset_after ? Shape{2, g} : Shape{g});
  for (int k = 0; p.initial_state && k < p.states(); ++k) shapes.push_back(Shape{2, p.units});
  std::vector<Tensor> out;
  for (const Shape& s : shapes) {
    Tensor t = empty(s);
    nn::uniform_(t, -1.5, 1.5);  // past hard_sigmoid's corners, at +-2.5 for slope 0.2
    out.push_back(to(to(t, dt), d).detach().requires_grad_(true));
  }
  return out;
}

// In training where the variant drops: the masks drawn again from one seed at every call, so that
// the central differences see the same function. With return_state: the output and the final
// states, flattened and joined.
Tensor forward_of(const std::vector<Tensor>& x, const Variant& v) {
  const nn::RnnParams& p = v.p;
  const bool training = p.dropout > 0 || p.recurrent_dropout > 0;
  if (training) manual_seed(11);
  const Tensor mask = v.masked ? to(to(from_vector(kMask, Shape{2, 5}), x[0].dtype()), x[0].device()) : Tensor();
  const size_t tensors = p.use_bias ? 4 : 3;
  const std::vector<Tensor> initial(x.begin() + long(tensors), x.end());
  const nn::RnnResult r = nn::rnn_states(x[0], x[1], x[2], p.use_bias ? x[3] : Tensor(), p, training, mask, initial);
  if (!p.return_state) return r.y;
  auto flat = [](const Tensor& t) { return reshape(contiguous(t), Shape{t.numel()}); };
  std::vector<Tensor> parts{flat(r.y), flat(r.h)};
  if (r.c.defined()) parts.push_back(flat(r.c));
  return cat(parts, 0);
}
}  // namespace

TEST(Rnn, GradientsInFloat64) {
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    const auto r = autograd::gradcheck([&](const std::vector<Tensor>& x) { return forward_of(x, v); },
                                       inputs(v.p, DType::f64, kCPU, 3), 1e-6, 1e-6, 1e-4);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

// The output's shape: the sequence with return_sequences, else the last state.
TEST(Rnn, ShapesAndRefusals) {
  for (const Variant& v : variants()) {
    const Tensor y = forward_of(inputs(v.p, DType::f32, kCPU, 1), v);
    const int64_t out = v.p.return_sequences ? 2 * 5 * 4 : 2 * 4;
    if (v.p.return_state) EXPECT_EQ(y.shape(), (Shape{out + v.p.states() * 2 * 4})) << v.name;
    else EXPECT_EQ(y.shape(), v.p.return_sequences ? (Shape{2, 5, 4}) : (Shape{2, 4})) << v.name;
  }
  nn::RnnParams p = variants()[0].p;
  std::vector<Tensor> x = inputs(p, DType::f32, kCPU, 1);
  EXPECT_THROW(nn::rnn(reshape(x[0], Shape{10, 3}), x[1], x[2], x[3], p), Error);
  EXPECT_THROW(nn::rnn(x[0], x[1], x[2], x[3], p, false, ones(Shape{2, 4})), Error);  // a mask of 4 steps for 5
  p.input_size = 2;
  EXPECT_THROW(nn::rnn(x[0], x[1], x[2], x[3], p), Error);
  p.input_size = 3;
  EXPECT_THROW(nn::rnn_states(x[0], x[1], x[2], x[3], p, false, Tensor(), {zeros(Shape{2, 3})}), Error);  // [2, 4] each
  p.cell = nn::RnnParams::Cell::Simple;
  p.input_size = 3;
  EXPECT_THROW(nn::rnn_states(x[0], x[1], x[2], x[3], p, false, Tensor(), {zeros(Shape{2, 4}), zeros(Shape{2, 4})}), Error);
}

// The final states are the last step's, a masked step's the one before's: the returned sequence's
// last step forwards, its first backwards (the order processed), and h and c of a sequence cut
// where its mask ends. An initial state is where the sequence starts: the first half's final
// states start the second half at the whole sequence's.
TEST(Rnn, TheStatesInAndOut) {
  nn::RnnParams p = variants()[0].p;
  p.cell = nn::RnnParams::Cell::Lstm, p.hard_slope = 0, p.return_sequences = true, p.return_state = true;
  std::vector<Tensor> x = inputs(p, DType::f32, kCPU, 5);
  x[3] = empty(Shape{16});
  nn::uniform_(x[3], -1, 1);
  auto same = [](const Tensor& a, const Tensor& b, const std::string& what) {
    const std::vector<float> u = contiguous(a).to_vector<float>(), w = contiguous(b).to_vector<float>();
    ASSERT_EQ(u.size(), w.size()) << what;
    for (size_t i = 0; i < u.size(); ++i) EXPECT_NEAR(u[i], w[i], 1e-5) << what << " " << i;
  };
  const nn::RnnResult whole = nn::rnn_states(x[0], x[1], x[2], x[3], p);
  same(whole.h, reshape(slice(whole.y, 1, 4, 5), Shape{2, 4}), "h: the last step's output");
  const nn::RnnResult first = nn::rnn_states(contiguous(slice(x[0], 1, 0, 3)), x[1], x[2], x[3], p);
  const nn::RnnResult second =
      nn::rnn_states(contiguous(slice(x[0], 1, 3, 5)), x[1], x[2], x[3], p, false, Tensor(), {first.h, first.c});
  same(second.h, whole.h, "h from the first half's states");
  same(second.c, whole.c, "c from the first half's states");
  std::vector<float> m(10, 1);
  m[3] = m[4] = 0;  // the first sample's last two steps skipped
  const nn::RnnResult masked = nn::rnn_states(x[0], x[1], x[2], x[3], p, false, from_vector(m, Shape{2, 5}));
  same(slice(masked.c, 0, 0, 1), slice(first.c, 0, 0, 1), "c where the mask ends");
  p.go_backwards = true;
  const nn::RnnResult back = nn::rnn_states(x[0], x[1], x[2], x[3], p);
  same(back.h, reshape(slice(back.y, 1, 4, 5), Shape{2, 4}), "h backwards: the last processed");
}

// A masked step keeps the state: a sequence with a padding step inside gives what the sequence
// without it gives, the padding's output being the step's before.
TEST(Rnn, AMaskedStepIsSkipped) {
  for (const Variant& v : variants()) {
    if (v.p.dropout > 0 || v.p.recurrent_dropout > 0) continue;
    SCOPED_TRACE(v.name);
    nn::RnnParams p = v.p;
    p.return_sequences = true;
    const std::vector<Tensor> x = inputs(p, DType::f32, kCPU, 5);
    const Tensor b = p.use_bias ? x[3] : Tensor();
    std::vector<float> m(10, 1.f);
    m[2] = m[7] = 0;  // step 2 of both samples
    const Tensor masked = nn::rnn(x[0], x[1], x[2], b, p, false, from_vector(m, Shape{2, 5}));
    const Tensor without = nn::rnn(cat({slice(x[0], 1, 0, 2), slice(x[0], 1, 3, 5)}, 1), x[1], x[2], b, p);
    const std::vector<float> a = masked.to_vector<float>(), w = without.to_vector<float>();
    const int64_t u = p.units;
    auto at_of = [&](int64_t t, int64_t steps) { return p.go_backwards ? steps - 1 - t : t; };  // processed -> position
    for (int64_t n = 0; n < 2; ++n)
      for (int64_t t = 0; t < 5; ++t) {
        const int64_t at = at_of(t, 5);
        for (int64_t j = 0; j < u; ++j) {
          const float got = a[size_t((n * 5 + t) * u + j)];
          if (at == 2) {  // the output processed before it again (zeros, first of all)
            EXPECT_EQ(got, t == 0 ? 0.f : a[size_t((n * 5 + t - 1) * u + j)]) << "sample " << n << " step " << t;
            continue;
          }
          const int64_t q = at_of(at < 2 ? at : at - 1, 4);  // the same step in the shorter sequence
          EXPECT_NEAR(got, w[size_t((n * 4 + q) * u + j)], 1e-5) << "sample " << n << " step " << t;
        }
      }
  }
}

// Keras's dropout masks are drawn once a sequence: a SimpleRNN that passes its masked input through
// (kernel I, no recurrence) gives every step the same 0-or-2 pattern; one that feeds back its
// state through I with recurrent dropout 0.5 (kernel 0, bias 1) reaches only (h2, h3) = (1, 1) or
// (3, 7), never a mask that changed between the steps. In evaluation nothing is dropped.
TEST(Rnn, DropoutMasksAreDrawnOncePerSequence) {
  nn::RnnParams p;
  p.cell = nn::RnnParams::Cell::Simple, p.input_size = p.units = 8, p.activation = Act::Relu, p.return_sequences = true;
  p.dropout = 0.5;
  manual_seed(2);
  Tensor eye = zeros(Shape{8, 8});
  for (int i = 0; i < 8; ++i) eye.data<float>()[i * 9] = 1;
  const Tensor y = nn::rnn(ones(Shape{64, 5, 8}), eye, zeros(Shape{8, 8}), zeros(Shape{8}), p, true);
  const std::vector<float> v = y.to_vector<float>();
  int dropped = 0;
  for (int n = 0; n < 64; ++n)
    for (int j = 0; j < 8; ++j) {
      const float first = v[size_t((n * 5) * 8 + j)];
      EXPECT_TRUE(first == 0.f || first == 2.f) << first;
      dropped += first == 0.f;
      for (int t = 1; t < 5; ++t) ASSERT_EQ(v[size_t((n * 5 + t) * 8 + j)], first) << "sample " << n << " step " << t;
    }
  EXPECT_NEAR(dropped / 512.0, 0.5, 0.1);
  EXPECT_EQ(nn::rnn(ones(Shape{4, 5, 8}), eye, zeros(Shape{8, 8}), zeros(Shape{8}), p, false).to_vector<float>(),
            std::vector<float>(4 * 5 * 8, 1.f));
  p.dropout = 0, p.recurrent_dropout = 0.5;
  const std::vector<float> h = nn::rnn(ones(Shape{64, 3, 8}), zeros(Shape{8, 8}), eye, ones(Shape{8}), p, true).to_vector<float>();
  for (int n = 0; n < 64; ++n)
    for (int j = 0; j < 8; ++j) {
      const float h2 = h[size_t((n * 3 + 1) * 8 + j)], h3 = h[size_t((n * 3 + 2) * 8 + j)];
      EXPECT_TRUE((h2 == 1.f && h3 == 1.f) || (h2 == 3.f && h3 == 7.f)) << h2 << ", " << h3;
    }
}

// CUDA against the CPU in float32: the output and every gradient.
TEST(RnnGpu, CudaMatchesTheCpu) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device";
  for (const Variant& v : variants()) {
    SCOPED_TRACE(v.name);
    std::vector<Tensor> cpu = inputs(v.p, DType::f32, kCPU, 9), gpu = inputs(v.p, DType::f32, kCUDA, 9);
    const Tensor yc = forward_of(cpu, v), yg = forward_of(gpu, v);
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

// A GRU with reset_after and the sigmoid runs as cuDNN's GRU on the GPU (nn::cudnn_gru; Keras's
// tensors reordered into cuDNN's layout inside the step): the module's output, its input's
// gradient and its tensors' gradients are the CPU's composition's, returning the sequence or the
// last state, read forwards or backwards (the sequence in the order processed, or in time order
// as a Bidirectional's backward layer has it), with its final state (return_state); a mask, dropout
// or an initial state keep the composition.
TEST(RnnGpu, CudnnGruIsTheComposedOne) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device";
  struct Case {
    bool seq, back, time_order;
  };
  for (const Case k : {Case{false, false, false}, Case{true, false, false}, Case{false, true, false}, Case{true, true, false},
                       Case{true, true, true}}) {
    const bool seq = k.seq;
    SCOPED_TRACE(std::string(seq ? "sequences" : "last state") + (k.back ? ", backwards" : "") + (k.time_order ? " in time order" : ""));
    nn::RnnParams p;
    p.cell = nn::RnnParams::Cell::Gru, p.input_size = 6, p.units = 5, p.return_sequences = seq;
    p.go_backwards = k.back, p.time_order = k.time_order, p.return_state = true;
    manual_seed(21);
    nn::Recurrent cpu(p), gpu(p);
    const auto pc = cpu.named_parameters();
    for (size_t i = 0; i < pc.size(); ++i) {
      nn::uniform_(pc[i].second, -0.8, 0.8);
      copy_(gpu.named_parameters()[i].second, pc[i].second);
    }
    gpu.to(kCUDA);
    Tensor x = empty(Shape{3, 7, 6});
    nn::uniform_(x, -1.5, 1.5);
    const Tensor xc = x.detach().requires_grad_(true), xg = to(x, kCUDA).detach().requires_grad_(true);
    ASSERT_TRUE(nn::cudnn_gru(p, xg, false));
    EXPECT_FALSE(nn::cudnn_gru(p, xg, true));
    nn::RnnParams initial = p;
    initial.initial_state = true;
    EXPECT_FALSE(nn::cudnn_gru(initial, xg, false));
    const size_t plans = lstm_cuda_plans().size();
    const std::vector<Tensor> oc = cpu.forward_outputs({xc}), og = gpu.forward_outputs({xg});
    ASSERT_EQ(oc.size(), 2u);
    ASSERT_EQ(og.size(), 2u);
    if (!seq && !k.back) EXPECT_EQ(lstm_cuda_plans().size(), plans + 1);  // cuDNN planned it (the others: cached)
    const Tensor yc = oc[0], yg = og[0];
    backward(sum(yc * yc) + sum(oc[1] * oc[1]) * 0.5);
    backward(sum(yg * yg) + sum(og[1] * og[1]) * 0.5);
    // Against the tensor's largest value: cuDNN sums a gradient's terms in another order, and a
    // small element that is the difference of large ones differs by the larger ones' rounding.
    auto near = [](const Tensor& a, const Tensor& b, const std::string& what) {
      const std::vector<float> u = a.to_vector<float>(), v = to(b, kCPU).to_vector<float>();
      ASSERT_EQ(u.size(), v.size()) << what;
      float largest = 0;
      for (float e : u) largest = std::max(largest, std::fabs(e));
      for (size_t i = 0; i < u.size(); ++i) EXPECT_NEAR(u[i], v[i], 1e-5 + 1e-4 * largest) << what << " " << i;
    };
    near(yc, yg, "output");
    near(oc[1], og[1], "final state");
    near(xc.grad(), xg.grad(), "input gradient");
    const auto pg = gpu.named_parameters();
    for (size_t i = 0; i < pc.size(); ++i) near(pc[i].second.grad(), pg[i].second.grad(), pc[i].first + " gradient");
  }
}
