#include "instrument/op_profile.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "core/text.h"
#include "instrument/intervals.h"
#include "instrument/json_out.h"

namespace loupe::instrument {

namespace {
using Key = std::tuple<std::string, std::string, std::string>;  // module, op, phase

// The bound and the share of its ceiling from the row's rates.
void classify(ProfileRow& r, const Ceilings& c) {
  double per_call = r.calls > 0 ? r.seconds / r.calls : 0;
  double fc = c.flops > 0 ? r.flop_rate / c.flops : -1;
  double bc = c.bandwidth > 0 ? r.byte_rate / c.bandwidth : -1;
  bool compute = r.flops > 0 && r.bytes > 0 && c.flops > 0 && c.bandwidth > 0 &&
                 r.flops / r.bytes >= c.flops / c.bandwidth;
  if (r.bytes <= 0 && r.flops > 0) compute = true;
  if (r.flops <= 0 && r.bytes <= 0) {  // work no op counted (a library's or the loader's copy)
    r.pct_ceiling = -1;
    r.bound = per_call < kLatencySeconds ? "latency" : "unknown";
    return;
  }
  r.of_compute_peak = compute;
  r.in_cache = !compute && c.cache_bytes > 0 && r.calls > 0 && r.bytes / r.calls <= c.cache_bytes;
  r.pct_ceiling = compute ? (fc >= 0 ? 100 * fc : -1) : (bc >= 0 ? 100 * bc : -1);
  if (per_call < kLatencySeconds) r.bound = "latency";
  else r.bound = compute ? "compute" : "memory";
}

// "fc1/Linear+fc1_relu/ReLU+drop1/Dropout" -> "fc1+fc1_relu+drop1": the modules' paths without their types.
std::string short_module(const std::string& m) {
  std::string out, part;
  auto flush = [&] {
    if (part.empty()) return;
    size_t slash = part.rfind('/');
    out += (out.empty() ? "" : "+") + (slash == std::string::npos ? part : part.substr(0, slash));
    part.clear();
  };
  for (char c : m) {
    if (c == '+') flush();
    else part += c;
  }
  flush();
  return out;
}

// Each record's part of the union of the records: a sweep over their begin and end points; a
// stretch covered by k records gives each of them 1/k of it.
void apportion(const std::vector<ActivityRecord>& acts, const std::vector<ProfileRow*>& owner) {
  std::vector<std::pair<uint64_t, int>> ev;  // (time, +i+1 begin or -(i+1) end)
  for (size_t i = 0; i < acts.size(); ++i) {
    if (acts[i].end_ns <= acts[i].begin_ns) continue;
    ev.push_back({acts[i].begin_ns, int(i) + 1});
    ev.push_back({acts[i].end_ns, -(int(i) + 1)});
  }
  std::sort(ev.begin(), ev.end());
  std::vector<int> active;
  uint64_t last = 0;
  for (const auto& [t, e] : ev) {
    if (!active.empty() && t > last) {
      const double part = double(t - last) * 1e-9 / double(active.size());
      for (int i : active) owner[size_t(i)]->busy_seconds += part;
    }
    last = t;
    if (e > 0) active.push_back(e - 1);
    else active.erase(std::find(active.begin(), active.end(), -e - 1));
  }
}

// Weighted sums of the counters per row: fma, tensor, dram (each times the duration), duration.
using CounterSums = std::unordered_map<ProfileRow*, std::array<double, 4>>;

// The counter pass's kernels (launch order) against the window's last step's kernels (launch
// order: CUPTI's correlation ids). Automatic ranges are named by their index, not the kernel, so
// they pair by position, and only when both steps launched as many kernels (an eager step of a
// reference model launches the same ones every time).
void match_counters(const ProfileInput& in, const std::unordered_map<uint64_t, ProfileRow*>& by_id,
                    const std::unordered_map<uint64_t, int64_t>& step_of, Profile& p, CounterSums& sums);

std::string label(const ProfileRow& r) {
  std::string m = r.module.empty() ? "" : short_module(r.module) + " ";
  return m + r.op + (r.phase == "unattributed" ? "" : " " + r.phase);
}

std::string advice_for(const ProfileRow& r, bool gpu, bool graphed, Precision p) {
  const std::string precision = precision_name(p);
  if (r.bound == "unknown") return "work outside loupe's ops (no FLOP or byte count): see the trace (--trace)";
  if (!gpu) {
    if (r.bound == "latency") return "too little work per call for the call's overhead: a larger batch";
    if (r.bound == "compute") return "compute-bound below the CPU's GEMM rate: more threads (--threads) or a larger batch";
    return "memory-bound: fuse it with its neighbours or move fewer bytes";
  }
  if (r.bound == "latency" && graphed)
    return "too little work per kernel to fill the GPU, already in a CUDA graph: a larger batch, or fused with its "
           "neighbours (each kernel boundary costs its ramp and tail)";
  if (r.bound == "latency")
    return "too little work per launch to fill the GPU: a larger batch, or a CUDA graph (the default "
           "--graph auto) to remove the launch gaps";
  if (r.bound == "compute" && is_16bit(p))
    return "compute-bound below the " + precision + " peak: its GEMMs are too small or too few to fill the GPU (a "
           "larger batch, or wider layers)";
  if (r.bound == "compute")
    return "compute-bound below the " + precision + " peak: float16/bfloat16 (--precision fp16 or bf16) for tensor "
           "cores, or a larger batch for larger GEMMs";
  return "memory-bound: fuse it with its neighbours or move fewer bytes (16-bit activations)";
}

std::vector<std::string> pick_targets(const std::vector<ProfileRow>& rows, const Ceilings& c, bool gpu, bool graphed) {
  std::vector<const ProfileRow*> v;
  for (const auto& r : rows) v.push_back(&r);
  auto gain = [](const ProfileRow* r) { return r->share * (1 - std::clamp(r->pct_ceiling, 0.0, 100.0) / 100); };
  std::stable_sort(v.begin(), v.end(), [&](auto* a, auto* b) { return gain(a) > gain(b); });
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size() && out.size() < 3; ++i) {
    const ProfileRow& r = *v[i];
    if (r.share < 0.01) break;
    std::string where = r.pct_ceiling < 0 ? "an unknown share of the ceiling"
                        : fmt("%.0f %% of ", r.pct_ceiling) +
                              (r.of_compute_peak ? "the compute peak" : "the memory bandwidth");
    out.push_back(label(r) + ": " + fmt("%.0f %%", 100 * r.share) + " of the step at " + where + "; " +
                  advice_for(r, gpu, graphed, c.precision));
  }
  return out;
}
}  // namespace

