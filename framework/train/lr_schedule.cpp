#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>

#include "core/error.h"
#include "core/text.h"

namespace loupe::train {
namespace {

[[noreturn]] void bad_spec(const std::string& spec, const std::string& why, const std::string& example) {
  throw Error("--lr-schedule '" + spec + "': " + why + " (e.g. --lr-schedule " + example + ")");
}

// KIND:key=value,key,... as kind and a map ("" for a bare key: a flag such as staircase).
std::string split_spec(const std::string& spec, std::map<std::string, std::string>* keys) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  if (colon == std::string::npos) return kind;
  std::string rest = spec.substr(colon + 1);
  for (size_t a = 0; a <= rest.size();) {
    size_t b = rest.find(',', a);
    if (b == std::string::npos) b = rest.size();
    const std::string item = rest.substr(a, b - a);
    const size_t eq = item.find('=');
    if (!item.empty()) (*keys)[item.substr(0, eq)] = eq == std::string::npos ? "" : item.substr(eq + 1);
    a = b + 1;
  }
  return kind;
}

// A decimal number (as the command line's numbers: no hexadecimal, inf or nan).
double schedule_number(const std::string& spec, const std::string& key, const std::string& text,
                       const std::string& example) {
  const bool decimal = !text.empty() && text.find_first_not_of("0123456789.eE+-") == std::string::npos;
  char* end = nullptr;
  const double v = decimal ? std::strtod(text.c_str(), &end) : NAN;
  if (!decimal || end != text.c_str() + text.size() || !std::isfinite(v))
    bad_spec(spec, key + " must be a number, got '" + text + "'", example);
  return v;
}

std::vector<double> numbers(const std::string& spec, const std::string& key, const std::string& text,
                            const std::string& example) {
  std::vector<double> out;
  for (size_t a = 0; a <= text.size();) {
    size_t b = text.find('/', a);
    if (b == std::string::npos) b = text.size();
    out.push_back(schedule_number(spec, key, text.substr(a, b - a), example));
    a = b + 1;
  }
  return out;
}

constexpr double kBig = 1e12;

struct Keys {
  const std::string& spec;
  const std::string& example;
  std::map<std::string, std::string> map;
  // The value of `key` (required without a default), checked against (lo, hi] or [lo, hi].
  double get(const std::string& key, double lo, double hi, bool lo_in, const double* fallback = nullptr) {
    const auto it = map.find(key);
    if (it == map.end()) {
      if (!fallback) bad_spec(spec, "it needs " + key, example);
      return *fallback;
    }
    const std::string text = it->second;
    map.erase(it);
    const double v = schedule_number(spec, key, text, example);
    if (v < lo || (v == lo && !lo_in) || v > hi)
      bad_spec(spec, key + " " + text + " is out of range (" + (lo_in ? "from " : "above ") + fmt("%g", lo) +
                         " up to " + fmt("%g", hi) + ")", example);
    return v;
  }
  // A whole number (patience, cooldown, step_size), from `lo`.
  int64_t whole(const std::string& key, double lo, const double* fallback = nullptr) {
    const double v = get(key, lo, kBig, true, fallback);
    if (v != std::floor(v)) bad_spec(spec, key + " must be a whole number", example);
    return int64_t(v);
  }
  bool flag(const std::string& key) { return map.erase(key) > 0; }
  void done() {
    if (!map.empty()) bad_spec(spec, "it has no key '" + map.begin()->first + "'", example);
  }
};

void parse_piecewise(Keys& k, LrSchedule& s) {
  const auto b = k.map.find("boundaries"), v = k.map.find("values");
  if (b == k.map.end() || v == k.map.end()) bad_spec(k.spec, "it needs boundaries and values", k.example);
  s.boundaries = numbers(k.spec, "boundaries", b->second, k.example);
  s.values = numbers(k.spec, "values", v->second, k.example);
  k.map.erase("boundaries");
  k.map.erase("values");
  if (s.values.size() != s.boundaries.size() + 1)
    bad_spec(k.spec, "values must have one more entry than boundaries", k.example);
  if (s.boundaries.size() > size_t(optim::LrCurve::kMaxBoundaries))
    bad_spec(k.spec, "it has at most " + std::to_string(optim::LrCurve::kMaxBoundaries) + " boundaries", k.example);
  for (size_t i = 1; i < s.boundaries.size(); ++i)
    if (s.boundaries[i] <= s.boundaries[i - 1]) bad_spec(k.spec, "boundaries must increase", k.example);
  for (double x : s.values)
    if (!(x > 0 && x <= 1000)) bad_spec(k.spec, "each value is a learning rate above 0 up to 1000", k.example);
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
  std::map<std::string, std::string> map;
  const std::string kind = split_spec(spec, &map);
  static const std::map<std::string, std::string> kExamples = {
      {"exponential", "exponential:decay_steps=1000,decay_rate=0.96"},
      {"inverse_time", "inverse_time:decay_steps=1000,decay_rate=0.5"},
      {"cosine", "cosine:decay_steps=10000,warmup_target=0.01,warmup_steps=500"},
      {"piecewise", "piecewise:boundaries=1000/2000,values=0.1/0.01/0.001"},
      {"step", "step:step_size=10,gamma=0.5"}};
  const auto ex = kExamples.find(kind);
  if (ex == kExamples.end())
    bad_spec(spec, "no schedule '" + kind + "'; loupe has exponential, inverse_time, cosine, piecewise and step",
             "cosine:decay_steps=10000");
  Keys k{spec, ex->second, map};
  LrSchedule s;
  s.initial = initial;
  const double zero = 0, no = NAN;
  if (kind == "exponential" || kind == "inverse_time") {
    s.kind = kind == "exponential" ? LrSchedule::Kind::Exponential : LrSchedule::Kind::InverseTime;
    s.decay_steps = k.get("decay_steps", 0, kBig, false);
    s.decay_rate = k.get("decay_rate", 0, kind == "exponential" ? 1 : kBig, kind != "exponential");
    s.staircase = k.flag("staircase");
  } else if (kind == "step") {
    s.kind = LrSchedule::Kind::Exponential;  // PyTorch's StepLR: gamma ^ floor(epoch / step_size)
    s.per_epoch = s.staircase = true;
    s.decay_steps = double(k.whole("step_size", 1));
    s.decay_rate = k.get("gamma", 0, 1, false);
  } else if (kind == "cosine") {
    s.kind = LrSchedule::Kind::Cosine;
    s.decay_steps = k.get("decay_steps", 0, kBig, false);
    s.alpha = k.get("alpha", 0, 1, true, &zero);
    s.warmup_target = k.get("warmup_target", 0, 1000, false, &no);
    s.warmup_steps = std::isnan(s.warmup_target) ? 0 : k.get("warmup_steps", 0, kBig, false);
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
  std::map<std::string, std::string> map;
  const std::string kind = split_spec(spec, &map);
  const std::string example = "plateau:factor=0.5,patience=3";
  if (kind != "plateau") bad_spec(spec, "a plateau schedule starts 'plateau:'", example);
  Keys k{spec, example, map};
  PlateauOptions o;
  const double factor = o.factor, patience = o.patience, delta = o.min_delta, cooldown = 0, min_lr = 0;
  o.factor = k.get("factor", 0, 1, false, &factor);
  if (o.factor == 1) bad_spec(spec, "factor must be below 1", example);
  o.patience = int(k.whole("patience", 0, &patience));
  o.min_delta = k.get("min_delta", 0, kBig, true, &delta);
  o.cooldown = int(k.whole("cooldown", 0, &cooldown));
  o.min_lr = k.get("min_lr", 0, 1000, true, &min_lr);
  const auto mode = k.map.find("mode");
  if (mode != k.map.end()) {
    if (mode->second != "min" && mode->second != "max") bad_spec(spec, "mode is min or max", example);
    o.maximize = mode->second == "max";
    k.map.erase(mode);
  }
  k.done();
  return o;
}

bool is_plateau(const std::string& spec) { return spec.rfind("plateau", 0) == 0; }

}  // namespace loupe::train
