// `loupe train --gpus N` (docs/multi-gpu.md): the launcher, a process that starts the ranks. A
// rank's side (joining the world, the world's line per epoch) is run/world.h's.
#pragma once
#include "cli/options.h"

namespace loupe::cli {

// This process is a rank: WORLD_SIZE is set (by loupe's launcher or by torchrun).
bool is_rank();
// --gpus N > 1 or --nnodes K > 1 asked for ranks that this process must start.
bool wants_ranks(const Options& o);

// Starts this host's ranks (the same command line) and waits: 0 when all end well, else the first
// failing rank's status. Refuses, in one sentence, a build without NCCL or too few GPUs.
int launch_ranks(const Options& o);

}  // namespace loupe::cli
