// `loupe train --gpus N` (docs/plans/data_parallel.md): the launcher side (a process that starts
// the ranks) and the rank side (joining the world, the watchdog, the world's line per epoch).
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "instrument/report.h"
#include "instrument/straggler.h"
#include "cli/options.h"
#include "dist/comm.h"
#include "dist/ddp.h"

namespace loupe::cli {

// This process is a rank: WORLD_SIZE is set (by loupe's launcher or by torchrun).
bool is_rank();
// --gpus N > 1 or --nnodes K > 1 asked for ranks that this process must start.
bool wants_ranks(const Options& o);

// Starts this host's ranks (the same command line) and waits: 0 when all end well, else the first
// failing rank's status. Refuses, in one sentence, a build without NCCL or too few GPUs.
int launch_ranks(const Options& o);

// A rank's membership of the world: the communicator, and a thread that polls NCCL's
// asynchronous errors and ends the process (aborting the communicator) when one appears, so a
// lost peer never leaves a rank waiting forever.
class World {
 public:
  // Joins the world the environment describes; call before any other CUDA work of the process.
  explicit World(const Options& o);
  ~World();
  dist::Communicator& comm() { return *comm_; }
  int rank() const { return comm_->rank(); }
  int size() const { return comm_->world(); }
  // Ctrl-C or an error: end without a collective and without waiting for peers.
  void abort();
  // The world's figures in r (every rank calls it at the same point: a collective) and, on rank
  // 0, the lines that say them ("" on the others): the world's, then its slowest rank beside the
  // others (instrument/straggler.h). data_wait_host_time: a step's data wait is its host's own time
  // (resident data), so the straggler may be judged from it without --busy (instrument/advice.h).
  std::string fill(instrument::EpochReport& r, const dist::GradReducer& reducer, std::optional<double> baseline,
                   bool data_wait_host_time);
  // The verdict on the slowest rank that the last fill judged (for advice).
  const instrument::Straggler& straggler() const { return straggler_; }

 private:
  void stop_watchdog();
  std::unique_ptr<dist::Communicator> comm_;
  std::atomic<bool> stop_{false};
  bool aborted_ = false;  // abort() ran: no goodbye at the end
  instrument::Straggler straggler_;
  std::thread watchdog_;
};

}  // namespace loupe::cli
