// loupe train: a model with its recipe (the command line overrides it) as a run (run/run.h): the
// options become a RunConfig, the report's observers are added by flag, and the run's end becomes
// the exit status. Checkpoints, resume, Ctrl-C and divergence are the run's.
#include <cstdio>
#include <memory>
#include <string>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "instrument/tensorboard.h"
#include "cli/commands.h"
#include "cli/data_parallel.h"
#include "parallel/launch.h"
#include "run/controls.h"
#include "run/interrupt.h"
#include "run/report.h"
#include "run/run.h"
#include "run/target.h"
#include "run/world.h"
#include "train/checkpoint_file.h"
#include "train/lr_schedule.h"

namespace loupe::cli {

namespace {

// A run whose loss became NaN or infinite, or whose finished epoch train/divergence.h judges
// diverged, stops with this status (1 is an error, 130 Ctrl-C).
constexpr int kExitDiverged = 3;

TestObservers& test_observers() {
  static TestObservers f;  // empty in the product: only a test binary sets it, before main
  return f;
}

// --timeline: the line under the header with the command that draws the CSV, titled with the
// model and the GPU (the CSV holds neither).
class TimelineCommand final : public train::Observer {
 public:
  TimelineCommand(const Options& o, Device dev) : o_(o), dev_(dev) {}
  void run_begin(const run::RunInfo& info) override {
    for (const auto& [label, text] : info.header)
      if (label == "timeline") std::printf("timeline draw it: %s\n", command().c_str());
  }

