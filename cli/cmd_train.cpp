// loupe train: a reference model with its recipe (the command line overrides it), one report per
// epoch, checkpoints, resume, Ctrl-C and divergence handled. The model, its memory format, the
// optimizer and what a resume restores are models/session.h's; the trace window is
// train/trace_window.h's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/cuda_runtime.h"
#include "core/error.h"
#include "core/knobs.h"
#include "core/nvtx.h"
#include "core/op_record.h"
#include "core/thread_pool.h"
#include "instrument/advice.h"
#include "instrument/busy_tracker.h"
#include "instrument/counters.h"
#include "instrument/graph_nodes.h"
#include "instrument/monitor.h"
#include "instrument/report_io.h"
#include "instrument/tensorboard.h"
#include "loader/loader.h"
#include "models/session.h"
#include "cli/bench.h"
#include "cli/commands.h"
#include "cli/data_parallel.h"
#include "cli/interrupt.h"
#include "dist/ddp.h"
#include "dist/launch.h"
#include "train/checkpoint_file.h"
#include "train/divergence.h"
#include "train/observers.h"
#include "train/profile_window.h"
#include "train/trace_window.h"

namespace loupe::cli {

namespace {

constexpr int64_t kEvalBatch = train::Trainer::kEvalBatch;

// A run whose loss became NaN or infinite, or whose finished epoch train/divergence.h judges
// diverged, stops with this status (1 is an error, 130 Ctrl-C).
constexpr int kExitDiverged = 3;

// What one `loupe train` holds from its start to its end.
struct Run {
  const Options& o;
  const models::ModelInfo info;  // a copy: --optimizer and --loss change its recipe
  int epochs = 0;
  int64_t batch = 0;
  Device dev = kCPU;
  train::TrainerOptions topt;
  Data data;
  std::unique_ptr<loader::DataLoader> dl;  // none when the training set is resident
  std::string pipeline;
  std::unique_ptr<models::Session> session;
  int saved_epoch = 0;
  // The figure of merit: test accuracy (higher is better), or a regression's test loss (lower).
  double best = -1, last = -1;
  int best_epoch = 0;
  train::EpochHistory history;  // the finished epochs, for judging the next (train/divergence.h)
  World* world = nullptr;  // a data-parallel rank's world (--gpus N), else null
  std::unique_ptr<CheckpointLock> save_lock;  // --save: this run's claim on the path
  std::vector<std::unique_ptr<train::Observer>> observers;  // the trainer's (attach_observers)
  train::TraceWindow* trace = nullptr;                      // --trace: one of them

