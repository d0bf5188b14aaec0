// TensorBoard event files (loupe train --tensorboard DIR; framework/instrument/tensorboard.h), read
// back by a reader of the TFRecord framing written here, independently of the writer: its own
// CRC32C (bitwise, checked against the standard check value), both masked CRCs and the lengths of
// every record checked; the Events decoded with the same generated protos. Built only where
// protobuf is (loupe: TensorBoard: ON). TensorBoard's own reader: scripts/check_tensorboard.py.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "instrument/report_io.h"
#include "instrument/tensorboard.h"
#include "loupe/tb_hparams.pb.h"
#include "tensorboard/compat/proto/event.pb.h"
#include "test_util.h"

namespace fs = std::filesystem;
using loupe::instrument::TensorBoardWriter;

namespace {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time.
uint32_t crc32c(const std::string& s) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked(const std::string& s) {
  const uint32_t c = crc32c(s);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

uint64_t le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

// The records of a TFRecord file, or the first problem found (empty when there is none).
struct Records {
  std::vector<std::string> data;
  std::string error;
};

Records read_records(const std::string& bytes) {
  Records r;
  size_t at = 0;
  while (at < bytes.size()) {
    const std::string where = "record " + std::to_string(r.data.size()) + " at byte " + std::to_string(at);
    if (bytes.size() - at < 12) return r.error = where + ": truncated header", r;
    const uint64_t n = le(bytes, at, 8);
    if (le(bytes, at + 8, 4) != masked(bytes.substr(at, 8))) return r.error = where + ": length CRC mismatch", r;
    if (bytes.size() - at - 12 < n + 4) return r.error = where + ": truncated data", r;
    std::string data = bytes.substr(at + 12, n);
    if (le(bytes, at + 12 + n, 4) != masked(data)) return r.error = where + ": data CRC mismatch", r;
    r.data.push_back(std::move(data));
    at += 12 + n + 4;
  }
  return r;
}

using loupe::test::slurp;

// Every Event of a file, checked: readable, the first the version record.
std::vector<tensorboard::Event> events_of(const fs::path& p) {
  Records r = read_records(slurp(p));
  EXPECT_EQ(r.error, "") << p;
  std::vector<tensorboard::Event> out;
  for (const std::string& d : r.data) {
    tensorboard::Event e;
    EXPECT_TRUE(e.ParseFromString(d)) << p;
    out.push_back(e);
  }
  EXPECT_FALSE(out.empty()) << p;
  if (!out.empty()) EXPECT_EQ(out[0].file_version(), "brain.Event:2");
  return out;
}

// The only event file in dir (its subdirectories are the runs train/ and test/).
fs::path event_file(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  EXPECT_EQ(files.size(), 1u) << dir;
  return files.empty() ? fs::path() : files[0];
}

// The text of a "run/config" event ("" when e is not one), checked to be what TensorBoard's text
// plugin reads: plugin "text", a scalar string tensor.
std::string config_text(const tensorboard::Event& e) {
  if (e.summary().value_size() != 1 || e.summary().value(0).tag() != "run/config") return "";
  const auto& v = e.summary().value(0);
  EXPECT_EQ(v.metadata().plugin_data().plugin_name(), "text");
  EXPECT_EQ(v.value_case(), tensorboard::Summary::Value::kTensor);
  EXPECT_EQ(v.tensor().dtype(), tensorboard::DT_STRING);
  EXPECT_EQ(v.tensor().tensor_shape().dim_size(), 0);
  EXPECT_EQ(v.tensor().string_val_size(), 1);
  return v.tensor().string_val_size() ? v.tensor().string_val(0) : "";
}

// The hyperparameters of a "_hparams_/session_start_info" event (empty when e is not one), checked
// to be what TensorBoard's HParams plugin reads: plugin "hparams", a float tensor of shape [0].
std::map<std::string, std::string> hparams_of(const tensorboard::Event& e) {
  std::map<std::string, std::string> m;
  if (e.summary().value_size() != 1 || e.summary().value(0).tag() != "_hparams_/session_start_info") return m;
  const auto& v = e.summary().value(0);
  EXPECT_EQ(v.metadata().plugin_data().plugin_name(), "hparams");
  EXPECT_EQ(v.tensor().dtype(), tensorboard::DT_FLOAT);
  EXPECT_EQ(v.tensor().tensor_shape().dim_size(), 1);
  loupe::tb::HParamsSessionStart start;
  EXPECT_TRUE(start.ParseFromString(v.metadata().plugin_data().content()));
  EXPECT_EQ(start.version(), 0);
  EXPECT_GT(start.session_start_info().start_time_secs(), 1.6e9);
  for (const auto& [k, val] : start.session_start_info().hparams())
    m[k] = val.has_string_value() ? val.string_value() : std::to_string(val.number_value());
  return m;
}

// The run's constants: in "run/config" once, never as flat charts.
const char* const kConstants[] = {"seed", "lr", "threads", "batch", "epoch", "epochs", "peak_tflops",
                                  "mem_total_bytes", "flops_per_sample", "rank", "world_size"};
bool is_constant(const std::string& field) {
  for (const char* c : kConstants)
    if (field == c) return true;
  return false;
}

std::map<std::string, float> values_of(const tensorboard::Event& e) {
  std::map<std::string, float> m;
  for (const auto& v : e.summary().value()) {
    EXPECT_EQ(v.value_case(), tensorboard::Summary::Value::kSimpleValue) << v.tag();
    EXPECT_TRUE(m.emplace(v.tag(), v.simple_value()).second) << "tag twice in one event: " << v.tag();
  }
  return m;
}

std::pair<int, std::string> run_cli(const std::string& args) {
  return loupe::test::run_command(std::string(LOUPE_CLI) + " " + args);
}

}  // namespace

TEST(TensorBoardReader, Crc32cIsTheStandardOne) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // CRC-32C's check value
  EXPECT_EQ(crc32c(""), 0u);
}

