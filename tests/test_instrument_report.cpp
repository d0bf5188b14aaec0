// The epoch report's outputs (JSON, CSV, console line, progress bar) and the advice rules.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>

#include <unistd.h>

#include "core/error.h"
#include "instrument/advice.h"
#include "instrument/report_io.h"
#include "instrument/run_stamp.h"
#include "skip.h"

using namespace loupe::instrument;
using loupe::Precision;

namespace {

// The JSON schema: every EpochReport field, in declaration order, then advice.
const std::vector<std::string> kFields = {
    "run_id", "started_at", "seed", "lr", "threads", "cpu_model",
    "model", "device", "device_name", "precision", "batch", "epoch", "epochs", "steps", "samples",
    "train_loss", "train_acc", "test_acc", "test_loss", "loss_scale", "skipped_steps", "epoch_seconds", "train_seconds", "eval_seconds",
    "samples_per_sec", "step_ms_p50", "step_ms_p95", "issue_ms_p50", "issue_ms_p95",
    "data_wait_ms_p50", "data_wait_ms_p95", "data_wait_share", "data_gpu_wait_share", "graph_steps", "graph_kernels", "graph_why",
    "flops_per_sample", "achieved_tflops", "peak_tflops", "peak_source", "mfu", "nvml_samples", "nvml_why", "gpu_util_mean", "gpu_util_max",
    "mem_util_mean", "mem_used_max_bytes", "mem_total_bytes", "power_mean_w", "power_max_w", "energy_j",
    "samples_per_joule", "temp_max_c", "sm_clock_mean_mhz", "throttle", "gpu_sm_active", "gpu_sm_occupancy",
    "gpu_tensor_active", "gpu_dram_active", "gpu_graphics_active", "gpm_why", "gpu_busy_share", "gpu_boundary_share",
    "gpu_kernels_per_step", "busy_why", "alloc_peak_bytes", "host_cpu_util", "host_rss_bytes", "host_cpu_wait_share", "cost_epoch", "cost_per_million_samples",
    "rank", "world_size", "world_samples_per_sec", "scaling_efficiency", "allreduce_bytes_per_step", "nccl_share",
    "nccl_exposed_share", "bus_gbps", "slowest_rank", "straggler_share", "advice"};

// The optional (measured) fields: null when unmeasured.
const std::vector<std::string> kOptional = {
    "seed", "lr", "test_acc", "test_loss", "loss_scale", "skipped_steps", "step_ms_p50", "step_ms_p95", "issue_ms_p50", "issue_ms_p95", "data_wait_ms_p50",
    "data_wait_ms_p95", "data_wait_share", "data_gpu_wait_share", "graph_steps", "graph_kernels", "flops_per_sample", "achieved_tflops", "peak_tflops", "mfu",
    "gpu_util_mean", "gpu_util_max", "mem_util_mean", "mem_used_max_bytes", "mem_total_bytes",
    "power_mean_w", "power_max_w", "energy_j", "samples_per_joule", "temp_max_c", "sm_clock_mean_mhz",
    "gpu_sm_active", "gpu_sm_occupancy", "gpu_tensor_active", "gpu_dram_active", "gpu_graphics_active",
    "gpu_busy_share", "gpu_boundary_share", "gpu_kernels_per_step", "alloc_peak_bytes", "host_cpu_util", "host_rss_bytes", "host_cpu_wait_share", "cost_epoch",
    "cost_per_million_samples", "world_samples_per_sec", "scaling_efficiency", "allreduce_bytes_per_step",
    "nccl_share", "nccl_exposed_share", "bus_gbps", "slowest_rank", "straggler_share"};

// EpochReport's members, type by type. When report.h gains a field, the sizes differ: add the
// field to visit_fields in report_io.cpp and to kFields above, then here.
struct ReportShape {
  std::string run[2];
  std::optional<uint64_t> seed;
  Opt lr;
  int threads;
  std::string cpu_model;
  std::string s3[3];
  loupe::Precision precision;
  int64_t batch;
  int i2[2];
  int64_t i64[2];
  double d2[2];
  Opt test[2];
  Opt scaler[2];
  double d4[4];
  Opt time[8];
  Opt graph[2];
  std::string graph_why;
  Opt flops[3];
  std::string peak_source;
  Opt mfu;
  int nvml_samples;
  std::string nvml_why;
  Opt nvml[11];
  std::string throttle;
  Opt gpm[5];
  std::string gpm_why;
  Opt busy[3];
  std::string busy_why;
  Opt rest[6];
  int dp[2];
  Opt dp_opt[8];
  std::vector<std::string> advice;
};
static_assert(sizeof(ReportShape) == sizeof(EpochReport),
              "EpochReport changed: update report_io.cpp's field list and this test's kFields");

EpochReport full_report() {
  EpochReport r;
  r.model = "mnist \"mlp\", v2\nline\\x\t\x01";
  r.device = "cuda:0"; r.device_name = "NVIDIA H200"; r.precision = Precision::FP32;
  r.batch = 512; r.epoch = 3; r.epochs = 20; r.steps = 118; r.samples = 60000;
  r.train_loss = 0.36961234; r.train_acc = 0.8649; r.test_acc = 0.8657; r.test_loss = 0.3712;
  r.epoch_seconds = 0.1416; r.train_seconds = 0.1; r.eval_seconds = 1.0 / 3; r.samples_per_sec = 455114.2;
  r.step_ms_p50 = 0.28; r.step_ms_p95 = 0.35; r.issue_ms_p50 = 0.25; r.issue_ms_p95 = 0.3;
  r.data_wait_ms_p50 = 0.0; r.data_wait_ms_p95 = 1e-7; r.data_wait_share = 0.0; r.data_gpu_wait_share = 0.331;
  r.graph_steps = 117; r.graph_kernels = 61;
  r.flops_per_sample = 2.4e6; r.achieved_tflops = 1.27; r.peak_tflops = 67; r.peak_source = "table: NVIDIA H200 fp32";
  r.mfu = 0.019;
  r.nvml_samples = 14; r.gpu_util_mean = 62; r.gpu_util_max = 80; r.mem_util_mean = 12.5;
  r.mem_used_max_bytes = 1.2 * (1 << 30); r.mem_total_bytes = 150109880320.0;
  r.power_mean_w = 180; r.power_max_w = 240; r.energy_j = 1234.5; r.samples_per_joule = 2300;
  r.temp_max_c = 41; r.sm_clock_mean_mhz = 1980; r.throttle = "";
  r.gpu_sm_active = 40.4; r.gpu_sm_occupancy = 6.2; r.gpu_tensor_active = 0.0; r.gpu_dram_active = 12.5;
  r.gpu_graphics_active = 62.5;
  r.gpu_busy_share = 0.55; r.gpu_boundary_share = 0.05; r.gpu_kernels_per_step = 45;
  r.alloc_peak_bytes = 3.5e8;
  r.host_cpu_util = 1.0; r.host_rss_bytes = 410.0 * (1 << 20);
  r.cost_epoch = 0.000123; r.cost_per_million_samples = 0.002;
  r.advice = {"first, with comma", "second \"quoted\""};
  return r;
}

// The text of a top-level JSON value by key (numbers and null only).
std::string json_value(const std::string& json, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  size_t p = json.find(k);
  if (p == std::string::npos) return "<missing>";
  p += k.size();
  return json.substr(p, json.find_first_of(",}", p) - p);
}

// RFC 4180 splitting of one record (quoted cells may hold commas, quotes and newlines).
std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quoted && c == '"' && i + 1 < s.size() && s[i + 1] == '"') { cells.back() += '"'; ++i; }
    else if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) cells.emplace_back();
    else cells.back() += c;
  }
  return cells;
}

size_t index_of(const std::string& name) {
  return size_t(std::find(kFields.begin(), kFields.end(), name) - kFields.begin());
}

std::string read_all(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += char(c);
  return s;
}