namespace {
void match_counters(const ProfileInput& in, const std::unordered_map<uint64_t, ProfileRow*>& by_id,
                    const std::unordered_map<uint64_t, int64_t>& step_of, Profile& p, CounterSums& sums) {
  int64_t last = -1;
  for (const auto& [id, s] : step_of) last = std::max(last, s);
  // The last step's kernels: from the first one an op of that step launched to the window's end,
  // those outside any op included.
  uint64_t from = UINT64_MAX;
  for (const ActivityRecord& a : in.activity) {
    auto s = step_of.find(a.external);
    if (a.kind == 0 && s != step_of.end() && s->second == last) from = std::min(from, a.begin_ns);
  }
  std::vector<const ActivityRecord*> step;
  for (const ActivityRecord& a : in.activity)
    if (a.kind == 0 && a.begin_ns >= from) step.push_back(&a);
  std::stable_sort(step.begin(), step.end(), [](auto* a, auto* b) { return a->correlation < b->correlation; });
  const bool paired = step.size() == in.counters.size();
  if (!paired)
    p.counters_why = "the counter pass launched " + std::to_string(in.counters.size()) + " kernels, the window's last "
                     "step " + std::to_string(step.size()) + ": per-row counters n/a";
  double w = 0, f = 0, t = 0, d = 0;
  for (size_t i = 0; i < in.counters.size(); ++i) {
    const KernelCounters& k = in.counters[i];
    CountedKernel ck{k, ""};
    if (paired) {
      ck.counters.name = step[i]->name;
      auto it = by_id.find(step[i]->external);
      if (it != by_id.end()) {
        ProfileRow* r = it->second;
        ck.row = label(*r);
        if (k.duration_ns > 0) {
          auto& s = sums[r];
          s[0] += k.fma_pct * k.duration_ns, s[1] += k.tensor_pct * k.duration_ns, s[2] += k.dram_pct * k.duration_ns;
          s[3] += k.duration_ns;
        }
        ++p.matched_kernels;
      }
    }
    if (k.duration_ns > 0) {
      w += k.duration_ns, f += k.fma_pct * k.duration_ns, t += k.tensor_pct * k.duration_ns;
      d += k.dram_pct * k.duration_ns;
    }
    p.kernels.push_back(std::move(ck));
  }
  p.counted_kernels = in.counters.size();
  if (w > 0) p.fma_pct = f / w, p.tensor_pct = t / w, p.dram_pct = d / w;
}
// The gaps under 5 us between the window's GPU work (instrument/intervals.h), and the records, per step.
void boundaries(const std::vector<ActivityRecord>& activity, Profile& p) {
  if (activity.empty()) return;
  std::vector<Interval> v;
  uint64_t first = UINT64_MAX, last = 0;
  for (const ActivityRecord& a : activity) {
    v.push_back({a.begin_ns, a.end_ns});
    first = std::min(first, a.begin_ns), last = std::max(last, a.end_ns);
  }
  p.boundary = double(split_time(std::move(v), first, last, kBoundaryMaxNs).boundary) * 1e-9 / double(p.steps);
  p.activities = double(activity.size()) / double(p.steps);
}
}  // namespace

