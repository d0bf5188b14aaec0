// The NVML sampler and the host-process statistics: without a driver the sampler says why and
// every figure stays empty (never 0); summaries of injected samples are right (means, maxima,
// energy from the counter or from the power integral, throttle names); on a GPU machine a short
// live run yields plausible readings; /proc CPU time and RSS move when we burn CPU and touch memory;
// the cores the process may use (the thread count's default) follow a cgroup's CPU quota.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/thread_pool.h"
#include "instrument/host_stats.h"
#include "instrument/monitor.h"
#include "instrument/report.h"
#include "instrument/nvml_sampler.h"
#include "skip.h"
#include "test_util.h"

using namespace loupe::instrument;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// A sample with every field measured; tests blank out what they need unsupported.
GpuSample sample(double t, double util, double power_w, double energy_mj, uint64_t throttle = 0) {
  GpuSample s;
  s.t = t;
  s.gpu_util = util;
  s.mem_util = util / 2;
  s.mem_used = 1e9 * util;
  s.mem_total = 80e9;
  s.power_w = power_w;
  s.has_power = true;
  s.energy_mj = energy_mj;
  s.has_energy = energy_mj >= 0;
  s.temp_c = 40 + util / 10;
  s.sm_clock_mhz = 1000 + util;
  s.throttle = throttle;
  return s;
}

void expect_all_empty(const GpuSummary& s) {
  EXPECT_EQ(s.samples, 0);
  EXPECT_FALSE(s.why.empty());
  for (const auto* o : {&s.gpu_util_mean, &s.gpu_util_max, &s.mem_util_mean, &s.mem_used_max, &s.mem_total,
                        &s.power_mean_w, &s.power_max_w, &s.energy_j, &s.temp_max_c, &s.sm_clock_mean_mhz})
    EXPECT_FALSE(o->has_value());
  EXPECT_EQ(s.throttle, "");
}

}  // namespace

TEST(NvmlSampler, WithoutDriverSaysWhyAndMeasuresNothing) {
  NvmlSampler nvml;
  if (nvml.available()) LOUPE_SKIP_NOT_HERE << "NVML is available here (" << nvml.device_name() << ")";
  EXPECT_FALSE(nvml.why_unavailable().empty());
  EXPECT_EQ(nvml.device_name(), "");
  nvml.start();
  nvml.start();  // twice is harmless
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  nvml.stop();
  nvml.stop();
  EXPECT_TRUE(nvml.samples().empty());
  GpuSummary s = nvml.summarize(-kInf, kInf);
  expect_all_empty(s);
  EXPECT_EQ(s.why, nvml.why_unavailable());
  std::cout << "why: " << s.why << "\n";
}

TEST(NvmlSampler, BadDeviceIndexIsUnavailable) {
  NvmlSampler nvml(9999);
  EXPECT_FALSE(nvml.available());
  EXPECT_FALSE(nvml.why_unavailable().empty());
  expect_all_empty(nvml.summarize(-kInf, kInf));
}

TEST(NvmlSampler, SummaryOfInjectedSamples) {
  NvmlSampler nvml(9999);  // never a real device: only the injected samples count
  nvml.add_sample_for_test(sample(9.0, 99, 999, 0));  // before the window
  nvml.add_sample_for_test(sample(10.0, 20, 100, 5000, 0x1));        // GpuIdle: not reported
  nvml.add_sample_for_test(sample(11.0, 80, 300, 5000 + 250e3, 0x4));  // SwPowerCap
  nvml.add_sample_for_test(sample(10.5, 40, 200, 5000 + 100e3));     // out of order on purpose
  nvml.add_sample_for_test(sample(11.5, 60, 200, 5000 + 350e3, 0x40));  // HwThermalSlowdown
  nvml.add_sample_for_test(sample(12.5, 99, 999, 1e9));  // after the window
  GpuSummary s = nvml.summarize(10.0, 11.5);  // both ends inclusive
  EXPECT_EQ(s.samples, 4);
  EXPECT_TRUE(s.why.empty());
  EXPECT_DOUBLE_EQ(*s.gpu_util_mean, 50);
  EXPECT_DOUBLE_EQ(*s.gpu_util_max, 80);
  EXPECT_DOUBLE_EQ(*s.mem_util_mean, 25);
  EXPECT_DOUBLE_EQ(*s.mem_used_max, 80e9);
  EXPECT_DOUBLE_EQ(*s.mem_total, 80e9);
  EXPECT_DOUBLE_EQ(*s.power_mean_w, 200);
  EXPECT_DOUBLE_EQ(*s.power_max_w, 300);
  EXPECT_DOUBLE_EQ(*s.energy_j, 350);  // counter: last - first in the window, mJ -> J
  EXPECT_DOUBLE_EQ(*s.temp_max_c, 48);
  EXPECT_DOUBLE_EQ(*s.sm_clock_mean_mhz, 1050);
  EXPECT_EQ(s.throttle, "SwPowerCap,HwThermalSlowdown");

  GpuSummary none = nvml.summarize(20, 30);
  expect_all_empty(none);
}

