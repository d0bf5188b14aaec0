#include "instrument/nvml_sampler.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

namespace loupe::instrument {

// The few NVML types loupe uses, declared here so no nvml.h is needed to build (values and
// layouts as in nvml.h; all of these have been stable since NVML 10).
namespace {
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr int NVML_TEMPERATURE_GPU = 0;
constexpr int NVML_CLOCK_SM = 1;
constexpr unsigned NVML_DEVICE_NAME_BUFFER_SIZE = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
struct nvmlUtilization_t { unsigned gpu, memory; };
struct nvmlMemory_t { unsigned long long total, free, used; };
// v2 reports driver-reserved memory apart, so "used" matches nvidia-smi (v1 counts it as used).
struct nvmlMemory_v2_t { unsigned version; unsigned long long total, reserved, free, used; };
constexpr unsigned nvmlMemory_v2 = unsigned(sizeof(nvmlMemory_v2_t)) | (2u << 24);
static_assert(sizeof(nvmlMemory_v2_t) == 40, "layout as in nvml.h");

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

struct NvmlSampler::Api {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*handle)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
  nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*memory_v2)(nvmlDevice_t, nvmlMemory_v2_t*) = nullptr;  // drivers since 510
  nvmlReturn_t (*power)(nvmlDevice_t, unsigned*) = nullptr;                  // milliwatts
  nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;       // millijoules
  nvmlReturn_t (*temp)(nvmlDevice_t, int, unsigned*) = nullptr;              // degrees C
  nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned*) = nullptr;             // MHz
  nvmlReturn_t (*reasons)(nvmlDevice_t, unsigned long long*) = nullptr;

  std::string err(nvmlReturn_t r) const {
    const char* s = error_string ? error_string(r) : nullptr;
    return s ? s : "NVML error " + std::to_string(r);
  }
};

namespace {
template <class F>
bool load_symbol(void* lib, const char* sym, F& f) {
  f = reinterpret_cast<F>(dlsym(lib, sym));
  return f != nullptr;
}
}  // namespace

NvmlSampler::NvmlSampler(int device_index, int period_ms, const std::string& pci_bus_id)
    : period_ms_(std::max(1, period_ms)) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    why_ = std::string("libnvidia-ml.so.1 not found: no NVIDIA driver") + (e ? std::string(" (") + e + ")" : "");
    return;
  }
  auto* a = new Api;
  a->lib = lib;
  load_symbol(lib, "nvmlErrorString", a->error_string);
  // Required entry points; a driver without them is too old to be worth sampling.
  const char* missing = nullptr;
  auto need = [&](const char* sym, auto& f) { if (!load_symbol(lib, sym, f) && !missing) missing = sym; };
  need("nvmlInit_v2", a->init);
  need("nvmlShutdown", a->shutdown);
  need("nvmlDeviceGetCount_v2", a->count);
  need("nvmlDeviceGetHandleByIndex_v2", a->handle);
  if (missing) {
    why_ = std::string("libnvidia-ml.so.1 lacks ") + missing + ": NVIDIA driver too old";
    dlclose(lib);
    delete a;
    return;
  }
  // Optional queries: a missing one leaves its field unmeasured.
  load_symbol(lib, "nvmlDeviceGetName", a->name);
  load_symbol(lib, "nvmlDeviceGetUtilizationRates", a->util);
  load_symbol(lib, "nvmlDeviceGetMemoryInfo", a->memory);
  load_symbol(lib, "nvmlDeviceGetMemoryInfo_v2", a->memory_v2);
  load_symbol(lib, "nvmlDeviceGetPowerUsage", a->power);
  load_symbol(lib, "nvmlDeviceGetTotalEnergyConsumption", a->energy);
  load_symbol(lib, "nvmlDeviceGetTemperature", a->temp);
  load_symbol(lib, "nvmlDeviceGetClockInfo", a->clock);
  // Renamed "clocks event reasons" in CUDA 12.2; the old name remains as a deprecated alias.
  if (!load_symbol(lib, "nvmlDeviceGetCurrentClocksEventReasons", a->reasons))
    load_symbol(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", a->reasons);

  if (nvmlReturn_t r = a->init(); r != NVML_SUCCESS) {
    why_ = "nvmlInit failed: " + a->err(r);
    dlclose(lib);
    delete a;
    return;
  }
  api_ = a;  // from here on the destructor shuts NVML down
  unsigned n = 0;
  if (nvmlReturn_t r = a->count(&n); r != NVML_SUCCESS) {
    why_ = "nvmlDeviceGetCount failed: " + a->err(r);
    return;
  }
  if (n == 0) { why_ = "no GPU: NVML sees 0 devices"; return; }
  if (device_index < 0 || unsigned(device_index) >= n) {
    why_ = "no GPU at NVML index " + std::to_string(device_index) + ": NVML sees " + std::to_string(n);
    return;
  }
  nvmlDevice_t dev = nullptr;
  using ByPci = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
  ByPci by_pci = nullptr;
  if (!pci_bus_id.empty() && load_symbol(lib, "nvmlDeviceGetHandleByPciBusId_v2", by_pci) &&
      by_pci(pci_bus_id.c_str(), &dev) == NVML_SUCCESS) {
    device_ = dev;
    available_ = true;
    return;
  }
  if (nvmlReturn_t r = a->handle(unsigned(device_index), &dev); r != NVML_SUCCESS) {
    why_ = "nvmlDeviceGetHandleByIndex(" + std::to_string(device_index) + ") failed: " + a->err(r);
    return;
  }
  device_ = dev;
  available_ = true;
}

