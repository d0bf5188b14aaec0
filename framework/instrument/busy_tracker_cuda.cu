// BusyTracker with CUPTI's activity API (CUDA 13: CUpti_ActivityKernel10, CUpti_ActivityMemcpy6,
// CUpti_ActivityMemset4). CUPTI hands us buffers of records from its own thread (or from inside
// cuptiActivityFlushAll); we keep a compact copy of each under a mutex and answer queries from it.
// Every CUPTI call is checked: a failure becomes a `why` string (factory) or a loupe::Error
// (methods), never a crash. Link: CUDA::cupti (and CUDA::cudart, for the driver hint).
#include <cuda_runtime.h>
#include <cupti.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/op_record.h"
#include "instrument/busy_tracker.h"
#include "instrument/cupti_result.cuh"
#include "instrument/intervals.h"

namespace loupe::instrument {
namespace {

constexpr size_t kBufferBytes = 8u << 20;  // per CUPTI buffer: ~38k kernel records of 216 bytes
constexpr size_t kSpareBuffers = 4;        // zeroed buffers kept for reuse
const CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                     CUPTI_ACTIVITY_KIND_MEMSET};
const char* const kKindNames[] = {"CONCURRENT_KERNEL", "MEMCPY", "MEMSET"};

// CUPTI reports a missing driver or GPU as CUPTI_ERROR_UNKNOWN; say which it is.
std::string driver_hint() {
  int driver = 0, devices = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) return "; no NVIDIA driver is installed here";
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return "; no CUDA GPU is visible here";
  return "";
}

// "call failed: CUPTI_ERROR_X (n)" plus a hint for the failures a user can do something about.
std::string tracker_cupti_error(CUptiResult r, const char* call) {
  const std::string msg = cupti_failed(r, call);
  switch (r) {
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return msg + "; another profiler (Nsight Systems/Compute) already holds CUPTI: read busy time from its timeline";
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return msg + "; profiling is restricted to admin users on this machine (NVreg_RestrictProfilingToAdminUsers)";
    default:
      return msg + driver_hint();
  }
}

#define LOUPE_CUPTI_CHECK(call)                                          \
  do {                                                                   \
    CUptiResult r_ = (call);                                             \
    if (r_ != CUPTI_SUCCESS) LOUPE_FAIL(tracker_cupti_error(r_, #call)); \
  } while (0)

struct Rec {
  uint64_t begin, end;
  uint32_t name;  // index into State::names
  uint32_t stream;
  int kind;
  uint32_t correlation;  // CUPTI's id of the API call that launched it
  uint64_t graph_node;   // the graph node that ran it (0: none)
};

// Shared with CUPTI's callbacks. Never destroyed: CUPTI may still deliver buffers at exit.
struct State {
  std::mutex mu;
  std::vector<Rec> recs;
  std::vector<std::string> names;                 // demangled
  std::unordered_map<std::string, uint32_t> ids;  // raw name -> index
  uint64_t dropped = 0;
  std::unordered_map<uint32_t, uint64_t> external;  // API correlation id -> op scope id (correlate())
  bool callbacks_registered = false;
  bool tracker_alive = false;
};
State& tracker_state() {
  static State* s = new State;
  return *s;
}

uint32_t intern(State& s, const char* raw) {  // under s.mu
  auto it = s.ids.find(raw);
  if (it != s.ids.end()) return it->second;
  uint32_t id = uint32_t(s.names.size());
  s.names.push_back(demangle(raw));
  s.ids.emplace(raw, id);
  return id;
}

const char* memcpy_name(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "memcpy PtoP";
    default: return "memcpy";
  }
}

// CUPTI wants zeroed buffers. Left to CUPTI, it zeroes each new buffer itself, on the launching
// thread, stalling the first launch after every flush. So we say that ours come zeroed
// (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER), hand out calloc'd ones and re-zero used ones on
// the completion side, off the launch path.
struct BufferPool {
  std::mutex mu;  // not State::mu: a launch must not wait while a full buffer is parsed
  std::vector<uint8_t*> spare;
};
BufferPool& buffer_pool() {
  static BufferPool* p = new BufferPool;
  return *p;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  uint8_t* b = nullptr;
  {
    BufferPool& p = buffer_pool();
    std::lock_guard<std::mutex> lock(p.mu);
    if (!p.spare.empty()) {
      b = p.spare.back();
      p.spare.pop_back();
    }
  }
  if (!b) b = static_cast<uint8_t*>(std::calloc(1, kBufferBytes));  // 16-aligned; CUPTI needs 8
  *buffer = b;
  *size = b ? kBufferBytes : 0;  // 0: CUPTI drops the records and counts them
  *max_records = 0;
}

void recycle(uint8_t* buffer) {
  std::memset(buffer, 0, kBufferBytes);
  BufferPool& p = buffer_pool();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.spare.size() < kSpareBuffers) {
    p.spare.push_back(buffer);
    return;
  }
  std::free(buffer);
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  State& s = tracker_state();
  std::lock_guard<std::mutex> lock(s.mu);
  CUpti_Activity* a = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &a) == CUPTI_SUCCESS) {
    Rec r{};
    if (a->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || a->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(a);
      r = Rec{k->start,     k->end, intern(s, k->name ? k->name : "kernel"), k->streamId, 0, k->correlationId,
              k->graphNodeId};
    } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(a);
      r = Rec{m->start, m->end, intern(s, memcpy_name(m->copyKind)), m->streamId, 1, m->correlationId,
             m->graphNodeId};
    } else if (a->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
      auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(a);
      r = Rec{m->start, m->end, intern(s, "memset"), m->streamId, 2, m->correlationId, m->graphNodeId};
    } else if (a->kind == CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) {
      auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(a);
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) s.external[e->correlationId] = e->externalId;
      continue;
    } else {
      continue;
    }
    if (r.begin != 0 && r.end > r.begin) s.recs.push_back(r);  // skip incomplete (forced flush)
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS) s.dropped += dropped;
  recycle(buffer);
}

