#include "run/world.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <vector>

#include "core/error.h"
#include "instrument/advice.h"
#include "instrument/report_io.h"

namespace loupe::run {

namespace {
// ncclCommAbort, waited for at most `seconds`: over sockets, with the peer gone, it did not return
// (two H200s, check_ddp's lost peer: the rank said it was ending and trained on). The process ends
// soon after either way, and its end frees what the abort would have.
bool abort_within(parallel::Communicator& comm, double seconds) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread([&comm, done] {
    comm.abort();
    done->store(true);
  }).detach();
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done->load() && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return done->load();
}
}  // namespace

World::World(const std::atomic<bool>* interrupted) : interrupted_(interrupted) {
  std::string why;
  comm_ = parallel::join_world(&why);
  if (!comm_) throw Error("this rank cannot join the world: " + why);
  watchdog_ = std::thread([this] {
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (stop_.load()) break;
      // After Ctrl-C every rank stops by itself, and a peer that ended first is no news.
      if (interrupted_ && interrupted_->load()) continue;
      // The lifelines first: a poll that cannot block, where NCCL's error query may wait on a
      // proxy stuck in a dead peer's socket.
      std::string err = comm_->lost_peer();
      if (!err.empty()) {
        std::fprintf(stderr, "loupe: rank %d: %s; ending this rank\n", comm_->rank(), err.c_str());
      } else if (!(err = comm_->async_error()).empty()) {
        std::fprintf(stderr, "loupe: rank %d: NCCL reports '%s' (a peer lost or failed); ending this rank\n",
                     comm_->rank(), err.c_str());
      } else {
        continue;
      }
      abort_within(*comm_, 2.0);
      std::_Exit(1);
    }
  });
}

// Destroyed by an exception (an error on this rank only): the communicator is aborted, never
// destroyed, since ncclCommDestroy waits for the peers, which wait in a collective this rank will
// not enter; that wait had hung the whole world before the error was printed. The launcher then
// stops the other ranks.
World::~World() {
  if (std::uncaught_exceptions() > 0 && !aborted_) {
    std::fprintf(stderr, "loupe: rank %d of %d failed; aborting its communicator (the error follows)\n", rank(), size());
    abort();
  } else {
    stop_watchdog();
    if (!aborted_) comm_->goodbye();  // an end, not a death, for the peers' watchdogs
  }
}

void World::stop_watchdog() {
  stop_.store(true);
  if (watchdog_.joinable()) watchdog_.join();
}

void World::abort() {
  aborted_ = true;
  stop_watchdog();
  if (!abort_within(*comm_, 3.0))
    std::fprintf(stderr, "loupe: rank %d: NCCL's abort did not return within 3 s; ending without it\n", rank());
}

namespace {
// Per rank, gathered as float64: samples, training seconds, samples/s, then the straggler's figures
// (step p50 and p95, data wait p50, issue p50, unhidden NCCL share), NaN where unmeasured.
constexpr int kFigures = 8;

double or_nan(const std::optional<double>& v) { return v ? *v : std::numeric_limits<double>::quiet_NaN(); }
std::optional<double> if_measured(double v) { return std::isfinite(v) ? std::optional<double>(v) : std::nullopt; }

// Rank 0's world line: samples/s (the ranks'), scaling efficiency, bytes and NCCL's time per step.
std::string world_line(const instrument::EpochReport& r, const std::vector<double>& v, const parallel::GradReducer& red) {
  std::string line = "  world " + std::to_string(r.world_size) + " GPUs: " +
                     (r.world_samples_per_sec ? instrument::thousands(*r.world_samples_per_sec) : "n/a") +
                     " samples/s (ranks";
  for (int k = 0; k < r.world_size; ++k) line += (k ? ", " : " ") + instrument::thousands(v[size_t(kFigures * k + 2)]);
  line += ")  scaling efficiency ";
  char buf[64];
  if (r.scaling_efficiency) std::snprintf(buf, sizeof buf, "%.1f%%", 100 * *r.scaling_efficiency);
  // Where the figure comes from when this run cannot know it: one GPU's samples/s at this batch.
  line += r.scaling_efficiency ? buf
                               : "n/a (`loupe bench " + r.model + " --gpus 1," + std::to_string(r.world_size) +
                                     "` measures it; or --baseline X, one GPU's samples/s at this batch)";
  std::snprintf(buf, sizeof buf, "  all-reduce %.1f MiB/step in ", double(red.bytes_per_step()) / (1 << 20));
  line += buf + red.describe();
  if (!r.nccl_share) return line + "  NCCL time n/a (--busy measures it)";
  std::snprintf(buf, sizeof buf, " %.1f%% of the time (%.1f%% not hidden)", 100 * *r.nccl_share,
                100 * r.nccl_exposed_share.value_or(0));
  line += std::string("  NCCL") + buf;
  if (r.bus_gbps) {
    std::snprintf(buf, sizeof buf, ", bus %.1f GB/s", *r.bus_gbps);
    line += buf;
  }
  return line;
}
}  // namespace

std::string World::fill(instrument::EpochReport& r, const parallel::GradReducer& red, std::optional<double> baseline,
                        bool data_wait_host_time) {
  // One all-gather of every rank's figures, on the device.
  Tensor mine = from_vector(std::vector<double>{double(r.samples), r.train_seconds, r.samples_per_sec,
                                                or_nan(r.step_ms_p50), or_nan(r.step_ms_p95), or_nan(r.data_wait_ms_p50),
                                                or_nan(r.issue_ms_p50), or_nan(r.nccl_exposed_share)},
                            Shape{kFigures}, kCUDA);
  Tensor all = empty(Shape{kFigures * int64_t(size())}, DType::f64, kCUDA);
  comm_->all_gather(mine, all);
  const std::vector<double> v = all.to_vector<double>();
  double samples = 0, slowest = 0;
  std::vector<instrument::RankFigures> ranks;
  for (int k = 0; k < size(); ++k) {
    const double* f = &v[size_t(kFigures * k)];
    samples += f[0];
    slowest = std::max(slowest, f[1]);
    ranks.push_back({k, if_measured(f[3]), if_measured(f[4]), if_measured(f[5]), if_measured(f[6]), if_measured(f[7])});
  }
  r.rank = rank();
  r.world_size = size();
  const int64_t allreduce_bytes = red.bytes_per_step();
  r.allreduce_bytes_per_step = double(allreduce_bytes);
  if (slowest > 0) r.world_samples_per_sec = samples / slowest;
  if (baseline && r.world_samples_per_sec) r.scaling_efficiency = *r.world_samples_per_sec / (size() * *baseline);
  // NCCL's bus bandwidth: what each rank all-reduced, times 2(W-1)/W, over its time in NCCL kernels.
  if (r.nccl_share && *r.nccl_share > 0 && size() > 1 && r.steps > 0)
    r.bus_gbps = double(allreduce_bytes) * double(r.steps) * 2.0 * (size() - 1) / size() /
                 (*r.nccl_share * r.train_seconds) / 1e9;
  // The rank the others wait for: every rank judges the same figures alike.
  straggler_ = instrument::judge_straggler(ranks, data_wait_host_time);
  if (straggler_.rank) r.slowest_rank = double(*straggler_.rank);
  r.straggler_share = straggler_.share;
  if (rank() != 0) return "";
  return world_line(r, v, red) + "\n" + instrument::straggler_line(ranks, straggler_);
}

}  // namespace loupe::run