  loader::Shard shard() const { return world ? loader::Shard{world->rank(), world->size()} : loader::Shard{}; }
  // The steps of one epoch, as the trainer runs them.
  int64_t epoch_steps() const {
    return dl ? train::Trainer::epoch_steps(*dl, o.max_steps)
              : train::Trainer::epoch_steps(data.train.size(), batch, o.max_steps, shard());
  }
};

// Divergence, said once with what is kept and what to try: a NaN or infinite loss seen during the
// epoch (st), or a finite one judged at its end (finite).
void report_divergence(const Run& run, const train::EpochStats& st, int epoch,
                       const train::EpochJudgment* finite = nullptr) {
  const std::string& save = run.o.save;
  const double lr = run.session->lr();
  std::string kept;
  if (!save.empty() && run.saved_epoch > 0)
    kept = "the checkpoint " + save + " (epoch " + std::to_string(run.saved_epoch) + ") is kept as it was";
  else if (!save.empty() && run.o.resume == save)
    kept = "the checkpoint " + save + " (epoch " + std::to_string(run.session->resumed_epochs()) + ") is kept as it was";
  else if (!save.empty())
    kept = "nothing was written to " + save;
  else
    kept = "no checkpoint was asked for (--save)";
  const std::string what =
      finite ? finite->what + ", so the run stopped after it (no checkpoint of it)"
             : "the loss became NaN or infinite by step " + std::to_string(st.diverged_step) + ", so the run stopped there";
  std::fprintf(stderr,
               "loupe: training diverged in epoch %d: %s; %s. To try:\n"
               "  - a lower learning rate: --lr %s (a tenth of this run's %s; the recipe's is %s)\n",
               epoch, what.c_str(), kept.c_str(), fmt_g(lr / 10).c_str(), fmt_g(lr).c_str(),
               fmt_g(run.info.recipe.lr).c_str());
  if (finite) return;  // the rest are causes of NaN and infinity
  if (*run.topt.precision == Precision::FP16)
    std::fprintf(stderr, "  - float16 overflows above 65504 in the forward pass, which loss scaling cannot help: "
                         "--precision bf16 (float32's range) or fp32\n");
  std::fprintf(stderr, "  - a NaN or infinite value in the input data does the same: check the data set\n");
}

// The data set and, unless it is resident, the loader that feeds it.
void load_input(Run& run) {
  const Options& o = run.o;
  run.data = load_data(data_request(o, run.info, run.info.recipe.augment, o.resident), run.dev);
  run.pipeline = "whole training set resident on " + run.dev.str() + ", batches gathered by index";
  if (o.resident || !run.data.host) return;  // no host set: a regression's targets stay resident
  loader::LoaderOptions lo;
  lo.batch = run.batch;
  lo.workers = o.workers;
  lo.prefetch = o.prefetch;
  lo.pin_memory = o.pin_memory;
  lo.drop_last = o.drop_last;
  lo.seed = o.seed;
  lo.device = run.dev;
  lo.shard = run.shard();
  run.dl = std::make_unique<loader::DataLoader>(run.data.host, lo);
  run.pipeline = "loader: " + std::to_string(lo.workers) + " workers, prefetch " + std::to_string(lo.prefetch) +
                 (run.dev.is_cuda() ? (lo.pin_memory ? ", pinned host slots" : ", pageable host slots") : "") +
                 (lo.drop_last ? ", drop-last" : "");
}

// The model on the device with its optimizer, continued from --resume when given.
void make_session(Run& run) {
  models::SessionOptions so;
  so.device = run.dev;
  so.trainer = run.topt;
  so.lr = run.o.lr.value_or(0);
  so.seed = run.o.seed;
  so.vocab = run.data.vocab;
  so.chars = run.data.chars;  // saved with the weights; a --resume whose table differs is refused
  so.words = run.data.words;
  so.channels_last = run.o.channels_last;
  so.batch = run.batch;  // the memory check counts the activations at it (models/memory.h)
  run.session = std::make_unique<models::Session>(run.info, so);
  const std::string& resume = run.o.resume;
  if (resume.empty()) return;
  train::CheckpointMeta m = run.session->resume(resume);
  run.session->trainer().broadcast_weights();  // data parallelism: rank 0's, though all read one file
  if (m.epoch >= run.epochs)
    throw Error("checkpoint '" + resume + "' has already completed " + std::to_string(m.epoch) + " of the " +
                std::to_string(run.epochs) + " epochs asked for: nothing to resume (--epochs N with N > " +
                std::to_string(m.epoch) + " trains further; loupe eval --checkpoint evaluates it)");
  std::printf("resumed from %s after epoch %d\n", resume.c_str(), m.epoch);
  note_unchecked_vocabulary(run.session->unchecked_vocabulary());
}

void print_header(const Run& run) {
  models::Session& s = *run.session;
  optim::Optimizer& opt = s.optimizer();
  const int64_t params = s.model().num_parameters(), keras = run.info.keras_parameters;
  std::printf("model   %s: %s, %s parameters%s\n", run.info.name.c_str(), run.info.description.c_str(),
              instrument::thousands(double(params)).c_str(),
              keras && keras != params
                  ? (" (Keras counts " + instrument::thousands(double(keras)) + ": " + run.info.keras_parameters_why + ")").c_str()
                  : "");
  std::printf("device  %s\n", device_description(run.dev).c_str());
  std::printf("data    %s\n", run.data.description.c_str());
  std::printf("input   %s\n", run.pipeline.c_str());
  if (run.o.max_steps >= 0) {  // a quick check: its evaluation is bounded too
    const int64_t n = run.data.test.size(), k = s.trainer().eval_samples(n, kEvalBatch, run.o.max_steps);
    if (k < n)
      std::printf("eval    the first %lld of %lld test samples (--max-steps %lld: at most that many batches of %lld%s)\n",
                  (long long)k, (long long)n, (long long)run.o.max_steps, (long long)kEvalBatch,
                  run.world ? " on each GPU" : "");
  }
  std::printf("recipe  %s lr %g%s, batch %lld, epochs %d, seed %llu, precision %s%s\n", opt.name().c_str(), s.lr(),
              opt.decay() > 0 ? (", decay " + fmt_g(opt.decay()) + " per update").c_str() : "", (long long)run.batch,
              run.epochs, (unsigned long long)s.seed(), precision_name(*run.topt.precision), s.channels_last() ? ", channels-last" : "");
  if (!run.info.recipe_source.empty())
    std::printf("        (%s)\n", run.info.recipe_source.c_str());
  if (run.world)
    std::printf("world   %d ranks (NCCL), batch %lld per GPU = %lld per step; gradients averaged during backward, "
                "in buckets cut at the first step where backward finishes them (the world line names them)\n",
                run.world->size(), (long long)run.batch, (long long)run.batch * run.world->size());
}

// --gpus N: rank 0's timeline samples every GPU of its host, labelled by rank. Local rank k runs on
// CUDA device k (dist::join_world's rule), and loupe's launcher and torchrun number a host's ranks
// in a row, so on rank 0's host it is rank k; other hosts' GPUs are not in the file.
void timeline_peers(const Run& run, instrument::MonitorOptions& m) {
  if (!run.world || run.world->rank() != 0 || m.timeline.empty() || !run.dev.is_cuda()) return;
  const dist::RankEnv env = dist::rank_env();
  m.timeline_rank = env.rank;
  for (int k = 0; k < env.local_world; ++k)
    if (k != env.local_rank) m.timeline_peers.push_back({k, env.rank - env.local_rank + k});
}

instrument::MonitorOptions monitor_options(const Run& run) {
  instrument::MonitorOptions m;
  m.nvml = run.o.nvml;
  m.busy = run.o.busy;
  m.precision = *run.topt.precision;
  m.price_per_hour = run.o.price_per_hour;
  m.nvml_period_ms = run.o.sample_ms;
  m.timeline = run.o.timeline;
  m.nccl = run.world != nullptr;
  timeline_peers(run, m);
  return m;
}

instrument::AdviceInputs advice_inputs(const Run& run) {
  instrument::AdviceInputs adv;
  adv.cuda = run.dev.is_cuda();
  adv.tensor_cores = run.dev.is_cuda() && cuda_runtime()->compute_capability() >= 70;  // Volta and later
  adv.precision = *run.topt.precision;
  adv.batch = run.batch;
  return adv;
}

// The epochs' reports, printed (each piece of advice once) and written to --metrics (appended), --csv
// and --tensorboard (with the per-step points).
struct Reporting {
  instrument::EpochMonitor monitor;
  instrument::AdviceInputs adv;
  instrument::EpochConsole console;
  std::unique_ptr<instrument::JsonlWriter> jsonl;
  std::unique_ptr<instrument::CsvWriter> csv;
  std::unique_ptr<instrument::TensorBoardWriter> tb;
  size_t gpu_samples_seen = 0;  // NVML's samples already given to tb
  bool tty = false;
  explicit Reporting(const Run& run) : monitor(run.dev, monitor_options(run)), adv(advice_inputs(run)) {
    if (run.o.has("metrics"))
      jsonl = std::make_unique<instrument::JsonlWriter>(run.o.metrics, instrument::JsonlWriter::Mode::Append,
                                                        "--metrics");
    if (run.o.has("csv")) csv = std::make_unique<instrument::CsvWriter>(run.o.csv, "--csv");
    if (run.o.has("tensorboard")) {
      tb = std::make_unique<instrument::TensorBoardWriter>(run.o.tensorboard);
      std::printf("events  %s (tensorboard --logdir %s)\n", tb->path().c_str(), run.o.tensorboard.c_str());
    }
    tty = !run.o.plain && instrument::ProgressBar::stdout_is_tty();
  }
};

// The progress bar where it is drawn, and TensorBoard's per-step points. Neither reads the
// device: the loss comes as the trainer has it.
class StepProgress final : public train::Observer {
 public:
  StepProgress(Run& run, Reporting& rep) : run_(run), rep_(rep) {}
  void epoch_begin(const train::StepInfo& info, train::Control&) override {
    t0_ = train::now_seconds();
    bar_.emplace(info.epoch, run_.epochs, info.epoch_steps, rep_.tty);
    if (rep_.tb) rep_.tb->begin_epoch(t0_);
  }
  void step_end(const train::StepInfo& info, train::Control&) override {
    if (!rep_.tty && !rep_.tb) return;
    const double now = train::now_seconds();
    bar_->update(info.epoch_step, now - t0_, info.samples, info.loss);
    if (rep_.tb) rep_.tb->step(info.step, info.samples, now, info.loss);
  }
  void steps_end(const train::StepInfo&) override {
    if (bar_) bar_->finish();
  }