// The writer's per-step logic without timing: a point only when a new running loss arrives, with
// samples/s over the samples and seconds since the last point; the epoch's measured fields only.
TEST(TensorBoardWriter, PointsOnNewLossesAndMeasuredFieldsOnly) {
  const fs::path dir = loupe::test::temp_path("loupe_tb_unit");
  fs::remove_all(dir);
  loupe::instrument::EpochReport r;
  r.epoch = 3;
  r.samples_per_sec = 1234.5;
  r.train_loss = 2.25;
  r.test_acc = 0.5;
  r.test_loss = 2.5;
  r.gpu_util_mean = std::nullopt;  // unmeasured: left out
  r.mfu = std::nan("");            // not finite: left out, as JSON's null
  r.train_acc = 0.75;
  r.batch = 128;
  r.epochs = 5;
  r.lr = 0.001;
  r.model = "mnist_mlp";
  {
    TensorBoardWriter w((dir / "a" / "b").string());  // parents created
    EXPECT_EQ(fs::path(w.path()).parent_path(), dir / "a" / "b");
    w.begin_epoch(100.0);
    w.step(1, 128, 100.1, std::nullopt);  // no loss yet: nothing
    w.step(2, 256, 100.2, 2.5);           // the first: a point, 256 samples in 0.2 s
    w.step(3, 384, 100.3, 2.5);           // the same loss again: nothing
    w.step(4, 512, 100.6, 2.25);          // new: 256 samples in 0.4 s
    w.epoch(r);
    r.epoch = 4;
    w.epoch(r);  // the config goes once
  }
  auto events = events_of(event_file(dir / "a" / "b"));
  ASSERT_EQ(events.size(), 7u);
  // The run's constants as one text table and as the HParams plugin's session, at the first epoch.
  const std::string config = config_text(events[3]);
  EXPECT_EQ(events[3].step(), 3);
  EXPECT_NE(config.find("| model | mnist_mlp |"), std::string::npos) << config;
  EXPECT_NE(config.find("| batch | 128 |"), std::string::npos) << config;
  EXPECT_NE(config.find("| epochs | 5 |"), std::string::npos) << config;
  EXPECT_NE(config.find("| learning rate | 0.001 |"), std::string::npos) << config;
  const auto hp = hparams_of(events[4]);
  EXPECT_EQ(hp.at("model"), "mnist_mlp");
  EXPECT_EQ(hp.at("batch"), std::to_string(128.0));
  EXPECT_EQ(hp.at("lr"), std::to_string(0.001));
  EXPECT_EQ(hp.count("seed"), 0u) << "no seed given: none written";
  EXPECT_EQ(config_text(events[6]), "");
  EXPECT_TRUE(hparams_of(events[6]).empty());
  events.erase(events.begin() + 3, events.begin() + 5);
  EXPECT_EQ(events[1].step(), 2);
  EXPECT_EQ(values_of(events[1]), (std::map<std::string, float>{{"step/loss", 2.5f}, {"step/samples_per_sec", 1280.0f}}));
  EXPECT_EQ(events[2].step(), 4);
  auto v = values_of(events[2]);
  EXPECT_EQ(v.at("step/loss"), 2.25f);
  EXPECT_NEAR(v.at("step/samples_per_sec"), 640.0, 1e-3);
  EXPECT_EQ(events[3].step(), 3);
  v = values_of(events[3]);
  EXPECT_EQ(v.at("epoch/samples_per_sec"), 1234.5f);
  EXPECT_EQ(v.at("epoch/test_acc"), 0.5f);
  EXPECT_EQ(v.count("epoch/epoch"), 0u);  // constants are in the config, not flat charts
  EXPECT_EQ(v.count("epoch/batch"), 0u);
  EXPECT_EQ(v.count("epoch/lr"), 0u);
  EXPECT_EQ(v.count("epoch/gpu_util_mean"), 0u);
  EXPECT_EQ(v.count("epoch/mfu"), 0u);
  EXPECT_EQ(v.count("epoch/model"), 0u);  // text fields are not scalars
  size_t measured = 0;
  for (const auto& [name, value] : loupe::instrument::numeric_fields(r)) measured += value.has_value() && !is_constant(name);
  EXPECT_EQ(v.size(), measured);
  // Train and test accuracy and loss on one chart each: the same tags in the runs train/ and test/.
  for (const auto& [run, acc, loss] : {std::tuple<const char*, float, float>{"train", 0.75f, 2.25f}, {"test", 0.5f, 2.5f}}) {
    const auto ev = events_of(event_file(dir / "a" / "b" / run));
    ASSERT_EQ(ev.size(), 3u) << run;
    EXPECT_EQ(ev[1].step(), 3) << run;
    EXPECT_EQ(values_of(ev[1]), (std::map<std::string, float>{{"epoch/accuracy", acc}, {"epoch/loss", loss}})) << run;
    EXPECT_EQ(ev[2].step(), 4) << run;
  }
  fs::remove_all(dir);
}