bool any_contains(const std::vector<std::string>& v, const std::string& what) {
  for (const auto& s : v) if (s.find(what) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST(ReportJson, EveryFieldOnceInOrder) {
  const std::string j = to_json(full_report());
  EXPECT_EQ(j.front(), '{');
  EXPECT_EQ(j.back(), '}');
  EXPECT_EQ(j.find('\n'), std::string::npos);  // one line: the model name's newline is escaped
  size_t last = 0;
  for (const auto& f : kFields) {
    const std::string k = "\"" + f + "\":";
    size_t p = j.find(k);
    ASSERT_NE(p, std::string::npos) << f;
    EXPECT_EQ(j.find(k, p + 1), std::string::npos) << f << " twice";
    EXPECT_GT(p, last) << f << " out of order";
    last = p;
  }
}

TEST(ReportJson, UnmeasuredIsNullNeverZero) {
  const std::string j = to_json(EpochReport{});
  for (const auto& f : kOptional) EXPECT_EQ(json_value(j, f), "null") << f;
  EXPECT_EQ(json_value(j, "train_loss"), "0");  // a plain double stays a number
  EXPECT_NE(j.find("\"advice\":[]"), std::string::npos);
  EXPECT_NE(j.find("\"throttle\":\"\""), std::string::npos);
}

TEST(ReportJson, NumbersRoundTrip) {
  const EpochReport r = full_report();
  const std::string j = to_json(r);
  auto back = [&](const std::string& k) { return std::strtod(json_value(j, k).c_str(), nullptr); };
  EXPECT_EQ(back("train_loss"), r.train_loss);
  EXPECT_EQ(back("eval_seconds"), r.eval_seconds);  // 1/3: needs all 17 digits
  EXPECT_EQ(back("train_seconds"), 0.1);
  EXPECT_EQ(back("data_wait_ms_p95"), 1e-7);
  EXPECT_EQ(back("mem_total_bytes"), 150109880320.0);
  EXPECT_EQ(back("mfu"), 0.019);
  EXPECT_EQ(json_value(j, "data_wait_share"), "0");  // measured zero stays 0
  EXPECT_EQ(json_value(j, "samples"), "60000");
  EXPECT_EQ(json_value(j, "nvml_samples"), "14");
}

TEST(ReportJson, StringsEscapedAndNonFiniteNull) {
  EpochReport r = full_report();
  r.train_loss = std::numeric_limits<double>::quiet_NaN();
  r.achieved_tflops = std::numeric_limits<double>::infinity();
  const std::string j = to_json(r);
  EXPECT_NE(j.find(R"("model":"mnist \"mlp\", v2\nline\\x\t\u0001")"), std::string::npos) << j;
  EXPECT_NE(j.find(R"("advice":["first, with comma","second \"quoted\""])"), std::string::npos);
  EXPECT_EQ(json_value(j, "train_loss"), "null");  // JSON has no NaN
  EXPECT_EQ(json_value(j, "achieved_tflops"), "null");
}

// The reader gives back every field the writer wrote: its JSON again is the same line.
TEST(ReportJson, ReadBackWhole) {
  EpochReport r = full_report();
  r.seed = 18446744073709551557ull;  // past 2^53: exact
  r.precision = Precision::BF16;
  r.train_loss = std::numeric_limits<double>::quiet_NaN();  // written as null, back as NaN
  const EpochReport back = report_from_json(to_json(r));
  EXPECT_EQ(to_json(back), to_json(r));
  EXPECT_EQ(back.seed, r.seed);
  EXPECT_EQ(back.precision, Precision::BF16);
  EXPECT_EQ(back.model, r.model);
  EXPECT_EQ(back.eval_seconds, r.eval_seconds);
  EXPECT_TRUE(std::isnan(back.train_loss));
  EXPECT_FALSE(back.skipped_steps.has_value());
  EXPECT_EQ(back.advice, r.advice);
  EXPECT_EQ(to_json(report_from_json(to_json(EpochReport{}))), to_json(EpochReport{}));
}

TEST(ReportJson, ReaderSaysWhatIsWrong) {
  auto error_of = [](const std::string& line) {
    try {
      report_from_json(line);
    } catch (const loupe::Error& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_NE(error_of("{\"epoch\": 1").find("not a JSON record"), std::string::npos);
  EXPECT_NE(error_of("[1]").find("an object"), std::string::npos);
  std::string j = to_json(full_report());
  EXPECT_NE(error_of(std::string(j).replace(j.find("\"batch\":512"), 11, "\"batch\":\"x\"")).find("'batch' is not a whole number"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(j).replace(j.find("\"mfu\":"), 6, "\"mfx\":")).find("no field 'mfu'"), std::string::npos);
  EXPECT_NE(error_of(std::string(j).replace(j.find("\"fp32\""), 6, "\"fp8\"")).find("fp8"), std::string::npos);
  EXPECT_NE(error_of(std::string(j).replace(j.find("\"advice\":["), 10, "\"advice\":7,\"x\":[")).find("'advice' is not a list"),
            std::string::npos);
}

TEST(ReportCsv, HeaderAndRowsAgree) {
  const auto header = split_csv(csv_header());
  ASSERT_EQ(header, kFields);
  const EpochReport full = full_report();
  const auto row = split_csv(to_csv_row(full));
  ASSERT_EQ(row.size(), header.size());
  EXPECT_EQ(row[index_of("model")], full.model);  // quoting survives commas, quotes, newlines
  EXPECT_EQ(row[index_of("advice")], "first, with comma | second \"quoted\"");
  EXPECT_EQ(std::strtod(row[index_of("eval_seconds")].c_str(), nullptr), full.eval_seconds);
  EXPECT_EQ(row[index_of("data_wait_share")], "0");

  const auto empty = split_csv(to_csv_row(EpochReport{}));
  ASSERT_EQ(empty.size(), header.size());
  for (const auto& f : kOptional) EXPECT_EQ(empty[index_of(f)], "") << f;
  EXPECT_EQ(empty[index_of("train_loss")], "0");
}

// A write refused mid-run (the file-size limit here, as `ulimit -f` would) names the option that
// named the file, as the checks at the start do.
TEST(ReportWriters, AMidRunWriteErrorNamesItsOption) {
  const std::string jp = ::testing::TempDir() + "loupe_fsize.jsonl";
  JsonlWriter jw(jp, JsonlWriter::Mode::Truncate, "--metrics");
  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto prev = signal(SIGXFSZ, SIG_IGN);
  struct rlimit lim = old;
  lim.rlim_cur = 100;  // bytes: a record is far longer
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  std::string what;
  try {
    jw.write(full_report());
  } catch (const loupe::Error& e) {
    what = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, prev);
  EXPECT_NE(what.find("--metrics: cannot write '" + jp + "': File too large"), std::string::npos) << what;
  std::remove(jp.c_str());
}

// Every record of one process carries the same run id and start, and the host's CPU model; a
// seed is written whole (a double would round one past 2^53).
TEST(RunStamp, OneIdPerProcessAndTheCpuModel) {
  const RunStamp& a = run_stamp();
  EXPECT_EQ(&a, &run_stamp());
  EXPECT_EQ(a.run_id.size(), 12u);
  EXPECT_EQ(a.run_id.find_first_not_of("0123456789abcdef"), std::string::npos) << a.run_id;
  ASSERT_EQ(a.started_at.size(), 20u) << a.started_at;  // 2026-11-26T11:40:32Z
  EXPECT_EQ(a.started_at[10], 'T');
  EXPECT_EQ(a.started_at.back(), 'Z');
  EXPECT_EQ(cpu_model_in("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Processor\n"
                         "model name\t: other\n"),
            "Intel(R) Xeon(R) Processor");
  EXPECT_EQ(cpu_model_in("processor : 0\nBogoMIPS : 50.00\n"), "");  // an ARM host names none this way
  EpochReport r;
  r.seed = 9223372036854775807ull;
  EXPECT_NE(to_json(r).find("\"seed\":9223372036854775807,"), std::string::npos) << to_json(r);
}

TEST(ReportWriters, FilesAndErrors) {
  const std::string jp = ::testing::TempDir() + "loupe_report.jsonl", cp = ::testing::TempDir() + "loupe_report.csv";
  {
    JsonlWriter jw(jp);
    CsvWriter cw(cp);
    jw.write(full_report());
    jw.write(EpochReport{});
    cw.write(EpochReport{});
    // Flushed per line: readable before the writers close.
    std::ifstream j(jp), c(cp);
    std::string line;
    int n = 0;
    while (std::getline(j, line)) ++n;
    EXPECT_EQ(n, 2);
    std::getline(c, line);
    EXPECT_EQ(line, csv_header());
  }
  {
    JsonlWriter more(jp, JsonlWriter::Mode::Append);  // loupe train --metrics: after what is there
    more.write(EpochReport{});
  }
  std::ifstream j3(jp);
  std::string line;
  int n = 0;
  while (std::getline(j3, line)) ++n;
  EXPECT_EQ(n, 3);
  JsonlWriter again(jp);  // truncates (the default: loupe bench --json)
  std::ifstream j(jp);
  EXPECT_EQ(j.peek(), EOF);
  try {
    JsonlWriter bad("/nonexistent-dir/x.jsonl");
    FAIL() << "expected loupe::Error";
  } catch (const loupe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir/x.jsonl"), std::string::npos);
  }
  EXPECT_THROW(CsvWriter("/nonexistent-dir/x.csv"), loupe::Error);
}

TEST(EpochLine, MeasuredFigures) {
  EpochReport r = full_report();
  r.advice = {"a", "b"};
  const std::string s = epoch_line(r);
  EXPECT_EQ(s.find("epoch  3/20  loss 0.3696  train acc 86.49%  test loss 0.3712  test acc 86.57%  0.142 s  455,114 samples/s"),
            0u)
      << s;
  for (const char* part : {"GPU util 62% (max 80)  SM active 40% (occupancy 6%, tensor 0%, DRAM 12%)", "busy 55.0%", "MFU 1.9% of 67 TFLOP/s fp32",
                           "mem 1.2/139.8 GiB", "power 180 W", "1.23 kJ", "2,300 samples/J",
                           "step p50 0.28 ms p95 0.35 ms  CUDA graph 117/118 steps (61 kernels)",
                           "host issue 0.25 ms", "data wait 0.0% (ahead of the GPU 33.1%)",
                           "CPU 1.0 cores", "RSS 410 MiB", "\n  advice: a\n  advice: b"})
    EXPECT_NE(s.find(part), std::string::npos) << part << "\n" << s;
  EXPECT_EQ(s.find("n/a"), std::string::npos) << s;
  EXPECT_NE(s.back(), '\n');
}

// A regression's epoch (mean squared error): no accuracy, so the line names the losses alone, and
// the records hold null (JSON) for both accuracies.
TEST(EpochLine, ARegressionHasNoAccuracy) {
  EpochReport r = full_report();
  r.train_acc = std::nan("");
  r.test_acc.reset();
  const std::string s = epoch_line(r);
  EXPECT_EQ(s.find("epoch  3/20  loss 0.3696  test loss 0.3712  0.142 s  455,114 samples/s"), 0u) << s;
  EXPECT_EQ(s.find("acc"), std::string::npos) << s;
  const std::string j = to_json(r);
  EXPECT_NE(j.find("\"train_acc\":null"), std::string::npos) << j;
  EXPECT_NE(j.find("\"test_acc\":null"), std::string::npos) << j;
}

TEST(EpochLine, UnmeasuredIsNa) {
  EpochReport r;
  r.epoch = 1; r.epochs = 2;
  r.nvml_why = "NVML not available";
  const std::string s = epoch_line(r);
  for (const char* part : {"test acc n/a", "GPU util n/a (NVML not available)", "busy n/a", "MFU n/a",
                           "mem n/a", "power n/a  energy n/a", "step p50 n/a", "host issue n/a", "data wait n/a",
                           "CPU n/a", "RSS n/a"})
    EXPECT_NE(s.find(part), std::string::npos) << part << "\n" << s;
  for (const char* zero : {"util 0", "busy 0", "MFU 0", "mem 0", "power 0", "wait 0", "CPU 0", "RSS 0"})
    EXPECT_EQ(s.find(zero), std::string::npos) << zero << "\n" << s;  // unmeasured never shows as 0
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 2);
  EXPECT_EQ(s.find("graph"), std::string::npos) << s;  // nothing said of graphs when nothing is known
  r.graph_steps = 0;
  r.graph_why = "CUDA graphs are a GPU feature";
  EXPECT_NE(epoch_line(r).find("step p50 n/a p95 n/a  eager (CUDA graphs are a GPU feature)"), std::string::npos)
      << epoch_line(r);
}

TEST(ProgressBarTest, SilentWhenNotATerminal) {
  std::FILE* f = std::tmpfile();
  ProgressBar bar(1, 5, 100, /*is_tty=*/false, f);
  for (int i = 1; i <= 100; ++i) bar.update(i, i * 0.5, i * 64, 1.0);
  bar.finish();
  EXPECT_EQ(read_all(f), "");
  EXPECT_EQ(bar.redraws(), 0);
  std::fclose(f);
}

TEST(ProgressBarTest, ThrottlesRedrawsOnATerminal) {
  std::FILE* f = std::tmpfile();
  ProgressBar bar(2, 5, 1000, /*is_tty=*/true, f, /*columns=*/120);  // wide enough for the 30-cell bar
  for (int i = 1; i <= 1000; ++i) bar.update(i, i * 0.001, i * 64, i < 500 ? std::nullopt : std::optional<double>(0.25));
  // 1 s of steps: the first draw, ~one per 0.1 s, and the final step.
  EXPECT_GE(bar.redraws(), 10);
  EXPECT_LE(bar.redraws(), 12);
  const std::string line = bar.last_line();
  EXPECT_NE(line.find("1000/1000 [=============================="), std::string::npos) << line;
  EXPECT_NE(line.find("loss 0.2500"), std::string::npos) << line;
  EXPECT_NE(line.find("64,000 samples/s"), std::string::npos) << line;
  bar.finish();
  const std::string out = read_all(f);
  EXPECT_EQ(out.find('\n'), std::string::npos);  // one line, rewritten with '\r'
  EXPECT_EQ(out.back(), '\r');                   // cleared for the epoch summary
  std::fclose(f);

  f = std::tmpfile();
  ProgressBar mid(1, 1, 100, true, f);
  mid.update(25, 1.0, 1600, std::nullopt);
  EXPECT_NE(mid.last_line().find("ETA 3s  loss n/a  1,600 samples/s"), std::string::npos) << mid.last_line();
  std::fclose(f);
}

// A CPU run prints what it measured: no device line of n/a (the records keep those fields, null),
// no "eager (CUDA graphs are a GPU feature)", and its FLOP rate on the host line.
TEST(EpochLine, CpuRunPrintsOnlyWhatItMeasured) {
  EpochReport r;
  r.device = "cpu"; r.device_name = "CPU"; r.epoch = 1; r.epochs = 3;
  r.test_acc = 0.5; r.epoch_seconds = 1; r.samples_per_sec = 6000;
  r.step_ms_p50 = 20; r.step_ms_p95 = 30; r.issue_ms_p50 = 19; r.data_wait_share = 0.001;
  r.host_cpu_util = 1.5; r.host_rss_bytes = 100.0 * (1 << 20);
  r.achieved_tflops = 0.0175;
  r.graph_steps = 0; r.graph_why = "CUDA graphs are a GPU feature";
  r.nvml_why = "training on the CPU";
  r.advice = {"CPU run: no GPU figures"};
  const std::string s = epoch_line(r);
  EXPECT_EQ(s.find("n/a"), std::string::npos) << s;
  EXPECT_EQ(s.find("GPU util"), std::string::npos) << s;
  EXPECT_EQ(s.find("eager"), std::string::npos) << s;
  EXPECT_EQ(s.find("host issue"), std::string::npos) << s;  // on the CPU it is the step again
  EXPECT_NE(s.find("\n  step p50 20 ms p95 30 ms  data wait 0.10%  CPU 1.5 cores  RSS 100 MiB  "
                   "17.5 GFLOP/s\n  advice: CPU run: no GPU figures"),
            std::string::npos)
      << s;
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 2);
  // Time its threads waited for a core, beside the cores it used, once it is half a percent or more.
  r.host_cpu_wait_share = 0.371;
  EXPECT_NE(epoch_line(r).find("CPU 1.5 cores (waited 37.1% for a core)  RSS"), std::string::npos) << epoch_line(r);
  r.host_cpu_wait_share = 0.004;
  EXPECT_NE(epoch_line(r).find("CPU 1.5 cores  RSS"), std::string::npos) << epoch_line(r);
  r.host_cpu_wait_share.reset();
  // The files keep every field: null where unmeasured.
  const std::string j = to_json(r);
  for (const char* f : {"\"gpu_util_mean\":null", "\"mem_used_max_bytes\":null", "\"power_mean_w\":null",
                        "\"mfu\":null", "\"graph_why\":\"CUDA graphs are a GPU feature\""})
    EXPECT_NE(j.find(f), std::string::npos) << f << "\n" << j;
}

// Advice is printed once; an epoch with the same advice (other figures in it allowed) gets one
// line saying so; changed advice is printed again, and so is advice that comes back.
TEST(EpochConsoleTest, AdviceOnceThenOnlyWhenItChanges) {
  EpochConsole console;
  EpochReport r;
  r.device = "cpu"; r.epochs = 5;
  auto printed = [&](int epoch, std::vector<std::string> advice) {
    r.epoch = epoch;
    r.advice = std::move(advice);
    return console.lines(r);
  };
  std::string s = printed(1, {"input pipeline: waited 41% of the time", "CPU run: no GPU figures"});
  EXPECT_NE(s.find("\n  advice: input pipeline: waited 41% of the time\n  advice: CPU run: no GPU figures"),
            std::string::npos) << s;
  s = printed(2, {"input pipeline: waited 38% of the time", "CPU run: no GPU figures"});
  EXPECT_EQ(s.find("advice:"), std::string::npos) << s;
  EXPECT_NE(s.find("\n  advice unchanged since epoch 1"), std::string::npos) << s;
  EXPECT_EQ(s.substr(s.rfind('\n')), "\n  advice unchanged since epoch 1") << s;
  s = printed(3, {"CPU run: no GPU figures"});
  EXPECT_NE(s.find("\n  advice: CPU run: no GPU figures"), std::string::npos) << s;
  EXPECT_EQ(s.find("input pipeline"), std::string::npos) << s;
  s = printed(4, {});
  EXPECT_EQ(s.find("advice"), std::string::npos) << s;
  s = printed(5, {"CPU run: no GPU figures"});
  EXPECT_NE(s.find("\n  advice: CPU run: no GPU figures"), std::string::npos) << s;
}

// The bar fits the terminal: at most columns - 1 characters (a full-width line wraps on some
// terminals), drawn through the same ProgressBar::update the trainer calls, with the essential
// fields (step/total, ETA or time, loss) kept as the width shrinks.
TEST(ProgressBarTest, FitsTheTerminalWidth) {
  struct State { int epoch, epochs; int64_t step, total; double elapsed; int64_t samples; std::optional<double> loss; };
  const State states[] = {
      {1, 20, 1, 469, 0.05, 128, std::nullopt},                     // first draw
      {3, 20, 234, 469, 1.7, 234 * 128, 0.4123},                    // mid-epoch
      {10, 10, 469, 469, 3.21, 60000, 0.2500},                      // the final step
      {100, 100, 29999, 60000, 4000.0, 29999LL * 32, 1234.5678},    // long fields: an hour's ETA
      {1, 1, 12, 60000, 0.001, 12LL * 1048576, 2.0},                // 12 billion samples/s
  };
  for (int columns : {120, 80, 60, 40, 20}) {
    for (const State& st : states) {
      std::FILE* f = std::tmpfile();
      ProgressBar bar(st.epoch, st.epochs, st.total, /*is_tty=*/true, f, columns);
      bar.update(st.step, st.elapsed, st.samples, st.loss);
      const std::string line = bar.last_line();
      EXPECT_EQ(line, progress_line(st.epoch, st.epochs, st.step, st.total, st.elapsed, st.samples, st.loss, columns));
      EXPECT_LE(line.size(), size_t(columns - 1)) << columns << ": " << line;
      EXPECT_EQ(read_all(f), "\r" + line);
      std::fclose(f);
      const std::string count = std::to_string(st.step) + "/" + std::to_string(st.total);
      EXPECT_NE(line.find(count), std::string::npos) << columns << ": " << line;
      if (columns >= 40) {
        EXPECT_NE(line.find(st.step == st.total ? " s" : "ETA"), std::string::npos) << columns << ": " << line;
        EXPECT_NE(line.find("loss "), std::string::npos) << columns << ": " << line;
      }
      if (columns >= 80) {
        EXPECT_NE(line.find("epoch " + std::to_string(st.epoch) + "/"), std::string::npos) << line;
        EXPECT_NE(line.find("["), std::string::npos) << line;
        EXPECT_NE(line.find("]"), std::string::npos) << line;
      }
      if (columns >= 120) {
        EXPECT_NE(line.find(" samples/s"), std::string::npos) << line;
      }
    }
  }
  // At 80 columns a typical mid-epoch line keeps every field, with a narrower bar.
  const std::string at80 = progress_line(3, 20, 234, 469, 1.7, 234 * 128, 0.4123, 80);
  EXPECT_EQ(at80.rfind("epoch 3/20 234/469 [", 0), 0u) << at80;
  EXPECT_NE(at80.find("] ETA 2s  loss 0.4123  17,619 samples/s"), std::string::npos) << at80;
  EXPECT_EQ(at80.size(), 79u) << at80;  // the bar takes what is left
}

// Redraws pad over a longer previous line, but never past the last column.
TEST(ProgressBarTest, RedrawsStayInsideTheWidth) {
  std::FILE* f = std::tmpfile();
  ProgressBar bar(1, 1, 1000, true, f, 60);
  for (int i = 1; i <= 1000; ++i) bar.update(i, i * 0.01, i * 64LL * 1024, i % 2 ? 0.5 : 12345.678);
  bar.finish();
  const std::string out = read_all(f);
  size_t from = 0;
  int draws = 0;
  while ((from = out.find('\r', from)) != std::string::npos) {
    size_t to = out.find('\r', from + 1);
    const std::string seg = out.substr(from + 1, to == std::string::npos ? std::string::npos : to - from - 1);
    EXPECT_LE(seg.size(), 59u) << seg;
    ++draws;
    from = from + 1;
  }
  EXPECT_GE(draws, 10);
  std::fclose(f);
}

// Where neither stdout nor stderr is a terminal, $COLUMNS, else 80.
TEST(ProgressBarTest, TerminalColumnsFallBackToColumnsThen80) {
  if (isatty(fileno(stderr))) LOUPE_SKIP_NOT_HERE << "stderr is a terminal: its width wins";
  std::FILE* f = std::tmpfile();
  const char* saved = std::getenv("COLUMNS");
  const std::string keep = saved ? saved : "";
  setenv("COLUMNS", "132", 1);
  EXPECT_EQ(terminal_columns(f), 132);
  setenv("COLUMNS", "wide", 1);
  EXPECT_EQ(terminal_columns(f), 80);
  unsetenv("COLUMNS");
  EXPECT_EQ(terminal_columns(f), 80);
  if (saved) setenv("COLUMNS", keep.c_str(), 1);
  std::fclose(f);
}

// ---- advice ----------------------------------------------------------------------------------

namespace {
EpochReport gpu_report(double util, double step_ms, double issue_ms, double wait) {
  EpochReport r;
  r.gpu_util_mean = util * 100; r.gpu_util_max = util * 100;
  r.step_ms_p50 = step_ms; r.issue_ms_p50 = issue_ms; r.data_wait_share = wait;
  r.mem_used_max_bytes = 40.0 * (1 << 30); r.mem_total_bytes = 80.0 * (1 << 30);
  return r;
}
const AdviceInputs kH100{true, true, Precision::FP16, 512};
}  // namespace

TEST(Advice, LaunchBound) {
  const auto a = advise(gpu_report(0.10, 0.28, 0.27, 0.0), kH100);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a[0].rfind("launch-bound", 0), 0u) << a[0];
  EXPECT_NE(a[0].find("10%"), std::string::npos);
  EXPECT_NE(a[0].find("--batch"), std::string::npos);
}

// An epoch of a few steps (a Keras file's 64 images at batch 32: 2) is its warm-up and the loader's
// start: no bottleneck is told from it, only that it is too short to tell one; ten steps or more are
// judged as before, and so is an unknown step count.
TEST(Advice, AFewStepsTellNoBottleneck) {
  EpochReport r = gpu_report(0.0, 119.0, 119.0, 0.002);
  r.steps = 2;
  auto a = advise(r, {true, true, Precision::FP32, 32});
  EXPECT_FALSE(any_contains(a, "launch-bound")) << a[0];
  EXPECT_TRUE(any_contains(a, "only 2 steps in this epoch: too few to tell a bottleneck")) << a[0];
  EXPECT_TRUE(any_contains(a, "a smaller --batch than 32"));
  r.steps = 10;
  EXPECT_TRUE(any_contains(advise(r, {true, true, Precision::FP32, 32}), "launch-bound"));
  r.steps = 2;
  r.world_size = 2;  // a world's short epochs have their own advice
  EXPECT_FALSE(any_contains(advise(r, {true, true, Precision::FP32, 32}), "too few to tell"));
}

TEST(Advice, BusyGpuIsNotLaunchBound) {
  // batch 8192: the GPU is busy 95%, the host issues in a fraction of the step.
  EpochReport r = gpu_report(0.95, 20.0, 0.5, 0.0);
  const auto a = advise(r, {true, true, Precision::FP16, 8192});
  EXPECT_FALSE(any_contains(a, "launch-bound"));
  ASSERT_FALSE(a.empty());
  EXPECT_NE(a[0].find("the GPU is the bottleneck (busy 95%)"), std::string::npos);
  // CUPTI busy time, when measured, wins over NVML's sampled utilisation.
  r.gpu_busy_share = 0.2;
  r.issue_ms_p50 = 19.0;
  EXPECT_TRUE(any_contains(advise(r, kH100), "launch-bound: the GPU was busy only 20%"));
}

TEST(Advice, DataStarved) {
  const auto a = advise(gpu_report(0.30, 2.0, 0.3, 0.45), kH100);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a[0].rfind("input pipeline", 0), 0u) << a[0];
  EXPECT_NE(a[0].find("45%"), std::string::npos);
  EXPECT_FALSE(any_contains(a, "launch-bound"));
}

TEST(Advice, CommunicationBoundFirst) {
  EpochReport r = gpu_report(0.95, 20.0, 0.5, 0.0);
  r.gpu_busy_share = 0.95;
  r.world_size = 2;
  r.nccl_share = 0.4;
  r.nccl_exposed_share = 0.3;
  r.bus_gbps = 12.5;
  auto a = advise(r, kH100);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a[0].rfind("communication-bound: for 30%", 0), 0u) << a[0];
  EXPECT_NE(a[0].find("--batch than 512"), std::string::npos) << a[0];
  EXPECT_NE(a[0].find("LOUPE_DDP_BUCKET_MB"), std::string::npos) << a[0];
  EXPECT_NE(a[0].find("12.5 GB/s"), std::string::npos) << a[0];
  r.nccl_exposed_share = 0.05;  // hidden behind backward: not the bottleneck
  EXPECT_FALSE(any_contains(advise(r, kH100), "communication-bound"));
  r.nccl_exposed_share = 0.3;
  r.world_size = 1;  // one process: no such advice whatever the figures
  EXPECT_FALSE(any_contains(advise(r, kH100), "communication-bound"));
}

