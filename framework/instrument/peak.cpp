#include "instrument/peak.h"

#include <cstring>
#include <vector>

#include "core/clock.h"
#include "core/cuda_runtime.h"
#include "core/tensor.h"

namespace loupe::instrument {

namespace {
// NVIDIA datasheets: dense peaks (no sparsity) and the memory's bandwidth. More specific names
// first ("GH200" before "H200"). Where one name covers several memories (A100 40 and 80 GB), the
// row is the larger one's.
const std::vector<GpuSheet>& datasheet_table() {
  static const std::vector<GpuSheet> rows{
      {"GH200", "NVIDIA GH200", 67, 494.7, 989.4, 4000},
      {"H200", "NVIDIA H200 SXM", 67, 494.7, 989.4, 4800},
      {"H100 PCIe", "NVIDIA H100 PCIe", 51, 378, 756, 2000},
      {"H100 NVL", "NVIDIA H100 NVL", 60, 417.5, 835, 3900},
      {"H100", "NVIDIA H100 SXM", 67, 494.7, 989.4, 3350},
      {"A100", "NVIDIA A100", 19.5, 156, 312, 2039},
      {"A10G", "NVIDIA A10G", 31.2, 62.5, 125, 600},
      {"A10", "NVIDIA A10", 31.2, 62.5, 125, 600},
      {"L40S", "NVIDIA L40S", 91.6, 183, 362, 864},
      {"L4", "NVIDIA L4", 30.3, 60, 121, 300},
      {"V100", "NVIDIA V100 SXM2", 15.7, 15.7, 125, 900},
      {"T4", "NVIDIA T4", 8.1, 8.1, 65, 320},
      {"RTX 4090", "NVIDIA GeForce RTX 4090", 82.6, 82.6, 165.2, 1008},
      {"P100", "NVIDIA P100 SXM2", 10.6, 10.6, 21.2, 732},
      {"K80", "NVIDIA K80 (one GPU of two)", 4.37, 4.37, 4.37, 240},
  };
  return rows;
}

MeasurePeakFn& measurer() {
  static MeasurePeakFn f = nullptr;
  return f;
}
}  // namespace

double GpuSheet::tflops(Precision precision) const {
  return precision == Precision::TF32 ? tf32 : is_16bit(precision) ? fp16 : fp32;
}

std::optional<GpuSheet> datasheet(const std::string& name) {
  for (const GpuSheet& r : datasheet_table())
    if (name.find(r.match) != std::string::npos) return r;
  return std::nullopt;
}

std::string datasheet_names() {
  std::string out;
  for (const GpuSheet& r : datasheet_table()) out += (out.empty() ? "" : ", ") + std::string(r.match);
  return out;
}

std::optional<Peak> datasheet_peak(const std::string& name, Precision precision) {
  auto r = datasheet(name);
  if (!r) return std::nullopt;
  return Peak{r->tflops(precision), "datasheet: " + r->label + ", " + precision_name(precision)};
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
