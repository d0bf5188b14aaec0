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
#include "instrument/busy_tracker.h"

namespace loupe::instrument {

struct Ceilings {
  double flops = 0;      // FLOP/s at the precision in use (0: unknown)
  double bandwidth = 0;  // bytes/s of the device's memory (0: unknown)
  std::string flops_source, bandwidth_source;  // "measured: GEMM 8192^3 fp16 (cuBLAS)"
};

struct ProfileRow {
  std::string module, op, phase;  // work no op scope launched: module "", op its kernel name, phase "unattributed"
  double calls = 0;               // per step
  double kernels = 0;             // GPU activity records per step (0 on the CPU)
  double seconds = 0;             // time per step
  double share = 0;               // of the step's busy time
  double flops = 0, bytes = 0;    // per step
  double flop_rate = 0, byte_rate = 0;  // achieved, per second
  double pct_ceiling = -1;        // of the ceiling of its bound; < 0: unknown
  std::string bound;              // "compute", "memory", "latency"
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
};

struct Profile {
  std::vector<ProfileRow> rows;  // by time, longest first
  int64_t steps = 0;
  bool gpu = false;
  double wall = 0, busy = 0, idle = 0;  // per step, seconds
  double rows_seconds = 0;              // the rows' time summed, per step
  double flops = 0, unscoped_flops = 0, counted_flops = 0;  // per step
  Ceilings ceilings;
  std::vector<std::string> targets;     // the three rows most worth working on, in words
};

Profile build_profile(const ProfileInput& in);

// The console table, and the same rows as CSV and JSON (with the summary).
std::string profile_table(const Profile& p, size_t max_rows = 25);
std::string profile_csv(const Profile& p);
std::string profile_json(const Profile& p);

// Below this time per call an op is latency-bound whatever its rates (launch and tail effects).
constexpr double kLatencySeconds = 5e-6;

}  // namespace loupe::instrument
