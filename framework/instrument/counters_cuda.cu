// CounterSession with CUPTI's range profiler (CUDA 12.6+: cupti_range_profiler.h and the host
// metric API, cupti_profiler_host.h; no Perfworks headers). Automatic ranges with kernel replay:
// every kernel launched between Start and Stop is one range, replayed by CUPTI for as many passes
// as the metrics need, so one Start/Stop covers any number of passes. Every CUPTI call is checked;
// a failure becomes a `why` (factory) or a loupe::Error naming the call. Link: CUDA::cupti.
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "instrument/counters.h"
#include "instrument/cupti_result.cuh"

namespace loupe::instrument {
namespace {

constexpr size_t kMaxRanges = 8192;  // kernels one pass can hold (a training step of any reference model)

std::string counter_cupti_error(CUptiResult r, const char* call) {
  std::string msg = cupti_failed(r, call);
  if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES || r == CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES)
    msg += "; reading GPU counters is restricted to admin users on this machine (NVreg_RestrictProfilingToAdminUsers=1)";
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) msg += "; another profiler (Nsight) holds the counters";
  return msg;
}

#define CK(call)                                                         \
  do {                                                                   \
    CUptiResult r_ = (call);                                             \
    if (r_ != CUPTI_SUCCESS) LOUPE_FAIL(counter_cupti_error(r_, #call)); \
  } while (0)

// The tensor pipe's name differs by chip; the first the chip lists is read.
const char* const kTensorCandidates[] = {"sm__pipe_tensor_cycles_active", "sm__pipe_tensor_op_hmma_cycles_active",
                                         "sm__inst_executed_pipe_tensor"};

class CuptiCounters final : public CounterSession {
 public:
  ~CuptiCounters() override {
    if (rp_) {
      CUpti_RangeProfiler_Disable_Params p{CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
      p.pRangeProfilerObject = rp_;
      cuptiRangeProfilerDisable(&p);
    }
    if (host_) {
      CUpti_Profiler_Host_Deinitialize_Params p{CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
      p.pHostObject = host_;
      cuptiProfilerHostDeinitialize(&p);
    }
  }
  const CounterNames& names() const override { return names_; }

  void init() {
    if (cudaFree(nullptr) != cudaSuccess) LOUPE_FAIL("no CUDA device is usable here");
    int dev = 0;
    cudaGetDevice(&dev);
    // The driver's entry point through the runtime: linking libcuda would make loupe unloadable
    // where no driver is installed (CPU machines run the same build).
    using GetCurrent = CUresult (*)(CUcontext*);
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    CUcontext ctx = nullptr;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn || reinterpret_cast<GetCurrent>(fn)(&ctx) != CUDA_SUCCESS || !ctx)
      LOUPE_FAIL("no current CUDA context");
    CUpti_Profiler_Initialize_Params ip{CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
    CK(cuptiProfilerInitialize(&ip));
    CUpti_Device_GetChipName_Params cp{CUpti_Device_GetChipName_Params_STRUCT_SIZE};
    cp.deviceIndex = size_t(dev);
    CK(cuptiDeviceGetChipName(&cp));
    chip_ = cp.pChipName;
    CUpti_Profiler_GetCounterAvailability_Params ap{CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
    ap.ctx = ctx;
    CK(cuptiProfilerGetCounterAvailability(&ap));
    availability_.resize(ap.counterAvailabilityImageSize);
    ap.pCounterAvailabilityImage = availability_.data();
    CK(cuptiProfilerGetCounterAvailability(&ap));
    CUpti_Profiler_Host_Initialize_Params hp{CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
    hp.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    hp.pChipName = chip_.c_str();
    hp.pCounterAvailabilityImage = availability_.data();
    CK(cuptiProfilerHostInitialize(&hp));
    host_ = hp.pHostObject;
    choose_tensor_metric();
    make_config();
    CUpti_RangeProfiler_Enable_Params ep{CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
    ep.ctx = ctx;
    CK(cuptiRangeProfilerEnable(&ep));
    rp_ = ep.pRangeProfilerObject;
    make_counter_data();
    CUpti_RangeProfiler_SetConfig_Params sp{CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    sp.pRangeProfilerObject = rp_;
    sp.pConfig = config_.data();
    sp.configSize = config_.size();
    sp.pCounterDataImage = data_.data();
    sp.counterDataImageSize = data_.size();
    sp.range = CUPTI_AutoRange;
    sp.replayMode = CUPTI_KernelReplay;
    sp.maxRangesPerPass = kMaxRanges;
    sp.numNestingLevels = 1;
    sp.minNestingLevel = 1;
    sp.passIndex = 0;
    sp.targetNestingLevel = 1;
    CK(cuptiRangeProfilerSetConfig(&sp));
  }

  void begin() override {
    cudaDeviceSynchronize();
    CUpti_RangeProfiler_Start_Params p{CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = rp_;
    CK(cuptiRangeProfilerStart(&p));
  }

  void end() override {
    cudaDeviceSynchronize();
    CUpti_RangeProfiler_Stop_Params p{CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    p.pRangeProfilerObject = rp_;
    CK(cuptiRangeProfilerStop(&p));
    if (!p.isAllPassSubmitted) LOUPE_FAIL("the counters needed more passes than kernel replay gave");
    CUpti_RangeProfiler_DecodeData_Params d{CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    d.pRangeProfilerObject = rp_;
    CK(cuptiRangeProfilerDecodeData(&d));
    dropped_ = d.numOfRangeDropped;
  }

  std::vector<KernelCounters> read() override {
    CUpti_RangeProfiler_GetCounterDataInfo_Params ip{CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    ip.pCounterDataImage = data_.data();
    ip.counterDataImageSize = data_.size();
    CK(cuptiRangeProfilerGetCounterDataInfo(&ip));
    std::vector<KernelCounters> out;
    std::vector<double> v(metrics_.size());
    for (size_t i = 0; i < ip.numTotalRanges; ++i) {
      CUpti_RangeProfiler_CounterData_GetRangeInfo_Params rp{
          CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
      rp.pCounterDataImage = data_.data();
      rp.counterDataImageSize = data_.size();
      rp.rangeIndex = i;
      rp.rangeDelimiter = "/";
      CK(cuptiRangeProfilerCounterDataGetRangeInfo(&rp));
      CUpti_Profiler_Host_EvaluateToGpuValues_Params ep{CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
      ep.pHostObject = host_;
      ep.pCounterDataImage = data_.data();
      ep.counterDataImageSize = data_.size();
      ep.ppMetricNames = metrics_.data();
      ep.numMetrics = metrics_.size();
      ep.rangeIndex = i;
      ep.pMetricValues = v.data();
      CK(cuptiProfilerHostEvaluateToGpuValues(&ep));
      KernelCounters k;
      // The kernel's name as launched; the activity records' are demangled.
      k.name = demangle(rp.rangeName ? rp.rangeName : "");
      k.fma_pct = v[0];
      k.tensor_pct = v[1];
      k.dram_pct = v[2];
      k.duration_ns = v[3];
      out.push_back(std::move(k));
    }
    return out;
  }

 private:
  void choose_tensor_metric() {
    std::set<std::string> base;
    for (CUpti_MetricType t : {CUPTI_METRIC_TYPE_COUNTER, CUPTI_METRIC_TYPE_RATIO, CUPTI_METRIC_TYPE_THROUGHPUT}) {
      CUpti_Profiler_Host_GetBaseMetrics_Params p{CUpti_Profiler_Host_GetBaseMetrics_Params_STRUCT_SIZE};
      p.pHostObject = host_;
      p.metricType = t;
      CK(cuptiProfilerHostGetBaseMetrics(&p));
      for (size_t i = 0; i < p.numMetrics; ++i) base.insert(p.ppMetricNames[i]);
    }
    for (const char* c : kTensorCandidates)
      if (base.count(c)) {
        names_.tensor = std::string(c) + ".avg.pct_of_peak_sustained_active";
        break;
      }
    if (names_.tensor.empty()) LOUPE_FAIL("the chip ", chip_, " lists none of the tensor pipe metrics loupe reads");
    metrics_ = {names_.fma.c_str(), names_.tensor.c_str(), names_.dram.c_str(), names_.duration.c_str()};
  }

  void make_config() {
    CUpti_Profiler_Host_ConfigAddMetrics_Params ap{CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    ap.pHostObject = host_;
    ap.ppMetricNames = metrics_.data();
    ap.numMetrics = metrics_.size();
    CK(cuptiProfilerHostConfigAddMetrics(&ap));
    CUpti_Profiler_Host_GetConfigImageSize_Params sp{CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    sp.pHostObject = host_;
    CK(cuptiProfilerHostGetConfigImageSize(&sp));
    config_.resize(sp.configImageSize);
    CUpti_Profiler_Host_GetConfigImage_Params gp{CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    gp.pHostObject = host_;
    gp.pConfigImage = config_.data();
    gp.configImageSize = config_.size();
    CK(cuptiProfilerHostGetConfigImage(&gp));
  }

  void make_counter_data() {
    CUpti_RangeProfiler_GetCounterDataSize_Params sp{CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    sp.pRangeProfilerObject = rp_;
    sp.pMetricNames = metrics_.data();
    sp.numMetrics = metrics_.size();
    sp.maxNumOfRanges = kMaxRanges;
    sp.maxNumRangeTreeNodes = uint32_t(kMaxRanges);
    CK(cuptiRangeProfilerGetCounterDataSize(&sp));
    data_.assign(sp.counterDataSize, 0);
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params ip{
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    ip.pRangeProfilerObject = rp_;
    ip.pCounterData = data_.data();
    ip.counterDataSize = data_.size();
    CK(cuptiRangeProfilerCounterDataImageInitialize(&ip));
  }

  CounterNames names_;
  std::vector<const char*> metrics_;  // into names_
  std::string chip_;
  std::vector<uint8_t> availability_, config_, data_;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  CUpti_RangeProfiler_Object* rp_ = nullptr;
  size_t dropped_ = 0;
};

std::unique_ptr<CounterSession> make_cupti_counters(std::string* why) {
  auto s = std::make_unique<CuptiCounters>();
  try {
    s->init();
  } catch (const std::exception& e) {
    *why = e.what();
    return nullptr;
  }
  return s;
}

struct Registrar {
  Registrar() { register_counter_session_factory(make_cupti_counters); }
} g_registrar;

}  // namespace
}  // namespace loupe::instrument