// A world whose epoch is only a few global steps (mnist_mlp on four GPUs at 1024 each: 14) is told
// so, and that a larger batch shortens it further; 20 steps or more, or one process, say nothing.
TEST(Advice, ShortEpochsOfAWorld) {
  EpochReport r = gpu_report(0.95, 20.0, 0.5, 0.0);
  r.world_size = 4;
  r.steps = 14;
  auto a = advise(r, kH100);
  EXPECT_TRUE(any_contains(a, "short epochs: each is only 14 global steps of 4 GPUs x 512, so what comes once an "
                              "epoch"));
  EXPECT_TRUE(any_contains(a, "a larger --batch makes it shorter still"));
  r.nccl_share = 0.4;  // communication-bound too: no larger batch suggested there on short epochs
  r.nccl_exposed_share = 0.3;
  a = advise(r, kH100);
  EXPECT_TRUE(any_contains(a, "communication-bound: for 30% of the training time the GPU only ran NCCL's "
                              "all-reduces; fewer and larger buckets"));
  EXPECT_FALSE(any_contains(a, "a larger per-GPU --batch"));
  r.steps = 20;
  EXPECT_TRUE(any_contains(advise(r, kH100), "a larger per-GPU --batch than 512"));
  EXPECT_FALSE(any_contains(advise(r, kH100), "short epochs"));
  r.steps = 14;
  r.world_size = 1;
  EXPECT_FALSE(any_contains(advise(r, kH100), "short epochs"));
}

