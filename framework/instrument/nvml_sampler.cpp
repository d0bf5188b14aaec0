#include "instrument/nvml_sampler.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <limits>
#include <memory>

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

// GPM (nvml.h since CUDA 12.0). A sample is a handle (nvml.h wraps its pointer in a struct of one
// member, passed alike). The metrics request is version 1 whatever its array's length, which has
// grown between headers: the driver reads numMetrics entries, so a longer array is safe.
using nvmlGpmSample_t = void*;
struct nvmlGpmMetric_t {
  unsigned metricId;
  nvmlReturn_t nvmlReturn;
  double value;
  struct { char *shortName, *longName, *unit; } metricInfo;
};
struct nvmlGpmMetricsGet_t {
  unsigned version, numMetrics;
  nvmlGpmSample_t sample1, sample2;
  nvmlGpmMetric_t metrics[512];
};
struct nvmlGpmSupport_t { unsigned version, isSupportedDevice; };
constexpr unsigned NVML_GPM_METRICS_GET_VERSION = 1, NVML_GPM_SUPPORT_VERSION = 1;
// nvmlGpmMetricId_t: graphics (any engine) active, SM active, SM occupancy, any tensor pipe
// active, DRAM bandwidth used: nvidia-smi dmon --gpm-metrics 1,2,3,5,10.
constexpr unsigned kGpmIds[] = {2, 3, 5, 10, 1};

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
  nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;  // current, pending
  nvmlReturn_t (*gpm_support)(nvmlDevice_t, nvmlGpmSupport_t*) = nullptr;
  nvmlReturn_t (*gpm_alloc)(nvmlGpmSample_t*) = nullptr;
  nvmlReturn_t (*gpm_free)(nvmlGpmSample_t) = nullptr;
  nvmlReturn_t (*gpm_get)(nvmlDevice_t, nvmlGpmSample_t) = nullptr;
  nvmlReturn_t (*gpm_metrics)(nvmlGpmMetricsGet_t*) = nullptr;

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
  load_symbol(lib, "nvmlDeviceGetMigMode", a->mig_mode);
  load_symbol(lib, "nvmlGpmQueryDeviceSupport", a->gpm_support);
  load_symbol(lib, "nvmlGpmSampleAlloc", a->gpm_alloc);
  load_symbol(lib, "nvmlGpmSampleFree", a->gpm_free);
  load_symbol(lib, "nvmlGpmSampleGet", a->gpm_get);
  load_symbol(lib, "nvmlGpmMetricsGet", a->gpm_metrics);

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
    open_gpm();
    return;
  }
  if (nvmlReturn_t r = a->handle(unsigned(device_index), &dev); r != NVML_SUCCESS) {
    why_ = "nvmlDeviceGetHandleByIndex(" + std::to_string(device_index) + ") failed: " + a->err(r);
    return;
  }
  device_ = dev;
  available_ = true;
  open_gpm();
}

void NvmlSampler::open_gpm() {
  const Api& a = *api_;
  if (!a.gpm_support || !a.gpm_alloc || !a.gpm_free || !a.gpm_get || !a.gpm_metrics) {
    gpm_why_ = "this NVIDIA driver has no GPM (GPU Performance Monitoring: drivers of CUDA 12 and newer)";
    return;
  }
  unsigned mig = 0, pending = 0;
  if (a.mig_mode && a.mig_mode(device_, &mig, &pending) == NVML_SUCCESS && mig == 1) {
    gpm_why_ = "the GPU is in MIG mode (GPM's figures would be per GPU instance)";
    return;
  }
  nvmlGpmSupport_t support{NVML_GPM_SUPPORT_VERSION, 0};
  if (nvmlReturn_t r = a.gpm_support(device_, &support); r != NVML_SUCCESS) {
    gpm_why_ = "GPM refused: " + a.err(r);
    return;
  }
  if (!support.isSupportedDevice) {
    gpm_why_ = "this GPU has no GPM (Hopper and newer have it)";
    return;
  }
  for (void*& g : gpm_)
    if (nvmlReturn_t r = a.gpm_alloc(&g); r != NVML_SUCCESS) {
      gpm_why_ = "nvmlGpmSampleAlloc failed: " + a.err(r);
      close_gpm();
      return;
    }
  gpm_why_.clear();
}

void NvmlSampler::close_gpm() {
  for (void*& g : gpm_) {
    if (g) api_->gpm_free(g);
    g = nullptr;
  }
}