 private:
  Run& run_;
  Reporting& rep_;
  double t0_ = 0;
  std::optional<instrument::ProgressBar> bar_;
};

// One epoch's training.
train::EpochStats run_training_epoch(Run& run, int e) {
  train::Trainer& trainer = run.session->trainer();
  return run.dl ? trainer.train_epoch(*run.dl, e, run.o.max_steps, e < run.epochs)
                : trainer.train_epoch(run.data.train, run.batch, run.session->seed(), e, run.o.max_steps);
}

// The epoch's report line (and records), and its checkpoint.
void finish_epoch(Run& run, Reporting& rep, train::EpochStats& st, int e) {
  if (train::has_accuracy(run.info.recipe.loss)) {
    run.last = st.test_acc;
    if (st.test_acc > run.best) { run.best = st.test_acc; run.best_epoch = e; }
  } else if (st.test_loss >= 0) {  // a regression: the lowest test loss
    run.last = st.test_loss;
    if (run.best < 0 || st.test_loss < run.best) { run.best = st.test_loss; run.best_epoch = e; }
  }
  instrument::EpochReport r = epoch_report(run.info.name, run.dev, run.batch, st, run.epochs);
  r.seed = run.session->seed();
  r.lr = run.session->lr();
  rep.monitor.fill(r);
  std::string world_line;  // a collective: every rank, here, once per epoch
  instrument::AdviceInputs adv = rep.adv;
  if (run.world) {
    // Resident data: the batch is a slice on the host, never a wait for the GPU.
    world_line = run.world->fill(r, *run.session->trainer().reducer(), run.o.baseline, !run.dl);
    adv.straggler = run.world->straggler();
  }
  r.advice = instrument::advise(r, adv);
  std::printf("%s\n", rep.console.lines(r).c_str());
  if (!world_line.empty()) std::printf("%s\n", world_line.c_str());
  std::fflush(stdout);
  CriticalSection writing;  // Ctrl-C now waits for these lines and the checkpoint
  if (rep.jsonl) rep.jsonl->write(r);
  if (rep.csv) rep.csv->write(r);
  if (rep.tb) {  // the GPU's samples so far, then the epoch (and flushed)
    const std::vector<instrument::GpuSample> g = rep.monitor.gpu_samples_from(rep.gpu_samples_seen);
    rep.gpu_samples_seen += g.size();
    rep.tb->gpu_samples(g, instrument::NvmlSampler::now());
    rep.tb->epoch(r);
  }
  if (!run.o.save.empty()) {
    NvtxRange ck("checkpoint");
    rep.monitor.mark("checkpoint");
    run.session->save(run.o.save, e);
    run.saved_epoch = e;
  }
}

// On a terminal, a line while the evaluation runs (a CPU's takes seconds): "epoch 2/5  evaluating
// 3/10 batches", redrawn at most ten times a second and cleared before anything else is printed.
class EvalProgress final : public train::Observer {
 public:
  EvalProgress(train::Trainer& t, bool tty, int epoch, int epochs) : t_(t), epoch_(epoch), epochs_(epochs) {
    if (tty) t_.observe(*this);
  }
  ~EvalProgress() override { finish(); }
  void eval_batch(int64_t done, int64_t total) override {
    const double now = train::now_seconds();
    if (done < total && now - last_ < 0.1) return;
    last_ = now;
    char buf[96];
    std::snprintf(buf, sizeof buf, "epoch %d/%d  evaluating %lld/%lld batches", epoch_, epochs_, (long long)done,
                  (long long)total);
    std::printf("\r%s", buf);
    std::fflush(stdout);
    width_ = std::strlen(buf);
  }
  void finish() {
    t_.unobserve(*this);
    if (width_) std::printf("\r%s\r", std::string(width_, ' ').c_str());
    width_ = 0;
  }

