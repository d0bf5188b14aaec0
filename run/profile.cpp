#include "run/profile.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/op_record.h"
#include "core/precision.h"
#include "core/text.h"
#include "core/thread_pool.h"
#include "instrument/busy_tracker.h"
#include "instrument/counters.h"
#include "instrument/graph_nodes.h"
#include "instrument/host_stats.h"
#include "instrument/monitor.h"
#include "instrument/peak.h"
#include "instrument/predict.h"
#include "ops/linalg.h"
#include "ops/view.h"
#include "train/profile_window.h"
#include "train/trainer.h"

namespace loupe::run {

namespace {
// The best of `reps` timed runs of f (after one untimed), seconds.
template <class F>
double best_time(Device dev, int reps, F f) {
  f();
  if (dev.is_cuda()) cuda_runtime()->synchronize();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    double t0 = now_s();
    f();
    if (dev.is_cuda()) cuda_runtime()->synchronize();
    best = std::min(best, now_s() - t0);
  }
  return best;
}

}  // namespace

instrument::Ceilings measure_ceilings(Device dev, Precision prec) {
  instrument::Ceilings c;
  c.precision = prec;
  PrecisionScope scope(prec);
  const DType dt = compute_dtype(prec);
  const int64_t n = dev.is_cuda() ? 8192 : 1024;
  Tensor a = full(Shape{n, n}, 0.5, dt, dev), b = full(Shape{n, n}, 0.25, dt, dev);
  double t = best_time(dev, dev.is_cuda() ? 5 : 3, [&] { matmul(a, b); });
  c.flops = 2.0 * double(n) * double(n) * double(n) / t;
  c.flops_source = "measured: a " + std::to_string(n) + "^3 GEMM in " + precision_name(prec) +
                   (dev.is_cuda() ? " (cuBLAS)" : " (loupe's CPU GEMM)");
  a = b = Tensor();
  // GPU 1 GiB; CPU 128 MiB, or the last-level cache where that is larger (up to 1 GiB), so that the
  // copy comes from memory: a 128 MiB copy sat in a 480 MiB L3 and was the cache's rate.
  if (!dev.is_cuda()) c.cache_bytes = double(instrument::last_level_cache_bytes());
  const int64_t m = dev.is_cuda() ? (int64_t(1) << 28)
                                  : std::clamp(int64_t(c.cache_bytes) / 4, int64_t(1) << 25, int64_t(1) << 28);
  Tensor x = full(Shape{m}, 1.0, DType::f32, dev), y = full(Shape{m}, 0.0, DType::f32, dev);
  t = best_time(dev, 5, [&] { copy_(y, x); });  // into memory already touched: no allocation timed
  c.bandwidth = 2.0 * double(m) * 4.0 / t;  // read once, written once
  c.bandwidth_source = "measured: a device copy of " + (dev.is_cuda() ? "1 GiB" : std::to_string(m * 4 >> 20) + " MiB");
  return c;
}