// The GPU over time: one event per NVML sample, numbered through the run, at the sample's own wall
// time; power only where NVML reported it.
TEST(TensorBoardWriter, GpuSamplesAreATimeSeries) {
  const fs::path dir = loupe::test::temp_path("loupe_tb_gpu");
  fs::remove_all(dir);
  loupe::instrument::GpuSample a, b, c;
  a.t = 10.0, a.gpu_util = 97, a.mem_used = 2.0 * (1 << 30), a.power_w = 650, a.has_power = true, a.temp_c = 41,
  a.sm_clock_mhz = 1980;
  b = a, b.t = 10.05, b.gpu_util = 55, b.has_power = false;
  c = a, c.t = 10.10, c.gpu_util = 3;
  const double before = double(time(nullptr));
  {
    TensorBoardWriter w(dir.string());
    w.gpu_samples({a, b}, 10.10);  // b taken 0.05 s before the call
    w.gpu_samples({c}, 10.10);     // the next call's sample continues the numbering
  }
  const auto ev = events_of(event_file(dir));
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[1].step(), 1);
  EXPECT_EQ(ev[2].step(), 2);
  EXPECT_EQ(ev[3].step(), 3);
  EXPECT_EQ(values_of(ev[1]), (std::map<std::string, float>{{"gpu/util_pct", 97.0f}, {"gpu/mem_used_gib", 2.0f},
                                                             {"gpu/power_w", 650.0f}, {"gpu/temp_c", 41.0f},
                                                             {"gpu/sm_clock_mhz", 1980.0f}}));
  EXPECT_EQ(values_of(ev[2]).count("gpu/power_w"), 0u) << "NVML reported no power for it";
  EXPECT_EQ(values_of(ev[3]).at("gpu/util_pct"), 3.0f);
  EXPECT_NEAR(ev[2].wall_time() - ev[1].wall_time(), 0.05, 0.01);
  EXPECT_NEAR(ev[1].wall_time(), before, 5.0);
  fs::remove_all(dir);
}