TEST(Advice, NoNvmlNoGpuAdvice) {
  EpochReport r;  // NVML and CUPTI figures all unmeasured; host figures say "launch-bound"-like
  r.step_ms_p50 = 0.28; r.issue_ms_p50 = 0.27; r.data_wait_share = 0.0;
  EXPECT_TRUE(advise(r, {true, false, Precision::FP32, 512}).empty());
}

TEST(Advice, CpuRunOnlyNotesNa) {
  EpochReport r = gpu_report(0.1, 0.28, 0.27, 0.0);  // even if GPU-looking figures leaked in
  r.mem_used_max_bytes = 1.0;
  auto a = advise(r, {false, false, Precision::FP32, 64});
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].rfind("CPU run: no GPU figures", 0), 0u) << a[0];
  r.data_wait_share = 0.3;
  a = advise(r, {false, false, Precision::FP32, 64});
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0].rfind("input pipeline", 0), 0u);
  EXPECT_EQ(a[0].find("GPU"), std::string::npos) << a[0];
}

TEST(Advice, MemoryHeadroom) {
  EpochReport r = gpu_report(0.6, 2.0, 0.5, 0.0);
  EXPECT_FALSE(any_contains(advise(r, kH100), "memory"));  // 40 of 80 GiB used
  r.mem_used_max_bytes = 10.0 * (1 << 30);
  EXPECT_TRUE(any_contains(advise(r, kH100), "most device memory is free (10.0 of 80.0 GiB used)"));
  r.mem_total_bytes.reset();
  EXPECT_FALSE(any_contains(advise(r, kH100), "memory"));
}

