// GPU busy-time plumbing: interval union, the BusyTracker factory (CPU-only or CUDA build, with or
// without a GPU) and the Chrome trace writer.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "loupe.h"
#include "instrument/busy_tracker.h"
#include "instrument/chrome_trace.h"
#include "instrument/intervals.h"
#include "instrument/monitor.h"
#include "instrument/nvml_sampler.h"
#include "skip.h"

namespace loupe::instrument {
namespace {

constexpr uint64_t kAll = ~uint64_t(0);

// On a GPU the monitor reads every thread's run delay on a thread of its own (a 64-core host's 131
// threads took 0.3-0.6 ms at the epoch's edge): the wait of threads that queued for a core during
// the epoch is still counted. Twice as many spinning threads as cores must wait.
TEST(EpochMonitorGpu, CountsTheThreadsWaitReadOffTheMainThread) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)";
  MonitorOptions o;
  o.nvml = false;
  EpochMonitor m(kCUDA, o);
  m.begin_epoch();
  std::atomic<bool> stop{false};
  std::vector<std::thread> spin;
  for (unsigned k = 0; k < 2 * std::max(1u, std::thread::hardware_concurrency()); ++k)
    spin.emplace_back([&] {
      while (!stop.load()) {}
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  m.end_train();  // with the spinning threads alive: a thread that ended takes its delay with it
  EpochReport r;
  m.fill(r);
  stop = true;
  for (std::thread& t : spin) t.join();
  ASSERT_TRUE(r.host_cpu_wait_share.has_value());
  EXPECT_GT(*r.host_cpu_wait_share, 0.1);
  EXPECT_LE(*r.host_cpu_wait_share, 1.0);
}

// GPM on the GPU: an epoch of large GEMMs has SM activity, occupancy and tensor-free figures (fp32:
// no tensor pipe) in the report; a GPU before Hopper, or in MIG mode, says why there are none.
TEST(EpochMonitorGpu, GpmSaysWhatTheSmsDid) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)";
  MonitorOptions o;
  EpochMonitor m(kCUDA, o);
  Tensor a = to(full(Shape{4096, 4096}, 0.001, DType::f32), kCUDA);
  (void)matmul(a, a).to_vector<float>();  // cuBLAS set up before the epoch
  m.begin_epoch();
  const double t0 = instrument::NvmlSampler::now();
  while (instrument::NvmlSampler::now() < t0 + 0.6) {
    Tensor c = a;
    for (int i = 0; i < 20; ++i) c = matmul(c, a);
    cuda_runtime()->synchronize();
  }
  m.end_train();
  EpochReport r;
  m.fill(r);
  if (!r.nvml_why.empty() && !r.gpu_util_mean) LOUPE_SKIP_NOT_HERE << "no NVML: " << r.nvml_why;
  std::cout << "util " << r.gpu_util_mean.value_or(-1) << " %, SM active " << r.gpu_sm_active.value_or(-1)
            << " %, occupancy " << r.gpu_sm_occupancy.value_or(-1) << " %, tensor " << r.gpu_tensor_active.value_or(-1)
            << " %, DRAM " << r.gpu_dram_active.value_or(-1) << " %, graphics " << r.gpu_graphics_active.value_or(-1)
            << " % (" << r.gpm_why << ")\n";
  if (cuda_runtime()->compute_capability() < 90) {
    EXPECT_FALSE(r.gpu_sm_active);
    EXPECT_FALSE(r.gpm_why.empty());
    return;
  }
  ASSERT_TRUE(r.gpu_sm_active) << r.gpm_why;
  EXPECT_TRUE(r.gpm_why.empty()) << r.gpm_why;
  // GEMMs of 4096^3 fill every SM; other tests' processes on the GPU (ctest -j) share it.
  EXPECT_GT(*r.gpu_sm_active, 20);
  EXPECT_LE(*r.gpu_sm_active, *r.gpu_graphics_active + 1) << "SMs are active only while an engine is";
  for (const Opt* v : {&r.gpu_sm_occupancy, &r.gpu_tensor_active, &r.gpu_dram_active, &r.gpu_graphics_active}) {
    ASSERT_TRUE(*v);
    EXPECT_GE(**v, 0);
    EXPECT_LE(**v, 100.5);
  }
  EXPECT_GT(*r.gpu_graphics_active, 50);
}

