// The `loupe` subcommands, one file each (cli/cmd_*.cpp), and what they share. Each takes the
// parsed command line (cli/options.h) and returns the process's exit status.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "instrument/op_profile.h"
#include "instrument/report.h"
#include "models/registry.h"
#include "run/data.h"
#include "run/run.h"
#include "cli/options.h"
#include "train/trainer.h"

namespace loupe::cli {

int cmd_train(const Options& o);      // cli/cmd_train.cpp
int cmd_eval(const Options& o);       // cli/cmd_eval.cpp
int cmd_generate(const Options& o);   // cli/cmd_generate.cpp
int cmd_bench(const Options& o);      // cli/cmd_bench.cpp
int cmd_sweep(const Options& o);      // cli/cmd_bench.cpp
int cmd_roofline(const Options& o);   // cli/cmd_roofline.cpp
int cmd_models(const Options& o);     // cli/cmd_models.cpp
int cmd_peak(const Options& o);       // cli/cmd_peak.cpp
int cmd_copybench(const Options& o);  // cli/cmd_copybench.cpp
int cmd_compare(const Options& o);    // cli/cmd_compare.cpp
int cmd_profile(const Options& o);    // cli/cmd_profile.cpp
int cmd_tune(const Options& o);       // cli/cmd_tune.cpp

// Shared (cli/cmd_common.cpp).
// --device, or a GPU when one is visible (saying so when not); an Error when CUDA is asked for and
// this build or machine has none.
Device pick_device(const Options& o);
// The model (a reference model's name or a Keras file), its recipe changed by --optimizer and
// --loss where given; the run header's recipe_source says so.
models::ModelInfo model_with_flags(const std::string& name, const Options& o);
// The model's data set as --data and --synthetic ask for it.
run::DataRequest data_request(const Options& o, const models::ModelInfo& info, bool augment, bool resident);
// The run the options describe (cli/cmd_train.cpp): train's, and profile's with its own options.
run::RunConfig run_config(const Options& o, const models::ModelInfo& info, run::World* world);
// A test seam: observers that every run of `loupe train` adds, made for the run's world (nullptr
// outside one). Only a test build of the command sets it (tests/seams.cpp, before main); the
// product's has none, so that no fault a test injects is in the product's code path.
using TestObservers = std::function<std::vector<std::unique_ptr<train::Observer>>(const run::World*)>;
void set_test_observers(TestObservers f);  // cli/cmd_train.cpp
// --precision and --graph as the trainer takes them, checked against the device.
train::TrainerOptions trainer_options(const Options& o, Device dev);
// After a checkpoint is loaded: the note, on stderr, that its vocabulary could not be checked
// (models::Session::unchecked_vocabulary), where that is so.
void note_unchecked_vocabulary(const std::string& unchecked);
// Where the plotting scripts are: $LOUPE_TOOLS_DIR, else the installed command's share/loupe
// (PREFIX/bin/loupe -> PREFIX/share/loupe), else the source tree's scripts/.
std::string tools_dir();
// Runs a plotting script from tools_dir() on a CSV; 0 when the PNG was written.
int plot(const std::string& name, const std::string& csv, const std::string& png, const std::string& title = "");
// What `loupe --version` prints: the version, how this loupe was built, where its scripts are.
std::string version_text();

}  // namespace loupe::cli