namespace {
// printf into a string: the report's lines, which the command prints.
void say(std::string& out, const char* format, ...) {
  va_list args;
  va_start(args, format);
  out += vprinted(format, args);
  va_end(args);
}

// The hardware's view beside the analytic one.
void say_counters(std::string& out, const instrument::Profile& p, int64_t step) {
  if (!p.counters_asked) return;
  if (p.fma_pct < 0) {
    say(out, "counters n/a: %s\n", p.counters_why.c_str());
    return;
  }
  const double analytic = p.busy > 0 && p.ceilings.flops > 0 ? 100 * p.flops / p.busy / p.ceilings.flops : -1;
  say(out, "counters FP32 FMA pipe %.1f %%, tensor pipe %.1f %%, DRAM %.1f %% of peak, time-weighted over the %zu "
              "kernels of step %lld (%zu matched to rows); analytic: %.1f %% of the measured %s peak over the busy "
              "time\n         metrics: %s, %s, %s, weighted by %s\n",
              p.fma_pct, p.tensor_pct, p.dram_pct, p.counted_kernels, (long long)step,
              p.matched_kernels, analytic, precision_name(p.ceilings.precision), p.counter_names.fma.c_str(),
              p.counter_names.tensor.c_str(), p.counter_names.dram.c_str(), p.counter_names.duration.c_str());
}
// --counters: the step after the window, its kernels replayed by CUPTI's range profiler (which
// serialises and re-runs them, so that step is never timed). CUPTI's activity tracing stops first.
struct CounterPass final : train::Observer {
  bool asked;
  Device dev;
  instrument::EpochMonitor& monitor;
  int64_t last;  // the window's last step
  std::unique_ptr<instrument::CounterSession> session;
  std::vector<instrument::KernelCounters> kernels;
  std::string why;
  CounterPass(bool a, Device d, instrument::EpochMonitor& m, int64_t l) : asked(a), dev(d), monitor(m), last(l) {
    if (asked && !dev.is_cuda()) why = "hardware counters are read from a GPU; this run is on the CPU";
  }
  void step_end(const train::StepInfo& info, train::Control&) override {
    try {
      if (info.step == last) begin();
      else if (info.step == last + 1 && session) {
        session->end();
        kernels = session->read();
      }
    } catch (const std::exception& e) {
      why = e.what();
      session.reset();
    }
  }
  void begin() {
    if (instrument::BusyTracker* bt = monitor.busy_tracker()) bt->stop();
    session = instrument::make_counter_session(&why);
    if (session) session->begin();
  }
  void fill(instrument::ProfileInput& in) {
    in.counters_asked = asked;
    in.counters = kernels;
    in.counters_why = kernels.empty() && why.empty() ? "the counter pass read no kernels" : why;
    if (session) in.counter_names = session->names();
  }
};

// --graph on|auto: the map from the graph's nodes to the ops that captured them, subscribed before
// the first step, and op records on from there, so that the capture (whichever step makes it)
// records its ops.
std::unique_ptr<instrument::GraphNodeMap> graph_node_map(Device dev) {
  if (!dev.is_cuda()) throw Error("--graph profiles a CUDA graph: a GPU run (--device cuda)");
  std::string why;
  std::unique_ptr<instrument::GraphNodeMap> nodes = instrument::make_graph_node_map(&why);
  if (!nodes)
    throw Error("loupe profile --graph cannot tie a graph's kernels to their ops here: " + why +
                " (--graph off profiles the eager step)");
  op_records_enable(true);
  return nodes;
}

}  // namespace

std::string profile_report(const instrument::Profile& p, int64_t first, int64_t last) {
  std::string out;
  if (p.graph_replays < 0)
    say(out, "window  steps %lld..%lld (%lld steps), eager (--graph on profiles the step as one CUDA graph)\n",
                (long long)first, (long long)last, (long long)p.steps);
  else
    say(out, "window  steps %lld..%lld (%lld steps), graphed: %lld replays of the captured step, each kernel tied to "
                "the op that captured it through its graph node (CUPTI)\n",
                (long long)first, (long long)last, (long long)p.steps, (long long)p.graph_replays);
  say(out, "ceiling compute %.3g TFLOP/s (%s); memory %.0f GB/s (%s)\n\n", p.ceilings.flops / 1e12,
              p.ceilings.flops_source.c_str(), p.ceilings.bandwidth / 1e9, p.ceilings.bandwidth_source.c_str());
  say(out, "%s\n", instrument::profile_table(p).c_str());
  if (p.gpu)
    say(out, "step    %.1f us per step: GPU busy %.1f us (%.1f %%), boundaries %.1f us (%.1f %%: the gaps under 5 us "
                "between its %.0f kernels, copies and memsets), other idle %.1f us (host gaps); the rows' shares add "
                "up to %.1f %% of the busy time (their kernel times to %.1f %%: more where streams overlap)\n",
                p.wall * 1e6, p.busy * 1e6, p.wall > 0 ? 100 * p.busy / p.wall : 0, p.boundary * 1e6,
                p.wall > 0 ? 100 * p.boundary / p.wall : 0, p.activities, std::max(0.0, p.idle - p.boundary) * 1e6,
                p.busy > 0 ? 100 * p.rows_busy / p.busy : 0, p.busy > 0 ? 100 * p.rows_seconds / p.busy : 0);
  else
    say(out, "step    %.1f us per step: inside ops %.1f us (%.1f %%), outside them %.1f us (data, host work)\n",
                p.wall * 1e6, p.busy * 1e6, p.wall > 0 ? 100 * p.busy / p.wall : 0, p.idle * 1e6);
  say(out, "flops   %.4g GFLOP per step in the rows, %.4g outside any op; core/flops.h counted %.4g\n",
              p.flops / 1e9, p.unscoped_flops / 1e9, p.counted_flops / 1e9);
  say_counters(out, p, last + 1);
  if (!p.targets.empty()) say(out, "targets\n");
  for (size_t i = 0; i < p.targets.size(); ++i) say(out, "  %zu. %s\n", i + 1, p.targets[i].c_str());
  return out;
}

