// Threads that follow the machine (run/threads.h): the policy's decisions on given windows, and a
// CPU run beside a process that holds one of its two cores, which lowers its thread count, says so,
// and leaves the pool as it found it.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "instrument/host_stats.h"
#include "models/registry.h"
#include "ops/conv_cpu.h"
#include "run/run.h"
#include "run/threads.h"
#include "skip.h"

using namespace loupe;
using Policy = run::ThreadPolicy;

namespace {

Policy::Window window(double now, double step_ms, double wait_share = 0.02, double idle_cores = 0) {
  Policy::Window w;
  w.now = now;
  w.step_seconds = step_ms * 1e-3;
  w.wait_share = wait_share;
  w.idle_cores = idle_cores;
  return w;
}

// Past the policy's settling time.
constexpr double kT = 10;

}  // namespace

TEST(ThreadPolicy, TriesFewerWhileItsThreadsWaitAndKeepsItWhenNotSlower) {
  Policy p(2);
  EXPECT_FALSE(p.next(window(0, 10, 0.40)));  // the first window only starts the clock
  EXPECT_FALSE(p.next(window(0.4, 10, 0.40))) << "settling: no try in the first half second";
  const auto trial = p.next(window(kT, 10, 0.40));
  ASSERT_TRUE(trial);
  EXPECT_TRUE(trial->trial);
  EXPECT_EQ(trial->from, 2);
  EXPECT_EQ(trial->to, 1);
  EXPECT_EQ(p.threads(), 1);
  const auto kept = p.next(window(kT + 0.3, 10.2));  // within the slack: one core fewer for the same speed
  ASSERT_TRUE(kept);
  EXPECT_TRUE(kept->kept);
  EXPECT_FALSE(kept->trial);
  EXPECT_EQ(kept->from, 2);
  EXPECT_EQ(kept->to, 1);
  EXPECT_DOUBLE_EQ(kept->before, 0.010);
  EXPECT_DOUBLE_EQ(kept->after, 0.0102);
  EXPECT_EQ(p.threads(), 1);
  EXPECT_FALSE(p.next(window(kT + 0.6, 10, 0.40))) << "never below one thread";
  EXPECT_EQ(p.threads(), 1);
}

TEST(ThreadPolicy, GoesBackWhenFewerIsSlowerAndWaitsLongerEachTime) {
  Policy p(3);
  p.next(window(0, 10));
  ASSERT_TRUE(p.next(window(kT, 10, 0.30)));
  const auto back = p.next(window(kT + 0.3, 10 * Policy::kFewerSlack * 1.01));
  ASSERT_TRUE(back);
  EXPECT_FALSE(back->kept);
  EXPECT_EQ(back->from, 2);
  EXPECT_EQ(back->to, 3);
  EXPECT_EQ(p.threads(), 3);
  // The next try waits 2 s, then 4 s after a second failure.
  EXPECT_FALSE(p.next(window(kT + 2.2, 10, 0.30)));
  ASSERT_TRUE(p.next(window(kT + 2.4, 10, 0.30)));
  ASSERT_FALSE(p.next(window(kT + 2.7, 12))->kept);
  EXPECT_FALSE(p.next(window(kT + 6.6, 10, 0.30)));
  EXPECT_TRUE(p.next(window(kT + 6.8, 10, 0.30)));
}

TEST(ThreadPolicy, TriesMoreWhenACoreStandsIdleAndKeepsItOnlyWhenFaster) {
  Policy p(2);
  p.next(window(0, 10));
  ASSERT_TRUE(p.next(window(kT, 10, 0.40)));
  ASSERT_TRUE(p.next(window(kT + 0.3, 9))->kept);
  EXPECT_EQ(p.threads(), 1);
  EXPECT_FALSE(p.next(window(kT + 0.6, 9, 0.02, 0.5))) << "half a core idle is not a free core";
  const auto more = p.next(window(kT + 0.9, 9, 0.02, 0.95));
  ASSERT_TRUE(more);
  EXPECT_TRUE(more->trial);
  EXPECT_EQ(more->to, 2);
  const auto not_faster = p.next(window(kT + 1.2, 9 * 0.97));  // 3 % faster: not worth a core
  ASSERT_TRUE(not_faster);
  EXPECT_FALSE(not_faster->kept);
  EXPECT_EQ(p.threads(), 1);
  EXPECT_FALSE(p.next(window(kT + 1.5, 9, 0.02, 0.95))) << "the failed try waits 5 s";
  ASSERT_TRUE(p.next(window(kT + 6.3, 9, 0.02, 0.95)));
  const auto faster = p.next(window(kT + 6.6, 5));
  ASSERT_TRUE(faster);
  EXPECT_TRUE(faster->kept);
  EXPECT_EQ(p.threads(), 2);
  EXPECT_FALSE(p.next(window(kT + 6.9, 5, 0.02, 1.0))) << "never above the count it started with";
}

