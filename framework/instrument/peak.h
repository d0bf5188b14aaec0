// Arithmetic peaks: a table of known GPUs' dense datasheet peaks, and measurement (`loupe peak`).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/precision.h"

namespace loupe::instrument {

struct Peak {
  double tflops = 0;
  std::string source;  // "datasheet: NVIDIA H100 SXM, fp32"
};

// A GPU's datasheet ceilings: its dense peaks (fp16 and bf16 share the 16-bit tensor-core peak)
// and its memory's bandwidth.
struct GpuSheet {
  std::string match;  // a substring of the CUDA device name ("H100 PCIe")
  std::string label;  // "NVIDIA H100 PCIe"
  double fp32 = 0, tf32 = 0, fp16 = 0;  // dense TFLOP/s
  double gbs = 0;                       // memory bandwidth, GB/s
  double tflops(Precision precision) const;
};

// The first row whose `match` the name contains (CUDA's "NVIDIA H100 80GB HBM3", or a user's
// "H100"); empty when none does. datasheet_names(): the rows' `match`es, comma-separated.
std::optional<GpuSheet> datasheet(const std::string& device_name);
std::string datasheet_names();

// The dense peak of a GPU by its name (as CUDA reports it) at a precision (fp16 and bf16 share the
// 16-bit tensor-core peak); empty when the GPU is not in the table.
std::optional<Peak> datasheet_peak(const std::string& device_name, Precision precision);

// Measured on the current GPU: an FMA-loop kernel (fp32) and a cuBLAS SGEMM of 8192^3.
// Empty with *why set when CUDA is not available.
struct MeasuredPeak {
  double fma_tflops = 0, sgemm_tflops = 0;
};
std::optional<MeasuredPeak> measure_gpu_peak(std::string* why);
using MeasurePeakFn = MeasuredPeak (*)();
void register_gpu_peak_measurer(MeasurePeakFn f);

// Host-to-device copies as the loader makes them (`loupe copybench`): one batch of MNIST-shaped
// float32 samples and 64 MiB, each from page-locked and from pageable memory, timed on the host
// around `reps` copies on one stream and a wait for the last (after one untimed copy).
struct CopyRate {
  bool pinned = false;
  int64_t bytes = 0;
  int reps = 0;
  double seconds = 0;  // all reps
};
std::vector<CopyRate> measure_host_to_device(Device dev, int64_t batch);

}  // namespace loupe::instrument
