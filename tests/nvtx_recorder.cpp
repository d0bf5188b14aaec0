// An NVTX injection library for the tests (loaded by NVTX through NVTX_INJECTION64_PATH): it
// records every range pushed in the "loupe" domain, with its nesting depth and payload, one line
// per push, to the file named by LOUPE_NVTX_LOG. "name<TAB>depth<TAB>payload".
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/knobs.h"
#include "nvtx3/nvToolsExt.h"

namespace {
std::mutex g_mutex;
std::FILE* g_log = nullptr;
thread_local int g_depth = 0;  // ranges nest per thread (the loader's workers have their own)
nvtxDomainHandle_t g_loupe = nullptr;
// What the domain and string handles point at: owned here (a deque never moves its elements) and
// freed with the library at exit, so a run under LeakSanitizer reports no leak of ours.
std::deque<std::string> g_handles;
std::unordered_map<const void*, std::string> g_strings;  // registered string handle -> text

nvtxDomainHandle_t domain_create(const char* name) {
  std::lock_guard<std::mutex> l(g_mutex);
  auto* h = reinterpret_cast<nvtxDomainHandle_t>(&g_handles.emplace_back(name));
  if (std::string(name) == "loupe") g_loupe = h;
  return h;
}

nvtxStringHandle_t register_string(nvtxDomainHandle_t, const char* s) {
  std::lock_guard<std::mutex> l(g_mutex);
  auto* h = reinterpret_cast<nvtxStringHandle_t>(&g_handles.emplace_back(s));
  g_strings[h] = s;
  return h;
}

int push(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  std::lock_guard<std::mutex> l(g_mutex);
  if (d != g_loupe) return 0;
  std::string name = a->messageType == NVTX_MESSAGE_TYPE_REGISTERED ? g_strings[a->message.registered]
                     : a->messageType == NVTX_MESSAGE_TYPE_ASCII     ? a->message.ascii
                                                                     : "?";
  long long payload = a->payloadType == NVTX_PAYLOAD_TYPE_INT64 ? (long long)a->payload.llValue : -999;
  if (g_log) {
    std::fprintf(g_log, "%s\t%d\t%lld\n", name.c_str(), g_depth, payload);
    std::fflush(g_log);  // a test watches the file to learn that a phase has begun (test_train's Ctrl-C)
  }
  return g_depth++;
}

int pop(nvtxDomainHandle_t d) {
  std::lock_guard<std::mutex> l(g_mutex);
  if (d != g_loupe) return 0;
  if (g_log) std::fflush(g_log);
  return --g_depth;
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  if (const std::optional<std::string> path = loupe::knobs::text("LOUPE_NVTX_LOG")) g_log = std::fopen(path->c_str(), "w");
  auto* cb = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (!cb) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size)) return 0;
  auto set = [&](unsigned id, void* fn) {
    if (id < size) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  };
  set(NVTX_CBID_CORE2_DomainCreateA, reinterpret_cast<void*>(&domain_create));
  set(NVTX_CBID_CORE2_DomainRegisterStringA, reinterpret_cast<void*>(&register_string));
  set(NVTX_CBID_CORE2_DomainRangePushEx, reinterpret_cast<void*>(&push));
  set(NVTX_CBID_CORE2_DomainRangePop, reinterpret_cast<void*>(&pop));
  return 1;
}
