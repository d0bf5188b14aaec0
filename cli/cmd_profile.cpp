// loupe profile: the ceilings an op's rates are measured against, and the profile's report (the
// table, the summary, the targets, CSV, JSON and the roofline plot). The training window itself
// is run by cmd_train.cpp's cmd_profile, which shares `loupe train`'s setup.
#include <algorithm>
#include <cstdio>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/file_check.h"
#include "core/precision.h"
#include "instrument/peak.h"
#include "ops/linalg.h"
#include "ops/view.h"
#include "cli/commands.h"
#include "cli/roofline/roofline.h"
#include "train/trainer.h"

namespace loupe::cli {

namespace {
// The best of `reps` timed runs of f (after one untimed), seconds.
template <class F>
double best_time(Device dev, int reps, F f) {
  f();
  if (dev.is_cuda()) cuda_runtime()->synchronize();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    double t0 = train::now_seconds();
    f();
    if (dev.is_cuda()) cuda_runtime()->synchronize();
    best = std::min(best, train::now_seconds() - t0);
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
  if (!dev.is_cuda()) c.cache_bytes = double(last_level_cache_bytes());
  const int64_t m = dev.is_cuda() ? (int64_t(1) << 28)
                                  : std::clamp(int64_t(c.cache_bytes) / 4, int64_t(1) << 25, int64_t(1) << 28);
  Tensor x = full(Shape{m}, 1.0, DType::f32, dev), y = full(Shape{m}, 0.0, DType::f32, dev);
  t = best_time(dev, 5, [&] { copy_(y, x); });  // into memory already touched: no allocation timed
  c.bandwidth = 2.0 * double(m) * 4.0 / t;  // read once, written once
  c.bandwidth_source = "measured: a device copy of " + (dev.is_cuda() ? "1 GiB" : std::to_string(m * 4 >> 20) + " MiB");
  return c;
}

namespace {
// The hardware's view beside the analytic one.
void print_counters(const instrument::Profile& p, int64_t step) {
  if (!p.counters_asked) return;
  if (p.fma_pct < 0) {
    std::printf("counters n/a: %s\n", p.counters_why.c_str());
    return;
  }
  const double analytic = p.busy > 0 && p.ceilings.flops > 0 ? 100 * p.flops / p.busy / p.ceilings.flops : -1;
  std::printf("counters FP32 FMA pipe %.1f %%, tensor pipe %.1f %%, DRAM %.1f %% of peak, time-weighted over the %zu "
              "kernels of step %lld (%zu matched to rows); analytic: %.1f %% of the measured %s peak over the busy "
              "time\n         metrics: %s, %s, %s, weighted by %s\n",
              p.fma_pct, p.tensor_pct, p.dram_pct, p.counted_kernels, (long long)step,
              p.matched_kernels, analytic, precision_name(p.ceilings.precision), p.counter_names.fma.c_str(),
              p.counter_names.tensor.c_str(), p.counter_names.dram.c_str(), p.counter_names.duration.c_str());
}
}  // namespace

int report_profile(const Options& o, const instrument::Profile& p) {
  const auto [first, last] = o.profile_steps;
  if (p.graph_replays < 0)
    std::printf("window  steps %lld..%lld (%lld steps), eager (--graph on profiles the step as one CUDA graph)\n",
                (long long)first, (long long)last, (long long)p.steps);
  else
    std::printf("window  steps %lld..%lld (%lld steps), graphed: %lld replays of the captured step, each kernel tied to "
                "the op that captured it through its graph node (CUPTI)\n",
                (long long)first, (long long)last, (long long)p.steps, (long long)p.graph_replays);
  std::printf("ceiling compute %.3g TFLOP/s (%s); memory %.0f GB/s (%s)\n\n", p.ceilings.flops / 1e12,
              p.ceilings.flops_source.c_str(), p.ceilings.bandwidth / 1e9, p.ceilings.bandwidth_source.c_str());
  std::printf("%s\n", instrument::profile_table(p).c_str());
  if (p.gpu)
    std::printf("step    %.1f us per step: GPU busy %.1f us (%.1f %%), boundaries %.1f us (%.1f %%: the gaps under 5 us "
                "between its %.0f kernels, copies and memsets), other idle %.1f us (host gaps); the rows' shares add "
                "up to %.1f %% of the busy time (their kernel times to %.1f %%: more where streams overlap)\n",
                p.wall * 1e6, p.busy * 1e6, p.wall > 0 ? 100 * p.busy / p.wall : 0, p.boundary * 1e6,
                p.wall > 0 ? 100 * p.boundary / p.wall : 0, p.activities, std::max(0.0, p.idle - p.boundary) * 1e6,
                p.busy > 0 ? 100 * p.rows_busy / p.busy : 0, p.busy > 0 ? 100 * p.rows_seconds / p.busy : 0);
  else
    std::printf("step    %.1f us per step: inside ops %.1f us (%.1f %%), outside them %.1f us (data, host work)\n",
                p.wall * 1e6, p.busy * 1e6, p.wall > 0 ? 100 * p.busy / p.wall : 0, p.idle * 1e6);
  std::printf("flops   %.4g GFLOP per step in the rows, %.4g outside any op; core/flops.h counted %.4g\n",
              p.flops / 1e9, p.unscoped_flops / 1e9, p.counted_flops / 1e9);
  print_counters(p, last + 1);
  if (!p.targets.empty()) std::printf("targets\n");
  for (size_t i = 0; i < p.targets.size(); ++i) std::printf("  %zu. %s\n", i + 1, p.targets[i].c_str());
  std::string csv = output_path(o, "csv");
  write_whole_file(csv, instrument::profile_csv(p));
  std::printf("table written to %s\n", csv.c_str());
  if (o.has("json")) {
    write_whole_file(o.json, instrument::profile_json(p));
    std::printf("JSON written to %s\n", o.json.c_str());
  }
  std::string png = output_path(o, "png");
  // The plot says what it is of: the model, the device and the precision.
  const std::string device = p.gpu ? cuda_runtime()->device_name() : "the CPU";
  return plot("plot_profile.py", csv, png,
              "loupe profile: " + o.model + " on " + device + ", " + precision_name(o.precision));
}

}  // namespace loupe::cli
