// Time and energy to a test accuracy (docs/cli.md, "Training controls"): each run stops at the
// first epoch whose test accuracy reaches the target, and the runs of several seeds are summed
// up as the speed-run reports do, the mean and spread of the seconds, joules and cost they took.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "instrument/report.h"
#include "run/run.h"
#include "train/observer.h"

namespace loupe::run {

// One run's way to the target: the epoch that reached it (0: none did) and, up to and including
// that epoch (or all of them), the epochs' wall time (training and its evaluation, which is how
// the run knows), energy and cost, each unset where the run did not measure it (a CPU's energy).
struct TargetRun {
  uint64_t seed = 0;
  int epoch = 0;
  double accuracy = 0;  // the last epoch's test accuracy
  double seconds = 0;
  std::optional<double> joules, cost;
  bool reached() const { return epoch > 0; }
};

// Stops the run at the first epoch whose test accuracy is at least `target` (0 < target <= 1).
class TargetAccuracy final : public train::Observer {
 public:
  TargetAccuracy(double target, uint64_t seed);
  void epoch_end(const instrument::EpochReport& r, train::Control& c) override;
  const TargetRun& outcome() const { return run_; }

 private:
  double target_;
  TargetRun run_;  // its joules and cost unset once an epoch lacks them
};

// A figure over the runs that reached the target: its mean and sample standard deviation (0 for
// one run); unset where none reached it or one of them did not measure it.
struct Spread {
  double mean = 0, sd = 0;
};
struct TargetSummary {
  double target = 0;
  std::vector<TargetRun> runs;
  int reached = 0;
  std::optional<Spread> seconds, joules, cost;
};
TargetSummary summarize(double target, std::vector<TargetRun> runs);

// What `loupe train --target-acc` prints at its end: "time to 91.00% test accuracy over 5 seeds
// (1-5): 12.3 ± 0.8 s, 1,520 ± 90 J; reached by 5 of 5, at epochs 3 3 4 3 3".
std::string summary_line(const TargetSummary& s);
// The same as one JSON object, the --metrics file's last record: {"record": "time_to_accuracy", ...}.
std::string summary_json(const TargetSummary& s);

// Appends summary_json's record to the JSON Lines file at `path` (--metrics); an Error naming it.
void append_summary(const std::string& path, const TargetSummary& s);
// `--target-acc`'s value: a fraction above 0 and at most 1; a percentage (91) is refused with its
// fraction, anything else with the range.
double parse_target(const std::string& text);

// `seeds` runs of `c`, with seeds c.seed, c.seed + 1, ..., each stopped at `target`; `observe`
// adds the caller's observers to each run before it starts (the printer, the records). A run that
// is interrupted or diverges ends the series there: the summary holds the runs before it and
// `stopped` (where given) that run's result; else stopped->end is Finished.
TargetSummary time_to_accuracy(const RunConfig& c, double target, int seeds, const std::function<void(Run&)>& observe,
                               RunResult* stopped = nullptr);

}  // namespace loupe::run