 private:
  train::Trainer& t_;
  int epoch_, epochs_;
  double last_ = -1;
  size_t width_ = 0;
};

// Epoch e: training, evaluation, report. Returns an exit status to stop with, or nothing to go on.
std::optional<int> run_epoch(Run& run, Reporting& rep, int e) {
  rep.monitor.mark("epoch_start");
  train::EpochStats st = run_training_epoch(run, e);
  if (st.interrupted) {
    std::printf("interrupted in epoch %d after %lld steps; stopping cleanly (no checkpoint of the partial epoch)\n",
                e, (long long)st.steps);
    std::fflush(stdout);  // before the abort below: the signal's watchdog may end the process during it
    if (run.dl) run.dl->stop();
    if (run.world) run.world->abort();  // the other ranks may be a step apart: no collective, no wait
    return interrupt_exit_status();
  }
  if (st.diverged) {
    if (run.dl) run.dl->stop();
    if (!run.world || run.world->rank() == 0) report_divergence(run, st, e);
    return kExitDiverged;
  }
  if (!st.graph_event.empty()) std::printf("step    %s\n", st.graph_event.c_str());
  if (!st.precision_event.empty()) std::printf("precision %s\n", st.precision_event.c_str());
  double t0 = train::now_seconds();
  rep.monitor.mark("eval_start");
  EvalProgress progress(run.session->trainer(), rep.tty, e, run.epochs);
  try {
    st.test_acc = run.session->trainer().evaluate(run.data.test, kEvalBatch, run.o.max_steps);
    st.test_loss = run.session->trainer().last_eval_loss();
    progress.finish();
  } catch (const train::Interrupted&) {
    progress.finish();
    std::printf("interrupted while evaluating epoch %d; stopping cleanly (no checkpoint of it)\n", e);
    std::fflush(stdout);
    if (run.dl) run.dl->stop();
    if (run.world) run.world->abort();
    return interrupt_exit_status();
  }
  st.eval_seconds = train::now_seconds() - t0;
  rep.monitor.mark("eval_end");
  // A finite divergence, judged before the report and the checkpoint: neither holds the epoch. Every
  // rank judges the world's loss and accuracy alike, so all stop here, none in a collective.
  const train::EpochJudgment j = train::judge_epoch(run.history, st.train_loss, st.test_acc,
                                                    run.session->trainer().classes(), run.data.test.size());
  if (j) {
    if (run.dl) run.dl->stop();
    if (!run.world || run.world->rank() == 0) report_divergence(run, st, e, &j);
    return kExitDiverged;
  }
  run.history.add(e, st.train_loss, st.test_acc);
  finish_epoch(run, rep, st, e);
  rep.monitor.mark("epoch_end");  // appends the epoch's samples to the timeline
  return std::nullopt;
}

// LOUPE_DDP_FAULT=R:S: rank R throws at step S of an epoch, for the tests of a failure on one rank
// (check_ddp): the error must be reported, naming the rank, and every rank must end within seconds.
class FaultInjection final : public train::Observer {
 public:
  explicit FaultInjection(int64_t step) : step_(step) {}
  void step_end(const train::StepInfo& info, train::Control&) override {
    if (info.epoch_step == step_) throw Error("a fault injected at step " + std::to_string(step_) + " (LOUPE_DDP_FAULT)");
  }

