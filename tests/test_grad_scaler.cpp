// Dynamic loss scaling (optim/grad_scaler.h): GradScaler's rule against a reference loop, the
// read-only check pass and its inf/NaN flag, the optimizers' on-device skip (parameters and
// moments untouched, Adam counting only applied steps) and their unscaling of the gradients, the
// embedding's checks at the source (autograd/source_check.h) and which ranges the pass then reads,
// and, with a GPU, the same on the device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <vector>

#include "autograd/source_check.h"
#include "loupe.h"
#include "skip.h"

using namespace loupe;
using optim::GradScaler;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Gradients with an inf/NaN (or not) in them, checked by the scaler: sets found_inf.
void feed(GradScaler& s, Device d, float bad) {
  std::vector<float> g{1.f, -2.f, 3.f, bad};
  s.check_(from_vector(g, Shape{4}, d));
}

// The rule, written out (torch.amp.GradScaler, _amp_update_scale_).
struct Reference {
  double scale = 65536;
  int tracker = 0;
  int64_t skipped = 0;
  void step(bool inf, int interval) {
    if (inf) {
      scale *= 0.5;
      tracker = 0;
      ++skipped;
    } else if (++tracker == interval) {
      scale *= 2;
      tracker = 0;
    }
  }
};

void check_rule(Device d) {
  GradScaler s(d);
  Reference ref;
  // Overflows at the start (the scale is too high), then runs of clean steps long enough to grow
  // twice, an overflow right before a growth would happen, and a NaN.
  std::vector<int> bad_steps{0, 1, 2, 2005, 6005, 6006, 8500};
  for (int k = 0; k < 9000; ++k) {
    bool inf = std::find(bad_steps.begin(), bad_steps.end(), k) != bad_steps.end();
    feed(s, d, !inf ? 0.5f : k == 8500 ? std::nanf("") : (k % 2 ? -kInf : kInf));
    EXPECT_EQ(s.found_inf(), inf) << "step " << k;
    s.update();
    ref.step(inf, 2000);
    if (k % 500 == 0 || inf || k == 4002 || k == 4003) {
      std::vector<float> st = s.state().to_vector<float>();
      ASSERT_EQ(st[optim::kScale], float(ref.scale)) << "step " << k;
      ASSERT_EQ(st[optim::kGrowthTracker], float(ref.tracker)) << "step " << k;
      ASSERT_EQ(st[optim::kFoundInf], 0.f) << "update() clears found_inf";
    }
  }
  EXPECT_EQ(s.skipped_steps(), 7);
  EXPECT_EQ(ref.skipped, 7);
  // 65536 / 8 after three overflows; it grows at clean step 2000 of each run and halves at each
  // overflow: the reference loop is the judge, and the scale did move both ways.
  EXPECT_NE(ref.scale, 65536.0);
}

}  // namespace

TEST(GradScaler, FollowsTheRuleOnTheCpu) { check_rule(kCPU); }

TEST(GradScaler, CheckWritesNothingAndFlagsInfAndNan) {
  GradScaler s(kCPU);
  const std::vector<float> v{65536.f, -3 * 65536.f, 1e30f, 0.f};
  Tensor g = from_vector(v, Shape{4});
  s.check_(g);
  EXPECT_EQ(g.to_vector<float>(), v) << "the gradients stay scaled: the optimizer divides";
  EXPECT_FALSE(s.found_inf()) << "large finite values are not overflows";
  feed(s, kCPU, std::nanf(""));
  EXPECT_TRUE(s.found_inf());
}

TEST(GradScaler, GrowthStopsBeforeFloatOverflows) {
  optim::GradScalerOptions o;
  o.init_scale = 3e38;
  o.growth_interval = 1;
  GradScaler s(kCPU, o);
  feed(s, kCPU, 0.f);
  s.update();
  EXPECT_EQ(s.current_scale(), double(3e38f)) << "a scale that would overflow to inf stays";
  EXPECT_THROW(GradScaler(kCPU, optim::GradScalerOptions{-1}), Error);
}

TEST(GradScaler, ScaledLossScalesTheGradient) {
  GradScaler s(kCPU);
  Tensor x = from_vector(std::vector<float>{1.f, 2.f}, Shape{2}).requires_grad_(true);
  backward(s.scale(sum(x * x)));
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{2 * 65536.f, 4 * 65536.f}));
}

