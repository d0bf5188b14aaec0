// A data-parallel rank's membership of its world (docs/multi-gpu.md): the communicator, the
// watchdog that ends a rank whose peer is lost, and the world's figures and lines per epoch. The
// processes are started by `loupe train --gpus N` (cli/data_parallel.h) or torchrun.
#pragma once
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "instrument/report.h"
#include "instrument/straggler.h"
#include "parallel/comm.h"
#include "parallel/ddp.h"

namespace loupe::run {

// A rank's membership of the world: the communicator, and a thread that polls NCCL's
// asynchronous errors and ends the process (aborting the communicator) when one appears, so a
// lost peer never leaves a rank waiting forever.
class World {
 public:
  // Joins the world the environment describes; call before any other CUDA work of the process.
  // `interrupted`: a stop asked from outside (Ctrl-C), after which a peer that ended first is no news.
  explicit World(const std::atomic<bool>* interrupted = nullptr);
  ~World();
  parallel::Communicator& comm() { return *comm_; }
  int rank() const { return comm_->rank(); }
  int size() const { return comm_->world(); }
  // Ctrl-C or an error: end without a collective and without waiting for peers.
  void abort();
  // The world's figures in r (every rank calls it at the same point: a collective) and, on rank
  // 0, the lines that say them ("" on the others): the world's, then its slowest rank beside the
  // others (instrument/straggler.h). data_wait_host_time: a step's data wait is its host's own time
  // (resident data), so the straggler may be judged from it without --busy (instrument/advice.h).
  std::string fill(instrument::EpochReport& r, const parallel::GradReducer& reducer, std::optional<double> baseline,
                   bool data_wait_host_time);
  // The verdict on the slowest rank that the last fill judged (for advice).
  const instrument::Straggler& straggler() const { return straggler_; }

 private:
  void stop_watchdog();
  std::unique_ptr<parallel::Communicator> comm_;
  std::atomic<bool> stop_{false};
  const std::atomic<bool>* interrupted_ = nullptr;
  bool aborted_ = false;  // abort() ran: no goodbye at the end
  instrument::Straggler straggler_;
  std::thread watchdog_;
};

}  // namespace loupe::run