// GPM: the intervals that overlap the window, weighted by the overlap; a metric the driver did not
// give is left out of its mean; no interval in the window leaves them null with why.
TEST(NvmlSampler, GpmFiguresOfTheIntervalsInTheWindow) {
  NvmlSampler nvml(9999);
  auto interval = [](double t0, double t1, double sm, double tensor) {
    GpmInterval g;
    g.t0 = t0;
    g.t1 = t1;
    g.sm_active = sm;
    g.sm_occupancy = sm / 4;
    g.tensor_active = tensor;
    g.dram_active = 10;
    g.graphics_active = 99;
    return g;
  };
  nvml.add_gpm_for_test(interval(9.6, 9.9, 90, 50));    // before the window
  nvml.add_gpm_for_test(interval(9.9, 10.2, 20, kNaN));  // 0.2 s of it in the window at 20 %, no tensor figure
  nvml.add_gpm_for_test(interval(10.2, 10.5, 60, 30));   // 0.3 s at 60 %
  nvml.add_gpm_for_test(interval(10.5, 11.2, 0, 0));     // 0.1 s at 0 %
  nvml.add_gpm_for_test(interval(11.2, 11.5, 99, 99));   // after the window
  GpuSummary s = nvml.summarize(10.0, 10.6);
  ASSERT_TRUE(s.sm_active) << s.gpm_why;
  EXPECT_NEAR(*s.sm_active, 22.0 / 0.6, 1e-9);  // (20 x 0.2 s + 60 x 0.3 s + 0 x 0.1 s) / 0.6 s
  EXPECT_NEAR(*s.sm_occupancy, 5.5 / 0.6, 1e-9);
  EXPECT_NEAR(*s.tensor_active, 22.5, 1e-9);  // (30 x 0.3 s + 0 x 0.1 s) / 0.4 s
  EXPECT_DOUBLE_EQ(*s.dram_active, 10);
  EXPECT_DOUBLE_EQ(*s.graphics_active, 99);
  EXPECT_TRUE(s.gpm_why.empty());
  GpuSummary none = nvml.summarize(20, 30);
  EXPECT_FALSE(none.sm_active);
  EXPECT_NE(none.gpm_why.find("shorter than GPM's 100 ms"), std::string::npos) << none.gpm_why;
  // A window inside one interval (an epoch shorter than 0.1 s): that interval's figures.
  EXPECT_NEAR(*nvml.summarize(10.3, 10.35).sm_active, 60, 1e-9);
  // One no finished interval overlaps: the one that ended less than 0.1 s before it.
  EXPECT_NEAR(*nvml.summarize(11.55, 11.58).sm_active, 99, 1e-9);
  EXPECT_FALSE(nvml.summarize(11.65, 11.7).sm_active) << "the last one ended 0.15 s before";
  NvmlSampler without(9999);  // no intervals: NVML's own reason
  EXPECT_EQ(without.summarize(0, 1).gpm_why, without.why_unavailable());
}

TEST(NvmlSampler, EnergyFromPowerWhenCounterUnsupported) {
  NvmlSampler nvml(9999);
  nvml.add_sample_for_test(sample(0.0, 50, 100, -1));
  nvml.add_sample_for_test(sample(1.0, 50, 300, -1));
  GpuSample gap = sample(1.5, 50, kNaN, -1);  // a failed power query is skipped, not read as 0 W
  gap.has_power = false;
  nvml.add_sample_for_test(gap);
  nvml.add_sample_for_test(sample(3.0, 50, 300, -1));
  GpuSummary s = nvml.summarize(0, 3);
  // Trapezoids: (100+300)/2 * 1 s + 300 * 2 s.
  EXPECT_DOUBLE_EQ(*s.energy_j, 200 + 600);
  EXPECT_NEAR(*s.power_mean_w, 700.0 / 3, 1e-9);
}

