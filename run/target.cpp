#include "run/target.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "core/text.h"
#include "instrument/report_io.h"
#include "run/controls.h"

namespace loupe::run {

TargetAccuracy::TargetAccuracy(double target, uint64_t seed) : target_(target) {
  LOUPE_CHECK(target > 0 && target <= 1, "a target accuracy is above 0 and at most 1, got ", target);
  run_.seed = seed;
  run_.joules = run_.cost = 0.0;
}

void TargetAccuracy::epoch_end(const instrument::EpochReport& r, train::Control& c) {
  if (run_.reached()) return;
  run_.seconds += r.epoch_seconds;
  auto add = [](std::optional<double>& total, const std::optional<double>& epoch) {
    total = total && epoch ? std::optional<double>(*total + *epoch) : std::nullopt;
  };
  add(run_.joules, r.energy_j);
  add(run_.cost, r.cost_epoch);
  const std::optional<double> acc = monitored(r, Monitor::TestAccuracy);
  if (acc) run_.accuracy = *acc;
  if (!acc || *acc < target_) return;
  run_.epoch = r.epoch;
  char why[96];
  std::snprintf(why, sizeof why, "at epoch %d: test accuracy %.2f%% reached the target %.2f%% (--target-acc)", r.epoch,
                100 * *acc, 100 * target_);
  if (r.epoch < r.epochs) c.stop(why);
}

namespace {
// The mean and sample standard deviation of `v`; unset for none.
std::optional<Spread> spread(const std::vector<double>& v) {
  if (v.empty()) return std::nullopt;
  double sum = 0;
  for (double x : v) sum += x;
  Spread s;
  s.mean = sum / double(v.size());
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(ss / double(v.size() - 1)) : 0;
  return s;
}

// One figure of the runs that reached the target; unset where one of them lacks it.
std::optional<Spread> over_reached(const std::vector<TargetRun>& runs, std::optional<double> TargetRun::*field) {
  std::vector<double> v;
  for (const TargetRun& r : runs) {
    if (!r.reached()) continue;
    if (!(r.*field)) return std::nullopt;
    v.push_back(*(r.*field));
  }
  return spread(v);
}

std::string number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}
}  // namespace

TargetSummary summarize(double target, std::vector<TargetRun> runs) {
  TargetSummary s;
  s.target = target;
  s.runs = std::move(runs);
  std::vector<double> seconds;
  for (const TargetRun& r : s.runs)
    if (r.reached()) ++s.reached, seconds.push_back(r.seconds);
  s.seconds = spread(seconds);
  s.joules = over_reached(s.runs, &TargetRun::joules);
  s.cost = over_reached(s.runs, &TargetRun::cost);
  return s;
}

std::string summary_line(const TargetSummary& s) {
  const size_t n = s.runs.size();
  std::string line = "time to " + fmt("%.2f", 100 * s.target) + "% test accuracy over " + std::to_string(n) +
                     (n == 1 ? " seed" : " seeds");
  if (n) line += " (" + std::to_string(s.runs.front().seed) + (n > 1 ? "-" + std::to_string(s.runs.back().seed) : "") + ")";
  line += ": ";
  if (!s.seconds) {
    line += "no run reached it";
  } else {
    line += fmt("%.3g", s.seconds->mean) + " ± " + fmt("%#.2g", s.seconds->sd) + " s";
    if (s.joules) line += ", " + instrument::thousands(s.joules->mean) + " ± " + instrument::thousands(s.joules->sd) + " J";
    else line += ", energy n/a";
    if (s.cost) line += ", $" + fmt("%.4g", s.cost->mean) + " ± " + fmt("%#.2g", s.cost->sd);
  }
  line += "; reached by " + std::to_string(s.reached) + " of " + std::to_string(n);
  std::string epochs;
  for (const TargetRun& r : s.runs) epochs += " " + (r.reached() ? std::to_string(r.epoch) : std::string("-"));
  return line + ", at epochs" + epochs;
}

std::string summary_json(const TargetSummary& s) {
  auto opt = [](const std::optional<double>& v) { return v ? number(*v) : std::string("null"); };
  auto stat = [&](const char* name, const std::optional<Spread>& v) {
    return std::string(", \"") + name + "_mean\": " + (v ? number(v->mean) : "null") + ", \"" + name +
           "_sd\": " + (v ? number(v->sd) : "null");
  };
  std::string runs;
  for (const TargetRun& r : s.runs)
    runs += std::string(runs.empty() ? "" : ", ") + "{\"seed\": " + std::to_string(r.seed) + ", \"epoch\": " +
            (r.reached() ? std::to_string(r.epoch) : "null") + ", \"test_acc\": " + number(r.accuracy) +
            ", \"seconds\": " + number(r.seconds) + ", \"joules\": " + opt(r.joules) + ", \"cost\": " + opt(r.cost) + "}";
  return "{\"record\": \"time_to_accuracy\", \"target_acc\": " + number(s.target) + ", \"seeds\": " +
         std::to_string(s.runs.size()) + ", \"reached\": " + std::to_string(s.reached) + stat("seconds", s.seconds) +
         stat("joules", s.joules) + stat("cost", s.cost) + ", \"runs\": [" + runs + "]}";
}

void append_summary(const std::string& path, const TargetSummary& s) {
  std::FILE* f = std::fopen(path.c_str(), "a");
  const std::string line = summary_json(s) + "\n";
  const bool written = f && std::fwrite(line.data(), 1, line.size(), f) == line.size();
  if (!f || (std::fclose(f) != 0) || !written)
    throw Error("cannot append to '" + path + "' (--metrics): " + std::strerror(errno));
}

double parse_target(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const bool number = !text.empty() && end && *end == '\0' && std::isfinite(v);
  if (number && v > 1 && v <= 100)
    throw Error("--target-acc is a fraction of the test samples: " + text + " % is --target-acc " + fmt("%g", v / 100));
  if (!number || v <= 0 || v > 1)
    throw Error("--target-acc must be a fraction above 0 and at most 1 (0.91: 91 %), got '" + text.substr(0, 40) + "'");
  return v;
}

TargetSummary time_to_accuracy(const RunConfig& c, double target, int seeds, const std::function<void(Run&)>& observe,
                               RunResult* stopped) {
  LOUPE_CHECK(seeds >= 1, "time_to_accuracy: at least one seed, got ", seeds);
  std::vector<TargetRun> runs;
  if (stopped) *stopped = RunResult();
  for (int k = 0; k < seeds; ++k) {
    RunConfig ck = c;
    ck.seed = c.seed + uint64_t(k);
    Run run(ck);
    if (observe) observe(run);
    auto stop = std::make_shared<TargetAccuracy>(target, ck.seed);
    run.add(stop);
    const RunResult r = run.run();
    if (r.end == RunResult::End::Interrupted || r.end == RunResult::End::Diverged) {
      if (stopped) *stopped = r;
      break;
    }
    runs.push_back(stop->outcome());
  }
  return summarize(target, std::move(runs));
}

}  // namespace loupe::run
