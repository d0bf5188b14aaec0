#include "instrument/advice.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace loupe::instrument {
namespace {

constexpr double kDataBound = 0.2;    // the step waited for its batch this share of the time or more
constexpr double kLaunchBound = 0.5;  // GPU busy less than this share of the time...
constexpr double kIssueShare = 0.8;   // ...while issuing the work took this share of the step
constexpr double kGpuBound = 0.9;     // GPU busy at least this share: it is the limit
constexpr double kMemFree = 0.25;     // less than this share of device memory used
constexpr double kLowMfu = 0.02;      // below this share of the fp32 peak the step moves memory, not math
constexpr double kCommBound = 0.1;    // data parallelism: the GPU only communicated this share or more
constexpr int64_t kFewSteps = 20;    // data parallelism: an epoch of fewer global steps is short
constexpr int64_t kTooFewSteps = 10;  // one process: fewer steps tell no bottleneck (warm-up, the loader's start)
constexpr double kBusyHost = 0.2;     // loupe's threads waited for a core this share of their ready time or more
constexpr double kUtilOverSm = 30;    // NVML's utilisation this many points above GPM's SM activity: it overstates
constexpr double kFewSms = 10;        // SMs active less than this percent: a kernel of a few blocks held the GPU
// Data parallelism: the slowest rank (judge_straggler) holds the others back when, with --busy, the
// others' unhidden NCCL share (their median) exceeds its own by this share of the training time or
// more: the others' GPUs ran only NCCL, waiting for its all-reduce, that much more than its GPU did.
constexpr double kStragglerNccl = 0.15;
// Without --busy, and only where the data wait is the host's own time (resident data): its data
// wait p50 is this share of its step p50 or more...
constexpr double kStragglerDataWait = 0.2;
// ...and this many times the others' median data wait plus kStragglerFloorMs (so that waits of zero
// compare: a rank that waits 0.04 ms against 0.01 ms is not a straggler).
constexpr double kStragglerRatio = 2.0;
constexpr double kStragglerFloorMs = 0.05;

std::string pct_whole(double share) {
  char b[16];
  std::snprintf(b, sizeof b, "%.0f%%", share * 100);
  return b;
}

std::string fmt1(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string ms3(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3g", v);
  return b;
}

bool measured(const Opt& v) { return v && std::isfinite(*v); }

// Its batches came late by the data-wait thresholds: a large share of its step, and well beyond
// what the others waited.
bool data_wait_stands_out(const RankFigures& f, const RankFigures& others) {
  if (!measured(f.data_wait_ms_p50) || !measured(f.step_ms_p50) || !measured(others.data_wait_ms_p50)) return false;
  const double own = *f.data_wait_ms_p50, step = *f.step_ms_p50;
  return step > 0 && own >= kStragglerDataWait * step && own >= kStragglerRatio * *others.data_wait_ms_p50 + kStragglerFloorMs;
}

// The median of every rank's figures but ranks[skip]'s, figure by figure.
RankFigures others_median(const std::vector<RankFigures>& ranks, size_t skip) {
  auto median = [&](Opt RankFigures::*field) {
    std::vector<Opt> v;
    for (size_t k = 0; k < ranks.size(); ++k)
      if (k != skip) v.push_back(ranks[k].*field);
    return median_of(v);
  };
  RankFigures m;
  m.rank = -1;
  m.step_ms_p50 = median(&RankFigures::step_ms_p50);
  m.step_ms_p95 = median(&RankFigures::step_ms_p95);
  m.data_wait_ms_p50 = median(&RankFigures::data_wait_ms_p50);
  m.issue_ms_p50 = median(&RankFigures::issue_ms_p50);
  m.nccl_exposed_share = median(&RankFigures::nccl_exposed_share);
  return m;
}

// The index of the rank whose (measured) `field` is the smallest, or the largest, the lower rank on
// a tie; none when every rank's is the same: then no rank is slower than the others.
std::optional<size_t> extreme(const std::vector<RankFigures>& ranks, Opt RankFigures::*field, bool smallest) {
  size_t best = 0;
  bool even = true;
  for (size_t k = 1; k < ranks.size(); ++k) {
    const double v = *(ranks[k].*field), b = *(ranks[best].*field);
    even = even && v == *(ranks[0].*field);
    if ((smallest ? v < b : v > b) || (v == b && ranks[k].rank < ranks[best].rank)) best = k;
  }
  if (even) return std::nullopt;
  return best;
}

std::string gib(double bytes) {
  char b[16];
  std::snprintf(b, sizeof b, "%.1f", bytes / (1 << 30));
  return b;
}

// Other processes held the cores: loupe's threads waited for one. Fewer threads than cores
// (--threads, about the cores it got) stop them waiting on each other at every barrier.
std::string busy_host(const EpochReport& r) {
  if (!r.host_cpu_wait_share || *r.host_cpu_wait_share < kBusyHost) return "";
  std::string fewer;
  if (r.host_cpu_util && *r.host_cpu_util >= 0.5)
    fewer = "; --threads " + std::to_string(std::max<int64_t>(1, int64_t(*r.host_cpu_util + 0.5))) +
            " (the cores it got)";
  return "the machine is busy: loupe's threads waited for a core " + pct_whole(*r.host_cpu_wait_share) +
         " of the time they were ready to run (other processes hold the cores)" + fewer + ", or a quieter machine";
}

// NVML's utilisation is the share of time any kernel ran; GPM's SM activity the share of SMs that
// had work. Far apart, the GPU ran kernels too small to fill it: "busy" is not saturated.
std::string small_kernels(const EpochReport& r, int64_t batch) {
  if (!r.gpu_util_mean || !r.gpu_sm_active || *r.gpu_util_mean - *r.gpu_sm_active < kUtilOverSm) return "";
  std::string o = "NVML's GPU utilisation (" + pct_whole(*r.gpu_util_mean / 100) +
                  ") counts the time any kernel ran, but the SMs were active " + pct_whole(*r.gpu_sm_active / 100) +
                  (r.gpu_sm_occupancy ? " (occupancy " + pct_whole(*r.gpu_sm_occupancy / 100) + ")" : std::string()) +
                  ": ";
  if (*r.gpu_sm_active < kFewSms)
    return o + "kernels of a few blocks held the GPU (a loop such as a recurrent layer's steps, or a reduction on "
               "one block); `loupe profile` names them";
  return o + "its kernels are too small to fill the GPU; a larger --batch" +
         (batch > 0 ? " than " + std::to_string(batch) : std::string()) + " gives each kernel more work";
}

// One rank holds the others back: who, the evidence, and where to look on it.
std::string straggler(const Straggler& s) {
  if (!s.holds_back || !s.rank) return "";
  std::string o = "straggler: rank " + std::to_string(*s.rank) + " holds the others back: ";
  if (s.basis == Straggler::Basis::Nccl)
    o += "the other GPUs ran only NCCL, waiting for its all-reduces, " + pct_whole(*s.share) +
         " of the training time more than its GPU did (unhidden NCCL time " + pct_whole(*s.others.nccl_exposed_share) +
         " against its " + pct_whole(*s.slowest.nccl_exposed_share) + ")";
  else
    o += "its steps waited " + ms3(*s.slowest.data_wait_ms_p50) + " ms of " + ms3(*s.slowest.step_ms_p50) +
         " ms for their batches, the others' " + ms3(*s.others.data_wait_ms_p50) +
         " ms (data wait p50), and each step waits for its slowest rank";
  if (data_wait_stands_out(s.slowest, s.others))
    return o + "; its batches come late: more --workers or --prefetch, fewer other processes on its host (top), "
               "or faster storage for the data files";
  return o + "; look at its GPU's clocks and throttling (--timeline samples every GPU of rank 0's host), its "
             "host's load (top on that host) and its input (--workers, the data files' disk)";
}
}  // namespace

Straggler judge_straggler(const std::vector<RankFigures>& ranks, bool data_wait_host_time) {
  Straggler s;
  if (ranks.size() < 2) {
    s.why = "one process";
    return s;
  }
  auto every = [&](Opt RankFigures::*field) {
    return std::all_of(ranks.begin(), ranks.end(), [&](const RankFigures& f) { return measured(f.*field); });
  };
  std::optional<size_t> k;
  // The peers' GPUs wait in NCCL for the slowest rank's all-reduce, which starts last and so waits
  // least: the smallest unhidden share is the slowest rank, whatever made it slow (GPU or host).
  if (every(&RankFigures::nccl_exposed_share)) {
    k = extreme(ranks, &RankFigures::nccl_exposed_share, true);
    if (!k) s.why = "every rank's unhidden NCCL share is the same";
    else s.basis = Straggler::Basis::Nccl;
  } else if (!data_wait_host_time) {
    // Through the loader the host figures cannot tell the straggler: its peers, held back, wait for
    // their batches too (their slots refill only as their GPUs finish), as long as it does or longer.
    const bool some = std::any_of(ranks.begin(), ranks.end(), [](const RankFigures& f) { return measured(f.nccl_exposed_share); });
    s.why = std::string(some ? "not every rank measured its unhidden NCCL share"
                             : "no unhidden NCCL shares (--busy measures them)") +
            ", and through the loader a rank held back by a peer waits for its batches too";
  } else if (every(&RankFigures::step_ms_p50) && every(&RankFigures::data_wait_ms_p50)) {
    // Resident data: the wait for a batch is host time only (a slice), never a wait for the GPU.
    k = extreme(ranks, &RankFigures::data_wait_ms_p50, false);
    if (!k) s.why = "every rank's data wait is the same";
    else s.basis = Straggler::Basis::DataWait;
  } else {
    s.why = "a rank's step or data wait was not measured";
  }
  if (!k) return s;
  s.rank = ranks[*k].rank;
  s.slowest = ranks[*k];
  s.others = others_median(ranks, *k);
  if (s.basis == Straggler::Basis::Nccl) {
    s.share = *s.others.nccl_exposed_share - *s.slowest.nccl_exposed_share;
    s.holds_back = *s.share >= kStragglerNccl;
  } else {
    const double step = *s.slowest.step_ms_p50;
    if (step > 0) s.share = (*s.slowest.data_wait_ms_p50 - *s.others.data_wait_ms_p50) / step;
    s.holds_back = data_wait_stands_out(s.slowest, s.others);
  }
  return s;
}

namespace {
// What the figures say bounds a GPU step (at most one of gpu_bound, data_bound, launch_bound).
struct Bounds {
  Opt util, wait;
  bool graphed = false, gpu_bound = false, data_bound = false, launch_bound = false;
};

Bounds bounds(const EpochReport& r) {
  Bounds b;
  b.wait = r.data_wait_share;
  const bool data_bound_seen = b.wait && *b.wait >= kDataBound;
  // How busy the GPU was, as a share: CUPTI busy time when measured (exact), else NVML's sampled
  // utilisation (the share of sample periods in which any kernel ran, so an upper bound).
  if (r.gpu_busy_share) b.util = r.gpu_busy_share;
  else if (r.gpu_util_mean) b.util = *r.gpu_util_mean / 100;
  // Steps replayed from one CUDA graph: the host issues two calls a step, so it cannot be what
  // bounds them (and the launch queue's back-pressure makes its issue time equal the step's).
  b.graphed = r.graph_steps && r.steps > 0 && *r.graph_steps * 2 >= double(r.steps);
  // A GPU that stayed busy hid the wait, so waiting for data is the bottleneck only when it did not.
  // NVML's utilisation alone cannot tell: it counts a 1/6 s period busy if any kernel ran in it, so
  // short graphed steps that mostly waited for their batch read nearly full (docs/profiling.md,
  // "GPM"): with NVML only, a step that waited for data kDataBound or more is data-bound.
  b.gpu_bound = b.util && *b.util >= kGpuBound && (r.gpu_busy_share || !data_bound_seen);
  b.data_bound = data_bound_seen && !b.gpu_bound;
  b.launch_bound = !b.graphed && b.util && *b.util < kLaunchBound && b.wait && *b.wait < kDataBound &&
                   r.issue_ms_p50 && r.step_ms_p50 && *r.step_ms_p50 > 0 &&
                   *r.issue_ms_p50 >= kIssueShare * *r.step_ms_p50;
  return b;
}

// Data parallelism: a rank the others wait for bounds the world's step, whatever each rank's own
// figures say; then communication the backward pass did not hide (measured with --busy; NVML
// cannot tell NCCL's kernels from the model's).
void advise_world(const EpochReport& r, const AdviceInputs& in, std::vector<std::string>& out) {
  const Straggler& slow = in.straggler;
  if (std::string s = straggler(slow); !s.empty()) out.push_back(s);
  // The peers' unhidden NCCL time is mostly their wait for the straggler: what communicating costs
  // is the straggler's own share, which waits for no peer.
  Opt exposed = r.nccl_exposed_share;
  std::string whose = "the GPU";
  if (slow.holds_back && slow.basis == Straggler::Basis::Nccl && slow.rank != r.rank) {
    exposed = slow.slowest.nccl_exposed_share;
    whose = "rank " + std::to_string(*slow.rank) + "'s GPU (which waits for no peer)";
  }
  // On short epochs a larger batch made it worse (below): not suggested there.
  const bool short_epochs = r.world_size > 1 && r.steps > 0 && r.steps < kFewSteps;
  const std::string larger_batch = short_epochs ? std::string()
                                                : "a larger per-GPU --batch" +
                                                      (in.batch > 0 ? " than " + std::to_string(in.batch) : std::string()) +
                                                      " (less communication per sample), or ";
  if (r.world_size > 1 && exposed && *exposed >= kCommBound)
    out.push_back("communication-bound: for " + pct_whole(*exposed) + " of the training time " + whose +
                  " only ran NCCL's all-reduces; " + larger_batch + "fewer and larger buckets (LOUPE_DDP_BUCKET_MB) "
                  "where a link's latency dominates" +
                  (r.bus_gbps ? "; the all-reduces moved " + fmt1(*r.bus_gbps) + " GB/s on the bus" : std::string()));
  // A data set small for the world: what comes once an epoch weighs on few steps, and a larger
  // batch makes them fewer, so it scales worse (mnist_mlp on four GPUs at 4 x 4096:
  // docs/multi-gpu.md, "Past two GPUs: the 1-2-4 curve on one host").
  if (short_epochs)
    out.push_back("short epochs: each is only " + std::to_string(r.steps) + " global steps of " +
                  std::to_string(r.world_size) + " GPUs" +
                  (in.batch > 0 ? " x " + std::to_string(in.batch) : std::string()) +
                  ", so what comes once an epoch (its shuffle, its end) and each all-reduce's fixed latency weigh "
                  "on it, and a larger --batch makes it shorter still; for a data set this size fewer GPUs "
                  "may use each better");
}

// The bottleneck first (at most one of three holds), then what is left when none does. An epoch of
// a few steps supports no verdict: its step times are the run's warm-up (cuBLAS and cuDNN set up,
// the graph captured) or the loader's start, and NVML's 1/6 s samples hardly fall in it (a Keras
// file's 64 images at batch 32 read "launch-bound, busy 0 %" on an H100 in its first epoch).
void advise_bottleneck(const EpochReport& r, const AdviceInputs& in, const Bounds& b, std::vector<std::string>& out) {
  const Opt& util = b.util;
  const Opt& wait = b.wait;
  if (r.world_size <= 1 && r.steps > 0 && r.steps < kTooFewSteps) {
    out.push_back("only " + std::to_string(r.steps) + " step" + (r.steps == 1 ? "" : "s") +
                  " in this epoch: too few to tell a bottleneck (a run's first steps set up cuBLAS and cuDNN "
                  "and capture the CUDA graph; an epoch's first waits for the loader to start); `loupe profile` "
                  "measures a window of steps, or give an epoch more steps (more data, or a smaller --batch" +
                  (in.batch > 1 ? " than " + std::to_string(in.batch) : std::string()) + ")");
    return;
  }
  const std::string small = small_kernels(r, in.batch);
  if (b.gpu_bound && small.empty())
    out.push_back("the GPU is the bottleneck (busy " + pct_whole(*util) + "): the host and the input pipeline keep up");
  if (!small.empty() && !b.data_bound) out.push_back(small);
  if (b.data_bound)
    out.push_back("input pipeline: the step waited for data " + pct_whole(*wait) + " of the time" +
                  (r.gpu_busy_share ? " (GPU busy " + pct_whole(*r.gpu_busy_share) + ")"
                   : util ? " (NVML utilisation " + pct_whole(*util) + ", which over-reads short steps)"
                          : std::string()) +
                  "; more --workers / --prefetch, or keep the data set on the GPU");
  if (b.launch_bound)
    out.push_back("launch-bound: the GPU was busy only " + pct_whole(*util) +
                  " while the host spent most of each step issuing work; try a larger --batch" +
                  (in.batch > 0 ? " than " + std::to_string(in.batch) : std::string()) + " (or CUDA graphs)");

  // Without CUPTI, NVML's utilisation over-reads short steps (a period counts as busy if any kernel
  // ran in it). When the host spent the step issuing work and NVML is not saturated, say what the
  // numbers support, and how to measure it exactly.
  const bool host_issuing = wait && *wait < kDataBound && r.issue_ms_p50 && r.step_ms_p50 && *r.step_ms_p50 > 0 &&
                            *r.issue_ms_p50 >= kIssueShare * *r.step_ms_p50;
  if (!b.graphed && !r.gpu_busy_share && util && *util >= kLaunchBound && !b.gpu_bound && host_issuing)
    out.push_back("probably launch-bound: the host spent " + pct_whole(*r.issue_ms_p50 / *r.step_ms_p50) +
                  " of each step issuing work and NVML saw the GPU busy only " + pct_whole(*util) +
                  " (an upper bound); --busy measures the GPU's busy time exactly; a larger --batch or CUDA graphs "
                  "would help");

  // A graphed step whose GPU still idles: what is left is the GPU's own gaps between many small
  // kernels (each graph node costs about a microsecond to start, and a small kernel fills few SMs).
  if (b.graphed && util && !b.gpu_bound && !b.data_bound && small.empty())
    out.push_back("the step is one CUDA graph" +
                  (r.graph_kernels ? " of " + std::to_string(int64_t(*r.graph_kernels)) + " kernels" : std::string()) +
                  ", so the host does not bound it; the GPU was busy " + pct_whole(*util) +
                  (r.gpu_busy_share ? "" : " (NVML, an upper bound; --busy measures it)") +
                  " and the rest is the gaps around small kernels: a larger --batch, or fewer and fused kernels, would "
                  "help");
}

// The GPU itself: throttling, free memory, a faster precision.
void advise_capacity(const EpochReport& r, const AdviceInputs& in, const Bounds& b, std::vector<std::string>& out) {
  if (!r.throttle.empty())
    out.push_back("the GPU throttled (" + r.throttle + "): its clocks were lowered, so step times and MFU "
                  "understate it; check cooling and power limits");

  // A larger batch helps a GPU with idle time to fill; it does not help one that is already the
  // limit, nor a step that waits for data.
  if (r.mem_used_max_bytes && r.mem_total_bytes && *r.mem_total_bytes > 0 &&
      *r.mem_used_max_bytes / *r.mem_total_bytes < kMemFree && !b.gpu_bound && !b.data_bound)
    out.push_back("most device memory is free (" + gib(*r.mem_used_max_bytes) + " of " +
                  gib(*r.mem_total_bytes) + " GiB used): a larger batch fits");

  // Lower precision speeds up the GPU's arithmetic; it cannot help a step limited by the host or
  // the data, so it is not suggested then.
  // Nor one that does little arithmetic: imdb_fasttext (Adam over a 60M-entry table) ran slower in
  // fp16, loss scaling adding a pass over every gradient (lab/benchmarks.md, "`loupe bench`: every
  // model, fp32 and fp16").
  const Precision p = in.precision.value_or(r.precision);
  const std::string prec = precision_name(p);
  if (in.tensor_cores && !is_16bit(p) && !b.launch_bound && !b.data_bound) {
    char mfu[16];
    if (r.mfu) std::snprintf(mfu, sizeof mfu, "%.1f%%", *r.mfu * 100);
    if (r.mfu && *r.mfu < kLowMfu)
      out.push_back(prec + " at " + mfu + " MFU: the step moves memory more than it computes, so "
                    "--precision fp16/bf16 would not speed it up (and fp16's loss scaling adds a pass over the "
                    "gradients)");
    else
      out.push_back(prec + " on a tensor-core GPU: try --precision fp16 or bf16");
  }
}
}  // namespace

std::vector<std::string> advise(const EpochReport& r, const AdviceInputs& in) {
  std::vector<std::string> out;
  if (std::string busy = busy_host(r); !busy.empty()) out.push_back(busy);
  if (!in.cuda) {
    // Waiting for data is device-independent; everything GPU-related is simply unmeasurable here.
    const Opt& wait = r.data_wait_share;
    if (wait && *wait >= kDataBound)
      out.push_back("input pipeline: the step waited for data " + pct_whole(*wait) +
                    " of the time; more --workers / --prefetch");
    out.push_back("CPU run: no GPU figures (utilisation, busy, memory, power: null in --metrics/--csv)");
    return out;
  }
  const Bounds b = bounds(r);
  advise_world(r, in, out);
  advise_bottleneck(r, in, b, out);
  advise_capacity(r, in, b, out);
  return out;
}

}  // namespace loupe::instrument
