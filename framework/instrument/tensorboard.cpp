// TensorBoard event files through TensorBoard's protos (protobuf) and Boost.CRC's CRC32C; the
// record framing is TFRecord's (tensorflow/core/lib/io/record_writer.cc). tensorboard.h.
#include "instrument/tensorboard.h"

#include <unistd.h>

#include <boost/crc.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "instrument/report_io.h"
#include "loupe/tb_hparams.pb.h"
#include "tensorboard/compat/proto/event.pb.h"

namespace loupe::instrument {
namespace {

// CRC-32C (Castagnoli), reflected, as TFRecord uses it.
using Crc32c = boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true>;

uint32_t masked_crc32c(const void* data, size_t n) {
  Crc32c crc;
  crc.process_bytes(data, n);
  const uint32_t c = crc.checksum();
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

// Little-endian, whatever the host's order.
void put_le(char* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out[i] = char((v >> (8 * i)) & 0xff);
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return "localhost";
  return buf;
}

std::FILE* open_event_file(const std::string& dir, std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw Error("--tensorboard: cannot create the directory '" + dir + "': " + ec.message() +
                "; give a directory that can be created and written");
  path = (std::filesystem::path(dir) / ("events.out.tfevents." + std::to_string(int64_t(unix_seconds())) + "." +
                                        hostname() + "." + std::to_string(getpid()) + ".loupe"))
             .string();
  std::FILE* f = std::fopen(path.c_str(), "wbx");  // never over another file
  if (!f)
    throw Error("--tensorboard: cannot create the event file '" + path + "': " + std::strerror(errno) +
                "; check that the directory is writable");
  return f;
}

// The report's fields that stay the same for a whole run: shown once as text, not as flat charts.
bool run_constant(const std::string& field) {
  static const char* const kConstant[] = {"seed",  "lr",          "threads",         "batch",           "epoch",
                                          "epochs", "peak_tflops", "mem_total_bytes", "flops_per_sample", "rank",
                                          "world_size"};
  for (const char* c : kConstant)
    if (field == c) return true;
  return false;
}

std::string shortest(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// "run/config": a markdown table of what the run was (its constants) and where it ran.
std::string config_table(const EpochReport& r) {
  std::vector<std::pair<std::string, std::string>> rows{
      {"model", r.model},
      {"device", r.device + (r.device_name.empty() || r.device_name == r.device ? "" : " (" + r.device_name + ")")},
      {"precision", precision_name(r.precision)},
      {"batch", std::to_string(r.batch) + (r.world_size > 1 ? " per GPU" : "")},
      {"epochs", std::to_string(r.epochs)},
      {"learning rate", r.lr ? shortest(*r.lr) : "n/a"},
      {"seed", r.seed ? std::to_string(*r.seed) : "n/a"},
      {"CPU threads", std::to_string(r.threads)},
      {"GPUs (data parallel)", std::to_string(r.world_size)},
      {"peak", r.peak_tflops ? shortest(*r.peak_tflops) + " TFLOP/s (" + r.peak_source + ")" : "n/a"},
      {"FLOPs per sample", r.flops_per_sample ? shortest(*r.flops_per_sample) : "n/a"},
      {"CPU", r.cpu_model},
      {"run", r.run_id + ", started " + r.started_at}};
  std::string t = "| | |\n|---|---|\n";
  for (const auto& [k, v] : rows) t += "| " + k + " | " + (v.empty() ? "n/a" : v) + " |\n";
  return t;
}

// The run's hyperparameters for TensorBoard's HParams dashboard: one session (this run) with its
// model, precision, batch, learning rate, epochs, seed, threads and GPUs; the dashboard takes the
// metrics from the run's scalars (epoch/test_acc, epoch/samples_per_sec, ...).
std::string session_start(const EpochReport& r, double now) {
  loupe::tb::HParamsSessionStart m;
  m.set_version(0);
  loupe::tb::SessionStartInfo* info = m.mutable_session_start_info();
  info->set_start_time_secs(now);
  auto& h = *info->mutable_hparams();
  h["model"].set_string_value(r.model);
  h["precision"].set_string_value(precision_name(r.precision));
  h["device"].set_string_value(r.device_name.empty() ? r.device : r.device_name);
  h["batch"].set_number_value(double(r.batch));
  h["epochs"].set_number_value(double(r.epochs));
  if (r.lr) h["lr"].set_number_value(*r.lr);
  if (r.seed) h["seed"].set_number_value(double(*r.seed));
  h["threads"].set_number_value(double(r.threads));
  h["gpus"].set_number_value(double(r.world_size));
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

}  // namespace

bool tensorboard_available() { return true; }

std::string tensorboard_missing() { return ""; }

struct TensorBoardWriter::Impl {
  std::string path;
  std::FILE* f = nullptr;

  // One TFRecord: length, masked CRC of the length, the bytes, masked CRC of the bytes.
  void record(const std::string& data) {
    char head[12], tail[4];
    put_le(head, data.size(), 8);
    put_le(head + 8, masked_crc32c(head, 8), 4);
    put_le(tail, masked_crc32c(data.data(), data.size()), 4);
    if (std::fwrite(head, 1, sizeof head, f) != sizeof head || std::fwrite(data.data(), 1, data.size(), f) != data.size() ||
        std::fwrite(tail, 1, sizeof tail, f) != sizeof tail)
      throw Error("--tensorboard: cannot write to '" + path + "': " + std::strerror(errno));
  }

  void event(const tensorboard::Event& e) {
    std::string bytes;
    if (!e.SerializeToString(&bytes)) throw Error("--tensorboard: cannot serialise an event for '" + path + "'");
    record(bytes);
  }
};

namespace {
std::unique_ptr<TensorBoardWriter::Impl> open_run(const std::string& dir) {
  auto impl = std::make_unique<TensorBoardWriter::Impl>();
  impl->f = open_event_file(dir, impl->path);
  tensorboard::Event e;
  e.set_wall_time(unix_seconds());
  e.set_file_version("brain.Event:2");
  impl->event(e);
  return impl;
}

void close_run(std::unique_ptr<TensorBoardWriter::Impl>& impl) {
  if (impl && impl->f) std::fclose(impl->f);  // fclose flushes
}
}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& dir)
    : impl_(open_run(dir)),
      train_(open_run((std::filesystem::path(dir) / "train").string())),
      test_(open_run((std::filesystem::path(dir) / "test").string())) {
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  close_run(impl_);
  close_run(train_);
  close_run(test_);
}

const std::string& TensorBoardWriter::path() const { return impl_->path; }

namespace {
using Values = std::vector<std::pair<std::string, double>>;

// One Event at `step` and `wall` seconds holding each (tag, value) as a scalar.
tensorboard::Event scalar_event(int64_t step, double wall, const Values& values) {
  tensorboard::Event e;
  e.set_wall_time(wall);
  e.set_step(step);
  tensorboard::Summary* s = e.mutable_summary();
  for (const auto& [tag, value] : values) {
    tensorboard::Summary::Value* v = s->add_value();
    v->set_tag(tag);
    v->set_simple_value(float(value));
  }
  return e;
}

void write_scalars(TensorBoardWriter::Impl& run, int64_t step, const Values& values) {
  run.event(scalar_event(step, unix_seconds(), values));
}

// One Event now at `step` with one value `tag` for `plugin` (its content, if any): the caller fills
// the value's tensor as that plugin's summaries have it.
tensorboard::Summary::Value* plugin_value(tensorboard::Event& e, int64_t step, const std::string& tag,
                                          const char* plugin, const std::string& content = "") {
  e.set_wall_time(unix_seconds());
  e.set_step(step);
  tensorboard::Summary::Value* v = e.mutable_summary()->add_value();
  v->set_tag(tag);
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name(plugin);
  if (!content.empty()) v->mutable_metadata()->mutable_plugin_data()->set_content(content);
  return v;
}
}  // namespace

void TensorBoardWriter::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  write_scalars(*impl_, step, values);
}

void TensorBoardWriter::text(int64_t step, const std::string& tag, const std::string& markdown) {
  tensorboard::Event e;
  // As tensorboard.plugins.text.summary writes it: plugin "text" (its TextPluginData, version 0,
  // is the empty message), a scalar string tensor.
  tensorboard::Summary::Value* v = plugin_value(e, step, tag, "text");
  v->mutable_metadata()->set_data_class(tensorboard::DATA_CLASS_TENSOR);
  tensorboard::TensorProto* t = v->mutable_tensor();
  t->set_dtype(tensorboard::DT_STRING);
  t->mutable_tensor_shape();
  t->add_string_val(markdown);
  impl_->event(e);
}

void TensorBoardWriter::gpu_samples(const std::vector<GpuSample>& samples, double steady_now) {
  const double wall_now = unix_seconds();
  for (const GpuSample& g : samples) {
    Values values{{"gpu/util_pct", g.gpu_util}, {"gpu/mem_used_gib", g.mem_used / double(1 << 30)}};
    if (g.has_power) values.emplace_back("gpu/power_w", g.power_w);
    values.emplace_back("gpu/temp_c", g.temp_c);
    values.emplace_back("gpu/sm_clock_mhz", g.sm_clock_mhz);
    if (g.gpm) {
      values.emplace_back("gpu/sm_active_pct", g.gpm->sm_active);
      values.emplace_back("gpu/sm_occupancy_pct", g.gpm->sm_occupancy);
      values.emplace_back("gpu/tensor_active_pct", g.gpm->tensor_active);
      values.emplace_back("gpu/dram_active_pct", g.gpm->dram_active);
    }
    impl_->event(scalar_event(++gpu_samples_, wall_now - (steady_now - g.t), values));
  }
}

void TensorBoardWriter::hparams(const EpochReport& r) {
  tensorboard::Event e;
  tensorboard::Summary::Value* v =
      plugin_value(e, 0, "_hparams_/session_start_info", "hparams", session_start(r, unix_seconds()));
  // As the plugin's own summaries: a float tensor of shape [0], the metadata being the point.
  tensorboard::TensorProto* t = v->mutable_tensor();
  t->set_dtype(tensorboard::DT_FLOAT);
  t->mutable_tensor_shape()->add_dim()->set_size(0);
  impl_->event(e);
}

void TensorBoardWriter::flush() {
  for (Impl* run : {impl_.get(), train_.get(), test_.get()})
    if (std::fflush(run->f) != 0)
      throw Error("--tensorboard: cannot write to '" + run->path + "': " + std::strerror(errno));
}

void TensorBoardWriter::begin_epoch(double now_s) {
  last_time_ = now_s;
  last_samples_ = 0;
  last_loss_.reset();
}

void TensorBoardWriter::step(int64_t step, int64_t epoch_samples, double now_s, std::optional<double> loss) {
  // The trainer passes the last loss that arrived at every step: a new one differs from it (a NaN
  // counts as equal to a NaN, so a diverged run does not write a point per step).
  if (!loss) return;
  if (last_loss_ && (*last_loss_ == *loss || (std::isnan(*last_loss_) && std::isnan(*loss)))) return;
  last_loss_ = loss;
  std::vector<std::pair<std::string, double>> values{{"step/loss", *loss}};
  if (now_s > last_time_) values.emplace_back("step/samples_per_sec", double(epoch_samples - last_samples_) / (now_s - last_time_));
  last_samples_ = epoch_samples;
  last_time_ = now_s;
  scalars(step, values);
}

void TensorBoardWriter::epoch(const EpochReport& r) {
  if (!config_written_) {
    text(r.epoch, "run/config", config_table(r));
    hparams(r);
    config_written_ = true;
  }
  std::vector<std::pair<std::string, double>> values;
  for (const auto& [name, v] : numeric_fields(r))
    if (v && !run_constant(name)) values.emplace_back("epoch/" + name, *v);
  scalars(r.epoch, values);
  // Train and test on one chart each for accuracy and loss: the same tags in the runs DIR/train
  // and DIR/test.
  std::vector<std::pair<std::string, double>> train{{"epoch/loss", r.train_loss}};
  if (std::isfinite(r.train_acc)) train.insert(train.begin(), {"epoch/accuracy", r.train_acc});  // none: a regression
  write_scalars(*train_, r.epoch, train);
  std::vector<std::pair<std::string, double>> test;
  if (r.test_acc && std::isfinite(*r.test_acc)) test.emplace_back("epoch/accuracy", *r.test_acc);
  if (r.test_loss && std::isfinite(*r.test_loss)) test.emplace_back("epoch/loss", *r.test_loss);
  if (!test.empty()) write_scalars(*test_, r.epoch, test);
  flush();
}

}  // namespace loupe::instrument
