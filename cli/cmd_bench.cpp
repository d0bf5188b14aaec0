// loupe bench and loupe sweep: the bench of run/bench.h from the command line.
#include <cstdio>
#include <optional>

#include "core/error.h"
#include "core/thread_pool.h"
#include "cli/bench_world.h"
#include "cli/cli_numbers.h"
#include "cli/commands.h"
#include "run/bench.h"
#include "run/interrupt.h"

namespace loupe::cli {

namespace {
run::BenchConfig bench_config(const Options& o, std::vector<std::string> models) {
  run::BenchConfig b;
  b.models = std::move(models);
  b.batches = o.batch;
  b.precisions = o.precision;
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
  b.price_per_hour = o.price_per_hour.empty() ? -1 : o.price_per_hour[0];
  b.loss = o.loss;
  if (std::string why = train::graph_unsupported(b.graph, b.device); !why.empty()) throw Error(why);
  if (o.threads) set_num_threads(*o.threads);
  return b;
}

// The measurements, each row written to --json and --csv as it finishes; Ctrl-C (or SIGTERM) stops
// between steps and keeps the rows finished (run/bench.h's BenchFiles). nullopt when interrupted.
std::optional<std::vector<instrument::EpochReport>> measure_and_write(run::BenchConfig b, const std::string& json,
                                                                      const std::string& csv) {
  run::install_interrupt_handlers();
  run::BenchFiles files(json, csv, b.rounds == 1);
  b.stop = &run::interrupt_requested();
  b.on_row = [&files](const std::vector<instrument::EpochReport>& rows) {
    run::CriticalSection whole;  // the watchdog waits: a file is written whole or not touched
    files.write(rows);
  };
  try {
    std::vector<instrument::EpochReport> reports = run::run_bench(b);
    {
      run::CriticalSection whole;
      files.write(reports);
    }
    files.say_written();
    return reports;
  } catch (const train::Interrupted&) {
    const std::string where = files.names();
    std::fprintf(stderr, "loupe: interrupted; %zu finished row%s %s\n", files.rows(), files.rows() == 1 ? "" : "s",
                 where.empty() ? "in the table above (no --json or --csv)" : ("written to " + where).c_str());
    return std::nullopt;
  }
}
}  // namespace

int cmd_bench(const Options& o) {
  std::vector<std::string> models = parse_list(o.model);
  if (models.empty())
    for (const auto& m : models::all_models()) models.push_back(m.name);
  for (const std::string& m : models) model_with_flags(m, o);  // unknown names and losses fail before any run
  if (!o.gpus.empty()) return bench_world(o, models);
  if (o.epochs)
    throw Error("loupe bench takes --epochs with --gpus LIST only (each world size is a training run); without it "
                "--steps and --min-seconds set the timed stretch");
  if (!measure_and_write(bench_config(o, models), o.json, o.csv)) return run::interrupt_exit_status();
  return 0;
}

int cmd_sweep(const Options& o) {
  if (o.model.empty() || o.model.find(',') != std::string::npos)
    throw Error("loupe sweep takes one model, e.g. `loupe sweep mnist_mlp --batch 32,128,512,2048`");
  if (!o.has("batch")) throw Error("loupe sweep needs --batch LIST, e.g. --batch 32,128,512,2048");
  std::string csv = output_path(o, "csv"), png = output_path(o, "png");
  auto reports = measure_and_write(bench_config(o, {o.model}), o.json, csv);
  if (!reports) return run::interrupt_exit_status();
  std::printf("%s", run::sweep_summary(*reports).c_str());
  return plot("plot_sweep.py", csv, png);
}

}  // namespace loupe::cli