// backward() seeds the pass with the scale itself (no product, no ones): the same gradients, bit
// for bit, as scale(loss)'s backward, and the scale untouched by the pass.
void seeded_backward_is_the_product(Device d) {
  std::vector<float> v(37);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.37f * float(i) - 5.1f;
  std::vector<std::vector<float>> g;
  for (int seeded = 0; seeded < 2; ++seeded) {
    GradScaler s(d);
    Tensor x = from_vector(v, Shape{37}, d).requires_grad_(true);
    Tensor loss = mean(x * x * x);
    if (seeded) s.backward(loss);
    else backward(s.scale(loss));
    g.push_back(x.grad().to_vector<float>());
    EXPECT_EQ(s.current_scale(), 65536.0);
  }
  EXPECT_EQ(g[0], g[1]);
}

TEST(GradScaler, BackwardSeededWithTheScaleIsTheProductsBackward) { seeded_backward_is_the_product(kCPU); }

TEST(GradScalerCuda, BackwardSeededWithTheScaleIsTheProductsBackward) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device";
  seeded_backward_is_the_product(kCUDA);
}

// Every optimizer leaves parameters and state bit-identical on a skipped step; Adam's next
// applied step is its first (bias corrections for t = 1), as if the skipped one never happened.
void check_skip(Device d) {
  for (int which = 0; which < 4; ++which) {
    auto make = [&](nn::Sequential& m) -> std::unique_ptr<optim::Optimizer> {
      if (which == 0) return std::make_unique<optim::SGD>(m.arena(), 0.1, 0.9);
      if (which == 1) return std::make_unique<optim::RMSprop>(m.arena(), 0.01);
      if (which == 2) return std::make_unique<optim::Adam>(m.arena(), 0.01);
      return std::make_unique<optim::Adadelta>(m.arena());
    };
    auto model = [&] {
      manual_seed(5);
      auto m = std::make_shared<nn::Sequential>();
      m->add("fc", std::make_shared<nn::Linear>(3, 2));
      m->to(d);
      return m;
    };
    Tensor x = full(Shape{4, 3}, 0.5, DType::f32, d);
    auto grads = [&](nn::Sequential& m, optim::Optimizer& opt, GradScaler* s) {
      opt.zero_grad();
      Tensor loss = sum(relu(m(x)));
      if (s) {
        s->backward(loss);
        s->check_(m.arena().grads());
      } else {
        backward(loss);
      }
    };
    auto a = model(), b = model();
    auto oa = make(*a), ob = make(*b);
    GradScaler s(d);
    oa->set_scaler(&s);
    // Step 1 of a overflows: inject an inf into its gradient after the check.
    grads(*a, *oa, &s);
    std::vector<float> before = a->arena().values().to_vector<float>();
    fill_(slice(a->arena().grads(), 0, 1, 2), double(kInf));
    s.check_(a->arena().grads());  // the flag is set by any pass that sees the inf
    oa->step();
    s.update();
    EXPECT_EQ(a->arena().values().to_vector<float>(), before) << "optimizer " << which << " updated on overflow";
    for (auto& [name, t] : oa->state())
      for (float v : t.to_vector<float>()) ASSERT_EQ(v, 0.f) << name << " changed on a skipped step";
    EXPECT_EQ(s.current_scale(), 32768.0);
    EXPECT_EQ(s.skipped_steps(), 1);
    // Then a clean step on a, and the same first step on b without a scaler: the same result.
    grads(*a, *oa, &s);
    oa->step();
    s.update();
    grads(*b, *ob, nullptr);
    ob->step();
    std::vector<float> va = a->arena().values().to_vector<float>(), vb = b->arena().values().to_vector<float>();
    ASSERT_EQ(va.size(), vb.size());
    for (size_t i = 0; i < va.size(); ++i)
      EXPECT_NEAR(va[i], vb[i], 1e-6 * (1 + std::abs(vb[i]))) << "optimizer " << which << " element " << i;
  }
}

TEST(GradScaler, OptimizersSkipTheOverflowedStepOnTheCpu) { check_skip(kCPU); }

TEST(GradScalerCuda, FollowsTheRuleAndSkipsOnTheDevice) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)";
  check_rule(kCUDA);
  check_skip(kCUDA);
}