 private:
  int64_t step_;
};

std::unique_ptr<train::Observer> inject_fault(const Run& run) {
  const std::optional<std::string> f = knobs::text("LOUPE_DDP_FAULT");
  if (!f || !run.world) return nullptr;
  int rank = -1;
  long long step = -1;
  if (std::sscanf(f->c_str(), "%d:%lld", &rank, &step) != 2 || rank < 0 || step < 1)
    throw Error("LOUPE_DDP_FAULT takes RANK:STEP (e.g. 1:20), got '" + *f + "'");
  if (rank != run.world->rank()) return nullptr;
  return std::make_unique<FaultInjection>(step);
}

// LOUPE_DDP_DELAY=R:MS: rank R sleeps MS ms as each training step begins, for the tests of a
// straggler (check_ddp). The sleep comes before the batch is fetched, so the rank's data wait holds
// it as a slow input pipeline's would: resident data's wait is the host's own time, which judges the
// straggler without --busy too (after the step it would fall outside every measured part of it);
// with --busy its peers' GPUs show the wait in NCCL.
class DelayInjection final : public train::Observer {
 public:
  explicit DelayInjection(double ms) : ms_(ms) {}
  void fetch_begin(const train::StepInfo&) override {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms_));
  }

 private:
  double ms_;
};

