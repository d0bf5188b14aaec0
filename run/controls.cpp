#include "run/controls.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"

namespace loupe::run {

Monitor parse_monitor(const std::string& s, const std::string& option) {
  if (s == "test_loss") return Monitor::TestLoss;
  if (s == "test_acc") return Monitor::TestAccuracy;
  throw Error(option + ": monitor is test_loss or test_acc, got '" + s + "'");
}

const char* monitor_name(Monitor m) { return m == Monitor::TestLoss ? "test loss" : "test accuracy"; }

std::optional<double> monitored(const instrument::EpochReport& r, Monitor m) {
  const std::optional<double>& v = m == Monitor::TestLoss ? r.test_loss : r.test_acc;
  if (!v || !std::isfinite(*v)) return std::nullopt;
  return v;
}

bool improves(Monitor m, double figure, std::optional<double> best, double min_delta) {
  if (!best) return true;
  return m == Monitor::TestLoss ? figure < *best - min_delta : figure > *best + min_delta;
}

namespace {
[[noreturn]] void bad(const std::string& spec, const std::string& why) {
  throw Error("--early-stop '" + spec + "': " + why + " (e.g. --early-stop 3 or --early-stop 5,monitor=test_acc,min_delta=0.001)");
}

double number(const std::string& spec, const std::string& text, const std::string& key) {
  const bool decimal = !text.empty() && text.find_first_not_of("0123456789.eE+-") == std::string::npos;
  char* end = nullptr;
  const double v = decimal ? std::strtod(text.c_str(), &end) : NAN;
  if (!decimal || end != text.c_str() + text.size() || !std::isfinite(v)) bad(spec, key + " must be a number, got '" + text + "'");
  return v;
}
}  // namespace

EarlyStopOptions parse_early_stop(const std::string& spec) {
  EarlyStopOptions o;
  size_t a = 0;
  bool first = true;
  while (a <= spec.size()) {
    size_t b = spec.find(',', a);
    if (b == std::string::npos) b = spec.size();
    const std::string item = spec.substr(a, b - a);
    a = b + 1;
    const size_t eq = item.find('=');
    const std::string key = first && eq == std::string::npos ? "patience" : item.substr(0, eq);
    const std::string value = first && eq == std::string::npos ? item : eq == std::string::npos ? "" : item.substr(eq + 1);
    first = false;
    if (key == "patience") {
      const double p = number(spec, value, "patience");
      if (p < 0 || p > 1000000 || p != std::floor(p)) bad(spec, "patience is a whole number of epochs >= 0");
      o.patience = int(p);
    } else if (key == "monitor") {
      if (value != "test_loss" && value != "test_acc") bad(spec, "monitor is test_loss or test_acc, got '" + value + "'");
      o.monitor = value == "test_acc" ? Monitor::TestAccuracy : Monitor::TestLoss;
    } else if (key == "min_delta") {
      o.min_delta = number(spec, value, "min_delta");
      if (o.min_delta < 0) bad(spec, "min_delta must be >= 0");
    } else {
      bad(spec, "unknown key '" + key + "' (patience, monitor, min_delta)");
    }
  }
  return o;
}

void EarlyStopping::epoch_end(const instrument::EpochReport& r, train::Control& c) {
  if (best_epoch_ == 0) c.restore_weights();  // the best epoch's, at the end, stopped early or not
  const std::optional<double> v = monitored(r, o_.monitor);
  if (!v) return;
  if (improves(o_.monitor, *v, best_, o_.min_delta)) {
    best_ = v;
    best_epoch_ = int(r.epoch);
    wait_ = 0;
    c.keep_weights();
    return;
  }
  if (++wait_ < o_.patience && o_.patience > 0) return;
  if (r.epoch >= r.epochs) return;  // the last epoch: nothing left to stop
  c.stop("at epoch " + std::to_string(int(r.epoch)) + ": no better " + monitor_name(o_.monitor) + " for " +
         std::to_string(wait_) + (wait_ == 1 ? " epoch" : " epochs") + " (--early-stop " + std::to_string(o_.patience) + ")");
}

void BestCheckpoint::epoch_end(const instrument::EpochReport& r, train::Control& c) {
  const std::optional<double> v = monitored(r, m_);
  if (!v || !improves(m_, *v, best_, delta_)) return;
  best_ = v;
  c.save(path_);
}

void LrPlateau::epoch_end(const instrument::EpochReport& r, train::Control& c) {
  const std::optional<double> v = monitored(r, o_.maximize ? Monitor::TestAccuracy : Monitor::TestLoss);
  if (!v || !r.lr) return;
  const double lr = plateau_.epoch_end(*v, *r.lr);
  if (lr == *r.lr) return;
  const int epochs = std::max(1, o_.patience);  // patience 0: the first epoch without one
  char why[96];
  std::snprintf(why, sizeof why, "plateau: no better %s for %d epoch%s", o_.maximize ? "test accuracy" : "test loss",
                epochs, epochs == 1 ? "" : "s");
  c.set_lr(lr, why);
}

}  // namespace loupe::run