Profile build_profile(const ProfileInput& in) {
  Profile p;
  p.steps = std::max<int64_t>(1, in.steps);
  p.gpu = in.gpu;
  p.ceilings = in.ceilings;
  const double steps = double(p.steps);
  std::map<Key, ProfileRow> rows;
  std::unordered_map<uint64_t, ProfileRow*> by_id;
  std::unordered_map<uint64_t, int64_t> step_of;
  for (const OpRecord& o : in.ops) {
    step_of[o.id] = o.step;
    ProfileRow& r = rows[Key{o.module, o.op, o.phase}];
    r.module = o.module;
    r.op = o.op;
    r.phase = o.phase;
    r.calls += 1;
    r.flops += o.flops;
    r.bytes += o.bytes;
    if (!in.gpu) r.seconds += std::max(0.0, o.host_end - o.host_begin);
    by_id[o.id] = &r;
  }
  std::vector<ProfileRow*> owner;  // per activity record
  for (const ActivityRecord& a : in.activity) {
    auto it = a.external ? by_id.find(a.external) : by_id.end();
    ProfileRow* r = it != by_id.end() ? it->second : nullptr;
    if (!r) {
      r = &rows[Key{"", a.name, "unattributed"}];
      r->op = a.name;
      r->phase = "unattributed";
      r->calls += 1;
    }
    r->kernels += 1;
    r->seconds += double(a.end_ns - a.begin_ns) * 1e-9;
    owner.push_back(r);
  }
  apportion(in.activity, owner);
  if (!in.gpu)
    for (auto& [k, r] : rows) r.busy_seconds = r.seconds;  // one thread of ops: nothing overlaps
  p.counters_asked = in.counters_asked;
  p.counters_why = in.counters_why;
  p.counter_names = in.counter_names;
  CounterSums sums;
  if (!in.counters.empty()) match_counters(in, by_id, step_of, p, sums);
  for (auto& [row, s] : sums)
    if (s[3] > 0) row->fma_pct = s[0] / s[3], row->tensor_pct = s[1] / s[3], row->dram_pct = s[2] / s[3];
  for (auto& [k, r] : rows) {
    r.calls /= steps;
    r.kernels /= steps;
    r.seconds /= steps;
    r.busy_seconds /= steps;
    r.flops /= steps;
    r.bytes /= steps;
    r.flop_rate = r.seconds > 0 ? r.flops / r.seconds : 0;
    r.byte_rate = r.seconds > 0 ? r.bytes / r.seconds : 0;
    p.rows_seconds += r.seconds;
    p.rows_busy += r.busy_seconds;
    p.flops += r.flops;
    // Host-side bookkeeping with no device work (a view, a shape check) is not a row on the GPU.
    if (in.gpu && r.kernels == 0) continue;
    p.rows.push_back(r);
  }
  p.wall = in.wall_seconds / steps;
  p.busy = in.busy_seconds / steps;
  p.idle = std::max(0.0, p.wall - p.busy);
  p.graph_replays = in.graph_replays;
  boundaries(in.activity, p);
  p.unscoped_flops = in.unscoped_flops / steps;
  p.counted_flops = in.counted_flops / steps;
  for (auto& r : p.rows) {
    r.share = p.busy > 0 ? r.busy_seconds / p.busy : 0;
    classify(r, p.ceilings);
  }
  std::stable_sort(p.rows.begin(), p.rows.end(),
                   [](const ProfileRow& a, const ProfileRow& b) { return a.seconds > b.seconds; });
  p.targets = pick_targets(p.rows, p.ceilings, p.gpu, p.graph_replays > 0);
  return p;
}