TEST(ThreadPolicy, AQuietMachineKeepsTheCount) {
  Policy p(4);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(p.next(window(0.3 * i, 10, 0.05, 0.2)));
  EXPECT_EQ(p.threads(), 4);
}

namespace {

// Every thread of this process on `cpus` (a new thread inherits its creator's mask); the masks
// each had are put back at the end.
class PinProcess {
 public:
  explicit PinProcess(const cpu_set_t& cpus) {
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
      const pid_t tid = std::stoi(e.path().filename().string());
      cpu_set_t old;
      if (sched_getaffinity(tid, sizeof old, &old) != 0) continue;
      if (sched_setaffinity(tid, sizeof cpus, &cpus) == 0) old_.push_back({tid, old});
    }
  }
  ~PinProcess() {
    for (const auto& [tid, mask] : old_) sched_setaffinity(tid, sizeof mask, &mask);
  }

 private:
  std::vector<std::pair<pid_t, cpu_set_t>> old_;
};

// A process that spins on one CPU until it is killed.
class Spinner {
 public:
  explicit Spinner(int cpu) {
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test killed mid-way leaves no spinner behind
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      sched_setaffinity(0, sizeof one, &one);
      for (volatile unsigned long i = 0;; i = i + 1) {
      }
    }
  }
  ~Spinner() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  bool ok() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
};

// mnist_mlp on the CPU, on synthetic data resident in memory, no NVML.
run::RunConfig cpu_mlp(int epochs, int64_t max_steps) {
  run::RunConfig c;
  c.model = models::find_model("mnist_mlp");
  c.data = run::request_for(c.model);
  c.data.synthetic = true;
  c.feed.resident = true;
  c.device = kCPU;
  c.epochs = epochs;
  c.max_steps = max_steps;
  c.monitor.nvml = false;
  return c;
}

// The run's notes, and a stop once the governor has said it kept a count.
struct Notes final : train::Observer {
  std::vector<std::string> lines;
  void note(const std::string& line) override { lines.push_back(line); }
  void epoch_end(const instrument::EpochReport&, train::Control& c) override {
    for (const std::string& l : lines)
      if (l.rfind("threads ", 0) == 0) c.stop("the governor decided");
  }
};

}  // namespace

TEST(ThreadGovernor, ARunBesideAProcessHoldingOneOfItsTwoCoresUsesOneThread) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
    if (CPU_ISSET(c, &mine)) cpus.push_back(c);
  if (cpus.size() < 2) LOUPE_SKIP_NOT_HERE << "one CPU: nothing to share";
  // loupe's own pool (a build without oneDNN) hands chunks out one at a time, so a thread that
  // shares its core takes fewer of them and one thread fewer gains nothing to keep
  // (docs/performance.md, "Threads that follow the machine"): only OpenMP's team waits for it.
  if (cpu::dnnl_version().empty()) LOUPE_SKIP_NOT_HERE << "built without oneDNN: its own pool does not wait for a busy core";
  if (!instrument::read_idle_cpu_seconds() || instrument::read_thread_run_delays().empty())
    LOUPE_SKIP_NOT_HERE << "no /proc/stat or schedstat here";
  cpu_set_t two;
  CPU_ZERO(&two);
  for (int c : cpus) CPU_SET(c, &two);
  PinProcess pin(two);
  const int before = num_threads();
  set_num_threads(2);
  {
    Spinner spin(cpus[0]);
    ASSERT_TRUE(spin.ok());
    // The governor decides within two epochs; without it, this ends anyway.
    const run::RunConfig c = cpu_mlp(12, 60);
    auto notes = std::make_shared<Notes>();
    {
      run::Run r(c);
      r.add(notes);
      r.run();
    }
    const auto said = std::find_if(notes->lines.begin(), notes->lines.end(),
                                   [](const std::string& l) { return l.rfind("threads ", 0) == 0; });
    ASSERT_NE(said, notes->lines.end()) << "no change of thread count in " << notes->lines.size() << " notes";
    EXPECT_EQ(said->rfind("threads 2 -> 1 at step ", 0), 0u) << *said;
    // The wait that started the try, not the one after it.
    const size_t at = said->find("they waited ");
    ASSERT_NE(at, std::string::npos) << *said;
    EXPECT_GT(std::stod(said->substr(at + 12)), 100 * run::ThreadPolicy::kBusy) << *said;
    EXPECT_EQ(num_threads(), 2) << "the run puts back the count it started with";
  }
  set_num_threads(before);
}

TEST(ThreadGovernor, ACountTheRunWasGivenStays) {
  const int before = num_threads();
  run::RunConfig c = cpu_mlp(1, 2);
  c.threads = 1;
  run::Run r(c);
  EXPECT_EQ(num_threads(), 1);
  r.run();
  EXPECT_EQ(num_threads(), 1);
  set_num_threads(before);
}
