// The roofline study of matrix-vector products (`loupe roofline`), after the 2017 study that found
// cuBLAS sgemv at 1 % of a K80's peak: y = A x with A an n x n float32 row-major matrix moves
// 4 n^2 bytes for 2 n^2 FLOPs (0.5 FLOP/byte), so memory bandwidth, not arithmetic, bounds it.
// Each implementation is timed on the same random A and x and checked against a float64
// reference; its rate is reported as GFLOP/s and as a fraction of the copy bandwidth measured in
// the same run (the roofline).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loupe::cli {

struct GemvRow {
  std::string device_name, impl;  // impl: cublas_sgemv, gpu_naive, gpu_ours, cpu_1thread, cpu_threads, cpu_blas
  int64_t n = 0;
  double seconds = 0;           // per product (the median of the timed repetitions)
  double gflops = 0;            // 2 n^2 / seconds
  double bytes_per_s = 0;       // (4 n^2 + 8 n) / seconds
  double roofline_fraction = 0; // bytes_per_s / bandwidth_bytes_per_s
  double bandwidth_bytes_per_s = 0;   // the roof: GPU, a device-to-device copy (read + write);
                                      // CPU, a read stream with every thread, past the cache
  // CPU rows: A (4 n^2 bytes) fits in the last-level cache, so the repetitions read it from there
  // and the fraction of the memory roof can pass 100 % (845 % at n = 1,024 on a 2-core Xeon).
  bool in_cache = false;
  std::optional<double> peak_gflops;  // the device's measured fp32 peak (GPU: FMA loop)
  double max_rel_error = 0;     // max |y - y_ref| / max |y_ref|, y_ref in float64
};

struct RooflineOptions {
  std::vector<int64_t> sizes{1024, 2048, 4096, 8192, 16384};
  bool gpu = true, cpu = true;
  double min_seconds = 0.05;  // repeat each measurement for at least this long
};

// Runs every available implementation at every size (the GPU ones only with CUDA).
std::vector<GemvRow> run_roofline(const RooflineOptions& o);

// The GPU half, registered by roofline_cuda.cu (absent in a CPU-only build).
struct GpuGemvResult {
  std::string impl;  // cublas_sgemv, gpu_naive, gpu_ours
  double seconds = 0;
  std::vector<float> y;
};
struct GpuRoofline {
  std::string device_name;
  double (*copy_bandwidth)() = nullptr;  // bytes/s (read + write) of a device-to-device copy of 1 GiB
  // Every GPU implementation at size n on a device copy of the host A [n, n] and x [n].
  std::vector<GpuGemvResult> (*run)(int64_t n, const float* A, const float* x, double min_seconds) = nullptr;
};
// Empty without a usable GPU.
using GpuRooflineFn = std::optional<GpuRoofline> (*)();
void register_gpu_roofline(GpuRooflineFn f);

}  // namespace loupe::cli
