// One interface for everything that watches or steers training from outside the step
// (docs/design.md, "The run"): the epoch monitor, the progress bar, the report printer and the
// files it writes, the profile and trace windows, the training controls (schedules, early
// stopping, the best checkpoint) and a C++ user's own code. The trainer calls the step and epoch
// points, in the order the observers were added; the run (run/run.h) calls run_begin, epoch_end
// and run_end.
//
// What an observer may do: read what it is given, and act through Control (stop the run, change
// the learning rate, save, keep and restore the weights). What it may not: touch the step itself
// (its tensors, the graph, the device's sums): device work inside the step is a StepPart
// (train/step_parts.h). Step points run on the host between steps and must not wait for the
// device; the running loss they see arrives without a wait (the trainer's loss peek).
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loupe::instrument { struct EpochReport; }
namespace loupe::run {
struct RunInfo;
struct RunResult;
}  // namespace loupe::run

namespace loupe::train {

// What an epoch's steps did, from the trainer's one read-back at the epoch's end.
struct EpochStats {
  int epoch = 0;
  int64_t steps = 0, samples = 0;
  bool interrupted = false;  // a stop (Control::stopping) ended the epoch early
  // The training loss became NaN or infinite (seen in the running sum, read without waiting for
  // the device), or the weights did by the epoch's end: the run diverged. With
  // TrainerOptions::stop_on_divergence the epoch ended at the step where it was seen.
  bool diverged = false;
  int64_t diverged_step = 0;  // the global step by which it was seen
  double train_loss = 0, train_acc = 0, test_acc = -1;
  double test_loss = -1;  // the mean loss over the test samples evaluated (the recipe's loss); -1: none
  double train_seconds = 0, eval_seconds = 0;
  std::optional<double> loss_scale;  // fp16: the GradScaler's scale at the epoch's end
  int64_t skipped_steps = 0;         // and the steps it skipped in this epoch
  int64_t graph_steps = 0;           // steps replayed from the captured CUDA graph
  int graph_kernels = 0;             // kernels in that graph (0: none)
  std::string graph_event;           // "CUDA graph captured at step 3 (58 kernels)", or why a capture failed
  std::string precision_event;       // fp16/bf16 where nothing computed in 16 bits: what was dropped
  std::string graph_why;             // why full batches ran eagerly ("" when they went through a graph)
  double samples_per_sec() const { return train_seconds > 0 ? double(samples) / train_seconds : 0; }
};

// Where a step stands, as the step points see it.
struct StepInfo {
  int epoch = 0;
  int64_t step = 0;          // global, counted from 1 across epochs (and across a resume)
  int64_t epoch_step = 0;    // in this epoch, from 1
  int64_t epoch_steps = 0;   // the epoch's steps
  int64_t samples = 0;       // this process's samples in the epoch so far (after a step: its batch included)
  // The running mean training loss of the epoch when a recent one has arrived from the device (read
  // about every 0.2 s through pinned memory and an event, never by waiting for the GPU).
  std::optional<double> loss;
  double flops = 0;          // step_issued and after: the step's FLOPs, counted on the host
  // batch_ready and after: of the fetch's wait, the time the loader's slot was still held by the
  // GPU (the host ahead of a busy GPU: back-pressure, not data; loader::Batch::gpu_wait_ms).
  double data_gpu_wait_ms = 0;
};

// What observers may do to the run. Requests are carried out by whoever drives the run: a stop
// before the next step (or evaluation batch), a learning rate from the next update on, saves and
// weight copies at the epoch's end, after every observer has seen the report.
class Control {
 public:
  // Ends the run: the epoch stops before its next step. `why` is said where the run ends ("" for
  // an outside stop such as Ctrl-C, see watch()).
  void stop(const std::string& why);
  // A flag set from outside (a signal handler): a stop when it is set.
  void watch(const std::atomic<bool>* flag) { external_ = flag; }
  bool stopping() const { return stop_.load() || (external_ && external_->load()); }
  // Whether an observer (not the outside flag) stopped the run, and why.
  bool stopped_by_observer() const { return stop_.load(); }
  const std::string& stop_reason() const { return why_; }

  // The rate of every update from the next one on; `why` goes in the report ("plateau, 3 epochs").
  void set_lr(double lr, const std::string& why);
  // A checkpoint of the model as it is at this epoch's end (after the report).
  void save(const std::string& path);
  // A copy of the weights as they are now (after this epoch), and at the run's end those weights
  // put back (early stopping's best epoch).
  void keep_weights();
  void restore_weights();

  // For whoever carries the requests out: each is handed over once.
  struct LrChange {
    double lr;
    std::string why;
  };
  std::optional<LrChange> take_lr();
  std::vector<std::string> take_saves();
  bool take_keep();
  bool restore_asked() const { return restore_; }
  // What the controls did since the last call ("lr 0.001 -> 0.0005 (plateau, 3 epochs)"), for the
  // report.
  std::vector<std::string> take_notes();
  void note(const std::string& what) { notes_.push_back(what); }

 private:
  std::atomic<bool> stop_{false};
  const std::atomic<bool>* external_ = nullptr;
  std::string why_;
  std::optional<LrChange> lr_;
  std::vector<std::string> saves_, notes_;
  bool keep_ = false, restore_ = false;
};

class Observer {
 public:
  virtual ~Observer() = default;
  // The run (run/run.h): before the first epoch, with what the header shows; at its end.
  virtual void run_begin(const run::RunInfo& info) { (void)info; }
  virtual void run_end(const run::RunResult& result) { (void)result; }
  // A line the run says as it goes: a step or precision event, a learning-rate change, a stop.
  virtual void note(const std::string& line) { (void)line; }
  // The trainer's points, in order. epoch_begin: before the epoch's first step (info: the epoch,
  // its steps, the last global step). step_begin: before the step. fetch_begin: its batch is about
  // to be fetched (time spent here counts as the step's data wait). batch_ready: fetched.
  // step_issued: the step is issued (measurement only: the device may still be running it).
  // step_end: after it, the place to steer. steps_end: after the epoch's last step, before its one
  // read-back. train_end: the epoch's training figures read back (st), before the evaluation.
  virtual void epoch_begin(const StepInfo& info, Control& c) { (void)info, (void)c; }
  virtual void step_begin(const StepInfo& info, Control& c) { (void)info, (void)c; }
  virtual void fetch_begin(const StepInfo& info) { (void)info; }
  virtual void batch_ready(const StepInfo& info) { (void)info; }
  virtual void step_issued(const StepInfo& info) { (void)info; }
  virtual void step_end(const StepInfo& info, Control& c) { (void)info, (void)c; }
  virtual void steps_end(const StepInfo& info) { (void)info; }
  virtual void train_end(const EpochStats& st) { (void)st; }
  // After each evaluation batch is issued: batches done and in all (this process's).
  virtual void eval_batch(int64_t done, int64_t total) { (void)done, (void)total; }
  // The run: the epoch's report, whole (measurements, evaluation, advice), after its evaluation.
  virtual void epoch_end(const instrument::EpochReport& r, Control& c) { (void)r, (void)c; }
};

}  // namespace loupe::train