// The device pass reads four elements a thread and the last n % 4 one a thread (one a thread where
// the buffer is not 16-byte aligned): an inf in any part is seen, and nothing is written.
TEST(GradScalerCuda, CheckCoversTheVectorPartTheTailAndUnalignedBuffers) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)";
  for (int from : {0, 1}) {
    for (int bad_at : {-1, 1, 9}) {
      std::vector<float> g(11);
      for (size_t i = 0; i < g.size(); ++i) g[i] = float(i + 1) * 65536.f * (i % 2 ? -1 : 1);
      if (bad_at >= 0) g[size_t(bad_at + from)] = kInf;
      GradScaler s(kCUDA);
      Tensor all = from_vector(g, Shape{11}, kCUDA), t = slice(all, 0, from, from + 10);
      s.check_(t);
      EXPECT_EQ(s.found_inf(), bad_at >= 0) << "inf at " << bad_at << ", buffer from element " << from;
      EXPECT_EQ(all.to_vector<float>(), g) << "check_ writes nothing";
    }
  }
}

// ---- The optimizers unscale --------------------------------------------------------------------

namespace {

// Each optimizer, stepping with a scaler at scale S over gradients G * S, ends where it ends
// without one over G (two steps, so that momentum and moments carry the unscaled values too).
// S is not a power of two, so the two differ by float rounding alone.
void check_optimizers_unscale(Device d) {
  const double S = 3000.0;
  for (int which = 0; which < 5; ++which) {
    SCOPED_TRACE("optimizer " + std::to_string(which));
    auto model = [&] {
      manual_seed(7);
      auto m = std::make_shared<nn::Sequential>();
      m->add("fc", std::make_shared<nn::Linear>(5, 3));
      m->to(d);
      return m;
    };
    auto make = [&](nn::Sequential& m) -> std::unique_ptr<optim::Optimizer> {
      if (which == 0) return std::make_unique<optim::SGD>(m.arena(), 0.1);
      if (which == 1) return std::make_unique<optim::SGD>(m.arena(), 0.1, 0.9, true, 0.01);
      if (which == 2) return std::make_unique<optim::RMSprop>(m.arena(), 0.01);
      if (which == 3) return std::make_unique<optim::Adam>(m.arena(), 0.01, 0.9, 0.999, 1e-7, 0.01);
      return std::make_unique<optim::Adadelta>(m.arena());
    };
    auto a = model(), b = model();
    auto oa = make(*a), ob = make(*b);
    optim::GradScalerOptions so;
    so.init_scale = S;
    GradScaler s(d, so);
    oa->set_scaler(&s);
    const int64_t n = a->arena().numel();
    for (int step = 0; step < 2; ++step) {
      std::vector<float> g(static_cast<size_t>(n));
      for (size_t i = 0; i < g.size(); ++i) g[i] = float(philox_uniform(3, uint64_t(step), i) - 0.5);
      std::vector<float> gs(g);
      for (float& v : gs) v = float(double(v) * S);
      copy_(a->arena().grads(), from_vector(gs, Shape{n}, d));
      copy_(b->arena().grads(), from_vector(g, Shape{n}, d));
      s.check_(a->arena().grads());
      oa->step();
      s.update();
      ob->step();
    }
    EXPECT_EQ(s.skipped_steps(), 0);
    std::vector<float> va = a->arena().values().to_vector<float>(), vb = b->arena().values().to_vector<float>();
    std::vector<float> v0 = model()->arena().values().to_vector<float>();
    ASSERT_EQ(va.size(), vb.size());
    double moved = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      EXPECT_NEAR(va[i], vb[i], 2e-6 * (1 + std::abs(vb[i]))) << "element " << i;
      moved = std::max(moved, double(std::abs(vb[i] - v0[i])));
    }
    EXPECT_GT(moved, 1e-3) << "the steps moved the parameters";
    auto sa = oa->state(), sb = ob->state();
    for (size_t k = 0; k < sa.size(); ++k) {
      std::vector<float> x = sa[k].second.to_vector<float>(), y = sb[k].second.to_vector<float>();
      for (size_t i = 0; i < x.size(); ++i)
        EXPECT_NEAR(x[i], y[i], 2e-6 * (1 + std::abs(y[i]))) << sa[k].first << " element " << i;
    }
  }
}

}  // namespace