std::string profile_table(const Profile& p, size_t max_rows) {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "%-22s %-16s %-9s %6s %9s %6s %9s %9s %8s %8s %6s  %-8s", "module", "op", "phase",
                "calls", "us/step", "share", "MFLOP", "MB", "TFLOP/s", "GB/s", "%ceil", "bound");
  o << line << (p.counters_asked ? "  fma%  tc% dram%\n" : "\n");
  auto cpct = [](double v) { return v >= 0 ? fmt("%5.1f", v) : std::string("  n/a"); };
  for (size_t i = 0; i < p.rows.size() && i < max_rows; ++i) {
    const ProfileRow& r = p.rows[i];
    std::string op = r.op.size() > 16 ? r.op.substr(0, 15) + "~" : r.op;
    std::string mod = short_module(r.module);
    if (mod.size() > 22) mod = mod.substr(0, 21) + "~";
    std::string pct = r.pct_ceiling >= 0 ? fmt("%.0f", r.pct_ceiling) + (r.in_cache ? "*" : "") : "n/a";
    std::snprintf(line, sizeof line, "%-22s %-16s %-9s %6.3g %9.1f %5.1f%% %9.3f %9.3f %8.2f %8.1f %6s  %-8s",
                  mod.c_str(), op.c_str(), r.phase == "unattributed" ? "-" : r.phase.c_str(), r.calls, r.seconds * 1e6,
                  100 * r.share, r.flops / 1e6, r.bytes / 1e6, r.flop_rate / 1e12, r.byte_rate / 1e9, pct.c_str(),
                  r.bound.c_str());
    o << line;
    if (p.counters_asked) o << " " << cpct(r.fma_pct) << cpct(r.tensor_pct) << cpct(r.dram_pct);
    o << "\n";
  }
  if (p.rows.size() > max_rows) o << "(" << p.rows.size() - max_rows << " shorter rows in the CSV and JSON)\n";
  bool cached = false;
  for (size_t i = 0; i < p.rows.size() && i < max_rows; ++i) cached = cached || p.rows[i].in_cache;
  if (cached)
    o << "* its bytes per call fit in the CPU's " << fmt("%.0f", p.ceilings.cache_bytes / (1 << 20))
      << " MiB last-level cache: read there, not from memory, so it may pass 100 % of the memory bandwidth\n";
  return o.str();
}

std::string profile_csv(const Profile& p) {
  std::ostringstream o;
  o.precision(10);
  o << "module,op,phase,calls_per_step,kernels_per_step,us_per_step,busy_us_per_step,share,flops_per_step,bytes_per_step,"
       "tflops,gbs,pct_ceiling,bound,ceiling_tflops,ceiling_gbs,fma_pct,tensor_pct,dram_pct\n";
  auto opt = [](double v) { return v >= 0 ? fmt("%.2f", v) : std::string(); };
  auto q = [](const std::string& s) {
    std::string r = "\"";
    for (char c : s) r += c == '"' ? std::string("\"\"") : std::string(1, c);
    return r + "\"";
  };
  for (const ProfileRow& r : p.rows)
    o << q(r.module) << ',' << q(r.op) << ',' << r.phase << ',' << r.calls << ',' << r.kernels << ','
      << r.seconds * 1e6 << ',' << r.busy_seconds * 1e6 << ',' << r.share << ',' << r.flops << ',' << r.bytes << ',' << r.flop_rate / 1e12 << ','
      << r.byte_rate / 1e9 << ',' << (r.pct_ceiling >= 0 ? fmt("%.2f", r.pct_ceiling) : "") << ',' << r.bound << ','
      << (p.ceilings.flops > 0 ? fmt("%.4g", p.ceilings.flops / 1e12) : "") << ','
      << (p.ceilings.bandwidth > 0 ? fmt("%.4g", p.ceilings.bandwidth / 1e9) : "") << ',' << opt(r.fma_pct) << ','
      << opt(r.tensor_pct) << ',' << opt(r.dram_pct) << '\n';
  return o.str();
}