TEST(Advice, Fp32OnlyWithTensorCores) {
  const EpochReport r = gpu_report(0.95, 20.0, 0.5, 0.0);
  EXPECT_TRUE(any_contains(advise(r, {true, true, Precision::FP32, 512}), "--precision fp16 or bf16"));
  EXPECT_TRUE(any_contains(advise(r, {true, true, Precision::TF32, 512}), "--precision fp16 or bf16"));
  EXPECT_FALSE(any_contains(advise(r, {true, false, Precision::FP32, 512}), "--precision"));
  EXPECT_FALSE(any_contains(advise(r, {true, true, Precision::BF16, 512}), "--precision"));
  // Little arithmetic (imdb_fasttext's 0.5 % MFU): 16 bits would not help, and the advice says so.
  EpochReport low = r;
  low.mfu = 0.005;
  EXPECT_FALSE(any_contains(advise(low, {true, true, Precision::FP32, 512}), "try --precision"));
  EXPECT_TRUE(any_contains(advise(low, {true, true, Precision::FP32, 512}), "fp32 at 0.5% MFU: the step moves memory more than it computes"));
  low.mfu = 0.2;
  EXPECT_TRUE(any_contains(advise(low, {true, true, Precision::FP32, 512}), "try --precision fp16 or bf16"));
  // Launch-bound: faster arithmetic would not help, so the bottleneck advice stands alone.
  EXPECT_FALSE(any_contains(advise(gpu_report(0.1, 0.28, 0.27, 0.0), {true, true, Precision::FP32, 512}), "--precision"));
}

TEST(Advice, Throttling) {
  EpochReport r = gpu_report(0.95, 20.0, 0.5, 0.0);
  r.throttle = "hw_thermal";
  const auto a = advise(r, kH100);
  ASSERT_GE(a.size(), 2u);
  EXPECT_NE(a[1].find("throttled (hw_thermal)"), std::string::npos) << a[1];
}

TEST(Advice, NvmlOnlyHostIssuingIsProbablyLaunchBound) {
  // mnist_mlp at batch 128 on an H200: NVML read 78% while the host issued for 96% of each step.
  const auto a = advise(gpu_report(0.78, 0.251, 0.24, 0.0), {true, true, Precision::FP32, 128});
  EXPECT_TRUE(any_contains(a, "probably launch-bound")) << (a.empty() ? "" : a[0]);
  EXPECT_TRUE(any_contains(a, "--busy"));
  // Measured busy time replaces the guess with the measured rule.
  EpochReport r = gpu_report(0.78, 0.251, 0.24, 0.0);
  r.gpu_busy_share = 0.45;
  EXPECT_FALSE(any_contains(advise(r, kH100), "probably"));
  EXPECT_TRUE(any_contains(advise(r, kH100), "launch-bound: the GPU was busy only 45%"));
  // A host that issues quickly is not launch-bound whatever NVML says.
  EXPECT_FALSE(any_contains(advise(gpu_report(0.78, 2.0, 0.3, 0.0), kH100), "launch-bound"));
}

// Steps replayed from a CUDA graph: no "CUDA graphs would help", and no launch-bound verdict from
// the host's issue time (the launch queue's back-pressure makes it the step's); a GPU that idles
// between small kernels is said to; and NVML's saturated reading does not hide a data-starved step.
TEST(Advice, GraphedSteps) {
  EpochReport r = gpu_report(0.60, 0.13, 0.12, 0.0);  // NVML 60 %, issue time ~ step time
  r.steps = 469;
  r.graph_steps = 468;
  r.graph_kernels = 40;
  auto a = advise(r, {true, true, Precision::FP16, 128});
  EXPECT_FALSE(any_contains(a, "launch-bound")) << (a.empty() ? "" : a[0]);
  EXPECT_FALSE(any_contains(a, "CUDA graphs"));
  EXPECT_TRUE(any_contains(a, "the step is one CUDA graph of 40 kernels, so the host does not bound it"));
  EXPECT_TRUE(any_contains(a, "(NVML, an upper bound; --busy measures it)"));
  // mnist_mlp fp32 from the loader on an H100: NVML 98 % but the step waited for data 74 %.
  EpochReport d = gpu_report(0.98, 0.123, 0.026, 0.737);
  d.steps = 469;
  d.graph_steps = 468;
  a = advise(d, {true, true, Precision::FP32, 128});
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a[0].rfind("input pipeline: the step waited for data 74% of the time (NVML utilisation 98%, which "
                       "over-reads short steps)", 0), 0u) << a[0];
  EXPECT_FALSE(any_contains(a, "the GPU is the bottleneck"));
  // Measured busy time keeps its say: a GPU busy 95 % is the bottleneck, the wait its shadow.
  d.gpu_busy_share = 0.95;
  EXPECT_TRUE(any_contains(advise(d, kH100), "the GPU is the bottleneck (busy 95%)"));
}

// ---- advice thresholds -------------------------------------------------------------------------
// Each rule evaluated just below its threshold, exactly at it and just above, so that moving one of
// advice.cpp's constants by 0.01 either way fails a case. The thresholds are hard-coded here on
// purpose: exposing advice.cpp's constants would let a test follow a constant that moved.

namespace {
constexpr double kJust = 1e-3;  // "just below/above": a tenth of the smallest move to be caught

// The advice for a figure at x, the figure the rule under test compares with its threshold.
using AdviceAt = std::function<std::vector<std::string>(double x)>;

std::string joined(const std::vector<std::string>& a) {
  std::string s;
  for (const auto& line : a) s += "\n  " + line;
  return s;
}

// `below` must appear just below the threshold and not at or above it; `at_or_above` the other way
// round. Either may be empty (nothing to look for on that side). >= and < rules both flip between
// threshold - kJust and the threshold itself; the point above checks the side stays put.
void expect_flips_at(const char* rule, double threshold, const AdviceAt& advice_at, const std::string& below,
                     const std::string& at_or_above) {
  for (double x : {threshold - kJust, threshold, threshold + kJust}) {
    const bool is_below = x < threshold;
    const auto a = advice_at(x);
    SCOPED_TRACE(std::string(rule) + " at " + std::to_string(x) + ", advice:" + joined(a));
    if (!below.empty()) EXPECT_EQ(any_contains(a, below), is_below) << "\"" << below << "\"";
    if (!at_or_above.empty()) EXPECT_EQ(any_contains(a, at_or_above), !is_below) << "\"" << at_or_above << "\"";
  }
}

// As gpu_report, with CUPTI's measured busy share (which replaces NVML's utilisation).
EpochReport busy_report(double busy, double step_ms, double issue_ms, double wait) {
  EpochReport r = gpu_report(busy, step_ms, issue_ms, wait);
  r.gpu_busy_share = busy;
  return r;
}

const std::string kLaunchBoundAdvice = "launch-bound: the GPU was busy only";  // not the "probably" one
// Not bare "input pipeline": the GPU-bottleneck line says the input pipeline keeps up.
const std::string kDataBoundAdvice = "input pipeline: the step waited for data";
}  // namespace

