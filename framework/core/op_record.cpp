#include "core/op_record.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <utility>

#include "core/clock.h"
#include "core/nvtx.h"

namespace loupe {

namespace {
struct Recorder {
  bool on = false;
  int depth = 0;      // open scopes, the outermost included
  int outer = -1;     // the outermost open scope's record
  double unscoped = 0;
  std::vector<OpRecord> records;
};
thread_local Recorder g_rec;

std::atomic<uint64_t> g_next_id{1};
std::atomic<OpCorrelationHook> g_hook{nullptr};

// Sites are few (a model's modules times its ops) and shared by every thread that records.
struct Sites {
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, int> ids;
  std::vector<std::pair<std::string, std::string>> names;  // (module, op)
};
Sites& sites() {
  static Sites* s = new Sites;
  return *s;
}

double tensor_bytes(const Tensor& t) { return t.defined() ? double(t.nbytes()) : 0; }
}  // namespace

void op_records_enable(bool on) {
  g_rec.on = on;
  if (on) g_rec.unscoped = 0;
}
bool op_records_on() { return g_rec.on; }

std::vector<OpRecord> op_records_take(double* unscoped_flops) {
  std::vector<OpRecord> out;
  out.swap(g_rec.records);
  if (unscoped_flops) *unscoped_flops = g_rec.unscoped;
  g_rec.unscoped = 0;
  g_rec.outer = -1;  // a scope still open writes nowhere now
  return out;
}

uint64_t op_record_current_id() {
  return g_rec.on && g_rec.outer >= 0 ? g_rec.records[size_t(g_rec.outer)].id : 0;
}

void set_op_correlation_hook(OpCorrelationHook h) { g_hook.store(h); }

void OpScope::open(std::string op, std::string module, const char* phase) {
  OpRecord r;
  r.op = std::move(op);
  r.module = std::move(module);
  r.phase = phase;
  r.id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  r.step = current_step();
  r.host_begin = now_s();
  index_ = int(g_rec.records.size());
  g_rec.records.push_back(std::move(r));
  g_rec.outer = index_;
  if (OpCorrelationHook h = g_hook.load(std::memory_order_relaxed)) h(g_rec.records.back().id, true);
}

bool OpScope::enter() {
  if (!g_rec.on) return false;
  if (g_rec.depth++ > 0) {  // inside another op: that one records
    nested_ = true;
    return false;
  }
  return true;
}

OpScope::OpScope(const char* op, std::initializer_list<const Tensor*> inputs) {
  if (!enter()) return;
  const char* m = current_module_range();
  const char* p = current_phase_range();
  open(op, m ? m : "", p ? p : "other");
  double b = 0;
  for (const Tensor* t : inputs)
    if (t) b += tensor_bytes(*t);
  g_rec.records[size_t(index_)].bytes = b;
}

OpScope::OpScope(Backward, int site, double forward_input_bytes, const char* node_name) {
  if (!enter()) return;
  std::pair<std::string, std::string> where{"", node_name};
  if (site >= 0) {
    Sites& s = sites();
    std::lock_guard<std::mutex> lock(s.mu);
    where = s.names[size_t(site)];
  }
  open(std::move(where.second), std::move(where.first), "backward");
  g_rec.records[size_t(index_)].bytes = std::max(0.0, forward_input_bytes);  // what the forward read, read again
}

OpScope::~OpScope() {
  if (!nested_ && index_ < 0) return;  // not recording when opened
  --g_rec.depth;
  if (nested_) return;
  if (OpCorrelationHook h = g_hook.load(std::memory_order_relaxed)) h(0, false);
  if (g_rec.outer == index_) {
    g_rec.records[size_t(index_)].host_end = now_s();
    g_rec.outer = -1;
  }
}

const Tensor& OpScope::result(const Tensor& y) {
  add_bytes(y);
  return y;
}

void OpScope::add_bytes(const Tensor& t) {
  if (index_ >= 0) add_bytes(tensor_bytes(t));  // not recording: nothing to count (the backward's hot path)
}

void OpScope::add_bytes(double b) {
  if (index_ >= 0 && g_rec.outer == index_) g_rec.records[size_t(index_)].bytes += b;
}

void OpScope::set_bytes(double b) {
  if (index_ >= 0 && g_rec.outer == index_) g_rec.records[size_t(index_)].bytes = b;
}

OpSite op_site_here(const char* node_name) {
  if (!g_rec.on) return {};
  std::pair<std::string, std::string> key;
  double in_bytes = 0;
  if (g_rec.outer >= 0) {
    const OpRecord& r = g_rec.records[size_t(g_rec.outer)];
    if (r.phase == "backward") return {};  // a node made during backward (none in loupe's ops)
    key = {r.module, r.op};
    in_bytes = r.bytes;
  } else {  // a view or shape op (no scope of its own): its backward moves no bytes either
    const char* m = current_module_range();
    key = {m ? m : "", node_name};
    in_bytes = -1;
  }
  Sites& s = sites();
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.ids.find(key);
  if (it != s.ids.end()) return {it->second, in_bytes};
  int id = int(s.names.size());
  s.names.push_back(key);
  s.ids.emplace(std::move(key), id);
  return {id, in_bytes};
}

namespace detail {
void op_record_flops(double f) {
  if (!g_rec.on) return;
  if (g_rec.outer >= 0) g_rec.records[size_t(g_rec.outer)].flops += f;
  else g_rec.unscoped += f;
}
}  // namespace detail

}  // namespace loupe
