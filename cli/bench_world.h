// `loupe bench MODEL --gpus 1,2`: data-parallel scaling measured in one command. Each world size
// is a `loupe train MODEL --synthetic --resident` run of this same binary (so the figure is the one
// `loupe train --gpus N` gets, launcher and NCCL included), its records read back from --metrics.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "cli/options.h"

namespace loupe::cli {

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

// The command: every model x batch x precision x size; --csv/--json write the rows.
int bench_world(const Options& o, const std::vector<std::string>& models);

}  // namespace loupe::cli
