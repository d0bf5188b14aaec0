// `loupe bench MODEL --gpus 1,2`: data-parallel scaling measured in one command. Each world size
// is a `loupe train MODEL --synthetic --resident` run of this same binary (so the figure is the one
// `loupe train --gpus N` gets, launcher and NCCL included), its records read back from --metrics.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "cli/options.h"

namespace loupe::cli {

// The command: every model x batch x precision x size; --csv/--json write the rows.
int bench_world(const Options& o, const std::vector<std::string>& models);

}  // namespace loupe::cli
