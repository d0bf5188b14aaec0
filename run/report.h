// The run's report (docs/profiling.md, "The epoch report"): an EpochReport from an epoch's
// statistics, and the standard observers (train/observer.h) that show it: the printer of the
// header, epoch lines and events; the progress line; the JSON Lines and CSV records; TensorBoard.
// `loupe train` adds them from its flags; a C++ user adds those it wants to a run::Run.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "instrument/report.h"
#include "instrument/report_io.h"
#include "train/observer.h"

namespace loupe::instrument {
class EpochMonitor;
class TensorBoardWriter;
}  // namespace loupe::instrument

namespace loupe::run {

// The report's "what ran" and time fields from an epoch's statistics (the monitor fills the rest).
instrument::EpochReport epoch_report(const std::string& model, Device dev, int64_t batch, const train::EpochStats& st,
                                     int epochs);

// "cuda:0 (NVIDIA H200)", "cpu (16 threads, GEMM: OpenBLAS)": the header's device.
std::string device_description(Device d);

// The header's lines at the start, each epoch's lines (each piece of advice once) and the run's
// events, on `out`.
class ReportPrinter final : public train::Observer {
 public:
  explicit ReportPrinter(std::FILE* out = stdout) : out_(out) {}
  void run_begin(const RunInfo& info) override;
  void epoch_end(const instrument::EpochReport& r, train::Control&) override;
  void note(const std::string& line) override;

 private:
  std::FILE* out_;
  instrument::EpochConsole console_;
};

// On a terminal: the progress bar while an epoch trains, and "epoch 2/5  evaluating 3/10 batches"
// while it is evaluated; each cleared before anything else is printed (add it before the printer).
class ProgressLine final : public train::Observer {
 public:
  explicit ProgressLine(bool tty = instrument::ProgressBar::stdout_is_tty()) : tty_(tty) {}
  void run_begin(const RunInfo& info) override;
  void epoch_begin(const train::StepInfo& info, train::Control&) override;
  void step_end(const train::StepInfo& info, train::Control&) override;
  void steps_end(const train::StepInfo&) override;
  void eval_batch(int64_t done, int64_t total) override;
  void epoch_end(const instrument::EpochReport&, train::Control&) override { clear(); }
  void note(const std::string&) override { clear(); }

 private:
  void clear();
  bool tty_;
  int epochs_ = 0, epoch_ = 0;
  double t0_ = 0, last_ = -1;
  size_t width_ = 0;
  std::optional<instrument::ProgressBar> bar_;
};

// Every epoch's record, one JSON line each, appended (--metrics); or one CSV row each (--csv).
class RecordFile final : public train::Observer {
 public:
  enum class Format { JsonLines, Csv };
  // `option` names the flag in errors ("--metrics: cannot write ...").
  RecordFile(const std::string& path, Format f, const std::string& option = "");
  void epoch_end(const instrument::EpochReport& r, train::Control&) override;

 private:
  std::unique_ptr<instrument::JsonlWriter> jsonl_;
  std::unique_ptr<instrument::CsvWriter> csv_;
};

// TensorBoard's event file under `dir`: the running loss per step, the GPU's samples and the
// epoch's figures. Says where it writes when the run begins.
class TensorBoardEvents final : public train::Observer {
 public:
  TensorBoardEvents(const std::string& dir, instrument::EpochMonitor& monitor, std::FILE* out = stdout);
  ~TensorBoardEvents() override;
  void run_begin(const RunInfo& info) override;
  void epoch_begin(const train::StepInfo& info, train::Control&) override;
  void step_end(const train::StepInfo& info, train::Control&) override;
  void epoch_end(const instrument::EpochReport& r, train::Control&) override;

 private:
  std::string dir_;
  instrument::EpochMonitor& monitor_;
  std::FILE* out_;
  std::unique_ptr<instrument::TensorBoardWriter> tb_;
  size_t gpu_samples_seen_ = 0;  // NVML's samples already written
};

}  // namespace loupe::run