NvmlSampler::~NvmlSampler() {
  stop();
  if (api_) {
    api_->shutdown();
    dlclose(api_->lib);
    delete api_;
  }
}

std::string NvmlSampler::device_name() const {
  if (!available_ || !api_->name) return "";
  char buf[NVML_DEVICE_NAME_BUFFER_SIZE] = {};
  return api_->name(device_, buf, sizeof buf) == NVML_SUCCESS ? buf : "";
}

double NvmlSampler::now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

GpuSample NvmlSampler::read_sample() const {
  const Api& a = *api_;
  GpuSample s;
  s.t = now();
  unsigned u = 0;
  unsigned long long ull = 0;
  nvmlUtilization_t ut{};
  nvmlMemory_t m{};
  bool ok = a.util && a.util(device_, &ut) == NVML_SUCCESS;
  s.gpu_util = ok ? ut.gpu : kNaN;
  s.mem_util = ok ? ut.memory : kNaN;
  nvmlMemory_v2_t m2{};
  m2.version = nvmlMemory_v2;
  if (a.memory_v2 && a.memory_v2(device_, &m2) == NVML_SUCCESS) {
    s.mem_used = double(m2.used);
    s.mem_total = double(m2.total);
  } else {
    ok = a.memory && a.memory(device_, &m) == NVML_SUCCESS;
    s.mem_used = ok ? double(m.used) : kNaN;
    s.mem_total = ok ? double(m.total) : kNaN;
  }
  s.has_power = a.power && a.power(device_, &u) == NVML_SUCCESS;
  s.power_w = s.has_power ? u / 1000.0 : kNaN;
  s.has_energy = a.energy && a.energy(device_, &ull) == NVML_SUCCESS;
  s.energy_mj = s.has_energy ? double(ull) : -1;
  s.temp_c = a.temp && a.temp(device_, NVML_TEMPERATURE_GPU, &u) == NVML_SUCCESS ? u : kNaN;
  s.sm_clock_mhz = a.clock && a.clock(device_, NVML_CLOCK_SM, &u) == NVML_SUCCESS ? u : kNaN;
  s.throttle = a.reasons && a.reasons(device_, &ull) == NVML_SUCCESS ? ull : 0;
  return s;
}

void NvmlSampler::start() {
  std::lock_guard<std::mutex> g(mu_);
  if (!available_ || running_) return;
  running_ = true;
  thread_ = std::thread([this] { loop(); });
}

void NvmlSampler::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!running_) return;
    running_ = false;
  }
  cv_.notify_all();
  thread_.join();
  GpuSample s = read_sample();
  std::lock_guard<std::mutex> g(mu_);
  samples_.push_back(s);
}

void NvmlSampler::loop() {
  // Sampling on our own thread keeps the rate fixed however busy the training thread is; the
  // NVML calls run outside the lock so summarize() never waits on the driver.
  for (;;) {
    GpuSample s = read_sample();
    std::unique_lock<std::mutex> lk(mu_);
    samples_.push_back(s);
    if (cv_.wait_for(lk, std::chrono::milliseconds(period_ms_), [this] { return !running_; })) return;
  }
}

void NvmlSampler::add_sample_for_test(const GpuSample& s) {
  std::lock_guard<std::mutex> g(mu_);
  samples_.push_back(s);
}

