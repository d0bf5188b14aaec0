// `loupe compare`: runs' JSONL (train --metrics, bench --json) read, grouped by (model, batch,
// precision), summarised as medians over epochs 2.., and set side by side with ratios to the first
// run. The arithmetic is here, apart from the command (cli/cmd_compare.cpp), so tests can check it.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "instrument/flat_json.h"

namespace loupe::instrument {

// The records of one file, in order. Throws loupe::Error for an unreadable file ("cannot read
// 'F': ..."), a line that is not a JSON object ("F:LINE: not a JSON object: ...") or a record
// without model, batch, precision and samples_per_sec, or a file with no record at all.
std::vector<FlatRecord> read_run(const std::string& path);

// One (model, batch, precision) of one run, summarised.
struct RunSummary {
  std::string label, model, precision, gpu;
  bool cpu = false;  // the run was on the CPU (its records' device "cpu"): its table shows the CPU's figures
  double batch = 0;
  int records = 0;   // the records the medians are over
  std::string note;  // how they were chosen: "epochs 2..5", "epoch 1 only (includes warm-up)", "bench row"
  std::optional<double> samples_per_sec, busy_pct, mfu_pct, j_per_sample, cost_per_million;
  // The CPU's own figures (any device; a CPU run has no others): GFLOP/s achieved, cores kept busy
  // (CPU seconds / wall seconds), the process's peak resident memory in MiB; the share (%) of its
  // threads' ready time they waited for a core. The console shows them where a section has a CPU run;
  // the CSV always has the first three.
  std::optional<double> gflops, cpu_cores, rss_mib, cpu_wait_pct;
};

// The median of the values (nothing for none).
std::optional<double> median(std::vector<double> v);

// The groups of one run in the order they first appear. Per group the records of epochs 2.. (all
// of them when there is only epoch 1); per figure the median over the records that measured it.
// price_per_hour (>= 0) gives the cost per million samples from the median samples/s; otherwise the
// median of the records' own cost_per_million_samples.
std::vector<RunSummary> summarize_run(const std::vector<FlatRecord>& records, const std::string& label,
                                      std::optional<double> price_per_hour);

// One table: the rows to set side by side, the first being the reference.
struct CompareSection {
  std::string title;  // "mnist_mlp, batch 128, fp32", or "mnist_mlp, batch 128, fp32 / fp16" for one-group runs
  std::vector<RunSummary> rows;
};

// Runs of one group each: one section of all of them (*warning set when their models differ). Else
// one section per (model, batch, precision), in order of first appearance (*warning set when no
// group is in two runs).
std::vector<CompareSection> compare_sections(const std::vector<std::vector<RunSummary>>& runs, std::string* warning);

// value / reference, when both are measured and the reference is not 0.
std::optional<double> ratio(std::optional<double> value, std::optional<double> reference);

// The console table of a section, and its rows as CSV (header first; empty cells for n/a). A section
// of GPU runs only shows the GPU's figures, all of them; one with a CPU run shows samples/s and each
// other figure (the CPU's, then the GPU's) that at least one of its runs measured. The CSV has the
// CPU's figures too (gflops, cpu_cores, rss_mib, each with its ratio), after the table's.
std::string format_section(const CompareSection& s);
std::string compare_csv_header();
std::vector<std::string> compare_csv_rows(const CompareSection& s);

}  // namespace loupe::instrument