TEST(UnionLength, EmptyInput) { EXPECT_EQ(union_length({}, 0, kAll), 0u); }

TEST(UnionLength, Disjoint) { EXPECT_EQ(union_length({{0, 10}, {20, 25}, {100, 101}}, 0, kAll), 16u); }

TEST(UnionLength, Overlapping) { EXPECT_EQ(union_length({{0, 10}, {5, 15}, {12, 20}}, 0, kAll), 20u); }

TEST(UnionLength, Nested) { EXPECT_EQ(union_length({{0, 100}, {10, 20}, {30, 40}, {50, 100}}, 0, kAll), 100u); }

TEST(UnionLength, TouchingMergesWithoutDoubleCount) { EXPECT_EQ(union_length({{0, 10}, {10, 20}}, 0, kAll), 20u); }

TEST(UnionLength, Unsorted) {
  // {30,40} U {0,10} U {5,12} U {35,50} U {100,110} = [0,12) + [30,50) + [100,110) = 12 + 20 + 10.
  EXPECT_EQ(union_length({{30, 40}, {0, 10}, {100, 110}, {5, 12}, {35, 50}}, 0, kAll), 42u);
}

TEST(UnionLength, Clipped) {
  std::vector<Interval> v{{0, 10}, {5, 15}, {20, 30}, {40, 50}};
  EXPECT_EQ(union_length(v, 8, 25), 12u);   // [8,15) + [20,25) = 7 + 5
  EXPECT_EQ(union_length(v, 15, 20), 0u);   // a gap
  EXPECT_EQ(union_length(v, 0, 50), 35u);   // 15 + 10 + 10
  EXPECT_EQ(union_length(v, 100, 200), 0u); // after everything
  EXPECT_EQ(union_length(v, 25, 25), 0u);   // empty window
  EXPECT_EQ(union_length(v, 30, 10), 0u);   // inverted window
}

TEST(UnionLength, EmptyAndInvertedIntervalsCountNothing) {
  EXPECT_EQ(union_length({{5, 5}, {9, 3}, {0, 2}}, 0, kAll), 2u);
}

TEST(UnionLength, LargeTimestamps) {
  const uint64_t t = uint64_t(1) << 62;  // CUPTI timestamps are ns since an epoch: large values
  EXPECT_EQ(union_length({{t, t + 1000}, {t + 500, t + 3000}, {t + 5000, t + 5001}}, t + 100, t + 6000), 2901u);
}

// Without a GPU the tracker says why it cannot measure: a CPU-only build has no factory (nullptr
// and the reason); a CUDA build's CUPTI fails in the factory's probe (nullptr and a reason) or in
// start() (a loupe::Error). BusyTrackerGpu.* covers a machine with a GPU.
TEST(BusyTracker, WithoutAGpuSaysWhy) {
  if (cuda_available()) LOUPE_SKIP_NOT_HERE << "a GPU is here: BusyTrackerGpu.MeasuresTheKernelsItRan covers it";
  std::string why;
  std::unique_ptr<BusyTracker> t = make_busy_tracker(&why);
  if (!t) {
    EXPECT_FALSE(why.empty());
    if (cuda_runtime() == nullptr) EXPECT_NE(why.find("without CUDA"), std::string::npos) << why;
    return;
  }
  EXPECT_NE(cuda_runtime(), nullptr) << "a tracker from a CPU-only build";
  try {
    t->start();
    ADD_FAILURE() << "start() worked without a GPU";
  } catch (const Error& e) {
    EXPECT_STRNE(e.what(), "");
  }
}

