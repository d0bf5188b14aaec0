// The GPU timeline (--timeline): NVML samples, given to samplers by hand (one, or several merged as
// for --gpus N), and the run's marks through TimelineWriter and EpochMonitor, checked as the exact
// CSV; and through `loupe train` on the CPU, where the file holds the marks only.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "instrument/monitor.h"
#include "instrument/timeline.h"
#include "test_util.h"

using namespace loupe;
using namespace loupe::instrument;

namespace {

using loupe::test::slurp;

GpuSample sample(double t, double util, double mib, double watts, double temp, double clock) {
  GpuSample s;
  s.t = t;
  s.gpu_util = util;
  s.mem_used = mib * 1024 * 1024;
  s.power_w = watts;
  s.has_power = !std::isnan(watts);
  s.temp_c = temp;
  s.sm_clock_mhz = clock;
  return s;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const std::string kHeader =
    "t_s,gpu,util_pct,mem_used_mib,power_w,temp_c,sm_clock_mhz,sm_active_pct,sm_occupancy_pct,tensor_active_pct,"
    "dram_active_pct,mark\n";

}  // namespace

TEST(Timeline, SamplesAndMarksInTimeOrderWrittenAsTheRunGoes) {
  const auto path = test::temp_path("timeline.csv");
  NvmlSampler sampler(0, 50);  // never started: only the samples given here
  {
    TimelineWriter w(path.string(), 100.0, 1, &sampler);
    EXPECT_EQ(slurp(path), kHeader);  // the header at once
    w.mark(100.01, "epoch_start");
    sampler.add_sample_for_test(sample(100.05, 97, 1536, 212.345, 41, 1980));
    sampler.add_sample_for_test(sample(100.1, kNaN, kNaN, kNaN, kNaN, kNaN));  // nothing measured: empty cells
    w.mark(100.08, "eval_start");
    w.mark(100.12, "eval_end");  // after the last sample: waits for the next one
    w.flush();
    EXPECT_EQ(slurp(path), kHeader +
                               "0.010,,,,,,,,,,,epoch_start\n"
                               "0.050,1,97,1536.0,212.345,41,1980,,,,,\n"
                               "0.080,,,,,,,,,,,eval_start\n"
                               "0.100,1,,,,,,,,,,\n");
    sampler.add_sample_for_test(sample(100.15, 0, 0.5, 60, 35, 345));  // measured zeros stay zeros
    w.mark(100.2, "checkpoint");
    w.flush();
    w.mark(100.21, "epoch_end");
    w.finish();  // the marks left, though no sample came after them
  }
  EXPECT_EQ(slurp(path), kHeader +
                             "0.010,,,,,,,,,,,epoch_start\n"
                             "0.050,1,97,1536.0,212.345,41,1980,,,,,\n"
                             "0.080,,,,,,,,,,,eval_start\n"
                             "0.100,1,,,,,,,,,,\n"
                             "0.120,,,,,,,,,,,eval_end\n"
                             "0.150,1,0,0.5,60.000,35,345,,,,,\n"
                             "0.200,,,,,,,,,,,checkpoint\n"
                             "0.210,,,,,,,,,,,epoch_end\n");
  std::filesystem::remove(path);
}

// A sample that closed a GPM interval carries what the SMs did over it; a metric the driver did
// not give is an empty cell.
TEST(Timeline, AGpmIntervalFillsItsSamplesColumns) {
  GpuSample s = sample(100.05, 97, 1536, 212.345, 41, 1980);
  GpmInterval g;
  g.t0 = 99.95;
  g.t1 = 100.05;
  g.sm_active = 40.25;
  g.sm_occupancy = 6;
  g.tensor_active = kNaN;
  g.dram_active = 12.5;
  s.gpm = g;
  EXPECT_EQ(timeline_sample_row(s, 100.0, 0) + "\n", "0.050,0,97,1536.0,212.345,41,1980,40.2,6.0,,12.5,\n");
}

// --gpus N: rank 0's file holds several GPUs, one sampler each. Their rows are merged by time (ties
// by gpu, whichever source came first), and a row is written only once every source has sampled
// past it: a source whose thread is behind may still add rows that go before it.
TEST(Timeline, SeveralSamplersMergedByTimeEachRowOnce) {
  const auto path = test::temp_path("timeline_gpus.csv");
  NvmlSampler a(0, 50), b(1, 50);  // never started: only the samples given here
  auto give = [](NvmlSampler& s, std::initializer_list<double> ts) {
    for (double t : ts) s.add_sample_for_test(sample(t, 50, 100, 200, 40, 1500));
  };
  const std::string row = ",50,100.0,200.000,40,1500,,,,,\n";
  const std::string first = kHeader +
                            "0.000,1" + row +
                            "0.020,,,,,,,,,,,epoch_start\n"
                            "0.050,0" + row +
                            "0.100,1" + row +
                            "0.120,,,,,,,,,,,eval_start\n"
                            "0.150,0" + row;
  {
    TimelineWriter w(path.string(), 100.0, 1, &a);
    w.add_source(&b, 0);
    give(a, {100.0, 100.1, 100.2});
    give(b, {100.05, 100.15});
    w.mark(100.02, "epoch_start");
    w.mark(100.12, "eval_start");
    w.flush();  // b has sampled up to 0.150 only: a's 0.200 waits
    EXPECT_EQ(slurp(path), first);
    give(b, {100.18, 100.3});  // before a's 0.200, which must not be on the file yet
    give(a, {100.3, 100.4});
    w.mark(100.19, "eval_end");
    w.mark(100.35, "checkpoint");  // b has not sampled past it
    w.flush();
    EXPECT_EQ(slurp(path), first +
                               "0.180,0" + row +
                               "0.190,,,,,,,,,,,eval_end\n"
                               "0.200,1" + row +
                               "0.300,0" + row +  // the tie: gpu 0 first
                               "0.300,1" + row);
    w.mark(100.45, "epoch_end");
    w.finish();
  }
  const std::string all = slurp(path);
  EXPECT_EQ(all, first +
                     "0.180,0" + row +
                     "0.190,,,,,,,,,,,eval_end\n"
                     "0.200,1" + row +
                     "0.300,0" + row +
                     "0.300,1" + row +
                     "0.350,,,,,,,,,,,checkpoint\n"
                     "0.400,1" + row +
                     "0.450,,,,,,,,,,,epoch_end\n");
  // Every sample once, with its source's gpu, and every row in time order.
  std::istringstream in(all);
  std::string line;
  std::getline(in, line);
  double last = -1;
  int rows[2] = {0, 0};
  while (std::getline(in, line)) {
    const double t = std::stod(line);
    EXPECT_GE(t, last) << line;
    last = t;
    const std::string gpu = line.substr(line.find(',') + 1, 1);
    if (gpu != ",") ++rows[std::stoi(gpu)];
  }
  EXPECT_EQ(rows[1], 5);  // a's
  EXPECT_EQ(rows[0], 4);  // b's
  std::filesystem::remove(path);
}

// The other GPUs come with NVML only: on the CPU the file holds the marks, as for one rank.
TEST(Timeline, PeersWithoutNvmlLeaveTheMarksOnly) {
  const auto path = test::temp_path("timeline_peers_cpu.csv");
  {
    MonitorOptions opt;
    opt.timeline = path.string();
    opt.timeline_rank = 0;
    opt.timeline_peers = {{1, 1}, {2, 2}};
    EpochMonitor m(kCPU, opt);
    EXPECT_NE(m.timeline_note().find("marks only"), std::string::npos) << m.timeline_note();
    m.mark("epoch_start");
  }
  EXPECT_EQ(slurp(path).substr(kHeader.size()).find(",,,,,,,,,,,epoch_start\n"), 5u) << slurp(path);
  std::filesystem::remove(path);
}

TEST(Timeline, WithoutASamplerMarksAreWrittenAtOnce) {
  const auto path = test::temp_path("timeline_marks.csv");
  TimelineWriter w(path.string(), 10.0, 0, nullptr);
  w.mark(10.5, "epoch_start");
  EXPECT_EQ(slurp(path), kHeader + "0.500,,,,,,,,,,,epoch_start\n");
  std::filesystem::remove(path);
}

TEST(Timeline, AnUnwritablePathIsAnErrorNamingIt) {
  try {
    TimelineWriter w("/nonexistent-dir/t.csv", 0, 0, nullptr);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/t.csv"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--timeline"), std::string::npos) << e.what();
  }
}

