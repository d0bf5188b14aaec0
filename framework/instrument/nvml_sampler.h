// NVML sampler: a background thread that reads the GPU's utilisation, memory, power, energy,
// temperature, SM clock and throttle reasons every period_ms, and summarises a time window of
// those samples for the epoch report. libnvidia-ml.so.1 is opened with dlopen at run time, so
// loupe builds and runs where nvml.h or the driver is absent; then available() is false, why
// says so, and every summary field stays empty (docs/design.md principle 5: unmeasured is null, not 0).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace loupe::instrument {

// What the SMs did between two GPM samples (NVML's GPU Performance Monitoring, Hopper and newer):
// percentages over [t0, t1]; NaN where the driver did not give that metric.
struct GpmInterval {
  double t0 = 0, t1 = 0;
  double sm_active = 0, sm_occupancy = 0, tensor_active = 0, dram_active = 0, graphics_active = 0;
};

// One reading. A quantity the device does not report is NaN (energy_mj: -1, with has_energy
// false), so summaries skip it rather than average in a 0.
struct GpuSample {
  double t = 0;                  // seconds, NvmlSampler::now()
  double gpu_util = 0, mem_util = 0;  // percent, averaged by the driver over its own sample period
  double mem_used = 0, mem_total = 0; // bytes, all processes on the device
  double power_w = 0;
  double energy_mj = -1;         // millijoules since the driver loaded (a counter); -1 if unsupported
  double temp_c = 0, sm_clock_mhz = 0;
  uint64_t throttle = 0;         // NVML clocks-event (throttle) reason bits
  bool has_power = false, has_energy = false;
  std::optional<GpmInterval> gpm;  // the GPM interval that ended as this sample was taken
};

struct GpuSummary {
  int samples = 0;
  std::string why;  // non-empty when nothing was sampled: NVML unavailable, or the window too short
  std::optional<double> gpu_util_mean, gpu_util_max, mem_util_mean, mem_used_max, mem_total,
      power_mean_w, power_max_w, energy_j, temp_max_c, sm_clock_mean_mhz;
  std::string throttle;  // reasons seen (OR over samples), comma-separated, without GpuIdle
  // GPM, the mean of the finished intervals that overlap the window, weighted by the overlap; where
  // none does (a window shorter than the period), the one that ended within a period before it.
  // gpm_why says why they are empty.
  std::optional<double> sm_active, sm_occupancy, tensor_active, dram_active, graphics_active;
  std::string gpm_why;
};

// "SwPowerCap,HwThermalSlowdown" for the given reason bits; GpuIdle is left out because an idle
// GPU lowering its clocks is not a problem to report.
std::string throttle_reason_names(uint64_t bits);

class NvmlSampler {
 public:
  // device_index is NVML's index (PCI bus order; CUDA_VISIBLE_DEVICES does not apply to it).
  // The GPU at pci_bus_id when given and NVML knows it (a CUDA device's address: the same GPU
  // whatever CUDA_VISIBLE_DEVICES renumbered), else NVML's device_index.
  explicit NvmlSampler(int device_index = 0, int period_ms = 50, const std::string& pci_bus_id = "");  // never throws
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;

  bool available() const { return available_; }
  const std::string& why_unavailable() const { return why_; }
  // GPM is sampled every kGpmPeriodMs where the GPU has it (GpuSummary::gpm_why says why not).
  static constexpr int kGpmPeriodMs = 100;
  // Ends the GPM interval under way now, from the caller's thread, if it began at least a period
  // ago (shorter intervals read low: docs/profiling.md, "GPM"): an epoch's end, so that its figures
  // need no interval that ends after it.
  void gpm_mark();
  std::string device_name() const;  // "" when unavailable

  // Call start/stop from one controlling thread. Samples accumulate across start/stop cycles
  // (about 2 kB a second at 50 ms); summarize picks a window by time.
  void start();  // no-op when unavailable or already running; one sample is taken at once
  void stop();   // no-op when not running; takes a last sample, so a window ending now has one

  // Samples with t in [t0, t1]. Energy: difference of the energy counter between the first and
  // last sample in the window when supported, else the trapezoid integral of power (needs two
  // samples); both cover [first sample, last sample], not the whole window.
  GpuSummary summarize(double t0, double t1) const;
  std::vector<GpuSample> samples() const;
  void add_gpm_for_test(const GpmInterval& g);
  // samples()[first, end): what was taken since a reader last looked (the timeline's writer).
  std::vector<GpuSample> samples_from(size_t first) const;
  void add_sample_for_test(const GpuSample& s);

  static double now();  // steady_clock, seconds

 private:
  struct Api;  // the dlopen'ed NVML entry points
  GpuSample read_sample() const;
  void loop();
  void open_gpm();
  void close_gpm();
  // A GPM sample now; with one before it, the interval between them, kept and returned.
  std::optional<GpmInterval> read_gpm(double min_seconds = 0);
  bool running() const;
  void summarize_gpm(double t0, double t1, GpuSummary& r) const;

  int period_ms_;
  bool available_ = false;
  std::string why_;
  Api* api_ = nullptr;
  void* device_ = nullptr;  // nvmlDevice_t
  std::string gpm_why_ = "NVML is not available";
  void* gpm_[2] = {nullptr, nullptr};  // nvmlGpmSample_t: the previous sample and the next
  double gpm_t_ = -1;                  // when gpm_[0] was taken (-1: not yet)
  std::mutex gpm_mu_;                  // the GPM samples: the sampler's thread and gpm_mark()

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool running_ = false;
  std::thread thread_;
  std::vector<GpuSample> samples_;
  std::vector<GpmInterval> gpm_intervals_;
};

}  // namespace loupe::instrument