// With a GPU: the tracker sees the kernels it ran. Busy time after real work is positive and no
// longer than the window, the records name a kernel, and one tracker lives at a time (CUPTI's
// buffers are process-wide). A tracker that measured nothing used to pass here.
TEST(BusyTrackerGpu, MeasuresTheKernelsItRan) {
  if (!cuda_available()) LOUPE_SKIP_NOT_HERE << "no CUDA device (or a CPU-only build)";
  std::string why;
  std::unique_ptr<BusyTracker> t = make_busy_tracker(&why);
  ASSERT_TRUE(t) << why;
  std::string why2;
  EXPECT_EQ(make_busy_tracker(&why2), nullptr) << "CUPTI's buffers are process-wide: one tracker at a time";
  EXPECT_FALSE(why2.empty());
  t->start();
  Tensor a = to(full(Shape{1024, 1024}, 0.5, DType::f32), kCUDA);
  (void)matmul(a, a).to_vector<float>();  // warm-up: cuBLAS's handle and first launch outside the window
  const uint64_t t0 = t->now_ns();
  Tensor c = a;
  for (int i = 0; i < 8; ++i) c = matmul(c, a);
  const std::vector<float> v = c.to_vector<float>();  // waits for the kernels
  const uint64_t t1 = t->now_ns();
  t->flush();
  const uint64_t busy = t->busy_ns(t0, t1);
  EXPECT_GT(busy, 0u) << "8 GEMMs of 1024^3 ran in the window";
  EXPECT_LE(busy, t1 - t0);
  bool kernel = false;
  for (const ActivityRecord& r : t->records(t0, t1)) kernel = kernel || (r.kind == 0 && !r.name.empty());
  EXPECT_TRUE(kernel) << "no kernel record in the window";
  EXPECT_EQ(t->dropped_records(), 0u);
  t->stop();
  t->discard_before(t1);
  EXPECT_EQ(t->busy_ns(t0, t1), 0u) << "records ending before t1 were discarded";
  t.reset();
  std::string why3;
  EXPECT_TRUE(make_busy_tracker(&why3)) << "the slot is free again: " << why3;
}

// Without a place for the reason, the factory gives the same answer (it used to assert nothing).
TEST(BusyTracker, NullWhyIsAllowed) {
  std::string why;
  const bool available = make_busy_tracker(&why) != nullptr;  // destroyed at once: one tracker at a time
  EXPECT_EQ(make_busy_tracker(nullptr) != nullptr, available) << why;
}

