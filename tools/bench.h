// loupe bench and loupe sweep: for each (model, batch, precision) a warm-up, then a timed stretch
// of training steps on synthetic data of the model's shapes resident on the device, reported as
// one epoch report each (the fields of README's metrics table) and one table row.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "instrument/report.h"
#include "train/trainer.h"

namespace loupe::tools {

struct BenchOptions {
  std::vector<std::string> models;
  std::vector<int64_t> batches;        // empty: each model's recipe batch
  std::vector<std::string> precisions{"fp32"};
  int64_t warmup = 10, steps = 100;    // steps per measurement (fewer when the data set is smaller)
  Device device = kCPU;
  bool nvml = true, busy = false, channels_last = false;
  uint64_t seed = 1;
};

// Runs every combination, printing the table as it goes; combinations that cannot run here (tf32 on
// the CPU) are listed as skipped with the reason. Returns the reports of those that ran.
std::vector<instrument::EpochReport> run_bench(const BenchOptions& o);

// The report's "what ran" and time fields from an epoch's statistics (the monitor fills the rest).
instrument::EpochReport epoch_report(const std::string& model, Device dev, int64_t batch, const train::EpochStats& st,
                                     int epochs);

// "32,128,512" -> {32, 128, 512}; "fp32,tf32" -> {"fp32", "tf32"}. Errors name the bad item.
std::vector<int64_t> parse_int_list(const std::string& s, const std::string& flag);
std::vector<std::string> parse_list(const std::string& s);

}  // namespace loupe::tools
