// Threads that follow the machine (docs/performance.md, "Threads that follow the machine"): on the
// CPU, a run whose threads wait for cores that other processes hold trains slower than one with
// fewer threads, since every parallel op waits for its slowest thread. The governor watches
// windows of training steps, tries one thread fewer while its threads wait for a core and one more
// while a core stands idle, and keeps a change only where the steps it timed got faster.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "train/observer.h"

namespace loupe::run {

// The decisions, from measured windows alone (no clock, no /proc: a test seam, docs/testing.md).
class ThreadPolicy {
 public:
  // What a window of steps measured.
  struct Window {
    double step_seconds = 0;  // the median step's wall time
    double wait_share = 0;    // of the time the process's threads were ready to run, the share they waited
    double idle_cores = 0;    // the cores of the process's mask that stood idle, on average
    double now = 0;           // when the window ended, in seconds
  };
  // What happened at a window's end.
  struct Change {
    int from = 0, to = 0;
    bool trial = false;  // a count being tried (its window decides); false: kept or reverted
    bool kept = false;
    double before = 0, after = 0;  // the median step's seconds before the try and during it
  };
  // Starts at `threads`, never above it.
  explicit ThreadPolicy(int threads);
  // The window measured at the current count; a change of count for the next window, if any.
  std::optional<Change> next(const Window& w);
  int threads() const { return n_; }

  // A window's threads waited for a core more than this share: try one fewer.
  static constexpr double kBusy = 0.15;
  // This many cores stood idle: try one more.
  static constexpr double kIdle = 0.75;
  // A try of one fewer is kept unless its steps were this much slower; one more only when its
  // steps were this much faster (more threads cost the machine's other users).
  static constexpr double kFewerSlack = 1.03, kMoreGain = 0.95;
  // No try in the first this many seconds after the first window: a run's start (its loader
  // filling, another program's start) is not what the machine will be.
  static constexpr double kSettle = 0.5;

 private:
  int max_, n_;
  bool started_ = false;
  int trial_from_ = 0;  // 0: not trying
  double before_ = 0;   // the step time before the try
  // A failed try waits this long before the next of its kind, twice as long after each failure.
  double fewer_after_ = 0, more_after_ = 0, fewer_backoff_ = 2, more_backoff_ = 5;
};

// The observer: during training steps, windows of at least kWindowSeconds and kWindowSteps, their
// figures from /proc (instrument/host_stats.h), the count set between steps (set_num_threads),
// each kept change said once as a note. The count it started with is put back when it is destroyed.
class ThreadGovernor final : public train::Observer {
 public:
  ThreadGovernor();
  ~ThreadGovernor() override;
  void epoch_begin(const train::StepInfo& info, train::Control& c) override;
  void step_begin(const train::StepInfo& info, train::Control& c) override;
  void step_end(const train::StepInfo& info, train::Control& c) override;

  static constexpr double kWindowSeconds = 0.25;
  static constexpr int kWindowSteps = 4;

 private:
  void start_window();
  void end_window(const train::StepInfo& info, train::Control& c);

  int start_threads_;
  ThreadPolicy policy_;
  double window_t0_ = -1, step_t0_ = -1, cpu0_ = -1;
  std::optional<double> idle0_;
  std::map<int, double> delays0_;
  std::vector<double> steps_;
  ThreadPolicy::Window trigger_;  // the window that started the try
};

}  // namespace loupe::run