namespace {
using Json = nlohmann::ordered_json;
// A percentage or a time that was not measured is negative in the profile: null here.
Json measured_json(double v) { return v >= 0 ? json_number(v) : Json(nullptr); }

// --counters: the metric names, the time-weighted figures, and every kernel of the pass (for
// comparing with ncu kernel by kernel); null when not asked for.
Json counters_json(const Profile& p) {
  if (!p.counters_asked) return nullptr;
  const CounterNames& n = p.counter_names;
  Json kernels = Json::array();
  for (const CountedKernel& k : p.kernels)
    kernels.push_back({{"name", k.counters.name}, {"row", k.row}, {"fma_pct", measured_json(k.counters.fma_pct)},
                       {"tensor_pct", measured_json(k.counters.tensor_pct)}, {"dram_pct", measured_json(k.counters.dram_pct)},
                       {"duration_ns", measured_json(k.counters.duration_ns)}});
  return {{"why", p.counters_why},          {"metrics", {n.fma, n.tensor, n.dram, n.duration}},
          {"fma_pct", measured_json(p.fma_pct)}, {"tensor_pct", measured_json(p.tensor_pct)},
          {"dram_pct", measured_json(p.dram_pct)}, {"kernels_counted", p.counted_kernels},
          {"kernels_matched", p.matched_kernels}, {"kernels", kernels}};
}

Json row_json(const ProfileRow& r) {
  return {{"module", r.module},
          {"op", r.op},
          {"phase", r.phase},
          {"calls_per_step", json_number(r.calls)},
          {"kernels_per_step", json_number(r.kernels)},
          {"us_per_step", json_number(r.seconds * 1e6)},
          {"busy_us_per_step", json_number(r.busy_seconds * 1e6)},
          {"share", json_number(r.share)},
          {"flops_per_step", json_number(r.flops)},
          {"bytes_per_step", json_number(r.bytes)},
          {"tflops", json_number(r.flop_rate / 1e12)},
          {"gbs", json_number(r.byte_rate / 1e9)},
          {"pct_ceiling", measured_json(r.pct_ceiling)},
          {"bound", r.bound},
          {"fma_pct", measured_json(r.fma_pct)},
          {"tensor_pct", measured_json(r.tensor_pct)},
          {"dram_pct", measured_json(r.dram_pct)}};
}
}  // namespace

std::string profile_json(const Profile& p) {
  Json j{{"steps", p.steps},
         {"gpu", p.gpu},
         {"device", p.device},
         {"precision", precision_name(p.ceilings.precision)},
         {"wall_us_per_step", json_number(p.wall * 1e6)},
         {"busy_us_per_step", json_number(p.busy * 1e6)},
         {"idle_us_per_step", json_number(p.idle * 1e6)},
         {"boundary_us_per_step", json_number(p.boundary * 1e6)},
         {"activities_per_step", json_number(p.activities)},
         {"graph_replays", p.graph_replays},
         {"rows_us_per_step", json_number(p.rows_seconds * 1e6)},
         {"rows_busy_us_per_step", json_number(p.rows_busy * 1e6)},
         {"flops_per_step", json_number(p.flops)},
         {"unscoped_flops_per_step", json_number(p.unscoped_flops)},
         {"counted_flops_per_step", json_number(p.counted_flops)},
         {"ceiling_tflops", p.ceilings.flops > 0 ? json_number(p.ceilings.flops / 1e12) : Json(nullptr)},
         {"ceiling_tflops_source", p.ceilings.flops_source},
         {"ceiling_gbs", p.ceilings.bandwidth > 0 ? json_number(p.ceilings.bandwidth / 1e9) : Json(nullptr)},
         {"ceiling_gbs_source", p.ceilings.bandwidth_source},
         {"targets", p.targets}};
  Json rows = Json::array();
  for (const ProfileRow& r : p.rows) rows.push_back(row_json(r));
  j["rows"] = std::move(rows);
  j["counters"] = counters_json(p);
  return json_text(j) + "\n";
}

}  // namespace loupe::instrument
