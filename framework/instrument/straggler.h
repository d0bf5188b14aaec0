// Data parallelism (--gpus N): which rank the others wait for. The ranks of a step meet in NCCL's
// all-reduce, so their step times come out nearly equal; the straggler is the rank whose peers'
// GPUs wait in NCCL for it. Every rank gathers these figures at each epoch's end (run/world.h);
// the rule that judges them is advice.h's judge_straggler, beside advice's other thresholds.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "instrument/report.h"

namespace loupe::instrument {

// One rank's figures of the epoch, as its EpochReport has them (empty: not measured there).
struct RankFigures {
  int rank = 0;
  Opt step_ms_p50, step_ms_p95, data_wait_ms_p50, issue_ms_p50;
  Opt nccl_exposed_share;  // --busy only
};

// The verdict. How it was judged (basis):
//   Nccl: every rank measured its unhidden NCCL share (--busy); the slowest rank is the one that
//         waited least in NCCL (its peers waited for it);
//   DataWait: without it, from the step's wait for its batch, where that is the host's own time.
struct Straggler {
  enum class Basis { None, Nccl, DataWait };
  Basis basis = Basis::None;
  std::optional<int> rank;  // the slowest rank; empty: none judged, and `why` says why
  bool holds_back = false;  // the others wait for it as much as advice.cpp's thresholds call a straggler
  // How much more of the time the others waited for it: with Nccl their median unhidden NCCL share
  // less its own; with DataWait its data wait beyond the others' median, over its step.
  Opt share;
  RankFigures slowest;  // its figures
  RankFigures others;   // the median of every other rank's, figure by figure (rank -1)
  std::string why;
};

// The world line's second line (rank 0, after "world N GPUs: ..."): the slowest rank's step p50/p95
// and data wait beside the others', and with --busy every rank's unhidden NCCL share. An unmeasured
// figure reads n/a. No trailing newline.
std::string straggler_line(const std::vector<RankFigures>& ranks, const Straggler& s);

// The median of the measured (finite) values; empty when none is.
Opt median_of(std::vector<Opt> values);

}  // namespace loupe::instrument
