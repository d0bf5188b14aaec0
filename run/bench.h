// The bench (`loupe bench`, `loupe sweep`; docs/cli.md): for each (model, batch, precision) a run
// (run/run.h) on synthetic data of the model's shapes resident on the device, whose warm-up steps
// are followed by a timed stretch, reported as one epoch report each (the fields of
// docs/profiling.md's metrics table) and one table row.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "instrument/report.h"
#include "instrument/report_io.h"
#include "train/trainer.h"

namespace loupe::run {

struct BenchConfig {
  std::vector<std::string> models;
  std::vector<int64_t> batches;        // empty: each model's recipe batch
  std::vector<Precision> precisions{Precision::FP32};
  int64_t warmup = 10, steps = 100;    // at least `steps` timed steps per measurement (cycling through the
  double min_seconds = -1;             // data), and at least min_seconds of them: < 0 means 2 s on a GPU
                                       // (NVML's utilisation is a coarse average: short runs misread it), 0 on the CPU
  int rounds = 1;                      // measure every combination this often, in turn; keep the fastest
  Device device = kCPU;
  bool nvml = true, busy = false, channels_last = false;
  train::GraphMode graph = train::GraphMode::Auto;
  uint64_t seed = 1;
  double price_per_hour = -1;          // >= 0: each row's cost per million samples at this machine price
  std::string loss;                    // --loss: "" is each model's recipe's
  // Read between steps and between combinations: once set, run_bench throws train::Interrupted.
  const std::atomic<bool>* stop = nullptr;
  // Called after each row, with the table so far (each combination's fastest round yet).
  std::function<void(const std::vector<instrument::EpochReport>&)> on_row;
};

// bench's and sweep's --json and --csv, written as the rows come (docs/cli.md, "loupe bench"), so
// that an interrupted run keeps every finished row: the CSV gains each row as it finishes
// (append_csv; rounds that replace rows rewrite it whole instead), the JSON Lines are rewritten
// whole into PATH.tmp and renamed over PATH. Either file is whole at every moment.
class BenchFiles {
 public:
  BenchFiles(std::string json, std::string csv, bool append_csv);
  // The table so far; the first call creates the files (also for no rows).
  void write(const std::vector<instrument::EpochReport>& rows);
  size_t rows() const { return rows_; }
  // "a.jsonl and b.csv", "" when no file is asked for.
  std::string names() const;
  // What the end of a run prints: "wrote a.jsonl (JSON Lines, one record per row)" and "wrote b.csv".
  void say_written() const;

 private:
  std::string json_, csv_;
  bool append_csv_;
  bool opened_ = false;
  size_t rows_ = 0;
  std::unique_ptr<instrument::CsvWriter> csv_file_;
};

// Runs every combination, printing the table as it goes; combinations that cannot run here (tf32 on
// the CPU) are listed as skipped with the reason. With rounds > 1 it runs the whole list that many
// times (the host's speed drifts: alternating rounds spread the drift over all rows) and ends with
// the table of each combination's fastest round. Returns one report per combination that ran.
std::vector<instrument::EpochReport> run_bench(const BenchConfig& c);

// What a sweep shows, in a few lines: the fastest setting; per precision, how throughput grew with
// the batch and from which batch the GPU was busy (CUPTI with --busy, else NVML) at least 90 %, or
// on the CPU its GFLOP/s and cores used at the smallest and largest batch; and each precision
// against the first one at every batch both ran.
std::string sweep_summary(const std::vector<instrument::EpochReport>& rows);

}  // namespace loupe::run