// On the CPU the monitor has no sampler: the timeline holds the marks, and says why in its note.
TEST(Timeline, TheMonitorWritesMarksOnTheCpu) {
  const auto path = test::temp_path("timeline_monitor.csv");
  {
    MonitorOptions opt;
    opt.timeline = path.string();
    EpochMonitor m(kCPU, opt);
    EXPECT_NE(m.timeline_note().find("marks only"), std::string::npos) << m.timeline_note();
    EXPECT_NE(m.timeline_note().find("training on the CPU"), std::string::npos) << m.timeline_note();
    for (const char* what : {"epoch_start", "eval_start", "eval_end", "checkpoint", "epoch_end"}) m.mark(what);
    // On the file already, while the run goes on: a killed run keeps them.
    const std::string now = slurp(path);
    EXPECT_NE(now.find(",epoch_end\n"), std::string::npos) << now;
  }
  std::ifstream in(path);
  std::string line, marks;
  std::getline(in, line);
  EXPECT_EQ(line + "\n", kHeader);
  double last = -1;
  while (std::getline(in, line)) {
    const double t = std::stod(line);
    EXPECT_GE(t, last) << line;
    last = t;
    EXPECT_EQ(line.substr(line.find(',')), ",,,,,,,,,,," + line.substr(line.rfind(',') + 1)) << line;
    marks += line.substr(line.rfind(',') + 1) + " ";
  }
  EXPECT_EQ(marks, "epoch_start eval_start eval_end checkpoint epoch_end ");
  std::filesystem::remove(path);
}