TEST(GradScaler, OptimizersUnscaleTheGradientsOnTheCpu) { check_optimizers_unscale(kCPU); }

TEST(GradScalerCuda, OptimizersUnscaleTheGradients) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)";
  check_optimizers_unscale(kCUDA);
}

// ---- Checks at the source ----------------------------------------------------------------------

TEST(SourceCheck, TheRangesLeftToReadAreTheRestLessTheTrustedOnes) {
  using Ranges = std::vector<std::pair<int64_t, int64_t>>;
  Tensor buf = zeros(Shape{100});
  auto at = [&](int64_t b, int64_t e) { return slice(buf, 0, b, e); };
  float flag = 0;
  {
    autograd::SourceCheck c(&flag, kCPU);
    EXPECT_EQ(c.unchecked_ranges(buf), (Ranges{{0, 100}})) << "nothing checked: all of it";
    c.add_checked(at(10, 50));
    c.add_checked(at(70, 100));
    EXPECT_EQ(c.unchecked_ranges(buf), (Ranges{{0, 10}, {50, 70}}));
    // Shrunk inward to multiples of 4 (the buffer's end excepted): more is read, never less.
    EXPECT_EQ(c.unchecked_ranges(buf, 4), (Ranges{{0, 12}, {48, 72}}));
    c.add_dirty(at(20, 30));  // dirty wins over checked
    EXPECT_EQ(c.unchecked_ranges(buf), (Ranges{{0, 10}, {20, 30}, {50, 70}}));
    c.add_dirty(at(60, 80));
    EXPECT_EQ(c.unchecked_ranges(buf), (Ranges{{0, 10}, {20, 30}, {50, 80}}));
    c.add_dirty(zeros(Shape{8}));  // another buffer: nothing here
    EXPECT_EQ(c.unchecked_ranges(buf), (Ranges{{0, 10}, {20, 30}, {50, 80}}));
    EXPECT_EQ(c.unchecked_ranges(slice(buf, 0, 40, 100)), (Ranges{{10, 40}})) << "relative to the buffer";
  }
  {  // The dirty range first: the order does not matter. A strided view covers its whole span.
    autograd::SourceCheck c(&flag, kCPU);
    c.add_dirty(slice(reshape(slice(buf, 0, 0, 40), Shape{4, 10}), 1, 0, 2));  // elements 0 .. 31
    c.add_checked(at(0, 100));
    EXPECT_EQ(c.unchecked_ranges(buf), (Ranges{{0, 32}}));
  }
  EXPECT_EQ(autograd::current_source_check(), nullptr);
  autograd::SourceCheck c(&flag, kCPU);
  {
    autograd::SourceCheckScope open(c);
    EXPECT_EQ(autograd::current_source_check(), &c);
  }
  EXPECT_EQ(autograd::current_source_check(), nullptr) << "closed with its scope";
}

