// loupe tune: run/tune.h from the command line, each row measured in a process of its own.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/child.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/text.h"
#include "instrument/report_io.h"
#include "run/interrupt.h"
#include "run/tune.h"

namespace loupe::cli {

namespace {

// A file of its own in the temporary directory, removed with this object.
class TempFile {
 public:
  explicit TempFile(const char* stem) {
    std::string p = (std::filesystem::temp_directory_path() / (std::string(stem) + "-XXXXXX")).string();
    const int fd = mkstemp(p.data());
    if (fd < 0) throw Error("loupe tune: cannot make a temporary file in " + std::filesystem::temp_directory_path().string());
    close(fd);
    path_ = p;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One row, once: `loupe tune ... ROW'S OPTIONS --recipe-only --rounds 1` in a child process, its
// report read back from the child's --metrics. A process per row because cuDNN's FFT algorithms,
// once run (cudnnFind runs them), slow every later graph node of their process (docs/performance.md,
// "Tuning a run"); a child starts with nothing run before it, as `loupe train` does.
instrument::EpochReport measure_in_child(const run::TuneConfig& c, const run::TuneRow& row, double seconds) {
  std::vector<std::string> words = run::tune_words(c.model, c.args, row.options);
  // The CPU's rows run at the count tune named (the recipe's), not one the governor would change.
  if (row.config.threads && std::find(words.begin(), words.end(), "--threads") == words.end())
    words.insert(words.end(), {"--threads", std::to_string(*row.config.threads)});
  TempFile metrics("loupe-tune-row"), log("loupe-tune-log");
  std::vector<std::string> args{"tune"};
  args.insert(args.end(), words.begin(), words.end());
  args.insert(args.end(), {"--recipe-only", "--rounds", "1", "--min-seconds", printed("%.17g", seconds), "--metrics",
                           metrics.path()});
  const int rc = run_child(args, log.path());
  if (run::interrupt_requested()) throw train::Interrupted();
  const std::string text = text_or_empty(metrics.path());
  if (rc != 0 || text.empty()) {
    std::string why = tail_of(log.path(), 1);
    while (!why.empty() && (why.back() == '\n' || why.back() == '\r')) why.pop_back();
    if (why.rfind("loupe: ", 0) == 0) why.erase(0, 7);
    throw Error(why.empty() ? printed("its process ended with status %d and said nothing", rc) : why);
  }
  return instrument::report_from_json(text.substr(0, text.find('\n')));
}

}  // namespace

int cmd_tune(const Options& o) {
  if (o.model.empty()) throw Error("loupe tune needs a model name, e.g. `loupe tune mnist_mlp` (see loupe models)");
  run::TuneConfig c;
  c.base = run_config(o, model_with_flags(o.model, o), nullptr);
  c.model = o.model;  // a model file by its path
  c.args = o.args;
  if (auto it = std::find(c.args.begin(), c.args.end(), "tune"); it != c.args.end()) c.args.erase(it);  // the command
  c.seconds = o.min_seconds.value_or(-1);
  c.rounds = o.has("rounds") ? o.rounds : 2;
  c.objective = run::parse_objective(o.objective);
  c.recipe_only = o.recipe_only;
  // --recipe-only measures here: it is the child the others run.
  if (!o.recipe_only) {
    c.measure = [&c](const run::TuneRow& row, double seconds) { return measure_in_child(c, row, seconds); };
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
