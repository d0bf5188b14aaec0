#include "run/report.h"

#include <cstring>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "ops/backend/gemm_cpu.h"
#include "core/thread_pool.h"
#include "instrument/monitor.h"
#include "instrument/run_stamp.h"
#include "instrument/tensorboard.h"
#include "run/run.h"
#include "train/trainer.h"

namespace loupe::run {

instrument::EpochReport epoch_report(const std::string& model, Device dev, int64_t batch, const train::EpochStats& st,
                                     int epochs) {
  instrument::EpochReport r;
  const instrument::RunStamp& stamp = instrument::run_stamp();
  r.run_id = stamp.run_id;
  r.started_at = stamp.started_at;
  r.cpu_model = stamp.cpu_model;
  r.threads = num_threads();
  r.model = model;
  r.device = dev.str();
  r.device_name = dev.is_cuda() ? cuda_runtime()->device_name() : "CPU";
  r.batch = batch;
  r.epoch = st.epoch;
  r.epochs = epochs;
  r.steps = st.steps;
  r.samples = st.samples;
  r.train_loss = st.train_loss;
  r.train_acc = st.train_acc;
  if (st.test_acc >= 0) r.test_acc = st.test_acc;
  if (st.test_loss >= 0) r.test_loss = st.test_loss;
  if (st.loss_scale) {
    r.loss_scale = *st.loss_scale;
    r.skipped_steps = double(st.skipped_steps);
  }
  r.train_seconds = st.train_seconds;
  r.eval_seconds = st.eval_seconds;
  r.graph_steps = double(st.graph_steps);
  if (st.graph_kernels > 0) r.graph_kernels = double(st.graph_kernels);
  r.graph_why = st.graph_why;
  r.epoch_seconds = st.train_seconds + st.eval_seconds;
  r.samples_per_sec = st.samples_per_sec();
  return r;
}

std::string device_description(Device d) {
  if (d.is_cuda()) return d.str() + " (" + cuda_runtime()->device_name() + ")";
  const int n = num_threads();
  return "cpu (" + std::to_string(n) + (n == 1 ? " thread" : " threads") + ", GEMM: " + cpu::gemm_backend_name() + ")";
}

void ReportPrinter::run_begin(const RunInfo& info) {
  for (const auto& [label, text] : info.header) {
    if (label.empty()) std::fprintf(out_, "%s\n", text.c_str());
    else std::fprintf(out_, "%-7s %s\n", label.c_str(), text.c_str());
  }
  std::fflush(out_);
}

void ReportPrinter::epoch_end(const instrument::EpochReport& r, train::Control&) {
  std::fprintf(out_, "%s\n", console_.lines(r).c_str());
  std::fflush(out_);
}

void ReportPrinter::note(const std::string& line) {
  std::fprintf(out_, "%s\n", line.c_str());
  std::fflush(out_);
}

void ProgressLine::run_begin(const RunInfo& info) { epochs_ = info.epochs; }

void ProgressLine::epoch_begin(const train::StepInfo& info, train::Control&) {
  epoch_ = info.epoch;
  t0_ = now_s();
  bar_.emplace(info.epoch, epochs_, info.epoch_steps, tty_);
}

void ProgressLine::step_end(const train::StepInfo& info, train::Control&) {
  if (tty_) bar_->update(info.epoch_step, now_s() - t0_, info.samples, info.loss);
}

void ProgressLine::steps_end(const train::StepInfo&) {
  if (bar_) bar_->finish();
  bar_.reset();
}

void ProgressLine::eval_batch(int64_t done, int64_t total) {
  if (!tty_) return;
  const double now = now_s();
  if (done < total && now - last_ < 0.1) return;  // redrawn at most ten times a second
  last_ = now;
  char buf[96];
  std::snprintf(buf, sizeof buf, "epoch %d/%d  evaluating %lld/%lld batches", epoch_, epochs_, (long long)done,
                (long long)total);
  std::printf("\r%s", buf);
  std::fflush(stdout);
  width_ = std::strlen(buf);
}

void ProgressLine::clear() {
  if (width_) std::printf("\r%s\r", std::string(width_, ' ').c_str());
  width_ = 0;
}

RecordFile::RecordFile(const std::string& path, Format f, const std::string& option) {
  if (f == Format::JsonLines)
    jsonl_ = std::make_unique<instrument::JsonlWriter>(path, instrument::JsonlWriter::Mode::Append, option);
  else
    csv_ = std::make_unique<instrument::CsvWriter>(path, option);
}

void RecordFile::epoch_end(const instrument::EpochReport& r, train::Control&) {
  if (jsonl_) jsonl_->write(r);
  if (csv_) csv_->write(r);
}

TensorBoardEvents::TensorBoardEvents(const std::string& dir, instrument::EpochMonitor& monitor, std::FILE* out)
    : dir_(dir), monitor_(monitor), out_(out) {
  if (!instrument::tensorboard_available()) throw Error(instrument::tensorboard_missing());
  tb_ = std::make_unique<instrument::TensorBoardWriter>(dir);
}

TensorBoardEvents::~TensorBoardEvents() = default;

void TensorBoardEvents::run_begin(const RunInfo&) {
  if (out_) std::fprintf(out_, "events  %s (tensorboard --logdir %s)\n", tb_->path().c_str(), dir_.c_str());
}

void TensorBoardEvents::epoch_begin(const train::StepInfo&, train::Control&) { tb_->begin_epoch(now_s()); }

void TensorBoardEvents::step_end(const train::StepInfo& info, train::Control&) {
  tb_->step(info.step, info.samples, now_s(), info.loss);
}

void TensorBoardEvents::epoch_end(const instrument::EpochReport& r, train::Control&) {
  // The GPU's samples so far, then the epoch (and flushed).
  const std::vector<instrument::GpuSample> g = monitor_.gpu_samples_from(gpu_samples_seen_);
  gpu_samples_seen_ += g.size();
  tb_->gpu_samples(g, instrument::NvmlSampler::now());
  tb_->epoch(r);
}

}  // namespace loupe::run
