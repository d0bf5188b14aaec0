// loupe tune: run/tune.h from the command line, each row measured in a loupe process of its own.
#include <algorithm>
#include <cstdio>
#include <memory>

#include "cli/commands.h"
#include "core/error.h"
#include "instrument/report_io.h"
#include "run/interrupt.h"
#include "run/tune.h"

namespace loupe::cli {

int cmd_tune(const Options& o) {
  if (o.model.empty()) throw Error("loupe tune needs a model name, e.g. `loupe tune mnist_mlp` (see loupe models)");
  run::TuneConfig c;
  c.base = run_config(o, model_with_flags(o.model, o), nullptr);
  c.model = o.model;  // a model file by its path
  c.args = o.args;
  if (auto it = std::find(c.args.begin(), c.args.end(), "tune"); it != c.args.end()) c.args.erase(it);  // the command
  c.seconds = o.min_seconds.value_or(-1);
  c.rounds = o.has("rounds") ? o.rounds : 0;  // 2 on a GPU, 3 on the CPU
  c.objective = run::parse_objective(o.objective);
  c.recipe_only = o.recipe_only;
  // --recipe-only measures here: it is the process each row of the others runs in. One row's cuDNN
  // search can slow every later row of its process (docs/performance.md, "Tuning a run").
  if (!o.recipe_only) {
    c.measure = run::measure_by_command("/proc/self/exe", c);
    c.on_row = [](const run::TuneRow& r) {
      std::fprintf(stderr, "tune: %s %s\n", r.setting.c_str(),
                   r.report ? instrument::thousands(r.report->samples_per_sec).append(" samples/s").c_str() : r.skipped.c_str());
    };
  }
  std::unique_ptr<instrument::JsonlWriter> metrics;  // opened first: a path it cannot write fails before any row runs
  if (o.has("metrics"))
    metrics = std::make_unique<instrument::JsonlWriter>(o.metrics, instrument::JsonlWriter::Mode::Append, "--metrics");
  run::install_interrupt_handlers();
  try {
    const run::TuneResult r = run::tune(c);
    std::fputs(run::tune_table(r).c_str(), stdout);
    if (metrics)
      for (const run::TuneRow& row : r.rows)
        if (row.report) metrics->write(*row.report);
  } catch (const train::Interrupted&) {
    std::fprintf(stderr, "loupe: interrupted; no table\n");
    return 130;
  }
  return 0;
}

}  // namespace loupe::cli