std::unique_ptr<train::Observer> inject_delay(const Run& run) {
  const std::optional<std::string> d = knobs::text("LOUPE_DDP_DELAY");
  if (!d || !run.world) return nullptr;
  int rank = -1;
  double ms = -1;
  char extra = 0;
  // At most a second, so that Ctrl-C still stops a rank within one.
  if (std::sscanf(d->c_str(), "%d:%lf%c", &rank, &ms, &extra) != 2 || rank < 0 || !(ms > 0) || ms > 1000)
    throw Error("LOUPE_DDP_DELAY takes RANK:MS (e.g. 1:5; 0 < MS <= 1000), got '" + *d + "'");
  if (rank >= run.world->size())
    throw Error("LOUPE_DDP_DELAY names rank " + std::to_string(rank) + " of a world of " +
                std::to_string(run.world->size()) + " (ranks 0.." + std::to_string(run.world->size() - 1) + ")");
  if (rank != run.world->rank()) return nullptr;
  return std::make_unique<DelayInjection>(ms);
}

// The trainer's observers, in order: the profiler's range and the trace window, the monitor, the
// progress, the tests' fault and delay; and Ctrl-C.
void attach_observers(Run& run, Reporting& rep) {
  train::Trainer& trainer = run.session->trainer();
  trainer.control().watch(&interrupt_requested());
  const auto [first, last] = run.o.profile_steps;
  if (first > 0) run.observers.push_back(std::make_unique<train::ProfilerRange>(run.dev, first, last));
  if (!run.o.trace.empty()) {
    auto trace = std::make_unique<train::TraceWindow>(run.o.trace, rep.monitor, run.dev, first, last);
    run.trace = trace.get();
    run.observers.push_back(std::move(trace));
  }
  run.observers.push_back(std::make_unique<train::MonitorObserver>(rep.monitor));
  run.observers.push_back(std::make_unique<StepProgress>(run, rep));
  run.session->continue_global_step(run.epoch_steps());
  if (auto f = inject_fault(run)) run.observers.push_back(std::move(f));
  if (auto d = inject_delay(run)) run.observers.push_back(std::move(d));
  for (const auto& o : run.observers) trainer.observe(*o);
}

// Everything up to the first step: options against the model, the device, data, model, header.
void prepare(Run& run) {
  const Options& o = run.o;
  if (o.threads) set_num_threads(*o.threads);
  install_interrupt_handlers();  // before loading data: Ctrl-C stops within a second anywhere
  run.epochs = o.epochs.value_or(run.info.recipe.epochs);
  run.batch = o.batch.value_or(run.info.recipe.batch);
  if (!o.save.empty()) {  // before any data is loaded or step run
    check_checkpoint_destination(o.save);
    run.save_lock = std::make_unique<CheckpointLock>(o.save);
  }
  if (o.has("tensorboard") && !instrument::tensorboard_available()) throw Error(instrument::tensorboard_missing());
  run.dev = pick_device(o);
  run.topt = trainer_options(o, run.dev);
  if (run.world) run.topt.comm = &run.world->comm();
  load_input(run);
  make_session(run);
  print_header(run);
}

// The command that draws --timeline's CSV, titled with the model and the GPU (the CSV holds neither).
std::string timeline_plot_command(const Run& run) {
  auto quoted = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  const std::string csv = run.o.timeline;
  const std::string png = (csv.size() > 4 && csv.compare(csv.size() - 4, 4, ".csv") == 0 ? csv.substr(0, csv.size() - 4) : csv) + ".png";
  std::string cmd = "/usr/bin/python3 " + quoted(tools_dir() + "/plot_timeline.py") + " " + quoted(csv) + " " + quoted(png) +
                    " --model " + quoted(run.o.model);
  if (run.dev.is_cuda()) cmd += " --gpu " + quoted(cuda_runtime()->device_name());
  return cmd;
}

