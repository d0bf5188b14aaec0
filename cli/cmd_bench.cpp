// loupe bench and loupe sweep: cli/bench.h's measurements from the command line.
#include <cstdio>

#include "core/error.h"
#include "core/thread_pool.h"
#include "cli/bench.h"
#include "cli/bench_world.h"
#include "cli/commands.h"

namespace loupe::cli {

namespace {
BenchOptions bench_options(const Options& o, std::vector<std::string> models) {
  BenchOptions b;
  b.models = std::move(models);
  b.batches = o.batches;
  b.precisions = o.precisions;
  b.steps = o.steps;
  b.warmup = o.warmup;
  b.min_seconds = o.min_seconds.value_or(-1);
  b.rounds = o.rounds;
  b.device = pick_device(o);
  b.nvml = o.nvml;
  b.busy = o.busy;
  b.channels_last = o.channels_last;
  b.seed = o.seed;
  b.graph = o.graph;
  b.price_per_hour = o.price_per_hour;
  b.loss = o.loss;
  if (std::string why = train::graph_unsupported(b.graph, b.device); !why.empty()) throw Error(why);
  if (o.threads) set_num_threads(*o.threads);
  return b;
}
}  // namespace

int cmd_bench(const Options& o) {
  std::vector<std::string> models = parse_list(o.model);
  if (models.empty())
    for (const auto& m : models::all_models()) models.push_back(m.name);
  for (const std::string& m : models) model_with_flags(m, o);  // unknown names and losses fail before any run
  if (!o.gpus_list.empty()) return bench_world(o, models);
  if (o.epochs)
    throw Error("loupe bench takes --epochs with --gpus LIST only (each world size is a training run); without it "
                "--steps and --min-seconds set the timed stretch");
  auto reports = run_bench(bench_options(o, models));
  write_reports(reports, o.json, o.csv);
  return 0;
}

int cmd_sweep(const Options& o) {
  if (o.model.empty() || o.model.find(',') != std::string::npos)
    throw Error("loupe sweep takes one model, e.g. `loupe sweep mnist_mlp --batch 32,128,512,2048`");
  if (!o.has("batch")) throw Error("loupe sweep needs --batch LIST, e.g. --batch 32,128,512,2048");
  auto reports = run_bench(bench_options(o, {o.model}));
  std::string csv = output_path(o, "csv"), png = output_path(o, "png");
  write_reports(reports, o.json, csv);
  std::printf("%s", sweep_summary(reports).c_str());
  return plot("plot_sweep.py", csv, png);
}

}  // namespace loupe::cli
