// A training run end to end (docs/design.md, "The run"): the model and its recipe, the data and
// how it is fed, the data-parallel world, the epochs with their evaluation, the divergence guard,
// checkpoints, and one EpochReport per epoch with its advice, handed to the observers
// (train/observer.h). `loupe train`, `profile`, `bench` and `sweep` are configurations of it; a C++ user gets
// the same report from the same objects (README, "As a library").
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "instrument/monitor.h"
#include "instrument/report.h"
#include "models/registry.h"
#include "models/session.h"
#include "run/controls.h"
#include "run/data.h"
#include "train/lr_schedule.h"
#include "train/observer.h"
#include "train/trainer.h"

namespace loupe::loader { class DataLoader; }
namespace loupe::train {
class TraceWindow;
struct EpochHistory;
}  // namespace loupe::train

namespace loupe::run {

class World;

// How the training set reaches the step: resident on the device (batches gathered by index), or
// through the asynchronous loader (loader/loader.h) with these settings.
struct Feed {
  bool resident = false;
  int workers = 4, prefetch = 4;
  bool pin_memory = true, drop_last = false;
};

struct RunConfig {
  // What to train: a reference model (models::find_model), a model file (models::read_model_file),
  // or a model a C++ user wrote (a ModelInfo with its recipe and build_for).
  models::ModelInfo model;
  // Its data: request_for(model) with the choices a run may make (--data, --synthetic, ...).
  DataRequest data;
  // Set: this data set, loaded already, instead of `data` (the bench: one data set of a model for
  // all its combinations). It is used as it is: resident where it lies, or fed by the loader.
  std::shared_ptr<const Data> loaded;
  Feed feed;
  Device device = kCPU;
  train::TrainerOptions trainer;  // precision, graph mode; the loss is the recipe's
  int epochs = 0;                 // 0: the recipe's
  int64_t batch = 0;              // 0: the recipe's
  std::optional<double> lr;       // unset: the recipe's
  // The learning rate over the updates (train/lr_schedule.h; its initial rate is the run's),
  // evaluated on the device inside the step; unset: the recipe's (a model file's schedule), else
  // the recipe's constant rate and decay. `lr_schedule_text` names it in the header.
  std::optional<train::LrSchedule> lr_schedule;
  std::string lr_schedule_text;
  uint64_t seed = 1;
  // The CPU's threads (core/thread_pool.h). Set: exactly this many for the whole run, so that a
  // seed gives the same weights again. Unset: the pool's count, which a CPU run lowers while its
  // threads wait for cores other processes hold and raises again when one stands idle (run/threads.h),
  // unless LOUPE_NUM_THREADS set it.
  std::optional<int> threads;
  bool channels_last = false;
  int64_t max_steps = -1;         // >= 0: at most this many steps (and evaluation batches) per epoch
  std::string save;               // a checkpoint after every epoch ("": none)
  // save_best: `save` is written only at an epoch that betters the best so far by save_monitor
  // (run/controls.h: BestCheckpoint), so it holds the best epoch.
  bool save_best = false;
  Monitor save_monitor = Monitor::TestLoss;
  std::string resume;             // continue from this checkpoint ("": a fresh run)
  // Start from weights trained in Keras (models/keras_weights.h: a .h5, .weights.h5 or .keras
  // file) for a model read from its Keras file; "": a .keras model's own (ModelInfo::own_weights),
  // else the model's initialisation. Not with `resume`.
  std::string keras_weights;
  // At the end of a run that was not interrupted and did not diverge, the model (a model file's)
  // and its weights as Keras 3's .keras file at this path (models/keras_weights.h); "": none.
  std::string save_keras;
  instrument::MonitorOptions monitor;  // what is measured (precision and world are the run's)
  std::pair<int64_t, int64_t> profile_steps{-1, -1};  // cudaProfilerStart/Stop around global steps [a, b]
  std::string trace;                                  // a Chrome trace of those steps ("": none)
  std::optional<double> baseline;  // one GPU's samples/s at this batch: the world's scaling efficiency
  World* world = nullptr;          // a data-parallel rank's world (run/world.h); null: one process
  // Checked between steps: a stop from outside (a signal handler's flag); null: none.
  const std::atomic<bool>* interrupt = nullptr;
};

// What the run's header shows, for run_begin.
struct RunInfo {
  const models::ModelInfo* model = nullptr;
  int64_t parameters = 0;
  Device device = kCPU;
  Precision precision = Precision::FP32;
  int epochs = 0, first_epoch = 1;  // first_epoch > 1 after a resume
  int64_t batch = 0, steps_per_epoch = 0;
  double lr = 0;
  int world = 1;
  // The header's lines, labelled: {"model", "mnist_mlp: ..."}, {"device", ...}, {"data", ...},
  // {"input", ...}, {"recipe", ...}, {"step", ...}; what `loupe train` prints. An empty label: a
  // line of its own ("resumed from ...").
  std::vector<std::pair<std::string, std::string>> header;
  // Said once, on stderr by the command: a checkpoint whose vocabulary could not be checked.
  std::vector<std::string> warnings;
};

struct RunResult {
  enum class End { Finished, Stopped, Interrupted, Diverged };
  End end = End::Finished;
  // Stopped: the observer's reason; Diverged: what was seen, what was kept and what to try
  // (several lines); Interrupted: where it stopped.
  std::string message;
  int epochs_done = 0;
  double seconds = 0;
  // The figure of merit: test accuracy (higher is better), or a regression's test loss (lower).
  bool accuracy = true;
  double last = -1, best = -1;
  int best_epoch = 0;
  std::vector<instrument::EpochReport> reports;
};

class Run {
 public:
  // Checks the configuration, loads the data, builds the model (the memory check first), resumes
  // where asked and prepares the monitor: everything before the first step. Throws loupe::Error,
  // in one sentence, for what cannot run.
  explicit Run(RunConfig c);
  ~Run();
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;