 private:
  std::string command() const {
    auto quoted = [](const std::string& s) {
      std::string q = "'";
      for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      return q + "'";
    };
    const std::string csv = o_.timeline;
    const std::string png =
        (csv.size() > 4 && csv.compare(csv.size() - 4, 4, ".csv") == 0 ? csv.substr(0, csv.size() - 4) : csv) + ".png";
    std::string cmd = "/usr/bin/python3 " + quoted(tools_dir() + "/plot_timeline.py") + " " + quoted(csv) + " " +
                      quoted(png) + " --model " + quoted(o_.model);
    if (dev_.is_cuda()) cmd += " --gpu " + quoted(cuda_runtime()->device_name());
    return cmd;
  }
  const Options& o_;
  Device dev_;
};

// A data-parallel rank: rank 0 prints and writes every file (its timeline samples its host's other
// GPUs too: timeline_peers); the others only append their records to --metrics (each with its
// rank) and say nothing unless something goes wrong.
Options rank_options(const Options& o, const run::World& w) {
  Options r = o;
  if (w.rank() == 0) return r;
  r.save.clear();
  r.csv.clear();
  r.trace.clear();
  r.timeline.clear();
  r.given.erase("csv");
  r.given.erase("tensorboard");
  r.plain = true;
  if (!std::freopen("/dev/null", "w", stdout)) throw Error("cannot silence rank " + std::to_string(w.rank()));
  return r;
}

// What the run prints at its end: the figure of merit, best epoch, where the checkpoint is.
void print_done(const run::RunResult& r, const std::string& save) {
  const std::string saved = save.empty() ? "" : "; checkpoint in " + save;
  if (r.best < 0) return;
  if (r.accuracy)
    std::printf("done in %.1f s: final test accuracy %.2f%%, best %.2f%% (epoch %d)%s\n", r.seconds, 100 * r.last,
                100 * r.best, r.best_epoch, saved.c_str());
  else
    std::printf("done in %.1f s: final test loss %.4g, best %.4g (epoch %d)%s\n", r.seconds, r.last, r.best,
                r.best_epoch, saved.c_str());
}

// The run's warnings, said once, then the report's observers, by flag: the progress line, the
// printer, TensorBoard, the records, the training controls (run/controls.h), and a test build's own
// (set_test_observers).
void add_observers(run::Run& run, const Options& o) {
  for (const std::string& w : run.info().warnings) std::fprintf(stderr, "loupe: note: %s\n", w.c_str());
  run.add(std::make_shared<run::ProgressLine>(!o.plain && instrument::ProgressBar::stdout_is_tty()));
  run.add(std::make_shared<run::ReportPrinter>());
  if (!o.timeline.empty()) run.add(std::make_shared<TimelineCommand>(o, run.config().device));
  if (o.has("tensorboard")) run.add(std::make_shared<run::TensorBoardEvents>(o.tensorboard, run.monitor()));
  if (o.has("metrics"))
    run.add(std::make_shared<run::RecordFile>(o.metrics, run::RecordFile::Format::JsonLines, "--metrics"));
  if (o.has("csv")) run.add(std::make_shared<run::RecordFile>(o.csv, run::RecordFile::Format::Csv, "--csv"));
  if (train::is_plateau(o.lr_schedule)) run.add(std::make_shared<run::LrPlateau>(train::parse_plateau(o.lr_schedule)));
  if (!o.early_stop.empty()) run.add(std::make_shared<run::EarlyStopping>(run::parse_early_stop(o.early_stop)));
  if (test_observers())
    for (std::unique_ptr<train::Observer>& t : test_observers()(run.config().world)) run.add(std::move(t));
}

// --target-acc: the runs of --seeds seeds, each stopped at the target (run/target.h), then the
// summary printed and, with --metrics, appended as its last record.
int train_to_target(const Options& o, const run::RunConfig& c) {
  int k = 0;
  auto observe = [&](run::Run& run) {
    if (o.seeds > 1) std::printf("%sseed %llu (%d of %d)\n", k ? "\n" : "", (unsigned long long)run.config().seed, k + 1, o.seeds);
    ++k;
    add_observers(run, o);
  };
  run::RunResult stopped;
  const run::TargetSummary s = run::time_to_accuracy(c, *o.target_acc, o.seeds, observe, &stopped);
  if (stopped.end == run::RunResult::End::Interrupted) return run::interrupt_exit_status();
  if (stopped.end == run::RunResult::End::Diverged) {
    std::fprintf(stderr, "loupe: %s\n", stopped.message.c_str());
    return kExitDiverged;
  }
  std::printf("%s\n", run::summary_line(s).c_str());
  if (o.has("metrics")) run::append_summary(o.metrics, s);
  return 0;
}

}  // namespace

void set_test_observers(TestObservers f) { test_observers() = std::move(f); }

run::RunConfig run_config(const Options& o, const models::ModelInfo& info, run::World* world) {
  run::RunConfig c;
  c.model = info;
  c.data = data_request(o, info, info.recipe.augment, o.resident);
  c.feed = {o.resident, o.workers, o.prefetch, o.pin_memory, o.drop_last};
  c.device = pick_device(o);
  c.trainer = trainer_options(o, c.device);
  c.epochs = o.epochs.value_or(0);
  c.batch = o.batch.empty() ? 0 : o.batch[0];
  c.lr = o.lr;
  c.threads = o.threads;
  const bool plateau = train::is_plateau(o.lr_schedule);
  if (!o.lr_schedule.empty() && !plateau) {
    c.lr_schedule = train::parse_lr_schedule(o.lr_schedule, o.lr.value_or(info.recipe.lr));
    c.lr_schedule_text = o.lr_schedule;
  }
  if (plateau && info.recipe.schedule.kind != train::LrSchedule::Kind::Constant)
    throw Error("--lr-schedule " + o.lr_schedule + ": " + info.name + "'s optimizer has its own schedule (" +
                info.recipe_source + "); a plateau lowers a constant rate, as in Keras (--optimizer NAME gives a "
                "constant one)");
  c.seed = o.seed;
  c.channels_last = o.channels_last;
  c.max_steps = o.max_steps;
  c.save = o.save;
  c.save_best = o.save_best;
  if (!o.early_stop.empty()) c.save_monitor = run::parse_early_stop(o.early_stop).monitor;
  c.resume = o.resume;
  c.keras_weights = o.weights;
  c.save_keras = o.save_keras;
  c.monitor.nvml = o.nvml;
  c.monitor.busy = o.busy;
  c.monitor.price_per_hour = o.price_per_hour.empty() ? -1 : o.price_per_hour[0];
  c.monitor.nvml_period_ms = o.sample_ms;
  c.monitor.timeline = o.timeline;
  if (o.profile_steps.first > 0) c.profile_steps = o.profile_steps;
  c.trace = o.trace;
  c.baseline = o.baseline;
  c.world = world;
  c.interrupt = &run::interrupt_requested();
  return c;
}

int cmd_train(const Options& o) {
  if (o.model.empty()) throw Error("loupe train needs a model name, e.g. `loupe train mnist_mlp` (see loupe models)");
  // The outputs, before any data is loaded or step run: one host's launcher checks them all (its
  // rank 0 writes them); on several hosts, each rank checks what it writes (rank_options).
  if (wants_ranks(o) && o.nnodes == 1) check_outputs(o);
  if (wants_ranks(o)) return launch_ranks(o);
  std::unique_ptr<run::World> world;
  if (is_rank()) {  // before any other CUDA work: the rank's GPU
    if (o.device == "cpu") {  // name what made it a rank: srun's variables, or WORLD_SIZE
      const std::string vars = parallel::world_variables();
      throw Error("a data-parallel rank (" + vars + (vars.find(" and ") == std::string::npos ? " is" : " are") +
                  " set) trains on a GPU, not --device cpu");
    }
    world = std::make_unique<run::World>(&run::interrupt_requested());
  }
  const Options ro = world ? rank_options(o, *world) : o;
  check_outputs(ro);
  run::install_interrupt_handlers();  // before loading data: Ctrl-C stops within a second anywhere
  std::unique_ptr<CheckpointLock> save_lock;
  if (!ro.save.empty()) {  // before any data is loaded or step run
    check_checkpoint_destination(ro.save);
    save_lock = std::make_unique<CheckpointLock>(ro.save);
  }
  if (ro.has("tensorboard") && !instrument::tensorboard_available()) throw Error(instrument::tensorboard_missing());
  if (ro.target_acc) return train_to_target(ro, run_config(ro, model_with_flags(o.model, ro), world.get()));
  run::Run run(run_config(ro, model_with_flags(o.model, ro), world.get()));
  add_observers(run, ro);
  const run::RunResult r = run.run();
  switch (r.end) {
    case run::RunResult::End::Interrupted: return run::interrupt_exit_status();
    case run::RunResult::End::Diverged:
      if (!world || world->rank() == 0) std::fprintf(stderr, "loupe: %s\n", r.message.c_str());
      return kExitDiverged;
    case run::RunResult::End::Stopped:  // said by the run, with the weights it restored
    case run::RunResult::End::Finished: break;
  }
  print_done(r, ro.save);
  return 0;
}

}  // namespace loupe::cli
