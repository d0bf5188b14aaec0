// Arithmetic peaks: a table of known GPUs' dense datasheet peaks, and measurement (`loupe peak`).
#pragma once
#include <optional>
#include <string>

#include "core/precision.h"

namespace loupe::instrument {

struct Peak {
  double tflops = 0;
  std::string source;  // "datasheet: NVIDIA H100 SXM, fp32"
};

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

}  // namespace loupe::instrument
