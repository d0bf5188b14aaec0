// `loupe tune` (docs/performance.md, "loupe tune"): what the run's advice suggests and a small grid
// around the recipe (batch, precision, how the data is fed, the CPU's threads), each a short measured
// stretch of the run it names (Run::measure, after a warm-up), in alternating rounds with the
// recipe measured in every round; then the best of each kind of change together. A table of what
// each gained over the recipe, the command line of the best, and what each piece of the recipe's
// advice was worth. Nothing changes the recipe's maths silently: a larger batch's row names the
// learning rate linear scaling gives it, and its command line sets it.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "instrument/report.h"
#include "run/run.h"

namespace loupe::run {

enum class TuneObjective { Speed, Energy };
TuneObjective parse_objective(const std::string& name);  // "speed" or "energy", else an Error

// One setting: what it changes from the recipe, as options of `loupe train`.
struct TuneRow {
  std::string setting;               // "recipe", "--precision bf16", "--batch 512 --resident", ...
  std::string kind;                  // "recipe", "precision", "batch", "feed", "threads" or "combined"
  bool advised = false;              // the recipe's advice named this kind of change
  std::vector<std::string> options;  // the words it adds: {"--batch", "512", "--lr", "0.004"}
  RunConfig config;                  // the run measured
  std::string skipped;               // why it could not run here ("": it ran)
  // Its median round by the objective (of an even count, the slower middle one): a rerun of the
  // row's command is a typical round, not its luckiest (docs/performance.md, "Tuning a run").
  std::optional<instrument::EpochReport> report;
  std::vector<instrument::EpochReport> rounds;  // every round's report, in the order measured
  double gain = 0;                   // samples/s over the recipe's
  std::optional<double> energy_gain;  // samples/J over the recipe's
  std::string note;                  // "linear scaling's rate: --lr 0.004"
};

struct TuneConfig {
  RunConfig base;                 // the run as `loupe train` would start it (its zeros: the recipe's)
  std::vector<std::string> args;  // the words after `loupe train` that start it (the model's, its options)
  std::string model;              // the model as those words name it (a file's path); "": base.model.name
  double seconds = -1;            // each row's measured stretch: < 0 is 2 s on a GPU, 1 s on the CPU
  int rounds = 0;                 // every row this often, in turn; 0: 2 on a GPU, 3 on the CPU
  TuneObjective objective = TuneObjective::Speed;
  bool recipe_only = false;       // the recipe's row alone: no grid, no combination
  std::function<void(const TuneRow&)> on_row;  // after each row's first measurement
  // How a row is measured once: a report of `seconds` of its steady steps. Empty: measure_stretch
  // on row.config, in this process. `loupe tune` measures each in a process of its own instead
  // (docs/performance.md, "Tuning a run", says why), from row.options.
  std::function<instrument::EpochReport(const TuneRow& row, double seconds)> measure;
};

struct TuneResult {
  std::vector<TuneRow> rows;  // the recipe first
  size_t best = 0;            // the best row by the objective
  std::string best_command;   // `loupe train MODEL ...` that runs it
  // The recipe's advice, each line followed by what tune measured for the changes it names.
  std::vector<std::string> advice;
  TuneObjective objective = TuneObjective::Speed;
  bool cuda = false;
};

// A run's steady speed: a warm-up (the first steps choose algorithms and capture the graph), ten
// steps that size the stretch, then the stretch: `seconds` of steps, whose report this is.
instrument::EpochReport measure_stretch(const RunConfig& rc, double seconds);

// A TuneConfig::measure that measures each row in a process of its own: `EXE tune WORDS
// --recipe-only --rounds 1 --min-seconds S --metrics FILE`, EXE a loupe command (`loupe tune`
// gives /proc/self/exe), WORDS tune_words(c.model, c.args, row.options) and, on the CPU, the row's
// thread count; the row's report is read back from FILE. A row whose process fails is skipped
// with the last line it printed.
std::function<instrument::EpochReport(const TuneRow& row, double seconds)> measure_by_command(const std::string& exe,
                                                                                             const TuneConfig& c);

// Measures every row; throws train::Interrupted when config.base.interrupt is set meanwhile.
TuneResult tune(const TuneConfig& c);

// The table `loupe tune` prints, the best command and the advice with its measured gains.
std::string tune_table(const TuneResult& r);

// The rows to try around a recipe measured once (its resolved configuration and report): the
// changes its advice names first, then the grid. Pure (tests/test_tune.cpp).
std::vector<TuneRow> tune_candidates(const RunConfig& recipe, const instrument::EpochReport& measured, int threads);

// The words after `loupe train` that run `row`: the model, then `args` (the model's own word left
// out) less tune's own options and those `row` sets (with their values; -b and -j are --batch and
// --workers), then `row`'s.
std::vector<std::string> tune_words(const std::string& model, const std::vector<std::string>& args,
                                    const std::vector<std::string>& row);
// `loupe train` and tune_words, quoted for a POSIX shell.
std::string tune_command(const std::string& model, const std::vector<std::string>& args,
                         const std::vector<std::string>& row);

}  // namespace loupe::run
