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

TensorBoardWriter::TensorBoardWriter(const std::string& dir) : impl_(std::make_unique<Impl>()) {
  impl_->f = open_event_file(dir, impl_->path);
  tensorboard::Event e;
  e.set_wall_time(unix_seconds());
  e.set_file_version("brain.Event:2");
  impl_->event(e);
  flush();
}

TensorBoardWriter::~TensorBoardWriter() {
  if (impl_ && impl_->f) std::fclose(impl_->f);  // fclose flushes
}

const std::string& TensorBoardWriter::path() const { return impl_->path; }

void TensorBoardWriter::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  tensorboard::Event e;
  e.set_wall_time(unix_seconds());
  e.set_step(step);
  tensorboard::Summary* s = e.mutable_summary();
  for (const auto& [tag, value] : values) {
    tensorboard::Summary::Value* v = s->add_value();
    v->set_tag(tag);
    v->set_simple_value(float(value));
  }
  impl_->event(e);
}

void TensorBoardWriter::flush() {
  if (std::fflush(impl_->f) != 0)
    throw Error("--tensorboard: cannot write to '" + impl_->path + "': " + std::strerror(errno));
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
  std::vector<std::pair<std::string, double>> values;
  for (const auto& [name, v] : numeric_fields(r))
    if (v) values.emplace_back("epoch/" + name, *v);
  scalars(r.epoch, values);
  flush();
}

}  // namespace loupe::instrument
