#include "run/threads.h"

#include <algorithm>
#include <cstdio>

#include "core/clock.h"
#include "core/thread_pool.h"
#include "instrument/host_stats.h"

namespace loupe::run {

ThreadPolicy::ThreadPolicy(int threads) : max_(std::max(1, threads)), n_(max_) {}

std::optional<ThreadPolicy::Change> ThreadPolicy::next(const Window& w) {
  constexpr double kLongestBackoff = 60;
  if (!started_) {
    started_ = true;
    fewer_after_ = more_after_ = w.now + kSettle;
  }
  if (trial_from_ > 0) {  // this window ran at the count being tried: keep it or go back
    const int from = trial_from_;
    trial_from_ = 0;
    const bool fewer = n_ < from;
    Change c{from, n_, false, false, before_, w.step_seconds};
    c.kept = fewer ? w.step_seconds <= before_ * kFewerSlack : w.step_seconds <= before_ * kMoreGain;
    double& after = fewer ? fewer_after_ : more_after_;
    double& backoff = fewer ? fewer_backoff_ : more_backoff_;
    if (c.kept) {
      backoff = fewer ? 2 : 5;
      return c;
    }
    after = w.now + backoff;
    backoff = std::min(2 * backoff, kLongestBackoff);
    std::swap(c.from, c.to);
    n_ = from;
    return c;
  }
  int to = n_;
  if (n_ > 1 && w.wait_share > kBusy && w.now >= fewer_after_) to = n_ - 1;
  else if (n_ < max_ && w.idle_cores >= kIdle && w.now >= more_after_) to = n_ + 1;
  if (to == n_) return std::nullopt;
  trial_from_ = n_;
  before_ = w.step_seconds;
  Change c{n_, to, true, false, w.step_seconds, 0};
  n_ = to;
  return c;
}

namespace {
std::string step_time(double seconds) {
  char b[32];
  std::snprintf(b, sizeof b, seconds < 0.01 ? "%.2f ms" : "%.1f ms", seconds * 1e3);
  return b;
}

std::string whole_percent(double share) {
  char b[16];
  std::snprintf(b, sizeof b, "%.0f%%", share * 100);
  return b;
}
}  // namespace

ThreadGovernor::ThreadGovernor() : start_threads_(num_threads()), policy_(start_threads_) {}

ThreadGovernor::~ThreadGovernor() {
  if (num_threads() != start_threads_) set_num_threads(start_threads_);
}

void ThreadGovernor::start_window() {
  window_t0_ = now_s();
  cpu0_ = instrument::process_cpu_seconds();
  idle0_ = instrument::read_idle_cpu_seconds();
  delays0_ = instrument::read_thread_run_delays();
  steps_.clear();
}

// Evaluation and the epoch's edge lie between epochs: each epoch's windows start afresh.
void ThreadGovernor::epoch_begin(const train::StepInfo&, train::Control&) { window_t0_ = -1; }

void ThreadGovernor::step_begin(const train::StepInfo&, train::Control&) {
  if (window_t0_ < 0) start_window();
  step_t0_ = now_s();
}

void ThreadGovernor::step_end(const train::StepInfo& info, train::Control& c) {
  if (step_t0_ < 0) return;
  const double t = now_s();
  steps_.push_back(t - step_t0_);
  step_t0_ = -1;
  if (t - window_t0_ >= kWindowSeconds && int(steps_.size()) >= kWindowSteps) end_window(info, c);
}

void ThreadGovernor::end_window(const train::StepInfo& info, train::Control& c) {
  ThreadPolicy::Window w;
  w.now = now_s();
  const double wall = w.now - window_t0_;
  std::nth_element(steps_.begin(), steps_.begin() + steps_.size() / 2, steps_.end());
  w.step_seconds = steps_[steps_.size() / 2];
  const double cpu = instrument::process_cpu_seconds() - cpu0_;
  const double waited = instrument::run_delay_between(delays0_, instrument::read_thread_run_delays());
  if (cpu0_ >= 0 && waited >= 0) w.wait_share = instrument::cpu_wait_share(cpu, waited).value_or(0);
  const std::optional<double> idle = instrument::read_idle_cpu_seconds();
  if (idle && idle0_ && wall > 0) w.idle_cores = (*idle - *idle0_) / wall;
  window_t0_ = -1;  // the next step starts the next window
  const std::optional<ThreadPolicy::Change> ch = policy_.next(w);
  if (!ch) return;
  set_num_threads(policy_.threads());
  if (ch->trial) {
    trigger_ = w;
    return;
  }
  if (!ch->kept) return;
  const bool fewer = ch->to < ch->from;
  std::string line = "threads " + std::to_string(ch->from) + " -> " + std::to_string(ch->to) + " at step " +
                     std::to_string(info.step) + ": ";
  line += fewer ? "they waited " + whole_percent(trigger_.wait_share) + " of their time for a core"
                : "a core stood idle";
  line += ", and steps took " + step_time(ch->after) + " instead of " + step_time(ch->before);
  c.note(line);
}

}  // namespace loupe::run
