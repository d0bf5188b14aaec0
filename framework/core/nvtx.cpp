#include "core/nvtx.h"

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/clock.h"
#include "nvtx3/nvToolsExt.h"

namespace loupe {

namespace {
std::atomic<int64_t> g_step{-1};  // read by loader workers too

nvtxDomainHandle_t domain() {
  static nvtxDomainHandle_t d = nvtxDomainCreateA("loupe");
  return d;
}

// Registered strings are cheaper for tools than ASCII messages; register each name once. The
// per-thread cache is keyed by the caller's pointer and checked by content (a buffer may be reused
// for another name), so a lookup costs no lock and no allocation.
nvtxStringHandle_t registered(const char* name) {
  struct Entry {
    std::string text;
    nvtxStringHandle_t handle;
  };
  thread_local std::unordered_map<const char*, Entry> cache;
  auto it = cache.find(name);
  if (it != cache.end() && it->second.text == name) return it->second.handle;
  nvtxStringHandle_t h = nvtxDomainRegisterStringA(domain(), name);
  cache[name] = Entry{name, h};
  return h;
}

nvtxEventAttributes_t attributes(const char* name) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  a.message.registered = registered(name);
  a.payloadType = NVTX_PAYLOAD_TYPE_INT64;
  a.payload.llValue = g_step.load(std::memory_order_relaxed);
  return a;
}
}  // namespace

namespace {
// Per thread: ranges nest per thread, and the trace records the thread that enabled it (the
// training thread), not the loader's workers.
thread_local bool g_trace_on = false;
thread_local int g_depth = 0;
thread_local int g_gen = 0;  // bumped by host_trace_take, so ranges still open then do not write into the next window
thread_local std::vector<HostRange> g_trace;
thread_local std::vector<const char*> g_phases, g_modules;  // open Phase and Module ranges
}  // namespace

void host_trace_enable(bool on) { g_trace_on = on; }
std::vector<HostRange> host_trace_take() {
  std::vector<HostRange> out;
  out.swap(g_trace);
  ++g_gen;
  return out;
}

void set_current_step(int64_t step) { g_step.store(step, std::memory_order_relaxed); }
int64_t current_step() { return g_step.load(std::memory_order_relaxed); }

const char* current_phase_range() { return g_phases.empty() ? nullptr : g_phases.back(); }
const char* current_module_range() { return g_modules.empty() ? nullptr : g_modules.back(); }

NvtxRange::NvtxRange(const char* name, RangeKind kind) : kind_(kind) {
  if (kind == RangeKind::Phase) g_phases.push_back(name);
  else if (kind == RangeKind::Module) g_modules.push_back(name);
  nvtxEventAttributes_t a = attributes(name);
  nvtxDomainRangePushEx(domain(), &a);
  if (g_trace_on) {
    trace_index_ = int(g_trace.size());
    trace_gen_ = g_gen;
    g_trace.push_back({name, now_s(), 0.0, g_depth});
  }
  ++g_depth;
}

NvtxRange::~NvtxRange() {
  --g_depth;
  if (trace_index_ >= 0 && trace_gen_ == g_gen) g_trace[size_t(trace_index_)].end = now_s();
  nvtxDomainRangePop(domain());
  if (kind_ == RangeKind::Phase) g_phases.pop_back();
  else if (kind_ == RangeKind::Module) g_modules.pop_back();
}

void nvtx_mark(const char* name) {
  nvtxEventAttributes_t a = attributes(name);
  nvtxDomainMarkEx(domain(), &a);
}

}  // namespace loupe
