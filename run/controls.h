// The training controls (docs/cli.md, "Training controls"), observers of the run (train/observer.h)
// that act through its Control: the learning rate reduced on a plateau (Keras's
// ReduceLROnPlateau), early stopping with the best epoch's weights restored at the end, and the
// best epoch's checkpoint. Each judges one figure of the epoch's report: the test loss (lower is
// better) or the test accuracy (higher).
#pragma once
#include <optional>
#include <string>

#include "instrument/report.h"
#include "train/lr_schedule.h"
#include "train/observer.h"

namespace loupe::run {

enum class Monitor { TestLoss, TestAccuracy };
// "test_loss" or "test_acc"; else an Error naming `option` and both.
Monitor parse_monitor(const std::string& s, const std::string& option);
const char* monitor_name(Monitor m);  // "test loss", "test accuracy"
// The figure in r (none where the epoch has none: no evaluation, or a regression's accuracy).
std::optional<double> monitored(const instrument::EpochReport& r, Monitor m);

// Whether `figure` betters `best` by more than min_delta (Keras's EarlyStopping._is_improvement).
bool improves(Monitor m, double figure, std::optional<double> best, double min_delta);

struct EarlyStopOptions {
  int patience = 3;
  Monitor monitor = Monitor::TestLoss;
  double min_delta = 0;
};
// `--early-stop PATIENCE[,monitor=test_acc][,min_delta=0.001]`; a bad spec: an Error naming the
// option, what is wrong, and an example.
EarlyStopOptions parse_early_stop(const std::string& spec);

// After `patience` epochs without an improvement, stops the run; at its end, however it ended
// (stopped or not), the weights of the best epoch are put back.
class EarlyStopping final : public train::Observer {
 public:
  explicit EarlyStopping(EarlyStopOptions o) : o_(o) {}
  void epoch_end(const instrument::EpochReport& r, train::Control& c) override;
  int best_epoch() const { return best_epoch_; }

 private:
  EarlyStopOptions o_;
  std::optional<double> best_;
  int best_epoch_ = 0, wait_ = 0;
};

// Writes `path` at each epoch that betters the best so far: the file holds the best epoch.
class BestCheckpoint final : public train::Observer {
 public:
  BestCheckpoint(std::string path, Monitor m, double min_delta = 0) : path_(std::move(path)), m_(m), delta_(min_delta) {}
  void epoch_end(const instrument::EpochReport& r, train::Control& c) override;

 private:
  std::string path_;
  Monitor m_;
  double delta_;
  std::optional<double> best_;
};

// Keras's ReduceLROnPlateau over the monitored figure (mode min: test loss; max: test accuracy).
class LrPlateau final : public train::Observer {
 public:
  explicit LrPlateau(train::PlateauOptions o) : o_(o), plateau_(o) {}
  void epoch_end(const instrument::EpochReport& r, train::Control& c) override;

 private:
  train::PlateauOptions o_;
  train::Plateau plateau_;
};

}  // namespace loupe::run