NvmlSampler::~NvmlSampler() {
  stop();
  if (api_) {
    close_gpm();
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
  {
    std::lock_guard<std::mutex> one(gpm_mu_);
    gpm_t_ = -1;  // a new series of intervals
  }
  thread_ = std::thread([this] { loop(); });
}

std::optional<GpmInterval> NvmlSampler::read_gpm(double min_seconds) {
  if (!gpm_[0]) return std::nullopt;
  std::lock_guard<std::mutex> one(gpm_mu_);
  const Api& a = *api_;
  const double t = now();
  if (gpm_t_ >= 0 && t - gpm_t_ < min_seconds) return std::nullopt;
  if (a.gpm_get(device_, gpm_t_ < 0 ? gpm_[0] : gpm_[1]) != NVML_SUCCESS) return std::nullopt;
  if (gpm_t_ < 0) {
    gpm_t_ = t;
    return std::nullopt;
  }
  auto q = std::make_unique<nvmlGpmMetricsGet_t>();
  q->version = NVML_GPM_METRICS_GET_VERSION;
  q->numMetrics = unsigned(std::size(kGpmIds));
  q->sample1 = gpm_[0];
  q->sample2 = gpm_[1];
  for (size_t i = 0; i < std::size(kGpmIds); ++i) q->metrics[i].metricId = kGpmIds[i];
  const bool ok = a.gpm_metrics(q.get()) == NVML_SUCCESS;
  auto value = [&](size_t i) { return ok && q->metrics[i].nvmlReturn == NVML_SUCCESS ? q->metrics[i].value : kNaN; };
  const GpmInterval g{gpm_t_, t, value(0), value(1), value(2), value(3), value(4)};
  std::swap(gpm_[0], gpm_[1]);  // the newest sample starts the next interval
  gpm_t_ = t;
  if (!ok) return std::nullopt;
  std::lock_guard<std::mutex> lk(mu_);
  gpm_intervals_.push_back(g);
  return g;
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
  s.gpm = read_gpm();
  std::lock_guard<std::mutex> g(mu_);
  samples_.push_back(s);
}

void NvmlSampler::loop() {
  // Sampling on our own thread keeps the rate fixed however busy the training thread is; the
  // NVML calls run outside the lock so summarize() never waits on the driver.
  for (;;) {
    GpuSample s = read_sample();
    // GPM's figures are rates between two samples: one every kGpmPeriodMs (its recommended least).
    s.gpm = read_gpm(kGpmPeriodMs * 1e-3);
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

void NvmlSampler::gpm_mark() {
  if (running()) read_gpm(kGpmPeriodMs * 1e-3);
}

bool NvmlSampler::running() const {
  std::lock_guard<std::mutex> g(mu_);
  return running_;
}

void NvmlSampler::add_gpm_for_test(const GpmInterval& g) {
  std::lock_guard<std::mutex> lk(mu_);
  gpm_intervals_.push_back(g);
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

void NvmlSampler::summarize_gpm(double t0, double t1, GpuSummary& r) const {
  struct Weighted {
    double sum = 0, weight = 0;
    void add(double v, double w) {
      if (!std::isnan(v)) sum += v * w, weight += w;
    }
    std::optional<double> mean() const { return weight > 0 ? std::optional<double>(sum / weight) : std::nullopt; }
  } sm, occupancy, tensor, dram, graphics;
  {
    std::lock_guard<std::mutex> g(mu_);
    if (!gpm_why_.empty() && gpm_intervals_.empty()) {  // else a test's own intervals, given
      r.gpm_why = available_ ? gpm_why_ : why_;
      return;
    }
    auto add = [&](const GpmInterval& i, double w) {
      sm.add(i.sm_active, w);
      occupancy.add(i.sm_occupancy, w);
      tensor.add(i.tensor_active, w);
      dram.add(i.dram_active, w);
      graphics.add(i.graphics_active, w);
    };
    const GpmInterval* recent = nullptr;  // the last one ended before t1
    for (const GpmInterval& i : gpm_intervals_) {
      const double w = std::min(i.t1, t1) - std::max(i.t0, t0);  // the overlap
      if (w > 0) add(i, w);
      if (i.t1 <= t1 && (!recent || i.t1 > recent->t1)) recent = &i;
    }
    // A window shorter than the period that no finished interval overlaps (its interval ends after
    // it): the interval just before it, if it ended less than a period before.
    const double period = kGpmPeriodMs * 1e-3;
    if (sm.weight == 0 && recent && t1 - t0 < period && recent->t1 >= t0 - period) add(*recent, 1);
  }
  r.sm_active = sm.mean();
  r.sm_occupancy = occupancy.mean();
  r.tensor_active = tensor.mean();
  r.dram_active = dram.mean();
  r.graphics_active = graphics.mean();
  if (!r.sm_active)
    r.gpm_why = "no GPM interval had ended inside the epoch yet (it was shorter than GPM's " +
                std::to_string(kGpmPeriodMs) + " ms)";
}

GpuSummary NvmlSampler::summarize(double t0, double t1) const {
  std::vector<GpuSample> w;
  {
    std::lock_guard<std::mutex> g(mu_);
    for (const GpuSample& s : samples_)
      if (s.t >= t0 && s.t <= t1) w.push_back(s);
  }
  std::stable_sort(w.begin(), w.end(), [](const GpuSample& a, const GpuSample& b) { return a.t < b.t; });
  GpuSummary r;
  summarize_gpm(t0, t1, r);
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