TEST(NvmlSampler, UnsupportedFieldsStayEmpty) {
  NvmlSampler nvml(9999);
  for (double t : {0.0, 1.0}) {
    GpuSample g = sample(t, 30, kNaN, -1);
    g.has_power = false;
    g.temp_c = kNaN;
    g.sm_clock_mhz = kNaN;
    nvml.add_sample_for_test(g);
  }
  GpuSummary s = nvml.summarize(0, 1);
  EXPECT_EQ(s.samples, 2);
  EXPECT_DOUBLE_EQ(*s.gpu_util_mean, 30);
  EXPECT_FALSE(s.power_mean_w);
  EXPECT_FALSE(s.power_max_w);
  EXPECT_FALSE(s.energy_j);
  EXPECT_FALSE(s.temp_max_c);
  EXPECT_FALSE(s.sm_clock_mean_mhz);
  // One sample spans no time: no energy, though it has a counter and power.
  NvmlSampler one(9999);
  one.add_sample_for_test(sample(5, 10, 100, 1000));
  GpuSummary o = one.summarize(0, 10);
  EXPECT_EQ(o.samples, 1);
  EXPECT_FALSE(o.energy_j);
  EXPECT_DOUBLE_EQ(*o.power_mean_w, 100);
}

TEST(NvmlSampler, ThrottleNames) {
  EXPECT_EQ(throttle_reason_names(0), "");
  EXPECT_EQ(throttle_reason_names(0x1), "");
  EXPECT_EQ(throttle_reason_names(0x1 | 0x8 | 0x100), "HwSlowdown,DisplayClockSetting");
  EXPECT_EQ(throttle_reason_names(0x2 | 0x10 | 0x20 | 0x80), "ApplicationsClocksSetting,SyncBoost,SwThermalSlowdown,HwPowerBrakeSlowdown");
  EXPECT_EQ(throttle_reason_names(uint64_t(1) << 40), "bit40");
}

// Only where a driver is present (the GPU machines): a short live run gives plausible readings.
TEST(NvmlSampler, LiveSamplesOnGpu) {
  NvmlSampler nvml(0, 20);
  if (!nvml.available()) LOUPE_SKIP_NOT_HERE << nvml.why_unavailable();
  EXPECT_FALSE(nvml.device_name().empty());
  double t0 = NvmlSampler::now();
  nvml.start();
  while (NvmlSampler::now() < t0 + 0.3) {  // summaries while the thread samples: must not race
    EXPECT_LE(nvml.summarize(t0, NvmlSampler::now()).samples, int(nvml.samples().size()));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  nvml.stop();
  double t1 = NvmlSampler::now();
  GpuSummary s = nvml.summarize(t0, t1);
  std::cout << nvml.device_name() << ": " << s.samples << " samples, util " << s.gpu_util_mean.value_or(-1)
            << " %, mem " << s.mem_used_max.value_or(-1) / 1e9 << "/" << s.mem_total.value_or(-1) / 1e9
            << " GB, power " << s.power_mean_w.value_or(-1) << " W, energy " << s.energy_j.value_or(-1)
            << " J, temp " << s.temp_max_c.value_or(-1) << " C, sm " << s.sm_clock_mean_mhz.value_or(-1)
            << " MHz, throttle '" << s.throttle << "'\n";
  EXPECT_GE(s.samples, 5);
  EXPECT_TRUE(s.why.empty());
  ASSERT_TRUE(s.gpu_util_mean);
  EXPECT_GE(*s.gpu_util_mean, 0);
  EXPECT_LE(*s.gpu_util_max, 100);
  ASSERT_TRUE(s.mem_total);
  EXPECT_GT(*s.mem_total, 1e9);
  ASSERT_TRUE(s.temp_max_c);
  EXPECT_GT(*s.temp_max_c, 0);
  if (s.power_mean_w) { EXPECT_GT(*s.power_mean_w, 0); }
  if (s.energy_j) { EXPECT_GE(*s.energy_j, 0); }
}

TEST(HostStats, CpuSecondsGrowWithWork) {
  ProcessStats a = read_process_stats();
  ASSERT_TRUE(a.ok);
  EXPECT_GE(a.cpu_seconds, 0);
  // Burn CPU until /proc shows it (clock ticks are 10 ms), giving up after 10 s of wall time.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  volatile double x = 0;
  ProcessStats b = a;
  while (b.cpu_seconds < a.cpu_seconds + 0.2 && std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 1000000; ++i) x = x + std::sqrt(double(i));
    b = read_process_stats();
  }
  ASSERT_TRUE(b.ok);
  EXPECT_GE(b.cpu_seconds, a.cpu_seconds + 0.2);
}

