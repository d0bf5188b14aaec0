// The `loupe` command line, parsed once (by CLI11) into a typed config. Each option declares the
// subcommands that take it (cli/options.cpp); an option no subcommand knows is "unknown", one
// another subcommand takes is refused by name, and every number is checked against its range
// (cli/cli_numbers.h) here, before any data is loaded.
#pragma once
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/precision.h"
#include "data/synthetic.h"
#include "train/trainer.h"

namespace loupe::cli {

struct Options {
  std::string command, model;  // model: the first word after the command (bench: a list)
  std::vector<std::string> files;  // compare: every word after the command
  bool help = false, version = false;  // --help (-h), --version (-V)
  std::set<std::string> given;  // the options on the command line, by name
  std::vector<std::string> args;  // argv[1..], as given (the launcher hands them to each rank)
  bool has(const std::string& name) const { return given.count(name) > 0; }
  int gpu_count() const { return gpus.empty() ? 1 : gpus[0]; }

  // Where and how (most subcommands).
  std::string device;  // --device: "" = a GPU when present
  std::string data;    // --data DIR or FILE
  double val_split = 0;  // --val-split F: NumPy arrays without test arrays hold out their last F
  bool synthetic = false;
  data::SyntheticKind synthetic_kind = data::SyntheticKind::Random;  // --synthetic[=KIND]
  std::vector<Precision> precision{Precision::FP32};  // --precision: one; a LIST for bench and sweep
  train::GraphMode graph = train::GraphMode::Auto;
  std::optional<int> threads;
  uint64_t seed = 1;
  std::string checkpoint;  // eval, generate

  // train (unset: the model's recipe)
  std::optional<int> epochs;
  std::vector<int64_t> batch;  // --batch: one (also copybench), a LIST for bench and sweep; empty: the recipe's
  std::optional<double> lr;
  std::string optimizer;  // --optimizer: "" is the recipe's
  std::string loss;       // --loss: "" is the recipe's (a model file's compile_config or last activation)
  int64_t max_steps = -1;
  int workers = 4, prefetch = 4;
  bool pin_memory = true, drop_last = false, resident = false, channels_last = false;
  std::string save, save_keras, resume, metrics, csv, trace, tensorboard;
  std::string weights;      // --weights FILE: Keras's weights (.h5, .weights.h5)
  bool save_best = false;   // --save-best
  std::string lr_schedule;  // --lr-schedule SPEC (train/lr_schedule.h)
  std::string early_stop;   // --early-stop SPEC (run/controls.h)
  std::optional<double> target_acc;  // --target-acc A (run/target.h)
  int seeds = 1;                     // --seeds N: runs of seeds --seed, --seed + 1, ...
  std::string timeline;  // --timeline FILE.csv
  int sample_ms = 50;    // --sample-ms: NVML's period
  // --price-per-hour: one price (train, bench, sweep), compare's one per run; empty: not given.
  std::vector<double> price_per_hour;
  std::pair<int64_t, int64_t> profile_steps{-1, -1};  // --profile-steps A:B (10:19 with --trace alone)
  bool busy = false, nvml = true, plain = false;
  bool counters = false;  // profile: hardware counters of one more step
  std::string predict;    // profile: the GPU to predict the step on (instrument/peak.h's table)
  // Data parallelism (train): GPUs on this host, hosts, this host's place, rank 0's address.
  // --gpus: train's one count (empty: 1, gpu_count()), bench's LIST of world sizes (empty: none).
  std::vector<int> gpus;
  int nnodes = 1, node_rank = 0;
  std::string master;            // --master ADDR:PORT ("" : MASTER_ADDR/MASTER_PORT, else this host)
  std::optional<double> baseline;  // --baseline: one GPU's samples/s at this per-GPU batch

  // generate
  std::optional<std::string> prompt;
  int64_t length = 400;
  double temperature = 0.5;

  // bench, sweep, roofline
  int64_t steps = 100, warmup = 10;
  int rounds = 1;
  std::optional<double> min_seconds;
  std::string json, png;
  std::vector<int64_t> sizes;  // roofline

  // tune
  std::string objective = "speed";  // --objective speed|energy
  bool recipe_only = false;         // tune --recipe-only

  // compare
  std::vector<std::string> labels;   // --labels a,b,...
  std::string plot;                  // --plot FILE.png
};

// A command line loupe cannot take: an unknown command or option (with the nearest known one, "did
// you mean ..."), an option the subcommand does not take, a missing or bad value. main() prints it
// on stderr and exits 2, as argparse and CLI11 do; 1 stays for a run that failed.
struct UsageError : Error {
  using Error::Error;
};

// The known word nearest to `word`: at most 2 edits away (or `word` a prefix of it), "" when none.
std::string nearest(const std::string& word, const std::vector<std::string>& known);
// "unknown command 'X'" with the nearest command, for main().
std::string unknown_command(const std::string& command);

// Throws a UsageError for an unknown option, an option the subcommand does not take, a missing
// value, or a value out of range. `--synthetic KIND` and `--synthetic=KIND` alike; -b, -e and -j
// stand for --batch, --epochs and --workers (-h --help, -V --version).
Options parse_options(int argc, char** argv);

// The file the command writes for an output option ("csv", "png", "json", "plot", "metrics",
// "trace", "timeline"): the option's value, else the command's default (sweep-MODEL.csv,
// profile-MODEL.png, roofline.csv, compare's PLOT.csv for its plot), else "" (none written).
std::string output_path(const Options& o, const std::string& option);

// Throws one sentence naming the option, the path and why, when an output the command will write
// (output_path's, and --tensorboard's directory) cannot be written: run before any data is loaded
// or any step run, so that a typo in a path does not cost the run (core/file_check.h).
void check_outputs(const Options& o);

// What `loupe --help` and `loupe train --help` print.
extern const char* const kUsage;
extern const char* const kTrainUsage;
// What `loupe COMMAND --help` prints (kUsage for an unknown command).
const char* usage(const std::string& command);
// The options COMMAND takes, without their dashes (tests check that its usage names each).
std::vector<std::string> options_of(const std::string& command);

}  // namespace loupe::cli