namespace {

// Passes x through in the forward and edits the gradient that comes back (a contiguous copy).
struct EditGradient : autograd::Node {
  std::function<void(const Tensor&)> edit;
  const char* name() const override { return "EditGradient"; }
  std::vector<Tensor> apply(std::vector<Tensor>& g) override {
    Tensor x = clone(contiguous(g[0]));
    edit(x);
    return {x};
  }
};

Tensor edit_gradient(const Tensor& x, std::function<void(const Tensor&)> edit) {
  if (!edit) return x;
  Tensor y = x.detach();
  auto node = std::make_shared<EditGradient>();
  node->edit = std::move(edit);
  autograd::record(node, {&x}, {&y});
  return y;
}

// fastText in small: a [V, E] table looked up by ids [N, T] -> mean over T -> times w [E, 1] plus
// b. The hooks edit the gradient on its way into the table (the embedding's rows) or into w.
// With `tied`, the table is also read by another op, whose gradient reaches it through
// AccumulateGrad: the pass must then read all of the table again.
class Tiny : public nn::Module {
 public:
  Tiny(int64_t V, int64_t E) {
    Tensor t = empty(Shape{V, E});
    nn::uniform_(t, -0.5, 0.5);
    table = register_parameter("table", t);
    Tensor v = empty(Shape{E, 1});
    nn::uniform_(v, -0.5, 0.5);
    w = register_parameter("w", v);
    b = register_parameter("b", full(Shape{1}, 0.1));
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = edit_gradient(embedding(ids, table), edit_rows);
    Tensor y = matmul(mean(h, 1), edit_gradient(w, edit_w)) + b;
    if (tied) y = y + sum(table * 0.001);
    return y;
  }
  std::string type_name() const override { return "Tiny"; }
  Tensor table, w, b;
  std::function<void(const Tensor&)> edit_rows, edit_w;
  bool tied = false;
};

constexpr int64_t kV = 37, kN = 4, kT = 6;
// Rows 0 .. 9 are selected (row 3 at every position of sample 0, so its run is the longest),
// the rest never; kUnselected is one of the rest, in the table's middle.
constexpr int64_t kUnselected = 20;

Tensor tiny_ids(Device d) {
  std::vector<int32_t> ids(static_cast<size_t>(kN * kT));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = i < size_t(kT) ? 3 : int32_t(i * 7 % 10);
  return from_vector(ids, Shape{kN, kT}, d);
}

std::shared_ptr<Tiny> tiny(Device d, int64_t E) {
  manual_seed(11);
  auto m = std::make_shared<Tiny>(kV, E);
  m->to(d);
  return m;
}

Tensor tiny_loss(Tiny& m, Device d) {
  Tensor y = m(tiny_ids(d));
  return sum(y * y) * 0.5;
}

// One step through the scaler as the trainer takes it: zero, backward with the checks at the
// source, [between], the check pass, Adam, update. Returns found_inf as it was right after the
// backward (what the source checks found) and after the pass.
struct StepFlags {
  bool after_backward = false, after_check = false;
};
StepFlags scaled_step(Tiny& m, optim::Optimizer& opt, GradScaler& s, Device d,
                      const std::function<void()>& between = {}) {
  opt.zero_grad();
  s.backward(tiny_loss(m, d));
  StepFlags f;
  f.after_backward = s.found_inf();
  if (between) between();
  s.check_(m.arena().grads());
  f.after_check = s.found_inf();
  opt.step();
  s.update();
  return f;
}

void plant(const Tensor& grad_rows, double v) { fill_(grad_rows, v); }

// A clean step through the source checks: nothing flagged, .grad holds S times the unscaled
// gradients until the step, and the step (Adam unscaling) lands where an unscaled one does.
void check_clean_step(Device d, int64_t E) {
  auto a = tiny(d, E), b = tiny(d, E);
  optim::Adam oa(a->arena(), 0.01), ob(b->arena(), 0.01);
  GradScaler s(d);
  oa.set_scaler(&s);
  std::vector<float> scaled;
  StepFlags f = scaled_step(*a, oa, s, d, [&] { scaled = a->arena().grads().to_vector<float>(); });
  EXPECT_FALSE(f.after_backward);
  EXPECT_FALSE(f.after_check);
  ob.zero_grad();
  backward(tiny_loss(*b, d));
  std::vector<float> plain = b->arena().grads().to_vector<float>();
  ob.step();
  ASSERT_EQ(scaled.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_NEAR(scaled[i], 65536.f * plain[i], 1e-5 * 65536 * (1e-3 + std::abs(plain[i]))) << "gradient " << i;
  std::vector<float> va = a->arena().values().to_vector<float>(), vb = b->arena().values().to_vector<float>();
  for (size_t i = 0; i < va.size(); ++i) EXPECT_NEAR(va[i], vb[i], 1e-6 * (1 + std::abs(vb[i]))) << "value " << i;
  EXPECT_EQ(s.skipped_steps(), 0);
}

// An inf, a NaN or an overflowing sum on the way into the embedding's rows is caught by the
// embedding's kernel itself (found_inf is up before the pass runs), and the step is skipped.
void check_embedding_caught_at_source(Device d, int64_t E) {
  const float huge = std::numeric_limits<float>::max() / 4;
  struct Case {
    const char* what;
    std::function<void(const Tensor&)> edit;
  };
  const std::vector<Case> cases{
      {"an inf in one gradient row",
       [](const Tensor& g) { fill_(slice(slice(slice(g, 0, 1, 2), 1, 2, 3), 2, 0, 1), kInf); }},
      {"a NaN in one gradient row", [](const Tensor& g) { fill_(slice(slice(g, 0, 2, 3), 1, 5, 6), std::nan("")); }},
      // Row 3's six rows of sample 0, each finite: their sum overflows.
      {"a sum that overflows", [=](const Tensor& g) { fill_(slice(g, 0, 0, 1), double(huge)); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto m = tiny(d, E);
    optim::Adam opt(m->arena(), 0.01);
    GradScaler s(d);
    opt.set_scaler(&s);
    std::vector<float> before = m->arena().values().to_vector<float>();
    m->edit_rows = c.edit;
    StepFlags f = scaled_step(*m, opt, s, d);
    EXPECT_TRUE(f.after_backward) << "caught at the source, before the pass";
    EXPECT_TRUE(f.after_check);
    EXPECT_EQ(m->arena().values().to_vector<float>(), before) << "the step is skipped";
    EXPECT_EQ(s.skipped_steps(), 1);
    EXPECT_EQ(s.current_scale(), 32768.0) << "and the scale backs off";
  }
}

// An inf in another parameter's gradient (w's, through AccumulateGrad) is for the pass to catch.
void check_other_parameter_caught_by_the_pass(Device d, int64_t E) {
  auto m = tiny(d, E);
  optim::Adam opt(m->arena(), 0.01);
  GradScaler s(d);
  opt.set_scaler(&s);
  std::vector<float> before = m->arena().values().to_vector<float>();
  m->edit_w = [](const Tensor& g) { fill_(slice(g, 0, 1, 2), kInf); };
  StepFlags f = scaled_step(*m, opt, s, d);
  EXPECT_FALSE(f.after_backward) << "nothing checks w's gradient at the source";
  EXPECT_TRUE(f.after_check) << "the pass reads it";
  EXPECT_EQ(m->arena().values().to_vector<float>(), before);
  EXPECT_EQ(s.skipped_steps(), 1);
}

// Which ranges the pass reads, seen through values planted into .grad after the backward:
// an unselected row of the table is NOT read (the contract: what the source checked is not read
// again, and a row the batch did not select held the zero that zero_grad wrote), another
// parameter's gradient is; a table also read by another op (tied) is read in full (dirty wins);
// and a second check_() without a backward reads everything.
void check_the_pass_reads_the_right_ranges(Device d, int64_t E) {
  auto run = [&](bool tied, const char* where) {
    auto m = tiny(d, E);
    m->tied = tied;
    optim::Adam opt(m->arena(), 0.01);
    GradScaler s(d);
    opt.set_scaler(&s);
    Tensor target = std::string(where) == "table" ? slice(m->table.grad(), 0, kUnselected, kUnselected + 1)
                                                  : slice(m->w.grad(), 0, 0, 1);
    StepFlags f = scaled_step(*m, opt, s, d, [&] { plant(target, kInf); });
    EXPECT_FALSE(f.after_backward);
    return f.after_check;
  };
  EXPECT_FALSE(run(false, "table")) << "an unselected row of a source-checked table is not read again";
  EXPECT_TRUE(run(false, "w")) << "another parameter's gradient is read";
  EXPECT_TRUE(run(true, "table")) << "a table that another op also adds into is read in full";
  // The same tied table with an inf on the embedding's way in: caught (at the source, too).
  {
    auto m = tiny(d, E);
    m->tied = true;
    m->edit_rows = [](const Tensor& g) { fill_(slice(slice(g, 0, 3, 4), 1, 0, 1), -kInf); };
    optim::Adam opt(m->arena(), 0.01);
    GradScaler s(d);
    opt.set_scaler(&s);
    StepFlags f = scaled_step(*m, opt, s, d);
    EXPECT_TRUE(f.after_backward);
    EXPECT_TRUE(f.after_check);
  }
  // Two backward() calls before one check_() (accumulated gradients): the first added into the
  // table through another op, so the pass reads the table although the second did not.
  {
    auto m = tiny(d, E);
    GradScaler s(d);
    m->arena().zero_grad();
    m->tied = true;
    s.backward(tiny_loss(*m, d));
    m->tied = false;
    s.backward(tiny_loss(*m, d));
    plant(slice(m->table.grad(), 0, kUnselected, kUnselected + 1), kInf);
    s.check_(m->arena().grads());
    EXPECT_TRUE(s.found_inf()) << "dirty in any backward() since the last check_() wins";
  }
  // check_() forgets the backward's ranges: a second pass reads the table too.
  {
    auto m = tiny(d, E);
    GradScaler s(d);
    m->arena().zero_grad();
    s.backward(tiny_loss(*m, d));
    plant(slice(m->table.grad(), 0, kUnselected, kUnselected + 1), kInf);
    s.check_(m->arena().grads());
    EXPECT_FALSE(s.found_inf());
    s.check_(m->arena().grads());
    EXPECT_TRUE(s.found_inf()) << "a check_() with no backward() before it reads everything";
  }
}

// E = 8: rows of float4 on the GPU, and a table that ends on a multiple of 4 elements; E = 5:
// one float a thread, and a table whose end the pass reads a few elements into.
void for_widths(const std::function<void(int64_t)>& f) {
  for (int64_t E : {8, 5}) {
    SCOPED_TRACE("E = " + std::to_string(E));
    f(E);
  }
}

#define REQUIRE_GPU() \
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)"

}  // namespace

TEST(GradScaler, CleanStepThroughTheSourceChecksOnTheCpu) {
  for_widths([](int64_t E) { check_clean_step(kCPU, E); });
}
TEST(GradScaler, EmbeddingCatchesInfNanAndOverflowAtTheSourceOnTheCpu) {
  for_widths([](int64_t E) { check_embedding_caught_at_source(kCPU, E); });
}
TEST(GradScaler, OtherParametersAreCaughtByThePassOnTheCpu) {
  for_widths([](int64_t E) { check_other_parameter_caught_by_the_pass(kCPU, E); });
}
TEST(GradScaler, ThePassReadsAllButTheSourceCheckedRangesOnTheCpu) {
  for_widths([](int64_t E) { check_the_pass_reads_the_right_ranges(kCPU, E); });
}

TEST(GradScalerCuda, CleanStepThroughTheSourceChecks) {
  REQUIRE_GPU();
  for_widths([](int64_t E) { check_clean_step(kCUDA, E); });
}
TEST(GradScalerCuda, EmbeddingCatchesInfNanAndOverflowAtTheSource) {
  REQUIRE_GPU();
  for_widths([](int64_t E) { check_embedding_caught_at_source(kCUDA, E); });
}
TEST(GradScalerCuda, OtherParametersAreCaughtByThePass) {
  REQUIRE_GPU();
  for_widths([](int64_t E) { check_other_parameter_caught_by_the_pass(kCUDA, E); });
}
TEST(GradScalerCuda, ThePassReadsAllButTheSourceCheckedRanges) {
  REQUIRE_GPU();
  for_widths([](int64_t E) { check_the_pass_reads_the_right_ranges(kCUDA, E); });
}

// A run of more than 32 positions on one row is summed on the GPU in chunks whose partial sums a
// second kernel combines: the check is on the combined row (each chunk finite, the row's sum not).
static void check_long_run(Device d) {
  for (bool overflow : {false, true}) {
    Tensor table = zeros(Shape{kV, 8}, DType::f32, d).requires_grad_(true);
    table.set_grad(zeros(Shape{kV, 8}, DType::f32, d));  // added into in place, as a parameter's
    Tensor ids = full(Shape{2, 100}, 3.0, DType::i32, d);  // one run of 200 positions: 7 chunks
    Tensor gy = full(Shape{2, 100, 8}, overflow ? 1e37 : 1e30, DType::f32, d);
    GradScaler s(d);
    autograd::SourceCheck c(s.found_inf_flag(), d);
    {
      autograd::SourceCheckScope open(c);
      backward(embedding(ids, table), gy);
    }
    EXPECT_EQ(s.found_inf(), overflow) << "200 x 1e37 overflows float32; 200 x 1e30 does not";
    EXPECT_EQ(c.unchecked_ranges(reshape(table.grad(), Shape{kV * 8})).size(), 0u) << "all checked";
  }
}

TEST(GradScaler, EmbeddingChecksTheSumOfALongRunOnTheCpu) { check_long_run(kCPU); }

TEST(GradScalerCuda, EmbeddingChecksTheCombinedSumOfALongRun) {
  REQUIRE_GPU();
  check_long_run(kCUDA);
}
