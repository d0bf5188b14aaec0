#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "core/error.h"
#include "core/spec.h"

namespace loupe::train {
namespace {

constexpr double kBig = 1e12;

void parse_piecewise(OptionSpec& k, LrSchedule& s) {
  if (!k.has("boundaries") || !k.has("values")) k.bad("it needs boundaries and values");
  s.boundaries = k.numbers("boundaries");
  s.values = k.numbers("values");
  if (s.values.size() != s.boundaries.size() + 1) k.bad("values must have one more entry than boundaries");
  if (s.boundaries.size() > size_t(optim::LrCurve::kMaxBoundaries))
    k.bad("it has at most " + std::to_string(optim::LrCurve::kMaxBoundaries) + " boundaries");
  for (size_t i = 1; i < s.boundaries.size(); ++i)
    if (s.boundaries[i] <= s.boundaries[i - 1]) k.bad("boundaries must increase");
  for (double x : s.values)
    if (!(x > 0 && x <= 1000)) k.bad("each value is a learning rate above 0 up to 1000");
}

}  // namespace

optim::LrCurve lr_curve(const LrSchedule& s, double updates_per_epoch) {
  using optim::LrCurve;
  LrCurve c;
  switch (s.kind) {
    case LrSchedule::Kind::Constant: c.kind = LrCurve::kConstant; break;
    case LrSchedule::Kind::Exponential: c.kind = LrCurve::kExponential; break;
    case LrSchedule::Kind::InverseTime: c.kind = LrCurve::kInverseTime; break;
    case LrSchedule::Kind::Piecewise: c.kind = LrCurve::kPiecewise; break;
    case LrSchedule::Kind::Cosine: c.kind = LrCurve::kCosine; break;
  }
  c.staircase = s.staircase;
  c.per_epoch = s.per_epoch;
  c.updates_per_epoch = updates_per_epoch;
  c.decay_steps = s.decay_steps;
  c.decay_rate = s.decay_rate;
  c.alpha = s.alpha;
  c.warmup = !std::isnan(s.warmup_target);
  c.warmup_target = c.warmup ? s.warmup_target : 0.0;
  c.warmup_steps = s.warmup_steps;
  if (s.kind == LrSchedule::Kind::Piecewise) {
    const size_t n = s.boundaries.size();
    if (n > size_t(LrCurve::kMaxBoundaries))
      throw Error("a piecewise learning-rate schedule has at most " + std::to_string(LrCurve::kMaxBoundaries) +
                  " boundaries (the update kernels carry them as arguments), got " + std::to_string(n));
    LOUPE_CHECK(s.values.size() == n + 1, "a piecewise schedule has one more value than boundaries");
    std::copy(s.boundaries.begin(), s.boundaries.end(), c.boundaries);
    std::copy(s.values.begin(), s.values.end(), c.values);
    c.boundaries_used = int32_t(n);
  }
  return c;
}

double lr_at(const LrSchedule& s, double t) { return optim::curve_rate(lr_curve(s), s.initial, t); }

LrSchedule parse_lr_schedule(const std::string& spec, double initial) {
  OptionSpec k("--lr-schedule", spec, "cosine:decay_steps=10000");
  const std::string kind = k.kind();
  static const std::map<std::string, std::string> kExamples = {
      {"exponential", "exponential:decay_steps=1000,decay_rate=0.96"},
      {"inverse_time", "inverse_time:decay_steps=1000,decay_rate=0.5"},
      {"cosine", "cosine:decay_steps=10000,warmup_target=0.01,warmup_steps=500"},
      {"piecewise", "piecewise:boundaries=1000/2000,values=0.1/0.01/0.001"},
      {"step", "step:step_size=10,gamma=0.5"}};
  const auto ex = kExamples.find(kind);
  if (ex == kExamples.end())
    k.bad("no schedule '" + kind + "'; loupe has exponential, inverse_time, cosine, piecewise and step");
  k.set_example(ex->second);
  LrSchedule s;
  s.initial = initial;
  const double zero = 0, no = NAN;
  if (kind == "exponential" || kind == "inverse_time") {
    s.kind = kind == "exponential" ? LrSchedule::Kind::Exponential : LrSchedule::Kind::InverseTime;
    s.decay_steps = k.number("decay_steps", 0, kBig, false);
    s.decay_rate = k.number("decay_rate", 0, kind == "exponential" ? 1 : kBig, kind != "exponential");
    s.staircase = k.flag("staircase");
  } else if (kind == "step") {
    s.kind = LrSchedule::Kind::Exponential;  // PyTorch's StepLR: gamma ^ floor(epoch / step_size)
    s.per_epoch = s.staircase = true;
    s.decay_steps = double(k.whole("step_size", 1));
    s.decay_rate = k.number("gamma", 0, 1, false);
  } else if (kind == "cosine") {
    s.kind = LrSchedule::Kind::Cosine;
    s.decay_steps = k.number("decay_steps", 0, kBig, false);
    s.alpha = k.number("alpha", 0, 1, true, &zero);
    s.warmup_target = k.number("warmup_target", 0, 1000, false, &no);
    s.warmup_steps = std::isnan(s.warmup_target) ? 0 : k.number("warmup_steps", 0, kBig, false);
  } else {
    s.kind = LrSchedule::Kind::Piecewise;
    parse_piecewise(k, s);
  }
  k.done();
  return s;
}

Plateau::Plateau(PlateauOptions o) : o_(o), best_(o.maximize ? -INFINITY : INFINITY) {}

double Plateau::epoch_end(double figure, double lr) {
  // Keras's ReduceLROnPlateau.on_epoch_end, step for step.
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    wait_ = 0;
  }
  const bool better = o_.maximize ? figure > best_ + o_.min_delta : figure < best_ - o_.min_delta;
  if (better) {
    best_ = figure;
    wait_ = 0;
    return lr;
  }
  if (cooldown_left_ > 0) return lr;
  if (++wait_ < o_.patience || lr <= o_.min_lr) return lr;
  cooldown_left_ = o_.cooldown;
  wait_ = 0;
  return std::max(lr * o_.factor, o_.min_lr);
}

PlateauOptions parse_plateau(const std::string& spec) {
  OptionSpec k("--lr-schedule", spec, "plateau:factor=0.5,patience=3");
  if (k.kind() != "plateau") k.bad("a plateau schedule starts 'plateau:'");
  PlateauOptions o;
  const double factor = o.factor, patience = o.patience, delta = o.min_delta, cooldown = 0, min_lr = 0;
  o.factor = k.number("factor", 0, 1, false, &factor);
  if (o.factor == 1) k.bad("factor must be below 1");
  o.patience = int(k.whole("patience", 0, &patience));
  o.min_delta = k.number("min_delta", 0, kBig, true, &delta);
  o.cooldown = int(k.whole("cooldown", 0, &cooldown));
  o.min_lr = k.number("min_lr", 0, 1000, true, &min_lr);
  if (const std::optional<std::string> mode = k.text("mode")) {
    if (*mode != "min" && *mode != "max") k.bad("mode is min or max");
    o.maximize = *mode == "max";
  }
  k.done();
  return o;
}

bool is_plateau(const std::string& spec) { return spec.rfind("plateau", 0) == 0; }

}  // namespace loupe::train