// kDataBound 0.2: data_wait_share >= 0.2 is waiting for data; below it the host rules may speak.
TEST(Advice, DataBoundThreshold) {
  // CPU run (>=): the input-pipeline line appears from 0.2 on.
  expect_flips_at("CPU run, wait >= 0.2", 0.2, [](double x) {
    return advise(gpu_report(0.1, 2.0, 0.3, x), {false, false, Precision::FP32, 64});
  }, "", kDataBoundAdvice);
  // data_bound (>=), CUPTI busy 30 %: input pipeline from 0.2 on.
  expect_flips_at("data_bound, wait >= 0.2", 0.2, [](double x) {
    return advise(busy_report(0.3, 2.0, 0.3, x), kH100);
  }, "", kDataBoundAdvice);
  // gpu_bound with NVML only (>=): NVML 95 % is the bottleneck below 0.2, data-bound from 0.2 on.
  expect_flips_at("NVML gpu_bound vs data_bound, wait >= 0.2", 0.2, [](double x) {
    return advise(gpu_report(0.95, 2.0, 0.3, x), kH100);
  }, "the GPU is the bottleneck", kDataBoundAdvice);
  // launch_bound (wait < 0.2): launch-bound below, data-bound from 0.2 on.
  expect_flips_at("launch_bound, wait < 0.2", 0.2, [](double x) {
    return advise(busy_report(0.3, 1.0, 0.9, x), kH100);
  }, kLaunchBoundAdvice, kDataBoundAdvice);
  // host_issuing (wait < 0.2), NVML 78 %: probably launch-bound below, data-bound from 0.2 on.
  expect_flips_at("host_issuing, wait < 0.2", 0.2, [](double x) {
    return advise(gpu_report(0.78, 1.0, 0.9, x), kH100);
  }, "probably launch-bound", kDataBoundAdvice);
}

// kLaunchBound 0.5: below it a GPU is idle enough for launch-bound; from it on NVML only guesses.
TEST(Advice, LaunchBoundThreshold) {
  // launch_bound (util < 0.5), CUPTI busy: launch-bound below, nothing about launches from 0.5 on.
  expect_flips_at("launch_bound, busy < 0.5", 0.5, [](double x) {
    return advise(busy_report(x, 1.0, 0.9, 0.0), kH100);
  }, kLaunchBoundAdvice, "");
  EXPECT_FALSE(any_contains(advise(busy_report(0.5, 1.0, 0.9, 0.0), kH100), "launch-bound"));
  // The "probably" rule (NVML util >= 0.5): the measured-rule wording below, the guess from 0.5 on.
  expect_flips_at("probably launch-bound, NVML >= 0.5", 0.5, [](double x) {
    return advise(gpu_report(x, 1.0, 0.9, 0.0), kH100);
  }, kLaunchBoundAdvice, "probably launch-bound");
}

// kIssueShare 0.8: issue_ms_p50 >= 0.8 * step_ms_p50 is a host that spends the step issuing work.
TEST(Advice, IssueShareThreshold) {
  // launch_bound (>=), CUPTI busy 30 %; a step of 1 ms makes the issue time the share itself.
  expect_flips_at("launch_bound, issue >= 0.8 step", 0.8, [](double x) {
    return advise(busy_report(0.3, 1.0, x, 0.0), kH100);
  }, "", kLaunchBoundAdvice);
  // host_issuing (>=), NVML 78 %: probably launch-bound from 0.8 on.
  expect_flips_at("host_issuing, issue >= 0.8 step", 0.8, [](double x) {
    return advise(gpu_report(0.78, 1.0, x, 0.0), kH100);
  }, "", "probably launch-bound");
}

// kGpuBound 0.9: util >= 0.9 makes the GPU the bottleneck, which silences the other verdicts.
TEST(Advice, GpuBoundThreshold) {
  // gpu_bound (>=), CUPTI busy and a 30 % wait: data-bound below, the GPU's bottleneck from 0.9 on.
  expect_flips_at("gpu_bound vs data_bound, busy >= 0.9", 0.9, [](double x) {
    return advise(busy_report(x, 2.0, 0.3, 0.3), kH100);
  }, kDataBoundAdvice, "the GPU is the bottleneck");
  // gpu_bound (>=), NVML only and a host issuing: probably launch-bound below, bottleneck from 0.9 on.
  expect_flips_at("gpu_bound vs probably launch-bound, NVML >= 0.9", 0.9, [](double x) {
    return advise(gpu_report(x, 1.0, 0.9, 0.0), kH100);
  }, "probably launch-bound", "the GPU is the bottleneck");
}

// kMemFree 0.25: used / total < 0.25 leaves room for a larger batch.
TEST(Advice, MemFreeThreshold) {
  expect_flips_at("memory free, used < 0.25 of total", 0.25, [](double x) {
    EpochReport r = busy_report(0.6, 2.0, 0.3, 0.0);
    r.mem_used_max_bytes = x * *r.mem_total_bytes;
    return advise(r, kH100);
  }, "most device memory is free", "");
}

// kLowMfu 0.02: below 2 % MFU the step moves memory, so 16-bit arithmetic is not suggested.
TEST(Advice, LowMfuThreshold) {
  expect_flips_at("low MFU, mfu < 0.02", 0.02, [](double x) {
    EpochReport r = busy_report(0.6, 2.0, 0.3, 0.0);
    r.mfu = x;
    return advise(r, {true, true, Precision::FP32, 512});
  }, "the step moves memory more than it computes", "try --precision fp16 or bf16");
}

// kCommBound 0.1: exposed NCCL time >= 10 % of training makes a data-parallel run communication-bound.
TEST(Advice, CommBoundThreshold) {
  expect_flips_at("communication-bound, exposed >= 0.1", 0.1, [](double x) {
    EpochReport r = busy_report(0.95, 20.0, 0.5, 0.0);
    r.world_size = 2;
    r.nccl_share = 0.4;
    r.nccl_exposed_share = x;
    return advise(r, kH100);
  }, "", "communication-bound");
}

// A busy machine (lab/plans/cpu_real_machine.md, item 2): loupe's threads waited for a core 20% of
// their ready time or more; the advice names the share and, where the process got at least half a
// core, --threads at the cores it got. On a CPU run and a GPU run alike, first.
// NVML's utilisation far above GPM's SM activity: the GPU is not saturated, its kernels are too
// small to fill it (or, at a few percent, kernels of a few blocks hold it); 30 points is the line.
TEST(Advice, UtilisationAboveSmActivityIsSmallKernels) {
  EpochReport r = gpu_report(0.98, 20.0, 0.5, 0.0);
  r.gpu_sm_active = 40;
  r.gpu_sm_occupancy = 6;
  auto a = advise(r, kH100);
  EXPECT_FALSE(any_contains(a, "the GPU is the bottleneck")) << a[0];
  EXPECT_TRUE(any_contains(a, "NVML's GPU utilisation (98%) counts the time any kernel ran, but the SMs were "
                              "active 40% (occupancy 6%): its kernels are too small to fill the GPU; a larger "
                              "--batch than 512"));
  r.gpu_sm_active = 5;
  EXPECT_TRUE(any_contains(advise(r, kH100), "kernels of a few blocks held the GPU"));
  expect_flips_at("utilisation - SM activity >= 30 points", 30, [](double x) {
    EpochReport q = gpu_report(0.98, 20.0, 0.5, 0.0);
    q.gpu_sm_active = 98 - x;
    return advise(q, kH100);
  }, "the GPU is the bottleneck", "too small to fill the GPU");
}

TEST(Advice, BusyHostThreshold) {
  expect_flips_at("busy host, waited >= 0.2", 0.2, [](double x) {
    EpochReport r = busy_report(0.6, 2.0, 0.5, 0.0);
    r.host_cpu_util = 1.04;
    r.host_cpu_wait_share = x;
    return advise(r, kH100);
  }, "", "the machine is busy");
  EpochReport r;
  r.host_cpu_util = 1.04;
  r.host_cpu_wait_share = 0.37;
  const auto a = advise(r, {false, false, Precision::FP32, 128});
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a[0], "the machine is busy: loupe's threads waited for a core 37% of the time they were ready to run "
                  "(other processes hold the cores); --threads 1 (the cores it got), or a quieter machine");
  r.host_cpu_util = 2.6;
  EXPECT_NE(advise(r, {false, false, Precision::FP32, 128})[0].find("--threads 3 (the cores it got)"), std::string::npos);
  r.host_cpu_util = 0.3;  // under half a core: no thread count to suggest
  EXPECT_EQ(advise(r, {false, false, Precision::FP32, 128})[0].find("--threads"), std::string::npos);
  r.host_cpu_wait_share.reset();  // unmeasured: no such advice
  EXPECT_FALSE(any_contains(advise(r, {false, false, Precision::FP32, 128}), "the machine is busy"));
}

