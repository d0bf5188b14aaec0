// The step time on another GPU, predicted from a profile measured on this one (`loupe profile
// --predict GPU`, docs/profiling.md "Predicting another GPU"): each row of the op table at the
// other GPU's datasheet ceilings, the time it spends above its least kept, the step's gaps kept.
#pragma once
#include <string>
#include <vector>

#include "core/precision.h"
#include "instrument/op_profile.h"
#include "instrument/peak.h"

namespace loupe::instrument {

struct PredictedRow {
  std::string name;     // "module op phase"
  double from = 0, to = 0;  // busy seconds per step: measured, predicted
  std::string bound;    // on the other GPU: "compute", "memory", "latency" or "kept" (nothing counted)
};

struct Prediction {
  std::string from, to;  // the datasheets' labels
  Precision precision = Precision::FP32;
  double floor = 0;      // seconds: a kernel's least time, the profile's shortest kernel
  double busy_from = 0, busy_to = 0, idle = 0;  // per step
  double step_from = 0, step_to = 0;            // per step: the profile's wall, the prediction
  std::vector<PredictedRow> rows;               // the profile's rows, in its order
};

// Each row's least time on a GPU is max(FLOPs / peak, bytes / bandwidth, kernels x floor); the
// row's time on `to` is its least time there plus what it took here above its least (a row faster
// than its least here, its bytes from a cache, is scaled by the two least times instead). The gaps
// between the GPU's work (launches, the host) are kept. A GPU profile only: an Error otherwise.
Prediction predict(const Profile& p, const GpuSheet& from, const GpuSheet& to, Precision precision);

// The summary line and the rows that move most.
std::string prediction_text(const Prediction& pr, size_t max_rows = 5);

// A profile read back from profile_json()'s text: the fields predict() uses (steps, gpu, device,
// precision, wall, busy, idle, boundary, rows' names, kernels, busy time, FLOPs, bytes). An Error
// naming the field where the text is not such a profile.
Profile profile_from_json(const std::string& text);

}  // namespace loupe::instrument