std::optional<instrument::Profile> profile(Run& run, const ProfileRequest& r) {
  const Device dev = run.config().device;
  const int64_t steps = run.epoch_steps(), need = r.last + (r.counters ? 1 : 0);
  if (steps < need)
    throw Error("the profile window ends at step " + std::to_string(need) + " but an epoch of " + run.config().model.name +
                " at batch " + std::to_string(run.config().batch) + " has " + std::to_string(steps) +
                " steps: --profile-steps A:B with B <= " + std::to_string(steps - (r.counters ? 1 : 0)) +
                ", or a smaller --batch");
  instrument::Ceilings ceilings = measure_ceilings(dev, *run.config().trainer.precision);
  instrument::EpochMonitor& monitor = run.monitor();
  if (dev.is_cuda() && !monitor.busy_tracker())
    throw Error("loupe profile times a GPU's kernels with CUPTI, which cannot start here: " + monitor.busy_why());
  auto window = std::make_shared<train::ProfileWindow>(monitor, dev, r.first, r.last);
  run.add(window);
  auto counters = std::make_shared<CounterPass>(r.counters, dev, monitor, r.last);
  if (r.counters && dev.is_cuda()) run.add(counters);
  std::unique_ptr<instrument::GraphNodeMap> nodes = r.graphed ? graph_node_map(dev) : nullptr;
  train::EpochStats st = run.train_epoch(1);
  op_records_enable(false);
  run.stop_feed();
  if (st.interrupted) return std::nullopt;
  if (!window->complete()) throw Error("the training epoch ended before the profile window closed");
  instrument::ProfileInput in = window->input();
  in.ceilings = ceilings;
  if (nodes) {
    in.graph_replays = instrument::attribute_graph_nodes(in.activity, *nodes);
    in.ops = instrument::graph_window_ops(std::move(in.ops), in.activity, r.first, r.last, in.graph_replays);
    // The trainer counts each replay's FLOPs outside any op scope (the capture's count, again), so
    // what lies outside the rows is the count less the rows' (the capture's records, per replay).
    double rows = 0;
    for (const OpRecord& rec : in.ops) rows += rec.flops;
    in.unscoped_flops = std::max(0.0, in.counted_flops - rows);
    if (in.graph_replays == 0)
      std::printf("note    no step of the window ran as a graph: %s\n", run.trainer().step_mode().c_str());
  }
  counters->fill(in);
  instrument::Profile p = instrument::build_profile(in);
  if (dev.is_cuda()) p.device = cuda_runtime()->device_name();
  return p;
}

namespace {
// The datasheet row of a GPU, or an Error naming the GPUs the table has.
instrument::GpuSheet sheet_of(const std::string& name) {
  std::optional<instrument::GpuSheet> sheet = instrument::datasheet(name);
  if (!sheet) throw Error("--predict knows the GPUs " + instrument::datasheet_names() + "; not '" + name + "'");
  return *sheet;
}
}  // namespace

const std::string& known_gpu(const std::string& name) {
  sheet_of(name);
  return name;
}

std::string predict_report(const instrument::Profile& p, const std::string& target) {
  if (!p.gpu) throw Error("--predict needs a GPU profile: the CPU's op table has no GPU ceilings to scale");
  return instrument::prediction_text(
      instrument::predict(p, sheet_of(p.device), sheet_of(target), p.ceilings.precision));
}

}  // namespace loupe::run