// A data-parallel rank: rank 0 prints and writes every file (its timeline samples its host's other
// GPUs too: timeline_peers); the others only append their records to --metrics (each with its
// rank) and say nothing unless something goes wrong.
Options rank_options(const Options& o, const World& w) {
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

}  // namespace

int cmd_train(const Options& o) {
  if (o.model.empty()) throw Error("loupe train needs a model name, e.g. `loupe train mnist_mlp` (see loupe models)");
  // The outputs, before any data is loaded or step run: one host's launcher checks them all (its
  // rank 0 writes them); on several hosts, each rank checks what it writes (rank_options).
  if (wants_ranks(o) && o.nnodes == 1) check_outputs(o);
  if (wants_ranks(o)) return launch_ranks(o);
  std::unique_ptr<World> world;
  if (is_rank()) world = std::make_unique<World>(o);  // before any other CUDA work: the rank's GPU
  const Options ro = world ? rank_options(o, *world) : o;
  check_outputs(ro);
  Run run{ro, model_with_flags(o.model, ro)};
  run.world = world.get();
  prepare(run);
  Reporting rep(run);
  train::Trainer& trainer = run.session->trainer();
  std::printf("step    %s\n", trainer.step_mode().c_str());
  if (std::string note = rep.monitor.timeline_note(); !note.empty()) {
    std::printf("timeline %s\n", note.c_str());
    std::printf("timeline draw it: %s\n", timeline_plot_command(run).c_str());
  }
  std::fflush(stdout);
  attach_observers(run, rep);
  const int64_t first_step = trainer.global_step();
  double t_start = train::now_seconds();
  std::optional<int> status;
  for (int e = run.session->resumed_epochs() + 1; e <= run.epochs && !status; ++e) status = run_epoch(run, rep, e);
  if (run.trace) run.trace->finish(trainer, trainer.global_step() - first_step);
  if (status) return *status;
  const std::string saved = o.save.empty() ? "" : "; checkpoint in " + o.save;
  if (run.best >= 0 && train::has_accuracy(run.info.recipe.loss))
    std::printf("done in %.1f s: final test accuracy %.2f%%, best %.2f%% (epoch %d)%s\n",
                train::now_seconds() - t_start, 100 * run.last, 100 * run.best, run.best_epoch, saved.c_str());
  else if (run.best >= 0)
    std::printf("done in %.1f s: final test loss %.4g, best %.4g (epoch %d)%s\n", train::now_seconds() - t_start,
                run.last, run.best, run.best_epoch, saved.c_str());
  return 0;
}

// --counters: the step after the window, its kernels replayed by CUPTI's range profiler (which
// serialises and re-runs them, so that step is never timed). CUPTI's activity tracing stops first.
struct CounterPass final : train::Observer {
  bool asked;
  Device dev;
  instrument::EpochMonitor& monitor;
  int64_t last;  // the window's last step
  std::unique_ptr<instrument::CounterSession> session;
  std::vector<instrument::KernelCounters> kernels;
  std::string why;
  CounterPass(bool a, Device d, instrument::EpochMonitor& m, int64_t l) : asked(a), dev(d), monitor(m), last(l) {
    if (asked && !dev.is_cuda()) why = "hardware counters are read from a GPU; this run is on the CPU";
  }
  void attach(train::Trainer& trainer) {
    if (asked && dev.is_cuda()) trainer.observe(*this);
  }
  void step_end(const train::StepInfo& info, train::Control&) override {
    try {
      if (info.step == last) begin();
      else if (info.step == last + 1 && session) {
        session->end();
        kernels = session->read();
      }
    } catch (const std::exception& e) {
      why = e.what();
      session.reset();
    }
  }
  void begin() {
    if (instrument::BusyTracker* bt = monitor.busy_tracker()) bt->stop();
    session = instrument::make_counter_session(&why);
    if (session) session->begin();
  }
  void fill(instrument::ProfileInput& in) {
    in.counters_asked = asked;
    in.counters = kernels;
    in.counters_why = kernels.empty() && why.empty() ? "the counter pass read no kernels" : why;
    if (session) in.counter_names = session->names();
  }
};