// A minimal JSON validator: returns the position after one value, or npos on a syntax error.
size_t skip_ws(const std::string& s, size_t i) {
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return i;
}
size_t parse_value(const std::string& s, size_t i);
size_t parse_string(const std::string& s, size_t i) {
  if (i >= s.size() || s[i] != '"') return std::string::npos;
  for (++i; i < s.size(); ++i) {
    if (s[i] == '"') return i + 1;
    if (static_cast<unsigned char>(s[i]) < 0x20) return std::string::npos;
    if (s[i] == '\\') ++i;
  }
  return std::string::npos;
}
size_t parse_seq(const std::string& s, size_t i, char close, bool keyed) {
  i = skip_ws(s, i + 1);
  if (i < s.size() && s[i] == close) return i + 1;
  while (i != std::string::npos && i < s.size()) {
    if (keyed) {
      i = parse_string(s, skip_ws(s, i));
      if (i == std::string::npos || (i = skip_ws(s, i)) >= s.size() || s[i] != ':') return std::string::npos;
      ++i;
    }
    i = parse_value(s, i);
    if (i == std::string::npos || (i = skip_ws(s, i)) >= s.size()) return std::string::npos;
    if (s[i] == close) return i + 1;
    if (s[i] != ',') return std::string::npos;
    ++i;
  }
  return std::string::npos;
}
size_t parse_value(const std::string& s, size_t i) {
  i = skip_ws(s, i);
  if (i >= s.size()) return std::string::npos;
  if (s[i] == '{') return parse_seq(s, i, '}', true);
  if (s[i] == '[') return parse_seq(s, i, ']', false);
  if (s[i] == '"') return parse_string(s, i);
  for (const char* lit : {"true", "false", "null"})
    if (s.compare(i, std::strlen(lit), lit) == 0) return i + std::strlen(lit);
  size_t j = i;
  while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || (s[j] && std::strchr("+-.eE", s[j])))) ++j;
  return j > i ? j : std::string::npos;
}
bool valid_json(const std::string& s) {
  size_t end = parse_value(s, 0);
  return end != std::string::npos && skip_ws(s, end) == s.size();
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string temp_path(const char* name) { return ::testing::TempDir() + name; }

TEST(ChromeTrace, WritesValidJsonWithEscapedNames) {
  const std::string path = temp_path("loupe_trace_test.json");
  std::vector<TraceEvent> ev{
      {"forward", "host", 0.0, 1234.5, 1, 1, ""},
      {"void gemm<float>(\"tile\" \\ 64)", "gpu", 10.25, 3.125, 2, 7, "{\"grid\":[4,1,1],\"bytes\":1024}"},
      {"line\nbreak\ttab\x01", "gpu", 1e9, 0.001, 2, 8, ""},
  };
  write_chrome_trace(path, ev);
  const std::string s = read_all(path);
  EXPECT_EQ(s.rfind("{\"traceEvents\":[", 0), 0u) << s;
  EXPECT_TRUE(valid_json(s)) << s;
  EXPECT_NE(s.find("\"name\":\"forward\""), std::string::npos);
  EXPECT_NE(s.find("\"ph\":\"X\""), std::string::npos);
  EXPECT_NE(s.find("void gemm<float>(\\\"tile\\\" \\\\ 64)"), std::string::npos) << s;
  EXPECT_NE(s.find("line\\nbreak\\ttab\\u0001"), std::string::npos) << s;
  EXPECT_NE(s.find("\"args\":{\"grid\":[4,1,1],\"bytes\":1024}"), std::string::npos);
  EXPECT_NE(s.find("\"ts\":10.25,\"dur\":3.125"), std::string::npos) << s;  // to the nanosecond, shortest
  EXPECT_NE(s.find("\"ts\":1000000000,\"dur\":0.001"), std::string::npos) << s;
  EXPECT_NE(s.find("\"displayTimeUnit\":\"ms\""), std::string::npos);
  std::remove(path.c_str());
}

TEST(ChromeTrace, EmptyTraceIsValid) {
  const std::string path = temp_path("loupe_trace_empty.json");
  write_chrome_trace(path, {});
  EXPECT_TRUE(valid_json(read_all(path)));
  std::remove(path.c_str());
}

TEST(ChromeTrace, UnwritablePathThrowsNamingIt) {
  const std::string path = "/nonexistent-dir-for-loupe/trace.json";
  try {
    write_chrome_trace(path, {{"a", "b", 0, 1, 0, 0, ""}});
    FAIL() << "expected loupe::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(ChromeTrace, BadEventsThrowAndWriteNothing) {
  const std::string path = temp_path("loupe_trace_bad.json");
  std::remove(path.c_str());
  EXPECT_THROW(write_chrome_trace(path, {{"nan", "c", std::nan(""), 1, 0, 0, ""}}), Error);
  EXPECT_THROW(write_chrome_trace(path, {{"args", "c", 0, 1, 0, 0, "[1,2]"}}), Error);
  EXPECT_FALSE(std::ifstream(path).good());
}

TEST(SplitTime, BoundariesAreTheShortGapsBetweenWork) {
  // [10,20) [22,30) [30,35) [60,70) in [0,100): busy 10+13+10 = 33; gaps 2 (a boundary at max 5),
  // 25 (idle); the head 10 and the tail 30 are idle too.
  std::vector<Interval> v{{60, 70}, {10, 20}, {22, 30}, {30, 35}};
  TimeSplit s = split_time(v, 0, 100, 5);
  EXPECT_EQ(s.busy, 33u);
  EXPECT_EQ(s.boundary, 2u);
  EXPECT_EQ(s.boundaries, 1u);
  EXPECT_EQ(s.idle, 65u);
  EXPECT_EQ(s.busy + s.boundary + s.idle, 100u);
  // A gap of exactly the threshold is idle; clipping cuts the window's edges, not the gaps inside.
  s = split_time(v, 0, 100, 2);
  EXPECT_EQ(s.boundary, 0u);
  EXPECT_EQ(s.idle, 67u);
  s = split_time(v, 15, 65, 30);
  EXPECT_EQ(s.busy, 5u + 13u + 5u);
  EXPECT_EQ(s.boundary, 2u + 25u);
  EXPECT_EQ(s.boundaries, 2u);
  EXPECT_EQ(s.idle, 0u);
  EXPECT_EQ(split_time({}, 0, 50, 5).idle, 50u);
  EXPECT_EQ(split_time(v, 50, 50, 5).idle, 0u);
}

}  // namespace
}  // namespace loupe::instrument
