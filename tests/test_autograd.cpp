// Autograd bookkeeping: accumulation, release after backward, NoGradGuard, a tensor used twice,
// and a node whose input gradients come in two rounds (Node::later_inputs).
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "autograd/node.h"
#include "loupe.h"
#include "two_round_op.h"
#include "skip.h"

using namespace loupe;

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

namespace {
using test_ops::two_round_mul;

// Names the leaf each finished gradient belongs to, and the pauses.
struct Listener : autograd::GradReadyHook {
  const Tensor *a = nullptr, *w = nullptr;
  std::vector<std::string>* log = nullptr;
  void ready(const Tensor& g) override { log->push_back(g.same(a->grad()) ? "a ready" : g.same(w->grad()) ? "w ready" : "?"); }
  void pause() override { log->push_back("pause"); }
};
}  // namespace

// With a listener (data parallelism), everything below the first round (here a's gradient, through
// a multiplication) finishes before the second round runs, and the listener hears of the pause
// first; without one, both rounds run back to back. The gradients are the same either way.
TEST(Autograd, SecondRoundRunsAfterWhatTheFirstMadeReady) {
  for (bool listen : {true, false}) {
    SCOPED_TRACE(listen ? "with a listener" : "without");
    std::vector<std::string> log;
    Tensor a = from_vector(std::vector<float>{1, 2}, Shape{2});
    Tensor w = from_vector(std::vector<float>{3, -1}, Shape{2});
    a.requires_grad_(true);
    w.requires_grad_(true);
    Tensor y = sum(two_round_mul(a * 5.0, w, &log));
    Listener l;
    l.a = &a;
    l.w = &w;
    l.log = &log;
    if (listen) autograd::set_grad_ready_hook(&l);
    backward(y);
    autograd::set_grad_ready_hook(nullptr);
    EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{15, -5}));  // 5 w
    EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{5, 10}));   // 5 a
    if (listen)
      EXPECT_EQ(log, (std::vector<std::string>{"apply", "a ready", "pause", "finish", "w ready"}));
    else
      EXPECT_EQ(log, (std::vector<std::string>{"apply", "finish"}));
    EXPECT_THROW(backward(y), Error) << "the node is released after its second round";
  }
}

namespace {
// autograd::FreshGrads, as the trainer's step uses it instead of zero_grad: the gradients of a
// two-layer model, stale (sevens) beforehand, after a pass that reaches `how` much of it (0: the
// whole model; 1: fc1's weight alone, so the other three parameters get no gradient; 2: no pass),
// and how many times the zeroing ran. With fresh false: zero_grad, then the same pass.
// conv: a channels-last convolution first, 3 -> 7 channels, its filter's gradient channels-last
// (how 1 then reaches the convolution's filter alone).
std::vector<float> fresh_grads_after(Device d, bool fresh, int how, int* zeroings, bool conv = false) {
  manual_seed(4);
  nn::Sequential m;
  if (conv) {
    m.add("conv", std::make_shared<nn::Conv2d>(3, 7, 3, 1, 0, true)).add("flat", std::make_shared<nn::Flatten>());
    m.set_memory_format(MemoryFormat::ChannelsLast);
  }
  m.add("fc1", std::make_shared<nn::Linear>(7, 5)).add("fc2", std::make_shared<nn::Linear>(5, 3));
  m.to(d);
  nn::ParameterArena& arena = m.arena();
  for (const Tensor& p : arena.params()) fill_(p.grad(), 7.0);  // a step's leftovers (the padding stays zero)
  Tensor x = conv ? full(Shape{4, 3, 3, 3}, 0.3, DType::f32, d) : full(Shape{4, 7}, 0.3, DType::f32, d);
  {
    std::optional<autograd::FreshGrads> f;
    if (fresh) f.emplace([&] { ++*zeroings, arena.zero_grad(); }, arena.params());
    else arena.zero_grad();
    if (how == 0) backward(sum(relu(m(x))));
    if (how == 1 && conv)
      backward(sum(conv2d(contiguous(x, MemoryFormat::ChannelsLast), arena.params()[0], Conv2dParams{})));
    else if (how == 1)
      backward(sum(matmul(x, transpose(arena.params()[0], 0, 1))));
  }
  return arena.grads().to_vector<float>();
}

void expect_fresh_grads_are_zero_grad_and_the_pass(Device d, int zeroings_for_the_whole_model, bool conv = false) {
  for (int how = 0; how < 3; ++how) {
    SCOPED_TRACE(how == 0 ? "the whole model" : how == 1 ? "the first weight alone" : "no pass");
    int zeroings = 0, unused = 0;
    const std::vector<float> got = fresh_grads_after(d, true, how, &zeroings, conv);
    EXPECT_EQ(got, fresh_grads_after(d, false, how, &unused, conv));  // bit for bit
    EXPECT_EQ(zeroings, how == 0 ? zeroings_for_the_whole_model : 1);
    if (how == 2) EXPECT_EQ(got, std::vector<float>(got.size(), 0.f));
  }
}
}  // namespace

// On the CPU every addition is immediate, so the zeroing runs before the first one.
TEST(FreshGrads, TheCpuZeroesBeforeItsFirstAddition) { expect_fresh_grads_are_zero_grad_and_the_pass(kCPU, 1); }

// On a GPU the pass's additions are one launch at its end; covering every parameter, it writes them
// and nothing zeroes; covering fewer, or no pass at all, the zeroing runs.
TEST(CudaFreshGrads, APassOverEveryParameterWritesTheirGradients) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)";
  expect_fresh_grads_are_zero_grad_and_the_pass(kCUDA, 0);
}

// The same with a channels-last convolution, whose filter gradient comes channels-last into the
// contiguous gradient arena: one launch with the others, written.
TEST(FreshGrads, AChannelsLastConvolutionOnTheCpu) { expect_fresh_grads_are_zero_grad_and_the_pass(kCPU, 1, true); }
TEST(CudaFreshGrads, AChannelsLastConvolutionsFilterGradientIsWrittenWithTheOthers) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)";
  expect_fresh_grads_are_zero_grad_and_the_pass(kCUDA, 0, true);
}
