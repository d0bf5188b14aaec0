#include "run/controls.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "core/spec.h"

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

EarlyStopOptions parse_early_stop(const std::string& spec) {
  OptionSpec s("--early-stop", spec, "3 or --early-stop 5,monitor=test_acc,min_delta=0.001", "patience");
  EarlyStopOptions o;
  const double three = o.patience;
  const double p = s.number("patience", 0, 1000000, true, &three);
  if (p != std::floor(p)) s.bad("patience is a whole number of epochs");
  o.patience = int(p);
  if (const std::optional<std::string> m = s.text("monitor")) {
    if (*m != "test_loss" && *m != "test_acc") s.bad("monitor is test_loss or test_acc, got '" + *m + "'");
    o.monitor = *m == "test_acc" ? Monitor::TestAccuracy : Monitor::TestLoss;
  }
  const double no_delta = 0;
  o.min_delta = s.number("min_delta", 0, 1e12, true, &no_delta);
  s.done("patience, monitor, min_delta");
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