// ---- data parallelism's straggler (instrument/straggler.h, advice.h's judge_straggler) ------------

namespace {
const double kNaN = std::numeric_limits<double>::quiet_NaN();

RankFigures rank_figures(int rank, Opt step, Opt wait, Opt exposed = std::nullopt) {
  RankFigures f;
  f.rank = rank;
  f.step_ms_p50 = step;
  f.step_ms_p95 = step ? Opt(*step * 1.1) : std::nullopt;
  f.data_wait_ms_p50 = wait;
  f.issue_ms_p50 = 0.05;
  f.nccl_exposed_share = exposed;
  return f;
}

// A rank's report of a world with these figures (resident data unless said otherwise).
AdviceInputs world_inputs(std::vector<RankFigures> world, bool host_time = true) {
  AdviceInputs in = kH100;
  in.straggler = judge_straggler(world, host_time);
  return in;
}

EpochReport rank_report(int rank, int world_size, Opt exposed = std::nullopt) {
  EpochReport r = busy_report(0.6, 5.3, 0.05, 0.0);
  r.rank = rank;
  r.world_size = world_size;
  if (exposed) r.nccl_share = *exposed + 0.05;
  r.nccl_exposed_share = exposed;
  return r;
}
}  // namespace

TEST(Straggler, OneProcessJudgesNothing) {
  for (const auto& ranks : {std::vector<RankFigures>{}, std::vector<RankFigures>{rank_figures(0, 5.0, 4.0, 0.0)}}) {
    const Straggler s = judge_straggler(ranks, true);
    EXPECT_FALSE(s.rank);
    EXPECT_FALSE(s.holds_back);
    EXPECT_FALSE(s.share);
    EXPECT_EQ(s.why, "one process");
  }
}

// --busy: the rank whose GPU waited least in NCCL is the one the others wait for, whatever its
// data wait says; the others' median, not their largest, is the yardstick.
TEST(Straggler, BusyTheSmallestUnhiddenNcclShare) {
  Straggler s = judge_straggler({rank_figures(0, 5.3, 0.01, 0.62), rank_figures(1, 5.3, 0.01, 0.02)}, true);
  ASSERT_TRUE(s.rank);
  EXPECT_EQ(*s.rank, 1);
  EXPECT_EQ(s.basis, Straggler::Basis::Nccl);
  EXPECT_NEAR(*s.share, 0.60, 1e-12);
  EXPECT_TRUE(s.holds_back);
  EXPECT_EQ(*s.slowest.nccl_exposed_share, 0.02);
  EXPECT_EQ(*s.others.nccl_exposed_share, 0.62);
  EXPECT_EQ(s.others.rank, -1);
  // Without the loader's ambiguity it counts too: a larger data wait elsewhere does not move it.
  s = judge_straggler({rank_figures(0, 5.3, 4.0, 0.62), rank_figures(1, 5.3, 0.01, 0.02)}, false);
  EXPECT_EQ(*s.rank, 1);
  EXPECT_TRUE(s.holds_back);
  // One fast rank waiting for three even ones: the slowest of them does not hold the others back.
  s = judge_straggler({rank_figures(0, 5, 0.0, 0.02), rank_figures(1, 5, 0.0, 0.03), rank_figures(2, 5, 0.0, 0.04),
                       rank_figures(3, 5, 0.0, 0.30)}, true);
  EXPECT_EQ(*s.rank, 0);
  EXPECT_NEAR(*s.share, 0.02, 1e-12);  // median of 0.03, 0.04, 0.30 less 0.02
  EXPECT_FALSE(s.holds_back);
  // Three ranks waiting for one: it does.
  s = judge_straggler({rank_figures(0, 5, 0.0, 0.30), rank_figures(1, 5, 0.0, 0.02), rank_figures(2, 5, 0.0, 0.31),
                       rank_figures(3, 5, 0.0, 0.29)}, true);
  EXPECT_EQ(*s.rank, 1);
  EXPECT_NEAR(*s.share, 0.28, 1e-12);
  EXPECT_TRUE(s.holds_back);
}

// Without --busy, resident data: the wait for a batch is the host's own time, and the largest is slowest.
TEST(Straggler, NotBusyTheLargestDataWaitOfResidentData) {
  Straggler s = judge_straggler({rank_figures(0, 5.3, 0.01), rank_figures(1, 5.3, 5.0)}, true);
  ASSERT_TRUE(s.rank);
  EXPECT_EQ(*s.rank, 1);
  EXPECT_EQ(s.basis, Straggler::Basis::DataWait);
  EXPECT_NEAR(*s.share, (5.0 - 0.01) / 5.3, 1e-12);
  EXPECT_TRUE(s.holds_back);
  // A wait near the others': slowest, but nobody waits much for it.
  s = judge_straggler({rank_figures(0, 5.3, 2.0), rank_figures(1, 5.3, 3.0)}, true);
  EXPECT_EQ(*s.rank, 1);
  EXPECT_FALSE(s.holds_back);
  // Through the loader a rank held back by a peer waits for its batches too: no verdict without --busy.
  s = judge_straggler({rank_figures(0, 5.3, 5.0), rank_figures(1, 5.3, 0.01)}, false);
  EXPECT_FALSE(s.rank);
  EXPECT_FALSE(s.holds_back);
  EXPECT_FALSE(s.share);
  EXPECT_NE(s.why.find("--busy"), std::string::npos) << s.why;
  EXPECT_NE(s.why.find("loader"), std::string::npos) << s.why;
}

// An exact tie goes to the lower rank, wherever it stands in the list; every rank even: none slowest.
TEST(Straggler, TiesAndEvenRanks) {
  Straggler s = judge_straggler({rank_figures(2, 5, 0.0, 0.40), rank_figures(1, 5, 0.0, 0.02),
                                 rank_figures(0, 5, 0.0, 0.02)}, true);
  ASSERT_TRUE(s.rank);
  EXPECT_EQ(*s.rank, 0);
  EXPECT_NEAR(*s.share, 0.19, 1e-12);  // the others' median (0.02 and 0.40: 0.21) less 0.02
  EXPECT_TRUE(s.holds_back);
  s = judge_straggler({rank_figures(1, 5, 3.0), rank_figures(0, 5, 3.0), rank_figures(2, 5, 0.0)}, true);
  EXPECT_EQ(*s.rank, 0);
  s = judge_straggler({rank_figures(0, 5, 0.0, 0.1), rank_figures(1, 5, 0.0, 0.1)}, true);
  EXPECT_FALSE(s.rank);
  EXPECT_EQ(s.basis, Straggler::Basis::None);
  EXPECT_NE(s.why.find("the same"), std::string::npos) << s.why;
  s = judge_straggler({rank_figures(0, 5, 0.0), rank_figures(1, 5, 0.0)}, true);
  EXPECT_FALSE(s.rank);
  EXPECT_NE(s.why.find("the same"), std::string::npos) << s.why;
}

// A figure unmeasured on one rank (empty, or NaN as the all-gather carries it) is never read as 0.
TEST(Straggler, UnmeasuredFiguresClaimNothing) {
  // One rank without its NCCL share: the data waits judge (resident), not the one share there is.
  Straggler s = judge_straggler({rank_figures(0, 5.3, 0.01, 0.62), rank_figures(1, 5.3, 5.0, kNaN)}, true);
  EXPECT_EQ(s.basis, Straggler::Basis::DataWait);
  EXPECT_EQ(*s.rank, 1);
  // ...and through the loader nothing.
  s = judge_straggler({rank_figures(0, 5.3, 0.01, 0.62), rank_figures(1, 5.3, 5.0)}, false);
  EXPECT_FALSE(s.rank);
  // A data wait or a step unmeasured (NaN or empty) on one rank: nothing.
  for (Opt missing : {Opt(), Opt(kNaN)}) {
    s = judge_straggler({rank_figures(0, 5.3, missing), rank_figures(1, 5.3, 5.0)}, true);
    EXPECT_FALSE(s.rank);
    EXPECT_FALSE(s.holds_back);
    EXPECT_NE(s.why.find("not measured"), std::string::npos) << s.why;
    s = judge_straggler({rank_figures(0, missing, 0.01), rank_figures(1, 5.3, 5.0)}, true);
    EXPECT_FALSE(s.rank);
  }
  // A step of 0 ms (no step measured as such): slowest by its wait, but no share of a step, no claim.
  s = judge_straggler({rank_figures(0, 0.0, 0.0), rank_figures(1, 0.0, 0.1)}, true);
  EXPECT_EQ(*s.rank, 1);
  EXPECT_FALSE(s.share);
  EXPECT_FALSE(s.holds_back);
  EXPECT_EQ(median_of({Opt(), Opt(kNaN)}), std::nullopt);
  EXPECT_EQ(*median_of({Opt(3.0), Opt(), Opt(1.0), Opt(kNaN)}), 2.0);
  EXPECT_EQ(*median_of({Opt(3.0), Opt(1.0), Opt(2.0)}), 2.0);
}