// `loupe train --timeline` on the CPU: one line says there are no GPU samples, and the file has each
// epoch's marks, in order.
TEST(Timeline, TrainOnTheCpuWritesTheMarks) {
  const auto csv = test::temp_path("timeline_cli.csv"), ck = test::temp_path("timeline_cli.ck"),
             out = test::temp_path("timeline_cli.out");
  const std::string cmd = std::string(LOUPE_CLI) + " train mnist_mlp --device cpu --synthetic --epochs 2 --max-steps 2 "
                          "--plain --sample-ms 20 --save " + ck.string() + " --timeline " + csv.string() + " > " +
                          out.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  const std::string log = slurp(out);
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << log;
  EXPECT_NE(log.find("timeline " + csv.string() + ": the run's marks only, no GPU samples (training on the CPU)"),
            std::string::npos) << log;
  // The command that draws it, titled with the model (the CSV does not hold it).
  std::string png = csv.string();
  png.replace(png.size() - 4, 4, ".png");
  EXPECT_NE(log.find("timeline draw it: /usr/bin/python3 '"), std::string::npos) << log;
  EXPECT_NE(log.find("plot_timeline.py' '" + csv.string() + "' '" + png + "' --model 'mnist_mlp'\n"), std::string::npos)
      << log;
  std::ifstream in(csv);
  std::string line, marks;
  std::getline(in, line);
  EXPECT_EQ(line + "\n", kHeader);
  while (std::getline(in, line)) marks += line.substr(line.rfind(',') + 1) + " ";
  const std::string epoch = "epoch_start eval_start eval_end checkpoint epoch_end ";
  EXPECT_EQ(marks, epoch + epoch);
  for (const auto& p : {csv, ck, out}) std::filesystem::remove(p);
}