std::vector<GpuSample> NvmlSampler::samples() const {
  std::lock_guard<std::mutex> g(mu_);
  return samples_;
}

std::vector<GpuSample> NvmlSampler::samples_from(size_t first) const {
  std::lock_guard<std::mutex> g(mu_);
  if (first >= samples_.size()) return {};
  return std::vector<GpuSample>(samples_.begin() + std::ptrdiff_t(first), samples_.end());
}

std::string throttle_reason_names(uint64_t bits) {
  static const std::pair<uint64_t, const char*> kNames[] = {
      {0x2, "ApplicationsClocksSetting"}, {0x4, "SwPowerCap"},          {0x8, "HwSlowdown"},
      {0x10, "SyncBoost"},                {0x20, "SwThermalSlowdown"},  {0x40, "HwThermalSlowdown"},
      {0x80, "HwPowerBrakeSlowdown"},     {0x100, "DisplayClockSetting"}};
  bits &= ~uint64_t(0x1);  // GpuIdle
  std::string out;
  auto add = [&](const std::string& n) { out += (out.empty() ? "" : ",") + n; };
  for (auto [bit, name] : kNames)
    if (bits & bit) { add(name); bits &= ~bit; }
  for (int i = 0; i < 64; ++i)  // reasons newer than this list still show up, by bit number
    if (bits >> i & 1) add("bit" + std::to_string(i));
  return out;
}

namespace {
// Mean and max over the values that were measured (NaN = not measured).
struct Acc {
  double sum = 0, max = -std::numeric_limits<double>::infinity();
  int n = 0;
  void add(double v) { if (!std::isnan(v)) { sum += v; max = std::max(max, v); ++n; } }
  std::optional<double> mean() const { return n ? std::optional<double>(sum / n) : std::nullopt; }
  std::optional<double> maximum() const { return n ? std::optional<double>(max) : std::nullopt; }
};
}  // namespace

GpuSummary NvmlSampler::summarize(double t0, double t1) const {
  std::vector<GpuSample> w;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (const GpuSample& s : samples_)
      if (s.t >= t0 && s.t <= t1) w.push_back(s);
  }
  std::stable_sort(w.begin(), w.end(), [](const GpuSample& a, const GpuSample& b) { return a.t < b.t; });
  GpuSummary r;
  r.samples = int(w.size());
  if (w.empty()) {
    r.why = !available_ ? why_
                        : "no NVML sample in the window (sampler not started, or window shorter than the " +
                              std::to_string(period_ms_) + " ms period)";
    return r;
  }
  Acc gpu, memu, used, total, power, temp, clock;
  uint64_t reasons = 0;
  for (const GpuSample& s : w) {
    gpu.add(s.gpu_util);
    memu.add(s.mem_util);
    used.add(s.mem_used);
    total.add(s.mem_total);
    if (s.has_power) power.add(s.power_w);
    temp.add(s.temp_c);
    clock.add(s.sm_clock_mhz);
    reasons |= s.throttle;
  }
  r.gpu_util_mean = gpu.mean();
  r.gpu_util_max = gpu.maximum();
  r.mem_util_mean = memu.mean();
  r.mem_used_max = used.maximum();
  r.mem_total = total.maximum();
  r.power_mean_w = power.mean();
  r.power_max_w = power.maximum();
  r.temp_max_c = temp.maximum();
  r.sm_clock_mean_mhz = clock.mean();
  r.throttle = throttle_reason_names(reasons);

  // Energy needs a span of time: at least two samples. The counter is exact; the power integral
  // (trapezoids between the samples that have power) is the fallback for GPUs without it, and for
  // windows so short that the counter did not tick (it updates less often than we sample).
  const GpuSample &first = w.front(), &last = w.back();
  if (w.size() >= 2 && last.t > first.t && first.has_energy && last.has_energy &&
      last.energy_mj > first.energy_mj) {
    r.energy_j = (last.energy_mj - first.energy_mj) / 1000.0;
  } else {
    const GpuSample* prev = nullptr;
    double joules = 0;
    bool any = false;
    for (const GpuSample& s : w) {
      if (!s.has_power) continue;
      if (prev && s.t > prev->t) { joules += 0.5 * (prev->power_w + s.power_w) * (s.t - prev->t); any = true; }
      prev = &s;
    }
    if (any) r.energy_j = joules;
  }
  return r;
}

}  // namespace loupe::instrument