TEST(HostStats, RssGrowsWhenMemoryIsTouched) {
  ProcessStats a = read_process_stats();
  ASSERT_TRUE(a.ok);
  EXPECT_GT(a.rss_bytes, 0);
  const size_t n = 50u << 20;
  std::unique_ptr<char[]> buf(new char[n]);  // untouched pages are not resident yet
  std::memset(buf.get(), 1, n);
  ProcessStats b = read_process_stats();
  long sum = 0;
  for (size_t i = 0; i < n; i += 4096) sum += buf[i];  // keep the writes observable
  EXPECT_EQ(sum, long(n / 4096));
  ASSERT_TRUE(b.ok);
  EXPECT_GE(b.rss_bytes, a.rss_bytes + 40e6);
}

// A few milliseconds of work register: CLOCK_PROCESS_CPUTIME_ID, not /proc's 10 ms ticks (with
// which an epoch this short read "CPU 0.0 cores").
TEST(HostStats, CpuSecondsResolveMilliseconds) {
  ProcessStats a = read_process_stats();
  ASSERT_TRUE(a.ok);
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(4);
  volatile double x = 0;
  while (std::chrono::steady_clock::now() < until) x = x + 1;
  ProcessStats b = read_process_stats();
  ASSERT_TRUE(b.ok);
  EXPECT_GT(b.cpu_seconds - a.cpu_seconds, 0.0005);  // ticks: 0 or 0.01
  EXPECT_LT(b.cpu_seconds - a.cpu_seconds, 1.0);
}

// The high-water mark keeps memory that was touched and given back.
TEST(HostStats, RssPeakKeepsWhatWasFreed) {
  reset_rss_peak();
  ProcessStats a = read_process_stats();
  ASSERT_TRUE(a.ok);
  ASSERT_FALSE(std::isnan(a.rss_peak_bytes)) << "no VmHWM in /proc/self/status";
  {
    const size_t n = 64u << 20;
    std::unique_ptr<char[]> buf(new char[n]);
    std::memset(buf.get(), 1, n);
    EXPECT_EQ(buf[n - 1], 1);
  }
  ProcessStats b = read_process_stats();
  EXPECT_GE(b.rss_peak_bytes, a.rss_bytes + 50e6);
}

// The epoch's RSS is its peak, evaluation included: memory that evaluation (after end_train,
// before fill) touches and frees counts.
TEST(HostStats, EpochRssIncludesEvaluation) {
  EpochMonitor m(loupe::kCPU, MonitorOptions{});
  m.begin_epoch();
  m.end_train();
  const double after_train = read_process_stats().rss_bytes;
  {
    const size_t n = 64u << 20;  // "evaluation"
    std::unique_ptr<char[]> buf(new char[n]);
    std::memset(buf.get(), 1, n);
    EXPECT_EQ(buf[n / 2], 1);
  }
  EpochReport r;
  m.fill(r);
  ASSERT_TRUE(r.host_rss_bytes.has_value());
  EXPECT_GE(*r.host_rss_bytes, after_train + 50e6);
}

// Each thread's run delay (its time ready to run but waiting for a core), by thread id: this
// thread's is there and none is negative (Linux: /proc/self/task/TID/schedstat).
TEST(ProcessStats, ThreadRunDelays) {
  const std::map<int, double> d = read_thread_run_delays();
  ASSERT_FALSE(d.empty()) << "no /proc/self/task/*/schedstat";
  EXPECT_EQ(d.count(int(::gettid())), 1u);
  for (const auto& [tid, s] : d) EXPECT_GE(s, 0.0) << tid;
  // Every thread, not only the caller: one more, waiting, is there too.
  std::promise<int> started;
  std::promise<void> leave;
  std::thread t([&] {
    started.set_value(int(::gettid()));
    leave.get_future().wait();
  });
  const int other = started.get_future().get();
  const std::map<int, double> with_other = read_thread_run_delays();
  leave.set_value();
  t.join();
  EXPECT_EQ(with_other.count(other), 1u);
}