void disable_all() {
  for (CUpti_ActivityKind k : kKinds) cuptiActivityDisable(k);  // best effort: used on cleanup paths
}

// Enables the kinds; on failure undoes it and says why.
bool enable_all(std::string* why) {
  for (size_t i = 0; i < std::size(kKinds); ++i) {
    CUptiResult r = cuptiActivityEnable(kKinds[i]);
    if (r != CUPTI_SUCCESS) {
      disable_all();
      *why = tracker_cupti_error(r, (std::string("cuptiActivityEnable(") + kKindNames[i] + ")").c_str());
      return false;
    }
  }
  return true;
}

// External correlation: CUPTI writes an EXTERNAL_CORRELATION record before each API record made
// while an id is pushed, so the API kinds are enabled with it (their own records are skipped).
const CUpti_ActivityKind kCorrelationKinds[] = {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME,
                                                CUPTI_ACTIVITY_KIND_DRIVER};

void op_correlation_hook(uint64_t id, bool open) {
  uint64_t last = 0;
  if (open) cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
  else cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
}

class CuptiTracker final : public BusyTracker {
 public:
  ~CuptiTracker() override {
    if (correlating_) {
      set_op_correlation_hook(nullptr);
      for (CUpti_ActivityKind k : kCorrelationKinds) cuptiActivityDisable(k);
    }
    if (started_) {
      cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      disable_all();
    }
    State& s = tracker_state();
    std::lock_guard<std::mutex> lock(s.mu);
    s.recs.clear();
    s.recs.shrink_to_fit();
    s.external.clear();
    s.tracker_alive = false;
  }
  void start() override {
    if (started_) return;
    std::string why;
    if (!enable_all(&why)) LOUPE_FAIL("CUPTI busy time cannot start: ", why);
    started_ = true;
  }
  void stop() override {
    if (!started_) return;
    started_ = false;
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    disable_all();
    if (r != CUPTI_SUCCESS) LOUPE_FAIL(tracker_cupti_error(r, "cuptiActivityFlushAll(FORCED)"));
  }
  void flush() override { LOUPE_CUPTI_CHECK(cuptiActivityFlushAll(0)); }
  uint64_t now_ns() override {
    uint64_t t = 0;
    LOUPE_CUPTI_CHECK(cuptiGetTimestamp(&t));
    return t;
  }
  uint64_t busy_ns(uint64_t t0, uint64_t t1) override {
    std::vector<Interval> v;
    {
      State& s = tracker_state();
      std::lock_guard<std::mutex> lock(s.mu);
      v.reserve(s.recs.size());
      for (const Rec& r : s.recs)
        if (r.end > t0 && r.begin < t1) v.push_back({r.begin, r.end});
    }
    return union_length(std::move(v), t0, t1);
  }
  std::vector<ActivityRecord> records(uint64_t t0, uint64_t t1) override {
    std::vector<ActivityRecord> out;
    {
      State& s = tracker_state();
      std::lock_guard<std::mutex> lock(s.mu);
      for (const Rec& r : s.recs)
        if (r.end > t0 && r.begin < t1) {
          auto e = s.external.find(r.correlation);
          out.push_back({s.names[r.name], r.begin, r.end, r.kind, r.stream, e == s.external.end() ? 0 : e->second,
                         r.correlation, r.graph_node});
        }
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const ActivityRecord& a, const ActivityRecord& b) { return a.begin_ns < b.begin_ns; });
    return out;
  }
  void discard_before(uint64_t t) override {
    State& s = tracker_state();
    std::lock_guard<std::mutex> lock(s.mu);
    s.recs.erase(std::remove_if(s.recs.begin(), s.recs.end(), [t](const Rec& r) { return r.end < t; }),
                 s.recs.end());
  }
  void correlate(bool on) override {
    if (on == correlating_) return;
    if (on) {
      for (CUpti_ActivityKind k : kCorrelationKinds) LOUPE_CUPTI_CHECK(cuptiActivityEnable(k));
      set_op_correlation_hook(op_correlation_hook);
    } else {
      set_op_correlation_hook(nullptr);
      for (CUpti_ActivityKind k : kCorrelationKinds) LOUPE_CUPTI_CHECK(cuptiActivityDisable(k));
    }
    correlating_ = on;
  }
  uint64_t dropped_records() override {
    State& s = tracker_state();
    std::lock_guard<std::mutex> lock(s.mu);
    return s.dropped;
  }

 private:
  bool started_ = false, correlating_ = false;
};