TEST(Straggler, WorldLineNamesTheSlowestBesideTheOthers) {
  std::vector<RankFigures> ranks = {rank_figures(0, 5.3, 0.012, 0.931), rank_figures(1, 5.31, 5.02, 0.02)};
  ranks[0].step_ms_p95 = 5.5;
  ranks[1].step_ms_p95 = 5.62;
  EXPECT_EQ(straggler_line(ranks, judge_straggler(ranks, true)),
            "  slowest rank 1: step p50 5.31 ms / p95 5.62 ms, data wait p50 5.02 ms (the other: step 5.3 ms / "
            "5.5 ms, data wait 0.012 ms); NCCL not hidden: rank 0 93.1%, rank 1 2.0%");
  // Without --busy: no NCCL shares; an unmeasured p95 reads n/a; several others are their median.
  ranks = {rank_figures(0, 5.3, 0.01), rank_figures(1, 5.3, 5.0), rank_figures(2, 5.1, 0.03)};
  ranks[1].step_ms_p95.reset();
  EXPECT_EQ(straggler_line(ranks, judge_straggler(ranks, true)),
            "  slowest rank 1: step p50 5.3 ms / p95 n/a, data wait p50 5 ms (the others' median: step 5.2 ms / "
            "5.72 ms, data wait 0.02 ms)");
  // Slowest by a hair only: said so.
  ranks = {rank_figures(0, 0.136, 0.00028), rank_figures(1, 0.136, 0.000285)};
  EXPECT_EQ(straggler_line(ranks, judge_straggler(ranks, true)),
            "  slowest rank 1: step p50 0.136 ms / p95 0.15 ms, data wait p50 0.000285 ms (the other: step 0.136 ms / "
            "0.15 ms, data wait 0.00028 ms), not enough to hold the others back");
  // No verdict: why, and the NCCL shares measured (one of them unmeasured).
  ranks = {rank_figures(0, 5.3, 0.01, 0.5), rank_figures(1, 5.3, 5.0)};
  const std::string line = straggler_line(ranks, judge_straggler(ranks, false));
  EXPECT_EQ(line.rfind("  slowest rank n/a (not every rank measured its unhidden NCCL share, and through the loader a "
                       "rank held back by a peer waits for its batches too)", 0), 0u) << line;
  EXPECT_NE(line.find("; NCCL not hidden: rank 0 50.0%, rank 1 n/a"), std::string::npos) << line;
  EXPECT_EQ(straggler_line({}, judge_straggler({}, true)), "  slowest rank n/a (one process)");
}

TEST(ReportJson, SlowestRankIsAWholeNumber) {
  EpochReport r;
  r.world_size = 2;
  r.slowest_rank = 1;
  r.straggler_share = 0.6;
  const std::string j = to_json(r);
  EXPECT_EQ(json_value(j, "slowest_rank"), "1");
  EXPECT_EQ(json_value(j, "straggler_share"), "0.6");
  const auto row = split_csv(to_csv_row(r));
  EXPECT_EQ(row[index_of("slowest_rank")], "1");
}

TEST(Advice, StragglerNamesTheRankAndWhereToLook) {
  // --busy: rank 0's record (it waited), the straggler's rank named first, with the evidence.
  const auto in = world_inputs({rank_figures(0, 5.3, 0.01, 0.62), rank_figures(1, 5.3, 0.01, 0.02)});
  auto a = advise(rank_report(0, 2, 0.62), in);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a[0], "straggler: rank 1 holds the others back: the other GPUs ran only NCCL, waiting for its all-reduces, "
                  "60% of the training time more than its GPU did (unhidden NCCL time 62% against its 2%); look at its "
                  "GPU's clocks and throttling (--timeline samples every GPU of rank 0's host), its host's load (top on "
                  "that host) and its input (--workers, the data files' disk)");
  // Its own record says the same.
  EXPECT_EQ(advise(rank_report(1, 2, 0.02), in)[0], a[0]);
  // Its batches came late: that is where to look.
  a = advise(rank_report(0, 2, 0.62), world_inputs({rank_figures(0, 5.3, 0.01, 0.62), rank_figures(1, 5.3, 5.0, 0.02)}));
  EXPECT_NE(a[0].find("; its batches come late: more --workers or --prefetch"), std::string::npos) << a[0];
  // Without --busy (resident data): the data wait is the evidence.
  a = advise(rank_report(0, 2), world_inputs({rank_figures(0, 5.3, 0.01), rank_figures(1, 5.3, 5.0)}));
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a[0].rfind("straggler: rank 1 holds the others back: its steps waited 5 ms of 5.3 ms for their batches, "
                       "the others' 0.01 ms (data wait p50), and each step waits for its slowest rank; its batches come "
                       "late", 0), 0u) << a[0];
  // Through the loader without --busy, or one process: no such advice.
  EXPECT_FALSE(any_contains(advise(rank_report(0, 2), world_inputs({rank_figures(0, 5.3, 0.01), rank_figures(1, 5.3, 5.0)}, false)),
                            "straggler"));
  EXPECT_FALSE(any_contains(advise(rank_report(0, 1), world_inputs({rank_figures(0, 5.3, 5.0)})), "straggler"));
  // A busy host comes first: it may be the straggler's cause.
  EpochReport busy = rank_report(1, 2, 0.02);
  busy.host_cpu_wait_share = 0.4;
  a = advise(busy, in);
  ASSERT_GE(a.size(), 2u);
  EXPECT_EQ(a[0].rfind("the machine is busy", 0), 0u) << a[0];
  EXPECT_EQ(a[1].rfind("straggler: rank 1", 0), 0u) << a[1];
}

// The others' unhidden NCCL time is their wait for the straggler, not communication: the
// communication-bound rule judges the straggler's own share (it waits for no peer).
TEST(Advice, StragglerWaitIsNotCommunication) {
  auto a = advise(rank_report(0, 2, 0.62), world_inputs({rank_figures(0, 5.3, 0.01, 0.62), rank_figures(1, 5.3, 0.01, 0.02)}));
  EXPECT_TRUE(any_contains(a, "straggler: rank 1"));
  EXPECT_FALSE(any_contains(a, "communication-bound"));
  const auto in = world_inputs({rank_figures(0, 5.3, 0.01, 0.62), rank_figures(1, 5.3, 0.01, 0.12)});
  a = advise(rank_report(0, 2, 0.62), in);
  EXPECT_TRUE(any_contains(a, "communication-bound: for 12% of the training time rank 1's GPU (which waits for no peer) "
                              "only ran NCCL's all-reduces")) << joined(a);
  a = advise(rank_report(1, 2, 0.12), in);
  EXPECT_TRUE(any_contains(a, "communication-bound: for 12% of the training time the GPU only ran")) << joined(a);
  // No straggler: each rank's own share, as before.
  a = advise(rank_report(0, 2, 0.30), world_inputs({rank_figures(0, 5.3, 0.01, 0.30), rank_figures(1, 5.3, 0.01, 0.25)}));
  EXPECT_FALSE(any_contains(a, "straggler"));
  EXPECT_TRUE(any_contains(a, "communication-bound: for 30% of the training time the GPU only ran")) << joined(a);
}

// kStragglerNccl 0.15: the others' median unhidden NCCL share exceeds the slowest rank's by 0.15 or more.
TEST(Advice, StragglerNcclThreshold) {
  expect_flips_at("straggler, others' unhidden NCCL share - its own >= 0.15", 0.15, [](double x) {
    return advise(rank_report(0, 2, x), world_inputs({rank_figures(0, 5.3, 0.01, x), rank_figures(1, 5.3, 0.01, 0.0)}));
  }, "", "straggler: rank 1 holds the others back");
}

// kStragglerDataWait 0.2: without --busy, the slowest rank's data wait p50 is 0.2 of its step p50 or more.
TEST(Advice, StragglerDataWaitThreshold) {
  expect_flips_at("straggler, data wait >= 0.2 step", 0.2, [](double x) {
    return advise(rank_report(0, 2), world_inputs({rank_figures(0, 1.0, 0.0), rank_figures(1, 1.0, x)}));
  }, "", "straggler: rank 1 holds the others back");
}

// kStragglerRatio 2: ...and twice the others' median data wait plus kStragglerFloorMs (2 x 1 + 0.05).
TEST(Advice, StragglerRatioThreshold) {
  expect_flips_at("straggler, data wait >= 2 x the others' + 0.05 ms", 2.05, [](double x) {
    return advise(rank_report(0, 2), world_inputs({rank_figures(0, 5.0, 1.0), rank_figures(1, 5.0, x)}));
  }, "", "straggler: rank 1 holds the others back");
}

// kStragglerFloorMs 0.05: against others that waited 0 ms, 0.05 ms or more (a step of 0.1 ms, so that
// kStragglerDataWait asks only 0.02 ms).
TEST(Advice, StragglerFloorThreshold) {
  expect_flips_at("straggler, data wait >= 0.05 ms beyond waits of 0", 0.05, [](double x) {
    return advise(rank_report(0, 2), world_inputs({rank_figures(0, 0.1, 0.0), rank_figures(1, 0.1, x)}));
  }, "", "straggler: rank 1 holds the others back");
}