// loupe profile: `loupe train`'s setup for one epoch that ends with the window (steps 20..39 by
// default), eager, with CUPTI's activity records on a GPU; then the table (cli/cmd_profile.cpp).
namespace {
// --graph on|auto: the map from the graph's nodes to the ops that captured them, subscribed before
// the first step, and op records on from there, so that the capture (whichever step makes it)
// records its ops.
std::unique_ptr<instrument::GraphNodeMap> graph_node_map(const Run& run) {
  if (!run.dev.is_cuda()) throw Error("--graph profiles a CUDA graph: a GPU run (--device cuda)");
  std::string why;
  std::unique_ptr<instrument::GraphNodeMap> nodes = instrument::make_graph_node_map(&why);
  if (!nodes)
    throw Error("loupe profile --graph cannot tie a graph's kernels to their ops here: " + why +
                " (--graph off profiles the eager step)");
  op_records_enable(true);
  return nodes;
}
}  // namespace

int cmd_profile(const Options& o) {
  if (o.model.empty()) throw Error("loupe profile needs a model name, e.g. `loupe profile mnist_mlp` (see loupe models)");
  Options po = o;
  if (!o.has("profile-steps")) po.profile_steps = {20, 39};
  const bool graphed = o.has("graph") && o.graph != train::GraphMode::Off;
  if (graphed && o.counters)
    throw Error("--counters reads the kernels of an eager step; profile the graph without them, or --graph off");
  if (!graphed) po.graph = train::GraphMode::Off;
  po.busy = true;
  po.epochs = 1;
  po.plain = true;
  po.max_steps = po.profile_steps.second + (o.counters ? 1 : 0);  // the counter pass: one more step
  Run run{po, model_with_flags(o.model, po)};
  prepare(run);
  const int64_t steps = run.epoch_steps();
  if (steps < po.max_steps)
    throw Error("the profile window ends at step " + std::to_string(po.max_steps) + " but an epoch of " + o.model +
                " at batch " + std::to_string(run.batch) + " has " + std::to_string(steps) +
                " steps: --profile-steps A:B with B <= " + std::to_string(steps - (o.counters ? 1 : 0)) +
                ", or a smaller --batch");
  instrument::Ceilings ceilings = measure_ceilings(run.dev, *run.topt.precision);
  Reporting rep(run);
  if (run.dev.is_cuda() && !rep.monitor.busy_tracker())
    throw Error("loupe profile times a GPU's kernels with CUPTI, which cannot start here: " + rep.monitor.busy_why());
  train::Trainer& trainer = run.session->trainer();
  trainer.control().watch(&interrupt_requested());
  const auto [first, last] = po.profile_steps;
  train::ProfilerRange range(run.dev, first, last);
  train::ProfileWindow window(rep.monitor, run.dev, first, last);
  train::MonitorObserver timing(rep.monitor);
  StepProgress progress(run, rep);
  for (train::Observer* ob : std::initializer_list<train::Observer*>{&range, &window, &timing, &progress})
    trainer.observe(*ob);
  CounterPass counters(o.counters, run.dev, rep.monitor, po.profile_steps.second);
  counters.attach(trainer);
  std::unique_ptr<instrument::GraphNodeMap> nodes = graphed ? graph_node_map(run) : nullptr;
  train::EpochStats st = run_training_epoch(run, 1);
  op_records_enable(false);
  if (run.dl) run.dl->stop();
  if (st.interrupted) return interrupt_exit_status();
  if (!window.complete()) throw Error("the training epoch ended before the profile window closed");
  instrument::ProfileInput in = window.input();
  in.ceilings = ceilings;
  if (nodes) {
    in.graph_replays = instrument::attribute_graph_nodes(in.activity, *nodes);
    in.ops = instrument::graph_window_ops(std::move(in.ops), in.activity, po.profile_steps.first,
                                          po.profile_steps.second, in.graph_replays);
    // The trainer counts each replay's FLOPs outside any op scope (the capture's count, again), so
    // what lies outside the rows is the count less the rows' (the capture's records, per replay).
    double rows = 0;
    for (const OpRecord& r : in.ops) rows += r.flops;
    in.unscoped_flops = std::max(0.0, in.counted_flops - rows);
    if (in.graph_replays == 0) std::printf("note    no step of the window ran as a graph: %s\n", trainer.step_mode().c_str());
  }
  counters.fill(in);
  return report_profile(po, instrument::build_profile(in));
}

}  // namespace loupe::cli