std::unique_ptr<BusyTracker> make_cupti_tracker(std::string* why) {
  State& s = tracker_state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.tracker_alive) {
      *why = "a BusyTracker already exists; CUPTI's activity buffers are process-wide, so use that one";
      return nullptr;
    }
    s.tracker_alive = true;  // claimed; CUPTI calls below run without the lock (they may call back)
  }
  auto fail = [&](std::string reason) {
    *why = std::move(reason);
    std::lock_guard<std::mutex> lock(s.mu);
    s.tracker_alive = false;
    return nullptr;
  };
  if (!s.callbacks_registered) {
    size_t bytes = sizeof(uint8_t);
    uint8_t zeroed = 1;
    CUptiResult r = cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &bytes, &zeroed);
    if (r != CUPTI_SUCCESS) return fail(tracker_cupti_error(r, "cuptiActivitySetAttribute(ZEROED_OUT_ACTIVITY_BUFFER)"));
    r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) return fail(tracker_cupti_error(r, "cuptiActivityRegisterCallbacks"));
    s.callbacks_registered = true;
  }
  // Probe now, so that a missing driver or GPU, or a profiler holding CUPTI, is a reason here
  // rather than an exception from start() in the middle of a run.
  std::string reason;
  if (!enable_all(&reason)) return fail(reason);
  disable_all();
  uint64_t t = 0;
  if (CUptiResult r = cuptiGetTimestamp(&t); r != CUPTI_SUCCESS) return fail(tracker_cupti_error(r, "cuptiGetTimestamp"));
  std::lock_guard<std::mutex> lock(s.mu);
  s.recs.clear();
  s.external.clear();
  s.dropped = 0;
  return std::unique_ptr<BusyTracker>(new CuptiTracker);
}

struct Registrar {
  Registrar() { register_busy_tracker_factory(make_cupti_tracker); }
} g_registrar;

}  // namespace
}  // namespace loupe::instrument
