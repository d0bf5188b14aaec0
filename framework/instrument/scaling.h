// Data-parallel scaling from runs' records (`loupe bench MODEL --gpus 1,2,4`, docs/cli.md): each
// world size's figures read back from what `loupe train --metrics` wrote for it, the scaling
// efficiency against the smallest size, and the table, CSV and JSON Lines of the sizes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loupe::instrument {

// One world size's figures, from the records of one run (rank 0's): the median over epochs 2..
// (epoch 1 captures the graph), the last epoch's where there is only one. Unmeasured stays empty.
struct WorldFigures {
  std::optional<double> samples_per_sec;  // the world's (all ranks)
  std::optional<double> nccl_share, nccl_exposed_share, bus_gbps;  // from a run with --busy
  std::string why;  // why samples/s is missing ("" when it is there)
};
// jsonl: what `loupe train --metrics` wrote for a world of `gpus`.
WorldFigures world_figures(const std::string& jsonl, int gpus);

struct WorldRow {
  int gpus = 1;
  WorldFigures f;
};
// The table: per size samples/s, per GPU, scaling efficiency against the smallest size, NCCL's
// share (unhidden share) and the bus bandwidth. One line per row, a header first.
std::string world_table(const std::vector<WorldRow>& rows);
// samples/s at N GPUs / (N / N0 x samples/s at N0), N0 the smallest size measured; empty if unknown.
std::optional<double> scaling_efficiency(const std::vector<WorldRow>& rows, size_t i);

// The CSV's header line (with its newline), then the rows of one configuration appended as CSV lines
// and as JSON Lines (the CSV's columns as fields, null where unmeasured).
extern const char* const kScalingCsvHeader;
void add_scaling_rows(const std::string& model, int64_t batch, const std::string& precision,
                      const std::vector<WorldRow>& rows, std::string& csv, std::string& json);

}  // namespace loupe::instrument
