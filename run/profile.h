// The profile of a run (`loupe profile`, docs/profiling.md): one epoch of a run (run/run.h) up to
// the end of a window of global steps, with CUPTI's activity records on a GPU (and, asked for, its
// hardware counters on the step after the window), set against ceilings measured here first: per
// op, its time, share, rates and the roof that bounds it; then the profile's report.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/precision.h"
#include "instrument/op_profile.h"
#include "run/run.h"

namespace loupe::run {

struct ProfileRequest {
  int64_t first = 20, last = 39;  // the window: global steps first..last of the run's first epoch
  bool counters = false;          // the step after the window read through CUPTI's range profiler
  bool graphed = false;           // the step is a CUDA graph: its kernels tied to ops by graph node
};

// The compute ceiling (a square GEMM at the precision) and the memory ceiling (a device copy),
// measured on `dev`.
instrument::Ceilings measure_ceilings(Device dev, Precision prec);

// Trains the run's first epoch to the window's end (the run built for it: one epoch, CUPTI's busy
// tracking on, at most r.last steps, plus one with counters) and builds its profile. Nothing when
// the run was interrupted. Throws loupe::Error, in one sentence, for a window past the epoch, a GPU
// without CUPTI, or a graphed profile that cannot tie kernels to ops here.
std::optional<instrument::Profile> profile(Run& run, const ProfileRequest& r);

// `loupe profile --predict GPU`'s lines: the step predicted on `target` (a name of the datasheet
// table, instrument/peak.h) from a GPU profile (instrument/predict.h). An Error naming the table's
// GPUs where the profile's GPU or the target is not in it, or for a CPU profile.
std::string predict_report(const instrument::Profile& p, const std::string& target);
// `name` where the datasheet table has it; else an Error naming the GPUs it has.
const std::string& known_gpu(const std::string& name);

// The report's lines: the window, the ceilings, the table, the step's time split, the FLOPs, the
// counters where read, and the targets.
std::string profile_report(const instrument::Profile& p, int64_t first, int64_t last);

}  // namespace loupe::run