  // Observers, called in the order added, after the run's own (the profiler range, the trace
  // window, the monitor). Shared, so that the caller may keep reading them.
  void add(std::shared_ptr<train::Observer> o);
  // The epochs (from the one after a resumed checkpoint's): training, evaluation, the report,
  // checkpoints, the controls' requests. What happened, with every epoch's report.
  RunResult run();

  const RunInfo& info() const { return info_; }
  const RunConfig& config() const { return c_; }
  const Data& data() const { return data_; }
  models::Session& session() { return *session_; }
  train::Trainer& trainer();
  instrument::EpochMonitor& monitor() { return *monitor_; }
  // The steps of one epoch, as the trainer runs them.
  int64_t epoch_steps() const;
  // One epoch's training alone, without evaluation or report (loupe profile's window).
  train::EpochStats train_epoch(int epoch);
  // A measured stretch (loupe tune's, run/tune.h): `steps` steps from the start of epoch e on, in
  // epochs as run() trains them (each next one prepared by the loader meanwhile; with `evaluate`,
  // each that ends within the stretch evaluated, as run() does), without the observers' epoch_end;
  // fewer where the run's epochs end first. One report: the time and host figures over its epochs'
  // training, the GPU's over the whole stretch (its evaluations too), the advice; its `epoch` is
  // the last one begun. Throws train::Interrupted.
  instrument::EpochReport measure(int e, int64_t steps, bool evaluate = false);
  // Stops the loader's workers (a run that ends early).
  void stop_feed();

 private:
  // Epoch e's training through the feed, at most max_steps steps (< 0: the whole epoch).
  train::EpochStats train_epoch(int e, int64_t max_steps);
  void load_input();
  void make_session();
  void install_schedule();
  void make_monitor();
  void make_header();
  std::optional<RunResult::End> epoch(int e, RunResult& result);
  void finish_epoch(train::EpochStats& st, int e, RunResult& result);
  void carry_out(int e);
  std::string divergence_message(const train::EpochStats& st, int e, const std::string* finite) const;
  void note(const std::string& line);

  RunConfig c_;
  Data data_;
  std::unique_ptr<loader::DataLoader> dl_;
  std::string pipeline_;
  std::string hard_lstms_;  // the LSTMs with hard_sigmoid gates (make_header), "" for none
  std::unique_ptr<models::Session> session_;
  std::unique_ptr<instrument::EpochMonitor> monitor_;
  std::vector<std::shared_ptr<train::Observer>> observers_;
  train::TraceWindow* trace_ = nullptr;
  RunInfo info_;
  std::unique_ptr<train::EpochHistory> history_;
  int saved_epoch_ = 0;
  bool scheduled_ = false;  // a schedule drives the rate (the report's lr is the current one)
  // Control::keep_weights: the weights and buffers (BatchNormalization's statistics) of kept_epoch_,
  // on the host.
  std::vector<Tensor> kept_;
  int kept_epoch_ = 0;
};

}  // namespace loupe::run