TEST(TensorBoardWriter, UnwritableDirectoryIsAnError) {
  const fs::path file = loupe::test::temp_path("loupe_tb_file");
  std::ofstream(file) << "x";
  try {
    TensorBoardWriter w((file / "sub").string());
    FAIL() << "no error";
  } catch (const loupe::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tensorboard: cannot create the directory"), std::string::npos) << e.what();
  }
  fs::remove(file);
}

// A truncated or corrupted file is caught by the reader, record by record.
TEST(TensorBoardReader, DetectsTruncationAndCorruption) {
  const fs::path dir = loupe::test::temp_path("loupe_tb_corrupt");
  fs::remove_all(dir);
  {
    TensorBoardWriter w(dir.string());
    w.scalars(1, {{"step/loss", 1.0}});
    w.scalars(2, {{"step/loss", 0.5}, {"step/samples_per_sec", 100.0}});
  }
  const std::string good = slurp(event_file(dir));
  Records r = read_records(good);
  ASSERT_EQ(r.error, "");
  ASSERT_EQ(r.data.size(), 3u);
  const size_t last = good.size() - (12 + r.data[2].size() + 4);  // where the last record starts
  EXPECT_EQ(read_records(good.substr(0, good.size() - 1)).error, "record 2 at byte " + std::to_string(last) + ": truncated data");
  EXPECT_EQ(read_records(good.substr(0, last + 5)).error, "record 2 at byte " + std::to_string(last) + ": truncated header");
  auto flipped = [&](size_t at) {
    std::string s = good;
    s[at] = char(s[at] ^ 0x10);
    return read_records(s).error;
  };
  const std::string rec2 = "record 2 at byte " + std::to_string(last);
  EXPECT_EQ(flipped(last), rec2 + ": length CRC mismatch");        // the length
  EXPECT_EQ(flipped(last + 9), rec2 + ": length CRC mismatch");    // its CRC
  EXPECT_EQ(flipped(last + 13), rec2 + ": data CRC mismatch");     // the data
  EXPECT_EQ(flipped(good.size() - 2), rec2 + ": data CRC mismatch");  // its CRC
  EXPECT_EQ(flipped(20), "record 0 at byte 0: data CRC mismatch");
  fs::remove_all(dir);
}

