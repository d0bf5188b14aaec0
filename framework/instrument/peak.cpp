#include "instrument/peak.h"

#include <cstring>
#include <vector>

#include "core/clock.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace loupe::instrument {

namespace {
struct Row {
  const char* match;  // substring of the CUDA device name
  const char* label;
  double fp32, tf32, fp16;  // dense TFLOP/s (fp16 and bf16 alike, fp32 accumulation)
};
// NVIDIA datasheets, dense (no sparsity). More specific names first.
const std::vector<Row>& datasheet_table() {
  static const std::vector<Row> rows{
      {"H200", "NVIDIA H200 SXM", 67, 494.7, 989.4},
      {"H100 PCIe", "NVIDIA H100 PCIe", 51, 378, 756},
      {"H100 NVL", "NVIDIA H100 NVL", 60, 417.5, 835},
      {"H100", "NVIDIA H100 SXM", 67, 494.7, 989.4},
      {"GH200", "NVIDIA GH200", 67, 494.7, 989.4},
      {"A100", "NVIDIA A100", 19.5, 156, 312},
      {"A10G", "NVIDIA A10G", 31.2, 62.5, 125},
      {"A10", "NVIDIA A10", 31.2, 62.5, 125},
      {"L40S", "NVIDIA L40S", 91.6, 183, 362},
      {"L4", "NVIDIA L4", 30.3, 60, 121},
      {"V100", "NVIDIA V100 SXM2", 15.7, 15.7, 125},
      {"T4", "NVIDIA T4", 8.1, 8.1, 65},
      {"RTX 4090", "NVIDIA GeForce RTX 4090", 82.6, 82.6, 165.2},
      {"P100", "NVIDIA P100 SXM2", 10.6, 10.6, 21.2},
      {"K80", "NVIDIA K80 (one GPU of two)", 4.37, 4.37, 4.37},
  };
  return rows;
}

MeasurePeakFn& measurer() {
  static MeasurePeakFn f = nullptr;
  return f;
}
}  // namespace

std::optional<Peak> datasheet_peak(const std::string& name, Precision precision) {
  for (const Row& r : datasheet_table()) {
    if (name.find(r.match) == std::string::npos) continue;
    const double v = precision == Precision::TF32 ? r.tf32 : is_16bit(precision) ? r.fp16 : r.fp32;
    return Peak{v, std::string("datasheet: ") + r.label + ", " + precision_name(precision)};
  }
  return std::nullopt;
}

void register_gpu_peak_measurer(MeasurePeakFn f) { measurer() = f; }

std::optional<MeasuredPeak> measure_gpu_peak(std::string* why) {
  if (!measurer()) {
    if (why) *why = "this loupe was built without CUDA";
    return std::nullopt;
  }
  if (!cuda_available()) {
    if (why) *why = "no CUDA GPU is visible";
    return std::nullopt;
  }
  return measurer()();
}

std::vector<CopyRate> measure_host_to_device(Device dev, int64_t batch) {
  CudaRuntime* rt = cuda_runtime();
  void* stream = rt->stream_create();
  auto wait = [&] {
    void* e = rt->event_record_on(stream);
    rt->event_synchronize(e);
    rt->event_destroy(e);
  };
  std::vector<CopyRate> out;
  for (int64_t bytes : {(batch * 784 + batch) * 4, int64_t(64) << 20}) {
    Tensor dst = empty(Shape{bytes / 4}, DType::f32, dev);
    for (bool pinned : {true, false}) {
      Tensor src = pinned ? empty_pinned(Shape{bytes / 4}, DType::f32) : empty(Shape{bytes / 4}, DType::f32, kCPU);
      fill_(src, 1.0);
      CopyRate r{pinned, bytes, bytes < (1 << 24) ? 2000 : 50, 0};
      rt->copy_async_on(stream, dst.data_ptr(), src.data_ptr(), size_t(bytes), CopyKind::HostToDevice);  // warm-up
      wait();
      const double t0 = now_s();
      for (int k = 0; k < r.reps; ++k)
        rt->copy_async_on(stream, dst.data_ptr(), src.data_ptr(), size_t(bytes), CopyKind::HostToDevice);
      wait();
      r.seconds = now_s() - t0;
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace loupe::instrument
