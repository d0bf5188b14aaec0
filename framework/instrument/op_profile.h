// `loupe profile`'s table: the op records of a window of training steps (core/op_record.h) joined
// with the GPU's activity records (busy_tracker.h, ActivityRecord::external), per module, op and
// phase: calls and time per step, share of the busy time, FLOPs and bytes, achieved rates, the
// share of the relevant ceiling and what bounds the op. On the CPU an op's time is the host time
// inside its scope (the CPU kernels run there, synchronously).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/op_record.h"
#include "core/precision.h"
#include "instrument/busy_tracker.h"
#include "instrument/counters.h"

namespace loupe::instrument {

struct Ceilings {
  Precision precision = Precision::FP32;  // the arithmetic the peak was measured in
  double flops = 0;      // FLOP/s at the precision in use (0: unknown)
  double bandwidth = 0;  // bytes/s of the device's memory (0: unknown)
  std::string flops_source, bandwidth_source;  // "measured: GEMM 8192^3 fp16 (cuBLAS)"
  // CPU: the last-level cache (bytes; 0 on a GPU or unknown). An op whose bytes per call fit in it
  // reads them from there, faster than the memory bandwidth above (zero_grad at 230 % of it).
  double cache_bytes = 0;
};

struct ProfileRow {
  std::string module, op, phase;  // work no op scope launched: module "", op its kernel name, phase "unattributed"
  double calls = 0;               // per step
  double kernels = 0;             // GPU activity records per step (0 on the CPU)
  double seconds = 0;             // time per step: its kernels' durations summed (its CPU scopes' time)
  // Its part of the busy time per step: where kernels of several rows overlap (streams running
  // side by side), each gets an equal part of the overlap, so the rows' busy times add up to the
  // union of the activity, the GPU's busy time. Equal to `seconds` where nothing overlaps.
  double busy_seconds = 0;
  double share = 0;               // busy_seconds / the step's busy time
  double flops = 0, bytes = 0;    // per step
  double flop_rate = 0, byte_rate = 0;  // achieved, per second
  double pct_ceiling = -1;        // of the ceiling of its bound; < 0: unknown
  bool of_compute_peak = false;   // pct_ceiling is of the compute peak (else of the bandwidth)
  bool in_cache = false;          // memory-bound on the CPU with its bytes per call in the cache: may pass 100 %
  std::string bound;              // "compute", "memory", "latency", "unknown" (no FLOPs or bytes counted)
  // --counters: the hardware's view, weighted by each kernel's duration; < 0: not read.
  double fma_pct = -1, tensor_pct = -1, dram_pct = -1;
};

// One kernel of the counter pass, with the row it belongs to ("" when it matched none).
struct CountedKernel {
  KernelCounters counters;
  std::string row;  // "module op phase"
};

struct ProfileInput {
  std::vector<OpRecord> ops;
  std::vector<ActivityRecord> activity;  // the window's, on a GPU; empty on the CPU
  bool gpu = false;
  double unscoped_flops = 0;  // FLOPs counted outside any op scope in the window
  double counted_flops = 0;   // core/flops.h's count over the window
  int64_t steps = 0;
  double wall_seconds = 0;    // the window on the host (first step's start to the GPU's finish)
  double busy_seconds = 0;    // GPU: union of the activity intervals; CPU: the op scopes' time
  Ceilings ceilings;
  // A graphed window (loupe profile --graph on): how many times the captured step was replayed in
  // it (its kernels tied to their ops through their graph nodes: instrument/graph_nodes.h); -1: an
  // eager window.
  int64_t graph_replays = -1;
  // --counters: the kernels of one more step, in launch order (CounterSession::read), matched to
  // the window's last step's kernels in launch order by name; empty with counters_why when not read.
  bool counters_asked = false;
  std::vector<KernelCounters> counters;
  std::string counters_why;
  CounterNames counter_names;
};

struct Profile {
  std::vector<ProfileRow> rows;  // by time, longest first
  int64_t steps = 0;
  bool gpu = false;
  std::string device;                   // CUDA's name of the GPU ("NVIDIA H200"); "" on the CPU
  double wall = 0, busy = 0, idle = 0;  // per step, seconds
  // Per step: the gaps under 5 us between the GPU's work (kernel boundaries, part of idle above:
  // instrument/intervals.h) and the GPU activity records (kernels, copies, memsets).
  double boundary = 0, activities = 0;
  int64_t graph_replays = -1;           // as ProfileInput's
  double rows_seconds = 0;              // the rows' time summed, per step
  double rows_busy = 0;                 // the rows' busy_seconds summed, per step (= busy but for clipping)
  double flops = 0, unscoped_flops = 0, counted_flops = 0;  // per step
  Ceilings ceilings;
  std::vector<std::string> targets;     // the three rows most worth working on, in words
  // --counters: time-weighted over all the counter pass's kernels (< 0: not read), how many of
  // them matched a row, and why none were read.
  bool counters_asked = false;
  double fma_pct = -1, tensor_pct = -1, dram_pct = -1;
  size_t counted_kernels = 0, matched_kernels = 0;
  std::string counters_why;
  CounterNames counter_names;
  std::vector<CountedKernel> kernels;
};

Profile build_profile(const ProfileInput& in);

// The console table, and the same rows as CSV and JSON (with the summary).
std::string profile_table(const Profile& p, size_t max_rows = 25);
std::string profile_csv(const Profile& p);
std::string profile_json(const Profile& p);

// Below this time per call an op is latency-bound whatever its rates (launch and tail effects).
constexpr double kLatencySeconds = 5e-6;

}  // namespace loupe::instrument