// The real thing: a short CPU training with --tensorboard and --metrics. Every epoch's numeric
// fields are in the events, equal to the JSON line's (as floats), the unmeasured ones absent; the
// running loss and samples/s arrive as points during the epochs.
TEST(TensorBoardTrain, EventsMatchTheMetrics) {
  const fs::path dir = loupe::test::temp_path("loupe_tb_train"), metrics = loupe::test::temp_path("loupe_tb.jsonl");
  fs::remove_all(dir);
  fs::remove(metrics);
  // 100 steps of 256 a epoch: over a second on a 2-core machine, so the running loss (every 0.2 s) arrives.
  auto [rc, out] = run_cli("train mnist_mlp --device cpu --plain --no-nvml --synthetic --epochs 2 --batch 256 "
                           "--max-steps 100 --metrics " + metrics.string() + " --tensorboard " + dir.string());
  ASSERT_EQ(rc, 0) << out;
  const fs::path file = event_file(dir);
  EXPECT_NE(out.find("events  " + file.string() + " (tensorboard --logdir " + dir.string() + ")"), std::string::npos) << out;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  EXPECT_TRUE(std::regex_match(file.filename().string(),
                               std::regex("events\\.out\\.tfevents\\.[0-9]+\\." + std::string(host) + "\\.[0-9]+\\.loupe")))
      << file;
  const auto events = events_of(file);
  std::vector<std::string> lines;
  {
    std::ifstream f(metrics);
    for (std::string l; std::getline(f, l);) lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 2u);

  int64_t last_step = 0;
  int epochs_seen = 0, points = 0, configs = 0, sessions = 0;
  const double now = double(time(nullptr));
  for (size_t i = 1; i < events.size(); ++i) {
    const tensorboard::Event& e = events[i];
    EXPECT_NEAR(e.wall_time(), now, 3600);
    EXPECT_GE(e.wall_time(), events[i - 1].wall_time());
    const std::string config = config_text(e);
    if (!config.empty()) {  // once, at the first epoch
      ++configs;
      EXPECT_EQ(e.step(), 1);
      EXPECT_NE(config.find("| model | mnist_mlp |"), std::string::npos) << config;
      EXPECT_NE(config.find("| batch | 256 |"), std::string::npos) << config;
      continue;
    }
    if (const auto hp = hparams_of(e); !hp.empty()) {  // the same run's hyperparameters, once
      ++sessions;
      EXPECT_EQ(hp.at("model"), "mnist_mlp");
      EXPECT_EQ(hp.at("seed"), std::to_string(1.0));
      EXPECT_EQ(hp.at("gpus"), std::to_string(1.0));
      continue;
    }
    const auto v = values_of(e);
    if (v.count("step/loss")) {  // a point: global steps increase, within the 200 run
      ++points;
      EXPECT_GT(e.step(), last_step);
      EXPECT_LE(e.step(), 200);
      last_step = e.step();
      EXPECT_TRUE(std::isfinite(v.at("step/loss")) && v.at("step/loss") > 0);
      EXPECT_GT(v.at("step/samples_per_sec"), 0);
      EXPECT_EQ(v.size(), 2u);
      continue;
    }
    ++epochs_seen;  // an epoch: its step is the epoch, its values the JSON line's numbers
    ASSERT_LE(epochs_seen, 2);
    EXPECT_EQ(e.step(), epochs_seen);
    const std::string& json = lines[size_t(epochs_seen - 1)];
    size_t expected = 0;
    for (const auto& [name, unused] : loupe::instrument::numeric_fields({})) {
      const std::string key = "\"" + name + "\":";
      const size_t at = json.find(key);
      ASSERT_NE(at, std::string::npos) << name;
      const std::string text = json.substr(at + key.size(), json.find_first_of(",}", at + key.size()) - at - key.size());
      const std::string tag = "epoch/" + name;
      if (is_constant(name)) {
        EXPECT_EQ(v.count(tag), 0u) << tag << " is a run constant: in run/config, not a chart";
        continue;
      }
      if (text.rfind("null", 0) == 0) {
        EXPECT_EQ(v.count(tag), 0u) << tag << " is null in the JSON line";
        continue;
      }
      ++expected;
      ASSERT_EQ(v.count(tag), 1u) << tag;
      EXPECT_EQ(v.at(tag), float(std::strtod(text.c_str(), nullptr))) << tag << " " << text;
    }
    EXPECT_EQ(v.size(), expected);
    EXPECT_EQ(v.count("epoch/gpu_util_mean"), 0u);  // a CPU run measures no GPU
    EXPECT_GT(v.at("epoch/samples_per_sec"), 0);
  }
  EXPECT_EQ(epochs_seen, 2);
  EXPECT_EQ(configs, 1);
  EXPECT_EQ(sessions, 1);
  for (const char* run : {"train", "test"})
    EXPECT_EQ(events_of(event_file(dir / run)).size(), 3u) << run << ": the version and one accuracy and loss per epoch";
  EXPECT_GE(points, 1) << "no running loss arrived in 200 steps";
  std::printf("%zu events: %d step points, %d epochs\n", events.size(), points, epochs_seen);
  fs::remove_all(dir);
  fs::remove(metrics);
}

TEST(TensorBoardTrain, OnlyTrainTakesIt) {
  auto [rc, out] = run_cli("bench mnist_mlp --device cpu --tensorboard /nonexistent/loupe");
  EXPECT_EQ(rc, 2);  // usage errors
  EXPECT_EQ(out, "loupe: loupe bench does not take --tensorboard (see loupe bench --help)\n");
  std::tie(rc, out) = run_cli("train mnist_mlp --device cpu --synthetic --tensorboard ''");
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "loupe: --tensorboard needs a directory for the event files, e.g. --tensorboard runs/mlp\n");
}