// The share of ready time spent waiting: 1 s run and 1 s waited is half; nothing to say of nothing.
TEST(ProcessStats, CpuWaitShare) {
  EXPECT_EQ(cpu_wait_share(1.0, 1.0), 0.5);
  EXPECT_EQ(cpu_wait_share(3.0, 1.0), 0.25);
  EXPECT_EQ(cpu_wait_share(2.0, 0.0), 0.0);
  EXPECT_FALSE(cpu_wait_share(0.0, 0.0));
  EXPECT_FALSE(cpu_wait_share(-1.0, 1.0));
}

namespace {

// A made-up cgroup file system (tests/test_util.h) whose CPU quota cores_within_cgroups reads.
struct CgroupTree : loupe::test::FakeCgroups {
  CgroupTree(const std::string& proc, const std::vector<std::pair<std::string, std::string>>& files)
      : FakeCgroups("cgroup_tree", proc, files) {}
  int cores(int affinity) const { return loupe::cores_within_cgroups(affinity, proc(), sys()); }
};

}  // namespace

// cgroup v2 (a container's --cpus, a CI runner's limit): the process's cgroup's cpu.max lowers the
// count, rounded up; a tighter quota in a cgroup above it wins; "max" is no limit; the affinity
// mask binds where it is the smaller.
TEST(UsableCores, ACgroupV2QuotaLowersTheCount) {
  const std::string proc = "0::/ci.slice/job-7\n";
  EXPECT_EQ(CgroupTree(proc, {{"ci.slice/job-7/cpu.max", "150000 100000"}}).cores(8), 2);
  EXPECT_EQ(CgroupTree(proc, {{"ci.slice/job-7/cpu.max", "150000 100000"}}).cores(1), 1);
  EXPECT_EQ(CgroupTree(proc, {{"ci.slice/job-7/cpu.max", "400000 100000"}, {"ci.slice/cpu.max", "300000 200000"}})
                .cores(8), 2) << "the parent's 1.5 cores";
  EXPECT_EQ(CgroupTree(proc, {{"ci.slice/job-7/cpu.max", "max 100000"}, {"cpu.max", "300000 100000"}}).cores(8), 3)
      << "a quota at the root of the tree";
  EXPECT_EQ(CgroupTree(proc, {{"ci.slice/job-7/cpu.max", "max 100000"}, {"ci.slice/cpu.max", "max 100000"}}).cores(6), 6);
  EXPECT_EQ(CgroupTree(proc, {}).cores(5), 5) << "no cpu.max files (the controller not enabled)";
  EXPECT_EQ(CgroupTree("0::/\n", {{"cpu.max", "200000 100000"}}).cores(4), 2) << "the root cgroup itself";
}

// cgroup v1: the cpu controller's line (here co-mounted with cpuacct) names the cgroup under
// cpu/; its quota is cpu.cfs_quota_us over cpu.cfs_period_us, -1 for none; another controller's
// cgroup (cpuset's too) and a v2 line without cpu.max change nothing.
TEST(UsableCores, ACgroupV1QuotaLowersTheCount) {
  const std::string proc = "4:cpu,cpuacct:/docker/abc\n0::/\n";
  EXPECT_EQ(CgroupTree(proc, {{"cpu/docker/abc/cpu.cfs_quota_us", "250000"}, {"cpu/docker/abc/cpu.cfs_period_us", "100000"}})
                .cores(16), 3);
  EXPECT_EQ(CgroupTree(proc, {{"cpu/docker/abc/cpu.cfs_quota_us", "-1"}, {"cpu/docker/abc/cpu.cfs_period_us", "100000"},
                              {"cpu/docker/cpu.cfs_quota_us", "100000"}, {"cpu/docker/cpu.cfs_period_us", "100000"}})
                .cores(16), 1) << "the parent's quota";
  EXPECT_EQ(CgroupTree("5:cpuset:/docker/other\n12:memory:/docker/other\n" + proc,
                       {{"cpu/docker/other/cpu.cfs_quota_us", "100000"}, {"cpu/docker/other/cpu.cfs_period_us", "100000"}})
                .cores(16), 16) << "the cpuset and memory controllers' cgroup is not the cpu controller's";
  EXPECT_EQ(CgroupTree("", {}).cores(3), 3);
  EXPECT_EQ(CgroupTree("", {}).cores(0), 1) << "at least one";
}

